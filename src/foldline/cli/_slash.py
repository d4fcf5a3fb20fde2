"""The chat's slash commands: a table of handlers, and what `/context`, `/cost`, `/cache`, `/resume` show.

Each handler takes the running chat and the text after the command and returns False only to leave
the REPL. A handler never raises into the loop: an unknown command or a bad argument prints what to
type instead, and a library error is explained in one line.

`context_breakdown` is pure (records in, categories out), so `/context` works on any session, an
empty one included, without building a request.
"""

from __future__ import annotations

import asyncio
import difflib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from rich.console import Console
from rich.table import Table
from rich.text import Text

from foldline._json import dumps
from foldline._types import JSONObject
from foldline.cachestats import cache_stats
from foldline.cli._errors import explain
from foldline.cli._prompt import escape_controls
from foldline.cli._ui import Renderer
from foldline.cli.sessions import title
from foldline.config import Config
from foldline.containment.checkpoints import Undone
from foldline.errors import FoldlineError, UserError
from foldline.projection import collapse_summary_text, project_view
from foldline.session import Session
from foldline.sessions import SessionInfo, list_sessions
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AttachmentEntry,
    CollapseCommit,
    UserEntry,
    api_filter,
)
from foldline.tokens import estimate_blocks, estimate_text
from foldline.tools.base import tool_specs
from foldline.transcript import list_session_files
from foldline.usage import usage_of

__all__ = [
    "CATEGORIES",
    "COMMANDS",
    "Chat",
    "compact_command",
    "context_breakdown",
    "context_grid",
    "run_slash",
    "workspace_sessions",
]

CATEGORIES = ("system", "tools", "messages", "tool results", "summaries", "free")
"""`/context`'s categories, in the order the grid fills them."""
_COLORS = {
    "system": "magenta",
    "tools": "blue",
    "messages": "cyan",
    "tool results": "yellow",
    "summaries": "green",
    "free": "grey35",
}
_GRID_COLUMNS = 20
_GRID_ROWS = 5


class Chat(Protocol):
    """What a slash command may use and change of the running chat (`cli.chat` implements it)."""

    session: Session
    console: Console
    renderer: Renderer
    """The session's UI events on the console; `/compact` shows its spinner on it."""
    sessions_dir: Path
    base_url: str | None
    """The server the chat talks to (None: the public API)."""

    async def switch(self, path: Path | None, *, model: str | None = None) -> None:
        """Close the current session and open `path` (None: a new one), optionally with another model."""
        ...

    async def run_cancellable(self, work: Awaitable[object]) -> None:
        """Run `work` so Ctrl-C cancels it instead of leaving the chat."""
        ...


# --- /context -------------------------------------------------------------------------------------


def _summary_texts(records: Sequence[AnyRecord]) -> set[str]:
    return {collapse_summary_text(r) for r in records if isinstance(r, CollapseCommit)}


def context_breakdown(
    records: Sequence[AnyRecord],
    system: str,
    tools: Sequence[JSONObject],
    window: int,
    total: int | None = None,
) -> list[tuple[str, int]]:
    """Estimated tokens per `CATEGORIES` entry in what the next request would carry.

    The messages are the API projection (after snips, cleared results, folds and the latest
    compact boundary); compact summaries and collapse folds count as summaries, tool_result blocks
    as tool results, everything else (prompts, answers, tool calls, attachments) as messages.
    "free" is what is left of `window` (never negative). With `total` (the engine's own count, what
    `/context`'s header says) the estimates only split it: the categories sum to exactly `total`.
    """
    counts = dict.fromkeys(CATEGORIES, 0)
    counts["system"] = estimate_text(system)
    counts["tools"] = estimate_text(dumps(list(tools)).decode()) if tools else 0
    folds = _summary_texts(records)
    for entry in api_filter(project_view(records)):
        if isinstance(entry, AttachmentEntry):  # instruction files, files re-attached after /compact
            counts["messages"] += estimate_blocks(entry.content)
            continue
        content = entry.message.content if isinstance(entry, UserEntry | AssistantEntry) else None
        if content is None:
            continue
        folded = isinstance(content, str) and content in folds
        if isinstance(entry, UserEntry) and (entry.is_compact_summary or folded):
            counts["summaries"] += estimate_blocks(content)
        elif isinstance(content, str):
            counts["messages"] += estimate_blocks(content)
        else:
            for block in content:
                kind = "tool results" if block.get("type") == "tool_result" else "messages"
                counts[kind] += estimate_blocks([block])
    if total is not None:
        counts = _split(counts, total)
    counts["free"] = max(0, window - sum(counts.values()))
    return [(name, counts[name]) for name in CATEGORIES]


