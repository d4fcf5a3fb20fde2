"""`foldline inspect SESSION` (a session's context, cache and cost over time) and `foldline cache SESSION`.

Thin shells over `foldline.inspection` (the per-call data and the HTML page) and
`foldline.cachestats` (the numbers `/cache` shows). Both read foldline and Claude Code transcripts.

`inspect` always prints a short summary; the HTML page is written only where `--html FILE` says, so
running it never leaves files behind (the summary's last line names the flag). Session text is
printed as `rich.text.Text` with control characters removed, never as markup.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from foldline.cachestats import CacheStats, cache_stats
from foldline.cli import cli, format_option
from foldline.cli.sessions import _plain, resolve_session
from foldline.config import DESIGN_WINDOW, Config
from foldline.errors import FoldlineError
from foldline.inspection import SessionView, render_html, session_view
from foldline.sessions import FormatChoice, LoadedSession, load_session
from foldline.timeline import AssistantEntry

__all__ = ["cache", "inspect", "session_config"]


def _load(session: str, fmt: FormatChoice) -> LoadedSession:
    path = resolve_session(session)
    try:
        return load_session(path, fmt)
    except FoldlineError as exc:
        raise click.ClickException(f"{exc} (check the path, or force the reader with --format)") from exc


def _stats_table(stats: CacheStats) -> Table:
    totals = stats.totals
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    written = f"{totals.cache_write:,}"
    if stats.writes_5m or stats.writes_1h:
        written += f" (5m {stats.writes_5m:,}, 1h {stats.writes_1h:,})"
    rows = [
        ("API calls", f"{totals.requests:,} ({stats.main_calls:,} main chain)"),
        ("input tokens", f"{totals.prompt:,}"),
        ("cache reads", f"{totals.cache_read:,}"),
        ("cache writes", written),
        ("uncached input", f"{totals.input:,}"),
        ("hit share", f"{totals.read_share_text()} of input tokens read from the cache"),
        ("cost (list prices)", totals.dollars_text()),
        (
            "cache breaks",
            f"{len(stats.breaks)}" + ("" if totals.unpriced else f", ${stats.break_cost:.4f} extra"),
        ),
        ("expected drops", f"{stats.expected_drops} (after compaction or cache_edits: not breaks)"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _print_breaks(console: Console, stats: CacheStats) -> None:
    for brk in stats.breaks:
        source = "recorded" if brk.recorded else "from usage"
        console.print(
            _plain(f"  call {brk.call} ({source}, ${brk.cost:.4f}): {brk.detail.describe()}"), soft_wrap=True
        )
    for call, reason in stats.diagnostics:
        console.print(_plain(f"  provider diagnostic, call {call}: {reason}"), soft_wrap=True)


@cli.command()
@click.argument("session")
@format_option
def cache(session: str, fmt: FormatChoice) -> None:
    """Print SESSION's prompt-cache statistics: hit share, writes and reads, breaks with causes and cost."""
    loaded = _load(session, fmt)
    stats = cache_stats(loaded.records)
    console = Console()
    console.print(_plain(f"{loaded.path} ({loaded.format}, session {loaded.session_id})", style="bold"))
    console.print(_stats_table(stats))
    _print_breaks(console, stats)


def session_config(loaded: LoadedSession, context_window: int | None) -> Config:
    """The configuration `foldline chat` would run `loaded` with on `context_window`: its model, and
    the thresholds scaled to a window below design.md's 200K (`reference_window`), as the engine
    scales them; unscaled, an 8K window's warning was -44,808 tokens."""
    models = [
        r.message.model
        for r in loaded.records
        if isinstance(r, AssistantEntry) and r.message.model and not r.message.model.startswith("<")
    ]  # Claude Code's "<synthetic>" replies name no model
    model = models[-1] if models else Config().model
    return Config(model=model, context_window=context_window, reference_window=DESIGN_WINDOW)


def _summary(console: Console, view: SessionView) -> None:
    console.print(_plain(f"{view.path} ({view.format}, session {view.session_id})", style="bold"))
    t = view.thresholds
    console.print(
        Text(
            f"{len(view.calls):,} calls, {view.turns:,} prompts; peak context {view.peak_context:,} tokens "
            f"(warning {t.warning:,}, autocompact {t.autocompact:,}, blocking {t.blocking:,})"
        )
    )
    counts = (
        (view.count("snip"), "snips"),
        (view.count("collapse"), "collapses"),
        (view.count("compact"), "compact boundaries"),
        (view.count("receipt"), "compaction receipts"),
    )
    events = ", ".join(f"{n} {name}" for n, name in counts)
    console.print(Text(f"events: {events}"))
    console.print(_stats_table(view.stats))
    _print_breaks(console, view.stats)


@cli.command()
@click.argument("session")
@format_option
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the self-contained HTML page (charts, events) to this file.",
)
@click.option(
    "--context-window",
    type=click.IntRange(min=1),
    default=None,
    help="The model's context window, which the thresholds derive from (default: the session model's).",
)
def inspect(session: str, fmt: FormatChoice, html_path: Path | None, context_window: int | None) -> None:
    """Chart SESSION's context, cache and cost per call; a summary here, the page with --html FILE."""
    loaded = _load(session, fmt)
    view = session_view(loaded, session_config(loaded, context_window))
    console = Console()
    _summary(console, view)
    if html_path is None:
        console.print(Text("write the HTML page with --html FILE", style="dim"))
        return
    try:
        html_path.write_text(render_html(view), encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"{html_path}: cannot write the page ({exc.strerror or exc})") from exc
    console.print(_plain(f"wrote {html_path}"))
