"""Context Collapse, level 3 of compaction: the collapse store and its stage (design.md §3.3).

`Collapse` owns the *staged queue* (in memory: finished ctx-agent analyses waiting to be committed)
and runs the ctx-agent (`compact.ctx_agent`) in two ways:

- in the background, from the engine's tail after a turn (R6.1): `tail_hook` starts one run and
  returns; the main loop never waits for it (R3.3.1). At most one run is in flight; `stop` cancels
  it on interrupt and on close.
- synchronously, as the emergency fold, when a request would pass `emergency_at` of the effective
  window even after committing what is staged (R3.3.5), with a progress notice per span (R3.3.6).

As a compaction `Stage` it commits staged folds at `commit_at` of the effective window (no LLM call,
R3.3.2) and, first in the prompt-too-long chain, drains them (R5.4). A commit is a `collapse_commit`
record: the commit log lives in the transcript, and `projection.project_view` replays it on every
request and after resume (R3.3.3); the UI view still shows every entry.

Invariants:
- Only the compaction round writes the timeline (commit records and receipts, returned as the stage's
  result); the background run only fills the staged queue, so it never lands between a tool call and
  its result.
- A staged fold is committed only if its span is, entry for entry, still what the ctx-agent read.
- Every commit leaves a visible receipt with the turns, the tokens freed and the cached tokens the
  next request writes again (R3.0.1); a failed analysis is reported, never fatal, never staged.
- The breaker (R3.3.9): failed summaries in a row stop the ctx-agent asking the model; the count
  rides on every receipt and `replay` rebuilds it on resume. An emergency fold whose summaries are
  unusable, or that runs with the breaker open, commits mechanical folds instead (R3.4.11).

Mutual exclusion with AutoCompact (R3.3.4): `CollapseConfig.enabled` is the switch. A level that
compacts proactively checks `collapse_active(config)` in its `run` and leaves the work to this level;
its `on_prompt_too_long` still runs, after this level's drain.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from foldline._types import Block, JSONObject
from foldline.compact.ctx_agent import (
    CtxAgent,
    FoldFailure,
    StagedFold,
    TaskSpan,
    cached_rewrite_tokens,
    find_spans,
    fold_savings,
    opens_turn,
    summary_tokens,
)
from foldline.compact.mechanical import MECHANICAL_NOTICE, mechanical_fold, said_before
from foldline.compact.pipeline import CompactionContext, StageResult
from foldline.compact.snip import short_id
from foldline.config import Config
from foldline.events import CompactionEvent, EventBus, NoticeEvent
from foldline.pricing import prices_for
from foldline.projection import project_view
from foldline.providers.base import Provider
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    CollapseCommit,
    SystemEntry,
    Usage,
    api_filter,
    new_uuid,
    now_iso,
)
from foldline.tools.base import Tool, tool_specs

__all__ = ["Collapse", "CollapseStore", "StopReason", "collapse_active"]

StopReason = Literal["interrupt", "close"]
FoldKind = Literal["commit", "emergency", "drain"]


def collapse_active(config: Config) -> bool:
    """Whether Collapse owns proactive compaction, so AutoCompact only answers prompt-too-long (R3.3.4)."""
    return config.collapse.enabled


class _Engine(Protocol):
    """What `Collapse.for_engine` reads from a `QueryEngine`."""

    provider: Provider
    config: Config
    system: str
    tools: Sequence[Tool]
    events: EventBus


@dataclass
class CollapseStore:
    """The staged queue and what the ctx-agent failed at; commits live in the timeline."""

    staged: list[StagedFold] = field(default_factory=list)
    failures: list[FoldFailure] = field(default_factory=list)

    def settled_uuids(self) -> frozenset[str]:
        """Every entry some staged fold covers, or a cut summary's turn does (the ctx-agent does
        not analyse them again: a staged one is done, a cut one would be cut again)."""
        return frozenset(u for fold in self.staged for u in fold.span.uuids) | frozenset(
            u for failure in self.failures if failure.cut for u in failure.span.uuids
        )

    def take(self, records: Sequence[AnyRecord]) -> list[StagedFold]:
        """Empty the queue; return the folds whose spans are unchanged in `records`' view, oldest first."""
        valid = self.valid(records)
        self.staged.clear()
        return valid

    def valid(self, records: Sequence[AnyRecord]) -> list[StagedFold]:
        """The staged folds whose spans are unchanged in `records`' view, oldest first.

        A span is unchanged when the API view from its first to its last entry holds exactly the
        entries the ctx-agent read: nothing snipped, compacted away or folded since.
        """
        view = api_filter(project_view(records))
        index = {e.uuid: i for i, e in enumerate(view)}
        valid: list[tuple[int, StagedFold]] = []
        for fold in self.staged:
            first, last = index.get(fold.span.first_uuid), index.get(fold.span.last_uuid)
            if first is None or last is None or last < first:
                continue
            if frozenset(e.uuid for e in view[first : last + 1]) != fold.span.uuids:
                continue
            valid.append((first, fold))
        return [fold for _, fold in sorted(valid, key=lambda pair: pair[0])]


