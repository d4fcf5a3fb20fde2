"""`foldline chat` in a real pseudo-terminal (pexpect), against the real local server (scripted backend).

What a person does at the keyboard: the up arrow recalls the last prompt, Esc-Enter adds a line,
what is typed while a tool runs is kept (type-ahead), Esc at a permission question declines it,
a permission question is answered by typing, Ctrl-C or Esc cancels a streaming turn without leaving,
Ctrl-C at the prompt clears the line and a second one leaves cleanly, `/context` works on an empty
session, `/resume ID` switches to that session.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from foldline.cli import cli
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.faults import parse_faults
from foldline.server.testing import run_server
from foldline.transcript import list_session_files, load_transcript

pexpect = pytest.importorskip("pexpect")

pytestmark = pytest.mark.slow  # each test starts a chat process (imports the SDK): a few seconds

CLI = ["-c", "from foldline.cli import main; main()"]
LONG_STORY = " ".join(f"word{i}" for i in range(400))
PROMPT = "›"


@pytest.fixture
def backend() -> ScriptedBackend:
    touch = {"name": "Bash", "input": {"command": "touch made.txt"}}
    return ScriptedBackend(
        replies=[
            {"when": {"last_user_contains": "make a file"}, "tool_calls": [touch]},
            {"when": {"last_user_contains": "tell a story"}, "text": LONG_STORY},
        ]
    )


@pytest.fixture
def server(backend: ScriptedBackend) -> Iterator[str]:
    # Request 1 stalls after a few streamed events: long enough to press Ctrl-C mid-stream. Only the
    # test that asks for a story makes request 1 a streaming story; elsewhere it is a short reply.
    with run_server(create_app(backend=backend, faults=parse_faults("1:stall/20/8"))) as url:
        yield url


def _env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return {
        **os.environ,
        "HOME": str(home),
        "TERM": "xterm",
        "NO_COLOR": "1",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # nobody answers the cursor-position query in a pty
        "COLUMNS": "120",
        "LINES": "40",
    }


def _spawn(url: str, tmp_path: Path, *args: str) -> Any:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    argv = [
        *CLI, "chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace),
        "--sessions-dir", str(tmp_path / "sessions"), *args,
    ]  # fmt: skip
    child = pexpect.spawn(
        sys.executable, argv, env=_env(tmp_path), encoding="utf-8", timeout=30, dimensions=(40, 120)
    )
    child.logfile_read = io.StringIO()  # what the terminal showed, for a failing test's report
    child.expect(PROMPT)
    return child


def _first_turn(url: str, tmp_path: Path) -> None:
    """Request 1 (the stalled one) spent on a short one-shot turn, so later tests start clean."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    result = CliRunner().invoke(
        cli,
        ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace),
         "--sessions-dir", str(tmp_path / "sessions"), "-p", "the deploy port is 6543"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def _typed(backend: ScriptedBackend, index: int = -1) -> str:
    """The last user text of a call, without the Snip id tag the engine appends."""
    return backend.calls[index].last_user_text().split("\n[id:")[0]


def _leave(child: Any) -> None:
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_history_a_turn_multiline_and_ctrl_c_at_the_prompt(
    server: str, backend: ScriptedBackend, tmp_path: Path
) -> None:
    _first_turn(server, tmp_path)
    child = _spawn(server, tmp_path)
    try:
        child.sendline("hello there")
        child.expect("You said: hello there")
        child.expect("context ")  # the status line after the turn
        child.expect(PROMPT)
        child.send("\x1b[A")  # up arrow: the previous prompt comes back
        child.send("\r")
        child.expect("You said: hello there")
        child.expect(PROMPT)
        assert [_typed(backend, -2), _typed(backend)] == ["hello there", "hello there"]

        child.send("first line\x1b\rsecond line\r")  # Esc-Enter: a new line, not a send
        child.expect("You said: first line")
        child.expect(PROMPT)
        assert _typed(backend) == "first line\nsecond line"

        calls = len(backend.calls)
        child.send("typed but abandoned")
        child.send("\x03")  # Ctrl-C at the prompt: the line is cleared, the chat stays
        child.expect("Ctrl-C again")
        child.sendline("after the clear")
        child.expect("You said: after the clear")
        child.expect(PROMPT)
        assert len(backend.calls) == calls + 1
        assert _typed(backend) == "after the clear"  # nothing of the abandoned line

        child.send("\x03")
        child.expect("Ctrl-C again")
        child.send("\x03")  # twice in a row: leave, cleanly
        child.expect(pexpect.EOF)
        assert "Aborted" not in (child.before or "")
        assert "Traceback" not in (child.before or "")
        child.close()
        assert child.exitstatus == 0
    finally:
        child.close(force=True)
    history = (tmp_path / "sessions" / "prompt-history").read_text()
    assert "+hello there" in history  # kept for the next chat
    assert "typed but abandoned" not in history


