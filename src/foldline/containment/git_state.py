"""What git on the host reads as code or as a path to follow, inside the workspace (§9.4).

Owns the class of files through which a write inside the sandbox becomes a program git runs
later, outside it, and the two ways the sandbox deals with them:

- **held read-only** (`GIT_READ_ONLY`, missing ones as `PLACEHOLDERS` git reads as absent), in
  every git directory the workspace's repository uses (`git_dirs`): its own, the one a `.git`
  file names, and those of nested repositories the index records as submodules (gitlinks);
- **checked after each call** (`snapshot`, `changes`), for what cannot be held read-only because
  everyday git writes it: the index (a new gitlink makes the user's `git status` run git inside
  the nested repository, with that repository's config) and `.gitmodules`.

The index is parsed here rather than listed with git, so the check runs no program at all.

Every file read here goes through `safe_read`: inside the workspace no link is followed and only a
regular file of bounded size is read, a `.gitmodules` or nested `.git` that leads out of the
workspace is not read at all, and outside it (a worktree's git directory) a file is read only
to find paths, never quoted into what the model is told.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from foldline.containment.safe_read import read_regular_file, read_workspace_file

__all__ = [
    "GIT_READ_ONLY",
    "PLACEHOLDERS",
    "GitState",
    "changes",
    "executed_files",
    "git_dirs",
    "index_entries",
    "linked_git_dirs",
    "packs",
    "snapshot",
]

GIT_READ_ONLY = (
    "config",
    "config.worktree",
    "commondir",
    "hooks",
    "info",
    "modules",
    "worktrees",
    "objects/info/alternates",
    "objects/info/http-alternates",
)
"""Inside a git directory: its config (`core.fsmonitor`, `core.sshCommand`, filters, aliases, a
partial clone's promisor remote), the per-worktree config, `commondir` (moves the whole repository
to a folder the command wrote), hooks, `info/` (attributes, which pick filters), the submodules'
and linked worktrees' own git directories (their `commondir` and `gitdir` files), and
`alternates` (other object stores)."""
PLACEHOLDERS: dict[str, str | None] = {
    "config": "",
    "config.worktree": "",
    "commondir": ".\n",
    "hooks": None,
    "info": None,
    "modules": None,
    "worktrees": None,
    "objects/info/alternates": "",
}
"""What stands in for a missing `GIT_READ_ONLY` path during a call (None: an empty folder): an
empty config, a `commondir` naming the git directory itself, no alternates: to git the same as
none, and read-only, so the command cannot create the real one."""

_RUNS = re.compile(
    r"^(core\.(fsmonitor|hookspath|sshcommand|pager|editor|askpass|gitproxy)|diff\.external"
    r"|diff\..+\.(textconv|command)|filter\..+\.(clean|smudge|process)|merge\..+\.driver|alias\..+"
    r"|credential\..*helper|sequence\.editor|gpg\..*program|remote\..+\.(uploadpack|receivepack"
    r"|promisor|url)|extensions\.partialclone|include\.path|includeif\..+\.path|protocol\..+\.allow"
    r"|submodule\..+\.update|uploadpack\.packobjectshook)$"
)
"""Config keys that name a program, or a place git fetches from or reads more config from."""
_UNREADABLE = b"\0not a regular file inside the workspace: "
"""What stands for a file that exists but is not read, before the link's target if it is one (no
git config holds a NUL): a change to it is still reported, and nothing outside is read."""
_USERINFO = re.compile(r"://[^/@\s]*@")
"""The `user:token@` of a URL: never quoted back, whatever config it came from."""


@dataclass(frozen=True)
class GitState:
    """The part of a workspace's git state a sandboxed command may change and must be checked."""

    gitlinks: frozenset[str] = frozenset()
    """Paths the index records as submodules (mode 160000)."""
    gitmodules: bytes | None = None
    nested: dict[str, bytes] = field(default_factory=dict)
    """For each gitlink, the config of the repository found there (what `git status` would use)."""
    loose_objects: int = 0
    """Loose objects in the repository's object store (history a command could delete)."""
    pack_names: frozenset[str] = frozenset()
    executed: dict[str, bytes | None] = field(default_factory=dict)
    """What each file `executed_files` names holds (None: absent); a folder's files one by one."""


