"""`foldline chat`: the agent at a terminal (design.md §10), a thin shell over `QueryEngine`.

Modes: `-p PROMPT` or piped stdin run one turn and print the answer; otherwise a REPL with slash
commands. Sessions live under the configured sessions directory, one per workspace; `--continue`
picks the newest, `--resume ID` a given one. Ctrl-C during a turn interrupts that turn (the
transcript records it), never the session.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from foldline.cli import cli
from foldline.cli._errors import explain
from foldline.cli._prompt import make_asker
from foldline.config import Config, TranscriptConfig
from foldline.errors import FoldlineError
from foldline.events import CompactionEvent, NoticeEvent, RecordEvent, RetryEvent, TextDeltaEvent, UIEvent
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.session import Session
from foldline.sessions import (
    claude_code_projects_dir,
    detect_format,
    find_session,
    import_claude_code_session,
    is_session_id,
)
from foldline.settings import load_settings
from foldline.timeline import AssistantEntry, SystemEntry, UserEntry
from foldline.tokens import estimate_blocks, estimate_text
from foldline.tools import default_tools
from foldline.tools.permissions import PermissionMode
from foldline.transcript import list_session_files, session_path
from foldline.usage import cache_breaks, usage_of

MODES = ("default", "acceptEdits", "plan", "bypassPermissions")
HELP = """/cost     tokens and dollars so far      /cache   cache hit rate and breaks
/context  what fills the context window   /clear   start a new session
/resume   list this workspace's sessions  /compact [instructions] summarize now
/help     this list                       /exit    leave (Ctrl-D too)"""


def _open(workspace: Path, sessions_dir: Path, resume: str | None, latest: bool) -> Path:
    """The transcript to use: an existing one to resume, or a new session's path.

    `--resume` takes a transcript path or a session id (foldline's first, then Claude Code's). A
    Claude Code session is imported into a new foldline transcript (R2.5), never appended to.
    """
    if resume:
        found = find_session(resume, [sessions_dir, claude_code_projects_dir()])
        if found is None:
            where = session_path(sessions_dir, str(workspace), resume) if is_session_id(resume) else resume
            raise click.ClickException(
                f"no session {resume!r} for {workspace} (looked for {where}); "
                "`foldline sessions` lists them, or pass a transcript path"
            )
        return _imported(found, workspace, sessions_dir) if detect_format(found) == "claude-code" else found
    if latest:
        newest = list_session_files(sessions_dir, cwd=str(workspace))
        if not newest:
            raise click.ClickException(f"no earlier session for {workspace} under {sessions_dir}")
        return newest[0]
    return session_path(sessions_dir, str(workspace), str(uuid.uuid4()))


def _imported(source: Path, workspace: Path, sessions_dir: Path) -> Path:
    dest = session_path(sessions_dir, str(workspace), str(uuid.uuid4()))
    loaded = import_claude_code_session(source, dest, cwd=str(workspace))
    click.echo(
        f"Imported Claude Code session {loaded.session_id} ({len(loaded.records)} records) into {dest}; "
        f"{source} is left untouched.",
        err=True,
    )
    for issue in loaded.warnings:
        click.echo(f"warning: {issue} (skipped)", err=True)
    return dest


def _start(path: Path, workspace: Path, options: dict[str, Any], console: Console) -> Session:
    # Each session gets its own provider: closing a session closes its client.
    session = Session.open(
        path,
        provider=AnthropicProvider(
            base_url=options["base_url"],
            api_key=options["api_key"],
            capabilities=FOLDLINE_SERVE_CAPABILITIES if options["cache_edits"] else None,
        ),
        workspace=workspace,
        on_event=_printer(console),
        on_notice=lambda text: console.print(f"warning: {text}", style="yellow", markup=False),
        **{k: v for k, v in options.items() if k not in ("base_url", "api_key", "cache_edits")},
    )
    return session


def _printer(console: Console) -> Callable[[UIEvent], None]:
    def show(event: UIEvent) -> None:
        if isinstance(event, TextDeltaEvent):
            console.print(event.text, end="", markup=False, highlight=False)
        elif isinstance(event, NoticeEvent):
            style = {"warning": "yellow", "error": "red"}.get(event.level, "dim")
            console.print(f"\n{event.text}", style=style, markup=False)
        elif isinstance(event, RetryEvent):
            console.print(f"\n[yellow]retrying in {event.delay:.1f}s: {event.reason}[/yellow]")
        elif isinstance(event, CompactionEvent):  # R3.0.1: never clear silently
            console.print(f"\n[cyan]⎯ {event.level}: {event.text}[/cyan]", highlight=False)
        elif isinstance(event, RecordEvent) and isinstance(event.record, AssistantEntry):
            for block in event.record.message.content:
                if block.get("type") == "tool_use" and not event.record.is_virtual:
                    console.print(f"\n[magenta]⏺ {block['name']}[/magenta] [dim]{block['input']}[/dim]")
        elif isinstance(event, RecordEvent) and isinstance(event.record, UserEntry):
            content = event.record.message.content
            for block in content if isinstance(content, list) else []:
                if block.get("type") == "tool_result":
                    first = str(block.get("content", "")).strip().splitlines()[:1]
                    style = "red" if block.get("is_error") else "dim"
                    console.print(f"  [{style}]⎿ {first[0][:100] if first else '(no output)'}[/{style}]")

    return show


async def _turn(session: Session, prompt: str) -> None:
    """One turn; Ctrl-C cancels it (the engine records the interruption) and returns to the prompt."""
    task = asyncio.ensure_future(session.engine.submit_message(prompt))
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
    except (NotImplementedError, RuntimeError):  # not the main thread (tests), or no signals here
        pass
    try:
        await task
    except asyncio.CancelledError:
        if not task.cancelled():
            raise
        click.echo("\n[interrupted]")
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass
    click.echo()


def _context_table(session: Session) -> Table:
    """/context: estimated tokens by category in the request the next turn would send."""
    engine = session.engine
    assert engine.build_request is not None
    body = engine.build_request(engine.timeline.snapshot(), max_tokens=engine.config.max_output_tokens).body
    counts: dict[str, int] = {"system prompt": estimate_text(str(body.get("system", "")))}
    counts["tool definitions"] = estimate_text(str(body.get("tools", "")))
    for message in body["messages"]:
        for block in message["content"]:
            kind = f"{message['role']} {block.get('type')}"
            counts[kind] = counts.get(kind, 0) + estimate_blocks([block])
    table = Table(title=f"context: ~{sum(counts.values()):,} of {engine.config.window:,} tokens")
    table.add_column("category")
    table.add_column("tokens (est.)", justify="right")
    for kind, tokens in sorted(counts.items(), key=lambda kv: -kv[1]):
        table.add_row(kind, f"{tokens:,}")
    return table


def _slash(command: str, session: Session, console: Console) -> bool:
    """Run a slash command; False means leave the REPL."""
    records = session.engine.timeline.snapshot()
    name = command.split()[0]
    if name in ("/exit", "/quit"):
        return False
    if name == "/cost":
        totals = usage_of(records)
        console.print(
            f"{totals.requests} API calls, {totals.prompt:,} input tokens "
            f"({totals.read_share:.0%} from cache), {totals.output:,} output: ${totals.cost():.4f} "
            f"(without caching ${totals.cost(cached=False):.4f})"
        )
    elif name == "/cache":
        totals = usage_of(records)
        explained = [r.content for r in records if isinstance(r, SystemEntry) and r.subtype == "cache_break"]
        # Sessions recorded elsewhere (imported) have no notices: fall back to the usage alone.
        found = explained or [
            f"call {b.call}: reads fell {b.before:,} -> {b.after:,}" for b in cache_breaks(records)
        ]
        console.print(f"cache reads: {totals.read_share:.0%} of input tokens; {len(found)} break(s)")
        for line in found:
            console.print(f"  {line}", markup=False)
    elif name == "/context":
        console.print(_context_table(session))
    elif name == "/resume":
        for path in list_session_files(session.path.parent.parent, cwd=str(session.engine.workspace)):
            console.print(f"  {path.stem}  [dim]{path}[/dim]")
    else:
        console.print(HELP)
    return True


async def compact_command(session: Session, instructions: str, console: Console) -> None:
    """`/compact [instructions]`: the same compaction `QueryEngine.compact` runs; its receipt is shown."""
    try:
        added = await session.engine.compact(instructions)
    except FoldlineError as e:
        console.print(f"[red]{explain(e)}[/red]")
        return
    if not added:  # the failure receipt was already printed as a notice
        console.print("[yellow]nothing was compacted[/yellow]")


async def _repl(session: Session, console: Console, make: Callable[[], Session]) -> None:
    console.print(f"[dim]session {session.path.stem} ({session.path}); /help for commands[/dim]")
    while True:
        try:
            line = (await asyncio.to_thread(input, "› ")).strip()
        except EOFError:
            return
        if line == "/clear":
            await session.aclose()
            session = make()  # R7.4: a new session, a new cache baseline
            console.print(f"[dim]new session {session.path.stem}[/dim]")
        elif line.split()[0] == "/compact":
            await compact_command(session, line.removeprefix("/compact").strip(), console)
        elif line.startswith("/"):
            if not _slash(line, session, console):
                break
        elif line:
            await _turn(session, line)
    await session.aclose()


@cli.command()
@click.option("-p", "--prompt", help="Run one turn with PROMPT and print the answer (stdin works too).")
@click.option("--continue", "latest", is_flag=True, help="Continue this workspace's newest session.")
@click.option("--resume", metavar="ID", help="Resume a session by id (or transcript path).")
@click.option("--model", help="Model name (default: the configured one).")
@click.option("--base-url", envvar="ANTHROPIC_BASE_URL", help="Another server that speaks the API.")
@click.option(
    "--cache-edits",
    is_flag=True,
    envvar="FOLDLINE_CACHE_EDITS",
    help="The server takes cache_edits (foldline serve does): Microcompact then clears old tool "
    "results without breaking the prompt cache. Off by default: the public API does not.",
)
@click.option("--api-key", envvar="ANTHROPIC_API_KEY", help="API key (default: $ANTHROPIC_API_KEY).")
@click.option(
    "--permission-mode", type=click.Choice(MODES), help="Default: the settings' defaultMode, else default."
)
@click.option("--workspace", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path.cwd)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    default=None,
    help="Stop a turn after this many model rounds (default: no limit).",
)
@click.option("--sessions-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--repl", "force_repl", is_flag=True, hidden=True)
def chat(**options: Any) -> None:
    """Talk to the agent: one turn with -p (or stdin), otherwise a REPL."""
    console = Console(highlight=False)
    workspace = Path(options["workspace"]).resolve()
    sessions_dir = options["sessions_dir"] or TranscriptConfig().sessions_dir
    model = {"model": options["model"]} if options["model"] else {}
    config = Config(max_turns=options["max_turns"], **model)
    try:
        settings = load_settings(workspace)
    except FoldlineError as e:
        raise click.ClickException(explain(e)) from e
    for warning in settings.warnings:
        click.echo(f"warning: {warning}", err=True)
    mode: PermissionMode = options["permission_mode"] or settings.mode or "default"
    interactive = options["force_repl"] or (options["prompt"] is None and sys.stdin.isatty())
    kwargs: dict[str, Any] = {
        "base_url": options["base_url"],
        "cache_edits": options["cache_edits"],
        "api_key": options["api_key"],
        "config": config,
        "tools": default_tools(),
        "rules": settings.rules,
        "permission_mode": mode,
        "ask": make_asker(settings, workspace, mode) if interactive else None,
    }
    try:
        session = _start(
            _open(workspace, sessions_dir, options["resume"], options["latest"]), workspace, kwargs, console
        )
        if interactive:

            def fresh() -> Session:
                return _start(_open(workspace, sessions_dir, None, False), workspace, kwargs, console)

            asyncio.run(_repl(session, console, fresh))
            return
        prompt = options["prompt"] if options["prompt"] is not None else sys.stdin.read()
        if not prompt.strip():
            raise click.ClickException("nothing to send: give -p PROMPT or text on stdin")
        asyncio.run(_one_shot(session, prompt))
    except FoldlineError as e:
        raise click.ClickException(explain(e)) from e


async def _one_shot(session: Session, prompt: str) -> None:
    try:
        await _turn(session, prompt)
    finally:
        await session.aclose()
