"""The streaming side of `/v1/messages`: a finished message as the real API's SSE event sequence.

Sequence (Messages streaming doc): `message_start` (the message with empty content and the input
usage), then per block `content_block_start` (the block emptied), its deltas (`text_delta`,
`thinking_delta` then one `signature_delta`, `input_json_delta`), `content_block_stop`; a `ping`
after the first block starts; then `message_delta` (stop_reason and the cumulative usage) and
`message_stop`. A response with `context_management` (server-side context edits) carries it on
`message_delta`, where the SDK's accumulator takes it.

Invariant: feeding the events to the SDK's accumulator rebuilds exactly the non-streaming message.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from foldline._json import dumps
from foldline._types import Block
from foldline.server.tokenizer import split_tokens

__all__ = [
    "Event",
    "block_events",
    "block_start_events",
    "block_stop_event",
    "delta_event",
    "end_events",
    "error_event",
    "format_event",
    "message_events",
    "start_event",
]

Event = tuple[str, dict[str, Any]]


def format_event(name: str, data: Mapping[str, Any]) -> bytes:
    """One SSE frame: `event: NAME`, `data: JSON`, blank line."""
    return b"event: " + name.encode() + b"\ndata: " + dumps(data) + b"\n\n"


def error_event(error_type: str, message: str) -> bytes:
    """The `error` event the API sends inside a 200 stream."""
    return format_event("error", {"type": "error", "error": {"type": error_type, "message": message}})


def _chunks(text: str, tokens_per_chunk: int) -> Iterator[str]:
    tokens = split_tokens(text)
    for i in range(0, len(tokens), tokens_per_chunk):
        yield "".join(tokens[i : i + tokens_per_chunk])


def _empty(block: Block) -> Block:
    kind = block.get("type")
    if kind == "text":
        return {**block, "text": ""}
    if kind == "thinking":
        return {**block, "thinking": "", "signature": ""}
    if kind == "tool_use":
        return {**block, "input": {}}
    return block


def _deltas(block: Block, chunk: int) -> Iterator[dict[str, Any]]:
    kind = block.get("type")
    if kind == "text":
        for piece in _chunks(str(block["text"]), chunk):
            yield {"type": "text_delta", "text": piece}
    elif kind == "thinking":
        for piece in _chunks(str(block["thinking"]), chunk):
            yield {"type": "thinking_delta", "thinking": piece}
        yield {"type": "signature_delta", "signature": str(block.get("signature", ""))}
    elif kind == "tool_use":
        for piece in _chunks(dumps(block.get("input", {})).decode(), chunk):
            yield {"type": "input_json_delta", "partial_json": piece}


def start_event(message: Mapping[str, Any]) -> Event:
    """`message_start`: `message` emptied of content and stop reason; its `usage` as given."""
    emptied = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    return "message_start", {"type": "message_start", "message": emptied}


def block_start_events(index: int, block: Block) -> Iterator[Event]:
    """`content_block_start` of `block` emptied (and the `ping` that follows the first)."""
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": _empty(block)},
    )
    if index == 0:
        yield "ping", {"type": "ping"}


def delta_event(index: int, delta: Mapping[str, Any]) -> Event:
    """One `content_block_delta` of block `index`."""
    return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": dict(delta)}


def block_stop_event(index: int) -> Event:
    """`content_block_stop` of block `index`."""
    return "content_block_stop", {"type": "content_block_stop", "index": index}


def block_events(index: int, block: Block, chunk_tokens: int) -> Iterator[Event]:
    """A whole block: start, its deltas of `chunk_tokens` tokens, stop."""
    yield from block_start_events(index, block)
    for delta in _deltas(block, chunk_tokens):
        yield delta_event(index, delta)
    yield block_stop_event(index)


def end_events(message: Mapping[str, Any]) -> Iterator[Event]:
    """`message_delta` (stop reason, cumulative usage, `context_management`) and `message_stop`."""
    usage = dict(message["usage"])
    final: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message.get("stop_sequence")},
        "usage": {k: v for k, v in usage.items() if k != "cache_creation"},
    }
    if "context_management" in message:  # what server-side context edits applied, known once answered
        final["context_management"] = message["context_management"]
    yield "message_delta", final
    yield "message_stop", {"type": "message_stop"}


def message_events(message: Mapping[str, Any], *, chunk_tokens: int = 8) -> Iterator[Event]:
    """The SSE events (name, data) that stream `message`, a complete response body."""
    usage = dict(message["usage"])
    yield start_event({**message, "usage": {**usage, "output_tokens": min(1, usage.get("output_tokens", 0))}})
    for index, block in enumerate(message["content"]):
        yield from block_events(index, block, chunk_tokens)
    yield from end_events(message)
