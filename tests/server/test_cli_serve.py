"""`foldline serve`: options reach the server, loopback by default, bad input is a usage error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import pytest
import uvicorn
from click.testing import CliRunner

from foldline.cli import cli


def _capture(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def fake_run(app: Any, **kwargs: Any) -> None:
        seen.update(kwargs, app=app)

    monkeypatch.setattr(uvicorn, "run", fake_run)
    return seen


def test_defaults_bind_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture(monkeypatch)
    result = CliRunner().invoke(cli, ["serve"])
    assert result.exit_code == 0, result.output
    assert seen["host"] == "127.0.0.1"
    state = seen["app"].state.foldline
    assert state.config.api_key is None
    assert state.faults.rules == ()


def test_options_reach_the_app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = _capture(monkeypatch)
    scenario = tmp_path / "s.json"
    scenario.write_text('[{"text": "hi"}]')
    args = [
        "serve",
        "--port",
        "0",
        "--scenario",
        str(scenario),
        "--faults",
        "1:529",
        "--context-window",
        "999",
    ]
    result = CliRunner().invoke(cli, [*args, "--api-key", "k"])
    assert result.exit_code == 0, result.output
    state = seen["app"].state.foldline
    assert (seen["port"], state.config.context_window, state.config.api_key) == (0, 999, "k")
    assert state.faults.for_request(1).kind == "529"


@pytest.mark.parametrize("args", [["--faults", "1:418"], ["--scenario", "/nonexistent/s.json"]])
def test_bad_input_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    _capture(monkeypatch)
    result = CliRunner().invoke(cli, ["serve", *args])
    assert result.exit_code == 2
    assert "Invalid value" in result.output


def test_the_real_command_serves_the_sdk(tmp_path: Path) -> None:
    scenario = tmp_path / "s.json"
    scenario.write_text('[{"text": "from the scenario"}]')
    command = [sys.executable, "-c", "from foldline.cli import main; main()", "serve", "--port", "0"]
    process = subprocess.Popen(
        [*command, "--api-key", "k", "--scenario", str(scenario)], stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        url = ""
        for line in process.stderr:
            found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
            if found:
                url = found.group(1)
                break
        assert url, f"foldline serve did not start (exit code {process.poll()})"
        with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client:
            reply = client.messages.create(
                model="claude-sonnet-4-5", max_tokens=20, messages=[{"role": "user", "content": "hi"}]
            )
        assert reply.content[0].text == "from the scenario"  # type: ignore[union-attr]
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
