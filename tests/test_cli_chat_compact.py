"""`/compact` typed into `foldline chat`'s REPL, against the real local server (R3.4, §10)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from foldline.cli import cli
from foldline.compact.prompts import SUMMARY_SECTIONS
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.testing import run_server
from foldline.timeline import CompactBoundary
from foldline.transcript import list_session_files, load_transcript

SUMMARY_ASK = "Your task is to write a detailed summary"
SUMMARY = "\n\n".join(f"## {title}\nthe staging port is 6543 ({title.lower()})" for title in SUMMARY_SECTIONS)


@pytest.fixture
def server() -> Iterator[tuple[str, ScriptedBackend]]:
    # The summary request gets a summary; every other request is echoed ("You said: ...").
    backend = ScriptedBackend(replies=[{"when": {"last_user_contains": SUMMARY_ASK}, "text": SUMMARY}])
    with run_server(create_app(backend=backend)) as url:
        yield url, backend


def test_compact_typed_into_the_repl_summarizes_and_the_chat_goes_on(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    url, backend = server
    workspace = tmp_path / "ws"
    workspace.mkdir()
    args = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace)]
    # a turn long enough for its summary to be smaller (one that is not is not committed), just
    # before /compact: a finished turn before it is folded into a record of it already (Collapse)
    bulk = " and more" * 1_000
    stdin = "the port is 6543\nsecond" + bulk + "\n/compact keep the port numbers\nthird\n/exit\n"
    args += ["--sessions-dir", str(tmp_path / "sessions"), "--repl"]
    result = CliRunner().invoke(cli, args, input=stdin)
    assert result.exit_code == 0, result.output
    assert "compacted the conversation (manual, 1 summary request(s))" in result.output
    assert "/compact took" in result.output  # on a pipe, where no spinner runs, the only clock
    summary_calls = [c for c in backend.calls if SUMMARY_ASK in c.last_user_text()]
    assert len(summary_calls) == 1
    assert "keep the port numbers" in summary_calls[0].last_user_text()  # the typed instructions
    after = backend.calls[-1]
    assert "third" in after.last_user_text()  # the chat went on after /compact
    assert "the staging port is 6543" in str(after.messages[0])  # the next turn starts from the summary
    assert "You said: second" not in str(after.messages)  # and no longer carries the turns it replaced
    [path] = list_session_files(tmp_path / "sessions")
    [boundary] = [r for r in load_transcript(path).records if isinstance(r, CompactBoundary)]
    assert boundary.trigger == "manual"


def test_after_compact_the_receipt_and_context_give_the_same_count(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    """The receipt said 7,760 tokens and /context 2,370 right after it: one left out the re-attached
    files, the other the system prompt and tools. Both are now the engine's own count."""
    import re

    url, _ = server
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "FOLDLINE.md").write_text("Use tabs. " * 300)  # an instruction file, re-attached
    args = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace)]
    args += ["--sessions-dir", str(tmp_path / "sessions"), "--repl"]
    stdin = "the port is 6543\nsecond " + "and more " * 2_000 + "\n/compact\n/context\n/exit\n"
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, args, input=stdin)
    assert result.exit_code == 0, result.output
    receipt = re.search(r"compacted the conversation \(manual.*?: ([\d,]+) -> ([\d,]+) tokens", result.output)
    context = re.search(r"context: ~([\d,]+) of", result.output)
    assert receipt is not None, result.output
    assert context is not None, result.output
    assert receipt.group(2) == context.group(1)


def test_a_compact_that_would_grow_the_context_is_not_committed_and_says_so(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    """/compact on a short conversation made it bigger (1,693 -> 2,379 tokens) and was kept."""
    url, backend = server
    workspace = tmp_path / "ws"
    workspace.mkdir()
    args = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace)]
    args += ["--sessions-dir", str(tmp_path / "sessions"), "--repl"]
    result = CliRunner(env={"COLUMNS": "200"}).invoke(cli, args, input="hi\n/compact\n/exit\n")
    assert result.exit_code == 0, result.output
    assert [c for c in backend.calls if SUMMARY_ASK in c.last_user_text()]  # the summary was written
    assert "would not make the context smaller" in result.output
    assert "nothing was compacted" in result.output
    [path] = list_session_files(tmp_path / "sessions")
    assert not [r for r in load_transcript(path).records if isinstance(r, CompactBoundary)]
