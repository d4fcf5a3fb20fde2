"""`foldline demo` / `make demo`: a long simulated coding session through every compaction level, offline.

What it runs: the local Messages API server (real uvicorn on a free loopback port) with the
simulated coding model in-process (`SimulatedBackend`), and the real engine with real tools on a
generated repository (`foldline.simulation.simulate`), on a small window (60K) so that a session
of a few dozen turns goes through all five levels: the level-0 budget (the debug profile's
200K-character grep), Snip (the model answers the nudge), Microcompact (cached path: the provider
declares foldline serve's `cache_edits`), Context Collapse and AutoCompact. Each compaction is
printed as it fires (R3.0.1). Then the same session runs with no management on an unlimited
window, and a table sets the two side by side: turns, peak context, tokens sent, cache-read share
and cost at list prices. `--json` prints one JSON object instead; `--html` writes the inspect page
of the managed session.

The demo's settings (window, profile, seed, when Snip is nudged) are chosen so that every level
fires in the default run; a level that did not fire is named in the output, never hidden.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from foldline.config import CollapseConfig, Config, MicrocompactConfig, TranscriptConfig
from foldline.events import CompactionEvent, RetryEvent, UIEvent
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.simulation import SimulatedClock, SimulationReport, simulate

if TYPE_CHECKING:
    from foldline.server.caching import NoveltyCount

__all__ = [
    "DEMO_SETTINGS",
    "DemoResult",
    "DemoSettings",
    "demo_config",
    "demo_header",
    "level_counts",
    "main",
    "run_demo",
    "run_session",
]

UNLIMITED = 100_000_000
LEVELS = ("budget", "snip", "microcompact", "collapse", "autocompact")
# Which receipt or control record (`simulation._count_receipts`) says a level acted.
_LEVEL_RECORDS = {
    "budget": ("receipt:tool_result_budget",),
    "snip": ("snip_boundary",),
    "microcompact": ("receipt:microcompact",),
    "collapse": ("collapse_commit",),
    "autocompact": ("compact_boundary",),
}


@dataclass(frozen=True)
class DemoSettings:
    """The demo session: whose user, which seed, how small a window, when Snip is offered."""

    profile: str = "debug"
    seed: int = 7
    turns: int = 60
    context_window: int = 60_000
    snip_nudge_share: float = 0.2
    """Earlier than the default (0.5): folds commit at a turn's first request as soon as they pay
    (design.md R3.3.7), and a turn is folded as soon as it ends and fills a span, so the context
    seldom stays full long enough for the model to answer a later nudge while something bulky is
    still in view (the 60-turn demo with 10K-token summary folds: 0 snips at 0.25 to 0.35, 3 at
    0.2; with 20K, 0 at 0.4 to 0.6 and 3 at 0.35)."""
    span_target_tokens: int = 10_000
    """Collapse's spans, larger than the default (2K, `CollapseConfig.span_target_tokens`) so the demo
    shows every level: with 2K-token record spans each finished turn is folded so soon that the
    context never holds anything bulky long enough for the model to snip it (0 snips in the 60
    turns at nudge shares 0.1 to 0.3; with 10K-token spans the demo snips twice)."""
    snip_renudge_turns: int = 5
    """Nudge again after 5 prompts without a snip (off by default, `Config.snip_renudge_turns`): a
    nudge that comes while Microcompact has just cleared the bulky results is otherwise the last one
    until a compaction, and Snip would fire in some runs of the demo and not in others."""


DEMO_SETTINGS = DemoSettings()


@dataclass
class DemoResult:
    """The managed session, the unmanaged one, and where the managed transcript was."""

    managed: SimulationReport
    unmanaged: SimulationReport
    transcript: Path
    seconds: float
    settings: DemoSettings = DEMO_SETTINGS
    """What was run (its window names the managed row of the table)."""


def level_counts(report: SimulationReport) -> dict[str, int]:
    """How often each level acted in `report`, by the demo's level names."""
    return {
        level: sum(report.receipts.get(name, 0) for name in names) for level, names in _LEVEL_RECORDS.items()
    }


