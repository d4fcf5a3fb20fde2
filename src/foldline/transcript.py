"""The transcript store: one append-only JSONL file per session, and resume from it (design.md §2).

Owns the on-disk format (`FORMAT_VERSION`, `TranscriptHeader`), the tolerant reader
(`load_transcript`), the single writer (`TranscriptWriter`) and where session files live
(`session_path`, `list_session_files`). The format is documented in docs/transcript-format.md.

Invariants:
- Line 1 is a `header` record; every later line is one record (`foldline.timeline.AnyRecord`)
  encoded by `foldline._json.encode_line`. Lines are split on `b"\\n"` only, never on Unicode
  line boundaries (design.md F6).
- Nothing already in the file is rewritten. The one exception is repair of a *torn tail* (the
  bytes of an append that never completed): before appending, `TranscriptWriter.resume` copies
  them to `<file>.corrupt-<timestamp>` and truncates them away, so a new record is never glued
  onto a fragment.
- Reading never fails on damaged content after the header: a torn tail is reported as
  `LoadResult.torn_tail`, other damage (garbage, NUL runs, invalid UTF-8, glued `}{` records,
  invalid records) becomes a `LoadWarning` naming the line and byte offset. Records of a `kind`
  this version does not know are kept as `UnknownRecord` (forward compatibility). A missing or
  garbled header, or a newer `format_version`, raises `TranscriptFormatError`.
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
import gc
import logging
import os
import re
import threading
import time
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Self

import msgspec

from foldline._json import decode_json, decode_record, encode_line, raw_decode
from foldline.config import FsyncPolicy, TranscriptConfig
from foldline.errors import (
    TranscriptError,
    TranscriptFormatError,
    TranscriptLockedError,
    TranscriptWriteError,
    UserError,
)
from foldline.timeline import AnyRecord, Record, Timeline, UnknownRecord, now_iso

__all__ = [
    "FORMAT_VERSION",
    "LoadResult",
    "LoadWarning",
    "TranscriptHeader",
    "TranscriptWriter",
    "cwd_slug",
    "list_session_files",
    "load_transcript",
    "open_session",
    "session_path",
]

_log = logging.getLogger(__name__)

FORMAT_VERSION = 1
"""The transcript format this version writes and the newest it reads (see docs/transcript-format.md)."""

_KNOWN_KINDS = frozenset(t.__struct_config__.tag for t in typing.get_args(Record))
_WRITE_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
_FSYNC_POLICIES: tuple[FsyncPolicy, ...] = typing.get_args(FsyncPolicy)
# Where a record may start inside a damaged line: after `}`, whitespace or NUL (a splice or a
# NUL run), or wherever `{"kind"` begins (msgspec writes the tag first).
_RECORD_START = re.compile(r'(?<![^}\x00\s])\{|\{(?="kind")')
# Bounds the raw-decode scan of one damaged line, which hostile input (deep `{"kind":{"kind":...`
# nesting) could otherwise make quadratic; what is left unscanned is reported as garbage.
_MAX_SALVAGE_FAILURES = 1_000
# Deeply nested JSON raises RecursionError from both decoders instead of a decode error.
_DECODE_ERRORS = (msgspec.MsgspecError, RecursionError)


class TranscriptHeader(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="header"):
    """Line 1 of every transcript: what the file is and who wrote it."""

    format_version: int = FORMAT_VERSION
    """Readers refuse a file whose version is newer than theirs (`TranscriptFormatError`)."""
    session_id: str
    created_at: str
    """ISO-8601 UTC time the session was created."""
    cwd: str = ""
    """The working directory the session started in."""
    foldline_version: str = ""


@dataclass(frozen=True, slots=True)
class LoadWarning:
    """Damage skipped while loading: which line, where in the file, and what was wrong."""

    line: int
    """1-based physical line number (lines split on `\\n` only)."""
    offset: int
    """Byte offset in the file of the skipped bytes."""
    reason: str

    def __str__(self) -> str:
        return f"line {self.line} (byte {self.offset}): {self.reason}"


@dataclass(frozen=True)
class LoadResult:
    """Everything `load_transcript` recovered from one file."""

    path: Path
    header: TranscriptHeader
    records: list[AnyRecord]
    """Every readable record in file order, unknown kinds included as `UnknownRecord`."""
    warnings: list[LoadWarning]
    """Damage skipped before the tail; each deserves to be shown to the user."""
    torn_tail: bytes
    """The bytes of an append that never completed (empty when the file ends cleanly)."""
    good_size: int
    """Length of the file without the torn tail: where the next append belongs."""
    unterminated: bool = False
    """The last record is complete but lacks its `\\n` (resume adds it before appending)."""
    sidecar: Path | None = None
    """Set by `TranscriptWriter.resume` when it moved the torn tail to this file."""

    @property
    def clean(self) -> bool:
        """True when nothing was skipped and nothing is torn."""
        return not self.warnings and not self.torn_tail

    def timeline(self) -> Timeline:
        """A fresh `Timeline` of the loaded records, tagged with the header's session id (R2.2)."""
        return Timeline(self.records, session_id=self.header.session_id)

    def notices(self) -> list[str]:
        """Human-readable lines describing every problem found, for the UI."""
        lines = [f"{self.path}: {w} (skipped; the bytes stay in the file)" for w in self.warnings]
        if self.torn_tail:
            where = f"moved to {self.sidecar}" if self.sidecar else "moved aside on resume"
            lines.append(
                f"{self.path}: byte {self.good_size}: {len(self.torn_tail)} bytes of an interrupted "
                f"append ({where})"
            )
        return lines


