"""`ContextWindow`: the context arithmetic of one session, in one place (R3.0, R3.0.2, R3.4.1, R5.4).

Owns what the engine needs to know about the size of the next request and what it does about it:
the estimate (anchored on the last usage, minus what pending `cache_edits` will delete), the exact
count asked for when the estimate is too close to the blocking limit to trust, the `cache_edits`
waiting for the next request, re-pinning after a fold, the compaction round before every call, the
prompt-too-long recovery chain, `/compact`, refusing a prompt that can never fit, and `/rewind`.
The engine calls `round` once per model call, `take_edits` when it builds the request and
`refuse_over_limit` before it sends it; it keeps the loop and its decisions.

Every record goes through the session's `SessionLog`; a receipt becomes a visible `compaction`
system entry, an event and a telemetry event (R3.0.4).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from foldline._types import Block
from foldline.api.cache import cache_reference_for
from foldline.api.params import RequestPlan
from foldline.compact.ctx_agent import is_typed_prompt
from foldline.compact.microcompact import MicrocompactStage, edit_references
from foldline.compact.pipeline import (
    CompactionContext,
    ManualCompactor,
    PreCompactHook,
    Receipt,
    RoundResult,
    Stage,
    run_recovery,
    run_round,
)
from foldline.config import Config
from foldline.errors import ModelHTTPError, PromptTooLongAPIError, PromptTooLongError, UserError
from foldline.events import CompactionEvent
from foldline.projection import context_count_of, project_view
from foldline.providers.base import Provider, count_tokens, too_long_before_sending
from foldline.session_log import SessionLog
from foldline.timeline import (
    AnyRecord,
    SnipBoundary,
    SystemEntry,
    UserEntry,
    api_filter,
    new_uuid,
    now_iso,
)
from foldline.tokens import estimate_blocks, padded

__all__ = ["ContextWindow", "deleting", "merge_edits"]


def merge_edits(pending: Sequence[Block], new: Sequence[Block]) -> tuple[Block, ...]:
    """`pending` then `new`, without deletes already pending: a recovery's edits wait for the next
    request, whose round may ask for the same ones again."""
    seen = {e.get("cache_reference") for block in pending for e in block.get("edits") or ()}
    out = list(pending)
    for block in new:
        edits = [e for e in block.get("edits") or () if e.get("cache_reference") not in seen]
        seen.update(e.get("cache_reference") for e in edits)
        if edits:
            out.append(block | {"edits": edits})
    return tuple(out)


def deleting(records: Sequence[AnyRecord], edits: Sequence[Block]) -> int:
    """Padded estimate of the tool results in the next request that `edits` delete."""
    refs = edit_references(edits)
    if not refs:
        return 0
    return padded(
        sum(
            estimate_blocks([block])
            for entry in api_filter(project_view(records))
            if isinstance(entry, UserEntry) and not isinstance(entry.message.content, str)
            for block in entry.message.content
            if block.get("type") == "tool_result"
            and cache_reference_for(str(block.get("tool_use_id"))) in refs
        )
    )


@dataclass
class ContextWindow:
    """The next request's size and the compaction that keeps it under the blocking limit.

    `stages` and `pre_compact` are read through callables because the levels are installed on the
    engine after it is built (`install_levels`).
    """

    config: Config
    provider: Provider
    log: SessionLog
    stages: Callable[[], Sequence[Stage]]
    pre_compact: Callable[[], Sequence[PreCompactHook]]
    clock: Callable[[], float]
    fixed_tokens: int
    """Estimate of the system prompt and tools: what a count needs when no usage anchors it."""
    on_change: Callable[[], None]
    """Called when compaction changed the request: a cache drop after it is expected (R7.4)."""
    _edits: tuple[Block, ...] = field(default=(), init=False)
    """`cache_edits` blocks the last round asked the next request to carry (Microcompact)."""
    _count_exactly: bool = field(default=False, init=False)
    """The last estimate was too close to the blocking limit to trust (see `refuse_over_limit`)."""
    _asked: set[str] = field(default_factory=set, init=False)
    """Levels the R5.4 chain asked since the last reply: a retry still refused asks the rest."""
    _acted: bool = field(default=False, init=False)
    """A level of the chain acted since the last reply (what a final refusal says)."""

    # --- the round before every call ---------------------------------------------------------------

    async def round(self) -> None:
        """The compaction round before every API call (R0.1), then the blocking limit (R3.4.1).

        Raises:
            PromptTooLongError: still over the blocking limit after every level had its say.
        """
        result = await run_round(self.stages(), self.context())
        self._take(result)
        if result.records or result.cache_edits:
            self.on_change()
        self._repin()
        limit = self.config.blocking_limit
        tokens = self.estimate()
        if tokens > limit:
            await self.recover(None, gap=tokens - limit)
            self._repin()
            tokens = self.estimate()
        # A level that freed less than it estimated leaves the rest to the levels after it (R5.4).
        while tokens > limit and await self._chain(tokens - limit) is not None:
            self._repin()
            tokens = self.estimate()
        if tokens > limit:  # nothing is ever sent over the blocking limit
            raise PromptTooLongError(
                f"the conversation is still about {tokens:,} tokens after compaction, "
                f"{tokens - limit:,} over the blocking limit ({limit:,}): run /compact, "
                "or /rewind to drop the last turn"
            )

    def refuse_prompt(self, text: str) -> None:
        """Refuse, before it is recorded, a prompt no request could ever hold (R5.4).

        Compaction shrinks history, never the prompt being sent: a prompt that cannot fit beside the
        system prompt and tools would be saved, fail, and fail every later turn until `/clear`.

        Raises:
            PromptTooLongError: the prompt alone is over the blocking limit, even counted low.
        """
        limit = self.config.blocking_limit
        least = math.ceil(len(text) / self.config.autocompact.prompt_max_chars_per_token)
        if self.fixed_tokens + least > limit:
            raise PromptTooLongError(
                f"this prompt is {len(text):,} characters, at least {least:,} tokens; with the system "
                f"prompt and tools (about {self.fixed_tokens:,} tokens) that is over the blocking limit "
                f"({limit:,} tokens: the {self.config.window:,}-token window less the output reserve and "
                "margin), so no compaction could make it fit. It was not sent or saved: send a shorter "
                "prompt, or save the text to a file and ask for it to be read in parts"
            )

    def take_edits(self) -> tuple[Block, ...]:
        """The pending `cache_edits` for the request being built; they are its to pin now."""
        edits, self._edits = self._edits, ()
        return edits

    async def refuse_over_limit(self, plan: RequestPlan) -> PromptTooLongAPIError | None:
        """R3.4.1 exactly: when the estimate was too close to call, count the request before sending.

        The estimate pads by 4/3, which dense logs and numbers can still beat; a request sent over the
        blocking limit is one the API may refuse with no room left to compact. The count is free and
        asked only near the limit; a provider that cannot count leaves the estimate's verdict.
        """
        if not self._count_exactly:
            return None
        exact = await count_tokens(self.provider, plan.body, plan.betas)
        limit = self.config.blocking_limit
        self.log.events.telemetry("exact_count", tokens=exact, limit=limit)
        if exact is None or exact <= limit:
            return None
        return too_long_before_sending(self.config.model, exact, limit)

    # --- the numbers ---------------------------------------------------------------------------------

    def context(self) -> CompactionContext:
        """What a level sees now: a snapshot, the budget numbers, the clock and the PreCompact hooks."""
        records = self.log.timeline.snapshot()
        return CompactionContext(
            records,
            self.config,
            self.provider.capabilities,
            context_count_of(records, unanchored_base=self.fixed_tokens).total,
            self.clock(),
            tuple(self.pre_compact()),
        )

    def estimate(self) -> int:
        """The next request's estimated tokens; notes whether it is too close to the limit to trust.

        An estimate made from the records misses only what the pending cache_edits will delete
        (R3.0.2), and only results still in the request: a compaction after the deletion was asked
        for may have removed them already, and they must not be subtracted twice.
        """
        records = self.log.timeline.snapshot()
        count = context_count_of(records, unanchored_base=self.fixed_tokens)
        freed = deleting(records, self._edits)
        settings = self.config.autocompact
        worst = count.pessimistic(settings.estimate_error_factor) - freed / settings.freed_error_factor
        self._count_exactly = worst > self.config.blocking_limit
        return max(0, count.total - freed)

    # --- recovery and /compact -------------------------------------------------------------------------

    def settle(self) -> None:
        """A reply came: the next prompt-too-long starts the R5.4 chain from its first level again."""
        self._asked.clear()
        self._acted = False

    async def recover(self, error: ModelHTTPError | None, gap: int | None) -> RoundResult:
        """R5.4: ask the levels (drain collapse, reactive compact); else tell the user to compact.

        Since the last reply each level is asked once: a retry still refused goes on down the chain
        from the first level not yet asked, so a drain that freed too little never ends the turn
        before the reactive compaction has run.

        Raises:
            PromptTooLongError: no level left to ask could free anything.
        """
        result = await self._chain(gap)
        if result is None:
            limit = self.config.blocking_limit
            over = f"the conversation is {gap or 0:,} tokens over the blocking limit ({limit:,})"
            detail = error.message if error else over
            why = (
                "still too long after compacting automatically"
                if self._acted
                else "nothing more could be compacted automatically"
            )
            raise PromptTooLongError(f"{detail}; {why}: run /compact, or /rewind to drop the last turn")
        return result

    async def _chain(self, gap: int | None) -> RoundResult | None:
        """The levels not yet asked since the last reply, in order; None when none of them acted."""
        stages = [s for s in self.stages() if s.name not in self._asked]
        result = await run_recovery(stages, self.context(), gap)
        self._asked.update(name for name, _ in result.seen)
        if not result.records and not result.cache_edits:
            return None
        self._acted = True
        self._take(result)
        self.on_change()
        return result

    async def compact(self, instructions: str = "") -> list[AnyRecord]:
        """Compact now (`/compact [instructions]`), through the installed level's own code path.

        Returns the records the compaction appended (empty when it failed; its receipt says why).

        Raises:
            UserError: no level that compacts on request is installed.
        """
        compactor = next((s for s in self.stages() if isinstance(s, ManualCompactor)), None)
        if compactor is None:
            raise UserError("no compaction level is installed on this engine")
        result = await compactor.compact(self.context(), instructions)
        for record in result.records:
            self.log.append(record)
        if result.records:
            self.on_change()  # R7.4
        self.log.sync()
        return list(result.records)

    def rewind(self) -> int:
        """Drop the last user turn from what the model sees; returns the messages removed.

        The way out for a session stuck over the limit by its last turn (repeat it to drop more).
        Like every change it is appended, never edited: a `snip_boundary` removes the turn's messages
        from the API view, and the transcript keeps them (R1.2, R3.1.3).

        Raises:
            UserError: there is no user turn to drop.
        """
        view = api_filter(project_view(self.log.timeline.snapshot()))
        start = next((i for i in range(len(view) - 1, -1, -1) if is_typed_prompt(view[i])), None)
        if start is None:
            raise UserError("there is no turn to rewind")
        removed = tuple(e.uuid for e in view[start:])
        self.log.append(SnipBoundary(uuid=new_uuid(), timestamp=now_iso(self.clock()), removed_uuids=removed))
        text = f"rewound the last turn: {len(removed)} message(s) no longer sent to the model"
        self.log.append(
            self.log.entry(SystemEntry, subtype="rewind", content=text, data={"removed": len(removed)})
        )
        self.on_change()  # a smaller request: the cache drop that follows is expected (R7.4)
        self.log.sync()
        return len(removed)

    # --- plumbing ----------------------------------------------------------------------------------------

    def _take(self, result: RoundResult) -> None:
        """Append a round's records and receipts; its edits wait for the next request."""
        for record in result.records:
            self.log.append(record)
        for receipt in result.receipts:
            self.receipt(receipt)
        self._edits = merge_edits(self._edits, result.cache_edits)

    def _repin(self) -> None:
        """Results deleted by pins that a later fold or compaction moved are cleared client-side now,
        so they do not come back in full in the next request (`MicrocompactStage.repin`)."""
        for stage in self.stages():
            if isinstance(stage, MicrocompactStage):
                result = stage.repin(self.context())
                for record in result.records:
                    self.log.append(record)
                for receipt in result.receipts:
                    self.receipt(receipt)

    def receipt(self, receipt: Receipt) -> None:
        """R3.0.1: a level's action as a visible `system` entry, a UI event and a telemetry event."""
        data = {"level": receipt.level, "tokens_freed": receipt.tokens_freed, **receipt.data}
        self.log.append(self.log.entry(SystemEntry, subtype="compaction", content=receipt.text, data=data))
        self.log.events.emit(
            CompactionEvent(receipt.level, receipt.text, receipt.tokens_freed, dict(receipt.data))
        )
        self.log.events.telemetry("compaction", text=receipt.text, **data)
