"""The checkpoint store: a tool call's change applied as a transaction, and its undo (§9.6).

Owns `CheckpointStore`: where a session's layers and checkpoints live (`<workspace>/.foldline/undo`,
on the workspace's filesystem so every step is a rename, never a copy), `apply` (a `Diff` from a
layer into the workspace, what it replaced or deleted moved into the checkpoint), `undo` (the
last applied call back), `rewind` (every call of the last turns back), `recover` (an apply or undo
cut off by a kill finished at the next start), `checkpoints` and `prune`.

A checkpoint is a folder holding `manifest.json` (the operations, in order, and the state:
`applying`, `applied`, `undoing`, `undone`), `old/` (what the call replaced or deleted, moved
there whole: an undo of a 1 GB deletion is renames) and, after an undo, `undone/` (what the call
had put in place: undoing loses nothing either). Operations are renames that are done exactly
when their destination exists, so replaying the list after a crash finishes the transaction:
the workspace ends wholly as before or wholly as after.

Invariants:
- Nothing is overwritten: a rename whose destination exists is not made. A path changed by
  someone else while a command ran (its ctime is newer than the layer) is a conflict: the
  user's version stays, the command's is kept in the checkpoint's `conflict/`, and it is said.
  The same on undo: a path changed since the call stays, and the earlier version is kept.
- One apply or undo at a time per workspace (an `flock` on the store's lock file).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from foldline import _json
from foldline.containment.layer import Change, Diff, Layer, new_layer

__all__ = ["Applied", "Checkpoint", "CheckpointStore", "Undone", "store_root"]

State = Literal["applying", "applied", "undoing", "undone"]
_IGNORE_ALL = "# foldline's undo store: never committed\n*\n"
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def store_root(workspace: Path) -> Path:
    """Where a workspace's layers and checkpoints live."""
    return workspace / ".foldline" / "undo"


@dataclass
class Applied:
    """What `apply` did."""

    checkpoint: Path | None
    """None when the change was empty: no checkpoint is kept."""
    summary: str
    conflicts: list[str] = field(default_factory=list)
    """Paths someone else changed while the command ran: theirs kept, the command's set aside."""
    refused: list[str] = field(default_factory=list)
    """Paths the policy held and the user did not approve: not applied, kept in `refused/`."""

    def line(self) -> str:
        """The one line the user sees after the call."""
        parts = [self.summary]
        if self.refused:
            parts.append(f"{len(self.refused)} held back (not applied)")
        if self.conflicts:
            parts.append(f"{len(self.conflicts)} conflict(s): yours kept")
        if self.checkpoint is not None:
            parts.append("/undo")
        return " · ".join(parts)


@dataclass
class Undone:
    """What `undo` did: the call undone, and the paths it could not put back."""

    checkpoint: Path
    what: str
    restored: int
    kept: list[str] = field(default_factory=list)
    """Paths changed since the call: the current version stays, the earlier one is in the store."""

    def line(self) -> str:
        kept = (
            f"; {len(self.kept)} changed since, kept as they are: {', '.join(self.kept[:5])}"
            if self.kept
            else ""
        )
        return f"undid {self.what}: {self.restored} path(s) restored{kept}"


@dataclass(frozen=True)
class Checkpoint:
    """One applied call, as `CheckpointStore.checkpoints` lists it."""

    path: Path
    session: str
    seq: int
    turn: int
    tool: str
    what: str
    state: State
    created: float
    bytes: int
    changed: bool
    """Whether the call changed the workspace (a checkpoint may hold only what was held back)."""


