"""The compaction round that runs before every API call, and the interface every level implements.

Levels run in the fixed order of design.md §3; each returns the records to append (boundaries, commits,
notices) and the tokens it freed, which are subtracted before the next level checks its threshold
(R3.0.2). A level also gets a say when the API answers "prompt is too long" (R5.4): the recovery
chain asks each level, in order, to free at least the reported gap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, runtime_checkable

from foldline.config import Config
from foldline.projection import context_tokens_of
from foldline.providers.base import Capabilities
from foldline.timeline import AnyRecord

__all__ = [
    "CompactionContext",
    "ManualCompactor",
    "PreCompactHook",
    "Stage",
    "StageResult",
    "recover_prompt_too_long",
    "run_compaction",
]

PreCompactHook: TypeAlias = Callable[["CompactionContext"], Awaitable[None]]
"""Runs before a level summarizes the conversation (R3.4.3): save notes, flush memory, log."""


@dataclass(frozen=True)
class CompactionContext:
    """What a level sees: a snapshot of the records and the budget numbers."""

    records: tuple[AnyRecord, ...]
    config: Config
    capabilities: Capabilities
    tokens: int
    """Estimated tokens of the next request, minus what earlier levels already freed."""
    now: float = 0.0
    pre_compact: tuple[PreCompactHook, ...] = ()

    async def run_pre_compact_hooks(self) -> None:
        """Levels that summarize call this first; the hooks run in registration order."""
        for hook in self.pre_compact:
            await hook(self)


@dataclass(frozen=True)
class StageResult:
    """What a level did: records to append and the tokens that frees."""

    records: tuple[AnyRecord, ...] = field(default=())
    tokens_freed: int = 0


class Stage(Protocol):
    """One compaction level."""

    name: str

    async def run(self, ctx: CompactionContext) -> StageResult:
        """Compact if this level's threshold is crossed; otherwise return an empty result."""
        ...

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        """Free at least `gap_tokens` (unknown: as much as sensible) after a prompt-too-long error."""
        ...


async def run_compaction(stages: Sequence[Stage], ctx: CompactionContext) -> list[AnyRecord]:
    """Run every level in order; each sees the records and tokens its predecessors left."""
    added: list[AnyRecord] = []
    for stage in stages:
        result = await stage.run(ctx)
        if result.records or result.tokens_freed:
            added.extend(result.records)
            ctx = dataclasses.replace(
                ctx, records=ctx.records + result.records, tokens=max(0, ctx.tokens - result.tokens_freed)
            )
    return added


async def recover_prompt_too_long(
    stages: Sequence[Stage], ctx: CompactionContext, gap_tokens: int | None
) -> list[AnyRecord]:
    """The R5.4 chain: ask each level in order until the gap is covered; [] if none freed anything.

    With a known gap, a level that frees less than it (Collapse draining its staged folds) passes
    the rest on to the next (AutoCompact's reactive compaction); with an unknown gap the first level
    that frees anything ends the chain.
    """
    added: list[AnyRecord] = []
    for stage in stages:
        result = await stage.on_prompt_too_long(ctx, gap_tokens)
        if not result.records:
            continue
        added.extend(result.records)
        after = ctx.records + result.records
        # A level's own count wins; one that gives none is measured on the records it added.
        freed = result.tokens_freed or max(0, ctx.tokens - context_tokens_of(after))
        ctx = dataclasses.replace(ctx, records=after, tokens=max(0, ctx.tokens - freed))
        if gap_tokens is None or freed >= gap_tokens:
            break
        gap_tokens -= freed
    return added


@runtime_checkable
class ManualCompactor(Protocol):
    """A level that can compact on request (`/compact [instructions]`, `QueryEngine.compact`)."""

    async def compact(self, ctx: CompactionContext, instructions: str = "") -> StageResult:
        """Compact now, whatever the thresholds and the circuit breaker say (R3.4.6)."""
        ...
