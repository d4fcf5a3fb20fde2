"""opencode 1.18.33 plays sessions against `foldline serve` through its `anthropic` provider: typed
through `opencode run`, and posted to a long-lived `opencode serve` as the peers benchmark drives it.

opencode is installed from npm into the interop cache (see `_harness`). Its workspace's
`opencode.json` points the provider's `baseURL` at the server; it takes its project folder from
`$PWD`, so the test sets that beside the working directory. Each turn is `opencode run --format json`
(`--continue` after the first), whose JSON events name every tool call and its final status.
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from tests.interop._harness import OPENCODE, client_path, foldline_server, installed, make_workspace

from foldline import interop
from foldline.interop import opencode_config

pytestmark = pytest.mark.slow

PROMPTS = (
    "Read calc.py and explain what it does",
    "Run `python3 -m unittest discover -s tests -q` and tell me the result",
    "Note for later: the staging port is 6543.",
    "Add a docstring to the mul function in calc.py",
    "Find every function defined in the workspace",
    "Read README.md and tests/test_calc.py",
    "Run `python3 -c 'import calc; print(calc.mul(4, 5))'`",
    "What is the staging port?",
    "Search the workspace for the word multiply",
    "List the files of the project",
)


def test_a_10_turn_session_gets_no_error_and_its_tools_run(tmp_path: Path) -> None:
    binary = installed(OPENCODE)
    workspace = make_workspace(tmp_path / "ws")
    home = tmp_path / "home"
    home.mkdir()
    with foldline_server(tmp_path) as server:
        (workspace / "opencode.json").write_text(json.dumps(opencode_config(server.url)))
        env = {"PATH": client_path(), "HOME": str(home), "PWD": str(workspace)}
        tools: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for turn, prompt in enumerate(PROMPTS):
            command = [str(binary), "run", "--format", "json", *(["--continue"] if turn else []), prompt]
            done = subprocess.run(
                command, cwd=workspace, env=env, capture_output=True, text=True, timeout=300, check=False
            )
            events = interop.events(done.stdout)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
            assert any(e["type"] == "text" for e in events), done.stdout[-2000:]
            tools += [e["part"] for e in events if e.get("part", {}).get("type") == "tool"]
            errors += [e for e in events if e["type"] == "error"]
        failed = [t for t in tools if t["state"]["status"] != "completed"]
        numbers = {
            "turns": len(PROMPTS),
            "requests": len(server.requests()),
            "non_2xx": len(server.non_2xx()),
            "tool_calls": len(tools),
            "failed_tool_calls": len(failed),
            "error_events": len(errors),
        }
        print(f"\nopencode 10 turns: {json.dumps(numbers)}")  # the Must-show numbers, in the test log
        assert server.non_2xx() == []
        assert errors == []
        assert len(tools) >= 5
        assert failed == [], [(t["tool"], t["state"]) for t in failed]


def test_opencode_served_answers_each_turn_whole_keeps_its_session_and_is_locked(tmp_path: Path) -> None:
    binary = installed(OPENCODE)
    make_workspace(tmp_path / "ws")
    with foldline_server(tmp_path) as server:
        client = interop.OpenCode(binary, tmp_path, server.url, turn_timeout=300)
        client.prepare()
        try:
            replies = [client.turn(prompt) for prompt in PROMPTS[:3]]
            # a reply that runs a tool is answered only once its loop is done, not after its first step
            ran = client.turn("Run `python3 -c 'import calc; print(calc.mul(4, 5))'`")
            recalled = client.turn("What is the staging port?")
            url = client.serve_url
            assert url is not None
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"{url}/session", timeout=30)  # no password: it runs commands
            refused.value.close()
            assert refused.value.code == 401
        finally:
            client.close()
        assert client.serve_url is None
        logged = [r for r in server.requests() if r["path"] == "/v1/messages"]
    assert all(reply.finished and reply.error is None for reply in [*replies, ran, recalled])
    assert all(reply.text for reply in replies)
    assert "20" in ran.text
    assert "6543" in recalled.text  # the same session all along
    assert server.non_2xx() == []
    # the run's tool call and the reply after it were both requests of the same turn
    assert any("python3 -c" in str(r.get("calls")) for r in logged)
