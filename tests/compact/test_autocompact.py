"""AutoCompact's stage on its own (design.md §3.4): thresholds, the retry cut, failures, receipts."""

from __future__ import annotations

from pathlib import Path

import pytest

from foldline._types import Block
from foldline.api.params import build_request
from foldline.compact.api_rounds import PTL_MARKER, api_rounds
from foldline.compact.autocompact import AutoCompactStage
from foldline.compact.mechanical import MECHANICAL_HEADING
from foldline.compact.pipeline import CompactionContext
from foldline.compact.prompts import SUMMARY_SECTIONS, summary_prompt
from foldline.compact.snip import short_id
from foldline.config import AutoCompactConfig, Config
from foldline.events import EventBus, NoticeEvent
from foldline.projection import project_view
from foldline.providers.base import Capabilities
from foldline.testing import ScriptedProvider, prompt_too_long
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AssistantMessage,
    AttachmentEntry,
    CollapseCommit,
    CompactBoundary,
    SystemEntry,
    UserEntry,
    UserMessage,
    api_filter,
    new_uuid,
)
from foldline.tokens import estimate_entry

pytestmark = pytest.mark.anyio


def summary_text(fact: str = "the staging port is 6543") -> str:
    """A reply in the nine-section shape `parse_sections` accepts."""
    return "\n\n".join(f"## {title}\n{fact} ({title.lower()})" for title in SUMMARY_SECTIONS)


def conversation(rounds: int, words: int = 200) -> list[AnyRecord]:
    """A prompt, then `rounds` of (reply with a tool call, its result, a new prompt)."""
    records: list[AnyRecord] = [
        UserEntry(
            uuid="00000000-0000-4000-8000-000000000000",
            timestamp="2026-01-01T00:00:00Z",
            session_id="s",
            message=UserMessage(content="start: the staging port is 6543"),
        )
    ]
    for r in range(rounds):
        use = {"type": "tool_use", "id": f"toolu_{r}", "name": "Bash", "input": {"command": "ls"}}
        records.append(
            AssistantEntry(
                uuid=f"00000000-0000-4000-8000-{3 * r + 1:012d}",
                timestamp="2026-01-01T00:00:00Z",
                session_id="s",
                message=AssistantMessage(
                    id=f"msg_{r}", model="m", content=[{"type": "text", "text": f"round {r}"}, use]
                ),
            )
        )
        result = {"type": "tool_result", "tool_use_id": f"toolu_{r}", "content": f"out{r} " + "x " * words}
        records.append(
            UserEntry(
                uuid=f"00000000-0000-4000-8000-{3 * r + 2:012d}",
                timestamp="2026-01-01T00:00:00Z",
                session_id="s",
                message=UserMessage(content=[result]),
            )
        )
        records.append(
            UserEntry(
                uuid=f"00000000-0000-4000-8000-{3 * r + 3:012d}",
                timestamp="2026-01-01T00:00:00Z",
                session_id="s",
                message=UserMessage(content=f"prompt {r}"),
            )
        )
    return records


def stage_for(provider: ScriptedProvider, **kwargs: object) -> AutoCompactStage:
    return AutoCompactStage(provider, "sys", [], **kwargs)  # type: ignore[arg-type]


def ctx_for(records: list[AnyRecord], config: Config, tokens: int) -> CompactionContext:
    return CompactionContext(tuple(records), config, Capabilities(name="t"), tokens)


def test_thresholds_come_from_the_model_window_and_the_output_reserve() -> None:
    sonnet = Config(model="claude-sonnet-4-5")
    assert (sonnet.window, sonnet.effective_window) == (200_000, 180_000)
    assert (sonnet.autocompact_threshold, sonnet.warning_threshold, sonnet.blocking_limit) == (
        167_000,
        147_000,
        177_000,
    )
    long = Config(model="claude-sonnet-4-5", long_context=True)
    assert (long.window, long.effective_window) == (1_000_000, 980_000)
    assert (long.autocompact_threshold, long.warning_threshold, long.blocking_limit) == (
        967_000,
        947_000,
        977_000,
    )
    # a model without the long-context beta keeps its window; the reserve follows its max output
    assert Config(model="claude-opus-4-1", long_context=True).window == 200_000
    small = Config(model="claude-3-5-haiku-latest")
    assert (small.reserve, small.autocompact_threshold) == (8_192, 200_000 - 8_192 - 13_000)
    reserved = Config(output_reserve=40_000)
    assert (reserved.autocompact_threshold, reserved.blocking_limit) == (147_000, 157_000)


