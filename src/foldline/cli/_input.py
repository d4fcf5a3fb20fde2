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
  Elsewhere (a pipe) the terminal is not touched, and Ctrl-C is a SIGINT the turn's handler turns
  into a cancellation.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final, Protocol

__all__ = [
    "CLEARED",
    "LineReader",
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


def use_terminal() -> bool:
    """Whether both ends are a terminal: then the line editor is used, else plain lines."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def plain_reader() -> LineReader:
    """Lines from stdin, for pipes and tests: `input()` in a thread so the event loop keeps running."""

    async def read(prompt: str, default: str = "", accept: bool = False) -> str | None:
        if accept:
            return default
        try:
            return await asyncio.to_thread(input, prompt)
        except EOFError:
            return None
        except KeyboardInterrupt:
            return CLEARED

    return read


def terminal_reader(history_file: Path | None, *, escape_answers: str | None = None) -> LineReader:
    """A prompt_toolkit line editor with persistent history in `history_file` (its folder is created);
    None: no history (the approval prompt, whose answers are not worth recalling). With
    `escape_answers`, a lone Esc submits that text (the approval prompt: Esc is no, as in Claude
    Code) instead of starting Esc-Enter."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, InMemoryHistory
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

    history: FileHistory | InMemoryHistory = InMemoryHistory()
    if history_file is not None:
        try:
            history_file.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(history_file))
        except OSError:  # a read-only home must not stop the chat; history then lasts the session
            pass
    session: PromptSession[str] = PromptSession(
        history=history, key_bindings=bindings, multiline=True, prompt_continuation=_continuation
    )

    async def read(prompt: str, default: str = "", accept: bool = False) -> str | None:
        try:
            return await session.prompt_async(prompt, default=default, accept_default=accept)
        except EOFError:
            return None
        except KeyboardInterrupt:
            return CLEARED

    return read


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