# --- Reading ----------------------------------------------------------------------------------


def load_transcript(path: str | os.PathLike[str]) -> LoadResult:
    """Read a transcript without modifying it, tolerating crash damage.

    Args:
        path: The session's `.jsonl` file.

    Returns:
        The header, every readable record, warnings for skipped damage and the torn tail, if any.

    Raises:
        TranscriptFormatError: The file is empty, its header is missing or garbled, or it was
            written in a newer format version.
        OSError: The file cannot be read.
    """
    file = Path(path)
    data = file.read_bytes()
    # Every decoded record stays alive, so cyclic-GC passes during the load free nothing yet cost
    # ~40% of the load time (they rescan the growing record list).
    paused = gc.isenabled()
    gc.disable()
    try:
        return _Loader(file).load(data)
    finally:
        if paused:
            gc.enable()


class _Loader:
    """One pass over a file's bytes; the hot path is one typed msgspec decode per line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[AnyRecord] = []
        self.warnings: list[LoadWarning] = []

    def load(self, data: bytes) -> LoadResult:
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with "\n"
        if not lines:
            return self._header_only(tail)
        header = _parse_header(self.path, lines[0])
        records, decode = self.records, decode_record
        offset = len(lines[0]) + 1
        garbage_last = False
        for lineno, line in enumerate(lines[1:], start=2):
            try:
                records.append(decode(line))
                garbage_last = False
            except _DECODE_ERRORS as exc:
                garbage_last = self._recover(line, lineno, offset, exc)
            offset += len(line) + 1
        if tail:
            return self._finish_tail(header, tail, offset)
        if garbage_last:
            # A newline-terminated last line with nothing readable in it is what a power loss
            # leaves behind (the file grew, its contents never landed): treat it as torn.
            last = lines[-1]
            self.warnings = [w for w in self.warnings if w.line != len(lines)]
            return self._result(header, last + b"\n", offset - len(last) - 1)
        return self._result(header, b"", offset)

    def _header_only(self, tail: bytes) -> LoadResult:
        if not tail:
            raise TranscriptFormatError(
                f"{self.path}: empty file, not a transcript; delete it or start a new session"
            )
        return self._result(_parse_header(self.path, tail), b"", len(tail), unterminated=True)

    def _finish_tail(self, header: TranscriptHeader, tail: bytes, offset: int) -> LoadResult:
        try:
            record: AnyRecord | str | None = decode_record(tail)
        except _DECODE_ERRORS as exc:
            record = _classify(tail, exc)
        if isinstance(record, Record | UnknownRecord):
            self.records.append(record)
            return self._result(header, b"", offset + len(tail), unterminated=True)
        return self._result(header, tail, offset)

    def _result(
        self, header: TranscriptHeader, torn: bytes, good_size: int, *, unterminated: bool = False
    ) -> LoadResult:
        return LoadResult(self.path, header, self.records, self.warnings, torn, good_size, unterminated)

    def _warn(self, line: int, offset: int, reason: str) -> None:
        self.warnings.append(LoadWarning(line, offset, reason))

    def _recover(self, line: bytes, lineno: int, offset: int, exc: Exception) -> bool:
        """Salvage what a line that failed the typed decode holds; True if it held nothing at all."""
        item = _classify(line, exc)
        if isinstance(item, str):
            self._warn(lineno, offset, item)
            return False
        if item is not None:
            self.records.append(item)
            return False
        if not line.strip():
            self._warn(lineno, offset, "blank line")
            return False
        return self._salvage(line, lineno, offset)

    def _salvage(self, line: bytes, lineno: int, offset: int) -> bool:
        pieces, gaps = _scan_objects(line)
        problems = [(start, _describe_garbage(line[start:end])) for start, end in gaps]
        found = 0
        for start, end in pieces:
            item = _decode_piece(line[start:end])
            if isinstance(item, str):
                problems.append((start, item))
            else:
                self.records.append(item)
                found += 1
        for start, reason in sorted(problems):
            self._warn(lineno, offset + start, reason)
        if found > 1:
            self._warn(lineno, offset, f"{found} records glued together on one line were recovered")
        return found == 0


def _decode_piece(chunk: bytes) -> AnyRecord | str:
    try:
        return decode_record(chunk)
    except _DECODE_ERRORS as exc:
        item = _classify(chunk, exc)
        return f"unreadable record: {exc}" if item is None else item


def _parse_header(path: Path, line: bytes) -> TranscriptHeader:
    hint = (
        "not a foldline transcript (line 1 must be its `header` record). A Claude Code session is "
        "imported, not resumed; a foldline transcript that lost its first line must be restored from "
        "a backup"
    )
    try:
        obj = decode_json(line)
    except _DECODE_ERRORS:
        raise TranscriptFormatError(f"{path}: line 1 is not JSON: {hint}") from None
    if not isinstance(obj, dict) or obj.get("kind") != "header":
        raise TranscriptFormatError(f"{path}: {hint}")
    version = obj.get("format_version")
    if type(version) is not int or version < 1:
        raise TranscriptFormatError(f"{path}: header has no valid format_version ({version!r}): {hint}")
    if version > FORMAT_VERSION:
        raise TranscriptFormatError(
            f"{path}: written in transcript format {version}, but this foldline reads formats up to "
            f"{FORMAT_VERSION}; upgrade foldline to open this session"
        )
    try:
        return msgspec.convert(obj, TranscriptHeader)
    except msgspec.ValidationError as exc:
        raise TranscriptFormatError(f"{path}: garbled header ({exc}): {hint}") from None


def _classify(chunk: bytes, exc: Exception) -> AnyRecord | str | None:
    """Decide what a chunk that is not a valid known record is.

    Returns an `UnknownRecord` for a newer kind, a warning text for JSON that is not a valid
    record, or None when the chunk is not JSON at all.
    """
    try:
        obj = decode_json(chunk)
    except _DECODE_ERRORS:
        return None
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if not isinstance(kind, str):
        return f"not a transcript record (JSON {type(obj).__name__} without a `kind`)"
    if kind == "header":
        return "a second header record (were two transcripts concatenated?)"
    if kind in _KNOWN_KINDS:
        return f"invalid `{kind}` record: {exc}"
    return UnknownRecord(kind=kind, raw=obj)


def _scan_objects(line: bytes) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Find the JSON objects in a damaged line (raw-decode scan).

    Returns:
        Byte spans of the objects found, and byte spans of the non-blank garbage around them.
    """
    text = line.decode("utf-8", "surrogateescape")
    spans: list[tuple[int, int]] = []
    search = failures = 0
    while failures < _MAX_SALVAGE_FAILURES and (match := _RECORD_START.search(text, search)) is not None:
        start = match.start()
        try:
            _, end = raw_decode(text, start)
        except (ValueError, RecursionError):
            search, failures = start + 1, failures + 1
            continue
        spans.append((start, end))
        search = end
    gaps = [(a, b) for a, b in _between(spans, len(text)) if text[a:b].strip()]
    if text.isascii():
        return spans, gaps
    to_byte = _byte_offsets(text, (i for span in (*spans, *gaps) for i in span))
    return [(to_byte[a], to_byte[b]) for a, b in spans], [(to_byte[a], to_byte[b]) for a, b in gaps]


