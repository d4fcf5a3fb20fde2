"""Every compaction level on one engine: the round's full level list and the levels' background work.

`install_levels` is what a session gets by default (`Session.open`): budget -> Snip -> Microcompact ->
Collapse -> AutoCompact in the fixed order of `compact.rounds`, the ctx-agent and session-memory
extraction on the background tail (R6.1), and the ctx-agent's cancellation on interrupt and close.
With Collapse on, AutoCompact steps aside until a prompt is too long (R3.3.4).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from foldline.compact.autocompact import AutoCompactStage, install_autocompact
from foldline.compact.collapse import Collapse
from foldline.compact.rounds import default_stages

__all__ = ["Levels", "install_levels"]


@dataclass(frozen=True)
class Levels:
    """The levels `install_levels` put on an engine (None: that level is off)."""

    collapse: Collapse | None
    autocompact: AutoCompactStage


def install_levels(engine: Any, *, collapse: bool | None = None) -> Levels:
    """Give `engine` (a `QueryEngine`) the full default round, replacing its level list.

    Args:
        engine: The engine; its `stages`, `tail_hooks` and `stop_hooks` are set.
        collapse: Context Collapse on or off; default `engine.config.collapse.enabled`.
    """
    enabled = engine.config.collapse.enabled if collapse is None else collapse
    folding = Collapse.for_engine(engine) if enabled else None
    if folding is not None:
        folding.replay(engine.log.timeline.snapshot())  # a resumed session's breaker holds
        folding.notify = engine.log.append
    engine.stages = default_stages(collapse=folding)
    autocompact = install_autocompact(engine, collapse_enabled=folding is not None)  # appended last
    if folding is not None:
        tail: Sequence[Callable[[Any], Any]] = engine.tail_hooks
        stop: Sequence[Callable[[str], Awaitable[None]]] = engine.stop_hooks
        engine.tail_hooks = [folding.tail_hook, *tail]
        engine.stop_hooks = [*stop, folding.stop]
    return Levels(folding, autocompact)