class CheckpointStore:
    """A session's checkpoints in a workspace (see the module docstring)."""

    def __init__(self, workspace: Path, session_id: str) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        self.root = store_root(self.workspace)
        self.session_id = session_id
        self.layers_dir = self.root / "layers"
        self.session_dir = self.root / "sessions" / session_id

    # --- layers -------------------------------------------------------------------------------------

    def new_layer(self) -> Layer:
        """A fresh layer for one call (the store made first, ignored by git)."""
        self._ensure()
        return new_layer(self.layers_dir)

    def discard(self, layer: Layer) -> None:
        """Remove a layer whose change was not applied (or is applied: what is left is empty)."""
        try:  # the common case, a layer left empty, in five system calls
            for folder in (layer.upper, layer.work / "work", layer.work):
                if folder.exists():
                    os.rmdir(folder)
            os.unlink(layer.root / "started")
            os.rmdir(layer.root)
        except OSError:
            shutil.rmtree(layer.root, ignore_errors=True)

    # --- apply --------------------------------------------------------------------------------------

    def apply(
        self,
        layer: Layer,
        diff: Diff,
        *,
        approved: frozenset[str] | None = None,
        tool: str,
        what: str,
        turn: int,
    ) -> Applied:
        """Move `diff` from `layer` into the workspace; what it replaces or deletes goes into a new
        checkpoint. `approved`: the paths the policy lets through (None: all)."""
        if not diff.changes:
            self.discard(layer)
            return Applied(None, "no change")
        with self._locked():
            seq = self._next_seq()
            ckpt = self.session_dir / f"{seq:06d}"
            ckpt.mkdir(parents=True)
            ops: list[dict[str, Any]] = []
            conflicts, refused, applied = [], [], []
            for change in diff.changes:
                if approved is not None and change.path not in approved:
                    refused.append(change.path)
                    if change.kind != "deleted":
                        ops.append(_move(f"up:{change.path}", f"refused:{change.path}"))
                    continue
                if self._conflicts(change, layer):
                    conflicts.append(change.path)
                    if change.kind != "deleted":
                        ops.append(_move(f"up:{change.path}", f"conflict:{change.path}"))
                    continue
                ops += _ops_for(change)
                applied.append(change)
            manifest: dict[str, Any] = {
                "version": 1,
                "session": self.session_id,
                "seq": seq,
                "turn": turn,
                "tool": tool,
                "what": what,
                "created": time.time(),
                "state": "applying",
                "layer": str(layer.root),
                "ops": ops,
                "dirs": self._dirs_before(applied),
                "summary": Diff(applied).summary(),
                "refused": refused,
                "conflicts": conflicts,
            }
            _write_manifest(ckpt, manifest)
            self._run(ckpt, manifest)
            manifest["placed"] = self._identities(ckpt, ops)
            manifest["state"] = "applied"
            _write_manifest(ckpt, manifest)
            self.discard(layer)
            return Applied(ckpt, str(manifest["summary"]), conflicts, refused)

    def _conflicts(self, change: Change, layer: Layer) -> bool:
        """Whether the workspace path changed after the layer was made (by the user, or by a
        command applied meanwhile): what the command saw is no longer what is there."""
        path = self.workspace / change.path
        if change.kind == "created":
            return os.path.lexists(path)
        return any(st.st_ctime_ns > layer.started_ns for st in _stats(path))

    def _dirs_before(self, changes: list[Change]) -> dict[str, list[int]]:
        """The mode and times of each folder an apply writes into, to put back on undo."""
        found: dict[str, list[int]] = {}
        for change in changes:
            parent = str(Path(change.path).parent)
            for rel in (parent, change.path) if change.kind == "mode" else (parent,):
                if rel in found:
                    continue
                try:
                    st = os.lstat(self.workspace / rel)
                except OSError:
                    continue
                found[rel] = [st.st_mode, st.st_atime_ns, st.st_mtime_ns]
        return found

    def _identities(self, ckpt: Path, ops: list[dict[str, Any]]) -> dict[str, list[int]]:
        placed: dict[str, list[int]] = {}
        for op in ops:
            if op["op"] == "move" and op["dst"].startswith("ws:"):
                st = _lstat(self.workspace / op["dst"].removeprefix("ws:"))
                if st is not None:
                    placed[op["dst"]] = [st.st_ino, st.st_mtime_ns]
        return placed

    # --- undo ---------------------------------------------------------------------------------------

    def undo(self, checkpoint: Path | None = None) -> Undone | None:
        """Undo `checkpoint`, by default this session's last applied one; None when there is none."""
        with self._locked():
            if checkpoint is None:
                applied = [
                    c for c in self.checkpoints(all_sessions=False) if c.state == "applied" and c.changed
                ]
                if not applied:
                    return None
                checkpoint = applied[-1].path
            return self._undo(checkpoint)

    def rewind(self, turn: int) -> list[Undone]:
        """Undo, newest first, every applied call of this session made at `turn` or later."""
        with self._locked():
            calls = [
                c
                for c in self.checkpoints(all_sessions=False)
                if c.state == "applied" and c.turn >= turn and c.changed
            ]
            return [self._undo(c.path) for c in reversed(calls)]

    def _undo(self, ckpt: Path) -> Undone:
        manifest = _read_manifest(ckpt)
        placed: dict[str, list[int]] = manifest.get("placed", {})
        kept: list[str] = []
        skip: set[str] = set()
        if manifest["state"] == "applied":
            for dst, (ino, mtime) in placed.items():
                st = _lstat(self.workspace / dst.removeprefix("ws:"))
                if st is not None and (st.st_ino, st.st_mtime_ns) != (ino, mtime):
                    skip.add(dst.removeprefix("ws:"))
                    kept.append(dst.removeprefix("ws:"))
        reverse: list[dict[str, Any]] = []
        for op in reversed(manifest["ops"]):
            if op["op"] == "chmod":
                reverse.append({"op": "chmod", "path": op["path"], "mode": op["old"], "old": op["mode"]})
                continue
            src, dst = op["src"], op["dst"]
            rel = src.partition(":")[2]
            if (not dst.startswith("ws:") and not src.startswith("ws:")) or rel in skip:
                continue  # set aside (refused, conflict), or changed since: left as it is
            if dst.startswith("ws:"):
                reverse.append(_move(dst, f"undone:{rel}"))
            else:
                reverse.append(_move(dst, src))
        if manifest["state"] == "applied":
            manifest["undo_ops"] = reverse
            manifest["state"] = "undoing"
            manifest["kept"] = kept
            _write_manifest(ckpt, manifest)
        restored = self._run(ckpt, {"ops": manifest.get("undo_ops", reverse)})
        for rel, (mode, atime, mtime) in sorted(manifest["dirs"].items(), key=lambda kv: -len(kv[0])):
            path = self.workspace / rel
            st = _lstat(path)
            if st is not None and stat.S_ISDIR(st.st_mode):
                os.chmod(path, stat.S_IMODE(mode), follow_symlinks=False)
                os.utime(path, ns=(atime, mtime), follow_symlinks=False)
        manifest["state"] = "undone"
        _write_manifest(ckpt, manifest)
        return Undone(ckpt, f"{manifest['tool']} `{manifest['what']}`", restored, manifest.get("kept", kept))

    # --- recovery, listing, pruning ------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Finish what a kill cut off: an apply or undo is replayed to its end; a layer no
        checkpoint refers to (its command never finished) is removed. Returns what was done."""
        if not self.root.is_dir():
            return []
        said: list[str] = []
        with self._locked():
            referenced: set[str] = set()
            for entry in self.checkpoints(all_sessions=True):
                manifest = _read_manifest(entry.path)
                if entry.state == "applying":
                    self._run(entry.path, manifest)
                    manifest["placed"] = self._identities(entry.path, manifest["ops"])
                    manifest["state"] = "applied"
                    _write_manifest(entry.path, manifest)
                    said.append(f"finished applying {entry.tool} `{entry.what}` (cut off before)")
                elif entry.state == "undoing":
                    self._undo(entry.path)
                    said.append(f"finished undoing {entry.tool} `{entry.what}` (cut off before)")
                referenced.add(str(manifest.get("layer")))
            for layer in _children(self.layers_dir):
                if _owner_alive(layer):
                    continue  # a command of a session still running
                shutil.rmtree(layer, ignore_errors=True)
                if str(layer) not in referenced:
                    said.append(
                        f"dropped the unapplied change of a command that did not finish ({layer.name})"
                    )
        return said

    def checkpoints(self, *, all_sessions: bool) -> list[Checkpoint]:
        """Checkpoints oldest first: this session's, or every session's in the workspace."""
        sessions = _children(self.root / "sessions") if all_sessions else [self.session_dir]
        found: list[Checkpoint] = []
        for session in sessions:
            for ckpt in _children(session):
                try:
                    m = _read_manifest(ckpt)
                except (OSError, ValueError):
                    continue
                found.append(
                    Checkpoint(
                        ckpt,
                        m["session"],
                        m["seq"],
                        m["turn"],
                        m["tool"],
                        m["what"],
                        m["state"],
                        m["created"],
                        _size(ckpt),
                        m["summary"] != "no change",
                    )
                )
        return sorted(found, key=lambda c: (c.created, c.seq))

    def prune(self, *, max_bytes: int, max_age_s: float, now: float | None = None) -> list[Checkpoint]:
        """Delete the oldest checkpoints of every session until the store holds at most `max_bytes`
        and none is older than `max_age_s`; returns those deleted (they can no longer be undone)."""
        now = time.time() if now is None else now
        with self._locked():
            entries = [c for c in self.checkpoints(all_sessions=True) if c.state in ("applied", "undone")]
            total = sum(c.bytes for c in entries)
            dropped: list[Checkpoint] = []
            for entry in entries:
                if total <= max_bytes and now - entry.created <= max_age_s:
                    continue
                _remove_tree(entry.path)
                total -= entry.bytes
                dropped.append(entry)
            return dropped

    # --- plumbing -----------------------------------------------------------------------------------

    def _ensure(self) -> None:
        if self.layers_dir.is_dir():
            return
        self.layers_dir.mkdir(parents=True, exist_ok=True)
        ignore = self.root / ".gitignore"
        if not ignore.exists():
            ignore.write_text(_IGNORE_ALL, encoding="utf-8")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._ensure()
        with _LOCKS_GUARD:
            lock = _LOCKS.setdefault(str(self.root), threading.Lock())
        with lock:
            fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _next_seq(self) -> int:
        numbers = [int(p.name) for p in _children(self.session_dir) if p.name.isdigit()]
        return max(numbers, default=0) + 1

    def _run(self, ckpt: Path, manifest: dict[str, Any]) -> int:
        """Carry out the operations; each is done exactly when its destination exists, so a
        replay after a crash skips what was done. Returns the renames made."""
        layer = manifest.get("layer")
        moved = 0
        made: set[Path] = set()  # folders known to exist: one mkdir per folder, not per file
        for op in manifest["ops"]:
            if op["op"] == "chmod":
                path = self.workspace / op["path"]
                if _lstat(path) is not None:
                    os.chmod(path, stat.S_IMODE(op["mode"]), follow_symlinks=False)
                continue
            src = self._path(ckpt, op["src"], layer)
            dst = self._path(ckpt, op["dst"], layer)
            if os.path.lexists(dst) or not os.path.lexists(src):
                continue
            if dst.parent not in made:
                dst.parent.mkdir(parents=True, exist_ok=True)
                made.add(dst.parent)
            os.rename(src, dst)
            moved += 1
        _fsync_dir(self.workspace)
        return moved

    def _path(self, ckpt: Path, ref: str, layer: str | None) -> Path:
        where, _, rel = ref.partition(":")
        if where == "ws":
            return self.workspace / rel
        if where == "up":
            return Path(str(layer)) / "upper" / rel
        return ckpt / where / rel


def _ops_for(change: Change) -> list[dict[str, Any]]:
    rel = change.path
    if change.kind == "created":
        return [_move(f"up:{rel}", f"ws:{rel}")]
    if change.kind == "deleted":
        return [_move(f"ws:{rel}", f"old:{rel}")]
    if change.kind == "mode":
        return [{"op": "chmod", "path": rel, "mode": change.new_mode, "old": change.old_mode}]
    return [_move(f"ws:{rel}", f"old:{rel}"), _move(f"up:{rel}", f"ws:{rel}")]


def _owner_alive(layer: Path) -> bool:
    """Whether the process that made `layer` (its pid in the `started` marker) still runs."""
    try:
        pid = int((layer / "started").read_text(encoding="utf-8") or 0)
    except (OSError, ValueError):
        return False
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _move(src: str, dst: str) -> dict[str, Any]:
    return {"op": "move", "src": src, "dst": dst}


def _stats(path: Path) -> Iterator[os.stat_result]:
    """`lstat` of `path` and, for a folder, of everything under it (never through a link)."""
    st = _lstat(path)
    if st is None:
        return
    yield st
    if stat.S_ISDIR(st.st_mode):
        for folder, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                inner = _lstat(Path(folder) / name)
                if inner is not None:
                    yield inner


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _size(folder: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            st = _lstat(Path(root) / name)
            total += st.st_blocks * 512 if st is not None else 0
    return total


def _remove_tree(path: Path) -> None:
    """Delete a checkpoint, making the read-only folders it holds writable first."""
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            folder = Path(root) / name
            if not folder.is_symlink():
                os.chmod(folder, 0o700)
    shutil.rmtree(path, ignore_errors=True)


def _write_manifest(ckpt: Path, manifest: dict[str, Any]) -> None:
    """Replace the manifest atomically and durably: the state it names is the truth after a crash."""
    tmp = ckpt / "manifest.json.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, _json.dumps(manifest))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, ckpt / "manifest.json")
    _fsync_dir(ckpt)


def _read_manifest(ckpt: Path) -> dict[str, Any]:
    data = _json.loads((ckpt / "manifest.json").read_bytes())
    if not isinstance(data, dict):
        raise ValueError(f"{ckpt / 'manifest.json'} is not a JSON object")
    return data


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
