"""`foldline chat -p --output-format json|stream-json`: what a script reads instead of the rendered chat.

`event_object` turns one engine UI event into a JSON object (stream-json prints one line per event
as it happens); `result_object` is the final summary both formats end with: the answer text, the
session id, token usage and cost of this run, the number of model calls, and whether it failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, assert_never

from foldline._json import decode_json, dumps, encode_line
from foldline.events import (
    CompactionEvent,
    NoticeEvent,
    RecordEvent,
    RetryEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolInputDeltaEvent,
    UIEvent,
)
from foldline.timeline import AnyRecord, AssistantEntry
from foldline.usage import usage_of

__all__ = ["event_object", "json_line", "result_object"]


def event_object(event: UIEvent) -> dict[str, Any]:
    """One UI event as a JSON-ready object with a `type` naming it."""
    match event:
        case TextDeltaEvent(text=text):
            return {"type": "text_delta", "text": text}
        case ThinkingDeltaEvent(text=text):
            return {"type": "thinking_delta", "text": text}
        case ToolInputDeltaEvent(index=index, partial_json=partial):
            return {"type": "tool_input_delta", "index": index, "partial_json": partial}
        case RecordEvent(record=record):
            return {"type": "record", "record": decode_json(encode_line(record))}
        case RetryEvent(attempt=attempt, delay=delay, reason=reason):
            return {"type": "retry", "attempt": attempt, "delay": delay, "reason": reason}
        case NoticeEvent(text=text, level=level):
            return {"type": "notice", "level": level, "text": text}
        case CompactionEvent(level=level, text=text, tokens_freed=freed, data=data):
            return {"type": "compaction", "level": level, "text": text, "tokens_freed": freed, "data": data}
        case _:
            assert_never(event)


def result_object(
    *,
    session_id: str,
    new_records: Sequence[AnyRecord],
    text: str,
    stop_reason: str | None,
    error: str | None = None,
) -> dict[str, Any]:
    """The run's summary: `new_records` are the records this run appended (its usage and cost)."""
    totals = usage_of(new_records)
    calls = sum(
        1
        for r in new_records
        if isinstance(r, AssistantEntry) and r.message.usage is not None and not r.is_sidechain
    )
    return {
        "type": "result",
        "is_error": error is not None,
        "result": error if error is not None else text,
        "stop_reason": stop_reason,
        "session_id": session_id,
        "num_turns": calls,
        "usage": {
            "input_tokens": totals.input,
            "cache_creation_input_tokens": totals.cache_write,
            "cache_read_input_tokens": totals.cache_read,
            "output_tokens": totals.output,
        },
        "total_cost_usd": round(totals.cost(), 6),
    }


def json_line(obj: dict[str, Any]) -> str:
    """One compact JSON line (no newline)."""
    return dumps(obj, default=str).decode()
