"""`foldline serve`: options reach the server, loopback by default, bad input is a usage error."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anthropic
import pytest
import uvicorn
from click.testing import CliRunner
from tests.server.conftest import MODEL, FakeClock, words

import foldline.cli.serve as serve_command
from foldline.cli import cli
from foldline.server.testing import run_server


def _capture(monkeypatch: pytest.MonkeyPatch, *, free_port: bool = True) -> dict[str, Any]:
    """What `serve` bound and served, with uvicorn's loop replaced.

    With `free_port` the address `serve` asks for is recorded as `asked` and a free loopback port is
    bound instead: the default 8765 may be held by a real server on the machine (or by a parallel
    test), and a test must not depend on it being free.
    """
    seen: dict[str, Any] = {}

    def fake_run(server: uvicorn.Server, sockets: list[socket.socket]) -> None:
        (listener,) = sockets
        host, port = listener.getsockname()[:2]
        seen.update(host=host, port=port, app=server.config.app)

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    if free_port:
        bind = serve_command._bind

        def free(host: str, port: int) -> socket.socket:
            seen["asked"] = (host, port)
            return bind("127.0.0.1", 0)

        monkeypatch.setattr(serve_command, "_bind", free)
    return seen


def test_defaults_bind_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture(monkeypatch)
    result = CliRunner().invoke(cli, ["serve"])
    assert result.exit_code == 0, result.output
    assert seen["asked"] == ("127.0.0.1", 8765)
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
    assert seen["port"] > 0  # port 0 was bound to a free port before anything was printed
    assert f":{seen['port']}" in result.output
    assert (state.config.context_window, state.config.api_key) == (999, "k")
    assert state.faults.for_request(1).kind == "529"


def test_allow_host_and_origin_reach_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture(monkeypatch)
    args = [
        "serve",
        "--allow-host",
        "box.lan",
        "--allow-host",
        "*",
        "--allow-origin",
        "http://localhost:3000",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    config = seen["app"].state.foldline.config
    assert config.allowed_hosts == ("box.lan", "*")
    assert config.allowed_origins == ("http://localhost:3000",)


@pytest.mark.parametrize(
    ("host", "allowed"), [("10.1.2.3", ("10.1.2.3",)), ("0.0.0.0", ()), ("localhost", ()), ("::1", ())]
)
def test_a_non_loopback_bind_address_is_an_allowed_host(
    monkeypatch: pytest.MonkeyPatch, host: str, allowed: tuple[str, ...]
) -> None:
    # Only loopback may be bound in tests: the address is what the guard allows, not what is bound.
    seen = _capture(monkeypatch)
    result = CliRunner().invoke(cli, ["serve", "--host", host])
    assert result.exit_code == 0, result.output
    assert seen["app"].state.foldline.config.allowed_hosts == allowed


@pytest.mark.parametrize("args", [["--faults", "1:418"], ["--scenario", "/nonexistent/s.json"]])
def test_bad_input_is_a_usage_error(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    _capture(monkeypatch)
    result = CliRunner().invoke(cli, ["serve", *args])
    assert result.exit_code == 2
    assert "Invalid value" in result.output


def test_a_busy_port_is_one_clear_error_before_any_banner(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture(monkeypatch, free_port=False)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = CliRunner().invoke(cli, ["serve", "--port", str(port)])
    assert result.exit_code == 1
    assert " on http://" not in result.output
    assert f"cannot serve on 127.0.0.1:{port}" in result.output
    assert "--port" in result.output
    assert "Traceback" not in result.output
    assert seen == {}


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
            found = re.search(r"foldline serve \(scripted\) on (http://127\.0\.0\.1:\d+)", line)
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


@pytest.mark.parametrize(("clock", "read_after_ten_minutes"), [("wall", False), ("frozen", True)])
def test_the_cache_clock_decides_whether_an_entry_outlives_its_ttl(
    monkeypatch: pytest.MonkeyPatch, clock: str, read_after_ten_minutes: bool
) -> None:
    seen = _capture(monkeypatch)
    wall = FakeClock()
    monkeypatch.setattr(serve_command, "time", SimpleNamespace(monotonic=wall))
    result = CliRunner().invoke(cli, ["serve", "--cache-clock", clock])
    assert result.exit_code == 0, result.output
    monkeypatch.undo()  # uvicorn runs for real now; the app keeps the clock it was given
    prompt = [
        {
            "role": "user",
            "content": [{"type": "text", "text": words(1500), "cache_control": {"type": "ephemeral"}}],
        }
    ]
    with (
        run_server(seen["app"]) as url,
        anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client,
    ):
        first = client.messages.create(model=MODEL, max_tokens=20, messages=prompt)  # type: ignore[arg-type]
        wall.advance(600)  # twice the 5-minute TTL
        again = client.messages.create(model=MODEL, max_tokens=20, messages=prompt)  # type: ignore[arg-type]
    assert first.usage.cache_creation_input_tokens == 1500
    assert (again.usage.cache_read_input_tokens == 1500) is read_after_ten_minutes
