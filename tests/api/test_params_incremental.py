"""The incremental paths give exactly what the from-scratch ones give, turn after turn.

`IncrementalNormalizer` against `normalize_messages_for_api`, and one long-lived `RequestAssembler`
against a fresh `build_request` per turn, on every prefix of the messy timelines of
`tests/api/strategies.py`, with cache_edits pinned along the way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from tests.api.strategies import Generated, messy_timelines
from tests.api.test_params import LOCAL, reply, user

from foldline.api.cache import cache_reference_for
from foldline.api.normalize import IncrementalNormalizer, NormalizeOptions, normalize_messages_for_api
from foldline.api.params import RequestAssembler, build_request, pause_shares
from foldline.config import CacheConfig, Config
from foldline.errors import UserError
from foldline.timeline import AnyRecord, CachePin, CollapseCommit, ResultsCleared, SnipBoundary, UserEntry

_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOOLS = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]


def _outcome(fn: Any) -> bytes:
    try:
        return orjson.dumps(fn())
    except UserError as exc:
        return f"UserError: {exc}".encode()


@_SETTINGS
@given(messy_timelines(max_actions=20))
def test_incremental_normalizer_matches_the_pure_one_on_every_prefix(generated: Generated) -> None:
    incremental = IncrementalNormalizer(NormalizeOptions(snip_enabled=True))
    for k in range(1, len(generated.entries) + 1):
        prefix = generated.entries[:k]
        want = _outcome(lambda prefix=prefix: normalize_messages_for_api(prefix, snip_enabled=True))
        assert _outcome(lambda prefix=prefix: incremental.messages(prefix)) == want


def _result_ids(entry: AnyRecord) -> list[str]:
    if not isinstance(entry, UserEntry) or isinstance(entry.message.content, str):
        return []
    return [str(b.get("tool_use_id")) for b in entry.message.content if b.get("type") == "tool_result"]


def _delete(tool_use_id: str) -> dict[str, Any]:
    return {
        "type": "cache_edits",
        "edits": [{"type": "delete", "cache_reference": cache_reference_for(tool_use_id)}],
    }


def _pin_view(records: tuple[AnyRecord, ...]) -> list[tuple[int, int, bytes]]:
    return [
        (r.message_index, r.block_index, orjson.dumps(r.block)) for r in records if isinstance(r, CachePin)
    ]


@pytest.mark.slow
@_SETTINGS
@given(messy_timelines(max_actions=20))
def test_long_lived_assembler_matches_a_fresh_build_every_turn(generated: Generated) -> None:
    config = Config(thinking_budget_tokens=2048)
    assembler = RequestAssembler(config, ["stable", "dynamic"], TOOLS, LOCAL)
    records: list[AnyRecord] = []
    for k, entry in enumerate(generated.entries):
        records.append(entry)
        edits = [_delete(t) for t in _result_ids(entry)] if k % 3 == 0 else []
        try:
            fresh = build_request(records, config, ["stable", "dynamic"], TOOLS, LOCAL, new_edits=edits)
        except UserError:
            with pytest.raises(UserError):
                assembler.build(records, new_edits=edits)
            continue
        plan = assembler.build(records, new_edits=edits)
        assert orjson.dumps(plan.body) == orjson.dumps(fresh.body)
        assert plan.betas == fresh.betas
        assert _pin_view(plan.new_records) == _pin_view(fresh.new_records)
        records += plan.new_records


def test_a_snip_rebuilds_the_projection() -> None:
    first, second = user("keep me"), user("snip me")
    records: list[AnyRecord] = [first, reply("m1", {"type": "text", "text": "ok"}), second]
    assembler = RequestAssembler(Config(snip_enabled=False), "", [], LOCAL)
    assert len(assembler.build(records).body["messages"]) == 3
    records.append(SnipBoundary(uuid="s1", timestamp="t", removed_uuids=(second.uuid,)))
    records.append(user("after the snip"))
    body = assembler.build(records).body
    assert orjson.dumps(body) == orjson.dumps(
        build_request(records, Config(snip_enabled=False), "", [], LOCAL).body
    )
    assert "snip me" not in orjson.dumps(body).decode()


def test_later_turns_reuse_the_earlier_messages() -> None:
    records: list[AnyRecord] = [user("go")]
    assembler = RequestAssembler(Config(), "", TOOLS, LOCAL)
    plans = []
    for turn in range(6):
        tid = f"toolu_{turn}"
        records += [
            reply(f"m{turn}", {"type": "tool_use", "id": tid, "name": "Read", "input": {}}),
            user([{"type": "tool_result", "tool_use_id": tid, "content": "ok"}]),
        ]
        plans.append(assembler.build(records))
    first, last = plans[-2].body["messages"], plans[-1].body["messages"]
    assert all(a is b for a, b in zip(first[:-3], last, strict=False))  # frozen head: the same objects
    assert last[-1] is not first[-1]


def test_a_late_result_for_a_frozen_tool_call_starts_over_and_still_matches() -> None:
    records: list[AnyRecord] = [
        user("go"),
        reply("m1", {"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {}}),
    ]
    records += [
        user("never mind"),
        reply("m2", {"type": "text", "text": "ok"}),
        user("next"),
        reply("m3", {"type": "text", "text": "sure"}),
    ]
    assembler = RequestAssembler(Config(), "", [], LOCAL)
    assembler.build([*records, user("more")])
    records += [user("more"), user([{"type": "tool_result", "tool_use_id": "toolu_a", "content": "late"}])]
    body = assembler.build(records).body
    assert orjson.dumps(body) == orjson.dumps(build_request(records, Config(), "", [], LOCAL).body)
    assert body["messages"][2]["content"][0]["content"] == "late"


def _collections_during(action: Any) -> int:
    """How many cyclic collections started while `action` ran (thresholds lowered so any would)."""
    import gc

    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    thresholds = gc.get_threshold()
    gc.set_threshold(50, 2, 2)
    gc.callbacks.append(count)
    try:
        action()
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*thresholds)
    return len(started)


def test_a_cold_build_runs_no_garbage_collection_and_leaves_collection_as_it_was() -> None:
    import gc

    records: list[AnyRecord] = [user("start")]
    for n in range(300):
        records += [
            reply(f"msg_{n}", {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"p": n}}),
            user([{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "x" * 40}]),
        ]
    config = Config()
    fresh = RequestAssembler(config, ["system"], TOOLS, LOCAL)
    # at most the catch-up on the way out, where the same build unpaused collects again and again
    assert _collections_during(lambda: fresh.build(records)) <= 2
    assert gc.isenabled()
    unpaused = RequestAssembler(config, ["system"], TOOLS, LOCAL)
    assert _collections_during(lambda: unpaused._build(records, (), (), False, True, None)) > 10
    gc.disable()
    try:
        RequestAssembler(config, ["system"], TOOLS, LOCAL).build(records)
        assert not gc.isenabled()  # a caller's choice to keep it off is kept
    finally:
        gc.enable()


def test_folds_committed_along_the_way_mark_the_same_summary_end_as_a_fresh_build() -> None:
    """The assembler keeps where the fold summaries end between requests; each fold moves it."""
    records: list[AnyRecord] = []
    assembler = RequestAssembler(Config(), "sys", TOOLS, LOCAL)
    marked: list[str] = []
    for turn in range(8):
        tid = f"toolu_{turn}"
        records += [
            user(f"turn {turn}: read the file"),
            reply(f"m{turn}a", {"type": "tool_use", "id": tid, "name": "Read", "input": {}}),
            user([{"type": "tool_result", "tool_use_id": tid, "content": "ok " * 50}]),
            reply(f"m{turn}b", {"type": "text", "text": f"done {turn}"}),
        ]
        if turn in (3, 6):  # fold the turns not folded yet, save the last two
            first = next(
                r
                for r in records
                if isinstance(r, UserEntry) and r.message.content == f"turn {turn - 3}: read the file"
            )
            last = records[-5]
            records.append(
                CollapseCommit(
                    uuid=f"c{turn}",
                    timestamp="t",
                    collapse_id=f"c{turn}",
                    first_uuid=first.uuid,
                    last_uuid=last.uuid,
                    summary=f"turns up to {turn - 1}",
                )
            )
        for extra in ("next", "and on"):
            records.append(user(f"{extra} {turn}"))
            plan = assembler.build(records)
            fresh = build_request(records, Config(), "sys", TOOLS, LOCAL)
            assert orjson.dumps(plan.body) == orjson.dumps(fresh.body)
            marked += [
                b["text"][:30]
                for m in plan.body["messages"]
                for b in m["content"]
                if b.get("type") == "text" and b["text"].startswith("<collapsed") and "cache_control" in b
            ]
            records.append(reply(f"m{turn}{extra}", {"type": "text", "text": "ok"}))
    assert {text.split(">")[0] for text in marked} == {"<collapsed-context id=c3", "<collapsed-context id=c6"}


def test_a_session_that_changes_sent_bytes_every_turn_stops_writing_one_hour_turn_entries() -> None:
    """The turn TTL rule counts how often the session changed bytes it had sent (design.md R4.2.4):
    cleared results every turn leave a 1h turn entry nothing to be read by, so none is written."""
    config = Config(cache=CacheConfig(pause_share_prior=1.0, pause_prior_weight=1e9))  # every pause long

    def one_hour_points(clear: bool) -> list[int]:
        records: list[AnyRecord] = []
        assembler = RequestAssembler(config, "sys", TOOLS, LOCAL)
        counts = []
        for turn in range(6):
            tid = f"toolu_{turn}"
            records.append(user(f"turn {turn}: read the file"))
            plan = assembler.build(records)
            fresh = build_request(records, config, "sys", TOOLS, LOCAL)
            assert orjson.dumps(plan.body) == orjson.dumps(fresh.body)
            counts.append(orjson.dumps(plan.body["messages"]).count(b'"ttl":"1h"'))
            records += [
                reply(f"m{turn}a", {"type": "tool_use", "id": tid, "name": "Read", "input": {}}),
                user([{"type": "tool_result", "tool_use_id": tid, "content": "ok " * 400}]),
                reply(f"m{turn}b", {"type": "text", "text": f"done {turn}"}),
            ]
            if clear:
                records.append(
                    ResultsCleared(uuid=f"c{turn}", timestamp="t", tool_use_ids=(tid,), placeholder="[old]")
                )
        return counts

    # the third turn is the first a 1h entry pays for; from the fourth the previous prompt has one too
    assert one_hour_points(clear=False) == [0, 0, 1, 2, 2, 2]
    assert one_hour_points(clear=True) == [0, 0, 0, 0, 0, 0]


def test_pause_shares_count_the_session_s_pauses_past_each_ttl_over_the_priors() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    entries = []
    for minutes in (0, 1, 11, 11 + 90, 11 + 90 + 2):  # pauses of 1 min, 10 min, 90 min, 2 min
        entry = user(f"prompt at {minutes}")
        entries.append(
            msgspec.structs.replace(entry, timestamp=(start + timedelta(minutes=minutes)).isoformat())
        )
    cfg = CacheConfig(pause_share_prior=0.5, long_pause_share_prior=0.25, pause_prior_weight=4)
    shares = pause_shares(entries, cfg)
    assert shares.past_5m == pytest.approx((0.5 * 4 + 2) / 8)  # the 10- and 90-minute pauses
    assert shares.past_1h == pytest.approx((0.25 * 4 + 1) / 8)  # the 90-minute one


def test_the_pauses_of_folded_turns_still_count() -> None:
    """A fold takes its turns out of the request, not out of what they say about the user: four
    long pauses, then folded, still make the hour pay for the fold summaries' entry."""
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def stamped(entry: Any, minutes: float) -> Any:
        return msgspec.structs.replace(entry, timestamp=(start + timedelta(minutes=minutes)).isoformat())

    records: list[AnyRecord] = []
    clock = 0.0
    for turn, pause in enumerate((0, 20, 20, 20, 20, 1, 1)):  # minutes before each prompt
        clock += pause
        records += [
            stamped(user(f"turn {turn}: read the log " + "and the parser " * 200), clock),
            stamped(reply(f"m{turn}", {"type": "text", "text": f"done {turn} " * 100}), clock + 0.5),
        ]
        clock += 0.5
    first, last = records[0], records[9]  # turns 0-4, with the four long pauses
    records.insert(
        12,
        CollapseCommit(
            uuid="c1",
            timestamp="t",
            collapse_id="c1",
            first_uuid=first.uuid,
            last_uuid=last.uuid,
            summary="turns 0-4: " + "read the log " * 150,
        ),
    )
    records.append(stamped(user("and the tests"), clock + 1))
    cache = CacheConfig(pause_share_prior=0.0, long_pause_share_prior=0.0)
    plan = build_request(records, Config(cache=cache), "sys", TOOLS, LOCAL)
    summary = next(
        b for m in plan.body["messages"] for b in m["content"] if b.get("text", "").startswith("<collapsed")
    )
    # four pauses past five minutes of seven: (1.25 x 4/7) x the summaries > 0.75 x 1/7 x the newest
    assert summary["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
