"""API rounds (R3.4.5, R3.4.10): a cut between rounds never separates a tool call from its result."""

from __future__ import annotations

import math

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from foldline.api.params import build_request
from foldline.api.validate import ValidationLimits, find_errors
from foldline.compact.api_rounds import (
    PTL_MARKER,
    api_rounds,
    drop_oldest_rounds,
    recent_tail_start,
    rounds_to_drop,
    shrink_oversized,
)
from foldline.config import Config
from foldline.providers.base import Capabilities
from foldline.timeline import AssistantEntry, AssistantMessage, Entry, UserEntry, UserMessage
from foldline.tokens import estimate_entry


def _user(n: int, content: str | list[dict[str, object]]) -> UserEntry:
    return UserEntry(
        uuid=f"00000000-0000-4000-8000-{n:012d}",
        timestamp="2026-01-01T00:00:00Z",
        session_id="s",
        message=UserMessage(content=content),  # type: ignore[arg-type]
    )


def _reply(n: int, msg_id: str, content: list[dict[str, object]]) -> AssistantEntry:
    return AssistantEntry(
        uuid=f"00000000-0000-4000-8000-{n:012d}",
        timestamp="2026-01-01T00:00:00Z",
        session_id="s",
        message=AssistantMessage(id=msg_id, model="m", content=content),  # type: ignore[arg-type]
    )


# One round: (tool calls, reply split in two pieces, results split in two messages, prompt after, words)
_round = st.tuples(st.integers(0, 3), st.booleans(), st.booleans(), st.booleans(), st.integers(1, 300))


def _conversation(rounds: list[tuple[int, bool, bool, bool, int]]) -> list[Entry]:
    n = 0

    def nxt() -> int:
        nonlocal n
        n += 1
        return n

    entries: list[Entry] = [_user(nxt(), "start " + "w " * 50)]
    for r, (calls, split_reply, split_results, prompt, words) in enumerate(rounds):
        msg_id = f"msg_{r}"
        text = {"type": "text", "text": f"round {r} " + "x " * words}
        uses = [
            {"type": "tool_use", "id": f"toolu_{r}_{i}", "name": "Read", "input": {"file_path": "/a"}}
            for i in range(calls)
        ]
        if split_reply and uses:
            entries += [_reply(nxt(), msg_id, [text]), _reply(nxt(), msg_id, uses)]
        else:
            entries.append(_reply(nxt(), msg_id, [text, *uses]))
        results = [{"type": "tool_result", "tool_use_id": u["id"], "content": "r " * words} for u in uses]
        if results and split_results and len(results) > 1:
            entries += [_user(nxt(), results[:1]), _user(nxt(), results[1:])]
        elif results:
            entries.append(_user(nxt(), results))
        if prompt or not results:
            entries.append(_user(nxt(), f"prompt {r} " + "p " * words))
    return entries


def _uses(entries: list[Entry]) -> set[str]:
    return {
        str(b["id"])
        for e in entries
        if isinstance(e, AssistantEntry)
        for b in e.message.content
        if b.get("type") == "tool_use"
    }


def _results(entries: list[Entry]) -> set[str]:
    return {
        str(b["tool_use_id"])
        for e in entries
        if isinstance(e, UserEntry) and isinstance(e.message.content, list)
        for b in e.message.content
        if b.get("type") == "tool_result"
    }


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_round, min_size=0, max_size=12),
    st.one_of(st.none(), st.integers(-10, 20_000)),
)
def test_dropping_rounds_covers_the_gap_exactly_and_never_splits_a_pair(
    rounds: list[tuple[int, bool, bool, bool, int]], gap: int | None
) -> None:
    entries = _conversation(rounds)
    groups = api_rounds(entries)
    assert [e for g in groups for e in g] == entries
    sizes = [sum(estimate_entry(e) for e in g) for g in groups]
    kept, count = drop_oldest_rounds(entries, gap, 0.2)

    # exactly the rounds the gap requires: enough to cover it, one fewer would not (never all)
    if len(groups) < 2:
        assert count == 0
    elif gap is None or gap <= 0:
        assert count == min(max(1, math.floor(0.2 * len(groups))), len(groups) - 1)
    else:
        assert 1 <= count <= len(groups) - 1
        assert sum(sizes[:count]) >= gap or count == len(groups) - 1
        assert sum(sizes[: count - 1]) < gap
    body = [e for e in kept if not (isinstance(e, UserEntry) and e.message.content == PTL_MARKER)]
    assert body == [e for g in groups[count:] for e in g]

    # never split a pair: every result's call survives with it, and the request is valid
    assert _results(body) <= _uses(body)
    assert _uses(body) <= _results(body) or not rounds
    if count:
        request = build_request(
            [*kept, _user(10_000, "Summarize.")], Config(), "sys", [], Capabilities(name="t"), max_tokens=100
        )
        assert find_errors(request.body, ValidationLimits()) == []


