"""foldline: the message pipeline of a Claude-Code-style coding agent.

One event timeline as the single source of truth, append-only JSONL transcripts with exact resume,
four-level context compaction, request normalization, prompt-cache awareness, a streaming tool
loop, and a local server that speaks the Messages API.
"""

from __future__ import annotations

from foldline.config import Config
from foldline.errors import (
    FoldlineError,
    RequestValidationError,
    TranscriptError,
    TranscriptLockedError,
    TranscriptWriteError,
    UserError,
)
from foldline.timeline import (
    AssistantEntry,
    AttachmentEntry,
    ProgressEntry,
    SystemEntry,
    Timeline,
    UserEntry,
)

__all__ = [
    "AssistantEntry",
    "AttachmentEntry",
    "Config",
    "FoldlineError",
    "ProgressEntry",
    "RequestValidationError",
    "SystemEntry",
    "Timeline",
    "TranscriptError",
    "TranscriptLockedError",
    "TranscriptWriteError",
    "UserEntry",
    "UserError",
]
