"""Context Collapse in the engine (design.md §3.3, R5.4, R6.1): the ctx-agent in the background tail,
staged -> committed at 90%, the emergency fold at 95%, the drain on prompt-too-long, receipts,
cancellation, and commits that hold after resume.

Sizes: a 40K window with a 4K output reserve (effective 36K: commit at 32.4K, emergency at 34.2K,
blocking limit 35.5K); each turn's prompt is about 3,000 tokens, so the thresholds fall a few turns
apart and every assertion has thousands of tokens of margin.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.compact._collapse_model import (
    SPAN_MARK,
    WORDS,
    CollapseModel,
    collapse_config,
    prompt,
    request_for,
    summary_for,
)
from tests.engine.conftest import Harness

from foldline._json import dumps
from foldline.cli import cli
from foldline.compact.collapse import Collapse
from foldline.compact.ctx_agent import StagedFold, find_spans, summary_tokens
from foldline.compact.levels import Levels, install_levels
from foldline.compact.mechanical import MECHANICAL_HEADING, MECHANICAL_NOTICE, RECORD_HEADING
from foldline.compact.pipeline import CompactionContext, StageResult
from foldline.config import DESIGN_WINDOW, CollapseConfig, Config
from foldline.engine import QueryEngine
from foldline.events import CompactionEvent, NoticeEvent, UIEvent
from foldline.projection import context_tokens_of, project_view
from foldline.testing import FunctionProvider, http_error
from foldline.timeline import (
    AssistantEntry,
    AttachmentEntry,
    CollapseCommit,
    SystemEntry,
    UserEntry,
    api_filter,
    new_uuid,
    now_iso,
    ui_view,
)
from foldline.tokens import estimate_entry, padded
from foldline.tools import default_tools
from foldline.transcript import TranscriptWriter, load_transcript, open_session

pytestmark = pytest.mark.anyio


@dataclass
class Spy:
    """A stage before Collapse that records the tokens each compaction round saw."""

    name: str = "spy"
    rounds: list[int] = field(default_factory=list)

    async def run(self, ctx: CompactionContext) -> StageResult:
        self.rounds.append(ctx.tokens)
        return StageResult()

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        return StageResult()


@dataclass
class Rig:
    engine: QueryEngine
    collapse: Collapse
    writer: TranscriptWriter
    spy: Spy
    events: list[UIEvent]

    async def turn(self, n: int, words: int = WORDS) -> None:
        await self.engine.submit_message(prompt(n, words))

    async def turn_at(self, n: int, share: float) -> None:
        """A turn whose compaction round sees about `share` of the effective window."""
        base = context_tokens_of(self.engine.timeline.snapshot())
        target = share * self.engine.config.effective_window
        await self.turn(n, max(1, int((target - base) * 3 / 4) - 12))

    def tokens(self) -> int:
        return context_tokens_of(self.engine.timeline.snapshot())

    async def settle(self) -> None:
        await self.engine.drain()
        await self.collapse.wait()

    def receipts(self) -> list[SystemEntry]:
        return [r for r in self.engine.timeline if isinstance(r, SystemEntry) and r.subtype == "collapse"]

    def commits(self) -> list[CollapseCommit]:
        return [r for r in self.engine.timeline if isinstance(r, CollapseCommit)]

    async def close(self) -> None:
        await self.engine.aclose()
        self.writer.close()


def rig(
    tmp_path: Path,
    provider: Any,
    *,
    config: Config | None = None,
    background: bool = True,
    **engine: Any,
) -> Rig:
    writer, timeline = open_session(tmp_path / "s1.jsonl", session_id="s1", fsync="never")
    e = QueryEngine(
        provider=provider,
        config=config or collapse_config(),
        tools=default_tools(),
        workspace=tmp_path,
        timeline=timeline,
        transcript=writer,
        permission_mode="bypassPermissions",
        **engine,
    )
    events: list[UIEvent] = []
    e.events.subscribers.append(events.append)
    collapse = Collapse.for_engine(e)
    spy = Spy()
    e.stages = [spy, collapse]
    if background:
        e.tail_hooks = [collapse.tail_hook]
    e.stop_hooks = [collapse.stop]
    return Rig(e, collapse, writer, spy, events)


async def until(check: Callable[[], bool]) -> None:
    """Poll `check` for up to 5 s (the background run has no event of its own to wait on)."""
    for _ in range(1_000):
        if check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition never held")


def without_breakpoints(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_breakpoints(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_breakpoints(v) for v in value]
    return value


def sent_text(body: dict[str, Any]) -> str:
    return dumps(body["messages"]).decode()


# --- the background ctx-agent (R3.3.1, R6.1) -------------------------------------------------------


async def test_a_turn_completes_while_the_ctx_agent_waits_and_its_summary_is_staged_later(
    tmp_path: Path,
) -> None:
    model = CollapseModel(gate=asyncio.Event())
    r = rig(tmp_path, FunctionProvider(model.answer))
    for n in (1, 2, 3):
        await r.turn(n)
    await until(lambda: len(model.spans) == 1)  # after turn 3: turns 1-2 are a span, 3 is current
    assert r.collapse.in_flight

    async with asyncio.timeout(5):
        await r.turn(4)  # the main loop does not wait for the ctx-agent
    assert r.collapse.in_flight
    assert r.collapse.store.staged == []
    [progress] = [e for e in r.events if isinstance(e, NoticeEvent) and e.level == "progress"]
    assert "summarizing turns 1–2 in the background" in progress.text  # R3.3.6

    model.gate.set()  # type: ignore[union-attr]
    await r.engine.drain()  # the tails, and the run turn 3's tail handed the engine
    assert len(model.spans) == 1  # at most one run in flight: turn 4's tail started none
    [fold] = r.collapse.store.staged
    assert (fold.span.first_turn, fold.span.last_turn) == (1, 2)
    assert "FACT-1 = value1" in fold.summary
    assert "FACT-2 = value2" in fold.summary
    assert r.commits() == []  # staged is not committed: the context is far from 90%
    await r.close()


async def test_the_fork_is_the_main_request_plus_the_instruction(tmp_path: Path) -> None:
    model = CollapseModel()
    r = rig(tmp_path, FunctionProvider(model.answer))
    for n in (1, 2, 3):
        await r.turn(n)
    await r.settle()
    [fork] = model.spans
    main = model.main[-1]
    for key in ("model", "system", "tools"):
        assert fork[key] == main[key]
    # Everything the main request sent, less its moving breakpoints, starts the fork.
    sent = without_breakpoints(main["messages"])
    assert without_breakpoints(fork["messages"])[: len(sent)] == sent
    assert SPAN_MARK in dumps(fork["messages"][-1]).decode()
    await r.close()


async def test_spans_are_whole_turns_oldest_first_never_the_current_one(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("the notes say FACT-99 = ninety-nine\n")
    model = CollapseModel(read_path=str(notes))

    def attach(text: str) -> list[AttachmentEntry]:
        return [
            AttachmentEntry(
                uuid=new_uuid(), timestamp=now_iso(), attachment_type="memory", content=f"memo for {text[:7]}"
            )
        ]

    r = rig(tmp_path, FunctionProvider(model.answer), background=False, attachment_hooks=[attach])
    await r.turn(1)
    await r.engine.submit_message(prompt(2, WORDS) + " please read notes.txt")
    for n in (3, 4):
        await r.turn(n)
    finished = r.engine.timeline.snapshot()
    # Turn 4 has ended, so no turn is in progress and it may be folded...
    spans = find_spans(finished, r.engine.config, min_tokens=0)
    assert [(s.first_turn, s.last_turn) for s in spans] == [(1, 2), (3, 4)]
    # ...but not while it is current: its final reply not yet in.
    records = finished[: max(i for i, e in enumerate(finished) if isinstance(e, AssistantEntry))]
    spans = find_spans(records, r.engine.config, min_tokens=0)
    assert [(s.first_turn, s.last_turn) for s in spans] == [(1, 2), (3, 3)]
    by_uuid = {e.uuid: e for e in ui_view(records)}
    for span in spans:
        assert isinstance(by_uuid[span.first_uuid], AttachmentEntry)  # a prompt's attachment is its turn's
        assert isinstance(by_uuid[span.last_uuid], AssistantEntry)
    entries = ui_view(records)
    call = next(
        e
        for e in entries
        if isinstance(e, AssistantEntry) and e.message.content[-1].get("type") == "tool_use"
    )
    result = next(
        e for e in entries if isinstance(e, UserEntry) and "tool_result" in dumps(e.message.content).decode()
    )
    assert call.uuid in spans[0].uuids  # the pair is folded together, never split
    assert result.uuid in spans[0].uuids
    # Already staged entries are not analysed again.
    assert find_spans(records, r.engine.config, min_tokens=0, exclude=spans[0].uuids) == spans[1:]
    await r.close()


async def test_a_malformed_or_failed_summary_is_recorded_never_staged_never_fatal(tmp_path: Path) -> None:
    model = CollapseModel(malformed=True)
    r = rig(tmp_path, FunctionProvider(model.answer))
    for n in (1, 2, 3):
        await r.turn(n)
    await r.settle()
    assert r.collapse.store.staged == []
    [failure] = r.collapse.store.failures
    assert "malformed" in failure.reason
    assert any(isinstance(e, NoticeEvent) and "could not summarize turns 1–2" in e.text for e in r.events)

    async def broken(body: dict[str, Any], betas: tuple[str, ...]) -> Any:
        if SPAN_MARK in dumps(body["messages"][-1]).decode():
            return http_error(400, "bad request from a test")
        return await model.answer(body, betas)

    r.engine.provider = r.collapse.provider = FunctionProvider(broken)
    await r.turn(4)
    await r.settle()
    assert "request failed" in r.collapse.store.failures[-1].reason
    await r.turn(5)  # the session goes on
    await r.close()


async def test_close_cancels_the_run_in_flight(tmp_path: Path) -> None:
    model = CollapseModel(gate=asyncio.Event())
    r = rig(tmp_path, FunctionProvider(model.answer))
    for n in (1, 2, 3):
        await r.turn(n)
    await until(lambda: len(model.spans) == 1)
    task = r.collapse._task
    async with asyncio.timeout(2):
        await r.close()  # the held reply never comes: close must not wait for it
    assert task is not None
    assert task.cancelled()


async def test_an_interrupt_cancels_the_run_in_flight_and_starts_no_new_one(tmp_path: Path) -> None:
    model = CollapseModel(gate=asyncio.Event())
    hold_main = asyncio.Event()

    turn_4: list[dict[str, Any]] = []

    async def answer(body: dict[str, Any], betas: tuple[str, ...]) -> Any:
        if "Turn 4:" in dumps(body["messages"][-1]).decode():
            turn_4.append(body)
            await hold_main.wait()
        return await model.answer(body, betas)

    r = rig(tmp_path, FunctionProvider(answer))
    for n in (1, 2, 3):
        await r.turn(n)
    await until(lambda: len(model.spans) == 1)
    background = r.collapse._task
    turn = asyncio.ensure_future(r.turn(4))
    await until(lambda: bool(turn_4))
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    assert background is not None
    assert background.cancelled()
    await r.engine.drain()
    assert not r.collapse.in_flight  # the tail after the interrupt started no run
    assert len(model.spans) == 1
    await r.close()


# --- thresholds, receipts, resume (R3.3.2, R3.3.3, R3.3.5, R3.0.1) ---------------------------------


def cached(model: CollapseModel) -> Callable[[dict[str, Any], tuple[str, ...]], Any]:
    """`model.answer` billing every main request's input as read from the cache, as a warm cache
    would: what a commit makes the next request write again is then the tokens after the fold."""

    async def answer(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        reply = await model.answer(body, betas)
        return {**reply, "usage": {"input_tokens": 1, "cache_read_input_tokens": len(dumps(body)) // 4}}

    return answer


async def first_commit_round(tmp_path: Path, **collapse: Any) -> tuple[Rig, int]:
    """Turns of 1,500 words until a fold commits: the rig and the first round that saw a staged fold."""
    model = CollapseModel()
    r = rig(tmp_path, FunctionProvider(cached(model)), config=collapse_config(**collapse))
    staged_at: int | None = None
    for n in range(1, 30):
        if staged_at is None and r.collapse.store.staged:
            staged_at = len(r.spy.rounds)
        await r.turn(n, 1_500)
        await r.settle()
        if r.commits():
            assert staged_at is not None
            return r, staged_at
    raise AssertionError("no fold was ever committed")


async def test_a_staged_fold_commits_below_90_percent_as_soon_as_it_pays(tmp_path: Path) -> None:
    r, staged_at = await first_commit_round(
        tmp_path, commit_when_it_pays=True, expected_rest_min_requests=1_000
    )
    window = r.engine.config.effective_window
    # committed in the first round that had a staged fold, far below the 90% line
    assert len(r.spy.rounds) == staged_at + 1
    assert max(r.spy.rounds) < 0.5 * window
    [receipt] = r.receipts()
    assert receipt.content.startswith("committed fold of turns 1–")
    await r.close()


async def test_a_fold_that_would_not_pay_back_its_rewrite_waits(tmp_path: Path) -> None:
    # Expected to end soon, the session would not read the freed tokens often enough to pay for
    # writing again everything cached after the fold (here the finished turn kept after it): the
    # staged fold waits for more requests.
    slow, slow_staged = await first_commit_round(
        tmp_path / "short", commit_when_it_pays=True, expected_rest_min_requests=1, keep_recent_turns=2
    )
    assert len(slow.spy.rounds) > slow_staged + 1, "the fold was held for at least one round"
    held = slow.spy.rounds[slow_staged]
    assert held < 0.9 * slow.engine.config.effective_window
    await slow.close()
    # ...and with the rule off, it waits for the 90% line whatever the session's length.
    off = rig(tmp_path / "off", FunctionProvider(cached(CollapseModel())), config=collapse_config())
    for n in range(1, 10):
        await off.turn(n, 1_500)
        await off.settle()
    assert off.collapse.store.staged
    assert off.commits() == []
    await off.close()


async def test_staged_folds_commit_at_90_percent_with_a_receipt_and_hold_after_resume(tmp_path: Path) -> None:
    model = CollapseModel()
    r = rig(tmp_path, FunctionProvider(model.answer))
    config = r.engine.config
    window = config.effective_window
    commit_line = config.collapse.commit_at * window
    n = 0
    while r.tokens() + 2_500 < 0.88 * window:
        n += 1
        await r.turn(n, 1_500)
        await r.settle()
    assert r.commits() == []
    assert r.collapse.store.staged, "the background run staged folds before 90%"
    rounds = len(r.spy.rounds)
    n += 1
    await r.turn_at(n, 0.925)
    # The commit happened in the first round past 90% (and below 95%, so no emergency fold).
    assert all(t < commit_line for t in r.spy.rounds[:rounds])
    assert commit_line <= r.spy.rounds[rounds] < config.collapse.emergency_at * window
    assert r.collapse.store.staged == []
    assert model.spans
    assert len(model.spans) == len(r.commits())  # committing made no LLM call of its own
    [receipt] = r.receipts()
    commits = r.commits()
    assert receipt.content.startswith(f"committed {len(commits)} folds of turns 1–")
    assert "freed " in receipt.content
    assert "rewrites " in receipt.content
    assert receipt.data is not None
    assert receipt.data["tokens_freed"] > 10_000
    assert receipt.data["cached_rewrite_tokens"] == 0  # in-process: nothing was cached
    [shown] = [e for e in r.events if isinstance(e, CompactionEvent) and e.text == receipt.content]
    assert (shown.level, shown.tokens_freed) == ("collapse", receipt.data["tokens_freed"])
    # The request after the commit carries the summaries, not the folded turns.
    after = sent_text(model.main[-1])
    assert "<collapsed-context" in after
    assert "FACT-1 = value1" in after  # kept by the summary
    assert "Turn 1: remember" not in after
    # Every entry is still in the timeline and the transcript (the UI view is unchanged).
    loaded = load_transcript(r.writer.path).timeline()
    prompts = [e for e in ui_view(loaded) if isinstance(e, UserEntry) and isinstance(e.message.content, str)]
    assert [p.message.content.split(":")[0] for p in prompts] == [f"Turn {i}" for i in range(1, n + 1)]

    shown = CliRunner().invoke(cli, ["show", str(r.writer.path), "--max-chars", "40"])
    assert shown.exit_code == 0, shown.output
    for i in range(1, n + 1):
        assert f"Turn {i}: remember FACT-{i}" in shown.output  # `foldline show` still shows every entry
    assert "collapsed span" in shown.output

    # Resume: the next request is byte-identical to the one the live session would send.
    assert r.engine.build_request is not None
    before = dumps(r.engine.build_request(r.engine.timeline.snapshot(), max_tokens=1_024).body)
    await r.close()
    resumed = rig(tmp_path, FunctionProvider(model.answer))
    assert resumed.engine.build_request is not None
    again = dumps(resumed.engine.build_request(resumed.engine.timeline.snapshot(), max_tokens=1_024).body)
    assert again == before
    await resumed.close()


async def test_no_emergency_fold_when_the_commit_alone_brings_95_percent_back_down(tmp_path: Path) -> None:
    """R3.3.5 in order: the 95% check counts what this round's 90% commit already freed."""
    model = CollapseModel()
    r = rig(tmp_path, FunctionProvider(model.answer))
    window = r.engine.config.effective_window
    n = 0
    while r.tokens() + 2_500 < 0.88 * window:
        n += 1
        await r.turn(n, 1_500)
        await r.settle()
    assert r.collapse.store.staged, "the background run staged folds before 90%"
    spans, runs, rounds = len(model.spans), r.collapse.runs, len(r.spy.rounds)
    await r.turn_at(n + 1, 0.97)
    assert r.spy.rounds[rounds] >= r.engine.config.collapse.emergency_at * window  # the round saw 95%+
    assert r.commits(), "the staged folds were committed"
    assert (len(model.spans), r.collapse.runs) == (spans, runs)  # and no synchronous ctx-agent run
    kinds = [x.data.get("kind") for x in r.receipts() if x.data]
    assert "emergency" not in kinds
    assert not any(x.content.startswith("emergency fold") for x in r.receipts())
    await r.close()