def demo_header(settings: DemoSettings = DEMO_SETTINGS) -> str:
    """The line the demo opens with: the session, its window and the limit every request is kept
    under (the window less the reply's room and a margin), so the table's numbers have their context."""
    limit = demo_config(settings, Path(), managed=True).blocking_limit
    return (
        f"{settings.turns} turns of the {settings.profile!r} profile (seed {settings.seed}) on a "
        f"{settings.context_window:,}-token window (requests kept under {limit:,} tokens: room for the "
        f"reply and a margin), every level on (Collapse spans: {settings.span_target_tokens:,} tokens, "
        f"{CollapseConfig().span_target_tokens:,} by default)"
    )


def demo_config(settings: DemoSettings, root: Path, *, managed: bool) -> Config:
    """The engine's configuration for the managed session (or the unmanaged one, on an unlimited window)."""
    # No management means nothing cleared, not even the time-based Microcompact of the engine's bare
    # round when a pause lets the cache go cold: no tool is compactable.
    clears = MicrocompactConfig() if managed else MicrocompactConfig(compactable_tools=frozenset())
    return Config(
        microcompact=clears,
        context_window=settings.context_window if managed else UNLIMITED,
        snip_nudge_share=settings.snip_nudge_share,
        snip_renudge_turns=settings.snip_renudge_turns,
        collapse=CollapseConfig(span_target_tokens=settings.span_target_tokens),
        transcript=TranscriptConfig(sessions_dir=root / "sessions", fsync="never"),
    )


async def run_session(
    settings: DemoSettings,
    root: Path,
    *,
    managed: bool,
    on_event: Callable[[UIEvent], None] | None = None,
    tune: Callable[[Config], Config] | None = None,
    novelty: NoveltyCount | None = None,
) -> SimulationReport:
    """One of the demo's two sessions in `root`, the user's pauses on the server's clock too.

    Args:
        settings: Whose session, how long, on which window.
        root: Where its workspace and transcript go.
        managed: Every level on the settings' window; False: none, on an unlimited window.
        on_event: The session's UI events (the demo prints compactions as they fire).
        tune: Changes the engine's configuration (`benchmarks/ttl_choice.py`: the breakpoints'
            TTLs, the working window).
        novelty: Filled with the prompt tokens the server had never been sent before: the
            cache-read share no breakpoint or TTL could beat (`NoveltyCount.read_ceiling`).
    """
    from foldline.server.app import create_app
    from foldline.server.config import ServerConfig
    from foldline.server.simulated import SimulatedBackend
    from foldline.server.testing import run_server

    window = settings.context_window if managed else UNLIMITED
    clock = SimulatedClock()  # the user pauses between prompts; the server's cache TTLs see it too
    app = create_app(
        ServerConfig(context_window=window),
        backend=SimulatedBackend(seed=settings.seed, profile=settings.profile),
        clock=clock,
        novelty=novelty,
    )
    sessions = root / "sessions"
    config = demo_config(settings, root, managed=managed)
    if tune is not None:
        config = tune(config)
    with run_server(app) as url:
        provider = AnthropicProvider(
            base_url=url, api_key="demo", capabilities=FOLDLINE_SERVE_CAPABILITIES if managed else None
        )
        return await simulate(
            provider,
            profile=settings.profile,
            turns=settings.turns,
            seed=settings.seed,
            workspace=root / "workspace",
            sessions_dir=sessions,
            config=config,
            levels=managed,
            on_event=on_event,
            clock=clock,
        )


async def run_demo(
    settings: DemoSettings = DEMO_SETTINGS, *, console: Console | None = None, workdir: Path | None = None
) -> DemoResult:
    """Run the managed session (printing each compaction as it fires), then the unmanaged one."""
    started = time.monotonic()
    with _workdir(workdir) as root:
        if console is not None:
            console.print(f"[dim]{demo_header(settings)}[/dim]")
        managed = await run_session(settings, root / "managed", managed=True, on_event=_printer(console))
        if console is not None:
            console.print("[dim]the same session with no management on an unlimited window[/dim]")
        unmanaged = await run_session(settings, root / "unmanaged", managed=False, on_event=None)
        transcript = root / "managed" / "sessions" / f"simulated-{settings.profile}-{settings.seed}.jsonl"
        result = DemoResult(managed, unmanaged, transcript, time.monotonic() - started, settings)
        return result


@contextmanager
def _workdir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="foldline-demo-") as d:
        yield Path(d)


def _printer(console: Console | None) -> Callable[[UIEvent], None] | None:
    if console is None:
        return None

    def show(event: UIEvent) -> None:
        if isinstance(event, RetryEvent):
            console.print(f"[yellow]retrying in {event.delay:.1f}s: {event.reason}[/yellow]")
        elif isinstance(event, CompactionEvent):  # R3.0.1: never clear silently
            console.print(f"[cyan]  {event.level}: {event.text}[/cyan]", highlight=False)

    return show


