"""The local server's deterministic tokenizer: every token count the server reports comes from here.

Rule (documented in docs/server.md): text is split into pieces by the regular expression
`\\s*\\w+|\\s*[^\\w\\s]+|\\s+` (a word or a punctuation run, each with the whitespace in front of it;
trailing whitespace on its own), and each piece longer than `MAX_PIECE` characters is chunked into
`MAX_PIECE`-character tokens. English prose comes out at roughly 4 characters per token.

Invariants: the same input always gives the same tokens; `count_text(a + b) <= count_text(a) +
count_text(b) + 1`; an image or document counts `MEDIA_TOKENS`, whatever its bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import floordiv, neg
from typing import Any

from foldline._json import dumps
from foldline._types import Block

__all__ = [
    "MAX_PIECE",
    "MEDIA_TOKENS",
    "count_block",
    "count_content",
    "count_text",
    "count_tool",
    "split_tokens",
]

MAX_PIECE = 6
"""Longest token, in characters."""
MEDIA_TOKENS = 1_600
"""What one image or document block costs, regardless of size (the real API charges by pixels)."""

_PIECE = re.compile(r"\s*\w+|\s*[^\w\s]+|\s+")


def split_tokens(text: str) -> list[str]:
    """Split `text` into tokens; `"".join(split_tokens(t)) == t` always holds."""
    tokens: list[str] = []
    for match in _PIECE.finditer(text):
        piece = match.group()
        tokens.extend(piece[i : i + MAX_PIECE] for i in range(0, len(piece), MAX_PIECE))
    return tokens


def count_text(text: str) -> int:
    """Number of tokens in `text`."""
    # Each piece is ceil(len / MAX_PIECE) tokens, i.e. -(-len // MAX_PIECE); built from C-level
    # maps because the server counts every new block of every request (a third faster than a loop).
    pieces = map(neg, map(len, _PIECE.findall(text)))
    negated: int = sum(map(floordiv, pieces, repeat(MAX_PIECE)))
    return -negated


def _json_text(value: object) -> str:
    return dumps(value).decode()


def count_block(block: Mapping[str, Any]) -> int:
    """Tokens one content block costs (`cache_control` and `cache_reference` are free)."""
    kind = block.get("type")
    if kind == "text":
        return count_text(str(block.get("text", "")))
    if kind == "thinking":
        return count_text(str(block.get("thinking", "")))
    if kind == "redacted_thinking":
        return count_text(str(block.get("data", "")))
    if kind == "tool_use" or kind == "server_tool_use":
        return count_text(str(block.get("name", ""))) + count_text(_json_text(block.get("input", {})))
    if kind == "tool_result":
        return count_content(block.get("content", ""))
    if kind in ("image", "document"):
        return MEDIA_TOKENS
    return count_text(_json_text({k: v for k, v in block.items() if k != "cache_control"}))


def count_content(content: str | Sequence[Block] | None) -> int:
    """Tokens of a message's (or tool_result's) `content`: a string or a list of blocks."""
    if content is None:
        return 0
    if isinstance(content, str):
        return count_text(content)
    return sum(count_block(b) for b in content if isinstance(b, Mapping))


def count_tool(tool: Mapping[str, Any]) -> int:
    """Tokens one tool definition costs: name, description and the JSON of its schema."""
    rest = {k: v for k, v in tool.items() if k not in ("name", "description", "cache_control")}
    return (
        count_text(str(tool.get("name", "")))
        + count_text(str(tool.get("description", "")))
        + count_text(_json_text(rest))
    )