def _byte_offsets(text: str, indices: Iterable[int]) -> dict[int, int]:
    """The UTF-8 byte offset of each character index of `text` (a line decoded with surrogateescape).

    Each stretch between consecutive indices is encoded once; encoding the whole prefix per index
    made a line of many glued objects quadratic.
    """
    offsets: dict[int, int] = {}
    done = size = 0
    for i in sorted(set(indices)):
        size += len(text[done:i].encode("utf-8", "surrogateescape"))
        offsets[i], done = size, i
    return offsets


def _between(spans: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    edges = [0, *(i for span in spans for i in span), length]
    return [(edges[i], edges[i + 1]) for i in range(0, len(edges), 2)]


def _describe_garbage(chunk: bytes) -> str:
    if not chunk.strip(b"\x00"):
        return f"skipped a run of {len(chunk)} NUL bytes (left by a crash during an append)"
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        return f"skipped {len(chunk)} unreadable bytes (invalid UTF-8)"
    return f"skipped {len(chunk)} bytes that are not a record: {chunk[:40]!r}"


# --- Writing ----------------------------------------------------------------------------------


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
        file.parent.mkdir(parents=True, exist_ok=True)
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


# --- Where sessions live (R2.4) ---------------------------------------------------------------

_SLUG_CHARS = re.compile(r"[/\\:.]")
_BAD_ID_CHARS = re.compile(r"[/\\:\x00]")


def cwd_slug(cwd: str) -> str:
    """The project directory name for a working directory, encoded as Claude Code does.

    `/`, `\\`, `:` and `.` become `-`: `/home/me/my.app` -> `-home-me-my-app`.
    """
    return _SLUG_CHARS.sub("-", cwd)


def open_session(
    path: str | os.PathLike[str],
    *,
    session_id: str,
    cwd: str = "",
    fsync: FsyncPolicy | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> tuple[TranscriptWriter, Timeline]:
    """The writer and timeline of a session: resumed from `path` if it exists, else created there.

    `session_id` and `cwd` only name a new session; a resumed one keeps its header's. Damage found
    on resume (lines skipped, a torn tail moved to a sidecar) is never silent: each line of
    `LoadResult.notices()` goes to `on_notice`, or to the `foldline.transcript` logger as a warning
    when no callback is given.
    """
    if Path(path).exists():
        writer, loaded = TranscriptWriter.resume(path, fsync=fsync)
        for notice in loaded.notices():
            if on_notice is None:
                _log.warning("%s", notice)
            else:
                on_notice(notice)
        return writer, loaded.timeline()
    writer = TranscriptWriter.create(path, session_id=session_id, cwd=cwd, fsync=fsync)
    return writer, Timeline(session_id=session_id)


def session_path(sessions_dir: str | os.PathLike[str], cwd: str, session_id: str) -> Path:
    """Where a session's transcript lives: `<sessions_dir>/<slug of cwd>/<session_id>.jsonl`.

    Args:
        sessions_dir: The root of all sessions (`TranscriptConfig.sessions_dir`).
        cwd: The working directory the session belongs to.
        session_id: The session's id.

    Raises:
        UserError: `cwd` is empty, or `session_id` is empty or not a plain file name.
    """
    if not cwd:
        raise UserError("a session needs its working directory (cwd), got an empty string")
    if not session_id or session_id in {".", ".."} or _BAD_ID_CHARS.search(session_id):
        raise UserError(f"session id {session_id!r} must be a non-empty name without / \\ or :")
    return Path(sessions_dir) / cwd_slug(cwd) / f"{session_id}.jsonl"


def list_session_files(sessions_dir: str | os.PathLike[str], *, cwd: str | None = None) -> list[Path]:
    """Every session transcript under `sessions_dir`, most recently modified first.

    Args:
        sessions_dir: The root of all sessions.
        cwd: Only the sessions of this working directory.

    Returns:
        The `.jsonl` files (lock files and corrupt-tail sidecars are not listed).
    """
    root = Path(sessions_dir)
    # The slug is a literal directory name: never let glob read `[`, `*` or `?` in it.
    found = (root / cwd_slug(cwd)).glob("*.jsonl") if cwd else root.glob("*/*.jsonl")
    return sorted((p for p in found if p.is_file()), key=lambda p: (-p.stat().st_mtime_ns, str(p)))