async def test_the_emergency_fold_runs_at_95_percent_with_progress_and_a_receipt(tmp_path: Path) -> None:
    model = CollapseModel()
    provider = FunctionProvider(model.answer, context_window=40_000)  # the model's real window
    r = rig(tmp_path, provider, background=False)  # nothing is ever staged
    config = r.engine.config
    window = config.effective_window
    n = 0
    while r.tokens() + 2_500 < 0.93 * window:
        n += 1
        await r.turn(n, 1_500)
    assert r.commits() == []
    assert model.spans == []
    rounds = len(r.spy.rounds)
    n += 1
    await r.turn_at(n, 0.97)
    assert config.collapse.emergency_at * window <= r.spy.rounds[rounds] < config.blocking_limit
    assert model.spans, "the emergency fold asked the ctx-agent, synchronously"
    assert r.commits()
    receipts = r.receipts()
    assert any(x.content.startswith("emergency fold") for x in receipts)
    progress = [e for e in r.events if isinstance(e, NoticeEvent) and e.level == "progress"]
    assert progress
    assert "summarizing turns 1–" in progress[0].text
    assert "nearly full" in progress[0].text
    assert "<collapsed-context" in sent_text(model.main[-1])
    assert all(c.status in (None, 200) for c in provider.calls)  # nothing sent over the window
    await r.close()