def _receipt(
    records: Sequence[AnyRecord], text: str, data: JSONObject, events: EventBus | None, *, level: str = "info"
) -> SystemEntry:
    """A visible receipt for what the level did, and the same as an event (R3.0.1).

    Kept in one function so that the shared receipt mechanism of the pipeline can replace it.
    """
    last = next((r for r in reversed(records) if hasattr(r, "parent_uuid")), None)
    entry = SystemEntry(
        uuid=new_uuid(),
        parent_uuid=getattr(last, "uuid", None),
        timestamp=now_iso(),
        session_id=getattr(last, "session_id", ""),
        subtype="collapse",
        content=text,
        level="warning" if level == "warning" else "info",
        data=data,
    )
    if events is not None:
        # What the level did is a compaction receipt; what went wrong stays a warning notice.
        freed = data.get("tokens_freed", 0)
        done = CompactionEvent("collapse", text, freed if isinstance(freed, int) else 0, dict(data))
        events.emit(done if level == "info" else NoticeEvent(text, level))
        events.telemetry("collapse", **data)
    return entry


def _spans_text(spans: Sequence[TaskSpan]) -> str:
    return ", ".join(s.turns() for s in spans)


@dataclass
class Collapse:
    """Level 3: the collapse store, its compaction stage and the ctx-agent's runs.

    Plug it into an engine as a stage (it is one: `name`, `run`, `on_prompt_too_long`), as a tail
    hook (`tail_hook`) and as a stop hook (`stop`):

    ```python
    collapse = Collapse.for_engine(engine)
    engine.stages = [..., collapse, autocompact]
    engine.tail_hooks = [*engine.tail_hooks, collapse.tail_hook]
    engine.stop_hooks = [*engine.stop_hooks, collapse.stop]
    ```
    """

    provider: Provider
    system: str | Sequence[str | Block]
    tools: Sequence[Mapping[str, Any]]
    config: Config
    events: EventBus | None = None
    name: str = "collapse"
    store: CollapseStore = field(default_factory=CollapseStore)
    runs: int = 0
    """ctx-agent runs started (background and emergency)."""
    forks: list[StagedFold | FoldFailure] = field(default_factory=list)
    """Every forked request's outcome, in order (its usage shows the cache it read)."""
    failures: int = 0
    """Span summaries failed in a row (a mechanical fold counts: the model failed); a summary that
    works resets it. Rebuilt from the receipts on resume (`replay`)."""
    stopped: bool = False
    """The breaker: `max_consecutive_failures` reached, the model is not asked again this session."""
    notify: Callable[[SystemEntry], None] | None = None
    """Records a receipt outside a round (the engine's `log.append`): background failures still
    unreported when the session closes, so a `-p --continue` process does not lose them."""
    _unreported: list[FoldFailure] = field(default_factory=list, init=False, repr=False)
    """Background failures the next round records (the background run never writes the timeline)."""
    _snapshot: Callable[[], Sequence[AnyRecord]] | None = field(default=None, init=False, repr=False)
    _closing: bool = field(default=False, init=False, repr=False)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _skip_tail: bool = field(default=False, init=False, repr=False)

    @classmethod
    def for_engine(cls, engine: _Engine) -> Collapse:
        """The level for `engine`: its provider, config, events, and the system prompt and tools its
        requests send, so the ctx-agent's forks share their prefix."""
        return cls(
            engine.provider,
            engine.system,
            tool_specs(list(engine.tools)),
            engine.config,
            engine.events,
        )

    def replay(self, records: Sequence[AnyRecord]) -> None:
        """Rebuild the breaker from a resumed transcript's `collapse` receipts (design.md R3.3.9).

        Its failures are the session's: without this every `-p --continue` process asked again for
        an emergency summary of every earlier turn the model had failed to summarize. Every receipt
        carries the count as it stood; a transcript from before that counts its failed emergencies.
        """
        for record in records:
            data = record.data if isinstance(record, SystemEntry) and record.subtype == "collapse" else None
            if not data:
                continue
            if isinstance(count := data.get("failures"), int):
                self.failures = count
            elif data.get("kind") == "emergency_failed" and isinstance(failed := data.get("failed"), int):
                self.failures += failed
            self.stopped = self.stopped or bool(data.get("stopped"))
        self.stopped = self.stopped or self.failures >= self.config.collapse.max_consecutive_failures

    def _count(self, summarized: int, failed: Sequence[FoldFailure]) -> None:
        """The breaker's count after a run: a summary that worked resets it, each failure adds one.

        A cut summary does not count: its turn is never asked about again anyway (R3.3.1)."""
        self.failures = (0 if summarized else self.failures) + sum(not f.cut for f in failed)
        if self.failures >= self.config.collapse.max_consecutive_failures:
            self.stopped = True

    @property
    def agent(self) -> CtxAgent:
        """The ctx-agent that writes this level's summaries."""
        return CtxAgent(self.provider, self.system, self.tools, self.config)

    @property
    def in_flight(self) -> bool:
        """A ctx-agent run is working now (a UI shows progress while it is, R3.3.6)."""
        return self._lock.locked() or (self._task is not None and not self._task.done())

    # --- the background ctx-agent (R3.3.1, R6.1) ----------------------------------------------------

    def tail_hook(self, engine: Any) -> asyncio.Task[None] | None:
        """Start a background run on `engine.timeline` after a turn (skipped after an interrupt);
        the run is handed back so that the engine's `drain` waits for it."""
        if self._skip_tail:
            self._skip_tail = False
            return None
        return self.start(engine.timeline.snapshot)

    def start(self, snapshot: Callable[[], Sequence[AnyRecord]]) -> asyncio.Task[None] | None:
        """Start one background run (None when Collapse is off or a run is already in flight).

        `snapshot` is read once the run holds the agent, so it sees what an emergency fold committed
        while it waited.
        """
        if not self.config.collapse.enabled or self.in_flight or self.stopped:
            return None
        self._snapshot = snapshot
        task = asyncio.ensure_future(self._background(snapshot))
        self._task = task
        return task

    async def _background(self, snapshot: Callable[[], Sequence[AnyRecord]]) -> None:
        async with self._lock:
            records = tuple(snapshot())
            spans = find_spans(records, self.config, exclude=self.store.settled_uuids())
            if not spans:
                return
            self.runs += 1
            if self.events is not None:
                self.events.telemetry("collapse_agent_start", spans=len(spans))
            shown = spans[: self.config.collapse.max_spans_per_run]
            staged, failed = await self.agent.run(
                records, shown, on_span=self._progress(len(shown), "in the background")
            )
            self._keep(staged, failed)
            if self._closing:  # the session is closing: no round comes to record them
                self._flush()

    def _progress(self, total: int, how: str) -> Callable[[int, TaskSpan], None]:
        """R3.3.6: a progress notice before each span is summarized or recorded."""
        verb = "recording" if self.config.collapse.folds == "record" else "summarizing"

        def report(i: int, span: TaskSpan) -> None:
            if self.events is not None:
                text = f"context collapse: {verb} {span.turns()} {how} ({i + 1}/{total})…"
                self.events.emit(NoticeEvent(text, "progress"))

        return report

    def _keep(self, staged: Sequence[StagedFold], failed: Sequence[FoldFailure]) -> None:
        self.forks.extend([*staged, *failed])
        self.store.staged.extend(staged)
        self.store.failures.extend(failed)
        self._count(len(staged), failed)
        self._unreported.extend(failed)
        self._notify_failed(failed)
        if self.events is None:
            return
        for fold in staged:
            self.events.telemetry(
                "collapse_staged",
                turns=fold.span.turns(),
                tokens=fold.span.tokens,
                cache_read=fold.usage.cache_read_input_tokens,
                cache_write=fold.usage.cache_creation_input_tokens,
            )

    def _notify_failed(self, failed: Sequence[FoldFailure]) -> None:
        if self.events is None:
            return
        for failure in failed:
            text = f"context collapse: could not summarize {failure.span.turns()}: {failure.reason}"
            self.events.emit(NoticeEvent(text, "warning"))
            self.events.telemetry("collapse_failed", turns=failure.span.turns(), reason=failure.reason)

    async def wait(self) -> None:
        """Wait for the run in flight, if any, to finish (tests; normal use never needs to)."""
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait([task])

    async def stop(self, reason: StopReason) -> None:
        """Cancel the run in flight (on interrupt or close); after an interrupt, skip the next tail."""
        if reason == "interrupt":
            self._skip_tail = True
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if reason == "close":
            self._closing = True
            self._flush()

    def _flush(self) -> None:
        """Record unreported background failures now; only at close, when no turn is in progress,
        so the receipt cannot land between a tool call and its result."""
        if self.notify is not None and self._snapshot is not None:
            for entry in self._report_failures(self._snapshot()):
                self.notify(entry)

    # --- the stage (R3.3.2, R3.3.5, R5.4) ------------------------------------------------------------

    async def run(self, ctx: CompactionContext) -> StageResult:
        """Commit staged folds at `commit_at`; at `emergency_at`, fold synchronously first."""
        cfg = ctx.config.collapse
        if not cfg.enabled:
            return StageResult()
        reported = self._report_failures(ctx.records)
        window = ctx.config.effective_window
        commit_line, emergency_line = cfg.commit_at * window, cfg.emergency_at * window
        if ctx.tokens < commit_line and not (
            cfg.commit_when_it_pays and opens_turn(ctx.records) and self._pays(ctx)
        ):
            return StageResult(tuple(reported))
        if ctx.tokens >= emergency_line:
            await self.wait()  # what the run in flight stages may be enough; waiting never cancels it
        records, freed = self._commit([*ctx.records, *reported], self.store.take(ctx.records), "commit")
        records = [*reported, *records]
        if ctx.tokens - freed >= emergency_line:
            more, more_freed = await self._emergency(ctx, records, ctx.tokens - freed, commit_line)
            records, freed = records + more, freed + more_freed
        return StageResult(tuple(records), freed)

    def _report_failures(self, records: Sequence[AnyRecord]) -> list[SystemEntry]:
        """The background run's failures since the last round, as a receipt the transcript keeps, so
        the breaker's count survives a resume (R3.0.1, R3.3.9)."""
        if not self._unreported:
            return []
        failed, self._unreported = self._unreported, []
        text = f"context collapse: {len(failed)} summaries failed ({_spans_text([f.span for f in failed])})"
        if self.stopped:
            text += f"; {self.failures} in a row, so the model is not asked for more this session"
        data: JSONObject = {"kind": "failed", "failed": len(failed), **self._breaker()}
        return [_receipt(records, text, data, None, level="warning")]

    def _breaker(self) -> JSONObject:
        """The breaker's state, carried by every receipt (`replay` reads the last one)."""
        return {"failures": self.failures, "stopped": self.stopped}

    def _pays(self, ctx: CompactionContext) -> bool:
        """R3.3.7: the staged folds save more reads over the session's expected rest than the cache
        rewrite their commit costs."""
        folds = self.store.valid(ctx.records)
        if not folds:
            return False
        saved = sum(fold_savings(fold) for fold in folds)
        rewrite = cached_rewrite_tokens(ctx.records, folds)
        made = sum(1 for r in ctx.records if isinstance(r, AssistantEntry))
        rest = max(made, ctx.config.collapse.expected_rest_min_requests)
        rates = prices_for(ctx.config.model).base
        write = rates.write_5m if ctx.config.cache.turn_ttl == "5m" else rates.write_1h
        return saved * rates.read * rest > rewrite * write

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        """R5.4's first step: commit everything staged, whatever the thresholds say."""
        if not ctx.config.collapse.enabled:
            return StageResult()
        records, freed = self._commit(ctx.records, self.store.take(ctx.records), "drain")
        return StageResult(tuple(records), freed)

    async def _emergency(
        self, ctx: CompactionContext, committed: Sequence[AnyRecord], tokens: int, target: float
    ) -> tuple[list[AnyRecord], int]:
        """The ctx-agent runs now and the request waits for it (R3.3.5), until under `target`.

        The forks are built on the records the main loop last sent, before this round's commits, so
        they read its cache; the spans exclude what was just committed.
        """
        async with self._lock:
            done = self.store.settled_uuids() | self._committed_uuids(ctx.records, committed)
            spans = find_spans(ctx.records, self.config, exclude=done, min_tokens=0)
            if not spans:
                text = "context collapse: the context is nearly full and no finished turn is left to fold"
                entry = _receipt(
                    [*ctx.records, *committed],
                    text,
                    {"kind": "emergency", "folds": 0},
                    self.events,
                    level="warning",
                )
                return [entry], 0
            shown = spans[: self.config.collapse.max_spans_per_run]
            if self.stopped:  # the breaker is open: the model is not asked again (R3.3.9)
                staged: list[StagedFold] = []
                failed: list[FoldFailure] = []
                mechanical = self._mechanical(ctx.records, spans, lambda freed: tokens - freed < target)
            else:
                self.runs += 1
                staged, failed = await self.agent.run(
                    ctx.records,
                    shown,
                    enough=lambda freed: tokens - freed < target,
                    on_span=self._progress(len(shown), "now: the context is nearly full"),
                )
                # No usable summary: the request still waits, so fold the span mechanically (R3.4.11).
                unusable = [f for f in failed if f.unusable]
                failed = [f for f in failed if not f.unusable]
                mechanical = self._mechanical(ctx.records, [f.span for f in unusable], lambda _freed: False)
                self.forks.extend([*staged, *failed])
                self.store.failures.extend(failed)
                self._count(len(staged), [*failed, *unusable])
                self._notify_failed(failed)
        folds = sorted([*staged, *mechanical], key=lambda f: f.span.first_turn)
        records, freed = self._commit(
            [*ctx.records, *committed], folds, "emergency", ctx.records, mechanical=len(mechanical)
        )
        if failed:
            failed_turns = _spans_text([f.span for f in failed])
            text = f"context collapse: {len(failed)} emergency summaries failed ({failed_turns})"
            records.append(
                _receipt(
                    [*ctx.records, *committed, *records],
                    text,
                    {"kind": "emergency_failed", "failed": len(failed), **self._breaker()},
                    self.events,
                    level="warning",
                )
            )
        return records, freed

    def _mechanical(
        self, records: Sequence[AnyRecord], spans: Sequence[TaskSpan], enough: Callable[[int], bool]
    ) -> list[StagedFold]:
        """Mechanical folds of `spans` (no model call, design.md R3.4.11), oldest first, until `enough`."""
        view = api_filter(project_view(records))
        out: list[StagedFold] = []
        freed = 0
        for span in spans:
            if enough(freed):
                break
            entries = [e for e in view if e.uuid in span.uuids]
            fold = StagedFold(span, mechanical_fold(entries, self.config), Usage())
            out.append(fold)
            freed += fold_savings(fold)
        return out

    @staticmethod
    def _committed_uuids(records: Sequence[AnyRecord], commits: Sequence[AnyRecord]) -> frozenset[str]:
        view = api_filter(project_view(records))
        index = {e.uuid: i for i, e in enumerate(view)}
        out: set[str] = set()
        for commit in commits:
            if isinstance(commit, CollapseCommit):
                first, last = index.get(commit.first_uuid), index.get(commit.last_uuid)
                if first is not None and last is not None:
                    out.update(e.uuid for e in view[first : last + 1])
        return frozenset(out)

    def _commit(
        self,
        records: Sequence[AnyRecord],
        folds: Sequence[StagedFold],
        kind: FoldKind,
        cached_from: Sequence[AnyRecord] | None = None,
        *,
        mechanical: int = 0,
    ) -> tuple[list[AnyRecord], int]:
        """Commit records for `folds` plus one receipt; ([], 0) when there is nothing to commit.

        `cached_from` is the record list whose last reply's cache the commit breaks (default `records`).
        """
        if not folds:
            return [], 0
        commits: list[AnyRecord] = []
        freed = 0
        for fold in folds:
            uuid = new_uuid()
            after = summary_tokens(fold.summary)
            commits.append(
                CollapseCommit(
                    uuid=uuid,
                    timestamp=now_iso(),
                    collapse_id=short_id(uuid),
                    first_uuid=fold.span.first_uuid,
                    last_uuid=fold.span.last_uuid,
                    summary=fold.summary,
                    tokens_before=fold.span.tokens,
                    tokens_after=after,
                )
            )
            freed += max(0, fold.span.tokens - after)
        rewrite = cached_rewrite_tokens(cached_from or records, folds)
        label = {"commit": "committed", "emergency": "emergency", "drain": "prompt too long: committed"}[kind]
        spans = _spans_text([f.span for f in folds])
        noun = "fold" if len(folds) == 1 else f"{len(folds)} folds"
        text = f"{label} {noun} of {spans}, freed {freed:,} tokens, rewrites {rewrite:,} cached tokens"
        data: JSONObject = {
            "kind": kind,
            "folds": len(folds),
            "turns": [[f.span.first_turn, f.span.last_turn] for f in folds],
            "tokens_freed": freed,
            "cached_rewrite_tokens": rewrite,
            **self._breaker(),
        }
        if mechanical:
            text += f" ({mechanical} mechanical, not summaries: the model could not summarize)"
            data["mechanical"] = mechanical
            if not said_before(records) and self.events is not None:
                self.events.emit(NoticeEvent(MECHANICAL_NOTICE, "warning"))
        return [*commits, _receipt([*records, *commits], text, data, self.events)], freed
