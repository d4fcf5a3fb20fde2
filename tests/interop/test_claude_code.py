"""Claude Code 2.1.328, thinking on (its default), plays multi-turn sessions against `foldline serve`.

Claude Code is installed from npm into the interop cache (see `_harness`) and run as it ships: `-p`
for the first turn, `--continue` for the rest, in a trusted throwaway workspace under a private
HOME. The server counts every answer it sends; the session's own transcript, written by Claude Code,
says how many tools it called and whether any failed. That transcript is then fresh input for
`foldline show`, `foldline request` and `foldline chat --resume` against the same server.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from tests.interop._harness import (
    CLAUDE_CODE,
    Server,
    foldline_command,
    foldline_server,
    installed,
    make_workspace,
    tool_stats,
)

from foldline._json import loads
from foldline.api.validate import ValidationLimits, find_errors
from foldline.errors import ClientRunError
from foldline.interop import ClaudeCode

pytestmark = pytest.mark.slow

MODEL = "claude-sonnet-4-5"
PROMPTS = (
    "Read calc.py and explain what it does",
    "Run `python3 -m unittest discover -s tests -q` and tell me the result",
    "Note for later: the staging port is 6543.",
    "Add a docstring to calc.py",
    "Find every function defined in the workspace",
    "Run `python3 -c 'import calc; print(calc.add(2, 3))'`",
    "Read README.md and tests/test_calc.py",
    "What is the staging port?",
    "Search the workspace for the word multiply",
    "Fix anything in calc.py that the tests do not cover",
)
"""Ten prompts a user of a small project types; a 20-turn session plays them twice."""


class Session:
    """One Claude Code session (`interop.ClaudeCode`): its folders, the server, what each turn printed."""

    def __init__(self, root: Path, server: Server, binary: Path) -> None:
        self.root = root
        self.server = server
        self.client = ClaudeCode(binary, root, server.url, model=MODEL)
        self.results = self.client.results

    @property
    def home(self) -> Path:
        return self.client.home

    @property
    def workspace(self) -> Path:
        return self.client.workspace

    def env(self) -> dict[str, str]:
        return self.client.env()

    def turn(self, prompt: str) -> dict[str, Any]:
        """One `claude -p` turn (`--continue` after the first); its JSON result."""
        try:
            return self.client.turn(prompt)
        except ClientRunError as e:
            pytest.fail(str(e))

    def transcripts(self) -> list[Path]:
        return self.client.transcripts()


def _prepare(root: Path, extra: dict[str, str] | None = None) -> None:
    """A trusted workspace whose tools are allowed (Claude Code refuses to skip permissions as root)."""
    make_workspace(root / "ws", extra)
    ClaudeCode(Path("claude"), root, "").prepare()


def _report(name: str, session: Session) -> dict[str, int]:
    calls, failed, thinking = tool_stats(session.transcripts())
    numbers = {
        "turns": len(session.results),
        "turns_in_error": sum(1 for r in session.results if r.get("is_error")),
        "requests": len(session.server.requests()),
        "non_2xx": len(session.server.non_2xx()),
        "tool_calls": calls,
        "failed_tool_calls": failed,
        "thinking_blocks": thinking,
    }
    print(f"\n{name}: {json.dumps(numbers)}")  # the Must-show numbers, in the test log
    return numbers


def test_a_20_turn_session_with_thinking_gets_no_error_and_its_transcript_is_foldline_input(
    tmp_path: Path,
) -> None:
    binary = installed(CLAUDE_CODE)
    _prepare(tmp_path)
    with foldline_server(tmp_path) as server:
        session = Session(tmp_path, server, binary)
        for prompt in PROMPTS * 2:
            session.turn(prompt)
        numbers = _report("claude-code 20 turns", session)
        assert numbers["non_2xx"] == 0, server.non_2xx()
        assert numbers["turns_in_error"] == 0, [r.get("result") for r in session.results if r.get("is_error")]
        assert numbers["tool_calls"] >= 10
        assert numbers["failed_tool_calls"] == 0
        assert numbers["thinking_blocks"] > 0  # thinking was on, and every reply sent back was accepted
        _foldline_takes_the_transcript(session)


def _foldline(session: Session, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**session.env(), "HOME": str(session.root / "foldline-home")}
    return subprocess.run(
        foldline_command(*args),
        cwd=session.workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _foldline_takes_the_transcript(session: Session) -> None:
    """`foldline show`, `request` and `chat --resume` read what Claude Code wrote; chat continues it."""
    (transcript,) = session.transcripts()
    shown = _foldline(session, "show", str(transcript))
    assert shown.returncode == 0, shown.stderr
    assert PROMPTS[0] in shown.stdout
    request = _foldline(session, "request", str(transcript), "--body-only")
    assert request.returncode == 0, request.stderr
    body = loads(request.stdout)
    assert find_errors(body, ValidationLimits()) == []
    assert PROMPTS[-1] in json.dumps(body["messages"])
    before = len(session.server.requests())
    chat = _foldline(
        session,
        "chat",
        "--resume",
        str(transcript),
        "-p",
        "What is the staging port?",
        "--base-url",
        session.server.url,
        "--api-key",
        "foldline-interop",
        "--output-format",
        "json",
    )
    assert chat.returncode == 0, chat.stdout + chat.stderr
    result = json.loads(chat.stdout.strip().splitlines()[-1])
    assert result["is_error"] is False
    assert "6543" in result["result"]  # a fact stated in the Claude Code session, answered by foldline
    assert len(session.server.requests()) > before
    assert session.server.non_2xx() == []


def test_a_40k_window_is_survived_through_claude_codes_own_compaction(tmp_path: Path) -> None:
    binary = installed(CLAUDE_CODE)
    modules = {
        f"pkg/mod_{i}.py": "".join(
            f"def f_{i}_{j}(x):\n    return x * {j} + {i}  # step {j}\n" for j in range(80)
        )
        for i in range(20)
    }
    _prepare(tmp_path, modules)
    with foldline_server(tmp_path, "--context-window", "40000") as server:
        session = Session(tmp_path, server, binary)
        for i in range(20):  # the same 20 turns as on the full window
            session.turn(f"Read pkg/mod_{i}.py and tell me what f_{i}_3 returns")
        numbers = _report("claude-code 40k window", session)
        compactions = sum(
            1
            for path in session.transcripts()
            for line in path.read_text().splitlines()
            if json.loads(line).get("subtype") == "compact_boundary"
        )
        print(f"compactions: {compactions}")
        assert compactions >= 1  # the window was reached, and Claude Code compacted
        # Every refusal is the one Claude Code compacts on, in the API's words.
        understood = re.compile(r"prompt is too long: \d+ tokens > 40000 maximum")
        assert all(r["status"] == 400 and understood.fullmatch(r["error"]) for r in server.non_2xx()), (
            server.non_2xx()
        )
        assert numbers["turns"] == 20
        assert numbers["turns_in_error"] == 0  # every turn survived, through Claude Code's compactions
        assert numbers["tool_calls"] >= 10
        assert numbers["failed_tool_calls"] == 0