def test_the_long_context_window_sends_its_beta() -> None:
    plan = build_request(
        conversation(1), Config(long_context=True), "sys", [], Capabilities(name="t"), max_tokens=100
    )
    assert "context-1m-2025-08-07" in plan.betas
    plain = build_request(conversation(1), Config(), "sys", [], Capabilities(name="t"), max_tokens=100)
    assert "context-1m-2025-08-07" not in plain.betas


@pytest.mark.parametrize("long_context", [False, True])
async def test_fires_at_the_threshold_and_not_one_token_before(long_context: bool) -> None:
    config = Config(long_context=long_context)
    threshold = 967_000 if long_context else 167_000
    provider = ScriptedProvider([{"text": summary_text()}])
    stage = stage_for(provider)
    records = conversation(3)
    assert (await stage.run(ctx_for(records, config, threshold - 1))).records == ()
    assert provider.calls == []
    result = await stage.run(ctx_for(records, config, threshold))
    assert len(provider.calls) == 1
    assert isinstance(result.records[0], CompactBoundary)
    assert result.records[0].pre_tokens == threshold
    [receipt] = [r for r in result.records if isinstance(r, SystemEntry)]
    assert receipt.subtype == "compaction"
    assert f"{threshold:,} -> " in receipt.content
    view = api_filter(project_view([*records, *result.records]))
    assert isinstance(view[0], UserEntry)
    assert view[0].is_compact_summary
    assert "staging port is 6543" in str(view[0].message.content)
    sent = provider.calls[0].body
    assert any(b.get("text") == summary_prompt() for b in sent["messages"][-1]["content"])
    assert sent["max_tokens"] == 20_000  # R3.4.9: min(model max output, 20,000)


async def test_the_warning_threshold_is_announced_once() -> None:
    events = EventBus()
    seen: list[str] = []
    events.subscribers.append(lambda e: seen.append(e.text) if isinstance(e, NoticeEvent) else None)
    stage = stage_for(ScriptedProvider([]), events=events)
    await stage.run(ctx_for(conversation(1), Config(), 146_999))
    assert seen == []
    await stage.run(ctx_for(conversation(1), Config(), 147_000))
    await stage.run(ctx_for(conversation(1), Config(), 150_000))
    assert len(seen) == 1
    assert "147,000" in seen[0]


async def test_a_too_long_summary_request_drops_exactly_the_rounds_the_gap_needs() -> None:
    records = conversation(6)
    view = api_filter(project_view(records))
    sizes = [sum(estimate_entry(e) for e in g) for g in api_rounds(view)]
    gap = sizes[0] + sizes[1] + 1  # two rounds are not enough, three are
    provider = ScriptedProvider([prompt_too_long(200_000 + gap, 200_000), {"text": summary_text()}])
    stage = stage_for(provider)
    result = await stage.compact(ctx_for(records, Config(), 100_000))
    assert len(provider.calls) == 2
    first, retry = provider.calls[0].messages, provider.calls[1].messages
    assert "start: the staging port" in str(first[0])
    assert retry[0]["content"][0]["text"] == PTL_MARKER
    # the opening prompt and rounds 0 and 1 went, each whole (its result and the prompt after it too)
    assert "round 2" in str(retry[1])
    assert not any(s in str(retry) for s in ("start:", "round 1", "out1", "prompt 1"))
    [receipt] = [r for r in result.records if isinstance(r, SystemEntry)]
    assert receipt.data is not None
    assert (receipt.data["requests"], receipt.data["dropped_rounds"]) == (2, 3)


async def test_three_too_long_retries_then_a_failure_with_its_reason() -> None:
    provider = ScriptedProvider([prompt_too_long(300_000, 200_000)] * 4)
    stage = stage_for(provider)
    result = await stage.compact(ctx_for(conversation(10), Config(), 100_000))
    assert result.records == ()
    assert len(provider.calls) == 4  # the first try and 3 retries (R3.4.5)
    assert "still too long after 3 retries" in stage.receipts[-1].content


@pytest.mark.parametrize(
    "reply", ["", "Sure! Here is a summary: it went well.", "## Primary Request and Intent\n"]
)
async def test_an_empty_or_malformed_summary_is_never_committed(reply: str) -> None:
    stage = stage_for(ScriptedProvider([{"text": reply or " "}]))
    result = await stage.run(ctx_for(conversation(2), Config(), 170_000))
    assert result.records == ()
    assert stage.failures == 1
    assert "nothing was committed" in stage.receipts[-1].content


