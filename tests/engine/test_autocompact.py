"""AutoCompact in the engine, counted at `foldline serve` (design.md §3.4, R5.4).

Windows are scaled down (a 20K-token model) so that a few turns fill them; the numbers at 200K and
1M are checked in tests/compact/test_autocompact.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from foldline.api.validate import output_too_long_message
from foldline.cli.chat import compact_command
from foldline.compact.autocompact import SUMMARY_LEAD, AutoCompactStage, install_autocompact
from foldline.compact.mechanical import MECHANICAL_HEADING, MECHANICAL_NOTICE
from foldline.compact.pipeline import CompactionContext, StageResult
from foldline.compact.prompts import SUMMARY_SECTIONS
from foldline.config import AutoCompactConfig, Config, RetryConfig, SessionMemoryConfig
from foldline.engine import QueryEngine
from foldline.errors import PromptTooLongError
from foldline.events import NoticeEvent
from foldline.server.caching import flatten, total_tokens
from foldline.testing import FunctionProvider, http_error
from foldline.timeline import (
    AttachmentEntry,
    CompactBoundary,
    SnipBoundary,
    SystemEntry,
    Timeline,
    UserEntry,
    new_uuid,
    now_iso,
    ui_view,
)
from foldline.tokens import estimate_text
from foldline.tools import default_tools

from .conftest import Harness, assert_valid_next_request, reload

pytestmark = pytest.mark.anyio

SUMMARY_ASK = "Your task is to write a detailed summary"


def _summary(fact: str = "the staging port is 6543") -> str:
    return "\n\n".join(f"## {title}\n{fact} ({title.lower()})" for title in SUMMARY_SECTIONS)


def _words(n: int, tag: str) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


_ROOM = "; and keep this in mind" * 300
"""Words that make a turn long enough for a summary and its re-attached files to be smaller than it:
a compaction that would not shrink the context is not committed."""


def _small(buffer: int = 12_000, **memory: Any) -> dict[str, Any]:
    """A 20K window, 2K reserve: threshold 20,000 - 2,000 - `buffer`, blocking limit 15,000."""
    return {
        "context_window": 20_000,
        "output_reserve": 2_000,
        "max_output_tokens": 500,
        "snip_enabled": False,
        "autocompact": AutoCompactConfig(
            buffer_tokens=buffer,
            warning_below_threshold=2_000,
            summary_max_tokens=1_000,
            memory=SessionMemoryConfig(enabled=bool(memory), **memory),
        ),
    }


def _forks(h: Harness) -> list[Any]:
    assert h.backend is not None
    return [c for c in h.backend.calls if SUMMARY_ASK in c.last_user_text()]


def _receipts(h: Harness) -> list[SystemEntry]:
    return [r for r in reload(h).snapshot() if isinstance(r, SystemEntry) and r.subtype == "compaction"]


async def test_full_compaction_forks_with_the_main_prefix_and_reads_its_cache(
    harness: Callable[..., Harness],
) -> None:
    summary = {"text": _summary(), "when": {"last_user_contains": SUMMARY_ASK}}
    h = harness([summary, *({"text": f"ok {i}"} for i in range(12))], **_small())
    (h.workspace / "FOLDLINE.md").write_text("Always run the tests.\n")
    (h.workspace / "notes.txt").write_text("the deploy key is in vault\n")
    engine = await h.engine()
    stage = install_autocompact(engine)
    turns = 0
    while not stage.receipts:
        await engine.submit_message(f"step {turns}: " + _words(700, f"t{turns}w"))
        turns += 1
        assert turns < 12
    [fork] = _forks(h)
    calls = h.backend.calls if h.backend else []
    main_before = calls[calls.index(fork) - 1]
    assert (fork.system, fork.tools, fork.model) == (main_before.system, main_before.tools, main_before.model)
    assert fork.messages[: len(main_before.messages) - 1] == main_before.messages[:-1]
    data = stage.receipts[0].data
    assert data is not None
    print(f"fork usage at the server: cache_read={data['cache_read']} cache_write={data['cache_write']}")
    assert (
        int(str(data["cache_read"])) > 3 * int(str(data["cache_write"])) > 0
    )  # reads the prefix, writes the tail
    after = calls[-1]
    assert SUMMARY_LEAD.strip()[:40] in str(after.messages[0])
    assert "Always run the tests." in str(after.messages[0])  # instruction files re-attached (R3.4.8)
    assert f"step {turns - 1}:" in after.last_user_text()  # the pending prompt kept verbatim
    assert "t0w5 " not in str(after.messages)
    boundary = next(r for r in reload(h).snapshot() if isinstance(r, CompactBoundary))
    assert boundary.trigger == "auto"
    assert boundary.post_tokens is not None
    assert boundary.post_tokens < boundary.pre_tokens
    assert "Always run the tests." in repr(_resumed_request(await h.engine()))


def _resumed_request(engine: QueryEngine) -> dict[str, Any]:
    assert engine.build_request is not None
    return dict(engine.build_request(engine.timeline.snapshot(), max_tokens=100).body)


@pytest.mark.parametrize(("with_collapse", "kept"), [(False, False), (True, True)])
async def test_with_collapse_on_the_memory_is_not_refreshed_in_the_background_unless_asked(
    harness: Callable[..., Harness], tmp_path: Path, with_collapse: bool, kept: bool
) -> None:
    # With Collapse on, AutoCompact only answers a prompt-too-long: a memory refreshed every 5,000
    # tokens would be a fork per refresh on every session, for a summary almost never used.
    h = harness([{"text": "ok"}], **_small(init_tokens=1_500, with_collapse=with_collapse))
    engine = await h.engine()
    tails = len(engine.tail_hooks)
    stage = install_autocompact(engine, collapse_enabled=True, memory_path=tmp_path / "session-memory.md")
    assert (stage.memory is not None) is kept
    assert len(engine.tail_hooks) == tails + kept
    plain = install_autocompact(engine, collapse_enabled=False, memory_path=tmp_path / "other.md")
    assert plain.memory is not None  # without Collapse the memory is AutoCompact's first resort


async def _with_memory(
    harness: Callable[..., Harness], tmp_path: Path, *, replies: int, **small: Any
) -> tuple[Harness, QueryEngine, AutoCompactStage]:
    """An engine whose AutoCompact keeps a session memory (written by a fork after each turn) and
    keeps a recent tail of 200 to 3,000 tokens and at least 3 text messages beside it."""
    memory = {"text": _summary("memory: port 6543"), "when": {"last_user_contains": SUMMARY_ASK}}
    h = harness(
        [memory, *({"text": f"ok {i}"} for i in range(replies))],
        **_small(
            init_tokens=1_500,
            update_tokens=500,
            update_tool_calls=0,
            keep_min_tokens=200,
            keep_max_tokens=3_000,
            keep_min_text_messages=3,
            **small,
        ),
    )
    engine = await h.engine()
    return h, engine, install_autocompact(engine, memory_path=tmp_path / "session-memory.md")


async def test_session_memory_compaction_makes_no_api_call_and_keeps_the_recent_tail(
    harness: Callable[..., Harness], tmp_path: Path
) -> None:
    h, engine, stage = await _with_memory(harness, tmp_path, replies=12)
    assert stage.memory is not None
    turns = 0
    while not stage.receipts:
        sent = len(h.requests())
        await engine.submit_message(f"step {turns}: " + _words(600, f"t{turns}w"))
        during = len(h.requests()) - sent  # the tail has not started yet: this turn's calls only
        await engine.drain()  # the background tail writes the memory
        turns += 1
        assert turns < 12
    assert stage.requests == 0  # no summary request
    assert stage.memory.requests >= 1
    assert len(_forks(h)) == stage.memory.requests  # every fork the server saw was a memory refresh
    assert h.backend is not None
    calls = h.backend.calls
    first_after = next(i for i, c in enumerate(calls) if SUMMARY_LEAD[:40] in str(c.messages[0]))
    assert during == 1  # the compacting turn made its one main request and nothing else
    data = stage.receipts[0].data
    assert data is not None
    assert data["source"] == "session memory"
    assert (tmp_path / "session-memory.md").read_text().startswith("<!-- foldline session memory")
    after = calls[first_after]
    assert "memory: port 6543" in str(after.messages[0])
    # the recent tail, verbatim: grown by whole rounds to 3 text messages (R3.4.10)
    assert f"step {turns - 2}:" in str(after.messages)
    assert f"ok {turns - 3}" in str(after.messages)
    assert f"step {turns - 3}:" not in str(after.messages)
    assert_valid_next_request(h, engine)


@pytest.mark.parametrize("short_of_the_gap", [False, True])
async def test_a_reactive_compaction_takes_the_memory_only_where_it_frees_the_gap(
    harness: Callable[..., Harness], tmp_path: Path, short_of_the_gap: bool
) -> None:
    """A server's refusal says how many tokens must go; the session memory keeps a recent tail, and
    where that frees fewer, a summary request (which keeps less) is made instead of a retry that
    would be refused again."""
    # no automatic compaction (buffer): only the refusal below compacts
    _, engine, stage = await _with_memory(harness, tmp_path, replies=8, buffer=1_000)
    assert stage.memory is not None
    for turn in range(4):
        await engine.submit_message(f"step {turn}: " + _words(600, f"t{turn}w"))
        await engine.drain()  # the background tail writes the memory
    assert stage.memory.load() is not None
    ctx = engine.window.context()
    gap = 3_000 if short_of_the_gap else 100  # the memory frees about 2,300 here, a summary 3,600
    await stage.on_prompt_too_long(ctx, gap)
    data = stage.receipts[-1].data
    assert data is not None
    assert data["outcome"] == "compacted"
    assert data["source"] == ("summary request" if short_of_the_gap else "session memory")
    assert (stage.requests == 1) == short_of_the_gap
    assert ctx.tokens - int(str(data["post_tokens"])) >= gap


async def test_breaker_after_three_failures_counted_at_the_server_and_manual_compact_still_runs(
    harness: Callable[..., Harness],
) -> None:
    manual = {"text": _summary("manual"), "when": {"last_user_contains": "MANUAL-KEEP"}}
    broken = {"text": "I would rather not.", "when": {"last_user_contains": SUMMARY_ASK}}
    h = harness([manual, broken, *({"text": f"ok {i}"} for i in range(8))], **_small(buffer=14_500))
    engine = await h.engine()
    stage = install_autocompact(engine)
    for turn in range(8):
        await engine.submit_message(f"step {turn}: " + _words(500, f"t{turn}w"))
    assert len(_forks(h)) == 3  # three failed attempts, then no further automatic one
    assert stage.stopped == "circuit_breaker"
    texts = [r.content for r in _receipts(h)]
    assert sum("compaction failed (auto)" in t for t in texts) == 3
    assert any("circuit breaker" in t and "/compact still works" in t for t in texts)
    out = Console(record=True, width=200)
    session: Any = _SessionOf(engine)
    await compact_command(session, "MANUAL-KEEP the ports", out)
    assert len(_forks(h)) == 4
    boundary = next(r for r in reload(h).snapshot() if isinstance(r, CompactBoundary))
    assert boundary.trigger == "manual"
    assert stage.stopped is None


async def test_a_tripped_breaker_stays_tripped_across_a_resume_counted_at_the_server(
    harness: Callable[..., Harness],
) -> None:
    """R3.4.6 is the session's: a resume (each `-p --continue`) does not re-arm it, nor forget failures."""
    broken = {"text": "I would rather not.", "when": {"last_user_contains": SUMMARY_ASK}}
    h = harness([broken, *({"text": f"ok {i}"} for i in range(12))], **_small(buffer=14_500))
    engine = await h.engine()
    install_autocompact(engine)
    turn = 0
    while len(_forks(h)) < 2:  # two failed attempts, then the process exits
        await engine.submit_message(f"step {turn}: " + _words(500, f"t{turn}w"))
        turn += 1
        assert turn < 8
    assert len(_forks(h)) == 2
    resumed = install_autocompact(await h.engine())  # a new process on the same transcript
    assert (resumed.failures, resumed.stopped) == (2, None)
    await h.engines[0].submit_message(f"step {turn}: " + _words(500, f"t{turn}w"))
    assert len(_forks(h)) == 3  # the third failure in a row, though in another process: tripped
    assert resumed.stopped == "circuit_breaker"
    again = install_autocompact(await h.engine())
    assert again.stopped == "circuit_breaker"
    for more in range(3):
        await h.engines[0].submit_message(f"more {more}: " + _words(500, f"m{more}w"))
    assert len(_forks(h)) == 3  # no summary request after the breaker, whatever the resumes


