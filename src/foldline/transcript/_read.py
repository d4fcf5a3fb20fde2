"""The tolerant transcript reader: `load_transcript` (design.md §2).

Invariants:
- Reading never fails on damaged content after the header: a torn tail is reported as
  `LoadResult.torn_tail`, other damage (garbage, NUL runs, invalid UTF-8, glued `}{` records,
  invalid records) becomes a `LoadWarning` naming the line and byte offset. Records of a `kind`
  this version does not know are kept as `UnknownRecord` (forward compatibility). A missing or
  garbled header, or a newer `format_version`, raises `TranscriptFormatError`.
"""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Iterable
from pathlib import Path

import msgspec

from foldline._incremental import collection_paused
from foldline._json import decode_json, decode_record, raw_decode
from foldline.errors import TranscriptFormatError
from foldline.timeline import AnyRecord, Record, UnknownRecord
from foldline.transcript._format import FORMAT_VERSION, LoadResult, LoadWarning, TranscriptHeader

_KNOWN_KINDS = frozenset(t.__struct_config__.tag for t in typing.get_args(Record))


# Where a record may start inside a damaged line: after `}`, whitespace or NUL (a splice or a
# NUL run), or wherever `{"kind"` begins (msgspec writes the tag first).
_RECORD_START = re.compile(r'(?<![^}\x00\s])\{|\{(?="kind")')
# Bounds the raw-decode scan of one damaged line, which hostile input (deep `{"kind":{"kind":...`
# nesting) could otherwise make quadratic; what is left unscanned is reported as garbage.
_MAX_SALVAGE_FAILURES = 1_000
# Deeply nested JSON raises RecursionError from both decoders instead of a decode error.
_DECODE_ERRORS = (msgspec.MsgspecError, RecursionError)


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
    with collection_paused():
        return _Loader(file).load(data)


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
