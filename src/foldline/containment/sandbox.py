"""The OS sandbox around the Bash tool: bubblewrap (`bwrap`) on Linux (docs/design.md §9.4).

Owns `SandboxPolicy` (what the settings ask for), `Sandbox` (what this machine can do, found once
at start by `detect_sandbox`), the bwrap command line one command runs under (`Sandbox.wrap`) and
the environment it gets (`Sandbox.environment`).

What a sandboxed command sees:
- the whole filesystem read-only (`--ro-bind / /`, submounts included), a `/dev` and `/proc` of its
  own, and an empty private `/tmp` of bounded size;
- the user's home replaced by an empty tmpfs (writable, thrown away after the call), except its
  toolchain folders (`HOME_TOOLCHAINS`: `~/.cargo/bin`, `~/.rustup`, `~/.pyenv`, `~/.nvm`, ...) and
  the paths the settings list in `homeReadable`, bound back read-only; a workspace that is the home
  itself is bound back whole, but its secrets (`.ssh`, `.aws`, `.netrc`, ...) stay hidden and its
  config (`.config`, shell rc files, `.gitconfig`) read-only;
- the workspace read-write, except what would run code or change rules outside the sandbox later
  (see `git_state`): in each git directory the workspace's repository uses, everything git reads
  as configuration or as a path to follow (`GIT_READ_ONLY`), bound read-only whether it exists or
  not (a missing one gets a placeholder git reads as absent, made for the call and removed after);
  a `.git` that is no repository, bound read-only whole (a command cannot turn the workspace, or
  a package of a monorepo, into a repository of its own); `.foldline` and `.claude`; the top-level
  entries `is_protected_path` names (`.ssh`, `.npmrc`, shell rc files); foldline's own package,
  interpreter and `.pth` files when they lie inside (`paths.own_install`); what an Edit/Write deny
  or ask rule names. `.git` itself is a mount point, so it cannot be renamed away;
- what a Read deny rule names hidden: `/dev/null` over a file, an empty read-only tmpfs over a
  directory; every folder between the workspace and a hidden or read-only path is a mount point of
  its own, so renaming a parent cannot carry the file out from under the rule's name. A rule whose
  walk is too long for one call hides the folders it did not reach; one with too many matches
  hides their folders. While any Read deny rule exists, code the checker cannot read (`opaque`)
  also loses git's object store, where every committed version of a denied file lives;
- `/run` replaced by an empty tmpfs, for the daemons' sockets in it;
- no network unless `network: true`: all or nothing (`--unshare-net`);
- no capabilities (`--cap-drop ALL`), its own pid and IPC namespaces, killed when foldline dies,
  limits on memory, file size and processes (`prlimit`), and an environment from an allowlist
  (no API keys, tokens or cloud credentials; proxy URLs without their `user:password@`).

Invariants:
- The sandbox is decided once per session: `detect_sandbox` runs the same bwrap flags on `true`
  and keeps the answer, so what the start-up line says is what every call gets. The programs it
  runs (`bwrap`, `prlimit`) are absolute paths outside the workspace, found then.
- Nothing a settings file inside the workspace says can loosen the sandbox (see `settings.py`).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from foldline._glob import glob_regex, literal_prefix
from foldline.config import ToolsConfig
from foldline.containment import git_state
from foldline.containment.checkpoints import store_root
from foldline.containment.layer import Layer, layer_argv, probe_layer
from foldline.containment.paths import HOME_SECRETS, is_protected_path, own_install
from foldline.containment.programs import find_program
from foldline.errors import ToolError

__all__ = ["HOME_TOOLCHAINS", "Sandbox", "SandboxCall", "SandboxMode", "SandboxPolicy", "detect_sandbox"]

SandboxMode = Literal["auto", "required", "off"]
"""`auto`: sandbox Bash where bubblewrap works, else run with the permission checker alone (said
once at start); `required`: where it does not work, refuse to run Bash; `off`: never sandbox."""

_PROTECTED_DIRS = (".foldline", ".claude")
"""Read-only inside the workspace, made (empty) for the call when missing: foldline's and Claude
Code's settings, which decide what later runs without asking."""

