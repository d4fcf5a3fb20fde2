"""Cache marking (design.md §4.2) and phase-1 cache-break hashes (R7.2)."""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest
from tests.api.test_params import LOCAL

from foldline._json import decode_record, encode_line
from foldline._types import Block
from foldline.api.cache import (
    add_cache_breakpoints,
    cache_reference_for,
    cached_prefix_bytes,
    diff_states,
    previous_turn_breakpoint,
    prompt_state_hashes,
    same_objects_prefix,
)
from foldline.api.normalize import MessageParam
from foldline.api.params import RequestAssembler, RequestPlan, build_request
from foldline.api.validate import find_errors
from foldline.config import CacheConfig, Config
from foldline.timeline import AnyRecord, AssistantEntry, AssistantMessage, CachePin, UserEntry, UserMessage

TOOLS = [
    {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}},
    {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}},
]
SYSTEM = ["You are a coding agent.", "Today is Tuesday."]


def _controls(body: dict[str, Any]) -> list[tuple[str, Any]]:
    found = [("tools", t["cache_control"]) for t in body.get("tools", []) if "cache_control" in t]
    found += [("system", b["cache_control"]) for b in body.get("system", []) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        found += [
            (f"messages.{i}.{j}", b["cache_control"])
            for j, b in enumerate(m["content"])
            if "cache_control" in b
        ]
    return found


def _msgs(*specs: tuple[str, list[Block]]) -> list[MessageParam]:
    return [{"role": role, "content": content} for role, content in specs]  # type: ignore[typeddict-item]


def _t(value: str) -> Block:
    return {"type": "text", "text": value}


def test_breakpoints_on_tools_system_and_last_message() -> None:
    messages = _msgs(("user", [_t("hi")]), ("assistant", [_t("yo")]), ("user", [_t("more"), _t("and more")]))
    marked = add_cache_breakpoints(messages, system=[_t("sys")], tools=TOOLS)
    # the static prefix is written for an hour (CacheConfig.static_ttl), the rolling one for 5 minutes
    assert marked.tools[-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in marked.tools[0]
    assert marked.system[-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert marked.message_breakpoints == ((2, 1),)
    assert marked.messages[2]["content"][1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in messages[2]["content"][1]  # inputs untouched
    assert "cache_control" not in TOOLS[-1]


def test_volatile_last_message_moves_the_rolling_breakpoint_back() -> None:
    messages = _msgs(("user", [_t("a")]), ("assistant", [_t("b")]), ("user", [_t("c")]))
    marked = add_cache_breakpoints(messages, volatile_last=True)
    assert marked.message_breakpoints == ((1, 0),)


def test_never_on_thinking_empty_text_or_cache_edits() -> None:
    thinking: Block = {"type": "thinking", "thinking": "x", "signature": "s"}
    edits: Block = {"type": "cache_edits", "edits": []}
    messages = _msgs(
        ("user", [_t("a")]), ("assistant", [_t("b"), thinking]), ("user", [_t("c"), _t(""), edits])
    )
    marked = add_cache_breakpoints(messages, volatile_last=False)
    assert marked.message_breakpoints == ((2, 0),)
    marked = add_cache_breakpoints(messages, volatile_last=True)
    assert marked.message_breakpoints == ((1, 0),)


def test_one_hour_ttl_never_follows_five_minutes() -> None:
    messages = _msgs(("user", [_t("a")]))
    mixed = add_cache_breakpoints(
        messages, system=[_t("s")], tools=TOOLS, config=CacheConfig(static_ttl="5m", message_ttl="1h")
    )
    assert mixed.messages[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    long_first = add_cache_breakpoints(
        messages, system=[_t("s")], tools=TOOLS, config=CacheConfig(static_ttl="1h", message_ttl="5m")
    )
    body = {"model": "m", "max_tokens": 10, "messages": long_first.messages, "system": long_first.system}
    body["tools"] = long_first.tools
    assert [c for _, c in _controls(body)] == [
        {"type": "ephemeral", "ttl": "1h"},
        {"type": "ephemeral", "ttl": "1h"},
        {"type": "ephemeral"},
    ]
    assert find_errors(body) == []


def test_lookback_adds_a_breakpoint_when_a_turn_adds_more_than_20_blocks() -> None:
    uses = [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {}} for i in range(12)]
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"} for i in range(12)]
    messages = _msgs(("user", [_t("go")]), ("assistant", uses), ("user", results))
    assert previous_turn_breakpoint(messages) == (0, 0)
    marked = add_cache_breakpoints(messages, system=[_t("s")], tools=TOOLS)
    assert marked.message_breakpoints == ((0, 0), (2, 11))
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": marked.messages,
        "system": marked.system,
        "tools": marked.tools,
    }
    assert len(_controls(body)) == 4
    assert find_errors(body) == []
    small = _msgs(("user", [_t("go")]), ("assistant", uses[:3]), ("user", results[:3]))
    assert add_cache_breakpoints(small).message_breakpoints == ((2, 2),)


def test_cache_references_only_with_cache_edits_support() -> None:
    messages = _msgs(
        ("user", [_t("go")]),
        ("assistant", [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]),
        ("user", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]),
    )
    plain = add_cache_breakpoints(messages)
    assert "cache_reference" not in plain.messages[2]["content"][0]
    marked = add_cache_breakpoints(messages, supports_cache_edits=True)
    assert marked.messages[2]["content"][0]["cache_reference"] == cache_reference_for("toolu_1")
    assert cache_reference_for("toolu_1") == cache_reference_for("toolu_1") != cache_reference_for("toolu_2")


def test_pins_are_reinserted_in_order_and_new_edits_pinned() -> None:
    messages = _msgs(("user", [_t("a")]), ("assistant", [_t("b")]), ("user", [_t("c")]))
    edit: Block = {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "ref_x"}]}
    first = add_cache_breakpoints(messages, new_edits=[edit], supports_cache_edits=True)
    (pin,) = first.new_pins
    assert (pin.message_index, pin.block_index, pin.block) == (2, 1, edit)
    grown = [*messages, *_msgs(("assistant", [_t("d")]), ("user", [_t("e")]))]
    again = add_cache_breakpoints(grown, pins=[pin], supports_cache_edits=True)
    assert again.messages[2]["content"] == [_t("c"), edit]
    assert again.new_pins == ()
    ignored = add_cache_breakpoints(grown, pins=[pin], supports_cache_edits=False)
    assert ignored.messages[2]["content"] == [_t("c")]


