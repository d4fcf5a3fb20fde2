"""The copy-on-write layer a sandboxed command writes to, and the final diff read from it (§9.6).

Owns `Layer` (one command's upper and work folders, kept on the workspace's filesystem so that
applying a change is a rename), `layer_argv` (the `unshare … mount -t overlay …` prefix that puts
the layer over the workspace in a mount namespace of the command's own, before bubblewrap starts),
`probe_layer` (whether this machine can do that, found once at start) and `read_diff` (what the
command changed, as a list of `Change`s).

Why a layer: a static checker cannot see what `rm -rf build`, `git clean -fdx` or a script will
delete, and a deletion in place cannot be taken back. On the layer nothing happens to the
workspace until foldline has seen the whole final change: every created, modified and deleted
path, modes, links and git's index included. Then it is held to one policy
(`containment.policy`) and applied as a transaction with its undo (`containment.checkpoints`).

What the kernel leaves in the upper folder (overlayfs with `userxattr`, checked on kernel 6.x):
a new or changed file whole (a changed one is copied up entire); a deleted name as a *whiteout*,
a character device 0:0; a folder deleted and made again, or made where a file was, carries
`user.overlay.opaque=y`; a folder only written into is a plain folder holding what changed.

Invariants:
- `read_diff` never follows a link and opens only regular files, with a byte cap, and stops past
  `layer_max_entries` entries or `layer_read_timeout_s` (then the change is refused whole: a
  change that cannot be seen whole is not applied).
- The layer lives under the store's `layers/` folder, which the sandbox hides from the command.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from foldline.errors import ToolError

__all__ = ["Change", "ChangeKind", "Diff", "Layer", "layer_argv", "new_layer", "probe_layer", "read_diff"]

ChangeKind = Literal["created", "modified", "deleted", "replaced", "mode"]
"""`created`: nothing was there; `modified`: a file or link of the same type changed; `deleted`:
the path is gone; `replaced`: a folder replaced whole (deleted and made again) or the type changed;
`mode`: a folder that stayed, with a new mode."""

_OPAQUE = "user.overlay.opaque"
_UNSAFE_IN_OPTIONS = (",", ":", "\\", "\n")
"""Characters overlayfs's mount options would read as separators: a layer path holding one is
not mounted (the layer is then unavailable, said at start)."""


@dataclass(frozen=True)
class Layer:
    """One command's copy-on-write layer: `root/upper` receives its writes, `root/work` is the
    kernel's scratch folder; both on the workspace's filesystem."""

    root: Path
    started_ns: int
    """The layer's creation time on the filesystem's clock (a marker file's ctime): a workspace
    path whose ctime is later changed while the command ran (the user, another command)."""

    @property
    def upper(self) -> Path:
        return self.root / "upper"

    @property
    def work(self) -> Path:
        return self.root / "work"


def new_layer(layers_dir: Path) -> Layer:
    """Make the folders of a new layer under `layers_dir` (created when missing)."""
    root = layers_dir / f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    os.mkdir(root)
    os.mkdir(root / "upper")
    os.mkdir(root / "work")
    fd = os.open(root / "started", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, str(os.getpid()).encode())  # whose it is: `recover` leaves a live one's alone
        started = os.fstat(fd).st_ctime_ns
    finally:
        os.close(fd)
    return Layer(root, started)


def layer_argv(unshare: str, layer: Layer, workspace: Path, command: list[str]) -> list[str]:
    """`command` (a bwrap argv) started in a user and mount namespace of its own in which the
    layer is mounted over `workspace`. `unshare` execs the shell, which execs `command`: one pid,
    so the process group and bwrap's `--die-with-parent` are as without the layer."""
    options = f"userxattr,lowerdir={workspace},upperdir={layer.upper},workdir={layer.work}"
    script = 'mount -t overlay foldline -o "$1" "$2" && shift 2 && exec "$@"'
    return [
        unshare, "--user", "--map-root-user", "--mount", "--propagation", "private",
        "/bin/sh", "-c", script, "sh", options, str(workspace), *command,
    ]  # fmt: skip


def probe_layer(unshare: str | None, layers_dir: Path, workspace: Path, timeout_s: float) -> str | None:
    """Why the layer cannot be used here, or None when it can: mount one over a scratch folder
    and delete a file through it, the way every command will.

    The probe runs where the layers will live (`layers_dir`, on the workspace's filesystem)."""
    import shutil
    import subprocess

    if unshare is None:
        return "`unshare` (util-linux) is not installed"
    if any(c in str(p) for p in (workspace, layers_dir) for c in _UNSAFE_IN_OPTIONS):
        return "the workspace path holds a character overlayfs options cannot carry (, : \\)"
    try:
        layers_dir.mkdir(parents=True, exist_ok=True)
        if layers_dir.stat().st_dev != workspace.stat().st_dev:
            return f"{layers_dir} is not on the workspace's filesystem"
        layer = new_layer(layers_dir)
    except OSError as e:
        return f"cannot make the layer's folders: {e}"
    lower = layer.root / "lower"
    try:
        lower.mkdir()
        (lower / "f").write_bytes(b"x")
        argv = layer_argv(unshare, layer, lower, ["/bin/rm", str(lower / "f")])
        done = subprocess.run(argv, capture_output=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"overlayfs in a user namespace failed: {said[-1] if said else done.returncode}"
        if not (lower / "f").exists() or not _is_whiteout(os.lstat(layer.upper / "f")):
            return "overlayfs did not record the deletion in its upper folder"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"overlayfs could not be tried: {e}"
    finally:
        shutil.rmtree(layer.root, ignore_errors=True)
    return None


@dataclass(frozen=True)
class Change:
    """One path the command changed, relative to the workspace."""

    path: str
    kind: ChangeKind
    entry: Literal["file", "dir", "link", "other", "absent"]
    """What is there after the command (`absent` for a deletion)."""
    files: int = 1
    """Entries under a created, deleted or replaced folder (itself included): what it weighs."""
    old_mode: int | None = None
    new_mode: int | None = None


@dataclass
class Diff:
    """The final change one command made: `changes` in walk order (a folder before what is under it)."""

    changes: list[Change] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the user: `3 files changed, 212 deleted`, or `no change`."""
        written = sum(c.files if c.kind != "mode" else 1 for c in self.changes if c.kind != "deleted")
        deleted = sum(c.files for c in self.changes if c.kind == "deleted")
        parts = [f"{written:,} file{'s' * (written != 1)} changed"] if written else []
        parts += [f"{deleted:,} deleted"] if deleted else []
        return ", ".join(parts) or "no change"


def read_diff(layer: Layer, workspace: Path, *, max_entries: int, timeout_s: float, max_compare: int) -> Diff:
    """The change recorded in `layer`'s upper folder, compared with `workspace` (the lower).

    A file copied up but left as it was (same type, mode, mtime and bytes) is no change.

    Raises:
        ToolError: more than `max_entries` entries, or `timeout_s` passed: the change is too
            large to be seen whole, so it is not applied.
    """
    deadline = time.monotonic() + timeout_s
    diff = Diff()
    seen = 0
    stack = [""]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(layer.upper / folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > max_entries or time.monotonic() > deadline:
                raise ToolError(
                    f"the command changed more than could be read in time ({seen:,} entries): nothing "
                    "it changed was applied to the workspace"
                )
            rel = f"{folder}/{entry.name}" if folder else entry.name
            up = entry.stat(follow_symlinks=False)
            change = _classify(rel, layer.upper / rel, up, workspace / rel, max_compare)
            whole = change is not None and (
                change.kind == "deleted" or (change.entry == "dir" and change.kind != "mode")
            )
            if stat.S_ISDIR(up.st_mode) and not whole:
                stack.append(rel)  # only written into: what changed is inside
            if change is not None and change.files:
                diff.changes.append(change)
    diff.changes.sort(key=lambda c: c.path.split("/"))
    return diff


def _classify(rel: str, upper: Path, up: os.stat_result, lower: Path, max_compare: int) -> Change | None:
    low = _lstat(lower)
    if _is_whiteout(up):
        if low is None:
            return None  # made and removed by the command, or already gone
        return Change(rel, "deleted", "absent", _count(lower, low), old_mode=low.st_mode)
    kind = _entry_kind(up)
    if low is None:
        return Change(rel, "created", kind, _count(upper, up), new_mode=up.st_mode)
    if stat.S_ISDIR(up.st_mode):
        if not stat.S_ISDIR(low.st_mode) or _opaque(upper):
            return Change(rel, "replaced", "dir", _count(lower, low), low.st_mode, up.st_mode)
        if stat.S_IMODE(up.st_mode) != stat.S_IMODE(low.st_mode):
            return Change(rel, "mode", "dir", 1, low.st_mode, up.st_mode)
        return Change(rel, "mode", "dir", 0)  # only a container of changes: not listed
    if stat.S_IFMT(up.st_mode) != stat.S_IFMT(low.st_mode):
        return Change(rel, "replaced", kind, _count(lower, low), low.st_mode, up.st_mode)
    if _same(upper, up, lower, low, max_compare):
        return None
    return Change(rel, "modified", kind, 1, low.st_mode, up.st_mode)


def _same(upper: Path, up: os.stat_result, lower: Path, low: os.stat_result, max_compare: int) -> bool:
    if up.st_mode != low.st_mode:
        return False
    if stat.S_ISLNK(up.st_mode):
        return os.readlink(upper) == os.readlink(lower)
    if not stat.S_ISREG(up.st_mode):
        return up.st_rdev == low.st_rdev
    if up.st_size != low.st_size or up.st_mtime_ns != low.st_mtime_ns or up.st_size > max_compare:
        return False
    return _bytes_equal(upper, lower)


def _bytes_equal(a: Path, b: Path) -> bool:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fa, fb = os.open(a, flags), os.open(b, flags)
    except OSError:
        return False
    try:
        if not (stat.S_ISREG(os.fstat(fa).st_mode) and stat.S_ISREG(os.fstat(fb).st_mode)):
            return False
        while True:
            ca, cb = os.read(fa, 1 << 20), os.read(fb, 1 << 20)
            if ca != cb:
                return False
            if not ca:
                return True
    finally:
        os.close(fa)
        os.close(fb)


def _count(path: Path, st: os.stat_result) -> int:
    if not stat.S_ISDIR(st.st_mode):
        return 1
    total = 1
    for _dirpath, dirs, files in os.walk(path):
        total += len(dirs) + len(files)
    return total


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _opaque(path: Path) -> bool:
    try:
        return os.getxattr(path, _OPAQUE, follow_symlinks=False) == b"y"
    except OSError:
        return False


def _entry_kind(st: os.stat_result) -> Literal["file", "dir", "link", "other"]:
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISLNK(st.st_mode):
        return "link"
    return "other"
