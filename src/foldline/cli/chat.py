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
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from foldline.cli._errors import explain
from foldline.cli._input import (
    CLEARED,
    LineReader,
    answer_reader,
    interrupt_keys,
    plain_reader,
    terminal_reader,
    use_terminal,
)
from foldline.cli._jsonout import event_object, json_line, result_object
from foldline.cli._prompt import make_asker
from foldline.cli._slash import compact_command, run_slash
from foldline.cli._ui import Renderer, recap, status_line
from foldline.cli.trust import confirm_settings
from foldline.config import DESIGN_WINDOW, Config, TranscriptConfig
from foldline.containment.safe_read import escape_controls
from foldline.containment.sandbox import Sandbox, detect_sandbox
from foldline.engine import TurnResult
from foldline.errors import FoldlineError, UserError
from foldline.events import NoticeEvent, UIEvent
from foldline.providers.anthropic import (
    FOLDLINE_SERVE_CAPABILITIES,
    AnthropicProvider,
    discover_capabilities,
)
from foldline.providers.base import Capabilities, Provider
from foldline.providers.limits import fit_thinking, server_limits
from foldline.providers.prompted_tools import PromptedTools
from foldline.session import Session
from foldline.sessions import (
    claude_code_projects_dir,
    detect_format,
    find_session,
    import_claude_code_session,
    is_session_id,
)
from foldline.settings import Settings, load_settings
from foldline.tools import default_tools
from foldline.tools.permissions import PermissionMode, rule_patterns
from foldline.transcript import list_session_files, session_path

__all__ = ["chat", "compact_command", "with_limits"]


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
        _refuse_empty(found)
        return _imported(found, workspace, sessions_dir) if detect_format(found) == "claude-code" else found
    if latest:
        newest = list_session_files(sessions_dir, cwd=str(workspace))
        if not newest:
            raise click.ClickException(f"no earlier session for {workspace} under {sessions_dir}")
        return newest[0]
    return session_path(sessions_dir, str(workspace), str(uuid.uuid4()))


def _workspace(given: Path | None) -> Path:
    """`--workspace`, else the current directory, which may have been deleted under the shell."""
    if given is not None:
        return given.resolve()
    try:
        return Path.cwd()
    except FileNotFoundError:
        raise click.ClickException(
            "the current directory no longer exists (it was deleted or moved after this shell entered "
            "it): cd to an existing directory, or pass --workspace DIR"
        ) from None


def _refuse_empty(path: Path) -> None:
    """A transcript to resume must hold something: an empty file is no session (a typo, a truncated
    copy), and importing it would start an empty one that only looks resumed."""
    try:
        with path.open("rb") as f:
            empty = not any(line.strip() for line in f)  # stops at the first line with something
    except OSError as e:
        raise click.ClickException(f"cannot read {path}: {e.strerror}") from e
    if empty:
        raise click.ClickException(
            f"{path} is empty: it is not a session transcript, so there is nothing to resume"
        )


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


def _settings(workspace: Path, *, ask: bool) -> Settings:
    """The workspace's settings, its warnings said once (stderr); in a terminal, files the user
    has not confirmed are shown and the user is asked once whether to trust them."""
    try:
        settings = load_settings(workspace)
        if ask and settings.untrusted:
            if confirm_settings(settings.untrusted, workspace):
                settings = load_settings(workspace)
    except FoldlineError as e:
        raise click.ClickException(explain(e)) from e
    return settings


def _sandbox(
    settings: Settings,
    workspace: Path,
    config: Config,
    *,
    interactive: bool,
    mode: PermissionMode,
    from_flag: bool,
) -> Sandbox:
    """The session's Bash sandbox, found once. Said on stderr: in a REPL first the mode line
    (`_mode_line`), then the settings' warnings, then where the sandbox cannot run, or what it does."""
    read_only, hidden = rule_patterns(settings.rules, workspace)
    sandbox = detect_sandbox(
        settings.sandbox, read_only=read_only, hidden=hidden, limits=config.tools, workspace=workspace
    )
    if interactive:
        click.echo(_mode_line(settings, mode, from_flag=from_flag, sandbox=sandbox), err=True)
    for warning in settings.warnings:
        click.echo(f"warning: {warning}", err=True)
    if (line := sandbox.notice()) is not None:
        click.echo(f"warning: {line}", err=True)
    elif interactive and (line := sandbox.summary()) is not None:  # -p prints the answer alone
        click.echo(line, err=True)
    elif sandbox.active and not sandbox.layered:  # a script must know its changes cannot be undone
        click.echo(f"warning: Bash changes cannot be undone here ({sandbox.layer_problem})", err=True)
    return sandbox


