"""`foldline chat`: the agent at a terminal (design.md §10), a thin shell over `QueryEngine`.

Modes: `-p PROMPT` or piped stdin run one turn and print the answer (`--output-format json` or
`stream-json` for scripts); otherwise a REPL with slash commands (`_slash.py`), a line editor
(`_input.py`) and rich rendering (`_ui.py`). Sessions live under the configured sessions directory,
one per workspace; `--continue` picks the newest, `--resume ID` a given one, and both start with a
recap of where the session stopped. Ctrl-C during a turn interrupts that turn (the transcript
records it), never the session; at an empty prompt it clears the line, and twice in a row leaves.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from foldline.cli import cli
from foldline.cli._errors import explain
from foldline.cli._input import (
    CLEARED,
    LineReader,
    answer_reader,
    plain_reader,
    terminal_reader,
    use_terminal,
)
from foldline.cli._jsonout import event_object, json_line, result_object
from foldline.cli._prompt import make_asker
from foldline.cli._slash import compact_command, run_slash
from foldline.cli._ui import Renderer, recap, status_line
from foldline.config import DESIGN_WINDOW, Config, TranscriptConfig
from foldline.engine import TurnResult
from foldline.errors import FoldlineError
from foldline.events import NoticeEvent, UIEvent
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.providers.limits import server_limits
from foldline.session import Session
from foldline.sessions import (
    claude_code_projects_dir,
    detect_format,
    find_session,
    import_claude_code_session,
    is_session_id,
)
from foldline.settings import load_settings
from foldline.tools import default_tools
from foldline.tools.permissions import PermissionMode
from foldline.transcript import list_session_files, session_path

__all__ = ["chat", "compact_command", "with_limits"]

MODES = ("default", "acceptEdits", "plan", "bypassPermissions")


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


def with_limits(
    config: Config,
    base_url: str | None,
    api_key: str | None,
    *,
    context_window: int | None,
    max_output: int | None,
) -> Config:
    """`config` with the model's window and output limit: the flags first; for a model Claude's table
    does not know, what the server at `base_url` reports (`providers.limits`); else as it was."""
    known = any(config.model.startswith(prefix) for prefix, _ in config.model_limits)
    if (context_window is None or max_output is None) and not known and base_url:
        served = server_limits(base_url, config.model, api_key=api_key)
        if served is not None:
            context_window = context_window or served.context_window
            max_output = max_output or served.max_output
    return replace(
        config, context_window=context_window, model_max_output=max_output, reference_window=DESIGN_WINDOW
    )


def _start(
    path: Path,
    workspace: Path,
    options: dict[str, Any],
    on_event: Callable[[UIEvent], None],
    on_notice: Callable[[str], None],
) -> Session:
    # Each session gets its own provider: closing a session closes its client.
    return Session.open(
        path,
        provider=AnthropicProvider(
            base_url=options["base_url"],
            api_key=options["api_key"],
            capabilities=FOLDLINE_SERVE_CAPABILITIES if options["cache_edits"] else None,
        ),
        workspace=workspace,
        on_event=on_event,
        on_notice=on_notice,
        **{k: v for k, v in options.items() if k not in ("base_url", "api_key", "cache_edits")},
    )


@contextmanager
def _sigint_cancels(task: asyncio.Future[Any]) -> Iterator[None]:
    """While the block runs, Ctrl-C (SIGINT, the terminal in cooked mode) cancels `task`."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, task.cancel)
    except (NotImplementedError, RuntimeError):  # not the main thread (tests), or no signals here
        pass
    try:
        yield
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass


