"""The transcript's on-disk format: the header, and what a load returns (design.md §2).

Owns `FORMAT_VERSION`, `TranscriptHeader` (line 1 of every file), and `LoadResult` /
`LoadWarning`, which `load_transcript` fills and `TranscriptWriter.resume` returns. The format is
documented in docs/transcript-format.md.

Invariants:
- Line 1 is a `header` record; every later line is one record (`foldline.timeline.AnyRecord`)
  encoded by `foldline._json.encode_line`. Lines are split on `b"\\n"` only, never on Unicode
  line boundaries (design.md F6).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import msgspec

from foldline.timeline import AnyRecord, Timeline

FORMAT_VERSION = 1
"""The transcript format this version writes and the newest it reads (see docs/transcript-format.md)."""


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