_MODE_EFFECT = {
    "default": "asks before edits and commands it cannot verify",
    "acceptEdits": "edits in the workspace run without asking",
    "plan": "reads only, nothing is changed",
    "bypassPermissions": "every tool call runs without asking",
}


def _mode_line(settings: Settings, mode: PermissionMode, *, from_flag: bool, sandbox: Sandbox) -> str:
    """The chat's first line: the permission mode and the Bash sandbox in force, and what set
    each (the flag, a settings file, or nothing), so a loosened session is never a surprise."""
    if from_flag:
        mode_from = "set by --permission-mode"
    elif settings.mode_source is not None and settings.mode is not None:
        mode_from = f"set by {escape_controls(str(settings.mode_source.path))}"
    else:
        mode_from = "no settings file sets it"
    source = settings.sandbox_source
    box_from = (
        f"set by {escape_controls(str(source.path))}" if source is not None else "no settings file sets it"
    )
    if sandbox.active:
        box = "on (network on)" if sandbox.policy.network else "on"
    elif sandbox.policy.mode == "off":
        box = "off: Bash runs on the host"
    elif sandbox.refuses:
        box = "required but unavailable: Bash is refused"
    else:
        box = "unavailable: Bash runs on the host"
    return f"permission mode: {mode} ({mode_from}): {_MODE_EFFECT[mode]} · Bash sandbox: {box} ({box_from})"


def with_limits(
    config: Config,
    base_url: str | None,
    api_key: str | None,
    *,
    context_window: int | None,
    max_output: int | None,
) -> Config:
    """`config` with the model's window and output limit: the flags first; for a model Claude's table
    does not know, what the server at `base_url` reports (`providers.limits`); else as it was. A
    thinking budget is fitted to the window found (`fit_thinking`).

    Raises:
        UserError: thinking was asked for on a window too small to hold it.
    """
    known = any(config.model.startswith(prefix) for prefix, _ in config.model_limits)
    if (context_window is None or max_output is None) and not known and base_url:
        served = server_limits(base_url, config.model, api_key=api_key)
        if served is not None:
            context_window = context_window or served.context_window
            max_output = max_output or served.max_output
            if served.drops_tools:  # its template would drop them: write them into the prompt
                config = replace(config, tools_in_prompt=True)
    return fit_thinking(
        replace(
            config, context_window=context_window, model_max_output=max_output, reference_window=DESIGN_WINDOW
        )
    )


def _start(
    path: Path,
    workspace: Path,
    options: dict[str, Any],
    on_event: Callable[[UIEvent], None],
    on_notice: Callable[[str], None],
) -> Session:
    # Each session gets its own provider: closing a session closes its client.
    provider: Provider = AnthropicProvider(
        base_url=options["base_url"], api_key=options["api_key"], capabilities=options["capabilities"]
    )
    if options["config"].tools_in_prompt:
        provider = PromptedTools(provider, temperature=options["config"].tools_in_prompt_temperature)
    return Session.open(
        path,
        provider=provider,
        workspace=workspace,
        on_event=on_event,
        on_notice=on_notice,
        **{k: v for k, v in options.items() if k not in ("base_url", "api_key", "capabilities")},
    )


def _capabilities(options: dict[str, Any], config: Config) -> Capabilities | None:
    """What the server takes: `--cache-edits` / `--no-cache-edits` when given, else what it says.

    `foldline serve` advertises its cache_edits beta on every answer, so the cache-preserving
    Microcompact path is on against it without a flag; the public API advertises nothing.
    """
    if options["cache_edits"] is not None:
        return FOLDLINE_SERVE_CAPABILITIES if options["cache_edits"] else None
    return discover_capabilities(
        options["base_url"], options["api_key"], config.model, timeout=config.capability_probe_timeout_s
    )


