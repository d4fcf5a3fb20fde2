"""The OS sandbox around the Bash tool: bubblewrap (`bwrap`) on Linux (docs/design.md §9.4).

Owns `SandboxPolicy` (what the settings ask for), `Sandbox` (what this machine can do, found once
at start by `detect_sandbox`) and the bwrap argument list one command runs under (`Sandbox.wrap`).

What a sandboxed command sees:
- the whole filesystem read-only (`--ro-bind / /`, submounts included), a `/dev` and `/proc` of its
  own, and an empty private `/tmp`;
- the user's home replaced by an empty tmpfs (writable, thrown away after the call), except the
  paths the settings list in `homeReadable`, bound back read-only;
- the workspace read-write, except its protected paths (`PROTECTED_FILES`, `PROTECTED_DIRS`:
  git's config, hooks and `commondir`, `.foldline`, `.claude`), the top-level entries
  `permissions.is_protected_path` names (`.ssh`, `.npmrc`, shell rc files) and what an Edit/Write
  deny or ask rule names, bound read-only over themselves. `.git` itself is bound (read-write) over itself, so
  it is a mount point: it cannot be renamed away and replaced by a repository the command wrote. A
  protected directory that does not exist gets an empty read-only one for the call, and a
  repository without a `commondir` one that names its own git directory (removed after, when still
  as made), so the command cannot create them either. Not covered: a nested repository the command
  writes elsewhere in the workspace (like any code it writes, it runs only if someone runs it);
- what a Read deny rule names hidden: `/dev/null` over a file (bound without device access, so
  opening it fails), an empty read-only tmpfs over a directory; `/run` replaced by an empty tmpfs,
  for the daemons' sockets in it (a socket elsewhere on the file system can still be connected
  to: seccomp would be needed for that);
- no network unless `network: true`: all or nothing (`--unshare-net` leaves only a loopback of its
  own, so even a listener on the host's 127.0.0.1 is out of reach). There is no per-host proxy;
- no capabilities (`--cap-drop ALL`: root inside could otherwise remount the read-only binds
  writable), its own pid and IPC namespaces, killed when foldline dies (`--die-with-parent`).

Invariants:
- The sandbox is decided once per session: `detect_sandbox` runs the same bwrap flags on `true`
  and keeps the answer, so what the start-up line says is what every call gets.
- Nothing a checked-in project settings file says can loosen the sandbox (see `settings.py`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from foldline.config import ToolsConfig
from foldline.tools._glob import glob_regex, literal_prefix
from foldline.tools.base import ToolContext
from foldline.tools.permissions import PermissionRules, _anchor, is_protected_path

__all__ = ["Sandbox", "SandboxMode", "SandboxPolicy", "detect_sandbox", "rule_patterns"]

SandboxMode = Literal["auto", "required", "off"]
"""`auto`: sandbox Bash where bubblewrap works, else run with the permission checker alone (said
once at start); `required`: where it does not work, refuse to run Bash; `off`: never sandbox."""

PROTECTED_FILES = (".git/config", ".git/commondir", ".git/config.worktree")
PROTECTED_DIRS = (".git/hooks", ".git/modules", ".foldline", ".claude")
"""Bound read-only inside the workspace (those present): what would run code or change rules
outside the sandbox later: git's config and hooks, the submodules' own (`.git/modules`), a
`commondir` (it moves the whole repository, config and hooks included, to a folder the command
wrote), foldline's and Claude Code's settings."""
_MADE_DIRS = (".git", ".git/hooks", ".foldline", ".claude")
"""Made (empty) for the call when missing, so that the command cannot create them either."""
_SAME_DIR = ".\n"
"""A `commondir` naming the git directory itself: to git the same as none."""

_ESCAPED = re.compile(r"\\(.)", re.DOTALL)
_WILDCARD = re.compile(r"[*?\[{]")
_BASE_FLAGS = (
    "--ro-bind", "/", "/",
    "--dev", "/dev",
    "--proc", "/proc",
    "--unshare-pid",
    "--unshare-ipc",
    "--die-with-parent",
    "--cap-drop", "ALL",
)  # fmt: skip


@dataclass(frozen=True)
class SandboxPolicy:
    """The `sandbox` settings: `"sandbox": "required"`, or an object with these keys."""

    mode: SandboxMode = "auto"
    network: bool = False
    """All or nothing: True gives the command the host's network."""
    home_readable: tuple[str, ...] = ()
    """Paths under the home directory (`~/.cargo`, `~/.npmrc`) bound read-only into the hidden home."""
    auto_allow: bool = True
    """A sandboxed command whose only reason to ask is one the sandbox contains runs without asking."""
    bwrap: str = "bwrap"
    """The bubblewrap binary: a name looked up on PATH, or a path."""