def test_rounds_to_drop_examples() -> None:
    assert rounds_to_drop([100, 100, 100, 100], 150, 0.2) == 2
    assert rounds_to_drop([100, 100, 100, 100], 100, 0.2) == 1
    assert rounds_to_drop([100, 100, 100, 100], 10_000, 0.2) == 3  # never all
    assert rounds_to_drop([100] * 10, None, 0.2) == 2
    assert rounds_to_drop([100] * 3, None, 0.2) == 1  # at least one
    assert rounds_to_drop([100], 50, 0.2) == 0


def test_recent_tail_keeps_what_the_memory_does_not_cover_and_grows_to_the_minimum() -> None:
    entries = _conversation([(1, False, False, True, 100)] * 8)
    starts = [i for i, e in enumerate(entries) if isinstance(e, AssistantEntry)]
    covered = starts[-1] - 1  # the memory covers everything before the last round
    start = recent_tail_start(entries, covered + 1, min_tokens=1, max_tokens=10_000, min_text_messages=1)
    assert start == starts[-1]
    tail_tokens = sum(estimate_entry(e) for e in entries[starts[-3] :])
    start = recent_tail_start(
        entries, covered + 1, min_tokens=tail_tokens, max_tokens=10_000, min_text_messages=1
    )
    assert start == starts[-3]  # grown by whole rounds until the minimum is met
    start = recent_tail_start(entries, covered + 1, min_tokens=1, max_tokens=10_000, min_text_messages=5)
    assert start is not None
    assert start < starts[-1]
    too_small = sum(estimate_entry(e) for e in entries[starts[-1] :]) - 1
    assert (
        recent_tail_start(entries, covered + 1, min_tokens=1, max_tokens=too_small, min_text_messages=1)
        is None
    )


def test_dropping_rounds_keeps_the_summaries_they_held() -> None:
    """A retry after an earlier compaction must not drop that compaction's summary (its facts)."""
    summary = msgspec.structs.replace(
        _user(1, "Summary:\n1. Primary Request and Intent: the staging port is 8275"), is_compact_summary=True
    )
    fold = _user(4, "<collapsed-context id=c1>\nthe codename is iron-lynx\n</collapsed-context>")
    entries: list[Entry] = [
        summary,
        _reply(2, "m1", [{"type": "text", "text": "x " * 400}]),
        _user(3, "next " * 200),
        _reply(5, "m2", [{"type": "text", "text": "y " * 400}]),
        fold,
        _reply(6, "m3", [{"type": "text", "text": "z " * 400}]),
        _user(7, "last"),
    ]
    kept, count = drop_oldest_rounds(entries, gap=500, fraction=0.2)
    # Round 0 (the summary) counts 0 toward the gap, round 1 450 and round 2 200 (its fold excluded).
    assert count == 3
    assert kept[0] is summary
    assert kept[1] is fold
    assert entries[1] not in kept
    assert entries[3] not in kept
    assert kept[-2:] == entries[-2:]
    request = build_request(
        [*kept, _user(10_000, "Summarize.")], Config(), "sys", [], Capabilities(name="t"), max_tokens=100
    )
    assert find_errors(request.body, ValidationLimits()) == []


def test_shrink_oversized_cuts_big_blocks_to_their_heads_and_keeps_the_rest() -> None:
    """R3.4.5: the summary request's way past one huge newest result (no round drop removes it)."""
    call = AssistantEntry(
        uuid="a1",
        timestamp="t",
        message=AssistantMessage(
            id="m1", content=[{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]
        ),
    )
    big = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "x" * 5_000}]}
    result = UserEntry(uuid="u1", timestamp="t", message=UserMessage(content=[big]))
    small = UserEntry(uuid="u2", timestamp="t", message=UserMessage(content="short"))
    shrunk, cut = shrink_oversized([call, result, small], 1_000)
    assert cut == 1
    assert shrunk[0] is call
    assert shrunk[2] is small
    assert isinstance(shrunk[1], UserEntry)
    assert isinstance(shrunk[1].message.content, list)
    text = shrunk[1].message.content[0]["content"][0]["text"]
    assert text.startswith("x" * 1_000 + "\n… [4,000 more characters left out of this summary request]")
    assert shrink_oversized([call, small], 1_000) == ([call, small], 0)