def _config(options: dict[str, Any]) -> Config:
    """The pipeline's configuration from the flags: model, turn limit, summary form, thinking, the 1M
    window (the model's limits come after, `with_limits`)."""
    defaults = Config()
    fields: dict[str, Any] = {"max_turns": options["max_turns"], "summary_format": options["summary_format"]}
    if options["model"]:
        fields["model"] = options["model"]
    budget = options["thinking_budget"]
    if options["thinking"] is not False and (options["thinking"] or budget is not None):
        budget = budget or defaults.default_thinking_budget_tokens
        fields["thinking_budget_tokens"] = budget
        # the budget is part of max_tokens (A26): keep the usual room for the answer on top of it
        if budget >= defaults.max_output_tokens:
            fields["max_output_tokens"] = budget + defaults.max_output_tokens
    if options["long_context"]:
        fields["long_context"] = True
    config = Config(**fields)
    if config.long_context and config.limits.long_context_window is None:
        raise click.ClickException(
            f"{config.model} has no 1M-token window; --1m works with Sonnet 4 and later"
        )
    return config


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
        base_url: str | None = None,
        *,
        keys: bool = False,
    ) -> None:
        self.session = session
        self.base_url = base_url
        self.keys = keys  # read Esc and Ctrl-C from the terminal during a turn (`interrupt_keys`)
        self.console = console
        self.renderer = renderer
        self.sessions_dir = sessions_dir
        self._opener = opener
        self._task: asyncio.Future[Any] | None = None
        self._refused = False
        self.typed: list[str] = []
        """What was typed while a turn ran (type-ahead), one character each, newest last."""

    def cancel_turn(self) -> None:
        """Cancel the running turn (Ctrl-C at the permission prompt)."""
        if self._task is not None:
            self._task.cancel()

    def refuse(self) -> None:
        """The person answered no: stop the turn as Claude Code does, once the refusal is recorded.

        The cancellation is scheduled, not done here: the asker returns first, so the refused call
        finishes with its refusal as its result, and the engine's interruption keeps it (the other
        calls of the round are marked interrupted) and adds the marker the model reads.
        """
        if self._task is not None and not self._refused:
            self._refused = True
            asyncio.get_running_loop().call_soon(self.cancel_turn)

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
        """Run `work` (`/compact`); Esc or Ctrl-C cancels it and returns to the prompt."""
        task = asyncio.ensure_future(work)
        with (
            _sigint_cancels(task),
            interrupt_keys(task.cancel, self.typed) if self.keys else nullcontext(),
        ):
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
            keys = interrupt_keys(self.cancel_turn, self.typed) if self.keys else nullcontext()
            with _sigint_cancels(task), keys:
                return await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
            self.renderer.end_turn()
            if self._refused:
                text = "⎿ declined: the turn stopped; tell the model what to do instead"
            else:
                text = "⎿ interrupted: the turn stopped; the transcript records it"
            self.console.print(Text(text, style="red"))
            return None
        finally:
            self._task = None
            self._refused = False
            self.renderer.end_turn()

    def type_ahead(self) -> tuple[str, bool]:
        """The next line typed during the last turn, and whether it was finished with Enter (then
        it runs as the next prompt; otherwise it waits in the input line). What follows a finished
        line stays for the prompt after that one."""
        text = "".join(self.typed)
        self.typed.clear()
        line, enter, rest = text.partition("\n")
        self.typed.extend(rest)
        return line, bool(enter) and bool(line.strip())

    def status(self) -> None:
        engine = self.session.engine
        sandboxed = engine.sandbox is not None and engine.sandbox.active
        line = status_line(
            engine.timeline.snapshot(), engine.config, mode=engine.permission_mode, sandboxed=sandboxed
        )
        self.console.print(line)


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
        typed, queued = chat.type_ahead()
        line = await read("› ", default=typed, accept=queued)
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
            read.settle(False)
            continue
        if text.startswith("/"):
            read.settle(True)
            if not await run_slash(chat, text):
                break
            continue
        before = len(chat.session.engine.timeline)
        try:
            await chat.turn(text)
        except FoldlineError as e:  # the chat outlives a failed turn; the transcript records it
            console.print(Text(explain(e, chat.base_url, repl=True), style="red"))
        read.settle(len(chat.session.engine.timeline) > before)  # a refused prompt was not saved
        chat.status()
    await chat.session.aclose()


