"""Token estimation shared by every compaction level (R3.0.2).

Counts anchor on the last API response's `usage` for the prefix it covered and estimate only what
was added since: 4 characters per token, 2,000 tokens per image or document, padded by 4/3 so the
estimate errs high (an underestimate is what sends a request over the window). The numbers are
`config.TOKEN_ESTIMATE`'s.
"""

from __future__ import annotations

import math
from collections.abc import Container, Mapping, Sequence
from typing import Any, NamedTuple

from foldline._json import dumps
from foldline._types import Block
from foldline.config import TOKEN_ESTIMATE
from foldline.timeline import AssistantEntry, AttachmentEntry, Entry, SystemEntry, UserEntry

__all__ = [
    "CHARS_PER_TOKEN",
    "MEDIA_TOKENS",
    "PADDING",
    "ContextCount",
    "context_count",
    "context_tokens",
    "estimate_blocks",
    "estimate_entry",
    "estimate_fixed",
    "estimate_text",
    "padded",
]

CHARS_PER_TOKEN = TOKEN_ESTIMATE.chars_per_token
MEDIA_TOKENS = TOKEN_ESTIMATE.media_tokens
PADDING = TOKEN_ESTIMATE.padding


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


class ContextCount(NamedTuple):
    """A request's size as two parts: what the server counted, and what is only estimated.

    The estimate is the part that can be wrong, so a caller near a limit looks at it on its own
    (`pessimistic`) before deciding whether an exact count is worth asking for.
    """

    anchored: int
    """The newest usage's prompt plus output: counted by the server (0 when nothing anchors)."""
    estimated: int
    """The padded estimate of everything after the anchor."""

    @property
    def total(self) -> int:
        """The best guess: anchored plus estimated."""
        return self.anchored + self.estimated

    def pessimistic(self, factor: float) -> int:
        """The count if the estimated part were `factor` times too low (dense logs, numbers, code)."""
        return self.anchored + math.ceil(self.estimated * factor)


def context_count(
    entries: Sequence[Entry], *, stale: Container[str] = (), unanchored_base: int = 0
) -> ContextCount:
    """The next request's size: last usage + padded estimate of the rest.

    `entries` is the API-visible projection. The newest assistant entry with `usage` anchors the
    count (its prompt plus its output, which include the system prompt and tools); everything after
    it is estimated and padded by 4/3. With no anchor (a new session, or right after a compaction),
    `unanchored_base` stands in for what the usage would have covered besides the messages: the
    system prompt and the tools. Entries named in `stale` never anchor: their usage covered a
    prefix that is gone (a reply a compaction kept verbatim after its summary).
    """
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i]
        if entry.uuid in stale:
            continue
        if isinstance(entry, AssistantEntry) and entry.message.usage and not entry.is_api_error_message:
            usage = entry.message.usage
            rest = padded(sum(estimate_entry(e) for e in entries[i + 1 :]))
            return ContextCount(usage.prompt_tokens + usage.output_tokens, rest)
    return ContextCount(0, unanchored_base + padded(sum(estimate_entry(e) for e in entries)))


def context_tokens(entries: Sequence[Entry], *, stale: Container[str] = ()) -> int:
    """`context_count(...).total`: the best guess of the next request's message tokens."""
    return context_count(entries, stale=stale).total


def estimate_fixed(system: str | Sequence[str | Block], tools: Sequence[Mapping[str, Any]]) -> int:
    """Padded estimate of a request's system prompt and tool definitions (JSON as sent)."""
    text = system if isinstance(system, str) else "".join(s if isinstance(s, str) else str(s) for s in system)
    return padded(estimate_text(text) + sum(estimate_text(dumps(tool).decode()) for tool in tools))


def padded(tokens: int) -> int:
    """An estimate padded by 4/3, so it errs high."""
    return math.ceil(tokens * PADDING)