def _split(estimates: dict[str, int], total: int) -> dict[str, int]:
    """`total` shared out in proportion to `estimates` (largest remainder: the parts sum to `total`)."""
    weight = sum(estimates.values())
    if weight == 0:
        return {**estimates, "messages": total}
    exact = {name: total * tokens / weight for name, tokens in estimates.items() if tokens}
    parts = {name: int(share) for name, share in exact.items()}
    by_remainder = sorted(exact, key=lambda name: parts[name] - exact[name])
    for name in by_remainder[: total - sum(parts.values())]:
        parts[name] += 1
    return {name: parts.get(name, 0) for name in estimates}


def context_grid(breakdown: Sequence[tuple[str, int]], window: int, width: int | None = None) -> Table:
    """The breakdown as a grid of cells (each 1% of the window, colored by category) beside a legend
    of tokens and shares; a category too small for a cell still gets one, so none is invisible.

    On a terminal narrower than `width` needs for both side by side, the legend goes under the grid
    (and the grid is left out where even it does not fit), so no number is ever cut."""
    cells = _GRID_COLUMNS * _GRID_ROWS
    per_cell = max(1, window) / cells
    marks: list[Text] = []
    for name, tokens in breakdown:
        if name == "free":
            continue
        share = round(tokens / per_cell)
        marks += [Text("■ ", style=_COLORS[name])] * (share if share or not tokens else 1)
    marks = marks[:cells]
    marks += [Text("□ ", style=_COLORS["free"])] * (cells - len(marks))
    rows = [Text.assemble(*marks[i : i + _GRID_COLUMNS]) for i in range(0, cells, _GRID_COLUMNS)]
    legend = [
        Text.assemble(
            ("■ " if name != "free" else "□ ", _COLORS[name]),
            (f"{name:<13}", "bold"),
            f"{tokens:>9,} {tokens / max(1, window):>6.1%}",
        )
        for name, tokens in breakdown
    ]
    grid_width = 2 * _GRID_COLUMNS
    legend_width = max(len(line) for line in legend)
    if width is not None and width < grid_width + 3 + legend_width:
        stacked = Table.grid()
        stacked.add_column(no_wrap=True)
        for line in (rows if width >= grid_width else []) + legend:
            stacked.add_row(line)
        return stacked
    grid = Table.grid(padding=(0, 3))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    for i in range(max(len(rows), len(legend))):
        grid.add_row(rows[i] if i < len(rows) else "", legend[i] if i < len(legend) else "")
    return grid


def _context(chat: Chat) -> None:
    engine = chat.session.engine
    records = engine.timeline.snapshot()
    config = engine.config
    # the total is the engine's own count (the last reply's usage plus a padded estimate of what came
    # after, the system prompt and tools included when nothing anchors it), as compaction receipts
    # give it; the grid splits that same total by the categories' estimates, so header and grid agree
    used = engine.window.context().tokens
    tools = tool_specs(list(engine.tools))
    breakdown = context_breakdown(records, engine.system, tools, config.window, total=used)
    chat.console.print(
        Text(
            f"context: ~{used:,} of {config.window:,} tokens ({used / config.window:.0%}); "
            f"warning at {config.warning_threshold:,}, autocompact at {config.autocompact_threshold:,}, "
            f"blocking at {config.blocking_limit:,}",
            style="bold",
        )
    )
    chat.console.print(context_grid(breakdown, config.window, chat.console.width))


# --- /cost and /cache -----------------------------------------------------------------------------


def _cost(chat: Chat) -> None:
    # The totals and their texts are `/cache`'s, `foldline inspect`'s and `foldline simulate`'s.
    totals = usage_of(chat.session.engine.timeline.snapshot())
    chat.console.print(
        Text(
            f"{totals.requests} API calls, {totals.prompt:,} input tokens "
            f"({totals.read_share_text()} from cache), {totals.output:,} output; cost {totals.dollars_text()}"
        )
    )


def _cache(chat: Chat) -> None:
    # The same statistics `foldline cache SESSION` prints, from the live timeline.
    from foldline.cli.inspect import _print_breaks, _stats_table

    stats = cache_stats(chat.session.engine.timeline.snapshot())
    chat.console.print(Text(f"cache reads: {stats.totals.read_share_text()} of input tokens", style="bold"))
    chat.console.print(_stats_table(stats))
    _print_breaks(chat.console, stats)
    if not stats.diagnostics:
        chat.console.print(Text("no provider cache diagnostics in this session", style="dim"))


# --- /resume --------------------------------------------------------------------------------------


