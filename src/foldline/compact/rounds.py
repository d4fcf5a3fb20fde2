"""The compaction round's default level list, in the fixed order of design.md §3.

budget -> Snip -> Microcompact -> Collapse -> AutoCompact. Every engine runs this list before every
API call unless it is given another. Collapse and AutoCompact are separate `Stage`s passed in by
whoever builds them; their slots are fixed here so the order cannot drift.
"""

from __future__ import annotations

from dataclasses import dataclass

from foldline.compact.microcompact import MicrocompactStage
from foldline.compact.pipeline import CompactionContext, Stage, StageResult
from foldline.compact.snipping import SnipStage

__all__ = ["LEVEL_ORDER", "BudgetStage", "default_stages"]

LEVEL_ORDER: tuple[str, ...] = ("budget", "snip", "microcompact", "collapse", "autocompact")
"""The level names, in the order every round runs them (R3.0)."""


@dataclass
class BudgetStage:
    """Level 0's place in the round. The tool-result budget (`compact.budget`) acts when a result is
    first recorded, with its own receipt, so nothing already sent is rewritten; in the round it has
    nothing left to do and frees nothing."""

    name: str = "budget"

    async def run(self, ctx: CompactionContext) -> StageResult:
        """Nothing: oversized results were moved to files when they were recorded."""
        return StageResult()

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        """Nothing: results already sent are never rewritten."""
        return StageResult()


def default_stages(*, collapse: Stage | None = None, autocompact: Stage | None = None) -> list[Stage]:
    """The levels in their fixed order; a missing Collapse or AutoCompact leaves its slot empty.

    The levels read the `Config` and provider `Capabilities` from each round's `CompactionContext`,
    so one list serves any configuration.
    """
    stages: list[Stage] = [BudgetStage(), SnipStage(), MicrocompactStage()]
    stages += [s for s in (collapse, autocompact) if s is not None]
    return stages
