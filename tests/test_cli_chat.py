"""`foldline chat` against the real local server: one-shot, stdin, --continue, the REPL's commands."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from foldline.cli import cli
from foldline.cli._errors import explain
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.config import ServerConfig
from foldline.server.faults import parse_faults
from foldline.server.testing import run_server
from foldline.timeline import SystemEntry
from foldline.transcript import list_session_files, load_transcript


@pytest.fixture
def server() -> Iterator[tuple[str, ScriptedBackend]]:
    backend = ScriptedBackend()  # echoes the last user message
    with run_server(create_app(backend=backend)) as url:
        yield url, backend


def _chat(url: str, tmp_path: Path, *args: str, stdin: str | None = None) -> str:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    base = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace)]
    result = CliRunner().invoke(
        cli, [*base, "--sessions-dir", str(tmp_path / "sessions"), *args], input=stdin
    )
    assert result.exit_code == 0, result.output
    return result.output


def test_one_shot_prints_the_answer_and_saves_the_session(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    url, _ = server
    assert "You said: hello there" in _chat(url, tmp_path, "-p", "hello there")
    assert len(list_session_files(tmp_path / "sessions")) == 1


def test_stdin_is_a_prompt_and_continue_resumes(server: tuple[str, ScriptedBackend], tmp_path: Path) -> None:
    url, backend = server
    assert "You said: from a pipe" in _chat(url, tmp_path, stdin="from a pipe\n")
    _chat(url, tmp_path, "--continue", "-p", "second")
    assert len(list_session_files(tmp_path / "sessions")) == 1
    assert len(backend.calls[-1].messages) == 3  # the first exchange came back with --continue


def test_resume_of_an_unknown_session_is_a_clear_error(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    url, _ = server
    result = CliRunner().invoke(
        cli, ["chat", "--base-url", url, "--sessions-dir", str(tmp_path), "--resume", "nope"]
    )
    assert result.exit_code != 0
    assert "no session 'nope'" in result.output


def test_repl_runs_turns_and_slash_commands(server: tuple[str, ScriptedBackend], tmp_path: Path) -> None:
    url, backend = server
    out = _chat(
        url, tmp_path, "--repl", stdin="first\nsecond\n/cost\n/cache\n/context\n/clear\nthird\n/exit\n"
    )
    assert "You said: first" in out
    assert "You said: second" in out
    assert "2 API calls" in out
    assert "cache reads:" in out
    assert "tool results" in out  # the /context grid's legend
    assert "new session" in out
    assert len(backend.calls[-1].messages) == 1  # /clear started over
    assert len(list_session_files(tmp_path / "sessions")) == 2


def test_repl_survives_unknown_commands_and_blank_lines_and_switches_model(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    url, backend = server
    out = _chat(url, tmp_path, "--repl", stdin="\n   \n/contxt\n/model\n/model claude-haiku-4-5\nhi\n/exit\n")
    assert "unknown command /contxt (did you mean /context" in out
    assert "model: claude-sonnet-4-5" in out
    assert backend.calls[-1].model == "claude-haiku-4-5"
    assert len(list_session_files(tmp_path / "sessions")) == 1  # the same session, another model


def test_continue_starts_with_a_recap(server: tuple[str, ScriptedBackend], tmp_path: Path) -> None:
    url, _ = server
    _chat(url, tmp_path, "-p", "remember the port 6543")
    out = _chat(url, tmp_path, "--continue", "--repl", stdin="/exit\n")
    assert "last prompt: remember the port 6543" in out
    assert "last answer: You said: remember the port 6543" in out


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--workspace", "/nonexistent/foldline-ws"], "does not exist"),
        (["--max-turns", "0"], "0 is not in the range x>=1"),
    ],
)
def test_bad_options_are_refused_before_any_session(tmp_path: Path, args: list[str], complaint: str) -> None:
    options = ["chat", "--sessions-dir", str(tmp_path / "sessions"), "-p", "hi", *args]
    result = CliRunner().invoke(cli, options)
    assert result.exit_code == 2, result.output
    assert complaint in result.output
    assert not (tmp_path / "sessions").exists()


def _failing_chat(tmp_path: Path, *args: str) -> str:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    options = ["chat", "--workspace", str(workspace), "--sessions-dir", str(tmp_path / "s"), "-p", "hi"]
    result = CliRunner().invoke(cli, [*options, *args])
    assert result.exit_code == 1, result.output
    assert result.exception is not None
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    *progress, line = result.output.strip().splitlines()
    # no cascade of errors (the start-up line says what the sandbox does, or that it cannot run)
    starts = ("retrying in", "warning: the Bash sandbox", "Bash runs in a bubblewrap sandbox")
    assert all(p.startswith(starts) for p in progress if p), progress
    assert line.startswith("Error: ")
    return line


def test_nothing_listening_names_the_url_and_the_fixes(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens on it
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
    started = time.monotonic()
    line = _failing_chat(tmp_path, "--base-url", url, "--api-key", "k")
    assert time.monotonic() - started < 5  # not ~9 s of backoff against a closed port
    assert f"cannot reach the model server at {url}" in line
    assert "foldline serve" in line
    assert "--base-url" in line


def test_a_reply_cut_mid_stream_is_reported_as_cut_not_as_cannot_connect(tmp_path: Path) -> None:
    # every attempt gets its 200 and three events, then the server closes the stream
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with run_server(create_app(faults=parse_faults("1-99:cut/3"))) as url:
        options = ["--base-url", url, "--api-key", "k", "--sessions-dir", str(tmp_path / "s")]
        result = CliRunner().invoke(cli, ["chat", "--workspace", str(workspace), *options, "-p", "hi"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    output = " ".join(result.output.split())  # rich wraps the retry lines
    assert "retrying in" in output  # it was retried, as any drop is
    assert f"the reply from {url} broke off mid-stream" in output
    line = result.output.strip().splitlines()[-1]
    assert f"the model server at {url} answered, then its reply broke off mid-stream" in line
    assert "cannot connect" not in output
    assert "cannot reach" not in output
    assert "Start a local one" not in line  # the server is running: do not send the user to start one


def test_an_unknown_model_says_which_and_how_to_pick_another(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    url, _ = server
    line = _failing_chat(tmp_path, "--base-url", url, "--api-key", "k", "--model", "gpt-4")
    assert "does not serve the model 'gpt-4'" in line
    assert "gpt-4: model: gpt-4" not in line
    assert "--model" in line


def test_a_refused_api_key_points_at_the_option(tmp_path: Path) -> None:
    with run_server(create_app(ServerConfig(api_key="right"), backend=ScriptedBackend())) as url:
        line = _failing_chat(tmp_path, "--base-url", url, "--api-key", "wrong")
    assert "refused the API key (HTTP 401" in line
    assert "--api-key" in line


def _claude_code_session(path: Path, session_id: str = "cc-1") -> Path:
    """A two-message Claude Code transcript, as Claude Code writes one."""
    common = {"sessionId": session_id, "cwd": "/elsewhere", "version": "2.0.14", "isSidechain": False}
    lines = [
        {
            **common,
            "type": "user",
            "uuid": "11111111-1111-4111-8111-111111111111",
            "parentUuid": None,
            "timestamp": "2026-03-01T10:00:00.000Z",
            "message": {"role": "user", "content": "the staging port is 6543"},
        },
        {
            **common,
            "type": "assistant",
            "uuid": "22222222-2222-4222-8222-222222222222",
            "parentUuid": "11111111-1111-4111-8111-111111111111",
            "timestamp": "2026-03-01T10:00:02.000Z",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "Noted."}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 2},
            },
        },
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_resume_of_a_claude_code_session_continues_it_in_a_new_foldline_transcript(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    url, backend = server
    source = _claude_code_session(tmp_path / "cc" / "cc-1.jsonl")
    before = source.read_bytes()
    out = _chat(url, tmp_path, "--resume", str(source), "-p", "which port?")
    assert "You said: which port?" in out
    assert "Imported Claude Code session cc-1" in out
    assert source.read_bytes() == before
    assert sorted(p.name for p in source.parent.iterdir()) == ["cc-1.jsonl"]  # no lock, no sidecar
    sent = backend.calls[-1].messages
    assert "6543" in str(sent[0]["content"])  # the imported conversation went along
    [created] = list_session_files(tmp_path / "sessions")
    provenance = [
        r for r in load_transcript(created).records if isinstance(r, SystemEntry) and r.subtype == "imported"
    ]
    assert len(provenance) == 1
    assert provenance[0].data == {"source": str(source), "source_session_id": "cc-1"}


def test_resume_finds_a_claude_code_session_by_id(
    server: tuple[str, ScriptedBackend], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, backend = server
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    _claude_code_session(tmp_path / "claude" / "projects" / "-elsewhere" / "cc-7.jsonl", "cc-7")
    _chat(url, tmp_path, "--resume", "cc-7", "-p", "go on")
    assert "6543" in str(backend.calls[-1].messages[0]["content"])


def test_resume_says_what_it_skipped(server: tuple[str, ScriptedBackend], tmp_path: Path) -> None:
    url, _ = server
    _chat(url, tmp_path, "-p", "first")
    [path] = list_session_files(tmp_path / "sessions")
    with path.open("ab") as f:
        f.write(b"{this line is damaged}\n")
    out = _chat(url, tmp_path, "--continue", "-p", "second")
    assert "warning:" in out
    assert str(path) in out.replace("\n", "")
    assert "You said: second" in out


def test_chat_reads_the_settings_files(
    server: tuple[str, ScriptedBackend], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    settings = tmp_path / "ws" / ".foldline" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"permissions": {"deny": ["Bash("]}}')
    line = _failing_chat(tmp_path, "--base-url", server[0])
    assert str(settings) in line
    assert "not a permission rule" in line
    settings.write_text('{"permissions": {"defaultMode": "bypassPermissions"}}')
    result = CliRunner().invoke(
        cli, ["chat", "--base-url", server[0], "--api-key", "k", "--workspace", str(tmp_path / "ws"),
              "--sessions-dir", str(tmp_path / "s"), "-p", "hi"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "may not set bypassPermissions" in result.output


def test_a_resume_notice_is_printed_as_text_not_markup(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    url, _ = server
    base = tmp_path / "we[bold]ird"  # rich markup in the path, as a user's folder name may have
    base.mkdir()
    _chat(url, base, "-p", "first")
    [path] = list_session_files(base / "sessions")
    with path.open("ab") as f:
        f.write(b"{damaged}\n")
    out = _chat(url, base, "--continue", "-p", "second")
    assert "we[bold]ird" in out.replace("\n", "")
    assert "You said: second" in out


def test_one_shot_text_prints_only_the_answer_on_stdout_and_the_trace_on_stderr(tmp_path: Path) -> None:
    """As `claude -p`: a script reading stdout gets the answer, not the tool calls and results."""
    touch = {"name": "Bash", "input": {"command": "echo made-it"}}
    backend = ScriptedBackend(
        replies=[{"tool_calls": [touch]}, {"text": "Done: the command printed made-it."}]
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with run_server(create_app(backend=backend)) as url:
        args = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace)]
        args += ["--sessions-dir", str(tmp_path / "s"), "--permission-mode", "bypassPermissions"]
        result = CliRunner().invoke(cli, [*args, "-p", "please run echo"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Done: the command printed made-it.\n"
    assert "Bash" in result.stderr  # the call, shown as it ran
    assert "made-it" in result.stderr  # and its result line


def test_slash_model_refuses_a_model_the_server_does_not_serve(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    """`/model gpt-4o` used to be accepted, and the next turn's error then pointed at --model."""
    url, backend = server
    out = _chat(url, tmp_path, "--repl", stdin="/model gpt-4o\nhi\n/exit\n")
    assert "does not serve 'gpt-4o'; still on claude-sonnet-4-5" in " ".join(out.split())  # wrapped
    assert "You said: hi" in out
    assert backend.calls[-1].model == "claude-sonnet-4-5"
    assert "--model" not in out


def test_in_the_repl_a_model_error_points_at_slash_model_not_the_flag() -> None:
    from foldline.errors import ModelHTTPError

    error = ModelHTTPError("gpt-4o", 404, {}, "model: gpt-4o")
    assert "Switch with /model NAME" in explain(error, repl=True)
    assert "--model" not in explain(error, repl=True)
    assert "--model" in explain(error)
