"""Damaged real Claude Code transcripts never crash `request`, `show`, `sessions` or `chat --resume`.

Every command run on a mutant (see `tests._mutants`) either succeeds, with a request the strict
validator accepts where it builds one, or fails with exit code 1 and one `Error:` line naming the
file. A traceback, another exit code, or a request the validator (or the server) rejects is a bug.
`chat --resume` runs against the local server (which validates every request) twice per mutant: on
the Claude Code file itself and on its records imported into a foldline transcript.
"""

from __future__ import annotations

import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from tests._mutants import Mutant, mutants
from tests.conftest import claude_code_files, requires_claude_code_data

from foldline.api.validate import find_errors
from foldline.cli import cli
from foldline.errors import FoldlineError
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.testing import run_server
from foldline.sessions import import_claude_code_session

pytestmark = requires_claude_code_data

_FILES = claude_code_files()
_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


def _run(args: list[str], path: Path) -> Result:
    """Run a command; it must succeed or fail cleanly (exit 1, one `Error:` line naming `path`)."""
    result = CliRunner().invoke(cli, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        assert result.exc_info is not None
        pytest.fail("".join(traceback.format_exception(*result.exc_info)))
    assert "Traceback" not in result.output
    if result.exit_code == 0:
        return result
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert result.exit_code == 1, result.output
    assert len(errors) == 1, result.output
    assert path.name in errors[0], result.output
    return result


@settings(_SETTINGS, max_examples=200)
@given(mutant=mutants(_FILES))
def test_request_builds_a_valid_body_or_says_why(mutant: Mutant) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = mutant.write(Path(tmp) / "project")
        result = _run(["request", str(path), "--body-only"], path)
    if result.exit_code == 0:
        body = orjson.loads(result.stdout)
        assert [e.message for e in find_errors(body)] == []


@settings(_SETTINGS, max_examples=200)
@given(mutant=mutants(_FILES))
def test_show_prints_or_says_why(mutant: Mutant) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = mutant.write(Path(tmp) / "project")
        _run(["show", str(path), "--verbose"], path)


@settings(_SETTINGS, max_examples=200)
@given(mutant=mutants(_FILES))
def test_sessions_lists_or_says_why(mutant: Mutant) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = mutant.write(Path(tmp) / "project")
        _run(["sessions", tmp], path)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, ScriptedBackend]]:
    backend = ScriptedBackend()  # echoes the last user message; the server validates every request
    with run_server(create_app(backend=backend)) as url:
        yield url, backend


def _imported(path: Path) -> Path | None:
    """The session imported into a foldline transcript beside it, as `chat --resume` imports it."""
    target = path.with_name("imported.jsonl")
    try:
        import_claude_code_session(path, target, cwd=str(path.parent))
    except FoldlineError:
        return None
    return target


def test_an_imported_tool_result_with_a_non_string_id_resumes_cleanly(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    # Such a result used to reach the engine, which crashed hashing its id before the first turn.
    env = {"sessionId": "s", "isSidechain": False, "timestamp": "2026-01-01T00:00:01.000Z"}
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}
    result = {"type": "tool_result", "tool_use_id": {"x": 1}, "content": "out"}
    lines = [
        {**env, "type": "user", "uuid": "u1", "parentUuid": None, "message": {"content": "hi"}},
        {**env, "type": "assistant", "uuid": "a1", "parentUuid": "u1", "message": {"content": [use]}},
        {**env, "type": "user", "uuid": "u2", "parentUuid": "a1", "message": {"content": [result]}},
    ]  # fmt: skip
    path = Mutant("cc.jsonl", list(lines)).write(tmp_path)
    imported = _imported(path)
    assert imported is not None
    url, backend = server
    args = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(tmp_path)]
    args += ["--sessions-dir", str(tmp_path / "sessions"), "--resume", str(imported), "-p", "go on"]
    assert _run(args, imported).exit_code == 0
    assert {"type": "text", "text": "go on"} in backend.calls[-1].messages[-1]["content"]


@pytest.mark.slow
@settings(_SETTINGS, max_examples=30)
@given(mutant=mutants(_FILES))
def test_chat_resume_sends_a_valid_request_or_says_why(
    server: tuple[str, ScriptedBackend], mutant: Mutant
) -> None:
    url, backend = server
    with tempfile.TemporaryDirectory() as tmp:
        path = mutant.write(Path(tmp) / "project")  # a copy: resuming may write beside it
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        # The Claude Code file itself, and its records imported into a foldline transcript.
        for resumed in filter(None, (path, _imported(path))):
            calls = len(backend.calls)
            args = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace)]
            args += ["--sessions-dir", str(Path(tmp) / "sessions"), "--resume", str(resumed), "-p", "hi"]
            result = _run(args, resumed)
            if result.exit_code == 0:
                assert len(backend.calls) == calls + 1, result.output  # the server accepted the request