async def test_collapse_on_leaves_only_prompt_too_long_and_manual_compaction() -> None:
    provider = ScriptedProvider([{"text": summary_text()}])
    stage = stage_for(provider, collapse_enabled=True)
    assert (await stage.run(ctx_for(conversation(2), Config(), 199_000))).records == ()
    assert provider.calls == []
    result = await stage.on_prompt_too_long(ctx_for(conversation(2), Config(), 199_000), 5_000)
    assert isinstance(result.records[0], CompactBoundary)
    assert result.records[0].trigger == "reactive"


def folded(records: list[AnyRecord], summary_words: int, rounds: range = range(8)) -> list[AnyRecord]:
    """`records` with each of `rounds` folded by Collapse into a `summary_words` summary."""
    out = list(records)
    for r in rounds:
        first, last = records[1 + 3 * r], records[2 + 3 * r]
        uuid = f"10000000-0000-4000-8000-{r:012d}"
        out.append(
            CollapseCommit(
                uuid=uuid,
                timestamp="2026-01-01T00:00:00Z",
                collapse_id=short_id(uuid),
                first_uuid=first.uuid,  # type: ignore[union-attr]
                last_uuid=last.uuid,  # type: ignore[union-attr]
                summary=f"fold {r}: " + "word " * summary_words,
            )
        )
    return out


@pytest.mark.parametrize(("summary_words", "compacts"), [(200, False), (1_600, True)])
async def test_collapse_on_compacts_once_the_fold_summaries_pass_their_budget(
    summary_words: int, compacts: bool
) -> None:
    # R3.3.8: 8 summaries of ~250 tokens (2K) stay; of ~2,000 (16K, past the 3K budget) are compacted,
    # far below the 167K threshold, although Collapse is on.
    provider = ScriptedProvider([{"text": summary_text()}])
    stage = stage_for(provider, collapse_enabled=True)
    records = folded(conversation(12, words=50), summary_words)
    result = await stage.run(ctx_for(records, Config(), 30_000))
    assert bool(result.records) is compacts
    assert len(provider.calls) == int(compacts)
    if compacts:
        assert isinstance(result.records[0], CompactBoundary)
        assert result.records[0].trigger == "auto"


async def test_the_prompt_after_a_fold_that_took_the_last_reply_is_kept_and_the_folds_summarized() -> None:
    # A fold committed at the turn's start took the last reply: the fold summaries and the prompts
    # between them were all "after the last reply" and kept verbatim beside the summary, so the
    # compaction did not pay and the prompt just typed was summarized away with them (4 of 107
    # compactions of the 100-turn rows, each a prompt the model then did not answer).
    provider = ScriptedProvider([{"text": summary_text()}])
    stage = stage_for(provider, collapse_enabled=True)
    records = folded(conversation(8, words=50), 1_600)  # every reply folded
    result = await stage.run(ctx_for(records, Config(), 30_000))
    [boundary] = [r for r in result.records if isinstance(r, CompactBoundary)]
    assert boundary.preserved_uuids == (records[24].uuid,)  # "prompt 7", and no fold summary
    assert records[24].message.content == "prompt 7"  # type: ignore[union-attr]


async def test_a_small_pending_prompt_is_never_summarized_away_to_make_a_compaction_pay() -> None:
    reply = AssistantEntry(
        uuid="20000000-0000-4000-8000-000000000010",
        timestamp="2026-01-01T00:00:00Z",
        session_id="s",
        message=AssistantMessage(id="msg_done", model="m", content=[{"type": "text", "text": "done"}]),
    )
    question = UserEntry(
        uuid="20000000-0000-4000-8000-000000000011",
        timestamp="2026-01-01T00:00:00Z",
        session_id="s",
        message=UserMessage(content="What is the staging port?"),
    )
    records = [*conversation(3, words=50), reply, question]  # the question just typed
    probe = stage_for(ScriptedProvider([{"text": summary_text()}]))
    done = await probe.compact(ctx_for(records, Config(), 100_000))
    [boundary] = [r for r in done.records if isinstance(r, CompactBoundary)]
    assert boundary.preserved_uuids == (records[-1].uuid,)
    # the same compaction where the summary and that prompt leave the context as large as before:
    # without the prompt it would be smaller, but the model would then not see the question
    stage = stage_for(ScriptedProvider([{"text": summary_text()}] * 2))
    assert boundary.post_tokens is not None
    result = await stage.compact(ctx_for(records, Config(), boundary.post_tokens))
    assert result.records == ()
    assert "would not make the context smaller" in stage.receipts[-1].content