# --- the 50-turn session ------------------------------------------------------------------------

_n = itertools.count(1)


def _uid() -> str:
    n = next(_n)
    return f"{n:08x}-2222-4000-8000-{n:012x}"


def _user(content: str | list[Block]) -> UserEntry:
    return UserEntry(uuid=_uid(), timestamp="2026-01-01T00:00:00.000Z", message=UserMessage(content=content))


def _reply_pieces(turn: int, tool_ids: list[str]) -> list[AssistantEntry]:
    blocks: list[Block] = [
        {"type": "thinking", "thinking": f"turn {turn}", "signature": f"sig{turn}"},
        {"type": "text", "text": f"working on step {turn}"},
        *({"type": "tool_use", "id": t, "name": "Read", "input": {"path": f"{t}.py"}} for t in tool_ids),
    ]
    msg_id = f"msg_{turn:04d}"
    return [
        AssistantEntry(
            uuid=_uid(),
            timestamp="2026-01-01T00:00:00.000Z",
            message=AssistantMessage(id=msg_id, content=[b]),
        )
        for b in blocks
    ]


def _grow_session(turns: int) -> tuple[list[AnyRecord], list[RequestPlan]]:
    """A session growing turn by turn; each turn's request is built, its records appended, then a reply."""
    records: list[AnyRecord] = [_user("Refactor the parser.")]
    plans: list[RequestPlan] = []
    pending: list[str] = []
    config = Config(thinking_budget_tokens=2048)
    assembler = RequestAssembler(config, SYSTEM, TOOLS, LOCAL)  # one per session, as the engine keeps it
    for turn in range(turns):
        if pending:
            records += [
                _user([{"type": "tool_result", "tool_use_id": t, "content": f"{t} body " * 20}])
                for t in pending
            ]
        elif turn:
            records.append(_user(f"next: step {turn}"))
        sent = [t for p in plans for t in _sent_tool_ids(p)]
        edits: list[Block] = []
        if turn % 10 == 9 and sent:
            edits = [
                {
                    "type": "cache_edits",
                    "edits": [{"type": "delete", "cache_reference": cache_reference_for(sent[0])}],
                }
            ]
        plan = assembler.build(records, new_edits=edits)
        plans.append(plan)
        records += plan.new_records
        fan_out = 12 if turn == 20 else turn % 4  # turn 20 fans out: its results add > 20 blocks
        pending = [f"toolu_{turn:03d}_{k}" for k in range(fan_out)] if turn % 2 == 0 else []
        records += _reply_pieces(turn, pending)
    return records, plans