def snapshot(workspace: Path) -> GitState:
    """The workspace's `GitState` now (cheap: the index is parsed only when it changed)."""
    gitdir = _own_git_dir(workspace)
    links = _gitlinks(gitdir / "index", workspace) if gitdir is not None else frozenset()
    modules = _state_of(workspace / ".gitmodules", workspace, follow_links=False)  # as git: no link
    nested = {}
    for link in sorted(links):
        inner = _repo_git_dir(workspace / link, workspace)
        if inner is not None:
            nested[link] = _read(inner / "config", workspace) + _read(inner / "config.worktree", workspace)
    loose, pack_names = (
        (_loose_count(gitdir), frozenset(p.name for p in packs(gitdir))) if gitdir else (0, frozenset())
    )
    state = GitState(links, modules, nested, loose, pack_names)
    executed: dict[str, bytes | None] = {}
    for path in executed_files(workspace, git_dirs(workspace, state)):
        files = sorted(path.iterdir()) if path.is_dir() else [path]
        executed.update((str(f), _state_of(f, workspace, follow_links=True)) for f in files)
        if not path.exists():
            executed[str(path)] = None
    return GitState(links, modules, nested, loose, pack_names, executed)


def packs(gitdir: Path) -> list[Path]:
    """The pack files of a git directory's object store (`.pack`, `.idx` and their companions):
    regular files only, and only where they really are inside `gitdir` (a link planted there must
    never make the file it points at a writable mount)."""
    folder = gitdir / "objects" / "pack"
    try:
        if not Path(os.path.realpath(folder)).is_relative_to(os.path.realpath(gitdir)):
            return []
        entries = list(os.scandir(folder))
    except OSError:
        return []
    found = (Path(e.path) for e in entries if e.name.startswith("pack-") and e.is_file(follow_symlinks=False))
    return sorted(found)


def _loose_count(gitdir: Path) -> int:
    total = 0
    objects = gitdir / "objects"
    try:
        folders = [e for e in os.scandir(objects) if len(e.name) == 2 and e.is_dir(follow_symlinks=False)]
    except OSError:
        return 0
    for folder in folders:
        try:
            total += len(os.listdir(folder.path))
        except OSError:
            continue
    return total


def git_dirs(workspace: Path, state: GitState) -> list[Path]:
    """The git directories inside the workspace whose `GIT_READ_ONLY` paths the sandbox binds
    read-only: the workspace repository's own (and its common directory) and those of the nested
    repositories its index names."""
    found: dict[Path, None] = {}
    own = _own_git_dir(workspace)
    if own is not None:
        found[own] = None
        dot_git = workspace / ".git"
        if dot_git.is_file():
            found.update(dict.fromkeys(linked_git_dirs(dot_git)))
    for link in sorted(state.gitlinks):
        inner = _repo_git_dir(workspace / link, workspace)
        if inner is not None:
            found[inner] = None
    return [d for d in found if d.is_relative_to(workspace)]


def changes(workspace: Path, before: GitState, after: GitState) -> list[str]:
    """What a command changed that git on the host will follow later, in words for the user and
    the model (empty when nothing did)."""
    said: list[str] = []
    for link in sorted(after.gitlinks - before.gitlinks):
        keys = _program_keys(after.nested.get(link, b""))
        where = f" whose config sets {', '.join(keys)}" if keys else ""
        said.append(
            f"the index now records `{link}` as a submodule (gitlink){where}: `git status` and "
            f"`git diff` on your machine will run git inside {workspace / link} with its config. "
            f"If you did not mean it: `git rm --cached {link}`"
        )
    for link in sorted(after.gitlinks & before.gitlinks):
        if after.nested.get(link) != before.nested.get(link):
            keys = _program_keys(after.nested.get(link, b""))
            what = f"; it sets {', '.join(keys)}" if keys else ""
            said.append(f"the config of the submodule repository at `{link}` changed{what}")
    for name in sorted(set(before.executed) | set(after.executed)):
        if before.executed.get(name) != after.executed.get(name):
            said.append(
                f"{name} changed: git on your machine runs it, or reads it as config, because a git "
                "config names it (a hooks folder, an include, a filter or alias script)"
            )
    lost = before.loose_objects - after.loose_objects
    if lost > 0 and after.pack_names == before.pack_names:  # not gc packing them
        said.append(
            f"{lost} objects were deleted from git's object store: commits, trees or file versions "
            "may be gone from the history (`git fsck` tells); restore them from a remote or a backup"
        )
    if after.gitmodules != before.gitmodules:
        verb = "was removed" if after.gitmodules is None else "changed"
        keys = _program_keys(after.gitmodules or b"")
        what = f" (it sets {', '.join(keys)})" if keys else ""
        said.append(f"`.gitmodules` {verb}{what}: `git submodule` commands read it")
    return said


