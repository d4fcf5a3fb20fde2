"""Semantic rules: extended thinking (rules A19-A24).

Rules A21 (thinking blocks unmodified) and A22 (signature validity) reduce to "signature is a
non-empty string": a body alone cannot tell more.
"""

from __future__ import annotations

from collections.abc import Iterator

from foldline.api.validate._errors import _bare
from foldline.api.validate._semantic import (
    _DOCS,
    _message_loc,
    _Request,
)
from foldline.api.validate._shape import _THINKING
from foldline.errors import RequestValidationError


def _check_thinking(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A20, A24, A22, A23, A19."""
    for index, message in enumerate(request.messages):
        if message["role"] != "assistant":
            continue
        blocks = request.blocks(index)
        types = [block["type"] for _, block in blocks]
        if types and types[0] not in _THINKING and any(t in _THINKING for t in types):
            yield _bare(
                f"messages.{index}.content.0: If an assistant message contains any thinking blocks, "
                f"the first block must be thinking or redacted_thinking. Found {types[0]}.",
                blocks[0][0],
            )
        if types and types[-1] in _THINKING:
            yield _bare(
                f"messages.{index}: The final block in an assistant message cannot be `thinking`.",
                _message_loc(index),
            )
        for loc, block in blocks:
            if block["type"] == "thinking" and not block["signature"]:
                yield _bare(f"{loc.json}: Invalid `signature` in `thinking` block", loc)
    yield from _final_thinking(request)


def _final_thinking(request: _Request) -> Iterator[RequestValidationError]:
    if not request.thinking_on:
        if request.prefill is not None:
            for loc, block in request.blocks(request.prefill):
                if block["type"] in _THINKING:
                    yield _bare(
                        f"{loc.json}: When thinking is disabled, an `assistant` message in the final "
                        "position cannot contain `thinking`. To use thinking blocks, enable `thinking` in "
                        "your request.",
                        loc,
                    )
                    break
        return
    turn = _final_turn_start(request)
    if turn is None:
        return
    blocks = request.blocks(turn)
    found = blocks[0][1]["type"] if blocks else "text"
    if found not in _THINKING:
        loc = blocks[0][0] if blocks else _message_loc(turn).at("content")
        yield _bare(
            f"messages.{turn}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            f"`{found}`. When `thinking` is enabled, a final `assistant` message must start with a thinking "
            "block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
            "include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
            f"Please consult our documentation at {_DOCS}",
            loc,
        )


def _final_turn_start(request: _Request) -> int | None:
    """The first assistant message after the last user message that is more than tool results.

    That message opens the final assistant turn (its tool loop, or a prefill), which the API
    requires to start with thinking when thinking is on (rule A19).
    """
    boundary = -1
    for index, message in enumerate(request.messages):
        if message["role"] == "user" and any(t != "tool_result" for t in request.block_types(index)):
            boundary = index
    for index in range(boundary + 1, len(request.messages)):
        if request.messages[index]["role"] == "assistant":
            return index
    return None
