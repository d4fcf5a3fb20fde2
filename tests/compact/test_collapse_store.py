"""The collapse store and span finding on hand-built records (design.md §3.3, R5.4).

What the engine tests cannot reach easily: a staged fold whose span changed is dropped, a committed
fold is a separator no later span crosses, and the prompt-too-long chain passes on what a level
could not free.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from msgspec.structs import replace

from foldline._json import dumps
from foldline.compact.collapse import Collapse, CollapseStore
from foldline.compact.ctx_agent import CtxAgent, FoldFailure, StagedFold, find_spans, summary_tokens
from foldline.compact.pipeline import CompactionContext, StageResult, recover_prompt_too_long
from foldline.config import CollapseConfig, Config
from foldline.projection import project_view
from foldline.providers.base import Capabilities
from foldline.testing import FunctionProvider
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AssistantMessage,
    CollapseCommit,
    SnipBoundary,
    SystemEntry,
    Usage,
    UserEntry,
    UserMessage,
    api_filter,
)
from foldline.tokens import estimate_entry, padded
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

pytestmark = pytest.mark.anyio

CONFIG = Config(collapse=CollapseConfig(folds="summary", span_target_tokens=1_000))


def _uuid(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-000000000000"


def conversation(turns: int, words: int = 1_000) -> list[AnyRecord]:
    """`turns` user turns, each a typed prompt and one reply (the last reply carries usage)."""
    records: list[AnyRecord] = []
    parent: str | None = None
    for t in range(1, turns + 1):
        prompt = UserEntry(
            uuid=_uuid(2 * t),
            parent_uuid=parent,
            timestamp="2026-01-01T00:00:00Z",
            message=UserMessage(content=f"Turn {t}: FACT-{t} = v{t}. " + "abc " * words),
        )
        reply = AssistantEntry(
            uuid=_uuid(2 * t + 1),
            parent_uuid=prompt.uuid,
            timestamp="2026-01-01T00:00:01Z",
            message=AssistantMessage(
                id=f"msg_{t}",
                model="m",
                content=[{"type": "text", "text": "Noted."}],
                usage=Usage(input_tokens=10, cache_read_input_tokens=1_000 * t) if t == turns else None,
            ),
        )
        records += [prompt, reply]
        parent = reply.uuid
    return records


def collapse() -> Collapse:
    return Collapse(FunctionProvider(lambda body, betas: {"text": ""}), "sys", [], CONFIG)


def test_spans_close_at_the_target_and_a_committed_fold_is_never_crossed() -> None:
    records = conversation(6)[:-1]  # turn 6 in progress: never folded
    spans = find_spans(records, CONFIG)
    assert [(s.first_turn, s.last_turn) for s in spans] == [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]
    commit = CollapseCommit(
        uuid="c1",
        timestamp="t",
        collapse_id="c1",
        first_uuid=spans[1].first_uuid,
        last_uuid=spans[2].last_uuid,
        summary="turns 2-3",
    )
    wide = Config(collapse=CollapseConfig(folds="summary", span_target_tokens=100_000))
    after = find_spans([*records, commit], wide, min_tokens=0)
    # Turn 1 and turns 4-5 are on either side of the fold: two spans, neither holding the summary.
    assert [(s.first_turn, s.last_turn) for s in after] == [(1, 1), (4, 5)]
    assert all("c1" not in s.uuids for s in after)


def test_a_finished_turn_is_foldable_once_no_turn_is_in_progress() -> None:
    """After a turn's final reply nothing is in progress: the turn that filled a span is folded with
    it instead of being read by every request of the next turn. A turn in progress (a prompt waiting
    for its reply, or a tool call for its result) never is; `keep_recent_turns` counts it."""
    finished = conversation(3)
    assert [(s.first_turn, s.last_turn) for s in find_spans(finished, CONFIG)] == [(1, 1), (2, 2), (3, 3)]
    waiting = finished[:-1]
    assert [(s.first_turn, s.last_turn) for s in find_spans(waiting, CONFIG)] == [(1, 1), (2, 2)]
    last = finished[-1]
    assert isinstance(last, AssistantEntry)
    call = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a"}}
    calling = [*waiting, replace(last, message=replace(last.message, content=[call]))]
    assert [(s.first_turn, s.last_turn) for s in find_spans(calling, CONFIG)] == [(1, 1), (2, 2)]
    two = Config(collapse=CollapseConfig(folds="summary", span_target_tokens=1_000, keep_recent_turns=2))
    assert [(s.first_turn, s.last_turn) for s in find_spans(finished, two)] == [(1, 1), (2, 2)]


def test_take_drops_a_staged_fold_whose_span_changed_and_orders_the_rest_oldest_first() -> None:
    records = conversation(6)
    first, second, third = find_spans(records, CONFIG)[:3]
    store = CollapseStore(
        staged=[StagedFold(s, f"## Task\n{s.turns()}", Usage()) for s in (third, second, first)]
    )
    snip = SnipBoundary(uuid="s1", timestamp="t", removed_uuids=[second.last_uuid])
    taken = store.take([*records, snip])
    assert [f.span for f in taken] == [first, third]
    assert store.staged == []


def _ctx(records: list[AnyRecord], tokens: int) -> CompactionContext:
    return CompactionContext(tuple(records), CONFIG, Capabilities(name="test"), tokens)


async def test_a_fold_that_pays_commits_at_a_turns_first_request_not_inside_the_turn() -> None:
    # R3.3.7: inside a turn the commit would also write again the turn's rounds so far; at the next
    # prompt, only what follows the folds.
    config = Config(
        collapse=CollapseConfig(folds="summary", span_target_tokens=1_000, expected_rest_min_requests=1_000)
    )
    records = conversation(6)
    spans = find_spans(records, config)[:2]

    def level() -> Collapse:
        staged = Collapse(FunctionProvider(lambda body, betas: {"text": ""}), "sys", [], config)
        staged.store.staged = [StagedFold(s, "## Task\nshort", Usage()) for s in spans]
        return staged

    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    round_of_turn_7: list[AnyRecord] = [
        UserEntry(uuid=_uuid(100), timestamp="t", message=UserMessage(content="Turn 7: the lexer")),
        AssistantEntry(
            uuid=_uuid(101), timestamp="t", message=AssistantMessage(id="m7", model="m", content=[use])
        ),
        UserEntry(
            uuid=_uuid(102),
            timestamp="t",
            message=UserMessage(content=[{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]),
        ),
    ]
    inside = await level().run(
        CompactionContext((*records, *round_of_turn_7), config, Capabilities(name="t"), 100)
    )
    assert inside.records == ()
    opening = await level().run(
        CompactionContext((*records, round_of_turn_7[0]), config, Capabilities(name="t"), 100)
    )
    assert [(c.first_uuid, c.last_uuid) for c in opening.records if isinstance(c, CollapseCommit)] == [
        (s.first_uuid, s.last_uuid) for s in spans
    ]


async def test_the_drain_commits_everything_staged_with_a_receipt_whatever_the_threshold() -> None:
    records = conversation(6)
    level = collapse()
    spans = find_spans(records, CONFIG)[:2]
    level.store.staged = [StagedFold(s, f"## Task\n{s.turns()}", Usage()) for s in spans]
    assert (await level.run(_ctx(records, 100))).records == ()  # far below 90%: staged stays staged
    result = await level.on_prompt_too_long(_ctx(records, 100), 5_000)
    commits = [r for r in result.records if isinstance(r, CollapseCommit)]
    [receipt] = [r for r in result.records if isinstance(r, SystemEntry)]
    assert [(c.first_uuid, c.last_uuid) for c in commits] == [(s.first_uuid, s.last_uuid) for s in spans]
    assert result.tokens_freed == sum(c.tokens_before - c.tokens_after for c in commits)
    assert result.tokens_freed > 2_000
    assert receipt.content.startswith("prompt too long: committed 2 folds of turn 1, turn 2")
    # Turns 1-6 were cached up to the last reply (6,000 tokens read). The folds drop turns 1-2: what is
    # written again is their summaries and turns 3-6 up to that reply.
    folded = {u for s in spans for u in s.uuids}
    cached_view = api_filter(project_view(records))
    last_reply = max(i for i, e in enumerate(cached_view) if isinstance(e, AssistantEntry))
    later = sum(estimate_entry(e) for e in cached_view[:last_reply] if e.uuid not in folded)
    rewrite = padded(later) + sum(summary_tokens(c.summary) for c in commits)
    assert rewrite < 6_000
    assert f"rewrites {rewrite:,} cached tokens" in receipt.content
    view = project_view([*records, *result.records])
    assert sum(1 for e in view if isinstance(e, UserEntry) and e.is_meta) == 2


@dataclass
class Frees:
    name: str
    tokens: int
    asked: int = 0

    async def run(self, ctx: CompactionContext) -> StageResult:
        return StageResult()

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        self.asked += 1
        note = SystemEntry(uuid=f"{self.name}{ctx.tokens}", timestamp="t", content=self.name)
        return StageResult((note,), self.tokens)


async def test_the_prompt_too_long_chain_passes_on_what_a_level_could_not_free() -> None:
    records = conversation(2)
    drain, reactive = Frees("drain", 300), Frees("reactive", 5_000)
    added = await recover_prompt_too_long([drain, reactive], _ctx(records, 10_000), 1_000)
    assert [r.content for r in added if isinstance(r, SystemEntry)] == ["drain", "reactive"]
    assert reactive.asked == 1
    assert added[1].uuid == "reactive9700"  # it saw the tokens the drain left

    enough, never = Frees("drain", 2_000), Frees("reactive", 5_000)
    await recover_prompt_too_long([enough, never], _ctx(records, 10_000), 1_000)
    unknown_gap, never_either = Frees("drain", 1), Frees("reactive", 5_000)
    await recover_prompt_too_long([unknown_gap, never_either], _ctx(records, 10_000), None)
    assert never.asked == never_either.asked == 0


async def test_a_summary_cut_at_the_output_limit_is_a_failure_never_staged() -> None:
    records = conversation(3)
    cut = "## Task\nearlier\n\n## Outcome\ndone\n\n## Facts to Keep\nFACT-1 = v1; FACT-"
    agent = CtxAgent(
        FunctionProvider(lambda body, betas: {"text": cut, "stop_reason": "max_tokens"}), "sys", [], CONFIG
    )
    [span] = find_spans(records, CONFIG)[:1]
    result = await agent.summarize(records, span)
    assert isinstance(result, FoldFailure)
    assert "output limit" in result.reason


async def test_a_span_fork_over_the_limit_is_sent_again_cut_after_the_span() -> None:
    """What follows the span is not needed to summarize it: the fork drops it rather than fail."""
    records = conversation(6)
    config = Config(
        context_window=8_000,
        output_reserve=2_000,
        collapse=CollapseConfig(folds="summary", span_target_tokens=1_000),
    )
    assert config.blocking_limit == 3_000  # the whole conversation (~6K tokens) is over it
    answer = "## Task\nturn 1\n\n## Outcome\ndone\n\n## Facts to Keep\nFACT-1 = v1"
    provider = FunctionProvider(lambda body, betas: {"text": answer})
    [span] = find_spans(records, config)[:1]
    result = await CtxAgent(provider, "sys", [], config).summarize(records, span)
    assert isinstance(result, StagedFold), result
    [sent] = provider.calls  # the full fork was refused unsent; the cut one went
    text = dumps(sent.body["messages"]).decode()
    assert "FACT-1 = v1" in text
    assert "FACT-2 = v2" not in text


SUMMARY = "## Task\nturns\n\n## Outcome\ndone\n\n## Facts to Keep\nnone"


def _cut_first(calls: int) -> FunctionProvider:
    """Cuts the first `calls` summaries at the output limit, then answers in full."""
    asked = [0]

    def reply(body: object, betas: object) -> dict[str, str]:
        asked[0] += 1
        if asked[0] <= calls:
            return {"text": SUMMARY[:30], "stop_reason": "max_tokens"}
        return {"text": SUMMARY}

    return FunctionProvider(reply)


async def test_a_span_whose_summary_is_cut_is_summarized_again_as_two_halves() -> None:
    """A cut summary of three turns was a failure asked again after every turn, and the turns stayed
    in view until AutoCompact: each half has half as much to tell."""
    config = Config(collapse=CollapseConfig(folds="summary", span_target_tokens=4_000))
    records = conversation(6)
    span = find_spans(records, config)[0]
    assert (span.first_turn, span.last_turn) == (1, 3)
    provider = _cut_first(1)
    staged, failed = await CtxAgent(provider, "sys", [], config).run(records, [span])
    assert failed == []
    assert [(f.span.first_turn, f.span.last_turn) for f in staged] == [(1, 2), (3, 3)]
    assert frozenset().union(*(f.span.uuids for f in staged)) == span.uuids
    assert len(provider.calls) == 3


async def test_a_single_turn_whose_summary_is_cut_is_left_out_of_later_runs() -> None:
    config = Config(collapse=CollapseConfig(folds="summary", span_target_tokens=4_000))
    records = conversation(6)[:-1]  # turn 6 in progress
    provider = _cut_first(100)
    store = Collapse(provider, "sys", [], config)
    run = store.start(lambda: records)
    assert run is not None
    await run
    # turns 1-3 cut; 1-2 cut, then 1 and 2 cut; 3 cut: five requests, then none again
    assert len(provider.calls) == 5
    assert [(f.span.first_turn, f.span.last_turn, f.cut) for f in store.store.failures] == [
        (1, 1, True),
        (2, 2, True),
        (3, 3, True),
    ]
    again = store.start(lambda: records)
    assert again is not None
    await again
    assert len(provider.calls) == 5
    # nor when the context is nearly full: the emergency fold asks only about turns 4-5, too
    # small for a background span (one request, cut, then one per turn)
    window = config.effective_window
    ctx = CompactionContext(tuple(records), config, Capabilities(name="test"), int(window * 0.97))
    await store.run(ctx)
    assert len(provider.calls) == 8
    assert [(f.span.first_turn, f.span.last_turn) for f in store.store.failures] == [
        (1, 1),
        (2, 2),
        (3, 3),
        (4, 4),
        (5, 5),
    ]


async def test_a_fold_summary_not_smaller_than_its_turns_is_a_failure_never_staged() -> None:
    """A small model's fold summary can be longer than the short turns it replaces: committing it
    would grow the context, so it is refused with both sizes, like a cut or empty one."""
    records = conversation(3, words=5)
    [span] = find_spans(records, CONFIG, min_tokens=0)[:1]
    long = SUMMARY.replace("none", "FACT-1 = v1. " * 200)
    agent = CtxAgent(FunctionProvider(lambda body, betas: {"text": long}), "sys", [], CONFIG)
    result = await agent.summarize(records, span)
    assert isinstance(result, FoldFailure), result
    assert f"not smaller than the turns it would replace ({span.tokens:,})" in result.reason
    short = CtxAgent(FunctionProvider(lambda body, betas: {"text": SUMMARY}), "sys", [], CONFIG)
    shrinking = conversation(3)  # long turns: the same short summary is staged
    [span] = find_spans(shrinking, CONFIG)[:1]
    assert isinstance(await short.summarize(shrinking, span), StagedFold)


async def test_a_span_is_named_by_its_words_where_the_requests_carry_no_tags() -> None:
    """Collapse's summary instruction names its span by `[id:…]` tags only where the requests show
    them (a Snip tool, a window Snip is for); elsewhere by the opening words of its messages."""
    records = conversation(3)
    [span] = find_spans(records, CONFIG)[:1]
    instructions = []
    for tools in ([], tool_specs(default_tools())):
        provider = FunctionProvider(lambda body, betas: {"text": SUMMARY})
        await CtxAgent(provider, "sys", tools, CONFIG).summarize(records, span)
        [sent] = provider.calls
        instructions.append(dumps(sent.body["messages"][-1]).decode())
    untagged, tagged = instructions
    assert "[id:" not in untagged
    assert "Turn 1: FACT-1 = v1." in untagged
    assert "[id:" in tagged  # with Snip offered, the tags name it as before
