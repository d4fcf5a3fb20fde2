"""The transcript store: one append-only JSONL file per session, and resume from it (design.md §2).

Owns the on-disk format (`FORMAT_VERSION`, `TranscriptHeader`), the tolerant reader
(`load_transcript`), the single writer (`TranscriptWriter`) and where session files live
(`session_path`, `list_session_files`). The format is documented in docs/transcript-format.md.

The package is split along those parts: `_format` (header, `LoadResult`, `LoadWarning`), `_read`
(`load_transcript`), `_write` (`TranscriptWriter`, the lock, fsync) and `_paths` (where session
files live). Import from `foldline.transcript`; the submodules are private.

Each submodule's docstring states the invariants it keeps: the line format (`_format`), reading
that never fails on damage after the header (`_read`), and the single writer with its lock, its
one-`os.write`-per-record appends, poisoning on I/O errors and the fsync policy (`_write`).
"""

from __future__ import annotations

from foldline.transcript._format import FORMAT_VERSION, LoadResult, LoadWarning, TranscriptHeader
from foldline.transcript._paths import cwd_slug, list_session_files, open_session, session_path
from foldline.transcript._read import load_transcript
from foldline.transcript._write import TranscriptWriter

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