@dataclass(frozen=True)
class _Mount:
    """One bwrap mount operation; `dest` orders them (a parent before what lies under it)."""

    flag: str
    dest: Path
    source: Path | None = None

    def args(self) -> list[str]:
        if self.flag in ("--tmpfs", "--remount-ro"):
            return [self.flag, str(self.dest)]
        return [self.flag, str(self.source or self.dest), str(self.dest)]


@dataclass(frozen=True)
class Sandbox:
    """What Bash runs under in this session (`detect_sandbox` builds it)."""

    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    bwrap: str | None = None
    """The working bwrap binary; None when the sandbox is off or cannot run here."""
    problem: str | None = None
    """Why it cannot run here (no bubblewrap, no user namespaces), when it cannot."""
    read_only: tuple[str, ...] = ()
    """Absolute path patterns bound read-only besides `PROTECTED_*` (`rule_patterns`)."""
    hidden: tuple[str, ...] = ()
    """Absolute path patterns hidden from the command (`rule_patterns`)."""
    scan_limit: int = ToolsConfig().sandbox_rule_paths_limit

    @property
    def active(self) -> bool:
        """Bash runs inside bwrap."""
        return self.bwrap is not None

    @property
    def refuses(self) -> bool:
        """The settings require the sandbox and it cannot run here: Bash is refused."""
        return self.policy.mode == "required" and self.bwrap is None

    @property
    def auto_allows(self) -> bool:
        """A contained command may run without asking (see `permissions.check_permission`). Not
        with the network on: what the checker cannot read could then send the workspace away."""
        return self.active and self.policy.auto_allow and not self.policy.network

    def notice(self) -> str | None:
        """The one line said at start when Bash is not sandboxed although the settings allow it."""
        if self.active or self.policy.mode == "off":
            return None
        if self.policy.mode == "required":
            return f"the Bash sandbox is required but cannot run here ({self.problem}); Bash is refused"
        return (
            f"the Bash sandbox cannot run here ({self.problem}); Bash runs with the permission checker alone"
        )

    @contextmanager
    def wrap(self, argv: Sequence[str], workspace: Path, cwd: Path) -> Iterator[list[str]]:
        """The bwrap command line that runs `argv` in `cwd` inside the sandbox; on leaving, the
        mount points made for missing protected paths are removed again (when still as made)."""
        assert self.bwrap is not None, "wrap() needs an active sandbox"
        outer = _outer_git(workspace)  # before the empty mount points exist
        made = _make_missing(workspace)
        try:
            mounts = self._mounts(workspace)
            # temporary files go to the private /tmp, wherever TMPDIR pointed (it may be read-only here)
            args = [self.bwrap, *_BASE_FLAGS, "--setenv", "TMPDIR", "/tmp"]
            if not self.policy.network:
                args.append("--unshare-net")
            if outer:
                mounts += [_Mount("--ro-bind", path) for path in outer]
                # the repository's root lies past the workspace's mount: let git look there
                args += ["--setenv", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "1"]
            # a parent is mounted before what lies under it; ties keep list order
            for mount in sorted(mounts, key=lambda m: len(m.dest.parts)):
                args += mount.args()
            yield [*args, "--chdir", str(cwd), "--", *argv]
        finally:
            for path in reversed(made):
                _unmake(path)

    def _mounts(self, workspace: Path) -> list[_Mount]:
        # /run holds the sockets of local daemons (Docker, D-Bus, PostgreSQL): a read-only file
        # system does not stop a connect(), so they are hidden like /tmp
        mounts = [_Mount("--tmpfs", Path("/tmp")), _Mount("--tmpfs", Path("/run"))]
        resolver = Path("/run/systemd/resolve")
        if self.policy.network and resolver.is_dir():  # /etc/resolv.conf often points in there
            mounts.append(_Mount("--ro-bind", resolver))
        home = Path(os.path.realpath(Path.home()))
        if home != Path("/"):  # a service account's `/` is no private folder to hide
            # mounted shallowest first: a workspace inside the home is bound back over it
            mounts.append(_Mount("--tmpfs", home))
            for raw in self.policy.home_readable:
                path = Path(os.path.realpath(os.path.expanduser(raw)))
                if path.is_relative_to(home) and path.exists():
                    mounts.append(_Mount("--ro-bind", path))
        mounts.append(_Mount("--bind", workspace))
        git = workspace / ".git"
        if git.is_dir() and not git.is_symlink():
            mounts.append(_Mount("--bind", git))  # a mount point cannot be renamed away
        elif git.exists():
            mounts.append(_Mount("--ro-bind", git))  # a worktree's `.git` file, or a symlink
        for rel in (*PROTECTED_FILES, *PROTECTED_DIRS):
            path = workspace / rel
            if path.exists() or path.is_symlink():
                mounts.append(_Mount("--ro-bind", path))
        # and what the checker asks before writing (`.ssh`, `.npmrc`, shell rc files), at the top
        mounts += [_Mount("--ro-bind", p) for p in _top_level_protected(workspace)]
        for path in self._expand(self.read_only, workspace, hide=False):
            mounts.append(_Mount("--ro-bind", path))
        for path in self._expand(self.hidden, workspace, hide=True):
            if path.is_dir():
                mounts += [_Mount("--tmpfs", path), _Mount("--remount-ro", path)]
            else:
                mounts.append(_Mount("--ro-bind", path, Path("/dev/null")))
        return mounts

    def _expand(self, patterns: tuple[str, ...], workspace: Path, *, hide: bool) -> list[Path]:
        """The existing paths `patterns` (absolute, in the rules' glob dialect) name now, that a
        bind must cover: for a read-only one only the workspace's (the rest is read-only already),
        for a hidden one whatever the command could otherwise read."""
        found: dict[Path, None] = {}
        for pattern in patterns:
            start = Path(_ESCAPED.sub(r"\1", literal_prefix(pattern)[0]) or "/")
            if not hide and not (start.is_relative_to(workspace) or workspace.is_relative_to(start)):
                continue  # not worth a walk: nothing it names can be in the workspace
            for path in _matching(pattern, self.scan_limit):
                real = Path(os.path.realpath(path))
                if real.is_relative_to(workspace) if not hide else self._readable(real, workspace):
                    found[real] = None
        return list(found)

    def _readable(self, path: Path, workspace: Path) -> bool:
        """Whether the command could read `path` unless a bind hides it: not what the private
        `/tmp` or `/run` or the hidden home already hide."""
        if path == Path("/"):
            return False
        if path.is_relative_to(workspace):
            return True
        home = Path(os.path.realpath(Path.home()))
        if path.is_relative_to(home) and home != Path("/"):
            readable = (Path(os.path.realpath(os.path.expanduser(p))) for p in self.policy.home_readable)
            return any(path.is_relative_to(r) for r in readable)
        return not (path.is_relative_to("/tmp") or path.is_relative_to("/run"))