class ChatApp:
    """The running chat: the current session, how it renders, how it reads (implements `_slash.Chat`)."""

    def __init__(
        self,
        session: Session,
        console: Console,
        renderer: Renderer,
        sessions_dir: Path,
        opener: Callable[[Path | None, str | None], Session],
    ) -> None:
        self.session = session
        self.console = console
        self.renderer = renderer
        self.sessions_dir = sessions_dir
        self._opener = opener
        self._task: asyncio.Future[Any] | None = None

    def cancel_turn(self) -> None:
        """Cancel the running turn (Ctrl-C at the permission prompt)."""
        if self._task is not None:
            self._task.cancel()

    async def switch(self, path: Path | None, *, model: str | None = None) -> None:
        """Open `path` (None: a new session) and close this one; another session is recapped.

        Another session is opened before this one closes, so a failure (the file is held by another
        process) leaves the chat where it was. The same session (a new model) must be closed first:
        its transcript has a single writer.
        """
        same = path is not None and path == self.session.path
        if same:
            await self.session.aclose()
            self.session = self._opener(path, model)
        else:
            new = self._opener(path, model)
            await self.session.aclose()
            self.session = new
        config = self.session.engine.config
        if path is None:
            self.console.print(Text(f"new session {self.session.session_id}", style="dim"))
            return
        self.console.print(Text(f"session {self.session.session_id} · {config.model}", style="dim"))
        if not same:
            for line in recap(self.session.engine.timeline.snapshot()):
                self.console.print(line)

    async def run_cancellable(self, work: Awaitable[object]) -> None:
        """Run `work`; Ctrl-C cancels it and returns to the prompt."""
        task = asyncio.ensure_future(work)
        with _sigint_cancels(task):
            try:
                await task
            except asyncio.CancelledError:
                if not task.cancelled():
                    raise
                self.console.print(Text("cancelled", style="red"))

    async def turn(self, prompt: str) -> TurnResult | None:
        """One turn, rendered; Ctrl-C cancels it (the engine records the interruption), never the chat."""
        self.renderer.begin_turn()
        self._task = task = asyncio.ensure_future(self.session.submit_message(prompt))
        try:
            with _sigint_cancels(task):
                return await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            self.renderer.end_turn()
            self.console.print(
                Text("⎿ interrupted: the turn stopped; the transcript records it", style="red")
            )
            return None
        finally:
            self._task = None
            self.renderer.end_turn()

    def status(self) -> None:
        engine = self.session.engine
        self.console.print(status_line(engine.timeline.snapshot(), engine.config))