def executed_files(workspace: Path, gitdirs: list[Path], home: Path | None = None) -> list[Path]:
    """Files inside the workspace that git on the host runs, or reads as config, because a config
    it trusts names them: `core.hooksPath` (husky's `.husky/`), `include.path`, and the scripts of
    program-valued keys (`filter.x.clean = ./scripts/clean.sh`, `alias.x = !./tool`). The
    configs read are the repositories' own and the user's global ones."""
    home = Path.home() if home is None else home
    configs = [(_read(g / name, workspace), g) for g in gitdirs for name in ("config", "config.worktree")]
    # the user's own configs, outside the workspace: a dotfiles manager may link them anywhere
    configs += [
        (read_regular_file(home / ".gitconfig", follow_links=True) or b"", workspace),
        (read_regular_file(home / ".config" / "git" / "config", follow_links=True) or b"", workspace),
    ]
    found: dict[Path, None] = {}
    for config, base in configs:
        for key, value in _entries_of(config):
            if key == "core.hookspath" or key == "include.path" or key.endswith(".path"):
                raw = value
                folder = workspace if key == "core.hookspath" else base
            elif _RUNS.match(key):
                raw = value.lstrip("!").strip().split(" ")[0].strip("\"'")
                folder = workspace  # git runs these from the top of the work tree
                if "/" not in raw:
                    continue  # a bare name: found on PATH, not in the workspace
            else:
                continue
            path = Path(os.path.realpath(folder / os.path.expanduser(raw))) if raw else None
            if path is not None and path.is_relative_to(workspace) and path != workspace:
                found[path] = None
    return list(found)


def linked_git_dirs(dot_git: Path) -> list[Path]:
    """A `.git` file's `gitdir:` and, for a worktree, the main repository's `commondir` (read as
    regular files that are no links themselves, bounded; only the paths they name are used)."""
    try:
        first = (read_regular_file(dot_git) or b"").decode("utf-8").splitlines()[0]
    except (IndexError, UnicodeDecodeError):
        return []
    if not first.startswith("gitdir:"):
        return []
    gitdir = Path(os.path.realpath(dot_git.parent / first.removeprefix("gitdir:").strip()))
    found = [gitdir] if gitdir.is_dir() else []
    common = read_regular_file(gitdir / "commondir")
    if common is None:
        return found
    return [*found, Path(os.path.realpath(gitdir / common.decode("utf-8", "replace").strip()))]


def _own_git_dir(workspace: Path) -> Path | None:
    return _repo_git_dir(workspace, None)  # a worktree's lies outside: the user made it so


def _repo_git_dir(folder: Path, workspace: Path | None) -> Path | None:
    """The git directory of a repository whose work tree is `folder` (a `.git` folder holding
    `HEAD`, or the folder a `.git` file names), resolved; None when there is none, or when
    `workspace` is given and the folder or its git directory lies outside it (a nested repository
    a command planted: its `gitdir:` or a linked folder must not carry a read out)."""
    if workspace is not None and not Path(os.path.realpath(folder)).is_relative_to(
        os.path.realpath(workspace)
    ):
        return None
    dot_git = folder / ".git"
    if dot_git.is_symlink():
        return None
    if dot_git.is_dir():
        return Path(os.path.realpath(dot_git)) if (dot_git / "HEAD").is_file() else None
    if dot_git.is_file():
        linked = linked_git_dirs(dot_git)
        if not linked or (
            workspace is not None and not linked[0].is_relative_to(os.path.realpath(workspace))
        ):
            return None
        return linked[0]
    return None


def _state_of(path: Path, workspace: Path, *, follow_links: bool) -> bytes | None:
    """What `path` holds, for comparison before and after a call: its bytes (read inside the
    workspace only), `_UNREADABLE` and a link's target when it is something else, None when absent."""
    data = read_workspace_file(path, workspace, follow_links=follow_links)
    if data is not None or not os.path.lexists(path):
        return data
    try:
        target = os.readlink(path).encode("utf-8", "surrogateescape")
    except OSError:
        target = b""  # a FIFO, a device, a folder
    return _UNREADABLE + target


