"""R4.1.1 as a property: any messy timeline normalizes (and assembles) into a request the validator accepts.

Also: no text the user typed is dropped, and every thinking block sent is byte-identical to one the
model produced. The generator is `tests/api/strategies.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from tests.api.strategies import Generated, messy_timelines

from foldline.api.normalize import normalize_messages_for_api
from foldline.api.params import build_request
from foldline.api.validate import find_errors
from foldline.config import Config
from foldline.providers.base import Capabilities

_SETTINGS = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_TOOLS = [{"name": "Read", "description": "read a file", "input_schema": {"type": "object"}}]


def _texts(blocks: list[dict[str, Any]]) -> Iterator[str]:
    for block in blocks:
        if block.get("type") == "text":
            yield block["text"]
        if block.get("type") == "tool_result" and isinstance(block.get("content"), list):
            yield from _texts(block["content"])
        elif block.get("type") == "tool_result":
            yield str(block.get("content", ""))


def _check_facts(generated: Generated, messages: list[dict[str, Any]]) -> None:
    sent = "\n".join(t for m in messages for t in _texts(m["content"]))
    for typed in generated.typed_texts:
        assert typed in sent, f"typed text dropped: {typed!r}"
    produced = {orjson.dumps(b) for b in generated.thinking_blocks}
    for message in messages:
        for block in message["content"]:
            if block.get("type") in ("thinking", "redacted_thinking"):
                assert orjson.dumps(block) in produced


@pytest.mark.slow
@_SETTINGS
@given(messy_timelines())
def test_normalized_messages_always_validate(generated: Generated) -> None:
    for case in sorted(generated.cases):
        event(case)
    messages = normalize_messages_for_api(generated.entries, snip_enabled=True)
    body = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "messages": messages}
    assert [e.message for e in find_errors(body)] == []
    _check_facts(generated, messages)  # type: ignore[arg-type]


@pytest.mark.slow
@_SETTINGS
@given(messy_timelines())
def test_assembled_requests_always_validate(generated: Generated) -> None:
    caps = Capabilities(name="local", supports_cache_edits=True, cache_edits_beta="cache-edits-2025-06-01")
    config = Config(thinking_budget_tokens=2048)
    plan = build_request(generated.entries, config, ["stable", "dynamic"], _TOOLS, caps)
    assert [e.message for e in find_errors(plan.body)] == []
    _check_facts(generated, plan.body["messages"])