ENV_ALLOW = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ", "COLUMNS", "LINES",
     "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "CI", "EDITOR", "VISUAL", "PAGER",
     "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE",
     "PYTHONUNBUFFERED", "PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONUTF8", "NODE_PATH", "NODE_ENV",
     "GOPATH", "GOROOT", "GOFLAGS", "GOPROXY", "CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN",
     "PYENV_ROOT", "PYENV_VERSION", "NVM_DIR", "NVM_BIN", "VOLTA_HOME", "BUN_INSTALL", "DENO_INSTALL",
     "JAVA_HOME", "MAVEN_HOME", "GRADLE_HOME", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "CC", "CXX",
     "CFLAGS", "CXXFLAGS", "LDFLAGS", "MAKEFLAGS", "OMP_NUM_THREADS", "SSL_CERT_FILE", "SSL_CERT_DIR",
     "REQUESTS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
     "no_proxy"}
)  # fmt: skip
"""What a sandboxed command inherits (and `LC_*`, and the names the user's `sandbox.env` adds):
what toolchains need to find themselves. An allowlist, because secrets have no common name
(`ANTHROPIC_API_KEY`, `AWS_SECRET_ACCESS_KEY`, `GH_TOKEN`, `DATABASE_URL`, ...)."""

_PROXY_NAMES = frozenset({"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})
_PROXY_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*://)?)[^/@\s]*@")
"""`scheme://user:password@` at the start of a proxy URL (curl also takes it without a scheme)."""
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
    """The bubblewrap binary: a name looked up on PATH (outside the workspace), or an absolute path."""
    env: tuple[str, ...] = ()
    """Environment variables passed into the sandbox besides `ENV_ALLOW` (user settings only)."""


@dataclass(frozen=True)
class _Mount:
    """One bwrap mount operation; `dest` orders them (a parent before what lies under it)."""

    flag: str
    dest: Path
    source: Path | None = None
    size: int | None = None

    def args(self) -> list[str]:
        if self.flag == "--tmpfs":
            return [*(("--size", str(self.size)) if self.size else ()), self.flag, str(self.dest)]
        if self.flag == "--remount-ro":
            return [self.flag, str(self.dest)]
        return [self.flag, str(self.source or self.dest), str(self.dest)]


@dataclass
class SandboxCall:
    """One command's run in the sandbox: the argv to start and, once the `wrap` block is left,
    what the command changed that runs outside the sandbox later (`git_state.changes`). On a
    layer (`layer` set) nothing reaches the workspace until the caller applies the change, so the
    caller computes `consequences` after that, from `before`."""

    argv: list[str]
    consequences: list[str] = field(default_factory=list)
    layer: Layer | None = None
    before: git_state.GitState | None = None
    gitdirs: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class Sandbox:
    """What Bash runs under in this session (`detect_sandbox` builds it)."""

    policy: SandboxPolicy = field(default_factory=SandboxPolicy)
    bwrap: str | None = None
    """The working bwrap binary (absolute); None when the sandbox is off or cannot run here."""
    problem: str | None = None
    """Why it cannot run here (no bubblewrap, no user namespaces), when it cannot."""
    read_only: tuple[str, ...] = ()
    """Absolute path patterns bound read-only besides the protected paths (`rule_patterns`)."""
    hidden: tuple[str, ...] = ()
    """Absolute path patterns hidden from the command (`rule_patterns`)."""
    limits: ToolsConfig = field(default_factory=ToolsConfig)
    prlimit: str | None = None
    """`prlimit`, found at start; without it commands run without resource limits."""
    unshare: str | None = None
    """`unshare`, found at start when a copy-on-write layer works here (`containment.layer`):
    every command then runs on a layer whose change is applied after the call, and can be undone."""
    layer_problem: str | None = None
    """Why the layer cannot be used here, when the sandbox runs without it."""

    @property
    def active(self) -> bool:
        """Bash runs inside bwrap."""
        return self.bwrap is not None

    @property
    def layered(self) -> bool:
        """Each command runs on a copy-on-write layer, its change applied after it ends."""
        return self.bwrap is not None and self.unshare is not None

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

    def summary(self) -> str | None:
        """The one line said at start when Bash is sandboxed: what it may do, and what that allows."""
        if not self.active:
            return None
        network = "network on" if self.policy.network else "no network (settings: sandbox.network)"
        allowed = "; commands it contains run without asking in default mode" if self.auto_allows else ""
        if self.layered:
            undo = "; every change it makes is shown after the call and can be undone (/undo)"
        else:
            undo = (
                f"; its changes cannot be undone here ({self.layer_problem}), so a command that deletes or "
                "overwrites files asks first"
            )
        return (
            "Bash runs in a bubblewrap sandbox: it writes only the workspace (not git's config or "
            "hooks, .foldline, .claude), sees an empty home (its toolchains read-only) and a private "
            f"/tmp, {network}{allowed}{undo}"
        )

    def environment(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment a sandboxed command starts with: `ENV_ALLOW`, `LC_*` and the user's
        `sandbox.env` names, from `environ` (default: this process's). A proxy URL loses its
        `user:password@` (a credential like any other) unless the user's `sandbox.env` names it."""
        source = os.environ if environ is None else environ
        keep = ENV_ALLOW | set(self.policy.env)
        env = {k: v for k, v in source.items() if k in keep or k.startswith("LC_")}
        for name in env.keys() & (_PROXY_NAMES - set(self.policy.env)):  # unless the user named it
            env[name] = _PROXY_USERINFO.sub(r"\1", env[name])
        env["TMPDIR"] = "/tmp"  # the private /tmp, wherever TMPDIR pointed (it may be read-only here)
        return env

    @contextmanager
    def wrap(
        self,
        argv: Sequence[str],
        workspace: Path,
        cwd: Path,
        *,
        opaque: bool = True,
        layer: Layer | None = None,
    ) -> Iterator[SandboxCall]:
        """The bwrap command line that runs `argv` in `cwd` inside the sandbox. `opaque`: the
        permission checker could not read what the command does, so the sandbox alone holds the
        Read deny rules (git's object store is hidden too). On leaving, the placeholders made for
        missing protected paths are removed again, and what the command changed that runs outside
        the sandbox later is in `SandboxCall.consequences`. With `layer` (`layered` sandboxes only) the
        command runs on it: the workspace is untouched until the caller applies the change."""
        assert self.bwrap is not None, "wrap() needs an active sandbox"
        outer = _outer_git(workspace)  # before the placeholders exist
        before = git_state.snapshot(workspace)
        gitdirs = git_state.git_dirs(workspace, before)
        made: list[Path] = []
        try:
            parent_times = _times_of({p.parent for p in _missing(workspace, gitdirs)})
            made = _make_missing(workspace, gitdirs)
            mounts = self._mounts(workspace, gitdirs, outer, opaque=opaque)
            args = [self.bwrap, *_BASE_FLAGS]
            if layer is not None and os.getuid() != 0:
                # root inside the layer's namespace (to mount it); the command runs as the user again
                args += ["--unshare-user", "--uid", str(os.getuid()), "--gid", str(os.getgid())]
            if not self.policy.network:
                args.append("--unshare-net")
            if outer:
                # the repository's root lies past the workspace's mount: let git look there
                args += ["--setenv", "GIT_DISCOVERY_ACROSS_FILESYSTEM", "1"]
            # a parent is mounted before what lies under it; ties keep list order
            for mount in sorted(mounts, key=lambda m: len(m.dest.parts)):
                args += mount.args()
            command = [*args, "--chdir", str(cwd), "--", *self._limited(argv)]
            if layer is not None:
                assert self.unshare is not None, "a layer needs a layered sandbox"
                command = layer_argv(self.unshare, layer, workspace, command)
            call = SandboxCall(command, layer=layer, before=before, gitdirs=gitdirs)
            yield call
            if layer is None:
                call.consequences = git_state.changes(workspace, before, git_state.snapshot(workspace))
        finally:
            for path in reversed(made):
                _unmake(path)
            if layer is not None:
                # on a layer the command touched nothing here: the folders the placeholders were
                # made in get their times back, so an undo can restore the tree exactly
                for folder, times in parent_times.items():
                    with suppress(OSError):
                        os.utime(folder, ns=times, follow_symlinks=False)

    def _limited(self, argv: Sequence[str]) -> list[str]:
        if self.prlimit is None:
            return list(argv)
        limits = self.limits
        return [
            self.prlimit,
            f"--data={limits.sandbox_data_bytes}",
            f"--fsize={limits.sandbox_file_bytes}",
            f"--nproc={limits.sandbox_processes}",
            "--core=0",
            "--",
            *argv,
        ]

    def _mounts(
        self, workspace: Path, gitdirs: list[Path], outer: list[Path], *, opaque: bool
    ) -> list[_Mount]:
        size = self.limits.sandbox_tmp_bytes
        # /run holds the sockets of local daemons (Docker, D-Bus, PostgreSQL): a read-only file
        # system does not stop a connect(), so they are hidden like /tmp
        mounts = [_Mount("--tmpfs", Path("/tmp"), size=size), _Mount("--tmpfs", Path("/run"), size=size)]
        resolver = Path("/run/systemd/resolve")
        if self.policy.network and resolver.is_dir():  # /etc/resolv.conf often points in there
            mounts.append(_Mount("--ro-bind", resolver))
        home = Path(os.path.realpath(Path.home()))
        if home != Path("/"):  # a service account's `/` is no private folder to hide
            # mounted shallowest first: a workspace inside the home is bound back over it
            mounts.append(_Mount("--tmpfs", home, size=size))
            mounts += _home_toolchains(home)
            for raw in self.policy.home_readable:
                path = Path(os.path.realpath(os.path.expanduser(raw)))
                if path.is_relative_to(home) and path.exists():
                    mounts.append(_Mount("--ro-bind", path))
        mounts.append(_Mount("--bind", workspace))
        mounts += _git_mounts(workspace, gitdirs)
        for name in _PROTECTED_DIRS:
            mounts += _held(workspace / name)
        if store_root(workspace).is_dir():  # the layers and what /undo keeps: never the command's
            mounts += _hide(store_root(workspace))
        mounts += [_Mount("--ro-bind", gitdir) for gitdir in outer]
        # and what the checker asks before writing (`.ssh`, `.npmrc`, shell rc files), at the top
        mounts += [m for p in _top_level_protected(workspace) for m in _held(p)]
        # a home that is the workspace is bound back whole: its secrets hidden again, after the holds
        if workspace == home:
            mounts += _home_as_workspace(home, self.policy.home_readable)
        mounts += [_Mount("--ro-bind", p) for p in own_install(workspace) if p.exists()]  # foldline's code
        read_only = self._expand(self.read_only, workspace, hide=False)
        hidden = self._expand(self.hidden, workspace, hide=True)
        mounts += [_Mount("--ro-bind", path) for path in read_only]
        for path in hidden:
            if path.exists():  # a link to nothing hides nothing
                mounts += _hide(path)
        if self.hidden and opaque:
            # every committed version of a denied file is in the object store: code the checker
            # cannot read must not reach it (git commands themselves are checked by the checker)
            for gitdir in (*gitdirs, *outer):
                if (gitdir / "objects").is_dir():
                    mounts += _hide(gitdir / "objects")
        # folders between the workspace and a rule's path become mount points: a rename of one
        # fails (EBUSY) instead of carrying the path out from under the rule's name
        mounts += [_Mount("--bind", d) for d in _parents_to_pin([*read_only, *hidden], workspace)]
        # under a hidden (empty, read-only) folder nothing else can or need be mounted
        covered = [m.dest for m in mounts if m.flag == "--remount-ro"]
        return [m for m in mounts if not any(m.dest != c and m.dest.is_relative_to(c) for c in covered)]

    def _expand(self, patterns: tuple[str, ...], workspace: Path, *, hide: bool) -> list[Path]:
        """The existing paths `patterns` (absolute, in the rules' glob dialect) name now, that a
        bind must cover: for a read-only one only the workspace's (the rest is read-only already),
        for a hidden one whatever the command could otherwise read. Never fewer than the rules
        name: folders a walk did not reach in time are covered whole, and past
        `sandbox_rule_paths_limit` matches their folders are bound instead of each one."""
        found: dict[Path, None] = {}
        for pattern in patterns:
            start = Path(_ESCAPED.sub(r"\1", literal_prefix(pattern)[0]) or "/")
            if not hide and not (start.is_relative_to(workspace) or workspace.is_relative_to(start)):
                continue  # not worth a walk: nothing it names can be in the workspace
            matches, unreached = _matching(pattern, self.limits.sandbox_rule_walk_entries)
            matches = _collapse(matches, self.limits.sandbox_rule_paths_limit, workspace)
            for path in (*matches, *unreached):
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
            return any(path.is_relative_to(r) for r in readable) or _toolchain_readable(path, home)
        return not (path.is_relative_to("/tmp") or path.is_relative_to("/run"))


HOME_TOOLCHAINS = (".cargo/bin", ".rustup", ".pyenv", ".nvm", ".local/bin", "go", ".volta", ".bun", ".deno")
"""Under the home, where version managers install compilers and interpreters (rustup, pyenv, nvm,
pipx, go, volta, bun, deno): bound read-only into the hidden home when they exist, so the PATH
entries pointing there (passed on whole) find the same `cargo` or `python3` as on the host. Only
`bin` of `~/.cargo`: beside it lies `credentials.toml`, the registry's token."""


def _home_toolchains(home: Path) -> list[_Mount]:
    """Read-only binds of the home's `HOME_TOOLCHAINS` that exist, at their place in the home. One
    that is (a link to) the home, a secret (`HOME_SECRETS`) or a folder holding one stays hidden."""
    secrets = [home / rel for rel in HOME_SECRETS]
    mounts = []
    for rel in HOME_TOOLCHAINS:
        real = Path(os.path.realpath(home / rel))
        if not real.is_dir() or real == home or any(real.is_relative_to(s) for s in secrets):
            continue
        if any(s.is_relative_to(real) for s in secrets):
            continue
        mounts.append(_Mount("--ro-bind", home / rel, real))
    return mounts


def _toolchain_readable(path: Path, home: Path) -> bool:
    """Whether `path` lies in a toolchain folder `_home_toolchains` binds into the hidden home."""
    return any(
        path.is_relative_to(m.source or m.dest) or path.is_relative_to(m.dest) for m in _home_toolchains(home)
    )


_HOME_CONFIG = (".config", ".local/bin")
"""Under the home, what other programs read as config or run from PATH: read-only then."""


def _home_as_workspace(home: Path, readable: tuple[str, ...]) -> list[_Mount]:
    """For a workspace that is the home itself (which the tmpfs over the home no longer hides):
    its secrets hidden, unless the settings' `homeReadable` names them, and its config read-only
    (the shell rc files and `.gitconfig` are held as protected entries of the workspace)."""
    allowed = [Path(os.path.realpath(os.path.expanduser(p))) for p in readable]
    mounts = [m for rel in _HOME_CONFIG for m in _held(home / rel)]
    for rel in HOME_SECRETS:
        path = home / rel
        if path.exists() and not any(path.is_relative_to(a) for a in allowed):
            mounts += _hide(path)
    return mounts


def _git_mounts(workspace: Path, gitdirs: list[Path]) -> list[_Mount]:
    """`.git` as a mount point of its own (a writable one only when it is the repository's git
    directory), and what git reads as configuration read-only in each git directory."""
    mounts = []
    dot_git = workspace / ".git"
    if dot_git.is_dir() and not dot_git.is_symlink() and dot_git in gitdirs:
        mounts.append(_Mount("--bind", dot_git))  # a mount point cannot be renamed away
    else:
        # a worktree's `.git` file, a symlink, or a `.git` that is no repository (made empty for
        # the call when missing): a command may not make the workspace a repository of its own
        mounts += _held(dot_git)
    for gitdir in gitdirs:
        for rel in git_state.GIT_READ_ONLY:
            mounts += _held(gitdir / rel)
        # the packs hold most of the history: as mount points they cannot be deleted or renamed
        # (new objects and packs can still be written; loose ones are counted after the call)
        mounts += [_Mount("--bind", pack) for pack in git_state.packs(gitdir)]
    # what a config git trusts names inside the workspace: hooks folders, included configs, scripts
    mounts += [
        _Mount("--ro-bind", path) for path in git_state.executed_files(workspace, gitdirs) if path.exists()
    ]
    return mounts


def _held(path: Path) -> list[_Mount]:
    """A read-only bind of `path` when it exists (a link: of what it points at).

    Raises:
        ToolError: `path` is a link to nothing: what a command created there would be read or run
            on the host, and no bind can hold a path that does not exist yet (fail closed).
    """
    if path.is_symlink() and not path.exists():
        raise ToolError(
            f"{path} is a link to {os.readlink(path)}, which does not exist: git or foldline would "
            "read whatever a command creates there, so the sandbox will not run commands until the "
            "link is removed (outside foldline, after checking who made it)"
        )
    return [_Mount("--ro-bind", path)] if path.exists() else []


def _hide(path: Path) -> list[_Mount]:
    if path.is_dir():
        return [_Mount("--tmpfs", path), _Mount("--remount-ro", path)]
    return [_Mount("--ro-bind", path, Path("/dev/null"))]


def _parents_to_pin(paths: list[Path], workspace: Path) -> list[Path]:
    """The folders strictly between `workspace` and each of `paths`, except protected ones (a
    writable bind there would undo a read-only one above it)."""
    pinned: dict[Path, None] = {}
    for path in paths:
        if not path.is_relative_to(workspace) or path == workspace:
            continue
        for parent in path.parents:
            if parent == workspace or not parent.is_relative_to(workspace):
                break
            if not is_protected_path(parent.relative_to(workspace)):
                pinned[parent] = None
    return list(pinned)


def _collapse(paths: list[Path], limit: int, workspace: Path) -> list[Path]:
    """At most about `limit` paths covering `paths`: their parent folders, level by level, while
    there are too many (never the workspace or `/` itself, which would hide everything)."""
    current = list(dict.fromkeys(paths))
    while len(current) > limit:
        parents = list(dict.fromkeys(p.parent for p in current))
        if len(parents) == len(current) or any(p in (workspace, Path("/")) for p in parents):
            break
        current = parents
    return current


def _matching(pattern: str, budget: int) -> tuple[list[Path], list[Path]]:
    """`(matches, unreached)`: the paths that fully match `pattern`, walking from its literal
    prefix (a matched directory is not walked into: binding it covers what is inside), and the
    folders still to walk when `budget` entries have been seen. `.git` folders are not walked:
    the object store is hidden as a whole (see `_mounts`)."""
    if not _WILDCARD.search(_ESCAPED.sub("", pattern)):
        literal = Path(_ESCAPED.sub(r"\1", pattern))
        return ([literal] if literal.exists() or literal.is_symlink() else []), []
    prefix, _ = literal_prefix(pattern)
    regex, seen = glob_regex(pattern), 0
    found: list[Path] = []
    stack = [_ESCAPED.sub(r"\1", prefix).rstrip("/") or "/"]
    while stack:
        if seen >= budget:
            return found, [Path(d) for d in stack]
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            path = entry.path
            if regex.fullmatch(path):
                found.append(Path(path))
            elif entry.name != ".git" and entry.is_dir(follow_symlinks=False):
                stack.append(path)
    return found, []


def _top_level_protected(workspace: Path) -> list[Path]:
    """The workspace's own entries that `is_protected_path` names (`.git` aside: it is bound
    writable, with what git reads as configuration read-only)."""
    try:
        names = sorted(os.listdir(workspace))
    except OSError:
        return []
    paths = [workspace / name for name in names if name.casefold() != ".git"]
    return [p for p in paths if is_protected_path(p) and p.name not in _PROTECTED_DIRS]


def _outer_git(workspace: Path) -> list[Path]:
    """The git directories outside the workspace that its repository needs, bound read-only so
    `git status` works and nothing there is written: those of a repository the workspace is a
    subfolder of, or of a worktree (whose `.git` file points at them)."""
    for folder in (workspace, *workspace.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir() and (dot_git / "HEAD").exists():  # git skips a `.git` that is no repository
            return [] if folder == workspace else [dot_git]
        if dot_git.is_file():
            return [p for p in git_state.linked_git_dirs(dot_git) if not p.is_relative_to(workspace)]
    return []


def _missing(workspace: Path, gitdirs: list[Path]) -> list[Path]:
    """What `_make_missing` would make now."""
    wanted = [workspace / ".git", *(workspace / name for name in _PROTECTED_DIRS)]
    wanted += [gitdir / rel for gitdir in gitdirs for rel in git_state.PLACEHOLDERS]
    return [p for p in wanted if not (p.exists() or p.is_symlink()) and p.parent.is_dir()]


def _times_of(folders: set[Path]) -> dict[Path, tuple[int, int]]:
    found: dict[Path, tuple[int, int]] = {}
    for folder in folders:
        with suppress(OSError):
            st = os.lstat(folder)
            found[folder] = (st.st_atime_ns, st.st_mtime_ns)
    return found


def _make_missing(workspace: Path, gitdirs: list[Path]) -> list[Path]:
    """Create what must be bound read-only but does not exist yet: `.git` (empty: to git no
    repository, so it keeps looking upwards), `.foldline`, `.claude`, and in each git directory the
    placeholders of `git_state.PLACEHOLDERS`, which git reads as if they were absent."""
    made: list[Path] = []
    wanted: list[tuple[Path, str | None]] = [(workspace / ".git", None)]
    wanted += [(workspace / name, None) for name in _PROTECTED_DIRS]
    wanted += [(gitdir / rel, text) for gitdir in gitdirs for rel, text in git_state.PLACEHOLDERS.items()]
    for path, text in wanted:
        if path.exists() or path.is_symlink() or not path.parent.is_dir():
            continue
        if not Path(os.path.realpath(path.parent)).is_relative_to(workspace):
            continue  # a folder linked out of the workspace: nothing is made there
        try:
            if text is None:
                path.mkdir()
            else:
                path.write_text(text, encoding="utf-8")
        except OSError:
            continue
        made.append(path)
    return made


def _unmake(path: Path) -> None:
    """Remove what `_make_missing` made, unless something else was put there since."""
    try:
        if path.is_dir():
            path.rmdir()
        elif path.read_text(encoding="utf-8") in git_state.PLACEHOLDERS.values():
            path.unlink()
    except OSError:
        pass


def detect_sandbox(
    policy: SandboxPolicy,
    *,
    read_only: tuple[str, ...] = (),
    hidden: tuple[str, ...] = (),
    limits: ToolsConfig | None = None,
    workspace: Path | None = None,
) -> Sandbox:
    """Find out once whether bubblewrap can run here with the flags every command gets.

    `read_only` and `hidden` are the path patterns rules protect (`permissions.rule_patterns`).
    `bwrap` and `prlimit` are looked up outside `workspace`: a program planted there never runs.
    """
    limits = limits or ToolsConfig()
    base = Sandbox(policy, None, None, read_only, hidden, limits)
    if policy.mode == "off":
        return base
    binary = find_program(policy.bwrap, workspace)
    if binary is None:
        where = " outside the workspace" if workspace is not None else ""
        return _with_problem(base, f"bubblewrap is not installed: no `{policy.bwrap}` found{where}")
    probe = [binary, *_BASE_FLAGS, "--tmpfs", "/tmp", "--unshare-net", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=limits.sandbox_probe_timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return _with_problem(base, f"`{binary}` did not run: {e}")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = said[-1] if said else f"exit code {done.returncode}"
        return _with_problem(base, f"`{binary} --ro-bind / / true` failed: {reason}")
    prlimit = find_program("prlimit", workspace)
    if workspace is None:
        return Sandbox(
            policy, binary, None, read_only, hidden, limits, prlimit, layer_problem="no workspace given"
        )
    unshare = find_program("unshare", workspace)
    ws = Path(os.path.realpath(workspace))
    problem = probe_layer(unshare, store_root(ws) / "layers", ws, limits.sandbox_probe_timeout_s)
    return Sandbox(
        policy, binary, None, read_only, hidden, limits, prlimit, None if problem else unshare, problem
    )


def _with_problem(sandbox: Sandbox, problem: str) -> Sandbox:
    return Sandbox(sandbox.policy, None, problem, sandbox.read_only, sandbox.hidden, sandbox.limits)