def _sent_tool_ids(plan: RequestPlan) -> list[str]:
    return [
        b["tool_use_id"]
        for m in plan.body["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def _whole(body: dict[str, Any]) -> bytes:
    last = len(body["messages"]) - 1
    return cached_prefix_bytes(body, (last, len(body["messages"][last]["content"]) - 1))


@pytest.fixture(scope="module")
def session() -> tuple[list[AnyRecord], list[RequestPlan]]:
    return _grow_session(50)


def test_each_request_validates_and_extends_the_previous_cached_prefix(session: Any) -> None:
    _, plans = session
    for plan in plans:
        assert find_errors(plan.body) == []
        assert len(_controls(plan.body)) <= 4
    for before, after in itertools.pairwise(plans):
        assert _whole(after.body).startswith(cached_prefix_bytes(before.body))
        assert after.body["thinking"] == before.body["thinking"]

    def ttl(plan: Any) -> str | None:
        m, b = plan.message_breakpoints[0]
        return plan.body["messages"][m]["content"][b]["cache_control"].get("ttl")

    fired = [i for i, p in enumerate(plans) if len(p.message_breakpoints) == 2 and ttl(p) is None]
    assert fired == [21]  # the turn after the fan-out keeps the previous prefix findable
    # the others with two open a turn: the previous prompt and this one, both for an hour
    assert all(ttl(p) == "1h" for p in plans if len(p.message_breakpoints) == 2 and p is not plans[21])
    assert len(_controls(plans[21].body)) == 4


def test_pinned_cache_edits_stay_byte_identical_in_place(session: Any) -> None:
    records, plans = session
    pins = [r for r in records if isinstance(r, CachePin)]
    assert len(pins) == 5  # turns 9, 19, 29, 39, 49
    first_seen: dict[str, bytes] = {}
    for plan in plans:
        for pin in pins:
            messages = plan.body["messages"]
            if pin.uuid in first_seen or pin in plan.new_records:
                block = messages[pin.message_index]["content"][pin.block_index]
                first_seen.setdefault(pin.uuid, orjson.dumps(block))
                assert orjson.dumps(block) == first_seen[pin.uuid]
    assert set(first_seen) == {p.uuid for p in pins}


def test_resume_rebuilds_the_same_request_bytes(session: Any) -> None:
    records, _ = session
    records = [*records, _user("one more thing")]
    live = build_request(records, Config(thinking_budget_tokens=2048), SYSTEM, TOOLS, LOCAL)
    assembler = RequestAssembler(Config(thinking_budget_tokens=2048), SYSTEM, TOOLS, LOCAL)
    assembler.build(records[:-40])
    assert orjson.dumps(assembler.build(records).body) == orjson.dumps(live.body)
    resumed_records = [decode_record(encode_line(r)) for r in records]
    resumed = build_request(resumed_records, Config(thinking_budget_tokens=2048), SYSTEM, TOOLS, LOCAL)
    assert orjson.dumps(resumed.body) == orjson.dumps(live.body)
    assert resumed.betas == live.betas == ("cache-edits-2025-06-01",)
    assert resumed.new_records == live.new_records == ()  # the beta is latched, the pins are known


# --- phase 1 of cache-break detection -------------------------------------------------------------


def _body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
        "tools": [dict(t) for t in TOOLS],
        "messages": [{"role": "user", "content": "hi"}],
    }
    body.update(overrides)
    return body


def test_same_objects_prefix_counts_identity_not_equality() -> None:
    a, b, c = {"x": 1}, {"x": 1}, {"x": 2}
    assert same_objects_prefix([a, c, b], [a, c, a]) == 2
    assert same_objects_prefix([a, b], [a, {"x": 1}]) == 1  # equal but another object: not reused
    assert same_objects_prefix([a, c], [a, c, b]) == 2
    assert same_objects_prefix([], [a]) == 0


def test_state_diff_names_what_changed() -> None:
    base = prompt_state_hashes(_body(), betas=["b1"])
    assert diff_states(None, base) == ()
    assert diff_states(base, prompt_state_hashes(_body(), betas=["b1"])) == ()
    assert (
        diff_states(
            base, prompt_state_hashes(_body(messages=[{"role": "user", "content": "x"}]), betas=["b1"])
        )
        == ()
    )
    assert diff_states(base, prompt_state_hashes(_body(model="claude-opus-4-5"), betas=["b1"])) == ("model",)
    assert diff_states(base, prompt_state_hashes(_body(), betas=["b1", "b2"])) == ("betas",)
    ttl = [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    assert diff_states(base, prompt_state_hashes(_body(system=ttl), betas=["b1"])) == ("system_cache_layout",)
    changed_tool = [TOOLS[0], {**TOOLS[1], "description": "Run a shell command"}]
    assert diff_states(base, prompt_state_hashes(_body(tools=changed_tool), betas=["b1"])) == (
        "tools",
        "tool_changed:Bash",
    )
    assert diff_states(base, prompt_state_hashes(_body(tools=TOOLS[:1]), betas=["b1"])) == (
        "tools",
        "tool_removed:Bash",
    )
    thinking = {"type": "enabled", "budget_tokens": 2048}
    assert diff_states(base, prompt_state_hashes(_body(thinking=thinking), betas=["b1"])) == ("effort",)
    assert diff_states(base, prompt_state_hashes(_body(temperature=0.5), betas=["b1"])) == ("extra_body",)
    assert diff_states(base, prompt_state_hashes(_body(), betas=["b1"], fast_mode=True)) == ("fast_mode",)
    assert diff_states(base, prompt_state_hashes(_body(), betas=["b1"], cache_strategy="1h")) == (
        "cache_strategy",
    )
    system_text = [{"type": "text", "text": "other", "cache_control": {"type": "ephemeral"}}]
    assert diff_states(base, prompt_state_hashes(_body(system=system_text), betas=["b1"])) == ("system_text",)


def test_the_local_servers_cache_reads_every_previous_prefix(session: Any) -> None:
    """Each request reads back all that the request before it wrote (the server's own cache keys)."""
    from foldline.server.caching import PromptCache, flatten

    _, plans = session
    cache = PromptCache(clock=lambda: 0.0)
    previous_cached = 0
    for turn, plan in enumerate(plans):
        usage = cache.apply(flatten(plan.body), min_tokens=0)
        if turn:
            assert usage.cache_read_input_tokens >= previous_cached > 0, turn
        previous_cached = usage.cache_read_input_tokens + usage.cache_creation_input_tokens


def _fold(n: int) -> Block:
    summary = f"turn {n}: read the failing test, fixed the parser."
    return _t(f"<collapsed-context id=f{n}>\n{summary}\n</collapsed-context>")


def test_the_fold_summaries_keep_an_hour_entry_in_a_spare_breakpoint() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}
    mid_turn = _msgs(
        ("user", [_fold(1), _t("now the lexer")]),
        ("assistant", [use]),
        ("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
    )
    marked = add_cache_breakpoints(mid_turn, system=[_t("s")], tools=TOOLS, stable_end=(0, 0))
    assert marked.message_breakpoints == ((0, 0), (2, 0))
    assert marked.messages[0]["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    # no spare breakpoint: a turn of more than 20 blocks needs both for the lookback
    uses = [{"type": "tool_use", "id": f"t{i}", "name": "Read", "input": {}} for i in range(12)]
    results = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"} for i in range(12)]
    busy = _msgs(("user", [_fold(1), _t("go")]), ("assistant", uses), ("user", results))
    crowded = add_cache_breakpoints(busy, system=[_t("s")], tools=TOOLS, stable_end=(0, 0))
    assert crowded.message_breakpoints == ((0, 1), (2, 11))
    assert "cache_control" not in crowded.messages[0]["content"][0]
    # nothing to add when the summaries end where the only breakpoint already is
    opening = _msgs(("user", [_fold(1)]))
    assert add_cache_breakpoints(opening, stable_end=(0, 0)).message_breakpoints == ((0, 0),)
    body = {"model": "m", "max_tokens": 10, "messages": marked.messages, "system": marked.system}
    assert find_errors(body | {"tools": marked.tools}) == []


def test_the_next_fold_reads_the_earlier_summaries_from_the_cache() -> None:
    """A fold rewrites from its summary on, not every message: the summaries before it stay cached."""
    from foldline.server.caching import PromptCache, flatten

    use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}
    long_text = " ".join(["word"] * 3_000)
    turn_2 = _msgs(
        ("user", [_t(f"<collapsed-context id=f1>\n{long_text}\n</collapsed-context>"), _t("now the lexer")]),
        ("assistant", [use]),
        ("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
    )
    # turn 3 opens after turn 2 was folded too: the second summary follows the first
    turn_3 = _msgs(("user", [turn_2[0]["content"][0], _fold(2), _t("and the tests")]))

    def read_by_turn_3(anchor: bool) -> int:
        cache = PromptCache(clock=lambda: 0.0)
        for messages, end in ((turn_2, (0, 0)), (turn_3, (0, 1))):
            marked = add_cache_breakpoints(
                messages, system=[_t("s")], tools=TOOLS, stable_end=end if anchor else None
            )
            body = {"model": "m", "messages": marked.messages, "system": marked.system, "tools": marked.tools}
            usage = cache.apply(flatten(body), min_tokens=0)
        return usage.cache_read_input_tokens

    assert read_by_turn_3(anchor=True) > 3_000  # the first summary came from the cache
    assert read_by_turn_3(anchor=False) < 1_000  # only tools and system did


def test_a_request_marks_where_the_fold_summaries_end() -> None:
    """The engine's requests give the cache marking the last fold summary: it carries a 1h breakpoint."""
    from foldline.providers.base import Capabilities
    from foldline.timeline import CollapseCommit

    def entry(n: int, role: str, text: str) -> AnyRecord:
        uuid, parent = f"00000000-0000-4000-8000-{n:012d}", f"00000000-0000-4000-8000-{n - 1:012d}"
        if role == "user":
            return UserEntry(
                uuid=uuid,
                parent_uuid=parent if n > 1 else None,
                timestamp="t",
                message=UserMessage(content=text),
            )
        return AssistantEntry(
            uuid=uuid,
            parent_uuid=parent,
            timestamp="t",
            message=AssistantMessage(id=f"m{n}", content=[_t(text)]),
        )

    records: list[AnyRecord] = [
        entry(1, "user", "fix the parser"),
        entry(2, "assistant", "fixed"),
        entry(3, "user", "now the lexer"),
        entry(4, "assistant", "done"),
        entry(5, "user", "and the tests"),
    ]
    fold = CollapseCommit(
        uuid="c1",
        timestamp="t",
        collapse_id="f1",
        first_uuid=records[0].uuid,
        last_uuid=records[1].uuid,
        summary="turn 1: fixed the parser",
    )
    plan = build_request([*records, fold], Config(), SYSTEM, TOOLS, Capabilities(name="test"))
    marks = dict(_controls(plan.body))
    [(where, text)] = [
        (f"messages.{i}.{j}", b["text"])
        for i, m in enumerate(plan.body["messages"])
        for j, b in enumerate(m["content"])
        if b.get("type") == "text" and b["text"].startswith("<collapsed-context")
    ]
    assert "fixed the parser" in text
    assert where in marks  # its TTL is the price rule's (the next test)
    assert find_errors(plan.body) == []


def _summaries_then_mid_turn(folds: int) -> list[MessageParam]:
    """`folds` fold summaries of about 600 characters, then a turn waiting on a tool result."""
    use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {}}
    summaries = [
        _t(
            f"<collapsed-context id=f{n}>\n"
            + "read the log, fixed the parser. " * 18
            + "\n</collapsed-context>"
        )
        for n in range(folds)
    ]
    return _msgs(
        ("user", [*summaries, _t("now the lexer")]),
        ("assistant", [use]),
        ("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
    )


@pytest.mark.parametrize(
    ("folds", "outlook", "ttl"),
    [
        # no pauses (a script, a benchmark): five minutes, like the breakpoints after it
        (4, {"pause_share": 0.0, "long_pause_share": 0.0, "change_rate": 0.25}, None),
        # a pause past five minutes before a quarter of the prompts: the hour saves rewriting it
        (4, {"pause_share": 0.25, "long_pause_share": 0.05, "change_rate": 0.25}, "1h"),
        # the same pauses, but a fold nearly every turn writes again what the entry holds
        (1, {"pause_share": 0.25, "long_pause_share": 0.05, "change_rate": 1.0}, None),
        # pauses past the hour as often as past five minutes: the hour bridges none of them
        (4, {"pause_share": 0.25, "long_pause_share": 0.25, "change_rate": 0.0}, None),
    ],
)
def test_the_fold_summaries_entry_takes_the_hour_only_when_pauses_pay_for_it(
    folds: int, outlook: dict[str, float], ttl: str | None
) -> None:
    messages = _summaries_then_mid_turn(folds)
    marked = add_cache_breakpoints(
        messages, system=[_t("s")], tools=TOOLS, stable_end=(0, folds - 1), **outlook
    )
    assert marked.message_breakpoints[0] == (0, folds - 1)
    expected = {"type": "ephemeral", "ttl": ttl} if ttl else {"type": "ephemeral"}
    assert marked.messages[0]["content"][folds - 1]["cache_control"] == expected
    body = {"model": "m", "max_tokens": 10, "messages": marked.messages, "system": marked.system}
    assert find_errors(body | {"tools": marked.tools}) == []


def test_before_one_hour_turn_breakpoints_the_fold_summaries_entry_is_an_hour_too() -> None:
    """A 1h breakpoint may not follow a 5m one: when the turn's breakpoints take the hour, so does
    the summaries' entry, whatever its own rule says."""
    opening = _msgs(
        ("user", [_t("<collapsed-context id=f0>\nfixed the parser\n</collapsed-context>"), _t("the lexer")]),
        ("assistant", [_t("done")]),
        ("user", [_t("and the tests")]),
    )
    no_pauses = {"pause_share": 0.0, "long_pause_share": 0.0, "change_rate": 1.0}
    marked = add_cache_breakpoints(
        opening,
        system=[_t("s")],  # no tools: a breakpoint to spare beside the turn's two
        stable_end=(0, 0),
        config=CacheConfig(turn_ttl="1h"),
        **no_pauses,
    )
    assert marked.message_breakpoints[0] == (0, 0)
    assert {p: _ttl_at(marked.messages, p) for p in marked.message_breakpoints} == dict.fromkeys(
        marked.message_breakpoints, "1h"
    )
    assert len(marked.message_breakpoints) == 3
    body = {"model": "m", "max_tokens": 10, "messages": marked.messages, "system": marked.system}
    assert find_errors(body) == []


def _ttl_at(messages: list[MessageParam], position: tuple[int, int]) -> str:
    control = messages[position[0]]["content"][position[1]]["cache_control"]
    return str(control.get("ttl", "5m"))
