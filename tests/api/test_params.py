"""Request parameters, beta latching (R7.5) and `build_request` (design.md §4.3)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from foldline._json import decode_record, encode_line
from foldline._types import Block
from foldline.api.params import build_request, latch_betas, params_from_context, system_blocks
from foldline.api.validate import find_errors
from foldline.config import Config
from foldline.errors import UserError
from foldline.providers.base import Capabilities
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AssistantMessage,
    CachePin,
    CompactBoundary,
    LatchedHeaders,
    UserEntry,
    UserMessage,
)

ANTHROPIC = Capabilities(name="anthropic")
LOCAL = Capabilities(name="local", supports_cache_edits=True, cache_edits_beta="cache-edits-2025-06-01")
_n = itertools.count(1)


def _env() -> dict[str, Any]:
    n = next(_n)
    return {"uuid": f"{n:08x}-3333-4000-8000-{n:012x}", "timestamp": "2026-01-01T00:00:00.000Z"}


def user(content: str | list[Block], **flags: Any) -> UserEntry:
    return UserEntry(**_env(), message=UserMessage(content=content), **flags)


def reply(msg_id: str, *blocks: Block) -> AssistantEntry:
    return AssistantEntry(**_env(), message=AssistantMessage(id=msg_id, content=list(blocks)))


def test_latch_betas_sorts_and_records_only_new_ones() -> None:
    betas, record = latch_betas((), ["z-beta", "a-beta", "z-beta"])
    assert betas == ("a-beta", "z-beta")
    assert record is not None
    assert record.betas == ("a-beta", "z-beta")
    betas, record = latch_betas(("a-beta", "z-beta"), ["a-beta"])
    assert (betas, record) == (("a-beta", "z-beta"), None)
    betas, record = latch_betas(("z-beta",), [])
    assert (betas, record) == (("z-beta",), None)  # latched: sent although no feature asked this time


def test_latched_betas_survive_later_requests_and_resume() -> None:
    records: list[AnyRecord] = [user("hello")]
    first = build_request(records, Config(), "sys", [], ANTHROPIC, requested_betas=["fast-mode-2026"])
    assert first.betas == ("fast-mode-2026",)
    assert [type(r) for r in first.new_records] == [LatchedHeaders]
    records += [*first.new_records, reply("m1", {"type": "text", "text": "hi"}), user("again")]
    second = build_request(records, Config(), "sys", [], ANTHROPIC)
    assert (second.betas, second.new_records) == (("fast-mode-2026",), ())
    resumed = [decode_record(encode_line(r)) for r in records]
    assert build_request(resumed, Config(), "sys", [], ANTHROPIC).betas == ("fast-mode-2026",)


def test_params_body_shape() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    body = params_from_context(
        model="claude-sonnet-4-5",
        messages=messages,  # type: ignore[arg-type]
        max_tokens=4096,
        system=system_blocks(["stable", "  ", "dynamic"]),
        tools=[{"name": "Read", "input_schema": {"type": "object"}}],
        thinking_budget=1024,
    )
    assert list(body) == ["model", "max_tokens", "system", "tools", "thinking", "messages", "stream"]
    assert body["system"] == [{"type": "text", "text": "stable"}, {"type": "text", "text": "dynamic"}]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert find_errors(body) == []


@pytest.mark.parametrize(("budget", "max_tokens"), [(1023, 4096), (4096, 4096), (5000, 4096)])
def test_bad_thinking_budgets_are_user_errors(budget: int, max_tokens: int) -> None:
    with pytest.raises(UserError, match="thinking budget"):
        params_from_context(model="m", messages=[], max_tokens=max_tokens, thinking_budget=budget)


def test_system_blocks_reject_non_text() -> None:
    with pytest.raises(UserError, match="text blocks"):
        system_blocks([{"type": "image", "source": {}}])


def test_thinking_goes_off_when_the_open_turn_was_recorded_without_it() -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    config = Config(thinking_budget_tokens=2048)
    without = [user("go"), reply("m1", use), user([result])]
    plan = build_request(without, config, "sys", [], ANTHROPIC)
    assert "thinking" not in plan.body
    assert find_errors(plan.body) == []
    thought = {"type": "thinking", "thinking": "plan", "signature": "sig"}
    with_thinking = [user("go"), reply("m1", thought, use), user([result])]
    plan = build_request(with_thinking, config, "sys", [], ANTHROPIC)
    assert plan.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert plan.body["messages"][1]["content"][0] is thought
    assert find_errors(plan.body) == []


def test_cache_edits_only_where_the_provider_supports_them() -> None:
    records: list[AnyRecord] = [user("a"), reply("m1", {"type": "text", "text": "b"}), user("c")]
    edit = {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "ref_x"}]}
    plain = build_request(records, Config(), "", [], ANTHROPIC, new_edits=[edit])
    assert plain.new_records == ()
    assert plain.betas == ()
    assert all(b.get("type") != "cache_edits" for m in plain.body["messages"] for b in m["content"])
    local = build_request(records, Config(), "", [], LOCAL, new_edits=[edit])
    pins = [r for r in local.new_records if isinstance(r, CachePin)]
    assert [(p.message_index, p.block) for p in pins] == [(2, edit)]
    assert local.betas == ("cache-edits-2025-06-01",)
    assert find_errors(local.body) == []


def test_pins_from_before_a_compact_boundary_are_not_reinserted() -> None:
    stale = CachePin(**_env(), message_index=0, block_index=0, block={"type": "cache_edits", "edits": []})
    records: list[AnyRecord] = [
        user("old"),
        stale,
        CompactBoundary(**_env()),
        user("Summary: earlier work", is_compact_summary=True),
    ]
    plan = build_request(records, Config(), "", [], LOCAL)
    assert all(b.get("type") != "cache_edits" for m in plan.body["messages"] for b in m["content"])


def test_nothing_to_send_is_a_user_error() -> None:
    with pytest.raises(UserError, match="nothing to send"):
        build_request([], Config(), "", [], ANTHROPIC)


def test_max_tokens_override_per_request() -> None:
    records: list[AnyRecord] = [user("hello")]
    assert (
        build_request(records, Config(), "", [], ANTHROPIC).body["max_tokens"] == Config().max_output_tokens
    )
    assert build_request(records, Config(), "", [], ANTHROPIC, max_tokens=64_000).body["max_tokens"] == 64_000
