"""Semantic rules: tool use / tool result pairing (rules A10-A17)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from foldline.api.validate._errors import _bare, _Loc
from foldline.api.validate._semantic import (
    _message_loc,
    _Request,
)
from foldline.errors import RequestValidationError


def _check_tool_pairing(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A13, A10, A11, A12, duplicate results, A16, A17."""
    yield from _unique_tool_use_ids(request)
    for index, message in enumerate(request.messages):
        if message["role"] == "assistant":
            yield from _results_follow(request, index)
        else:
            yield from _results_match(request, index)
    for loc, block in request.all_blocks():
        if block["type"] == "tool_result" and block.get("is_error"):
            yield from _error_result_rules(block, loc)


def _tool_use_ids(request: _Request, index: int) -> list[str]:
    if index < 0 or request.messages[index]["role"] != "assistant":
        return []
    return [block["id"] for _, block in request.blocks(index) if block["type"] == "tool_use"]


def _unique_tool_use_ids(request: _Request) -> Iterator[RequestValidationError]:
    seen: set[str] = set()
    for loc, block in request.all_blocks():
        if block["type"] != "tool_use":
            continue
        if block["id"] in seen:
            yield _bare(f"{loc.json}: `tool_use` ids must be unique", loc)
        seen.add(block["id"])


def _results_follow(request: _Request, index: int) -> Iterator[RequestValidationError]:
    """Rules A10 and A11: the next message starts with one tool_result per tool_use."""
    wanted = _tool_use_ids(request, index)
    if not wanted:
        return
    nxt = index + 1
    results: list[str] = []
    if nxt < len(request.messages) and request.messages[nxt]["role"] == "user":
        results = [b["tool_use_id"] for _, b in request.blocks(nxt) if b["type"] == "tool_result"]
    missing = [tool_id for tool_id in wanted if tool_id not in results]
    if missing:
        yield _bare(
            f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
            f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
            "in the next message.",
            _message_loc(index),
        )
        return
    types = request.block_types(nxt)
    leading = next((i for i, t in enumerate(types) if t != "tool_result"), len(types))
    if leading < len(wanted):
        yield _bare(
            f"messages.{nxt}: Did not find {len(wanted)} `tool_result` block(s) at the beginning of this "
            "message. Messages following `tool_use` blocks must begin with a matching number of "
            "`tool_result` blocks.",
            _message_loc(nxt),
        )


def _results_match(request: _Request, index: int) -> Iterator[RequestValidationError]:
    """Rule A12 and the duplicate-result rule: each result answers one tool_use just before it."""
    known = set(_tool_use_ids(request, index - 1))
    seen: set[str] = set()
    orphans: list[tuple[_Loc, str]] = []
    for loc, block in request.blocks(index):
        if block["type"] != "tool_result":
            continue
        tool_id = block["tool_use_id"]
        if tool_id not in known:
            orphans.append((loc, tool_id))
        elif tool_id in seen:
            yield _bare(
                f"{loc.json}: each tool_use must have a single result. "
                f"Found multiple `tool_result` blocks with id: {tool_id}",
                loc,
            )
        seen.add(tool_id)
    if orphans:
        first = orphans[0][0]
        yield _bare(
            f"{first.json}: unexpected `tool_use_id` found in `tool_result` blocks: "
            f"{', '.join(tool_id for _, tool_id in orphans)}. Each `tool_result` block must have a "
            "corresponding `tool_use` block in the previous message.",
            first,
        )


def _error_result_rules(block: Mapping[str, Any], loc: _Loc) -> Iterator[RequestValidationError]:
    content = block.get("content")
    if not content:
        yield _bare(f"{loc.api}: content cannot be empty if `is_error` is true", loc)
    elif isinstance(content, list) and any(item["type"] != "text" for item in content):
        # The API quotes this rule without a location; the prefix follows rule A17's.
        yield _bare(f"{loc.api}: all content must be type 'text' if 'is_error' is true", loc)