async def test_a_prompt_too_long_drains_the_staged_folds_first(tmp_path: Path) -> None:
    model = CollapseModel()
    provider = FunctionProvider(model.answer, context_window=28_000)  # smaller than the engine thinks
    r = rig(tmp_path, provider)
    n = 0
    while not r.commits():
        n += 1
        assert n < 20, "no drain"
        await r.turn(n)
        await r.settle()
    assert any(c.status == 400 for c in provider.calls)
    # (a background summary may fail on the small window too: its receipt is recorded beside)
    [receipt] = [x for x in r.receipts() if x.data and x.data.get("kind") == "drain"]
    assert receipt.content.startswith("prompt too long: committed")
    assert provider.calls[-1].status in (None, 200)
    assert "<collapsed-context" in sent_text(model.main[-1])
    await r.close()


# --- over HTTP: the fork reads the main conversation's cache -------------------------------------


async def test_the_ctx_agent_request_reads_the_main_cache_at_the_server(
    harness: Callable[..., Harness],
) -> None:
    summary = summary_for(
        {"messages": [{"role": "user", "content": "[id:a] and ends at the message tagged [id:b]"}]}
    )
    replies: list[dict[str, Any]] = [{"text": summary, "when": {"last_user_contains": SPAN_MARK}}]
    replies += [{"text": "Noted."}] * 20
    h = harness(replies, **_harness_config())
    engine = await h.engine()
    collapse = Collapse.for_engine(engine)
    engine.stages = [collapse]
    engine.tail_hooks = [collapse.tail_hook]
    engine.stop_hooks = [collapse.stop]
    for n in (1, 2, 3):
        await engine.submit_message(prompt(n, WORDS))
        await engine.drain()
        await collapse.wait()
    [fold] = collapse.store.staged
    usage = fold.usage
    # The fork re-sent turns 1-3 (about 9,000 tokens); nearly all of it came from the cache.
    assert usage.cache_read_input_tokens > 6_000
    assert usage.cache_creation_input_tokens + usage.input_tokens < 1_000
    assert list(h.statuses()) == [200, 200, 200, 200]

    # On to the commit: its receipt prices the cache rewrite: the summary and what follows the span,
    # not the span itself, which is dropped rather than written again.
    n = 3
    while not any(isinstance(r, CollapseCommit) for r in engine.timeline):
        n += 1
        assert n < 20, "no commit"
        await engine.submit_message(prompt(n, WORDS))
        await engine.drain()
        await collapse.wait()
    assert all(f.usage.cache_read_input_tokens > 6_000 for f in collapse.forks if isinstance(f, StagedFold))
    [receipt] = [r for r in engine.timeline if isinstance(r, SystemEntry) and r.subtype == "collapse"]
    assert receipt.data is not None
    rewrite = receipt.data["cached_rewrite_tokens"]
    assert isinstance(rewrite, int)
    commits = [r for r in engine.timeline if isinstance(r, CollapseCommit)]
    summaries = sum(summary_tokens(c.summary) for c in commits)
    kept = sum(
        estimate_entry(e)
        for e in api_filter(project_view(list(engine.timeline)))
        if not any(e.uuid == c.uuid for c in commits)
    )
    # turns 1-3 held over 20,000 cached tokens; the folds rewrite only their summaries and the turns
    # after them
    assert summaries < rewrite < 20_000
    assert rewrite <= padded(kept) + summaries
    assert f"rewrites {rewrite:,} cached tokens" in receipt.content
    assert set(h.statuses()) == {200}


