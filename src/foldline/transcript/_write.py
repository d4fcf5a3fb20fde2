"""The single transcript writer: `TranscriptWriter`, its session lock and fsync policy (design.md §2).

Invariants:
- Nothing already in the file is rewritten. The one exception is repair of a *torn tail* (the
  bytes of an append that never completed): before appending, `TranscriptWriter.resume` copies
  them to `<file>.corrupt-<timestamp>` and truncates them away, so a new record is never glued
  onto a fragment.
- One writer per session: `flock(LOCK_EX|LOCK_NB)` on the sidecar `<file>.lock`, which holds the
  holder's pid. The kernel drops the lock when the holder dies, so a crashed session is never
  stuck; a second live writer gets `TranscriptLockedError` naming the holder.
- Each record reaches the file in one `os.write` of the complete line (looping only on short
  writes), under `O_APPEND`. A failed write is cut back to the last good offset.
- Any write or fsync error raises `TranscriptWriteError` and poisons the writer: no further record
  goes through it (after a failed fsync the kernel may have dropped the dirty pages, so retrying
  could report success for lost data). Records written before the failure stay readable.

Fsync policy (`config.TranscriptConfig.fsync`):
- `"always"`: fsync after every record.
- `"boundaries"` (default): fsync only when the caller passes `append(..., sync=True)` or calls
  `sync()`. Callers do so after persisting a `tool_use` (before the tool runs) and before each API
  call, so a crash loses at most the streaming output since the last boundary.
- `"never"`: no fsync at all (tests, benchmarks). A process crash still loses nothing written;
  only a power loss or OS crash can.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import os
import threading
import time
import typing
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Self

from foldline._json import encode_line
from foldline.config import FsyncPolicy, TranscriptConfig
from foldline.errors import (
    SessionsFolderError,
    TranscriptError,
    TranscriptLockedError,
    TranscriptWriteError,
    UserError,
)
from foldline.timeline import AnyRecord, UnknownRecord, now_iso
from foldline.transcript._format import LoadResult, TranscriptHeader
from foldline.transcript._read import load_transcript

_WRITE_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
_FSYNC_POLICIES: tuple[FsyncPolicy, ...] = typing.get_args(FsyncPolicy)


def _lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


class _SessionLock:
    """The single-writer lock: flock on `<file>.lock`, which names the holder's pid."""

    def __init__(self, path: Path) -> None:
        fd = os.open(_lock_path(path), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise TranscriptLockedError(str(path), holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid only names the holder in error messages; a full disk must not block resume
        self._fd: int | None = fd

    def release(self) -> None:
        """Drop the lock (closing the descriptor releases the flock)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass  # a stale pid in the file is harmless: the flock, not the pid, is the lock
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


@functools.cache
def _foldline_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("foldline")
    except PackageNotFoundError:
        return "unknown"


def _resolve_policy(fsync: FsyncPolicy | None) -> FsyncPolicy:
    policy = TranscriptConfig().fsync if fsync is None else fsync
    if policy not in _FSYNC_POLICIES:
        raise UserError(f"fsync policy must be one of {', '.join(_FSYNC_POLICIES)}, not {policy!r}")
    return policy


class TranscriptWriter:
    """The one process appending to a session's transcript (open it with `create` or `resume`).

    Thread-safe: appends from several threads are serialized. Use as a context manager, or call
    `close()`, to release the session lock.
    """

    def __init__(
        self, path: Path, fd: int, lock: _SessionLock, header: TranscriptHeader, size: int, fsync: FsyncPolicy
    ) -> None:
        self.path = path
        self.header = header
        self.fsync_policy: FsyncPolicy = fsync
        self._fd = fd
        self._lock = lock
        self._size = size
        self._mutex = threading.Lock()
        self._poisoned: str | None = None
        self._closed = False

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        session_id: str,
        cwd: str = "",
        fsync: FsyncPolicy | None = None,
    ) -> TranscriptWriter:
        """Start a new session file holding only its header.

        The header is written to a temporary file and linked into place, so the transcript never
        exists without one.

        Args:
            path: Where the transcript goes (see `session_path`); parent directories are created.
            session_id: The session's id, recorded in the header.
            cwd: The working directory the session starts in.
            fsync: `"always"`, `"boundaries"` or `"never"`; default `TranscriptConfig().fsync`.

        Raises:
            TranscriptError: The file already exists.
            TranscriptLockedError: Another process holds the session.
            TranscriptWriteError: The header could not be written.
        """
        file = Path(path)
        policy = _resolve_policy(fsync)
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SessionsFolderError(str(file.parent), exc.strerror or str(exc)) from exc
        if file.exists():
            raise TranscriptError(f"{file}: already exists; resume it instead of creating it")
        lock = _SessionLock(file)
        try:
            header = TranscriptHeader(
                session_id=session_id, created_at=now_iso(), cwd=cwd, foldline_version=_foldline_version()
            )
            line = encode_line(header)
            _publish(file, line, durable=policy != "never")
            fd = os.open(file, _WRITE_FLAGS, 0o600)
        except BaseException:
            lock.release()
            raise
        return cls(file, fd, lock, header, len(line), policy)

    @classmethod
    def resume(
        cls, path: str | os.PathLike[str], *, fsync: FsyncPolicy | None = None
    ) -> tuple[TranscriptWriter, LoadResult]:
        """Open an existing session for appending, after loading it and repairing a torn tail.

        A torn tail is copied to `<file>.corrupt-<timestamp>` (named in `LoadResult.sidecar`) and
        truncated away before anything is appended, so no record is ever glued onto a fragment.

        Args:
            path: The session's `.jsonl` file.
            fsync: `"always"`, `"boundaries"` or `"never"`; default `TranscriptConfig().fsync`.

        Returns:
            The writer and what was loaded (the records to rebuild the timeline from).

        Raises:
            TranscriptError: The file does not exist.
            TranscriptLockedError: Another process holds the session.
            TranscriptFormatError: The file is not a transcript this version can read.
            TranscriptWriteError: The torn tail could not be repaired.
        """
        file = Path(path)
        policy = _resolve_policy(fsync)
        if not file.is_file():
            raise TranscriptError(f"{file}: no such transcript")
        lock = _SessionLock(file)
        try:
            # Load only once the lock is held: nobody else may append between reading and repairing.
            result = load_transcript(file)
            fd = os.open(file, _WRITE_FLAGS, 0o600)
            try:
                result = _repair(file, fd, result, durable=policy != "never")
            except BaseException:
                os.close(fd)
                raise
        except BaseException:
            lock.release()
            raise
        return cls(file, fd, lock, result.header, result.good_size, policy), result

    @property
    def size(self) -> int:
        """Bytes in the file after the last successful append."""
        return self._size

    @property
    def closed(self) -> bool:
        """True once `close()` has run."""
        return self._closed

    @property
    def poisoned(self) -> bool:
        """True once a write or fsync failed: the writer accepts nothing more."""
        return self._poisoned is not None

    def append(self, record: AnyRecord, *, sync: bool = False) -> None:
        """Append one record as one line.

        Args:
            record: The record; an `UnknownRecord` is written back exactly as it was read.
            sync: A durability boundary (a tool is about to run, an API call is about to go out):
                fsync now under the `"boundaries"` policy.

        Raises:
            TranscriptWriteError: The write or fsync failed (the writer is now poisoned; records
                appended before are intact).
            msgspec.EncodeError, TypeError, UnicodeEncodeError: The record holds a value JSON cannot
                express; nothing was written.
        """
        data = encode_line(record.raw if isinstance(record, UnknownRecord) else record)
        with self._mutex:
            self._check_usable()
            self._write(data)
            if self.fsync_policy == "always" or (sync and self.fsync_policy == "boundaries"):
                self._fsync()

    def sync(self) -> None:
        """Make every appended record durable now (a no-op under the `"never"` policy).

        Raises:
            TranscriptWriteError: fsync failed (the writer is now poisoned).
        """
        with self._mutex:
            self._check_usable()
            if self.fsync_policy != "never":
                self._fsync()

    def close(self) -> None:
        """Sync (unless the policy is `"never"` or the writer is poisoned) and release the lock.

        Raises:
            TranscriptWriteError: The final fsync failed; the lock is released all the same.
        """
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            try:
                if self._poisoned is None and self.fsync_policy != "never":
                    self._fsync()
            finally:
                os.close(self._fd)
                self._lock.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _check_usable(self) -> None:
        if self._closed:
            raise TranscriptWriteError(f"{self.path}: the transcript writer is closed")
        if self._poisoned is not None:
            raise TranscriptWriteError(
                f"{self.path}: no longer writable after an earlier failure ({self._poisoned}); "
                "resume the session to continue"
            )

    def _write(self, data: bytes) -> None:
        start, done = self._size, 0
        with memoryview(data) as view:
            try:
                while done < len(data):
                    written = os.write(self._fd, view[done:])
                    if written == 0:  # never for a regular file; guards against spinning forever
                        raise OSError(errno.EIO, "write() accepted no bytes")
                    done += written
            except OSError as exc:
                self._fail(f"appending a {len(data)}-byte record", exc, cut_back_to=start)
            except BaseException:
                # Interrupted (Ctrl-C) between two parts of a short write: the next record must not
                # be glued onto this one's first part.
                if done and not self._cut_back(start):
                    self._poisoned = "an interrupted append could not be cut back"
                raise
        self._size = start + done

    def _fsync(self) -> None:
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self._fail("fsync", exc, cut_back_to=None)

    def _cut_back(self, size: int) -> bool:
        try:
            os.ftruncate(self._fd, size)
        except OSError:
            return False
        return True

    def _fail(self, action: str, exc: OSError, *, cut_back_to: int | None) -> typing.NoReturn:
        detail = f"{action} failed: {exc.strerror or exc}"
        intact = f"every record before byte {self._size} is intact"
        if cut_back_to is not None and not self._cut_back(cut_back_to):
            intact += " (the partial record after it is moved aside on the next resume)"
        self._poisoned = detail
        raise TranscriptWriteError(
            f"{self.path}: {detail}; {intact}; this writer accepts no further records "
            "(free space or fix the disk, then resume the session)"
        ) from exc


def _publish(path: Path, data: bytes, *, durable: bool) -> None:
    """Create `path` holding `data` atomically: temp file, fsync, hard link, fsync the directory."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{time.monotonic_ns()}")
    try:
        _create_file(tmp, data, durable=durable)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise TranscriptError(f"{path}: already exists; resume it instead of creating it") from None
    except OSError as exc:
        raise TranscriptWriteError(f"{path}: could not create the transcript: {exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    if durable:
        _fsync_dir(path.parent)


def _repair(path: Path, fd: int, result: LoadResult, *, durable: bool) -> LoadResult:
    """Move a torn tail to a sidecar and cut it off; terminate an unterminated last record."""
    try:
        if result.torn_tail:
            sidecar = _write_sidecar(path, result.torn_tail, durable=durable)
            os.ftruncate(fd, result.good_size)
            result = replace(result, sidecar=sidecar)
        elif result.unterminated:
            _write_fully(fd, b"\n")
            result = replace(result, good_size=result.good_size + 1)
        if durable and (result.torn_tail or result.unterminated):
            os.fsync(fd)
    except OSError as exc:
        raise TranscriptWriteError(f"{path}: could not repair the end of the transcript: {exc}") from exc
    return result


def _write_sidecar(path: Path, data: bytes, *, durable: bool) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for n in range(1000):
        sidecar = path.with_name(f"{path.name}.corrupt-{stamp}" + (f"-{n}" if n else ""))
        try:
            _create_file(sidecar, data, durable=durable)
        except FileExistsError:
            continue
        if durable:
            _fsync_dir(path.parent)
        return sidecar
    raise OSError(errno.EEXIST, f"no free sidecar name for {path}")


def _create_file(path: Path, data: bytes, *, durable: bool) -> None:
    """Create `path` (FileExistsError if it exists) holding `data`, fsynced when `durable`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        _write_fully(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def _write_fully(fd: int, data: bytes) -> None:
    with memoryview(data) as view:
        done = 0
        while done < len(data):
            done += os.write(fd, view[done:])


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