def test_a_tool_call_asks_and_the_typed_answer_runs_it(server: str, tmp_path: Path) -> None:
    _first_turn(server, tmp_path)
    # the prompt is what this test is about: in the Bash sandbox, a contained `touch` would not ask
    (tmp_path / "ws" / ".foldline").mkdir(exist_ok=True)  # the first turn may have made it (undo)
    (tmp_path / "ws" / ".foldline" / "settings.local.json").write_text('{"sandbox": {"autoAllow": false}}')
    child = _spawn(server, tmp_path)
    try:
        child.sendline("please make a file")
        child.expect(r"Bash(\x1b\[[0-9;]*m)*\(touch made\.txt\)")  # the call, shown as it arrives (styled)
        child.expect("Bash wants to run:")
        child.expect("touch made.txt")
        child.expect("1. yes")
        child.expect(PROMPT)
        assert not (tmp_path / "ws" / "made.txt").exists()  # nothing ran before the answer
        child.sendline("1")
        child.expect("Exit code: 0")  # the tool's result line
        child.expect(PROMPT)
        assert (tmp_path / "ws" / "made.txt").exists()
        (tmp_path / "ws" / "made.txt").unlink()

        child.sendline("make a file again")  # asked again (yes was for once); Ctrl-C there cancels
        child.expect("Bash wants to run:")
        child.expect(PROMPT)
        child.send("\x03")
        child.expect("interrupted")
        child.expect(PROMPT)
        assert not (tmp_path / "ws" / "made.txt").exists()
        _leave(child)
    finally:
        child.close(force=True)


def test_ctrl_c_mid_stream_cancels_the_turn_and_the_chat_goes_on(
    server: str, backend: ScriptedBackend, tmp_path: Path
) -> None:
    child = _spawn(server, tmp_path)
    try:
        child.sendline("tell a story")
        child.expect("word1")  # streaming has begun; the server now stalls the rest
        child.sendintr()
        child.expect("interrupted")
        child.expect(PROMPT)
        child.sendline("are you still there")
        child.expect("You said: .*are you still there")  # the model also sees the interrupt marker
        child.expect(PROMPT)
        _leave(child)
    finally:
        child.close(force=True)
    [path] = list_session_files(tmp_path / "sessions")
    texts = [str(getattr(r, "message", None) and r.message.content) for r in load_transcript(path).records]
    assert any("[Request interrupted by user" in t for t in texts)  # the transcript records it
    assert "word399" not in " ".join(texts)  # the story never finished


def test_esc_mid_stream_interrupts_and_the_spinner_says_so(
    server: str, backend: ScriptedBackend, tmp_path: Path
) -> None:
    child = _spawn(server, tmp_path)
    try:
        child.sendline("tell a story")
        child.expect("esc to interrupt")  # the spinner says how
        child.expect("word1")  # streaming has begun; the server now stalls the rest
        child.send("\x1b")  # a lone Esc: not the start of an arrow key
        child.expect("interrupted")
        child.expect(PROMPT)
        child.sendline("are you still there")
        child.expect("You said: .*are you still there")
        child.expect(PROMPT)
        _leave(child)
    finally:
        child.close(force=True)
    [path] = list_session_files(tmp_path / "sessions")
    texts = [str(getattr(r, "message", None) and r.message.content) for r in load_transcript(path).records]
    assert any("[Request interrupted by user" in t for t in texts)
    assert "word399" not in " ".join(texts)


def test_context_on_an_empty_session_then_resume_by_id(server: str, tmp_path: Path) -> None:
    _first_turn(server, tmp_path)
    [earlier] = list_session_files(tmp_path / "sessions")
    child = _spawn(server, tmp_path)
    try:
        child.sendline("/context")  # a brand-new session: nothing sent yet
        child.expect("tool results")
        child.expect("free")
        child.expect(PROMPT)
        child.sendline("/resume")
        child.expect("the deploy port is 6543")  # the picker shows the first prompt
        child.expect(PROMPT)
        child.sendline(f"/resume {earlier.stem}")
        child.expect("last prompt: ")
        child.expect("the deploy port is 6543")  # the recap
        child.expect(PROMPT)
        child.sendline("and now?")
        child.expect("You said: and now")
        child.expect(PROMPT)
        child.send("\x04")  # Ctrl-D on an empty line leaves
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0
    finally:
        child.close(force=True)
    records = load_transcript(earlier).records
    prompts = [r.message.content for r in records if type(r).__name__ == "UserEntry" and not r.is_meta]
    assert "and now?" in prompts  # the turn went into the resumed session


