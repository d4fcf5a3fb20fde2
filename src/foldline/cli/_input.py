"""What `foldline chat` reads from the person at the terminal: the prompt line and the approval answers.

`terminal_reader` gives a prompt_toolkit line editor (arrow keys, history saved in a file under the
sessions directory, Esc-Enter or a trailing backslash for a new line); `plain_reader` reads lines
from a pipe, so scripts that feed the REPL on stdin keep working.

Invariants:
- Ctrl-C at the prompt never leaves the REPL on its own: it clears the line and returns `CLEARED`;
  the caller exits only on a second Ctrl-C in a row. Ctrl-D on an empty line (or end of input)
  returns None.
- While a turn runs at a terminal, `interrupt_keys` holds it in raw mode and reads the keys: Esc
  or Ctrl-C cancels the turn (as in Claude Code); anything else typed meanwhile is kept (type-ahead):
  a line finished with Enter runs as the next prompt, an unfinished one is put back in the input
  line. The approval prompt's line editor takes the keyboard over while it asks and gives it back
  after; Esc there answers no.
- While the line editor reads, whatever is printed to stdout (a background notice, a warning) appears
  above the line being typed, which is drawn again below it (`patch_stdout`), never in the middle of it.
  Elsewhere (a pipe) the terminal is not touched, and Ctrl-C is a SIGINT the turn's handler turns
  into a cancellation.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory
from prompt_toolkit.patch_stdout import patch_stdout

__all__ = [
    "CLEARED",
    "LineReader",
    "PromptHistory",
    "answer_reader",
    "interrupt_keys",
    "plain_reader",
    "terminal_reader",
    "use_terminal",
]

_ESC_WAIT_S: Final = 0.05
"""How long a lone Esc byte waits for the rest of an escape sequence (an arrow key sends Esc [ A in
one burst) before it counts as the Esc key."""

CLEARED: Final = "\x00cleared"
"""What a reader returns when Ctrl-C cleared the line (never a line a person can type)."""


class LineReader(Protocol):
    """Reads one line after showing `prompt`: the text, `CLEARED` (Ctrl-C), or None (end of input).

    `default` starts the line with that text (type-ahead); with `accept` it is taken as typed, shown
    and saved in the history like any line."""

    def __call__(self, prompt: str, default: str = "", accept: bool = False) -> Awaitable[str | None]: ...

    def settle(self, kept: bool) -> None:
        """The last line was kept by the session (recorded, or a command) or refused: only a kept
        one goes into the history file."""
        ...


@dataclass
class _PlainReader:
    async def __call__(self, prompt: str, default: str = "", accept: bool = False) -> str | None:
        if accept:
            return default
        try:
            return await asyncio.to_thread(input, prompt)
        except EOFError:
            return None
        except KeyboardInterrupt:
            return CLEARED

    def settle(self, kept: bool) -> None:
        return None


class PromptHistory(FileHistory):
    """The prompt line's history file: private (0600, like a shell's), written only for prompts the
    session kept (a paste refused as too long was "not saved", so it is not saved here either), and
    never fatal: a full disk or a read-only folder costs the history, with one warning, not the chat."""

    def __init__(self, path: Path, on_error: Callable[[str], None] | None = None) -> None:
        super().__init__(str(path))
        self.path = path
        self.on_error = on_error
        self._pending: str | None = None
        self._broken = False

    def load_history_strings(self) -> Iterable[str]:
        try:
            return super().load_history_strings()
        except OSError as e:
            self._fail(e)
            return []

    def store_string(self, string: str) -> None:
        self._pending = string  # written by `settle` once the session has kept the prompt

    def settle(self, kept: bool) -> None:
        string, self._pending = self._pending, None
        if not kept or string is None or self._broken:
            return
        text = f"\n# {datetime.datetime.now()}\n" + "".join(f"+{line}\n" for line in string.split("\n"))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.fchmod(fd, 0o600)  # a file an older foldline left 0644 is made private too
                os.write(fd, text.encode("utf-8", errors="replace"))
            finally:
                os.close(fd)
        except OSError as e:
            self._fail(e)

    def _fail(self, error: OSError) -> None:
        self._broken = True
        if self.on_error is not None:
            self.on_error(
                f"the prompt history ({self.path}) cannot be written: {error.strerror or error}; "
                "this session's prompts are remembered until it ends"
            )


def use_terminal() -> bool:
    """Whether both ends are a terminal: then the line editor is used, else plain lines."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def plain_reader() -> LineReader:
    """Lines from stdin, for pipes and tests: `input()` in a thread so the event loop keeps running."""
    return _PlainReader()