def _matching(pattern: str, limit: int) -> Iterator[Path]:
    """Paths that fully match `pattern`, walking from its literal prefix; a matched directory is
    not walked into (binding it covers what is inside). At most `limit` paths, and the walk stops
    after `100 * limit` entries: a rule over a huge tree is still enforced by the checker."""
    if not _WILDCARD.search(_ESCAPED.sub("", pattern)):
        literal = Path(_ESCAPED.sub(r"\1", pattern))
        if literal.exists() or literal.is_symlink():
            yield literal
        return
    prefix, _ = literal_prefix(pattern)
    regex, found, seen = glob_regex(pattern), 0, 0
    for dirpath, dirnames, filenames in os.walk(_ESCAPED.sub(r"\1", prefix) or "/"):
        kept = []
        for name in (*dirnames, *filenames):
            seen += 1
            path = os.path.join(dirpath, name)
            if regex.fullmatch(path):
                found += 1
                yield Path(path)
                if found >= limit:
                    return
            elif name in dirnames:
                kept.append(name)
        dirnames[:] = kept
        if seen >= 100 * limit:
            return


def rule_patterns(rules: PermissionRules, workspace: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`(read_only, hidden)`: the absolute path patterns of the Edit/Write deny and ask rules (bound
    read-only) and of the Read deny rules (hidden). A bare name (`.env`) means anywhere in the
    workspace, as for an allow rule: a walk of the whole filesystem per call would cost too much,
    and outside the workspace the filesystem is read-only anyway."""
    ctx = ToolContext(workspace=workspace)
    edits, reads = frozenset({"Edit", "Write"}), frozenset({"Read"})
    read_only = tuple(
        _anchor(r.specifier, ctx, for_allow=True)
        for r in (*rules.deny, *rules.ask)
        if r.specifier is not None and r.names(edits)
    )
    hidden = tuple(
        _anchor(r.specifier, ctx, for_allow=True)
        for r in rules.deny
        if r.specifier is not None and r.names(reads)
    )
    return read_only, hidden


def _top_level_protected(workspace: Path) -> list[Path]:
    """The workspace's own entries that `permissions.is_protected_path` names (`.git` aside: it is
    bound writable, with its config and hooks read-only)."""
    try:
        names = sorted(os.listdir(workspace))
    except OSError:
        return []
    paths = [workspace / name for name in names if name.casefold() != ".git"]
    return [p for p in paths if is_protected_path(p) and p.name not in (".foldline", ".claude")]


def _outer_git(workspace: Path) -> list[Path]:
    """The git directories outside the workspace that its repository needs, bound read-only so
    `git status` works and nothing there is written: those of a repository the workspace is a
    subfolder of, or of a worktree (whose `.git` file points at them)."""
    for folder in (workspace, *workspace.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir() and (dot_git / "HEAD").exists():  # git skips a `.git` that is no repository
            return [] if folder == workspace else [dot_git]
        if dot_git.is_file():
            return [p for p in _linked_git_dirs(dot_git) if not p.is_relative_to(workspace)]
    return []


def _linked_git_dirs(dot_git: Path) -> list[Path]:
    """A `.git` file's `gitdir:` and, for a worktree, the main repository's `commondir`."""
    try:
        first = dot_git.read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError, UnicodeDecodeError):
        return []
    if not first.startswith("gitdir:"):
        return []
    gitdir = Path(os.path.realpath(dot_git.parent / first.removeprefix("gitdir:").strip()))
    found = [gitdir] if gitdir.is_dir() else []
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
    except OSError:
        return found
    return [*found, Path(os.path.realpath(gitdir / common))]


def _make_missing(workspace: Path) -> list[Path]:
    """Create what must be bound read-only but does not exist yet: the protected directories
    (empty; an empty `.git` is not a repository to git, which keeps looking upwards) and, in a
    repository, a `commondir` that names the git directory itself."""
    made: list[Path] = []
    for rel in _MADE_DIRS:
        path = workspace / rel
        if path.exists() or path.is_symlink() or not path.parent.is_dir():
            continue
        try:
            path.mkdir()
        except OSError:
            continue
        made.append(path)
    common = workspace / ".git" / "commondir"
    if (workspace / ".git" / "HEAD").is_file() and not (common.exists() or common.is_symlink()):
        try:
            common.write_text(_SAME_DIR, encoding="utf-8")
        except OSError:
            pass
        else:
            made.append(common)
    return made


def _unmake(path: Path) -> None:
    """Remove what `_make_missing` made, unless something else was put there since."""
    try:
        if path.is_dir():
            path.rmdir()
        elif path.read_text(encoding="utf-8") == _SAME_DIR:
            path.unlink()
    except OSError:
        pass


def detect_sandbox(
    policy: SandboxPolicy,
    *,
    read_only: tuple[str, ...] = (),
    hidden: tuple[str, ...] = (),
    limits: ToolsConfig | None = None,
) -> Sandbox:
    """Find out once whether bubblewrap can run here with the flags every command gets.

    `read_only` and `hidden` are the path patterns rules protect (`rule_patterns`).
    """
    limits = limits or ToolsConfig()
    base = Sandbox(policy, None, None, read_only, hidden, limits.sandbox_rule_paths_limit)
    if policy.mode == "off":
        return base
    binary = shutil.which(policy.bwrap)
    if binary is None:
        return _with_problem(base, f"bubblewrap is not installed: no `{policy.bwrap}` found")
    probe = [binary, *_BASE_FLAGS, "--tmpfs", "/tmp", "--unshare-net", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=limits.sandbox_probe_timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return _with_problem(base, f"`{binary}` did not run: {e}")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = said[-1] if said else f"exit code {done.returncode}"
        return _with_problem(base, f"`{binary} --ro-bind / / true` failed: {reason}")
    return Sandbox(policy, binary, None, read_only, hidden, limits.sandbox_rule_paths_limit)


def _with_problem(sandbox: Sandbox, problem: str) -> Sandbox:
    return Sandbox(sandbox.policy, None, problem, sandbox.read_only, sandbox.hidden, sandbox.scan_limit)