def _harness_config() -> dict[str, Any]:
    c = collapse_config()
    return {
        "context_window": c.context_window,
        "output_reserve": c.output_reserve,
        "max_output_tokens": c.max_output_tokens,
        "autocompact": c.autocompact,
        "collapse": c.collapse,
    }


# --- kill -9 after a commit --------------------------------------------------------------------------

CHILD = Path(__file__).with_name("_collapse_child.py")
ROOT = Path(__file__).resolve().parents[2]
"""The repository root: the child imports `tests.compact` and `foldline` from here, whatever the cwd."""


@pytest.mark.slow  # a second Python process: about 6 s, most of it importing the SDK
def test_a_commit_survives_kill_9_and_resume_sends_the_same_bytes(tmp_path: Path) -> None:
    transcript = tmp_path / "s1.jsonl"
    sent = tmp_path / "sent.json"
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), *inherited])}
    done = subprocess.run(
        [sys.executable, str(CHILD), str(transcript), str(sent)],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert sent.exists()
    loaded = load_transcript(transcript).timeline()
    records = loaded.snapshot()
    assert any(isinstance(r, CollapseCommit) for r in records)
    assert request_for(records) == sent.read_bytes()


# --- a long session ----------------------------------------------------------------------------------


@pytest.mark.slow  # 300 turns in-process
async def test_300_turns_stay_under_the_blocking_limit_and_keep_every_planted_fact(tmp_path: Path) -> None:
    """The in-process stand-in for the simulated 300-turn session (no AutoCompact exists to back it up).

    Every turn plants one fact; Collapse alone must keep every request under the blocking limit and
    the model's window (no 400s), and the folds' summaries must keep every fact.
    """
    model = CollapseModel()
    provider = FunctionProvider(model.answer, context_window=40_000)
    r = rig(tmp_path, provider)
    for n in range(1, 301):
        await r.turn(n, 600)
        await r.settle()
    assert max(r.spy.rounds) < r.engine.config.blocking_limit
    assert {c.status for c in provider.calls} <= {None, 200}
    assert len(r.commits()) > 10
    final = sent_text(model.main[-1])
    missing = [n for n in range(1, 301) if f"FACT-{n} = value{n}" not in final]
    assert missing == []
    await r.close()


async def test_record_folds_ask_the_model_nothing_and_keep_every_prompt(tmp_path: Path) -> None:
    """Collapse as it ships (`CollapseConfig()`: record folds of 2K-token spans): a span is folded
    into a record of its turns (the prompts, what the assistant said and did, the results' first
    lines, the final replies) with no summary request, so a lossy summarizer has nothing to lose; the
    context still stays under the blocking limit."""
    model = CollapseModel()
    provider = FunctionProvider(model.answer, context_window=40_000)
    shipped = CollapseConfig()
    config = collapse_config(
        folds=shipped.folds, span_target_tokens=shipped.span_target_tokens, commit_when_it_pays=True
    )
    r = rig(tmp_path, provider, config=config)
    for n in range(1, 41):
        await r.turn(n, 600)
        await r.settle()
    assert model.main, "the rig ran"
    assert model.spans == []  # not one span summary was asked for
    commits = r.commits()
    assert len(commits) > 3
    assert all(c.summary.startswith(RECORD_HEADING) for c in commits)
    assert "- reply: Noted." in commits[0].summary  # what the model answered, beside each prompt
    assert max(r.spy.rounds) < r.engine.config.blocking_limit
    final = sent_text(model.main[-1])
    folded = [n for n in range(1, 41) if any(f"FACT-{n} = value{n}" in c.summary for c in commits)]
    assert folded, "some prompts were folded"
    assert all(f"FACT-{n} = value{n}" in final for n in folded)  # kept word for word in the records
    await r.close()


# --- a summarizer that fails: the mechanical fold and the breaker (R3.3.9, R3.4.11) -------------


async def test_malformed_emergency_summaries_become_mechanical_folds_said_once(tmp_path: Path) -> None:
    """The model cannot summarize: the emergency fold commits mechanical folds (prompts, facts
    typed, marked as not a summary) so the context comes back down, and the user is told once."""
    model = CollapseModel(malformed=True)
    provider = FunctionProvider(model.answer, context_window=40_000)
    r = rig(tmp_path, provider, background=False)
    window = r.engine.config.effective_window
    n = 0
    while r.tokens() + 2_500 < 0.93 * window:
        n += 1
        await r.turn(n, 1_500)
    n += 1
    await r.turn_at(n, 0.97)
    assert model.spans, "the emergency fold asked the model first"
    commits = r.commits()
    assert commits, "the failed summaries were folded mechanically"
    assert all(c.summary.startswith(MECHANICAL_HEADING) for c in commits)
    assert "FACT-1 = value1" in commits[0].summary  # the user's prompt is kept (cut)
    assert r.tokens() < r.engine.config.collapse.commit_at * window
    [receipt] = [x for x in r.receipts() if x.data and x.data.get("mechanical")]
    assert "mechanical, not summaries" in receipt.content
    await r.turn(n + 1, 50)
    notices = [e for e in r.events if isinstance(e, NoticeEvent) and e.text == MECHANICAL_NOTICE]
    assert len(notices) == 1
    await r.close()


async def _resumed_turn(tmp_path: Path, provider: FunctionProvider, text: str) -> Levels:
    """One `chat -p --continue` process: resume the session, run a turn, exit."""
    writer, timeline = open_session(tmp_path / "s1.jsonl", session_id="s1", fsync="never")
    engine = QueryEngine(
        provider=provider,
        config=collapse_config(),
        tools=default_tools(),
        workspace=tmp_path,
        timeline=timeline,
        transcript=writer,
        permission_mode="bypassPermissions",
    )
    levels = install_levels(engine)
    try:
        await engine.submit_message(text)
    finally:
        await engine.aclose()
        writer.close()
    return levels


async def test_the_collapse_breaker_survives_a_resume(tmp_path: Path) -> None:
    """Span summaries that always fail: each resumed process asked again for every earlier turn
    (17 summary requests for 3 answered turns). Now the failures are counted in the receipts, the
    breaker holds across `--continue`, and once open the emergency fold is mechanical."""
    model = CollapseModel()

    async def failing(body: dict[str, Any], betas: tuple[str, ...]) -> Any:
        if SPAN_MARK in dumps(body["messages"][-1]).decode():
            model.spans.append(body)
            return http_error(400, "bad request from a test")
        return await model.answer(body, betas)

    provider = FunctionProvider(failing, context_window=40_000)
    config = collapse_config()
    n, asked = 0, None  # span requests when the transcript first says the breaker is open
    commits: list[CollapseCommit] = []
    while not commits:  # one process a turn, until the context reaches the emergency line
        n += 1
        assert n < 40, "no emergency fold"
        levels = await _resumed_turn(tmp_path, provider, prompt(n, 3_000))
        records = load_transcript(tmp_path / "s1.jsonl").records
        if asked is not None:
            assert levels.collapse is not None
            assert levels.collapse.stopped  # replayed on resume
            assert len(model.spans) == asked  # the model is not asked again
        elif any(isinstance(r, SystemEntry) and r.data and r.data.get("stopped") for r in records):
            asked = len(model.spans)
        commits = [r for r in records if isinstance(r, CollapseCommit)]
    assert asked is not None
    assert asked >= config.collapse.max_consecutive_failures  # the case ran: summaries failed
    assert all(c.summary.startswith(MECHANICAL_HEADING) for c in commits)  # the emergency fold


async def test_seven_resumed_turns_on_8k_with_a_model_that_cannot_summarize(tmp_path: Path) -> None:
    """The issue's session: seven `chat -p --continue` turns on an 8K window, every summary (span
    and full) malformed. It was 3 answered turns, then "nothing more could be compacted
    automatically" on each, with 33 summary requests; now every turn is answered (mechanical folds)
    and the breakers keep the requests few and stop them growing."""
    full = "Your task is to write a detailed summary"

    def answer(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        last = str(body["messages"][-1])
        if SPAN_MARK in last or full in last:
            return {"text": "Sure, here is what happened."}
        return {"text": "Done: " + "word " * 150}

    def asked() -> int:
        return sum(
            SPAN_MARK in str(c.body["messages"][-1]) or full in str(c.body["messages"][-1])
            for c in provider.calls
        )

    provider = FunctionProvider(answer, context_window=8_192)
    config = Config(
        model="local",
        context_window=8_192,
        reference_window=DESIGN_WINDOW,
        model_max_output=2_048,
        collapse=CollapseConfig(folds="summary"),
    )
    counts = []
    for n in range(7):
        writer, timeline = open_session(tmp_path / "s.jsonl", session_id="s", fsync="never")
        engine = QueryEngine(
            provider=provider,
            config=config,
            tools=default_tools(),
            workspace=tmp_path,
            timeline=timeline,
            transcript=writer,
            permission_mode="bypassPermissions",
        )
        install_levels(engine)
        try:
            await engine.submit_message(f"turn {n}: " + " ".join(f"w{n}x{i}" for i in range(700)))
        finally:
            await engine.aclose()
            writer.close()
        counts.append(asked())
    assert counts[0] >= 1  # the case ran: the model was asked, and could not summarize
    assert counts[-1] < 7  # fewer summary requests than turns...
    assert counts[-3:] == [counts[-3]] * 3  # ...and none once the breakers are open
