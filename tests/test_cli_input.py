"""The chat's line editor (`cli/_input.py`) driven through a pipe, its screen a string: what is
printed while a person types lands above the line being typed, never in the middle of it."""

from __future__ import annotations

import asyncio
import io
import sys
import time
from collections.abc import Callable

import pytest
from prompt_toolkit.application.current import get_app_session
from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output
from rich.console import Console
from rich.text import Text

from foldline.cli._input import terminal_reader
from foldline.cli._ui import Renderer

NOTICE = "warning: session memory: the reply was not a usable summary"


async def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10  # a guard against a hang, not a speed bound
    while not done():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.02)


def test_a_notice_printed_while_typing_goes_above_the_line_which_is_drawn_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    screen = io.StringIO()  # one terminal: the line editor and stdout both write to it
    monkeypatch.setattr(sys, "stdout", screen)

    async def scenario() -> str | None:
        with create_pipe_input() as keys:
            # the process-wide session, as in the chat (a context-local one is not seen from the
            # thread that forwards stdout)
            session = get_app_session()
            monkeypatch.setattr(session, "_input", keys)
            monkeypatch.setattr(session, "_output", Vt100_Output(screen, lambda: Size(rows=24, columns=80)))
            read = terminal_reader(None)
            line = asyncio.ensure_future(read("› "))
            keys.send_text("hello")  # typed, not yet sent
            await _until(lambda: "hello" in screen.getvalue(), "the typed text on the screen")
            # the chat's notice path (`chat.notice`): a renderer over a console on stdout
            Renderer(Console(highlight=False, color_system=None), live=False).print(Text(NOTICE))
            await _until(lambda: NOTICE in screen.getvalue(), "the notice on the screen")
            await _until(
                lambda: "hello" in screen.getvalue().split(NOTICE, 1)[1], "the typed line drawn again"
            )
            keys.send_text(" world\r")
            return await line

    assert asyncio.run(scenario()) == "hello world"  # the line being typed was not disturbed
    before, after = screen.getvalue().split(NOTICE, 1)
    assert "\x1b[J" in before.rsplit("hello", 1)[1]  # the typed line was erased before the notice
    assert "› hello" in after  # and drawn again below it
