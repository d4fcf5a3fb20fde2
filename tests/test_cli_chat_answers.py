"""The approval prompt inside `foldline chat`: bad answers ask again, "no" stops the turn (R9.2).

Driven through the REPL over a pipe (the plain line reader) against the real local server, so the
refusal goes through the engine: the refused call's result is the refusal, the calls after it are
marked interrupted, the turn ends without another request, and the next prompt carries it all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from foldline.cli import cli
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.testing import run_server

TWO_CALLS = [
    {"name": "Bash", "input": {"command": "touch a.txt"}},
    {"name": "Bash", "input": {"command": "touch b.txt"}},
]


@pytest.fixture
def server() -> Iterator[tuple[str, ScriptedBackend]]:
    backend = ScriptedBackend(
        replies=[{"when": {"last_user_contains": "make two files"}, "tool_calls": TWO_CALLS}]
    )
    with run_server(create_app(backend=backend)) as url:
        yield url, backend


def _repl(url: str, workspace: Path, sessions: Path, stdin: str) -> str:
    # the Bash sandbox would allow these contained commands without asking: the prompt is the subject
    (workspace / ".foldline").mkdir(exist_ok=True)
    (workspace / ".foldline" / "settings.local.json").write_text('{"sandbox": {"autoAllow": false}}')
    args = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace)]
    result = CliRunner().invoke(cli, [*args, "--sessions-dir", str(sessions), "--repl"], input=stdin)
    assert result.exit_code == 0, result.output
    return result.output


def test_no_stops_the_turn_and_the_model_gets_the_refusal(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    url, backend = server
    workspace = tmp_path / "ws"
    workspace.mkdir()
    out = _repl(url, workspace, tmp_path / "s", "make two files\nsure\n\nn\nhello\n/exit\n")
    assert "'sure' is not an answer" in out  # a typo asks again
    assert "'' is not an answer" in out  # so does a bare Enter
    assert out.count("Bash wants to run:") == 1  # the second call was never asked
    assert "declined: the turn stopped" in out
    assert not (workspace / "a.txt").exists()
    assert not (workspace / "b.txt").exists()
    # One request for the refused turn (no round sent the refusal back), one for "hello".
    assert len(backend.calls) == 2
    results = [
        block
        for message in backend.calls[1].messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    texts = [str(b.get("content")) for b in results]
    assert len(texts) == 2
    assert "declined" in texts[0]
    assert "interrupted" in texts[1].lower() or "not run" in texts[1].lower()
    assert "[Request interrupted by user for tool use]" in str(backend.calls[1].messages)


def test_yes_runs_the_call_and_the_turn_goes_on(server: tuple[str, ScriptedBackend], tmp_path: Path) -> None:
    url, backend = server
    workspace = tmp_path / "ws"
    workspace.mkdir()
    out = _repl(url, workspace, tmp_path / "s", "make two files\ny\ny\n/exit\n")
    assert (workspace / "a.txt").exists()
    assert (workspace / "b.txt").exists()
    assert "declined" not in out
    assert len(backend.calls) == 2  # the results went back to the model