def _read(path: Path, workspace: Path) -> bytes:
    """A git file's bytes (empty when unreadable): no link followed inside the workspace; outside
    it (a worktree's git directory) the file itself may be no link."""
    where = Path(os.path.abspath(path))
    if where.is_relative_to(os.path.realpath(workspace)) or where.is_relative_to(os.path.abspath(workspace)):
        return read_workspace_file(path, workspace) or b""
    return read_regular_file(path) or b""


def _program_keys(config: bytes) -> list[str]:
    """The keys of a git config text that `_RUNS` names, as `section.sub.key=value`."""
    return [
        f"{key}={_USERINFO.sub('://***@', value)[:80]}"
        for key, value in _entries_of(config)
        if _RUNS.match(key)
    ]


def _entries_of(config: bytes) -> list[tuple[str, str]]:
    """A git config text's `(section.sub.key, value)` pairs, keys lower-cased (a loose reading:
    enough to see what a file names, not to resolve what git would use)."""
    found: list[tuple[str, str]] = []
    section = ""
    for raw in config.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if head := re.match(r'\[\s*([^\]\s"]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\](.*)', line):
            section = head[1].lower() + (f".{head[2]}" if head[2] is not None else "")
            line = head[3].strip()
        if not line or line[0] in "#;":
            continue
        key, _, value = line.partition("=")
        found.append((f"{section}.{key.strip().lower()}".lower(), value.strip().strip('"')))
    return found


def _gitlinks(index: Path, workspace: Path) -> frozenset[str]:
    try:
        st = index.lstat()
    except OSError:
        return frozenset()
    return _parse_gitlinks(str(index), str(workspace), st.st_mtime_ns, st.st_size)


@lru_cache(maxsize=32)
def _parse_gitlinks(index: str, workspace: str, _mtime_ns: int, _size: int) -> frozenset[str]:
    """The gitlink paths of a git index file (versions 2 to 4, SHA-1 or SHA-256 object names);
    what cannot be parsed counts as none (the index is git's, the check only reports)."""
    entries = index_entries(_read(Path(index), Path(workspace)))
    return frozenset(name for name, (mode, _hidden) in entries.items() if mode >> 12 == 0o16)


def index_entries(data: bytes) -> dict[str, tuple[int, int]]:
    """A git index's entries: path -> (mode, hiding flags), the flags non-zero when the entry is
    marked assume-unchanged or skip-worktree (git then no longer shows changes to it). Versions 2
    to 4, SHA-1 or SHA-256 object names; what cannot be parsed counts as no entries."""
    for hash_size in (20, 32):
        try:
            return _entries(data, hash_size)
        except (ValueError, struct.error, IndexError):
            continue
    return {}


def _entries(data: bytes, hash_size: int) -> dict[str, tuple[int, int]]:
    signature, version, count = struct.unpack_from(">4sII", data, 0)
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise ValueError("not a git index")
    pos, previous = 12, b""
    entries: dict[str, tuple[int, int]] = {}
    for _ in range(count):
        start = pos
        mode = struct.unpack_from(">I", data, pos + 24)[0]
        pos += 40 + hash_size
        flags = struct.unpack_from(">H", data, pos)[0]
        pos += 2
        hidden = flags & 0x8000  # assume-valid (`update-index --assume-unchanged`)
        if version >= 3 and flags & 0x4000:
            hidden |= struct.unpack_from(">H", data, pos)[0] & 0x4000  # skip-worktree
            pos += 2
        if version == 4:
            byte = data[pos]  # git's offset varint: each continuation byte adds one first
            pos += 1
            strip = byte & 0x7F
            while byte & 0x80:
                byte = data[pos]
                pos += 1
                strip = ((strip + 1) << 7) | (byte & 0x7F)
            end = data.index(b"\0", pos)
            name = previous[: len(previous) - strip] + data[pos:end]
            pos = end + 1
        else:
            end = data.index(b"\0", pos)
            name = data[pos:end]
            pos = start + ((end - start + 8) // 8) * 8  # NUL-padded to a multiple of 8
        previous = name
        entries[name.decode("utf-8", "surrogateescape")] = (mode, hidden)  # mode 160000: a gitlink
    if pos > len(data):
        raise ValueError("truncated index")
    return entries