@dataclass
class _TerminalReader:
    session: PromptSession[str]
    history: PromptHistory | None

    async def __call__(self, prompt: str, default: str = "", accept: bool = False) -> str | None:
        try:
            # what is printed meanwhile (a background notice) goes above the line being typed, and
            # the line is drawn again under it; raw: rich's colours pass as they are
            with patch_stdout(raw=True):
                return await self.session.prompt_async(prompt, default=default, accept_default=accept)
        except EOFError:
            return None
        except KeyboardInterrupt:
            return CLEARED

    def settle(self, kept: bool) -> None:
        if self.history is not None:
            self.history.settle(kept)


def terminal_reader(
    history_file: Path | None,
    *,
    escape_answers: str | None = None,
    on_error: Callable[[str], None] | None = None,
) -> LineReader:
    """A prompt_toolkit line editor with persistent history in `history_file` (its folder is created);
    None: no history (the approval prompt, whose answers are not worth recalling). With
    `escape_answers`, a lone Esc submits that text (the approval prompt: Esc is no, as in Claude
    Code) instead of starting Esc-Enter."""
    from prompt_toolkit.history import InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    bindings = KeyBindings()

    if escape_answers is not None:
        answer_text = escape_answers

        @bindings.add("escape")
        def _escape(event: KeyPressEvent) -> None:
            event.app.exit(result=answer_text)

    else:

        @bindings.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

    @bindings.add("enter")
    def _submit(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.document.text_before_cursor.endswith("\\"):  # a trailing backslash continues the line
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    # a read-only home or a full disk must not stop the chat; history then lasts the session
    history = PromptHistory(history_file, on_error) if history_file is not None else None
    session: PromptSession[str] = PromptSession(
        history=history or InMemoryHistory(),
        key_bindings=bindings,
        multiline=True,
        prompt_continuation=_continuation,
    )
    return _TerminalReader(session, history)


def _continuation(width: int, line_number: int, wrap_count: int) -> str:
    return "·".rjust(width - 1) + " "


def answer_reader(read: LineReader, on_interrupt: Callable[[], None]) -> Callable[[str], Awaitable[str]]:
    """The permission prompt's reader: Ctrl-C (or end of input) there cancels the turn (`on_interrupt`)
    and answers `CLEARED`, which the asker takes as no without asking again."""

    async def answer(prompt: str) -> str:
        line = await read(prompt)
        if line is None or line == CLEARED:
            on_interrupt()
            return CLEARED
        return line

    return answer


@contextmanager
def interrupt_keys(on_interrupt: Callable[[], object], typed: list[str] | None = None) -> Iterator[None]:
    """While the block runs, Esc or Ctrl-C at the terminal calls `on_interrupt` (raw mode: Ctrl-C is
    a key here, not a signal); with `typed`, every other key is kept there as text (type-ahead:
    characters, pastes, Enter as a newline, Backspace taking the last character back). Must be
    entered inside the running event loop."""
    from prompt_toolkit.input import create_input
    from prompt_toolkit.key_binding import KeyPress
    from prompt_toolkit.keys import Keys

    keyboard = create_input()
    loop = asyncio.get_running_loop()

    def keep(press: KeyPress) -> None:
        if typed is None:
            return
        key = press.key
        if key in (Keys.ControlM, Keys.ControlJ):
            typed.append("\n")
        elif key in (Keys.Backspace, Keys.ControlH):
            if typed and typed[-1] != "\n":
                typed.pop()
        elif key == Keys.BracketedPaste:
            typed.extend(press.data.replace("\r\n", "\n").replace("\r", "\n"))
        elif len(key) == 1 and key.isprintable():
            typed.append(key)

    def handle(presses: list[KeyPress]) -> None:
        if any(press.key in (Keys.Escape, Keys.ControlC) for press in presses):
            on_interrupt()
            return
        for press in presses:
            keep(press)

    def flush() -> None:
        handle(keyboard.flush_keys())

    def ready() -> None:
        handle(keyboard.read_keys())
        loop.call_later(_ESC_WAIT_S, flush)  # a lone Esc stays in the parser until flushed

    with keyboard.raw_mode(), keyboard.attach(ready):
        yield
