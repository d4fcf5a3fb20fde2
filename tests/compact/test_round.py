"""The compaction round: fixed level order, shared token accounting, Snip and Microcompact as stages."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from foldline.compact.microcompact import MicrocompactStage
from foldline.compact.pipeline import CompactionContext, StageResult, run_recovery, run_round
from foldline.compact.rounds import LEVEL_ORDER, default_stages
from foldline.compact.snip import short_id
from foldline.compact.snipping import SnipStage
from foldline.config import Config
from foldline.projection import project_view
from foldline.providers.base import Capabilities
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AssistantMessage,
    ResultsCleared,
    SnipBoundary,
    UserEntry,
    UserMessage,
    new_uuid,
    now_iso,
)

pytestmark = pytest.mark.anyio

CACHE_EDITS = Capabilities(name="t", supports_cache_edits=True)
PLAIN = Capabilities(name="t")


@dataclass
class Recording:
    name: str
    log: list[tuple[str, int]]
    frees: int = 0

    async def run(self, ctx: CompactionContext) -> StageResult:
        self.log.append((self.name, ctx.tokens))
        return StageResult(tokens_freed=self.frees)

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        return StageResult()


def _ctx(
    records: list[AnyRecord], caps: Capabilities = CACHE_EDITS, tokens: int = 100_000, **kw: object
) -> CompactionContext:
    return CompactionContext(tuple(records), Config(), caps, tokens, now=kw.get("now", time.time()))  # type: ignore[arg-type]


async def test_the_levels_run_in_the_fixed_order_and_see_what_earlier_ones_freed() -> None:
    log: list[tuple[str, int]] = []
    stages = default_stages(collapse=Recording("collapse", log), autocompact=Recording("autocompact", log))
    assert [s.name for s in stages] == list(LEVEL_ORDER)
    stages = [Recording(s.name, log, frees=1_000 * (i + 1)) for i, s in enumerate(stages)]
    for _ in range(2):  # every round, the same order
        log.clear()
        result = await run_round(stages, _ctx([], tokens=50_000))
        assert [name for name, _ in log] == list(LEVEL_ORDER)
        assert [t for _, t in log] == [50_000, 49_000, 47_000, 44_000, 40_000]
        assert result.seen == tuple(log)
        assert result.tokens_freed == 15_000


def _exchange(i: int, tool: str, chars: int, ts: str | None = None) -> list[AnyRecord]:
    call = f"toolu_{i}"
    return [
        AssistantEntry(
            uuid=new_uuid(),
            timestamp=ts or now_iso(),
            message=AssistantMessage(
                id=f"m{i}", content=[{"type": "tool_use", "id": call, "name": tool, "input": {}}]
            ),
        ),
        UserEntry(
            uuid=new_uuid(),
            timestamp=now_iso(),
            message=UserMessage(
                content=[{"type": "tool_result", "tool_use_id": call, "content": "x" * chars}]
            ),
        ),
    ]


def _session(n: int, chars: int = 8_000, tool: str = "Read", ts: str | None = None) -> list[AnyRecord]:
    records: list[AnyRecord] = [
        UserEntry(uuid=new_uuid(), timestamp=now_iso(), message=UserMessage(content="go"))
    ]
    for i in range(n):
        records += _exchange(i, tool, chars, ts)
    return records


async def test_snip_frees_tokens_that_microcompact_then_does_not_see() -> None:
    records = _session(16)  # 16 Reads of 2,000 tokens
    # 16 results: 11 clearable, 22,000 tokens: Microcompact would act...
    alone = await run_round([MicrocompactStage()], _ctx(records))
    assert alone.cache_edits
    # ...but the model snipped three bulky results first: what is left is under the trigger.
    results = [r for r in records if isinstance(r, UserEntry) and isinstance(r.message.content, list)]
    ids = [short_id(r.uuid) for r in results[:3]]
    snip_call: list[AnyRecord] = [
        AssistantEntry(
            uuid=new_uuid(),
            timestamp=now_iso(),
            message=AssistantMessage(
                id="ms",
                content=[{"type": "tool_use", "id": "toolu_snip", "name": "Snip", "input": {"ids": ids}}],
            ),
        ),
        UserEntry(
            uuid=new_uuid(),
            timestamp=now_iso(),
            message=UserMessage(
                content=[{"type": "tool_result", "tool_use_id": "toolu_snip", "content": "ok"}]
            ),
        ),
    ]
    result = await run_round([SnipStage(), MicrocompactStage()], _ctx(records + snip_call))
    boundary = next(r for r in result.records if isinstance(r, SnipBoundary))
    assert boundary.tool_use_id == "toolu_snip"
    answered = {b["tool_use_id"] for r in results[:3] for b in r.message.content}
    calls = [
        r
        for r in records
        if isinstance(r, AssistantEntry) and any(b.get("id") in answered for b in r.message.content)
    ]
    assert len(calls) == 3
    # each result's call goes with it: no call is left without its result ("interrupted")
    assert set(boundary.removed_uuids) == {r.uuid for r in results[:3]} | {c.uuid for c in calls}
    snip_freed = result.receipts[0].tokens_freed
    assert snip_freed > 6_000
    assert result.receipts[0].level == "snip"
    assert result.seen == (("snip", 100_000), ("microcompact", 100_000 - snip_freed))
    assert not result.cache_edits  # the snipped results no longer count toward the trigger
    again = await run_round([SnipStage()], _ctx([*records, *snip_call, *result.records]))
    assert not any(isinstance(r, SnipBoundary) for r in again.records)  # carried out once


async def test_cached_path_deletes_old_whitelisted_results_beyond_the_five_most_recent() -> None:
    records = _session(16)
    records[1:1] = _exchange(99, "Agent", 40_000)  # never cleared (R3.2.1)
    result = await run_round([MicrocompactStage()], _ctx(records))
    (block,) = result.cache_edits
    refs = [e["cache_reference"] for e in block["edits"]]
    assert refs == [f"ref_toolu_{i}" for i in range(11)]
    assert result.records == ()
    assert "cleared 11 tool results" in result.receipts[0].text
    assert not (await run_round([MicrocompactStage()], _ctx(records, caps=PLAIN))).cache_edits


async def test_time_based_path_replaces_old_results_after_an_hour_of_idle() -> None:
    records = _session(8, ts="2026-01-01T00:00:00.000Z")
    start = 1767225600.0  # 2026-01-01T00:00:00Z
    assert not (
        await run_round([MicrocompactStage()], _ctx(records, caps=PLAIN, now=start + 59 * 60))
    ).records
    result = await run_round([MicrocompactStage()], _ctx(records, caps=PLAIN, now=start + 61 * 60))
    (record,) = result.records
    assert isinstance(record, ResultsCleared)
    assert record.tool_use_ids == ("toolu_0", "toolu_1", "toolu_2")
    view = project_view([*records, record])
    contents = [
        b["content"]
        for e in view
        if isinstance(e, UserEntry) and isinstance(e.message.content, list)
        for b in e.message.content
    ]
    assert contents[:3] == [Config().microcompact.placeholder] * 3
    assert contents[3] == "x" * 8_000


@dataclass
class _Later:
    """A later level (Collapse, AutoCompact) that frees a known amount on prompt-too-long."""

    name: str = "later"
    asked: int = 0

    async def run(self, ctx: CompactionContext) -> StageResult:
        return StageResult()

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        self.asked += 1
        note = UserEntry(uuid=new_uuid(), timestamp=now_iso(), message=UserMessage(content="summary"))
        return StageResult((note,), tokens_freed=50_000)


async def test_prompt_too_long_without_cache_edits_moves_on_to_the_next_level() -> None:
    later = _Later()
    result = await run_recovery([MicrocompactStage(), later], _ctx(_session(16), caps=PLAIN), 30_000)
    assert later.asked == 1
    assert not result.cache_edits  # nothing warm rewritten, nothing deleted
    assert [r.level for r in result.receipts] == []
    assert len(result.records) == 1


async def test_prompt_too_long_with_cache_edits_deletes_old_results_then_asks_on_for_the_rest() -> None:
    records = _session(8)  # 3 old Reads of ~2,000 tokens: under the cached trigger, cleared anyway
    later = _Later()
    small = await run_recovery([MicrocompactStage(), later], _ctx(records), 1_000)
    (block,) = small.cache_edits
    assert [e["cache_reference"] for e in block["edits"]] == [f"ref_toolu_{i}" for i in range(3)]
    assert (later.asked, small.records) == (0, ())  # the deletions covered the gap
    assert small.receipts[0].data["trigger"] == "prompt_too_long"
    big = await run_recovery([MicrocompactStage(), later], _ctx(records), 40_000)
    assert big.cache_edits == small.cache_edits
    assert later.asked == 1  # the rest of the gap went on to the next level
    assert big.tokens_freed == small.tokens_freed + 50_000