def workspace_sessions(sessions_dir: Path, workspace: Path) -> list[SessionInfo]:
    """This workspace's sessions with at least one prompt, newest first."""
    files = list_session_files(sessions_dir, cwd=str(workspace))
    infos = [i for i in list_sessions(files) if i.turns > 0] if files else []
    return sorted(infos, key=lambda i: i.last_activity or "", reverse=True)


def _when(stamp: str | None) -> str:
    if not stamp:
        return "-"
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return stamp[:16]
    return moment.strftime("%Y-%m-%d %H:%M")


def sessions_table(infos: Sequence[SessionInfo]) -> Table:
    """Number, date, turns, first prompt and id of each session (what `/resume` offers)."""
    table = Table(box=None, pad_edge=False)
    for name in ("#", "date", "turns", "first prompt", "id"):
        table.add_column(
            name, justify="right" if name in ("#", "turns") else "left", no_wrap=name != "first prompt"
        )
    for n, info in enumerate(infos, 1):
        table.add_row(str(n), _when(info.last_activity), str(info.turns), Text(title(info)), info.session_id)
    return table


async def _resume(chat: Chat, arg: str) -> None:
    workspace = chat.session.engine.workspace
    infos = workspace_sessions(chat.sessions_dir, workspace)
    if not arg:
        if not infos:
            chat.console.print(Text("no earlier sessions with a prompt in this workspace", style="dim"))
            return
        chat.console.print(sessions_table(infos))
        chat.console.print(Text("/resume N or /resume ID switches to one", style="dim"))
        return
    chosen = _pick(infos, arg)
    if chosen is None:
        chat.console.print(Text(f"no session {arg!r} here; /resume lists them", style="yellow"))
        return
    if chosen.path == chat.session.path:
        chat.console.print(Text("that is the current session", style="dim"))
        return
    await chat.switch(chosen.path)


def _pick(infos: Sequence[SessionInfo], arg: str) -> SessionInfo | None:
    if arg.isdigit() and 1 <= int(arg) <= len(infos):
        return infos[int(arg) - 1]
    exact = [i for i in infos if i.session_id == arg or i.path.stem == arg]
    prefixed = [i for i in infos if i.session_id.startswith(arg)]
    found = exact or (prefixed if len(prefixed) == 1 else [])
    return found[0] if found else None


# --- the table --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One slash command: its usage line and its handler (False: leave the REPL)."""

    usage: str
    help: str
    run: Callable[[Chat, str], Awaitable[bool]]


def _sync(action: Callable[[Chat], None], name: str) -> Callable[[Chat, str], Awaitable[bool]]:
    """A command that only shows something: shown as before, and recorded as a `local_command`
    entry (R1.3), so the transcript has it and the model sees what the user saw."""

    async def run(chat: Chat, arg: str) -> bool:
        chat.console.begin_capture()
        try:
            action(chat)
        finally:
            shown = Text.from_ansi(chat.console.end_capture())
        chat.console.print(shown, end="", soft_wrap=True)
        chat.session.engine.record_local_command(name, arg, shown.plain.rstrip("\n"))
        return True

    return run


async def compact_command(
    session: Session, instructions: str, console: Console, renderer: Renderer | None = None
) -> None:
    """`/compact [instructions]`: the same compaction `QueryEngine.compact` runs; its receipt is shown.

    While it runs, `renderer`'s spinner says so with the seconds elapsed; when it ends, how long it
    took is printed (on a pipe, where there is no spinner, that line is the only clock)."""
    started = time.monotonic()
    if renderer is not None:
        renderer.begin_work("Compacting the conversation (manual)")
    try:
        added = await session.engine.compact(instructions)
    except FoldlineError as e:
        console.print(Text(explain(e), style="red"))
        return
    finally:
        if renderer is not None:
            renderer.end_turn()
    took = f"{time.monotonic() - started:.1f}s"
    if not added:  # the failure receipt was already printed as a notice
        console.print(Text(f"nothing was compacted ({took})", style="yellow"))
    else:
        console.print(Text(f"/compact took {took}", style="dim"))


async def _compact_cmd(chat: Chat, arg: str) -> bool:
    await chat.run_cancellable(compact_command(chat.session, arg, chat.console, chat.renderer))
    return True


async def _rewind_cmd(chat: Chat, arg: str) -> bool:
    if arg and (not arg.isdigit() or int(arg) < 1):
        chat.console.print(Text(f"/rewind takes a number of turns (1 or more), not {arg!r}", style="yellow"))
        return True
    turns = int(arg or 1)
    engine = chat.session.engine
    for done in range(turns):
        try:
            removed = engine.rewind()
        except UserError:
            if done == 0:
                raise  # nothing to rewind at all: explained by run_slash
            chat.console.print(Text(f"only {done} turn(s) could be rewound", style="yellow"))
            break
        chat.console.print(Text(f"rewound a turn: {removed} messages no longer sent to the model"))
        for item in engine.last_rewind:
            _print_undone(chat, item)
    return True