async def test_the_thrash_detector_remembers_refills_across_a_resume(tmp_path: Path) -> None:
    """R3.4.7 across processes: quick refills counted before a resume still count after it."""
    config = Config(retry=RetryConfig(base_backoff_s=0.01), **_small(buffer=13_000))  # threshold 5,000

    def answer(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        last = str(body["messages"][-1])
        return {"text": _summary() if SUMMARY_ASK in last else "ok"}

    def engine_on(timeline: Timeline, provider: FunctionProvider) -> QueryEngine:
        return QueryEngine(provider=provider, config=config, workspace=tmp_path, timeline=timeline)

    whole = FunctionProvider(answer)
    once = engine_on(Timeline(session_id="s"), whole)
    stage = install_autocompact(once)
    with pytest.raises(PromptTooLongError):
        await _turns_of(once, 12, words=1_400)
    assert stage.stopped == "thrash"
    asked = sum(SUMMARY_ASK in str(c.body["messages"][-1]) for c in whole.calls)

    # The same session, stopped after each turn and resumed from its records.
    split = FunctionProvider(answer)
    records: tuple[Any, ...] = ()
    stopped: str | None = None
    for turn in range(12):
        engine = engine_on(Timeline(records, session_id="s"), split)
        resumed = install_autocompact(engine)
        try:
            await engine.submit_message(f"step {turn}: " + _words(1_400, f"t{turn}w"))
        except PromptTooLongError:
            stopped = resumed.stopped
            break
        finally:
            records = engine.timeline.snapshot()
    assert stopped == "thrash"
    assert sum(SUMMARY_ASK in str(c.body["messages"][-1]) for c in split.calls) == asked


class _SessionOf:
    """Stands in for `Session` where only `.engine` is read."""

    def __init__(self, engine: QueryEngine) -> None:
        self.engine = engine


async def test_thrash_detector_stops_a_session_built_to_refill(tmp_path: Path) -> None:
    config = Config(retry=RetryConfig(base_backoff_s=0.01), **_small(buffer=13_000))  # threshold 5,000

    def answer(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        last = str(body["messages"][-1])
        return {"text": _summary() if SUMMARY_ASK in last else "ok"}

    provider = FunctionProvider(answer)
    engine = QueryEngine(
        provider=provider, config=config, workspace=tmp_path, timeline=Timeline(session_id="s")
    )
    stage = install_autocompact(engine)
    with pytest.raises(PromptTooLongError, match="run /compact"):
        await _turns_of(engine, 12, words=1_400)  # ~3K tokens a turn, until the blocking limit
    compactions = [r for r in engine.timeline if isinstance(r, CompactBoundary)]
    assert len(compactions) == 3  # each refilled within a round; the fourth was refused
    assert stage.stopped == "thrash"
    stop = next(r for r in stage.receipts if r.data and r.data.get("reason") == "thrash")
    assert "refilled to the threshold" in stop.content
    over = [c for c in provider.calls if total_tokens(flatten(c.body)) > config.blocking_limit]
    assert over == []  # nothing was ever sent over the blocking limit


async def _turns_of(engine: QueryEngine, turns: int, *, words: int) -> None:
    for turn in range(turns):
        await engine.submit_message(f"step {turn}: " + _words(words, f"t{turn}w"))


class _Drain:
    """Stands in for Collapse draining its staged folds: frees a little, less than the gap."""

    name = "collapse"

    def __init__(self) -> None:
        self.asked: list[int | None] = []

    async def run(self, ctx: CompactionContext) -> StageResult:
        return StageResult()

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        self.asked.append(gap_tokens)
        first = next(e for e in ui_view(ctx.records) if isinstance(e, UserEntry))
        return StageResult((SnipBoundary(uuid=new_uuid(), timestamp=now_iso(), removed_uuids=(first.uuid,)),))


@pytest.mark.parametrize(
    ("words", "rounds_dropped"),
    [
        # the pending prompt is the bulk: left out of the fork (it follows the summary verbatim),
        # the fork fits with every older round in it
        ((600, 600, 1_000), False),
        # the history itself is too long for the fork: oldest rounds go too
        ((900, 900, 250), True),
    ],
)
async def test_413_chain_drains_then_compacts_reactively_then_succeeds(
    harness: Callable[..., Harness], words: tuple[int, int, int], rounds_dropped: bool
) -> None:
    summary = {"text": _summary(), "when": {"last_user_contains": SUMMARY_ASK}}
    h = harness(
        [summary, *({"text": f"reply {i}"} for i in range(4))],
        server_context_window=5_000,
        **_small(buffer=1_000),  # AutoCompact's own threshold is out of the way: the server decides
    )
    engine = await h.engine()
    drain = _Drain()
    engine.stages = [drain]
    stage = install_autocompact(engine)
    await engine.submit_message("hello")
    for turn, count in enumerate(words, start=1):
        result = await engine.submit_message(f"p{turn} " + _words(count, f"p{turn}w"))
    assert result.text == "reply 3"
    assert drain.asked  # the drain came first...
    assert drain.asked[0] is not None  # ...with the parsed gap
    assert stage.receipts[-1].data is not None
    assert stage.receipts[-1].data["trigger"] == "reactive"
    # main too long; the summary fork too long until small enough (at most 3 retries); main ok
    statuses = h.statuses()
    assert statuses[:4] == [200, 200, 200, 400]
    assert statuses[-2:] == [200, 200]
    assert set(statuses[4:-2]) <= {400}
    assert len(statuses[4:-2]) <= 3
    [fork] = _forks(h)
    assert "p3w5 " not in str(fork.messages)  # the pending prompt is not summarized...
    assert "p3 " in h.backend.calls[-1].last_user_text()  # ...but kept verbatim
    data = stage.receipts[-1].data
    assert data is not None
    assert (int(str(data["dropped_rounds"])) >= 1) == rounds_dropped
    assert ("p1w5 " not in str(fork.messages)) == rounds_dropped  # oldest rounds go whole


async def test_413_with_nothing_left_to_compact_is_one_clear_message(harness: Callable[..., Harness]) -> None:
    h = harness([], server_context_window=3_000, **_small(buffer=1_000))
    engine = await h.engine()
    stage = install_autocompact(engine)
    with pytest.raises(PromptTooLongError) as caught:
        await engine.submit_message(_words(3_000, "z"))
    assert "run /compact" in str(caught.value)
    assert "prompt is too long" in str(caught.value)
    assert (
        "there is nothing to compact" in stage.receipts[-1].content
        or "too long" in stage.receipts[-1].content
    )
    assert all(s == 400 for s in h.statuses())


async def test_recently_read_files_are_reattached_within_budget(scripted: Callable[..., Harness]) -> None:
    h = scripted(
        [
            {"tool_calls": [{"name": "Read", "input": {"file_path": "notes.txt"}}]},
            {"text": "read it"},
            {"text": _summary()},
        ],
        **_small(),
    )
    (h.workspace / "notes.txt").write_text("the deploy key is in vault\n")
    engine = await h.engine()
    install_autocompact(engine)
    await engine.submit_message("read notes.txt" + _ROOM)
    (h.workspace / "notes.txt").write_text("the deploy key moved to the HSM\n")
    added = await engine.compact("keep the file names")
    files = [r for r in added if isinstance(r, AttachmentEntry) and r.attachment_type == "file"]
    assert len(files) == 1
    assert "moved to the HSM" in str(files[0].content)  # as the file is now, not as it was read
    assert "keep the file names" in str(h.requests()[-1].messages[-1])


async def test_reattached_files_keep_to_the_count_and_token_limits(scripted: Callable[..., Harness]) -> None:
    """R3.4.8's limits: the newest `reattach_files` files, each cut at `reattach_tokens_per_file`,
    all together within `reattach_tokens_total`."""
    names = [f"f{n}.txt" for n in range(6)]  # read in this order: f5 is the newest
    sizes = {"f5.txt": 100, "f4.txt": 4_000, "f3.txt": 100, "f2.txt": 100, "f1.txt": 100, "f0.txt": 100}
    small = _small()
    small["autocompact"] = dataclasses.replace(
        small["autocompact"], reattach_files=4, reattach_tokens_per_file=300, reattach_tokens_total=500
    )
    reads = [{"name": "Read", "input": {"file_path": name}} for name in names]
    h = scripted([{"tool_calls": reads}, {"text": "read them"}, {"text": _summary()}], **small)
    for name in names:
        (h.workspace / name).write_text(f"{name}: " + "y" * (4 * sizes[name]))
    engine = await h.engine()
    install_autocompact(engine)
    await engine.submit_message("read every file" + _ROOM)
    added = await engine.compact()
    files = [r for r in added if isinstance(r, AttachmentEntry) and r.attachment_type == "file"]
    shown = {Path(str(f.path)).name: str(f.content) for f in files}
    # f5 (~100 tokens), then f4 cut to 300, then f3 gets the 100 left of the 500; the count limit
    # (4) is never reached because the total ran out first.
    assert list(shown) == ["f5.txt", "f4.txt", "f3.txt"]
    assert "truncated; Read" not in shown["f5.txt"]
    assert "truncated; Read" in shown["f4.txt"]
    assert len(shown["f4.txt"]) < 4 * 300 + 400
    assert "truncated; Read" in shown["f3.txt"]
    assert sum(estimate_text(c.split("\n\n", 1)[1]) for c in shown.values()) <= 500 + 3 * 20


async def test_reattached_files_stop_at_the_count_limit(scripted: Callable[..., Harness]) -> None:
    names = [f"g{n}.txt" for n in range(5)]
    small = _small()
    small["autocompact"] = dataclasses.replace(small["autocompact"], reattach_files=2)
    reads = [{"name": "Read", "input": {"file_path": name}} for name in names]
    h = scripted([{"tool_calls": reads}, {"text": "read them"}, {"text": _summary()}], **small)
    for name in names:
        (h.workspace / name).write_text(f"{name} is short\n")
    engine = await h.engine()
    install_autocompact(engine)
    await engine.submit_message("read every file" + _ROOM)
    added = await engine.compact()
    files = [r for r in added if isinstance(r, AttachmentEntry) and r.attachment_type == "file"]
    assert [Path(str(f.path)).name for f in files] == ["g4.txt", "g3.txt"]  # the newest two


async def test_precompact_hooks_run_once_before_the_summary_request(scripted: Callable[..., Harness]) -> None:
    h = scripted([{"text": "hello back"}, {"text": _summary()}], **_small())
    sent_before_hook: list[int] = []

    async def hook(ctx: CompactionContext) -> None:
        sent_before_hook.append(len(h.requests()))

    engine = await h.engine(pre_compact_hooks=[hook])
    install_autocompact(engine)
    await engine.submit_message("hello")
    await engine.compact()
    assert sent_before_hook == [1]  # after the turn's request, before the summary's
    assert SUMMARY_ASK in str(h.requests()[-1].messages[-1])


async def test_precompact_hooks_run_before_an_automatic_compaction(harness: Callable[..., Harness]) -> None:
    summary = {"text": _summary(), "when": {"last_user_contains": SUMMARY_ASK}}
    h = harness([summary, *({"text": f"ok {i}"} for i in range(12))], **_small())
    hooked: list[int] = []

    async def hook(ctx: CompactionContext) -> None:
        hooked.append(len(h.requests()))

    engine = await h.engine(pre_compact_hooks=[hook])
    stage = install_autocompact(engine)
    turns = 0
    while not stage.receipts:
        await engine.submit_message(f"step {turns}: " + _words(700, f"t{turns}w"))
        turns += 1
        assert turns < 12
    summary_at = next(n for n, r in enumerate(h.requests()) if SUMMARY_ASK in str(r.last_user_text()))
    assert hooked == [summary_at]  # once, just before the summary request went out


class _ClaimsTheGap(_Drain):
    """Collapse's drain as it was seen on a small window: it says it freed the whole gap (its
    estimate) and the server still counts the retry over the window."""

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        result = await super().on_prompt_too_long(ctx, gap_tokens)
        return dataclasses.replace(result, tokens_freed=(gap_tokens or 0) + 1)


def _engine(provider: FunctionProvider, config: Config, workspace: Path) -> QueryEngine:
    return QueryEngine(
        provider=provider, config=config, workspace=workspace, timeline=Timeline(session_id="s")
    )


def _answers(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
    last = str(body["messages"][-1])
    return {"text": _summary() if SUMMARY_ASK in last else "ok"}


async def test_a_drain_that_frees_too_little_leaves_the_retry_to_reactive_compaction(tmp_path: Path) -> None:
    """R5.4: the retry's refusal goes on down the chain to the level not yet asked; it does not end
    the turn with "still too long" while reactive AutoCompact has never run."""
    provider = FunctionProvider(_answers, context_window=5_000)
    config = Config(retry=RetryConfig(base_backoff_s=0.01), **_small(buffer=1_000))
    engine = _engine(provider, config, tmp_path)
    drain = _ClaimsTheGap()
    engine.stages = [drain]
    stage = install_autocompact(engine)
    await engine.submit_message("hello")
    for turn, count in enumerate((600, 600), start=1):
        await engine.submit_message(f"p{turn} " + _words(count, f"p{turn}w"))
    result = await engine.submit_message("p3 " + _words(1_400, "p3w"))
    assert result.text == "ok"
    assert len(drain.asked) == 1  # the drain was asked once, first...
    reactive = [r for r in stage.receipts if r.data and r.data.get("trigger") == "reactive"]
    assert [r.data["outcome"] for r in reactive if r.data] == ["compacted"]  # ...then the next level
    statuses = [c.status for c in provider.calls if SUMMARY_ASK not in str(c.body["messages"][-1])]
    assert statuses[-3:] == [400, 400, 200]  # refused, refused after the drain, answered
    too_long = [c for c in provider.calls if c.status == 400]
    assert all(total_tokens(flatten(c.body)) > 5_000 for c in too_long)  # the prompt, not the reply


async def test_each_level_is_asked_once_then_the_turn_ends_with_one_message(tmp_path: Path) -> None:
    """A chain whose every level acted and a retry still refused: one clear message, no loop."""
    provider = FunctionProvider(_answers, context_window=5_000)
    config = Config(retry=RetryConfig(base_backoff_s=0.01), **_small(buffer=1_000))
    engine = _engine(provider, config, tmp_path)
    first, second = _ClaimsTheGap(), _ClaimsTheGap()
    second.name = "microcompact"
    engine.stages = [first, second]
    await engine.submit_message("hello")
    await engine.submit_message("again")
    with pytest.raises(PromptTooLongError, match="still too long after compacting automatically"):
        await engine.submit_message("p3 " + _words(3_000, "p3w"))
    assert (len(first.asked), len(second.asked)) == (1, 1)


async def test_no_room_for_the_reply_beside_the_prompt_is_compacted_not_the_end(tmp_path: Path) -> None:
    """A prompt that fits the server's window with too little room for a reply beside it (a prompt
    at the blocking limit of a server whose window is that limit) is recovered from by compaction,
    not ended as "no room for the reply"."""
    config = Config(retry=RetryConfig(base_backoff_s=0.01), **_small(buffer=1_000))

    def answer(body: dict[str, Any], betas: tuple[str, ...]) -> Any:
        prompt = total_tokens(flatten(body))
        if SUMMARY_ASK not in str(body["messages"][-1]) and prompt > 3_000:
            # the server's window is the prompt and 100 tokens: fits alone, no room for the reply
            return http_error(400, output_too_long_message(prompt, body["max_tokens"], prompt + 100))
        return _answers(body, betas)

    provider = FunctionProvider(answer)
    engine = _engine(provider, config, tmp_path)
    stage = install_autocompact(engine)
    await engine.submit_message("hello")
    await engine.submit_message("p1 " + _words(800, "p1w"))
    result = await engine.submit_message("p2 " + _words(600, "p2w"))
    assert result.text == "ok"
    assert [c.status for c in provider.calls].count(400) == 1  # the case ran: refused once
    compacted = [r.data for r in stage.receipts if r.data and r.data.get("outcome") == "compacted"]
    assert [d["trigger"] for d in compacted] == ["reactive"]


def _cannot_summarize(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
    """A small local model: no usable summary; reads notes.txt when asked to."""
    last = body["messages"][-1]
    if SUMMARY_ASK in str(last):
        return {"text": ""}
    if "please read notes.txt" in str(last):
        return {"tool_calls": [{"name": "Read", "input": {"file_path": "notes.txt"}}]}
    return {"text": "ok"}


async def test_a_reactive_compaction_the_model_cannot_summarize_folds_mechanically(tmp_path: Path) -> None:
    """R3.4.11: an empty summary no longer ends the turn with "nothing more could be compacted":
    a mechanical fold (prompts, files touched, first lines of results, marked as not a summary)
    is committed, the turn goes on, and the user is told once."""
    (tmp_path / "notes.txt").write_text("alpha line\nbeta line\ngamma line\ndelta line\nepsilon line\n")
    provider = FunctionProvider(_cannot_summarize, context_window=6_000)
    engine = QueryEngine(
        provider=provider,
        config=Config(retry=RetryConfig(base_backoff_s=0.01), **_small(buffer=1_000)),
        tools=default_tools(),
        workspace=tmp_path,
        timeline=Timeline(session_id="s"),
        permission_mode="bypassPermissions",
    )
    events: list[Any] = []
    engine.events.subscribers.append(events.append)
    stage = install_autocompact(engine)
    await engine.submit_message("hello, please read notes.txt")
    for turn, count in enumerate((600, 600), start=1):
        await engine.submit_message(f"p{turn} " + _words(count, f"p{turn}w"))
    result = await engine.submit_message("p3 " + _words(1_400, "p3w"))
    assert result.text == "ok"
    assert _forks_of(provider), "the model was asked for a summary first"
    [summary] = [r for r in engine.timeline if isinstance(r, UserEntry) and r.is_compact_summary]
    text = str(summary.message.content)
    assert MECHANICAL_HEADING in text
    assert "hello, please read notes.txt" in text  # the user's prompts
    assert "Files touched: notes.txt" in text
    assert "alpha line" in text  # a result's first lines...
    assert "epsilon line" not in text  # ...only
    [done] = [r for r in stage.receipts if r.data and r.data.get("outcome") == "compacted"]
    assert done.data is not None
    assert done.data["trigger"] == "reactive"
    assert done.data["mechanical"]
    assert "not a summary" in done.content
    for turn in (4, 5):  # further mechanical folds are not announced again
        await engine.submit_message(f"p{turn} " + _words(1_400, f"p{turn}w"))
    folds = [r for r in stage.receipts if r.data and r.data.get("mechanical")]
    assert len(folds) > 1  # the case ran: folded mechanically again...
    assert (
        sum(isinstance(e, NoticeEvent) and e.text == MECHANICAL_NOTICE for e in events) == 1
    )  # ...said once


def _forks_of(provider: FunctionProvider) -> list[Any]:
    return [c for c in provider.calls if SUMMARY_ASK in str(c.body["messages"][-1])]


async def _plan(plan: str, *, resume_each_step: bool) -> tuple[int, str | None]:
    """Run `plan` ("t": a turn of 700 words, "c": /compact) on a 5,000-token threshold; return the
    summary requests sent and why automatic compaction stopped, if it did."""
    config = Config(retry=RetryConfig(base_backoff_s=0.01), **_small(buffer=13_000))
    provider = FunctionProvider(_answers)
    records: tuple[Any, ...] = ()
    engine: QueryEngine | None = None
    stage: AutoCompactStage | None = None
    for step, what in enumerate(plan):
        if engine is None or resume_each_step:
            timeline = Timeline(records, session_id="s")
            engine = QueryEngine(provider=provider, config=config, workspace=Path("."), timeline=timeline)
            stage = install_autocompact(engine)
        if what == "c":
            await engine.compact()
        else:
            await engine.submit_message(f"step {step}: " + _words(700, f"t{step}w"))
        records = engine.timeline.snapshot()
    assert stage is not None
    return len(_forks_of(provider)), stage.stopped


async def test_rounds_since_a_manual_compaction_count_the_same_live_and_resumed() -> None:
    """R3.4.7: the rounds since the last compaction are the replies recorded after it, in one
    process or one process a turn; a process counter said one more after a manual /compact, so the
    same session thrash-stopped when resumed and not when run whole."""
    whole = await _plan("tc" + "t" * 10, resume_each_step=False)
    resumed = await _plan("tc" + "t" * 10, resume_each_step=True)
    assert whole == resumed
    assert whole[1] == "thrash"  # the case ran: three quick refills after the manual compaction


async def test_a_failed_manual_compact_does_not_count_toward_the_breaker_on_resume(tmp_path: Path) -> None:
    """R3.4.6: two automatic failures, then a /compact that fails: a resumed session has two
    failures, not three, and is not stopped; the next automatic failure trips it."""

    def malformed(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        return {"text": "no summary" if SUMMARY_ASK in str(body["messages"][-1]) else "ok"}

    config = Config(retry=RetryConfig(base_backoff_s=0.01), **_small(buffer=13_000))
    provider = FunctionProvider(malformed)
    engine = _engine(provider, config, tmp_path)
    stage = install_autocompact(engine)
    step = 0
    while stage.failures < 2:
        step += 1
        assert step < 10
        await engine.submit_message(f"step {step}: " + _words(700, f"t{step}w"))
    assert await engine.compact() == []  # the manual compaction failed...
    assert "manual" in stage.receipts[-1].content  # ...and said so
    resumed_engine = QueryEngine(
        provider=provider, config=config, workspace=tmp_path, timeline=Timeline(engine.timeline.snapshot())
    )
    resumed = install_autocompact(resumed_engine)
    assert (resumed.failures, resumed.stopped) == (2, None)
    await resumed_engine.submit_message("one more: " + _words(700, "m"))
    assert resumed.stopped == "circuit_breaker"
