"""`cache_stats`: breaks found from usage, explained from the transcript, expected drops left out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from foldline.cachebreak import CacheBreak
from foldline.cachestats import break_cost, cache_stats
from foldline.config import CacheConfig
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AssistantMessage,
    CollapseCommit,
    CompactBoundary,
    SnipBoundary,
    SystemEntry,
    Usage,
    new_uuid,
)

START = datetime(2026, 1, 1, tzinfo=UTC)
CACHE_TTL_S = CacheConfig().ttl_seconds["5m"]


def _at(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _call(
    read: int,
    write: int = 1_000,
    *,
    at: float = 0.0,
    model: str = "claude-sonnet-4-5",
    sidechain: bool = False,
    deleted: int = 0,
    uncached: int = 10,
) -> AssistantEntry:
    usage = Usage(
        input_tokens=uncached,
        output_tokens=100,
        cache_creation_input_tokens=write,
        cache_read_input_tokens=read,
        cache_deleted_input_tokens=deleted,
    )
    message = AssistantMessage(
        id=new_uuid(), model=model, content=[{"type": "text", "text": "ok"}], usage=usage
    )
    return AssistantEntry(uuid=new_uuid(), timestamp=_at(at), message=message, is_sidechain=sidechain)


def test_totals_and_hit_share_count_every_input_token() -> None:
    calls = [_call(0, 20_000, uncached=500), _call(20_000, 5_000), _call(25_000, 0, uncached=30)]
    stats = cache_stats(calls)
    reads = 45_000
    prompt = 20_500 + 25_010 + 25_030
    assert stats.totals.requests == 3
    assert stats.totals.cache_read == reads
    assert stats.hit_share == pytest.approx(reads / prompt)
    assert stats.breaks == []


def test_a_drop_with_no_change_inside_the_ttl_is_likely_server_side() -> None:
    stats = cache_stats([_call(50_000, at=0), _call(1_000, 49_000, at=CACHE_TTL_S / 2)])
    [brk] = stats.breaks
    assert (brk.call, brk.detail.before, brk.detail.after) == (2, 50_000, 1_000)
    assert brk.detail.likely_server_side
    assert brk.detail.changes == ()
    assert not brk.recorded
    assert "likely server-side" in brk.detail.describe()


def test_a_drop_after_the_ttl_is_blamed_on_the_ttl() -> None:
    [brk] = cache_stats([_call(50_000, at=0), _call(1_000, 49_000, at=CACHE_TTL_S + 1)]).breaks
    assert not brk.detail.likely_server_side
    assert "TTL had passed" in brk.detail.describe()


def test_a_model_change_is_the_cause() -> None:
    calls = [_call(50_000, model="claude-sonnet-4-5"), _call(0, 50_000, at=1, model="claude-opus-4-1")]
    [brk] = cache_stats(calls).breaks
    assert brk.detail.changes == ("model (claude-sonnet-4-5 -> claude-opus-4-1)",)
    assert not brk.detail.likely_server_side


@pytest.mark.parametrize(
    "event",
    [
        SnipBoundary(uuid="b", timestamp=_at(0), removed_uuids=("x",)),
        CollapseCommit(
            uuid="b", timestamp=_at(0), collapse_id="c", first_uuid="x", last_uuid="y", summary="s"
        ),
        CompactBoundary(uuid="b", timestamp=_at(0), pre_tokens=170_000),
        SystemEntry(uuid="b", timestamp=_at(0), subtype="microcompact", content="cleared 3 results"),
    ],
    ids=["snip", "collapse", "compact", "microcompact receipt"],
)
def test_a_drop_after_a_compaction_is_expected_not_a_break(event: AnyRecord) -> None:
    stats = cache_stats([_call(50_000), event, _call(1_000, at=1), _call(500, at=2)])
    assert stats.breaks == []
    assert stats.expected_drops == 1


def test_a_drop_with_cache_edits_deletions_is_expected() -> None:
    stats = cache_stats([_call(50_000), _call(30_000, at=1, deleted=20_000)])
    assert (stats.breaks, stats.expected_drops) == ([], 1)


def test_the_same_drop_without_a_compaction_is_a_break() -> None:
    """The control of the two tests above: only the event between the calls differs."""
    stats = cache_stats([_call(50_000), _call(1_000, at=1)])
    assert len(stats.breaks) == 1
    assert stats.expected_drops == 0


def test_subagent_calls_are_billed_but_do_not_break_the_main_chain() -> None:
    calls = [_call(50_000), _call(0, 40_000, at=1, sidechain=True), _call(52_000, at=2)]
    stats = cache_stats(calls)
    assert stats.breaks == []
    assert stats.totals.requests == 3
    assert stats.main_calls == 2


def test_a_recorded_notice_gives_the_engines_cause_and_the_providers_reason() -> None:
    detail = CacheBreak(50_000, 1_000, ("tools", "system"), False, None, "tools_changed")
    notice = SystemEntry(
        uuid="n",
        timestamp=_at(1),
        subtype="cache_break",
        content=detail.describe(),
        data={
            "before": 50_000,
            "after": 1_000,
            "changes": ["tools", "system"],
            "server_reason": "tools_changed",
        },
    )
    stats = cache_stats([_call(50_000), notice, _call(1_000, at=1)])
    [brk] = stats.breaks
    assert brk.recorded
    assert brk.detail.changes == ("tools", "system")
    assert stats.diagnostics == [(2, "tools_changed")]
    assert "the server says: tools_changed" in brk.detail.describe()


def test_a_notice_without_data_is_read_from_its_text() -> None:
    """Transcripts written before the engine recorded the numbers still match their notices."""
    text = CacheBreak(50_000, 1_000, (), True, None).describe()
    notice = SystemEntry(uuid="n", timestamp=_at(1), subtype="cache_break", content=text)
    [brk] = cache_stats([_call(50_000), notice, _call(1_000, at=1)]).breaks
    assert brk.recorded
    assert (brk.detail.before, brk.detail.after, brk.detail.likely_server_side) == (50_000, 1_000, True)


def test_a_notice_for_other_numbers_does_not_explain_this_break() -> None:
    text = CacheBreak(90_000, 7_000, ("tools",), False, None).describe()
    notice = SystemEntry(uuid="n", timestamp=_at(1), subtype="cache_break", content=text)
    [brk] = cache_stats([_call(50_000), notice, _call(1_000, at=1)]).breaks
    assert not brk.recorded
    assert brk.detail.changes == ()


def test_break_cost_prices_lost_reads_as_writes_first_then_uncached_input() -> None:
    usage = Usage(input_tokens=60_000, cache_creation_input_tokens=50_000, cache_read_input_tokens=10_000)
    # Sonnet list prices ($/M): 3.75 per 5-minute write, 3 per uncached input, 0.30 per read.
    expected = (50_000 * (3.75 - 0.30) + 40_000 * (3.00 - 0.30)) / 1e6
    assert break_cost(100_000, usage) == pytest.approx(expected)
    # At Opus 4.1 prices (5x Sonnet's) the same break costs 5x as much.
    assert break_cost(100_000, usage, "claude-opus-4-1") == pytest.approx(5 * expected)
    assert break_cost(5_000, usage) == 0.0  # reads grew: nothing lost


def test_break_cost_prices_one_hour_writes_at_twice_the_base_rate() -> None:
    split = {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 50_000}
    usage = Usage(cache_creation_input_tokens=50_000, cache_creation=split, cache_read_input_tokens=10_000)
    assert break_cost(60_000, usage) == pytest.approx(50_000 * (6.00 - 0.30) / 1e6)


def _written(read: int, *, at: float, five: int, hour: int) -> AssistantEntry:
    """`_call` whose writes the API split by TTL (`cache_creation`)."""
    entry = _call(read, five + hour, at=at)
    split = {"ephemeral_5m_input_tokens": five, "ephemeral_1h_input_tokens": hour}
    usage = msgspec.structs.replace(entry.message.usage, cache_creation=split)
    return msgspec.structs.replace(entry, message=msgspec.structs.replace(entry.message, usage=usage))


def test_a_pause_inside_the_hour_is_server_side_after_1h_writes() -> None:
    later = 60 + 20 * 60  # twenty minutes after the second call: past 5m, inside 1h

    def session(five: int) -> list[AssistantEntry]:
        return [
            _written(0, at=0, five=0, hour=50_000),
            _written(50_000, at=60, five=five, hour=500),
            _written(1_000, at=later, five=0, hour=49_000),
        ]

    [brk] = cache_stats(session(five=0)).breaks
    assert brk.call == 3
    assert brk.detail.likely_server_side
    [brk] = cache_stats(session(five=500)).breaks
    assert not brk.detail.likely_server_side  # the last writes were for 5 minutes only
