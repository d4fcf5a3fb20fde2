"""Semantic rules: cache_control (rules A42-A44)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from foldline.api.validate._errors import _ROOT, _bare, _Loc
from foldline.api.validate._semantic import (
    _Request,
    _tool_result_items,
)
from foldline.errors import RequestValidationError


def _cache_points(request: _Request) -> Iterator[tuple[_Loc, Mapping[str, Any]]]:
    """Everything that may carry `cache_control`, in prompt order: tools, system, messages.

    The request's own top-level `cache_control` (automatic caching) comes last: it lands on the
    last cacheable block.
    """
    for index, tool in enumerate(request.body.get("tools") or ()):
        yield _ROOT.at("tools").at(index), tool
    system = request.body.get("system")
    for index, block in enumerate(system if isinstance(system, list) else ()):
        yield _ROOT.at("system").at(index), block
    for loc, block in request.all_blocks():
        yield from _tool_result_items(block, loc)
        yield loc, block
    yield _ROOT, request.body


def _check_cache_control(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A43, A44, then A42 (breakpoint count across tools, system, messages)."""
    count = 0
    seen_short = False
    for loc, block in _cache_points(request):
        control = block.get("cache_control")
        if not isinstance(control, Mapping):
            continue
        count += 1
        if block.get("type") == "text" and block.get("text") == "":
            yield _bare(f"{loc.api}: cache_control cannot be set for empty text blocks", loc)
        ttl = control.get("ttl") or "5m"
        if ttl == "1h" and seen_short:
            where = loc.at("cache_control").at("ttl")
            yield _bare(
                f"{where.json}: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following order: "
                "`tools`, `system`, `messages`.",
                where,
            )
        seen_short = seen_short or ttl == "5m"
    maximum = request.limits.max_cache_breakpoints
    if count > maximum:
        yield _bare(
            f"A maximum of {maximum} blocks with cache_control may be provided. Found {count}.",
            _ROOT,
        )
