"""foldline: the message pipeline of a Claude-Code-style coding agent.

One event timeline as the single source of truth, append-only JSONL transcripts with exact resume,
request normalization, prompt-cache awareness, a streaming tool loop, and a local server that
speaks the Messages API (`foldline.server`, the optional `server` extra).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from foldline.session import Session
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
    "Session",
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

_HOMES: dict[str, str] = {
    "AnthropicProvider": "foldline.providers.anthropic",
    "AssistantEntry": "foldline.timeline",
    "AttachmentEntry": "foldline.timeline",
    "Config": "foldline.config",
    "FoldlineError": "foldline.errors",
    "ModelAPIError": "foldline.errors",
    "ModelHTTPError": "foldline.errors",
    "ProgressEntry": "foldline.timeline",
    "PromptTooLongError": "foldline.errors",
    "QueryEngine": "foldline.engine",
    "RequestAssembler": "foldline.api.params",
    "RequestPlan": "foldline.api.params",
    "RequestValidationError": "foldline.errors",
    "RetriesExhaustedError": "foldline.errors",
    "Session": "foldline.session",
    "SystemEntry": "foldline.timeline",
    "Timeline": "foldline.timeline",
    "TranscriptError": "foldline.errors",
    "TranscriptLockedError": "foldline.errors",
    "TranscriptWriteError": "foldline.errors",
    "TranscriptWriter": "foldline.transcript",
    "TurnResult": "foldline.engine",
    "UserEntry": "foldline.timeline",
    "UserError": "foldline.errors",
    "ValidationLimits": "foldline.api.validate",
    "build_request": "foldline.api.params",
    "default_tools": "foldline.tools",
    "find_errors": "foldline.api.validate",
    "import_claude_code": "foldline.importers.claude_code",
    "load_session": "foldline.sessions",
    "load_transcript": "foldline.transcript",
    "normalize_messages_for_api": "foldline.api.normalize",
    "project_view": "foldline.projection",
    "validate_request": "foldline.api.validate",
}
"""Where each public name lives. Importing them here eagerly would make every `import foldline` (and
every `foldline --help`) pay for the anthropic SDK and the engine; PEP 562 loads each on first use."""


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'foldline' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
