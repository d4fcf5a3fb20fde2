"""The compaction round that runs before every API call, and the interface every level implements.

Levels run in the fixed order of design.md §3 (the list is built by `compact.rounds.default_stages`);
each returns the records to append (boundaries, commits, cleared results), the `cache_edits` blocks
for the next request, a `Receipt` per action (the engine makes each a visible `system` entry and an
event, R3.0.1) and the tokens it freed, which are subtracted before the next level checks its
threshold (R3.0.2). A level also gets a say when the API answers "prompt is too long" (R5.4): the recovery
chain asks each level, in order, to free at least the reported gap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, runtime_checkable

from foldline._types import Block, JSONObject
from foldline.config import Config
from foldline.projection import context_tokens_of
from foldline.providers.base import Capabilities
from foldline.timeline import AnyRecord

__all__ = [
    "CompactionContext",
    "ManualCompactor",
    "PreCompactHook",
    "Receipt",
    "RoundResult",
    "Stage",
    "StageResult",
    "recover_prompt_too_long",
    "run_compaction",
    "run_recovery",
    "run_round",
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
class Receipt:
    """One action of a level, told to the user and to hooks (R3.0.1): never clear silently."""

    level: str
    """The stage's `name`."""
    text: str
    """What the user reads: "cleared 14 tool results, 31,200 tokens"."""
    tokens_freed: int = 0
    data: JSONObject = field(default_factory=dict)
    """The numbers behind the text, for telemetry and `foldline show`."""


@dataclass(frozen=True)
class StageResult:
    """What a level did: records to append, edits for the next request, receipts, tokens freed."""

    records: tuple[AnyRecord, ...] = field(default=())
    tokens_freed: int = 0
    cache_edits: tuple[Block, ...] = ()
    """`cache_edits` blocks for the next request (Microcompact's cached path); the request
    assembler injects and pins them (R3.2.4)."""
    receipts: tuple[Receipt, ...] = ()


@dataclass(frozen=True)
class RoundResult:
    """What one compaction round did, every level together, in level order."""

    records: tuple[AnyRecord, ...] = ()
    cache_edits: tuple[Block, ...] = ()
    receipts: tuple[Receipt, ...] = ()
    tokens_freed: int = 0
    seen: tuple[tuple[str, int], ...] = ()
    """(level name, the tokens it saw) for every level, in the order they ran (or were asked)."""


class Stage(Protocol):
    """One compaction level."""

    name: str

    async def run(self, ctx: CompactionContext) -> StageResult:
        """Compact if this level's threshold is crossed; otherwise return an empty result."""
        ...

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        """Free at least `gap_tokens` (unknown: as much as sensible) after a prompt-too-long error."""
        ...


async def run_round(stages: Sequence[Stage], ctx: CompactionContext) -> RoundResult:
    """Run every level in order; each sees the records and tokens its predecessors left (R3.0.2)."""
    records: list[AnyRecord] = []
    edits: list[Block] = []
    receipts: list[Receipt] = []
    seen: list[tuple[str, int]] = []
    freed = 0
    for stage in stages:
        seen.append((stage.name, ctx.tokens))
        result = await stage.run(ctx)
        records.extend(result.records)
        edits.extend(result.cache_edits)
        receipts.extend(result.receipts)
        freed += result.tokens_freed
        if result.records or result.tokens_freed:
            ctx = dataclasses.replace(
                ctx, records=ctx.records + result.records, tokens=max(0, ctx.tokens - result.tokens_freed)
            )
    return RoundResult(tuple(records), tuple(edits), tuple(receipts), freed, tuple(seen))


async def run_compaction(stages: Sequence[Stage], ctx: CompactionContext) -> list[AnyRecord]:
    """`run_round`'s records only, for callers that need nothing else."""
    return list((await run_round(stages, ctx)).records)


async def run_recovery(
    stages: Sequence[Stage], ctx: CompactionContext, gap_tokens: int | None
) -> RoundResult:
    """The R5.4 chain: ask each level in order until the gap is covered; an empty result if none could.

    With a known gap, a level that frees less than it (Microcompact's `cache_edits`, Collapse
    draining its staged folds) passes the rest on to the next (AutoCompact's reactive compaction);
    with an unknown gap the first level that frees anything ends the chain. Edits count: the server
    leaves deleted spans out of the context it measures, so they shorten the retried request.
    `seen` names every level asked, so a retry still refused asks only the ones after them
    (`ContextWindow.recover`).
    """
    records: list[AnyRecord] = []
    edits: list[Block] = []
    receipts: list[Receipt] = []
    asked: list[tuple[str, int]] = []
    total = 0
    for stage in stages:
        asked.append((stage.name, ctx.tokens))
        result = await stage.on_prompt_too_long(ctx, gap_tokens)
        if not result.records and not result.cache_edits:
            continue
        records.extend(result.records)
        edits.extend(result.cache_edits)
        receipts.extend(result.receipts)
        after = ctx.records + result.records
        # A level's own count wins; one that gives none is measured on the records it added.
        freed = result.tokens_freed or max(0, ctx.tokens - context_tokens_of(after))
        total += freed
        ctx = dataclasses.replace(ctx, records=after, tokens=max(0, ctx.tokens - freed))
        if gap_tokens is None or freed >= gap_tokens:
            break
        gap_tokens -= freed
    return RoundResult(tuple(records), tuple(edits), tuple(receipts), total, tuple(asked))


async def recover_prompt_too_long(
    stages: Sequence[Stage], ctx: CompactionContext, gap_tokens: int | None
) -> list[AnyRecord]:
    """`run_recovery`'s records only, for callers that need nothing else."""
    return list((await run_recovery(stages, ctx, gap_tokens)).records)


@runtime_checkable
class ManualCompactor(Protocol):
    """A level that can compact on request (`/compact [instructions]`, `QueryEngine.compact`)."""

    async def compact(self, ctx: CompactionContext, instructions: str = "") -> StageResult:
        """Compact now, whatever the thresholds and the circuit breaker say (R3.4.6)."""
        ...
