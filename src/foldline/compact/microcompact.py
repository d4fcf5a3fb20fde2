"""Microcompact, level 2 of compaction (design.md §3.2): clear old tool results, keeping the cache warm.

Only results of the whitelisted tools (`MicrocompactConfig.compactable_tools`, R3.2.1) are ever
cleared, and never the most recent `keep_recent` (5) of them. Two paths:

- Time-based (R3.2.2): the last assistant reply is older than `time_based_after_s` (60 minutes), so
  the server's cache has expired and rewriting bytes costs nothing extra. The old results are
  replaced client-side by the placeholder: a `results_cleared` record the projection applies.
- Cached (R3.2.3): the provider `supports_cache_edits` and the clearable results beyond the most
  recent ones exceed `cached_trigger_tokens` (20,000 estimated tokens). The message bytes stay as
  they are; the next request carries one `cache_edits` block deleting those results by their
  `cache_reference`, which the request assembler injects and pins (R3.2.4).

A provider without cache_edits gets the time-based path only: nothing it already cached is ever
rewritten while the cache is warm (R3.2.5).

Pins recorded before a later snip or fold no longer say where their block goes
(`projection.pins_in_view`); that snip or fold rewrites the request anyway, so the results those
pins deleted are cleared client-side and stay out of the model's context: by this level when the
move came before it, and by `repin`, which the engine runs after the round and after any
prompt-too-long recovery, when a fold or compaction came later.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from foldline._types import Block
from foldline.api.cache import cache_reference_for
from foldline.compact.pipeline import CompactionContext, Receipt, StageResult
from foldline.projection import pins_in_view, project_view, rebuild_state
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    CachePin,
    Entry,
    ResultsCleared,
    UserEntry,
    api_filter,
    new_uuid,
    now_iso,
)
from foldline.tokens import estimate_blocks, estimate_text

__all__ = [
    "ClearableResult",
    "MicrocompactStage",
    "clearable_results",
    "deleted_references",
    "edit_references",
]


@dataclass(frozen=True)
class ClearableResult:
    """One whitelisted tool result still in the API view, not yet cleared client-side."""

    tool_use_id: str
    tool: str
    tokens: int
    """Estimated tokens of its content."""


def deleted_references(pins: Sequence[CachePin]) -> set[str]:
    """Every `cache_reference` a pinned `cache_edits` block deletes."""
    return edit_references(pin.block for pin in pins)


def edit_references(blocks: Iterable[Block]) -> set[str]:
    """Every `cache_reference` these `cache_edits` blocks delete (pinned or still pending)."""
    refs: set[str] = set()
    for block in blocks:
        for edit in block.get("edits") or ():
            if isinstance(edit, dict) and edit.get("type") == "delete":
                refs.add(str(edit.get("cache_reference")))
    return refs


@dataclass(frozen=True)
class _Scan:
    """What both `run` and `repin` read from the records: the view, its uncleared whitelisted
    results, the references live pins delete, and those whose pins a snip, fold or compaction moved."""

    view: list[Entry]
    results: list[ClearableResult]
    deleted: set[str]
    stale: set[str]

    @classmethod
    def of(cls, ctx: CompactionContext) -> _Scan:
        state = rebuild_state(ctx.records)
        view = api_filter(project_view(ctx.records, state))
        cleared = {tool_use_id for tool_use_id, _ in state.cleared}
        tools = ctx.config.microcompact.compactable_tools
        results = [r for r in clearable_results(view, tools) if r.tool_use_id not in cleared]
        deleted = deleted_references(pins_in_view(ctx.records))
        return cls(view, results, deleted, deleted_references(state.pins) - deleted)

    def older(self, keep: int) -> list[ClearableResult]:
        """The results but the most recent `keep`, which are never cleared (R3.2.1)."""
        keep = max(keep, 0)
        return self.results[: len(self.results) - keep] if keep else self.results

    def candidates(self, keep: int) -> list[ClearableResult]:
        """The older results no live pin deletes yet: what a new `cache_edits` block may delete."""
        return [r for r in self.older(keep) if cache_reference_for(r.tool_use_id) not in self.deleted]

    def lost(self) -> list[ClearableResult]:
        """Results whose deleting pins went stale: the next request would carry them in full."""
        return [r for r in self.results if cache_reference_for(r.tool_use_id) in self.stale]


def clearable_results(view: Sequence[Entry], tools: frozenset[str]) -> list[ClearableResult]:
    """Whitelisted tool results of an API view, oldest first."""
    names: dict[str, str] = {}
    out: list[ClearableResult] = []
    for entry in view:
        if isinstance(entry, AssistantEntry):
            for block in entry.message.content:
                if block.get("type") == "tool_use":
                    names[str(block.get("id"))] = str(block.get("name"))
        elif isinstance(entry, UserEntry) and isinstance(entry.message.content, list):
            for block in entry.message.content:
                if block.get("type") != "tool_result":
                    continue
                tool_use_id = str(block.get("tool_use_id"))
                if names.get(tool_use_id) in tools:
                    out.append(ClearableResult(tool_use_id, names[tool_use_id], _tokens(block)))
    return out


def _tokens(block: Block) -> int:
    return estimate_blocks([block])


def _epoch(timestamp: str) -> float | None:
    try:
        return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _last_reply_at(view: Sequence[Entry]) -> float | None:
    for entry in reversed(view):
        if isinstance(entry, AssistantEntry) and not entry.is_api_error_message:
            return _epoch(entry.timestamp)
    return None


@dataclass
class MicrocompactStage:
    """Level 2: old whitelisted tool results cleared, by placeholder when the cache is cold, by
    `cache_edits` while it is warm (providers that support it), never by rewriting warm bytes."""

    name: str = "microcompact"

    async def run(self, ctx: CompactionContext) -> StageResult:
        """Clear what the time-based or the cached path allows; otherwise do nothing."""
        cfg = ctx.config.microcompact
        scan = _Scan.of(ctx)
        view = scan.view
        older, candidates = scan.older(cfg.keep_recent), scan.candidates(cfg.keep_recent)

        last = _last_reply_at(view)
        idle = ctx.now - last if last is not None else 0.0
        if last is not None and idle > cfg.time_based_after_s and older:
            # The cache is cold: every old result becomes the placeholder, deleted ones included.
            freed = sum(r.tokens for r in candidates) - len(candidates) * estimate_text(cfg.placeholder)
            text = (
                f"cleared {len(older)} old tool result{'s' if len(older) != 1 else ''}, {max(freed, 0):,} "
                f"tokens (the prompt cache expired: {idle / 60:.0f} minutes since the last reply)"
            )
            return self._cleared(ctx, older, max(freed, 0), text, "time")

        if lost := scan.lost():
            return self._repinned(ctx, lost)

        total = sum(r.tokens for r in candidates)
        if (
            ctx.capabilities.supports_cache_edits
            and candidates
            and total > ctx.config.scaled(cfg.cached_trigger_tokens)
        ):
            edits = [
                {"type": "delete", "cache_reference": cache_reference_for(r.tool_use_id)} for r in candidates
            ]
            block: Block = {"type": "cache_edits", "edits": edits}
            text = (
                f"cleared {len(candidates)} tool results, {total:,} tokens "
                "(cache_edits: the cached prefix is kept)"
            )
            receipt = Receipt(
                self.name, text, total, {"path": "cached", "results": len(candidates), "tokens": total}
            )
            return StageResult((), total, (block,), (receipt,))
        return StageResult()

    def repin(self, ctx: CompactionContext) -> StageResult:
        """Only the lost-pin half of `run`: for after a later level's fold or compaction in the round.

        A fold committed after this level ran moves the older pins too, and their deletions would
        come back in full in the very next request (bigger than any estimate expects).
        """
        lost = _Scan.of(ctx).lost()
        return self._repinned(ctx, lost) if lost else StageResult()

    def _repinned(self, ctx: CompactionContext, lost: Sequence[ClearableResult]) -> StageResult:
        # A snip or fold moved the positions of older pins; this request is rewritten anyway.
        plural = "s" if len(lost) != 1 else ""
        text = (
            f"kept {len(lost)} tool result{plural} cleared: a snip, fold or compaction moved the "
            "cache_edits that deleted them"
        )
        return self._cleared(ctx, lost, 0, text, "repin")

    def _cleared(
        self, ctx: CompactionContext, results: Sequence[ClearableResult], freed: int, text: str, path: str
    ) -> StageResult:
        placeholder = ctx.config.microcompact.placeholder
        record: AnyRecord = ResultsCleared(
            uuid=new_uuid(),
            timestamp=now_iso(),
            tool_use_ids=tuple(r.tool_use_id for r in results),
            placeholder=placeholder,
        )
        data = {"path": path, "results": len(results), "tokens": freed}
        return StageResult((record,), freed, receipts=(Receipt(self.name, text, freed, data),))

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        """With cache_edits, delete every old whitelisted result now, whatever the trigger says.

        The server leaves deleted spans out of the context it measures, so the retried request is
        shorter while its cached prefix stays. Without cache_edits nothing is rewritten here (the
        cache may still be warm, R3.2.5): the chain moves on to the later levels.
        """
        cfg = ctx.config.microcompact
        if not ctx.capabilities.supports_cache_edits:
            return StageResult()
        candidates = _Scan.of(ctx).candidates(cfg.keep_recent)
        if not candidates:
            return StageResult()
        total = sum(r.tokens for r in candidates)
        edits = [
            {"type": "delete", "cache_reference": cache_reference_for(r.tool_use_id)} for r in candidates
        ]
        text = (
            f"cleared {len(candidates)} tool results, {total:,} tokens, after the prompt was too long "
            "(cache_edits: the cached prefix is kept)"
        )
        data = {"path": "cached", "trigger": "prompt_too_long", "results": len(candidates), "tokens": total}
        receipt = Receipt(self.name, text, total, data)
        return StageResult((), total, ({"type": "cache_edits", "edits": edits},), (receipt,))
