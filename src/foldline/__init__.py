"""foldline: the message pipeline of a Claude-Code-style coding agent.

One event timeline as the single source of truth, append-only JSONL transcripts with exact resume,
request normalization, prompt-cache awareness, a streaming tool loop, and a local server that
speaks the Messages API (`foldline.server`, the optional `server` extra).
"""

from __future__ import annotations

from foldline.api.normalize import normalize_messages_for_api
from foldline.api.params import RequestAssembler, RequestPlan, build_request
from foldline.api.validate import ValidationLimits, find_errors, validate_request
from foldline.config import Config
from foldline.engine import QueryEngine, TurnResult
from foldline.errors import (
    FoldlineError,
    ModelAPIError,
    ModelHTTPError,
    PromptTooLongError,
    RequestValidationError,
    RetriesExhaustedError,
    TranscriptError,
    TranscriptLockedError,
    TranscriptWriteError,
    UserError,
)
from foldline.importers.claude_code import import_claude_code
from foldline.projection import project_view
from foldline.providers.anthropic import AnthropicProvider
from foldline.sessions import load_session
from foldline.timeline import (
    AssistantEntry,
    AttachmentEntry,
    ProgressEntry,
    SystemEntry,
    Timeline,
    UserEntry,
)
from foldline.tools import default_tools
from foldline.transcript import TranscriptWriter, load_transcript

__all__ = [
    "AnthropicProvider",
    "AssistantEntry",
    "AttachmentEntry",
    "Config",
    "FoldlineError",
    "ModelAPIError",
    "ModelHTTPError",
    "ProgressEntry",
    "PromptTooLongError",
    "QueryEngine",
    "RequestAssembler",
    "RequestPlan",
    "RequestValidationError",
    "RetriesExhaustedError",
    "SystemEntry",
    "Timeline",
    "TranscriptError",
    "TranscriptLockedError",
    "TranscriptWriteError",
    "TranscriptWriter",
    "TurnResult",
    "UserEntry",
    "UserError",
    "ValidationLimits",
    "build_request",
    "default_tools",
    "find_errors",
    "import_claude_code",
    "load_session",
    "load_transcript",
    "normalize_messages_for_api",
    "project_view",
    "validate_request",
]