def summary(result: DemoResult) -> dict[str, Any]:
    """The demo's numbers as `--json` prints them."""
    m, u = result.managed, result.unmanaged
    return {
        "turns": m.turns_done,
        "turns_planned": m.turns_planned,
        "api_calls": m.api_calls,
        "http_400": m.http_400s,
        "peak_context_tokens": m.peak_request,
        "blocking_limit": m.blocking_limit,
        "over_blocking_limit": m.over_limit(),
        "tokens_sent": m.usage.prompt,
        "cache_read_share": round(m.usage.read_share, 4),
        "cost_usd": round(m.usage.cost(), 4),
        "levels": level_counts(m),
        "facts_planted": m.facts_planted,
        "facts_asked": m.facts_asked,
        "facts_retained": m.facts_retained,
        "errors": m.errors,
        "stopped": m.stopped,
        "unmanaged": {
            "turns": u.turns_done,
            "api_calls": u.api_calls,
            "peak_context_tokens": u.peak_request,
            "tokens_sent": u.usage.prompt,
            "cache_read_share": round(u.usage.read_share, 4),
            "facts_retained": u.facts_retained,
        },
        "cost_unmanaged_usd": round(u.usage.cost(), 4),
        "wall_s": round(result.seconds, 1),
    }


def summary_table(result: DemoResult) -> Table:
    """Turns, peak context, tokens sent, cache-read share and cost: managed beside unmanaged."""
    table = Table(title="the same session, managed and not")
    for column in ("", "turns", "API calls", "peak context", "tokens sent", "cache read", "cost", "facts"):
        table.add_column(column, justify="right")
    for label, r in (
        (f"foldline, {result.settings.context_window:,}-token window", result.managed),
        ("no management, unlimited window", result.unmanaged),
    ):
        usage = r.usage
        table.add_row(
            label,
            f"{r.turns_done}/{r.turns_planned}",
            str(r.api_calls),
            f"{r.peak_request:,}",
            f"{usage.prompt:,}",
            usage.read_share_text(),
            f"${usage.cost():.2f}",
            f"{r.facts_retained}/{r.facts_asked}",
        )
    return table


def main(
    turns: int = DEMO_SETTINGS.turns,
    *,
    html: Path | None = None,
    as_json: bool = False,
    profile: str = DEMO_SETTINGS.profile,
    seed: int = DEMO_SETTINGS.seed,
    context_window: int = DEMO_SETTINGS.context_window,
) -> None:
    """Run the demo and print its table (or, with `as_json`, one JSON object).

    `profile`, `seed` and `context_window` replay another session than the default one: the same
    checks (no 400, nothing over the blocking limit, facts retained) on other shapes of work.
    """
    from foldline._json import dumps

    settings = DemoSettings(profile=profile, seed=seed, turns=turns, context_window=context_window)
    if as_json:
        with _workdir(None) as root:
            result = asyncio.run(run_demo(settings, workdir=root))
            if html is not None:
                _write_html(result.transcript, html)
        sys.stdout.write(dumps(summary(result)).decode() + "\n")
    else:
        console = Console() if sys.stdout.isatty() else Console(width=110)
        console.rule("[bold]foldline demo[/bold]: a long coding session through every compaction level")
        with _workdir(None) as root:
            result = asyncio.run(run_demo(settings, console=console, workdir=root))
            if html is not None:
                _write_html(result.transcript, html)
        console.print(summary_table(result))
        counts = level_counts(result.managed)
        console.print("levels fired: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        silent = [k for k, v in counts.items() if not v]
        if silent:
            console.print(f"[yellow]did not fire in this run: {', '.join(silent)}[/yellow]")
        m = result.managed
        console.print(
            f"HTTP 400: {m.http_400s}; requests over the blocking limit: {m.over_limit()} (AutoCompact's "
            f"reactive path answers those); {result.seconds:.1f}s for both sessions."
        )
        if html is not None:
            console.print(f"inspect page: {html}")


def _write_html(transcript: Path, out: Path) -> None:
    from foldline.inspection import render_html, session_view
    from foldline.sessions import load_session

    out.write_text(render_html(session_view(load_session(transcript))))


if __name__ == "__main__":
    main()