async def test_the_fold_budget_compacts_at_a_turns_first_request_not_inside_a_turn() -> None:
    # Inside a turn the cached prefix holds the turn's rounds so far, and a compaction would write
    # them all again; at the next prompt only the prompt follows the summary.
    provider = ScriptedProvider([{"text": summary_text()}])
    stage = stage_for(provider, collapse_enabled=True)
    over = folded(conversation(12, words=50), 1_600)
    use = {"type": "tool_use", "id": "toolu_x", "name": "Bash", "input": {"command": "ls"}}
    inside = [
        *over,
        AssistantEntry(
            uuid="20000000-0000-4000-8000-000000000001",
            timestamp="2026-01-01T00:00:00Z",
            session_id="s",
            message=AssistantMessage(id="msg_x", model="m", content=[use]),
        ),
        UserEntry(
            uuid="20000000-0000-4000-8000-000000000002",
            timestamp="2026-01-01T00:00:00Z",
            session_id="s",
            message=UserMessage(content=[{"type": "tool_result", "tool_use_id": "toolu_x", "content": "ok"}]),
        ),
    ]
    assert (await stage.run(ctx_for(inside, Config(), 30_000))).records == ()
    assert provider.calls == []
    prompt = UserEntry(
        uuid="20000000-0000-4000-8000-000000000003",
        timestamp="2026-01-01T00:00:00Z",
        session_id="s",
        message=UserMessage(content="next: the parser"),
    )
    result = await stage.run(ctx_for([*inside, prompt], Config(), 30_000))
    assert isinstance(result.records[0], CompactBoundary)


async def test_the_fold_budget_is_counted_again_after_a_new_fold_not_only_once() -> None:
    # The count is kept between rounds; folds committed later must still reach it.
    provider = ScriptedProvider([{"text": summary_text()}])
    stage = stage_for(provider, collapse_enabled=True)
    conv = conversation(12, words=50)
    small = folded(conv, 200, rounds=range(4))
    assert (await stage.run(ctx_for(small, Config(), 30_000))).records == ()
    grown = folded(small, 1_600, rounds=range(4, 12))
    result = await stage.run(ctx_for(grown, Config(), 30_000))
    assert isinstance(result.records[0], CompactBoundary)


async def test_breaker_stops_automatic_attempts_but_not_manual_ones() -> None:
    provider = ScriptedProvider([{"text": "no"}] * 3 + [{"text": summary_text()}])
    stage = stage_for(provider)
    config = Config(autocompact=AutoCompactConfig())
    for _ in range(5):
        assert (await stage.run(ctx_for(conversation(2), config, 170_000))).records == ()
    assert len(provider.calls) == 3
    assert stage.stopped == "circuit_breaker"
    assert "circuit breaker" in stage.receipts[-1].content
    # reactive recovery no longer asks the model: it folds mechanically, so the turn goes on (R3.4.11)
    reactive = await stage.on_prompt_too_long(ctx_for(conversation(2), config, 170_000), None)
    assert len(provider.calls) == 3
    [summary] = [r for r in reactive.records if isinstance(r, UserEntry) and r.is_compact_summary]
    assert MECHANICAL_HEADING in str(summary.message.content)
    manual = await stage.compact(ctx_for(conversation(2), config, 170_000))
    assert isinstance(manual.records[0], CompactBoundary)
    assert (stage.failures, stage.stopped) == (0, None)  # a success resets the count


@pytest.mark.parametrize(("quiet_rounds", "stops"), [(2, True), (3, False)])
async def test_the_thrash_window_includes_its_last_round(quiet_rounds: int, stops: bool) -> None:
    """R3.4.7's edge: a refill on the 3rd round after a compaction is "within 3 turns"; on the 4th not."""
    config = Config()
    threshold = config.autocompact_threshold
    provider = ScriptedProvider([{"text": summary_text()} for _ in range(4)])
    stage = stage_for(provider)
    records = conversation(3)
    compactions = 0
    for _ in range(4):
        result = await stage.run(ctx_for(records, config, threshold))
        compactions += any(isinstance(r, CompactBoundary) for r in result.records)
        records = [*records, *result.records, _reply()]  # each round's request is answered
        for _ in range(quiet_rounds):  # rounds under the threshold; the refill comes on the next one
            await stage.run(ctx_for(records, config, 1_000))
            records.append(_reply())
    assert (stage.stopped == "thrash") is stops
    assert compactions == (3 if stops else 4)
    assert len(provider.calls) == compactions


