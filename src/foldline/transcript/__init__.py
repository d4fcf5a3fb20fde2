"""The transcript store: one append-only JSONL file per session, and resume from it (design.md §2).

Owns the on-disk format (`FORMAT_VERSION`, `TranscriptHeader`), the tolerant reader
(`load_transcript`), the single writer (`TranscriptWriter`) and where session files live
(`session_path`, `list_session_files`). The format is documented in docs/transcript-format.md.

The package is split along those parts: `_format` (header, `LoadResult`, `LoadWarning`), `_read`
(`load_transcript`), `_write` (`TranscriptWriter`, the lock, fsync) and `_paths` (where session
files live). Import from `foldline.transcript`; the submodules are private.

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