@pytest.fixture
def slow_server() -> Iterator[tuple[str, ScriptedBackend]]:
    """A model whose "slow" prompts run a 5-second Bash call; everything else is echoed."""
    sleep = {"name": "Bash", "input": {"command": "sleep 5 && echo slept"}}
    backend = ScriptedBackend(
        replies=[{"when": {"last_user_contains": "run the slow tool"}, "tool_calls": [sleep]}]
    )
    with run_server(create_app(backend=backend)) as url:
        yield url, backend


@pytest.mark.parametrize("finished", [True, False], ids=["with-enter", "without-enter"])
def test_typing_during_a_tool_is_kept(
    slow_server: tuple[str, ScriptedBackend], tmp_path: Path, finished: bool
) -> None:
    """Type-ahead: a line finished with Enter runs as the next prompt; an unfinished one waits in the
    input line (it used to be read and dropped by the turn's key reader)."""
    url, backend = slow_server
    child = _spawn(url, tmp_path, "--permission-mode", "bypassPermissions")
    try:
        child.sendline("please run the slow tool")
        child.expect(r"Bash(\x1b\[[0-9;]*m)*\(sleep 5")  # the call is shown; it now runs for 5 s
        child.send("what next" + ("\r" if finished else ""))
        child.expect("slept")  # the tool's result line: typed while it ran
        if finished:
            child.expect("You said: what next")  # ran as the next prompt, without retyping
            child.expect(PROMPT)
        else:
            child.expect(PROMPT + " what next")  # back in the input line
            child.sendline(" please")
            child.expect("You said: what next please")
            child.expect(PROMPT)
        child.send("\x1b[A")  # and it is in the history like any prompt
        child.expect("what next")
        child.send("\x03")  # clear the recalled line
        child.expect(PROMPT)
        _leave(child)
    finally:
        child.close(force=True)
    assert any("what next" in call.last_user_text() for call in backend.calls)


def test_esc_at_the_permission_prompt_declines_the_call(server: str, tmp_path: Path) -> None:
    _first_turn(server, tmp_path)
    (tmp_path / "ws" / ".foldline").mkdir(exist_ok=True)  # the first turn may have made it (undo)
    (tmp_path / "ws" / ".foldline" / "settings.local.json").write_text('{"sandbox": {"autoAllow": false}}')
    child = _spawn(server, tmp_path)
    try:
        child.sendline("please make a file")
        child.expect("Bash wants to run:")
        child.expect(PROMPT)
        child.send("\x1b")  # a lone Esc: not the start of an arrow key
        child.expect("declined")
        child.expect(PROMPT)
        assert not (tmp_path / "ws" / "made.txt").exists()
        _leave(child)
    finally:
        child.close(force=True)


def test_a_history_file_that_cannot_be_written_costs_one_warning_not_the_chat(
    slow_server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    """A disk error on the history file (here: a folder in its place) used to surface as prompt_toolkit's
    "Unhandled exception in event loop ... Press ENTER", and the REPL stayed dead."""
    url, _ = slow_server
    (tmp_path / "sessions" / "prompt-history").mkdir(parents=True)
    child = _spawn(url, tmp_path)
    try:
        child.sendline("first prompt")
        child.expect("You said: first prompt")
        child.expect(PROMPT)
        child.sendline("second prompt")
        child.expect("You said: second prompt")
        child.expect(PROMPT)
        _leave(child)
    finally:
        child.close(force=True)
    shown = child.logfile_read.getvalue()
    assert "Unhandled exception" not in shown
    assert shown.count("prompt history") == 1  # one warning, not one per prompt


def test_a_prompt_refused_as_too_long_stays_out_of_the_history_file(
    slow_server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    """The chat said the paste was "not sent or saved", and the history file kept it anyway."""
    url, _ = slow_server
    child = _spawn(url, tmp_path, "--context-window", "4096")
    try:
        child.send("\x1b[200~" + "pasted " * 3_000 + "\x1b[201~\r")  # a bracketed paste, then Enter
        child.expect("It was not sent or saved")
        child.expect(PROMPT)
        child.sendline("a normal prompt")
        child.expect("You said: a normal prompt")
        child.expect(PROMPT)
        _leave(child)
    finally:
        child.close(force=True)
    history = tmp_path / "sessions" / "prompt-history"
    saved = history.read_text()
    assert "a normal prompt" in saved
    assert "pasted pasted" not in saved
    assert history.stat().st_mode & 0o777 == 0o600
