"""Level 4, AutoCompact: the conversation replaced by a summary when the context fills (design.md §3.4).

```
run(ctx) ── tokens < threshold, stopped, or Collapse on ──> nothing
   │
   ├─ thrash? (refilled within 3 rounds, 3 times running) ──> stop, receipt (R3.4.7)
   └─ compact ─┬─ session memory current? ──> boundary + memory + recent tail kept (no API call)
               └─ PreCompact hooks, forked summary request ──┬─ ok ──> boundary + summary + re-attached files
                    (prompt too long: drop oldest rounds,    └─ failed ──> receipt; 3 in a row: breaker
                     at most 3 times)
on_prompt_too_long(ctx, gap) ─> the same compaction, trigger "reactive" (R5.4); no usable summary
                               or the breaker open: a mechanical fold (R3.4.11)
compact(ctx, instructions)   ─> the same compaction, trigger "manual": ignores breaker and thrash stop
```

The summary request is a fork (`ask_forked`): the main request's system prompt, tools, model and
messages with the instruction appended last, so the server reads the whole prefix from cache and
writes only the instruction. The result is a `CompactBoundary` (the API view restarts there), the
project instruction files and recently read files re-attached (R3.4.8), the summary as an
`is_compact_summary` user entry, and entries the boundary keeps verbatim (`preserved_uuids`: the
session-memory path's recent tail, or a full compaction's pending prompt).

Every outcome is said out loud (R3.0.1): `_receipt` builds a `system` entry of subtype
`compaction` with the numbers and the reason, and emits it as an event.

Invariants:
- A failed summary (an API error, still too long after 3 retries, an empty or malformed reply) is
  never committed; 3 failed automatic attempts in a row stop automatic attempts (R3.4.6). A
  reactive compaction whose summary is empty or malformed, or that runs with the breaker open,
  commits a mechanical fold instead, so the turn goes on (`compact.mechanical`, R3.4.11).
- Rounds since a compaction are the replies recorded after its boundary, counted from the records
  live and on resume alike (`replies_since_compaction`, R3.4.7).
- A cut made for a too-long summary request falls between API rounds (`compact.api_rounds`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

from foldline._incremental import GrowthCursor
from foldline._types import Block, JSONObject
from foldline.compact.api_rounds import drop_oldest_rounds, recent_tail_start, shrink_oversized
from foldline.compact.ctx_agent import opens_turn
from foldline.compact.fork import ask_forked, check_fits_alone
from foldline.compact.mechanical import MECHANICAL_NOTICE, mechanical_fold, said_before
from foldline.compact.pipeline import CompactionContext, Stage, StageResult
from foldline.compact.prompts import SUMMARY_SECTIONS, read_summary, summary_prompt
from foldline.compact.session_memory import MEMORY_FILE, SessionMemory
from foldline.config import Config
from foldline.errors import ModelAPIError, OutputRoomError, PromptTooLongAPIError
from foldline.events import CompactionEvent, EventBus, NoticeEvent
from foldline.projection import REPROJECTING, context_count_of, is_fold_summary, project_view
from foldline.providers.base import Provider
from foldline.session_log import SessionLog
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AttachmentEntry,
    CompactBoundary,
    Entry,
    SystemEntry,
    Usage,
    UserEntry,
    UserMessage,
    api_filter,
    new_uuid,
    now_iso,
)
from foldline.tokens import CHARS_PER_TOKEN, estimate_entry, estimate_fixed, estimate_text, padded
from foldline.tools.base import Tool, tool_specs
from foldline.tools.instructions import load_instruction_files

__all__ = [
    "SUMMARY_LEAD",
    "AutoCompactStage",
    "CompactionFailed",
    "SummaryUnusable",
    "install_autocompact",
    "replies_since_compaction",
]

SUMMARY_LEAD = (
    "This session continues an earlier conversation that was compacted to fit the context window. "
    "The summary below stands in for the earlier part; continue the work from where it left off "
    "without asking the user to repeat anything.\n\n"
)
"""Opens the summary message the model sees after a boundary."""

Trigger = Literal["auto", "manual", "reactive"]


class CompactionFailed(Exception):
    """A summary could not be had; the message is the reason the receipt gives."""


class SummaryUnusable(CompactionFailed):
    """The model answered, but not with a summary (empty or malformed, R3.4.9): a reactive
    compaction commits a mechanical fold instead (R3.4.11)."""


@dataclass(frozen=True)
class _Summary:
    text: str
    requests: int
    dropped_rounds: int
    usage: Usage | None
    preserved: tuple[str, ...]
    source: Literal["summary request", "session memory", "mechanical fold"]
    shrunk: int = 0
    """Oversized blocks the summary request saw cut to their heads (R3.4.5)."""


@dataclass
class AutoCompactStage:
    """The AutoCompact level, a `Stage` and a `ManualCompactor` (design.md §3.4).

    Args:
        provider, system, tools: The main conversation's, so the summary fork shares its cache.
        memory: The session-memory file, when session memory is on (R3.4.2).
        workspace: Where instruction files and relative read paths are found (R3.4.8).
        collapse_enabled: With Context Collapse on, only prompt-too-long recovery and manual
            compaction run (R3.3.4).
        events: Receives each receipt as a `NoticeEvent` and a `compaction` telemetry event.
        notify: Records a receipt that is not part of a result (failures, stops): the engine's
            `log.append`. Receipts are also kept in `receipts`.
    """

    provider: Provider
    system: str | Sequence[str | Block]
    tools: Sequence[Mapping[str, Any]]
    memory: SessionMemory | None = None
    workspace: Path | None = None
    collapse_enabled: bool = False
    events: EventBus | None = None
    notify: Callable[[SystemEntry], None] | None = None
    name: str = "autocompact"
    failures: int = 0
    """Consecutive failed compactions (R3.4.6); a success resets it."""
    stopped: str | None = None
    """Why automatic compaction is off (breaker or thrash), None while it is on."""
    requests: int = 0
    """Summary requests sent (retries included)."""
    receipts: list[SystemEntry] = field(default_factory=list)
    _refills: int = field(default=0, init=False)
    _warned: bool = field(default=False, init=False)
    _folds_seen: GrowthCursor[AnyRecord] = field(default_factory=GrowthCursor, init=False, repr=False)
    _folds_tokens: int = field(default=0, init=False)

    def replay(self, records: Sequence[AnyRecord], config: Config) -> None:
        """Rebuild the breaker and the thrash detector from a resumed transcript's receipts.

        Their state is the session's, not the process's: a resumed session (every `-p --continue`
        script) must not re-arm a breaker that tripped, nor forget the failures and quick refills
        that lead to it (R3.4.6, R3.4.7). "Rounds" since a compaction are counted as the replies
        recorded after it (one per model round; a failed request leaves none, so the count errs
        low, toward stopping).
        """
        rounds: int | None = None
        seen: set[str] = set()
        for record in records:
            if isinstance(record, AssistantEntry) and rounds is not None:
                if record.message.id not in seen and not record.is_api_error_message:
                    seen.add(record.message.id)
                    rounds += 1
                continue
            data = record.data if isinstance(record, SystemEntry) and record.subtype == "compaction" else None
            if not data or "level" in data or "outcome" not in data:
                continue  # another level's receipt (they name their level); AutoCompact's do not
            outcome, trigger = data.get("outcome"), data.get("trigger")
            if outcome == "failed" and trigger != "manual":
                self.failures += 1
            elif outcome == "stopped":
                self.stopped = str(data.get("reason") or "stopped")
            elif outcome == "compacted":
                self.failures = self.failures + 1 if data.get("mechanical") else 0
                if trigger == "manual":
                    self.stopped, self._refills = None, 0
                elif trigger == "auto":
                    quick = rounds is not None and rounds <= config.autocompact.thrash_turns
                    self._refills = self._refills + 1 if quick else 0
                rounds, seen = 0, set()

    # --- the Stage interface ------------------------------------------------------------------

    async def run(self, ctx: CompactionContext) -> StageResult:
        """Compact when the context passed the threshold (R3.4.1), unless stopped or Collapse is on."""
        warning, threshold = ctx.config.warning_threshold, ctx.config.autocompact_threshold
        if warning <= ctx.tokens < threshold and not self._warned and self.events is not None:
            self._warned = True  # once per fill: the UI turns yellow, it does not nag
            self.events.emit(
                NoticeEvent(
                    f"context {ctx.tokens:,} tokens, past the warning threshold ({warning:,}); "
                    f"it will be compacted at {threshold:,}",
                    "warning",
                )
            )
        threshold = ctx.config.autocompact_threshold
        due = self._folds_due(ctx) if self.collapse_enabled else ctx.tokens >= threshold
        if not due or self.stopped:
            return StageResult()
        cfg = ctx.config.autocompact
        # Rounds since the last compaction are the replies recorded after it, live as on resume
        # (`replay`): a process counter said one more after a manual or reactive compaction.
        rounds = replies_since_compaction(ctx.records)
        if rounds is not None and rounds <= cfg.thrash_turns:
            self._refills += 1
            if self._refills >= cfg.thrash_repeats:
                return self._stop(
                    ctx,
                    "thrash",
                    f"automatic compaction stopped: the context refilled to the threshold "
                    f"({ctx.config.autocompact_threshold:,} tokens) within {cfg.thrash_turns} rounds of "
                    f"each of the last {cfg.thrash_repeats} compactions. Compacting again would only "
                    "repeat that; shorten what each round adds, or run /compact to compact by hand",
                )
        else:
            self._refills = 0
        return await self._compact(ctx, "auto")

    def _folds_due(self, ctx: CompactionContext) -> bool:
        """R3.3.8: with Collapse on, compact once the folds' summaries in view pass their budget.

        Collapse cannot fold its own summaries, so over a long session they would grow without end;
        this level replaces them, with the rest, by one summary, and they start again from none.
        Which summaries are in view changes only with a record that reprojects the session, so the
        view is projected again only after one (projecting 20K messages every round took 22 ms).
        """
        budget = ctx.config.scaled(ctx.config.collapse.summaries_budget_tokens)
        if ctx.tokens < budget or not opens_turn(ctx.records):
            return False
        appended = self._folds_seen.advance(ctx.records)
        if appended is None or any(isinstance(r, REPROJECTING) for r in appended):
            view = api_filter(project_view(ctx.records))
            self._folds_tokens = sum(estimate_entry(e) for e in view if is_fold_summary(e))
        return self._folds_tokens >= budget

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        """Reactive compaction (R5.4): the same compaction, unless a stop ended automatic ones.

        With the breaker tripped the model is not asked again: a mechanical fold, which costs no
        request, keeps the turn going (R3.4.11). The thrash stop ends reactive compaction too.
        """
        if self.stopped == "circuit_breaker":
            view = api_filter(project_view(ctx.records))
            if view:
                result = self._mechanical(ctx, view, "the circuit breaker is open", 0)
                if result is not None:
                    return result
            return StageResult()
        if self.stopped:
            return StageResult()
        return await self._compact(ctx, "reactive", gap=gap_tokens)

    async def compact(self, ctx: CompactionContext, instructions: str = "") -> StageResult:
        """Manual compaction (`/compact [instructions]`): runs whatever the breaker says (R3.4.6)."""
        return await self._compact(ctx, "manual", instructions)

    # --- one compaction -------------------------------------------------------------------------

    async def _compact(
        self, ctx: CompactionContext, trigger: Trigger, instructions: str = "", *, gap: int | None = None
    ) -> StageResult:
        """One compaction: from session memory when that brings the context low enough (under the
        threshold; for a reactive one, by `gap`, the tokens the retry needs gone), else by a
        summary request."""
        view = api_filter(project_view(ctx.records))
        try:
            if not view:
                raise CompactionFailed("there is nothing to compact")
            summary = None if instructions else self._from_memory(ctx, view)
            if summary is not None:
                result = self._commit(ctx, trigger, view, summary, gap=gap)
                if isinstance(result, StageResult):
                    return result
            await ctx.run_pre_compact_hooks()
            if self.events is not None:  # the turn now waits on a summary: the UI says so (R3.0.1)
                self.events.emit(
                    NoticeEvent(f"Compacting the conversation ({trigger}): writing a summary…", "progress")
                )
            asked = self.requests
            try:
                summary = await self._summarize(ctx, view, instructions)
            except SummaryUnusable as e:
                if trigger != "reactive":
                    raise
                # the turn waits on this compaction: fold mechanically rather than end it (R3.4.11)
                mechanical = self._mechanical(ctx, view, str(e), self.requests - asked)
                if mechanical is None:
                    raise
                return mechanical
            result = self._commit(ctx, trigger, view, summary)
            if isinstance(result, int) and _is_bulk(view, summary.preserved):
                # the kept prompt is the bulk: the summary covers it. A small one is never
                # summarized away (the model would go on with the work and not answer it).
                result = self._commit(ctx, trigger, view, dataclasses.replace(summary, preserved=()))
            if isinstance(result, int):
                raise CompactionFailed(
                    f"the summary would not make the context smaller ({ctx.tokens:,} -> {result:,} "
                    "tokens); nothing was committed"
                )
            return result
        except (CompactionFailed, ModelAPIError) as e:
            return self._failed(ctx, trigger, str(e))

    def _from_memory(self, ctx: CompactionContext, view: list[Entry]) -> _Summary | None:
        """The session-memory summary and the recent tail to keep, when the memory is current."""
        state = self.memory.load() if self.memory is not None else None
        if state is None:
            return None
        index = next((i for i, e in enumerate(view) if e.uuid == state.covered_uuid), None)
        if index is None:
            return None  # the memory covers a conversation this view no longer shows
        cfg = ctx.config.autocompact.memory
        most = min(
            ctx.config.scaled(cfg.keep_max_tokens), int(ctx.config.effective_window * cfg.keep_max_share)
        )
        start = recent_tail_start(
            view,
            index + 1,
            min_tokens=min(ctx.config.scaled(cfg.keep_min_tokens), most),
            max_tokens=most,
            min_text_messages=cfg.keep_min_text_messages,
        )
        if start is None:
            return None
        kept = tuple(e.uuid for e in view[start:])
        return _Summary(state.text, 0, 0, None, kept, "session memory")

    async def _summarize(self, ctx: CompactionContext, view: list[Entry], instructions: str) -> _Summary:
        """The forked summary request, retried with the oldest rounds dropped while too long (R3.4.5)."""
        cfg = ctx.config.autocompact
        records: Sequence[AnyRecord] = ctx.records
        entries, dropped, shrunk = view, 0, 0
        instruction = summary_prompt(instructions)
        # Scaled to the room the fork has beside the system prompt, tools and instruction (R3.0.6),
        # and shared by the last reply's results: no round drop can remove the newest round.
        block_cap = ctx.config.result_cap_chars(
            cfg.summary_block_max_chars,
            estimate_fixed(self.system, self.tools) + padded(estimate_text(instruction)),
        ) // max(1, _last_results(view))
        preserved = _pending_prompt(view, ctx.config.scaled(cfg.keep_prompt_max_tokens))
        for attempt in range(cfg.ptl_max_retries + 1):
            self.requests += 1
            try:
                reply = await ask_forked(
                    self.provider,
                    records,
                    instruction,
                    config=ctx.config,
                    system=self.system,
                    tools=self.tools,
                    max_tokens=ctx.config.summary_tokens,
                    limit=ctx.config.blocking_limit,
                )
            except (PromptTooLongAPIError, OutputRoomError) as e:
                # Too long either way: alone, or with the summary's output reserve beside it.
                gap = e.gap if isinstance(e, PromptTooLongAPIError) else -e.room + e.max_tokens
                if attempt == cfg.ptl_max_retries:
                    raise CompactionFailed(
                        f"the summary request was still too long after {cfg.ptl_max_retries} retries "
                        f"({dropped} oldest rounds dropped, {shrunk} oversized blocks cut): {e.message}"
                    ) from e
                if any(e.uuid in preserved for e in entries):
                    # The pending prompt follows the summary verbatim: the summary need not read it,
                    # and leaving it out loses nothing, where a round dropped is history lost.
                    entries = [e for e in entries if e.uuid not in preserved]
                    await self._check_prompt_fits(ctx, [e for e in view if e.uuid in preserved], entries)
                    records = entries
                    continue
                if not shrunk:  # one huge result first: no round drop can remove the newest round
                    # results to the room; the conversation's own text keeps the scaled 40,000
                    text_cap = ctx.config.scaled(cfg.summary_block_max_chars)
                    entries, shrunk = shrink_oversized(entries, block_cap, text_max_chars=text_cap)
                    if shrunk:
                        records = entries
                        continue
                entries, count = drop_oldest_rounds(entries, gap, cfg.ptl_drop_fraction)
                if count == 0:
                    raise CompactionFailed(f"the summary request is too long: {e.message}") from e
                records, dropped = entries, dropped + count
                continue
            if read_summary(reply.text, SUMMARY_SECTIONS, free=ctx.config.summary_format == "free") is None:
                what = "empty" if not reply.text.strip() else "malformed (not the 9 sections asked for)"
                raise SummaryUnusable(f"the summary was {what}; nothing was committed")
            return _Summary(
                reply.text.strip(), attempt + 1, dropped, reply.usage, preserved, "summary request", shrunk
            )
        raise AssertionError("unreachable: the loop returns or raises")

    async def _check_prompt_fits(
        self, ctx: CompactionContext, prompt: Sequence[AnyRecord], history: Sequence[Entry]
    ) -> None:
        """Raise `CompactionFailed` when no summary of `history` can make room for `prompt`: there is
        no history, or the prompt alone, with the system prompt and tools, is over the limit."""
        if not any(isinstance(e, AssistantEntry) for e in history):
            raise CompactionFailed("there is nothing to compact but the prompt just typed")
        try:
            await check_fits_alone(
                self.provider,
                prompt,
                config=ctx.config,
                system=self.system,
                tools=self.tools,
                limit=ctx.config.blocking_limit,
            )
        except PromptTooLongAPIError as e:
            raise CompactionFailed(
                f"the prompt just typed is too long with the system prompt and tools, whatever is "
                f"compacted ({e.message}): shorten it"
            ) from e

    def _commit(
        self,
        ctx: CompactionContext,
        trigger: Trigger,
        view: list[Entry],
        summary: _Summary,
        *,
        gap: int | None = None,
    ) -> StageResult | int:
        """The records of a successful compaction, or the context it would leave (the engine's count)
        when that is not smaller than now, so it is not committed (a session-memory one: not under
        the threshold, or not by `gap` when reacting to a refusal; a summary request can still free
        more, by keeping less)."""
        last = view[-1]
        boundary = CompactBoundary(
            uuid=new_uuid(),
            timestamp=now_iso(),
            trigger=trigger,
            logical_parent_uuid=last.uuid,
            pre_tokens=ctx.tokens,
            preserved_uuids=summary.preserved,
        )
        preserved = set(summary.preserved)
        # The summaries' own compaction (R3.3.8, at a turn's start) brings back no files: Collapse
        # would have folded the turns that read them within a few turns, and a file put back here
        # stays until the next compaction, read by every request in between.
        files_back = not (self.collapse_enabled and trigger == "auto")
        attachments = self._reattach(ctx.config, view, preserved, last.session_id, files=files_back)
        summary_entry = UserEntry(
            uuid=new_uuid(),
            timestamp=now_iso(),
            session_id=last.session_id,
            is_compact_summary=True,
            message=UserMessage(content=SUMMARY_LEAD + summary.text),
        )
        added: tuple[AnyRecord, ...] = (boundary, *attachments, summary_entry)
        # Judged on the number the receipt and `/context` will show: the engine's own count
        # afterwards, system prompt and tools included. A compaction whose count is not below the
        # count before it is not committed: "1,693 -> 2,379 tokens" must never be the outcome.
        fixed = estimate_fixed(self.system, self.tools)
        post = context_count_of(ctx.records + added, unanchored_base=fixed).total
        from_memory = summary.source == "session memory"
        if (
            post >= ctx.tokens
            or (from_memory and trigger == "auto" and post >= ctx.config.autocompact_threshold)
            or (from_memory and trigger == "reactive" and gap is not None and ctx.tokens - post < gap)
        ):
            return post
        boundary = msgspec.structs.replace(boundary, post_tokens=post)
        mechanical = summary.source == "mechanical fold"
        # a mechanical fold is the summarizer failing: it counts toward the breaker (R3.4.6, R3.4.11)
        self.failures = self.failures + 1 if mechanical else 0
        self._warned = False
        if trigger == "manual":
            self.stopped, self._refills = None, 0
        files = [a for a in attachments if a.attachment_type == "file"]
        data: JSONObject = {
            "outcome": "compacted",
            "trigger": trigger,
            "source": summary.source,
            "pre_tokens": ctx.tokens,
            "post_tokens": post,
            "requests": summary.requests,
            "dropped_rounds": summary.dropped_rounds,
            "shrunk_blocks": summary.shrunk,
            "kept_entries": len(summary.preserved),
            "reattached_files": len(files),
            "cache_read": summary.usage.cache_read_input_tokens if summary.usage else 0,
            "cache_write": summary.usage.cache_creation_input_tokens if summary.usage else 0,
        }
        if mechanical:
            data |= {"mechanical": True, "failures": self.failures}
        how = (
            "from session memory, no API call"
            if summary.source == "session memory"
            else "a mechanical fold, not a summary: the model could not summarize"
            if mechanical
            else f"{summary.requests} summary request(s)"
            + (f", {summary.dropped_rounds} oldest rounds left out" if summary.dropped_rounds else "")
            + (f", {summary.shrunk} oversized blocks cut to their heads" if summary.shrunk else "")
        )
        text = (
            f"compacted the conversation ({trigger}, {how}): {ctx.tokens:,} -> {post:,} tokens; "
            f"kept {len(summary.preserved)} recent entries verbatim, re-attached {len(files)} files"
        )
        receipt = self._receipt(last.session_id, text, "info", data)
        records: tuple[AnyRecord, ...] = (boundary, *attachments, summary_entry, receipt)
        if mechanical:
            records += self._after_mechanical(ctx, last.session_id)
        return StageResult(records, tokens_freed=max(0, ctx.tokens - post))

    def _mechanical(
        self, ctx: CompactionContext, view: list[Entry], reason: str, requests: int
    ) -> StageResult | None:
        """R3.4.11: the conversation folded mechanically (no model call), the pending prompt kept."""
        cfg = ctx.config
        preserved = _pending_prompt(view, cfg.scaled(cfg.autocompact.keep_prompt_max_tokens))
        text = mechanical_fold([e for e in view if e.uuid not in preserved], cfg)
        summary = _Summary(text, requests, 0, None, preserved, "mechanical fold")
        result = self._commit(ctx, "reactive", view, summary)
        if not isinstance(result, StageResult) and preserved:
            result = self._commit(ctx, "reactive", view, dataclasses.replace(summary, preserved=()))
        if not isinstance(result, StageResult):
            return None  # even a mechanical fold would not make the context smaller
        if self.events is not None:
            self.events.telemetry("mechanical_fold", level="autocompact", reason=reason)
        return result

    def _after_mechanical(self, ctx: CompactionContext, session_id: str) -> tuple[SystemEntry, ...]:
        """Say once per session that folds are mechanical now; trip the breaker at its count."""
        out: list[SystemEntry] = []
        if not said_before(ctx.records) and self.events is not None:
            self.events.emit(NoticeEvent(MECHANICAL_NOTICE, "warning"))
        cfg = ctx.config.autocompact
        if self.failures >= cfg.max_consecutive_failures and not self.stopped:
            self.stopped = "circuit_breaker"
            text = (
                f"automatic compaction stopped asking for summaries after {self.failures} failed "
                "attempts in a row (the circuit breaker); a prompt too long is folded mechanically, "
                "and /compact still asks the model"
            )
            data: JSONObject = {"outcome": "stopped", "reason": "circuit_breaker", "tokens": ctx.tokens}
            out.append(self._receipt(session_id, text, "error", data))
        return tuple(out)

    def _reattach(
        self, config: Config, view: list[Entry], preserved: set[str], session_id: str, *, files: bool = True
    ) -> list[AttachmentEntry]:
        """Instruction files and, with `files`, the most recently read files, within their budgets
        (R3.4.8)."""
        out: list[AttachmentEntry] = []
        if self.workspace is not None:
            out += [
                msgspec.structs.replace(a, session_id=session_id)
                for a in load_instruction_files(self.workspace, session_id=session_id)
            ]
        if not files:
            return out
        cfg = config.autocompact
        total = 0
        for path in _recently_read(view, preserved, self.workspace)[: cfg.reattach_files]:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue  # gone or unreadable since: the model can Read it again if it needs it
            limit = min(
                config.scaled(cfg.reattach_tokens_per_file), config.scaled(cfg.reattach_tokens_total) - total
            )
            if limit <= 0:
                break
            if estimate_text(text) > limit:
                text = text[: limit * CHARS_PER_TOKEN] + f"\n[... truncated; Read {path} for the rest]"
            total += estimate_text(text)
            content = f"Contents of {path} (read earlier in this session, as it is now):\n\n{text}"
            out.append(
                AttachmentEntry(
                    uuid=new_uuid(),
                    timestamp=now_iso(),
                    session_id=session_id,
                    attachment_type="file",
                    content=content,
                    path=str(path),
                )
            )
        return out

    # --- failures, stops, receipts -------------------------------------------------------------

    def _failed(self, ctx: CompactionContext, trigger: Trigger, reason: str) -> StageResult:
        cfg = ctx.config.autocompact
        if trigger != "manual":
            self.failures += 1
        text = f"compaction failed ({trigger}): {reason}"
        data: JSONObject = {
            "outcome": "failed",
            "trigger": trigger,
            "reason": reason,
            "failures": self.failures,
        }
        self._announce(ctx, text, "warning", data)
        if trigger != "manual" and self.failures >= cfg.max_consecutive_failures and not self.stopped:
            self._stop(
                ctx,
                "circuit_breaker",
                f"automatic compaction stopped after {self.failures} failed attempts in a row "
                "(the circuit breaker); /compact still works",
            )
        return StageResult()

    def _stop(self, ctx: CompactionContext, why: str, text: str) -> StageResult:
        self.stopped = why
        self._announce(ctx, text, "error", {"outcome": "stopped", "reason": why, "tokens": ctx.tokens})
        return StageResult()

    def _announce(
        self, ctx: CompactionContext, text: str, level: Literal["warning", "error"], data: JSONObject
    ) -> None:
        last = next((r for r in reversed(ctx.records) if isinstance(r, AssistantEntry | UserEntry)), None)
        receipt = self._receipt(last.session_id if last else "", text, level, data)
        if self.notify is not None:
            self.notify(receipt)

    def _receipt(
        self, session_id: str, text: str, level: Literal["info", "warning", "error"], data: JSONObject
    ) -> SystemEntry:
        """The visible receipt of one outcome (R3.0.1): a `compaction` system entry plus events.

        Kept in one place so it can give way to the pipeline's shared receipt helper.
        """
        entry = SystemEntry(
            uuid=new_uuid(),
            timestamp=now_iso(),
            session_id=session_id,
            subtype="compaction",
            content=text,
            level=level,
            data=data,
        )
        self.receipts.append(entry)
        if self.events is not None:
            freed = data.get("tokens_freed", 0)
            done = CompactionEvent("autocompact", text, freed if isinstance(freed, int) else 0, dict(data))
            self.events.emit(done if level == "info" else NoticeEvent(text, level))
            self.events.telemetry("compaction", **data)
        return entry


def replies_since_compaction(records: Sequence[AnyRecord]) -> int | None:
    """The model rounds since the last compaction: replies (distinct message ids) recorded after the
    latest compact boundary; None before any. One count for the live check and `replay`."""
    seen: set[str] = set()
    for record in reversed(records):
        if isinstance(record, CompactBoundary):
            return len(seen)
        if isinstance(record, AssistantEntry) and not record.is_api_error_message:
            seen.add(record.message.id)
    return None


def _last_results(view: list[Entry]) -> int:
    """How many tool results the newest user entry holds (the last reply's, when it made calls)."""
    last = next((e for e in reversed(view) if isinstance(e, UserEntry)), None)
    content = last.message.content if last is not None else None
    return sum(b.get("type") == "tool_result" for b in content) if isinstance(content, list) else 0


def _pending_prompt(view: list[Entry], max_tokens: int) -> tuple[str, ...]:
    """The user's prompt typed after the last reply, when small: kept verbatim after the summary.

    A fold committed at the turn's start can stand where the last reply stood: the prompt is what
    follows the last reply or fold summary, and the summaries are history the summary covers (kept
    with the prompt, they made the compaction not smaller, and the prompt was summarized away)."""
    last_reply = max(
        (i for i, e in enumerate(view) if isinstance(e, AssistantEntry) or is_fold_summary(e)), default=-1
    )
    tail = view[last_reply + 1 :]
    if not tail:
        return ()
    for entry in tail:
        content = entry.message.content if isinstance(entry, UserEntry) else None
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return ()  # results without their call would be orphans: the summary covers them
    if sum(estimate_entry(e) for e in tail) > max_tokens:
        return ()
    return tuple(e.uuid for e in tail if isinstance(e, UserEntry) and not e.is_meta)


def _is_bulk(view: list[Entry], preserved: Sequence[str]) -> bool:
    """Whether the entries `preserved` are at least as large as the rest of `view`."""
    kept = sum(estimate_entry(e) for e in view if e.uuid in preserved)
    return bool(preserved) and kept >= sum(estimate_entry(e) for e in view) - kept


def _recently_read(view: list[Entry], preserved: set[str], workspace: Path | None) -> list[Path]:
    """Files the Read tool read, most recent first, once each; reads the kept tail shows are skipped."""
    seen: dict[Path, None] = {}
    for entry in reversed(view):
        if not isinstance(entry, AssistantEntry) or entry.uuid in preserved:
            continue
        for block in reversed(entry.message.content):
            if block.get("type") != "tool_use" or block.get("name") != "Read":
                continue
            raw = block.get("input", {}).get("file_path") if isinstance(block.get("input"), dict) else None
            if not isinstance(raw, str) or not raw:
                continue
            path = Path(raw)
            if not path.is_absolute():
                if workspace is None:
                    continue
                path = workspace / path
            if path.is_file():
                seen.setdefault(path, None)
    return list(seen)


class _Engine(Protocol):
    """What `install_autocompact` reads from the engine (a `QueryEngine`)."""

    @property
    def provider(self) -> Provider: ...
    @property
    def config(self) -> Config: ...
    @property
    def system(self) -> str: ...
    @property
    def tools(self) -> Sequence[Tool]: ...
    @property
    def workspace(self) -> Path: ...
    @property
    def session_dir(self) -> Path | None: ...
    @property
    def events(self) -> EventBus: ...

    @property
    def log(self) -> SessionLog: ...

    stages: Sequence[Stage]
    tail_hooks: Sequence[Callable[[Any], Any]]


def install_autocompact(
    engine: _Engine, *, collapse_enabled: bool = False, memory_path: Path | None = None
) -> AutoCompactStage:
    """Add AutoCompact (last) to `engine`'s levels, and its session-memory extraction to the tail.

    Args:
        engine: A `QueryEngine`.
        collapse_enabled: Context Collapse is on: AutoCompact runs only as prompt-too-long recovery
            and on `/compact` (R3.3.4).
        memory_path: The session-memory file; default `<session dir>/session-memory.md`. Without
            either (no session directory), session memory is off; with Collapse on it is off unless
            `SessionMemoryConfig.with_collapse`.
    """
    specs = tool_specs(list(engine.tools))
    path = memory_path or (engine.session_dir / MEMORY_FILE if engine.session_dir else None)
    memory = None
    settings = engine.config.autocompact.memory
    if path is not None and settings.enabled and (settings.with_collapse or not collapse_enabled):
        memory = SessionMemory(path, engine.provider, engine.system, specs, engine.config, engine.events)
    stage = AutoCompactStage(
        engine.provider,
        engine.system,
        specs,
        memory=memory,
        workspace=engine.workspace,
        collapse_enabled=collapse_enabled,
        events=engine.events,
        notify=engine.log.append,
    )
    stage.replay(engine.log.timeline.snapshot(), engine.config)  # a resumed session's breaker holds
    engine.stages = [*engine.stages, stage]
    if memory is not None:
        engine.tail_hooks = [*engine.tail_hooks, memory.extract_memories]
    return stage