def chat(**options: Any) -> None:
    """`foldline chat` with its parsed flags (`_chat_flags.chat` declares them and calls this)."""
    fmt: str = options["output_format"]
    interactive = options["force_repl"] or (options["prompt"] is None and sys.stdin.isatty())
    # stdout is the answer's alone with -p (as `claude -p`), the JSON's with a JSON format; the
    # trace (calls, results, receipts, warnings) goes to stderr then
    console = Console(highlight=False, stderr=fmt != "text" or not interactive)
    workspace = _workspace(options["workspace"])
    sessions_dir = options["sessions_dir"] or TranscriptConfig().sessions_dir
    try:
        config = with_limits(
            _config(options),
            options["base_url"],
            options["api_key"],
            context_window=options["context_window"],
            max_output=options["max_output_tokens"],
        )
    except UserError as e:
        raise click.ClickException(str(e)) from e
    interactive = options["force_repl"] or (options["prompt"] is None and sys.stdin.isatty())
    settings = _settings(workspace, ask=interactive and sys.stdin.isatty())
    mode: PermissionMode = options["permission_mode"] or settings.mode or "default"
    from_flag = options["permission_mode"] is not None
    sandbox = _sandbox(settings, workspace, config, interactive=interactive, mode=mode, from_flag=from_flag)
    terminal = interactive and use_terminal()
    renderer = Renderer(console, live=terminal and console.is_terminal, answer=interactive)
    chat_ref: list[ChatApp] = []
    answer = answer_reader(
        terminal_reader(None, escape_answers="no") if terminal else plain_reader(),
        on_interrupt=lambda: chat_ref[0].cancel_turn() if chat_ref else None,
    )

    def echo(text: str) -> None:
        renderer.pause()
        console.print(Text(text))

    def refuse() -> None:
        if chat_ref:
            chat_ref[0].refuse()

    def notice(text: str) -> None:
        renderer.print(Text(f"warning: {text}", style="yellow"))

    kwargs: dict[str, Any] = {
        "base_url": options["base_url"],
        "capabilities": _capabilities(options, config),
        "api_key": options["api_key"],
        "config": config,
        "tools": default_tools(),
        "rules": settings.rules,
        "permission_mode": mode,
        "sandbox": sandbox,
        "ask": make_asker(
            settings, workspace, mode, echo=echo, aread=answer, on_refuse=refuse, cancelled=CLEARED
        )
        if interactive
        else None,
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
            chat_ref.append(
                ChatApp(session, console, renderer, sessions_dir, opener, options["base_url"], keys=terminal)
            )
            history = sessions_dir / "prompt-history"
            read = terminal_reader(history, on_error=notice) if terminal else plain_reader()
            asyncio.run(_repl(chat_ref[0], read, recap_first=resumed))
            return
        prompt = options["prompt"] if options["prompt"] is not None else sys.stdin.read()
        if not prompt.strip():
            raise click.ClickException("nothing to send: give -p PROMPT or text on stdin")
        if fmt == "text":
            session = _start(path, workspace, kwargs, renderer, notice)
            chat_app = ChatApp(session, console, renderer, sessions_dir, opener, options["base_url"])
            asyncio.run(_one_shot(chat_app, prompt))
        else:
            asyncio.run(_one_shot_json(path, workspace, kwargs, prompt, stream=fmt == "stream-json"))
    except FoldlineError as e:
        raise click.ClickException(explain(e, options["base_url"])) from e
    except KeyboardInterrupt:  # Ctrl-C outside a turn (opening, closing): leave quietly, no "Aborted!"
        console.print(Text("interrupted", style="red"))
        sys.exit(130)


async def _one_shot(chat: ChatApp, prompt: str) -> None:
    """`-p` in text mode: the final answer on stdout, nothing else (the trace is on stderr)."""
    try:
        result = await chat.turn(prompt)
    finally:
        await chat.session.aclose()
    if result is not None and result.text:
        click.echo(result.text)


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
        error = explain(e, kwargs["base_url"])
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