def _reply() -> AssistantEntry:
    """One model round's reply (the thrash detector counts rounds as the replies recorded)."""
    uuid = new_uuid()
    message = AssistantMessage(id=f"msg_{uuid}", model="m", content=[{"type": "text", "text": "ok"}])
    return AssistantEntry(uuid=uuid, timestamp="2026-01-01T00:00:00Z", session_id="s", message=message)


def _read_then_folded(path: str) -> list[AnyRecord]:
    """A turn that read `path`, not folded yet, after eight folds whose summaries are past their
    budget, then the next prompt: where the summaries' own compaction runs (R3.3.8)."""
    records = folded(conversation(12, words=50), 1_600)
    use = {"type": "tool_use", "id": "toolu_read", "name": "Read", "input": {"file_path": path}}
    result = {"type": "tool_result", "tool_use_id": "toolu_read", "content": "the deploy key is in vault"}
    stamp = "2026-01-01T00:00:00Z"

    def uuid(n: int) -> str:
        return f"30000000-0000-4000-8000-{n:012d}"

    def replied(n: int, content: list[Block]) -> AssistantEntry:
        message = AssistantMessage(id=f"msg_read{n}", model="m", content=content)
        return AssistantEntry(uuid=uuid(n), timestamp=stamp, session_id="s", message=message)

    def said(n: int, content: str | list[Block]) -> UserEntry:
        return UserEntry(uuid=uuid(n), timestamp=stamp, session_id="s", message=UserMessage(content=content))

    records += [
        replied(0, [use]),
        said(1, [result]),
        replied(2, [{"type": "text", "text": "read"}]),
        said(3, "next"),
    ]
    return records


@pytest.mark.parametrize(("how", "files_back"), [("summaries past their budget", 0), ("prompt too long", 1)])
async def test_the_summaries_own_compaction_brings_back_no_files(
    tmp_path: Path, how: str, files_back: int
) -> None:
    """Collapse would fold the turns that read them within a few turns; put back by the summaries'
    compaction, a file stays until the next one, read by every request in between. A compaction
    that answers a refusal is the cliff R3.4.8 is for: it still brings them back."""
    (tmp_path / "notes.txt").write_text("the deploy key is in vault\n")
    provider = ScriptedProvider([{"text": summary_text()}])
    stage = AutoCompactStage(provider, "sys", [], workspace=tmp_path, collapse_enabled=True)
    ctx = ctx_for(_read_then_folded(str(tmp_path / "notes.txt")), Config(), 30_000)
    if how == "prompt too long":
        result = await stage.on_prompt_too_long(ctx, 5_000)
    else:
        result = await stage.run(ctx)
    assert isinstance(result.records[0], CompactBoundary)
    files = [r for r in result.records if isinstance(r, AttachmentEntry) and r.attachment_type == "file"]
    assert len(files) == files_back


@pytest.mark.parametrize("trigger", ["manual", "reactive"])
async def test_a_compaction_that_would_not_shrink_the_context_is_not_committed(trigger: str) -> None:
    """/compact on a small model made the context bigger (1,693 -> 2,379 tokens): the check compared the
    messages' estimate with the count before, the receipt the count with the system prompt and tools.
    One count now decides and is shown: a summary that leaves no fewer tokens is not committed."""
    system = "You are a careful assistant. " * 200  # the fixed part the old check left out
    config = Config()
    records = conversation(3)
    probe = AutoCompactStage(ScriptedProvider([{"text": summary_text()}]), system, [])
    committed = await probe.compact(ctx_for(records, config, 100_000))
    after = committed.records[-1].data["post_tokens"]  # type: ignore[union-attr]
    assert isinstance(after, int)
    assert after > 1_000  # the system prompt is in the count

    stage = AutoCompactStage(ScriptedProvider([{"text": summary_text()}]), system, [])
    ctx = ctx_for(records, config, after)  # today's context: just that many tokens
    result = await (stage.compact(ctx) if trigger == "manual" else stage.on_prompt_too_long(ctx, None))
    assert result.records == ()
    assert stage.requests == 1  # the summary was asked for: refused after it, not skipped
    assert f"{after:,} -> {after:,} tokens" in stage.receipts[-1].content
    assert "nothing was committed" in stage.receipts[-1].content