async def _repl(chat: ChatApp, read: LineReader, recap_first: bool) -> None:
    console = chat.console
    console.print(
        Text(f"session {chat.session.session_id} ({chat.session.path}); /help for commands", style="dim")
    )
    if recap_first:
        for recap_line in recap(chat.session.engine.timeline.snapshot()):
            console.print(recap_line)
    cleared = False  # the previous prompt ended with Ctrl-C
    while True:
        line = await read("› ")
        if line is None:
            break
        if line == CLEARED:
            if cleared:
                break
            cleared = True
            console.print(Text("(Ctrl-C again to leave, or keep typing)", style="dim"))
            continue
        cleared = False
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            if not await run_slash(chat, text):
                break
            continue
        try:
            await chat.turn(text)
        except FoldlineError as e:  # the chat outlives a failed turn; the transcript records it
            console.print(Text(explain(e), style="red"))
        chat.status()
    await chat.session.aclose()


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
    "--context-window",
    type=click.IntRange(min=1024),
    default=None,
    help="The model's window in tokens (default: Claude's table; for another model, what the server "
    "reports, else 200000). Every compaction threshold scales to it.",
)
@click.option(
    "--max-output-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="The model's output limit in tokens (default: Claude's table, or what the server reports).",
)
@click.option(
    "--summary-format",
    type=click.Choice(["sections", "free"]),
    default="sections",
    show_default=True,
    help="free: keep a compaction summary that lacks the requested sections (a small local model).",
)
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
@click.option(
    "--output-format",
    type=click.Choice(["text", "json", "stream-json"]),
    default="text",
    show_default=True,
    help="With -p or stdin: the answer as text, one JSON object at the end, or one JSON line per event.",
)
def chat(**options: Any) -> None:
    """Talk to the agent: one turn with -p (or stdin), otherwise a REPL."""
    fmt: str = options["output_format"]
    console = Console(highlight=False, stderr=fmt != "text")  # JSON owns stdout
    workspace = Path(options["workspace"]).resolve()
    sessions_dir = options["sessions_dir"] or TranscriptConfig().sessions_dir
    model = {"model": options["model"]} if options["model"] else {}
    config = with_limits(
        Config(max_turns=options["max_turns"], summary_format=options["summary_format"], **model),
        options["base_url"],
        options["api_key"],
        context_window=options["context_window"],
        max_output=options["max_output_tokens"],
    )
    try:
        settings = load_settings(workspace)
    except FoldlineError as e:
        raise click.ClickException(explain(e)) from e
    for warning in settings.warnings:
        click.echo(f"warning: {warning}", err=True)
    mode: PermissionMode = options["permission_mode"] or settings.mode or "default"
    interactive = options["force_repl"] or (options["prompt"] is None and sys.stdin.isatty())
    terminal = interactive and use_terminal()
    renderer = Renderer(console, live=terminal and console.is_terminal)
    chat_ref: list[ChatApp] = []
    answer = answer_reader(
        terminal_reader(None) if terminal else plain_reader(),
        on_interrupt=lambda: chat_ref[0].cancel_turn() if chat_ref else None,
    )

    def echo(text: str) -> None:
        renderer.pause()
        console.print(Text(text))

    def notice(text: str) -> None:
        renderer.print(Text(f"warning: {text}", style="yellow"))

    kwargs: dict[str, Any] = {
        "base_url": options["base_url"],
        "cache_edits": options["cache_edits"],
        "api_key": options["api_key"],
        "config": config,
        "tools": default_tools(),
        "rules": settings.rules,
        "permission_mode": mode,
        "ask": make_asker(settings, workspace, mode, echo=echo, aread=answer) if interactive else None,
    }

    def opener(path: Path | None, new_model: str | None) -> Session:
        if new_model is not None:
            kwargs["config"] = replace(kwargs["config"], model=new_model)
        target = path or _open(workspace, sessions_dir, None, False)
        return _start(target, workspace, kwargs, renderer, notice)

    resumed = bool(options["resume"] or options["latest"])
    try:
        path = _open(workspace, sessions_dir, options["resume"], options["latest"])
        if interactive:
            session = _start(path, workspace, kwargs, renderer, notice)
            chat_ref.append(ChatApp(session, console, renderer, sessions_dir, opener))
            read = terminal_reader(sessions_dir / "prompt-history") if terminal else plain_reader()
            asyncio.run(_repl(chat_ref[0], read, recap_first=resumed))
            return
        prompt = options["prompt"] if options["prompt"] is not None else sys.stdin.read()
        if not prompt.strip():
            raise click.ClickException("nothing to send: give -p PROMPT or text on stdin")
        if fmt == "text":
            session = _start(path, workspace, kwargs, renderer, notice)
            asyncio.run(_one_shot(ChatApp(session, console, renderer, sessions_dir, opener), prompt))
        else:
            asyncio.run(_one_shot_json(path, workspace, kwargs, prompt, stream=fmt == "stream-json"))
    except FoldlineError as e:
        raise click.ClickException(explain(e)) from e
    except KeyboardInterrupt:  # Ctrl-C outside a turn (opening, closing): leave quietly, no "Aborted!"
        console.print(Text("interrupted", style="red"))
        sys.exit(130)


async def _one_shot(chat: ChatApp, prompt: str) -> None:
    try:
        await chat.turn(prompt)
    finally:
        await chat.session.aclose()


async def _one_shot_json(
    path: Path, workspace: Path, kwargs: dict[str, Any], prompt: str, *, stream: bool
) -> None:
    """One turn for a script: JSON lines as events happen (stream), then the result object."""

    def emit(event: UIEvent) -> None:
        if stream:
            click.echo(json_line(event_object(event)))

    session = _start(path, workspace, kwargs, emit, lambda text: emit(NoticeEvent(text, "warning")))
    before = len(session.engine.timeline)
    error: str | None = None
    text, stop = "", None
    try:
        result = await session.submit_message(prompt)
        text, stop = result.text, result.stop_reason
    except FoldlineError as e:
        error = explain(e)
    finally:
        await session.aclose()
    records = session.engine.timeline.snapshot()[before:]
    click.echo(
        json_line(
            result_object(
                session_id=session.session_id, new_records=records, text=text, stop_reason=stop, error=error
            )
        )
    )
    if error is not None:
        sys.exit(1)
