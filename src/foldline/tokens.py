"""Token estimation shared by every compaction level (R3.0.2).

Counts anchor on the last API response's `usage` for the prefix it covered and estimate only what
was added since: 4 characters per token, 2,000 tokens per image or document, padded by 4/3 so the
estimate errs high (an underestimate is what sends a request over the window).
"""

from __future__ import annotations

import math
from collections.abc import Container, Sequence

from foldline._types import Block
from foldline.timeline import AssistantEntry, AttachmentEntry, Entry, SystemEntry, UserEntry

__all__ = [
    "CHARS_PER_TOKEN",
    "MEDIA_TOKENS",
    "PADDING",
    "context_tokens",
    "estimate_blocks",
    "estimate_entry",
    "estimate_text",
    "padded",
]

CHARS_PER_TOKEN = 4
MEDIA_TOKENS = 2_000
PADDING = 4 / 3


def estimate_text(text: str) -> int:
    """Unpadded token estimate of a string."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _block_chars(block: Block) -> tuple[int, int]:
    """(characters, media tokens) in one content block, recursing into tool_result content."""
    kind = block.get("type")
    if kind in ("image", "document"):
        return 0, MEDIA_TOKENS
    if kind == "text":
        return len(block.get("text", "")), 0
    if kind == "thinking":
        return len(block.get("thinking", "")) + len(block.get("signature", "")), 0
    if kind == "redacted_thinking":
        return len(block.get("data", "")), 0
    if kind == "tool_use":
        return len(block.get("name", "")) + len(str(block.get("input", ""))), 0
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, str):
            return len(content), 0
        chars = media = 0
        for inner in content:
            c, m = _block_chars(inner)
            chars, media = chars + c, media + m
        return chars, media
    return len(str(block)), 0


def estimate_blocks(content: str | Sequence[Block]) -> int:
    """Unpadded token estimate of message content."""
    if isinstance(content, str):
        return estimate_text(content)
    chars = media = 0
    for block in content:
        c, m = _block_chars(block)
        chars, media = chars + c, media + m
    return math.ceil(chars / CHARS_PER_TOKEN) + media


def estimate_entry(entry: Entry) -> int:
    """Unpadded token estimate of what one entry contributes to a request (0 if it sends nothing)."""
    if isinstance(entry, UserEntry | AssistantEntry):
        return estimate_blocks(entry.message.content)
    if isinstance(entry, AttachmentEntry):
        return estimate_blocks(entry.content)
    if isinstance(entry, SystemEntry) and entry.subtype == "local_command":
        return estimate_text(entry.content)
    return 0


def context_tokens(entries: Sequence[Entry], *, stale: Container[str] = ()) -> int:
    """Tokens the next request's messages will take: last usage + padded estimate of the rest.

    `entries` is the API-visible projection. The newest assistant entry with `usage` anchors the
    count (its prompt plus its output); everything after it is estimated and padded by 4/3.
    Entries named in `stale` never anchor: their usage covered a prefix that is gone (a reply a
    compaction kept verbatim after its summary).
    """
    anchor = 0
    start = 0
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i]
        if entry.uuid in stale:
            continue
        if isinstance(entry, AssistantEntry) and entry.message.usage and not entry.is_api_error_message:
            usage = entry.message.usage
            anchor = usage.prompt_tokens + usage.output_tokens
            start = i + 1
            break
    return anchor + padded(sum(estimate_entry(e) for e in entries[start:]))


def padded(tokens: int) -> int:
    """An estimate padded by 4/3, so it errs high."""
    return math.ceil(tokens * PADDING)