async def _undo_cmd(chat: Chat, arg: str) -> bool:
    undone = chat.session.engine.undo()
    if undone is None:
        chat.console.print(
            Text("nothing to undo: no tool call of this session changed the workspace", style="yellow")
        )
    else:
        _print_undone(chat, undone)
    return True


def _print_undone(chat: Chat, undone: Undone) -> None:
    chat.console.print(Text(escape_controls(undone.line()), style="yellow" if undone.kept else "green"))


async def _clear_cmd(chat: Chat, arg: str) -> bool:
    await chat.switch(None)  # R7.4: a new session, a new cache baseline
    return True


async def _resume_cmd(chat: Chat, arg: str) -> bool:
    await _resume(chat, arg)
    return True


def _served(base_url: str, model: str, timeout: float) -> bool | None:
    """Whether the server says it serves `model` (`GET /v1/models/{id}`): True, False on a 404,
    None when it cannot tell (unreachable, no such endpoint, a key required)."""
    import httpx2

    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        status = httpx2.get(f"{root}/v1/models/{model}", timeout=timeout).status_code
    except httpx2.HTTPError:
        return None
    return True if status == 200 else False if status == 404 else None


async def _model_cmd(chat: Chat, arg: str) -> bool:
    config: Config = chat.session.engine.config
    if not arg:
        chat.console.print(Text(f"model: {config.model} (window {config.window:,}); /model NAME switches"))
        return True
    if chat.base_url:  # refused now, not by the next turn's 404 (unknown: switch and let it say)
        served = await asyncio.to_thread(_served, chat.base_url, arg, config.capability_probe_timeout_s)
        if served is False:
            chat.console.print(
                Text(
                    f"the server at {chat.base_url} does not serve {arg!r}; still on {config.model}",
                    style="red",
                )
            )
            return True
    await chat.switch(chat.session.path, model=arg)
    return True


async def _help_cmd(chat: Chat, arg: str) -> bool:
    table = Table.grid(padding=(0, 2))
    for command in COMMANDS.values():
        table.add_row(Text(command.usage, style="bold"), Text(command.help))
    chat.console.print(table)
    chat.console.print(
        Text("Enter sends; Esc-Enter or a trailing \\ adds a line; Ctrl-C clears or cancels; Ctrl-D leaves.")
    )
    return True


async def _exit_cmd(chat: Chat, arg: str) -> bool:
    return False


COMMANDS: dict[str, Command] = {
    "/compact": Command("/compact [instructions]", "summarize the conversation now", _compact_cmd),
    "/context": Command(
        "/context", "what fills the context window, by category", _sync(_context, "/context")
    ),
    "/cost": Command("/cost", "tokens and dollars so far", _sync(_cost, "/cost")),
    "/cache": Command(
        "/cache", "cache hit share, writes and reads, breaks and their causes", _sync(_cache, "/cache")
    ),
    "/rewind": Command(
        "/rewind [N]",
        "drop the last N turns (1) and put the workspace back as it was before them",
        _rewind_cmd,
    ),
    "/undo": Command("/undo", "undo the last tool call's change to the workspace", _undo_cmd),
    "/clear": Command("/clear", "start a new session", _clear_cmd),
    "/resume": Command("/resume [N|ID]", "list this workspace's sessions, or switch to one", _resume_cmd),
    "/model": Command("/model [name]", "show the model, or switch to another", _model_cmd),
    "/help": Command("/help", "this list", _help_cmd),
    "/exit": Command("/exit", "leave (Ctrl-D too)", _exit_cmd),
}
_ALIASES = {"/quit": "/exit", "/?": "/help"}


async def run_slash(chat: Chat, line: str) -> bool:
    """Run the slash command on `line`; False only when it asks to leave the REPL."""
    name, _, arg = line.strip().partition(" ")
    command = COMMANDS.get(_ALIASES.get(name, name))
    if command is None:
        close = difflib.get_close_matches(name, list(COMMANDS), n=2, cutoff=0.6)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        chat.console.print(Text(f"unknown command {name}{hint}; /help lists them", style="yellow"))
        return True
    started = time.monotonic()
    try:
        return await command.run(chat, arg.strip())
    except FoldlineError as e:
        chat.console.print(Text(explain(e), style="red"))
    except Exception as e:  # a command's bug must not end the session the person is in
        chat.console.print(Text(f"{name} failed after {time.monotonic() - started:.1f}s: {e!r}", style="red"))
    return True
