"""What `foldline chat` turns on without being told: cache_edits where the server says it takes them;
and the switches for thinking and the 1M window."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner

from foldline.cli import cli
from foldline.providers.anthropic import discover_capabilities
from foldline.providers.base import CAPABILITIES_HEADER, advertised_capabilities
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.caching import CACHE_EDITS_BETA
from foldline.server.testing import run_server


class _Recorder:
    """The server app, recording the `anthropic-beta` header of every `/v1/messages` request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.betas: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/messages":
            headers = dict(scope["headers"])
            self.betas.append(headers.get(b"anthropic-beta", b"").decode())
        await self.app(scope, receive, send)


@pytest.fixture
def served() -> Iterator[tuple[str, ScriptedBackend, _Recorder]]:
    backend = ScriptedBackend()  # echoes the last user message
    recorder = _Recorder(create_app(backend=backend))
    with run_server(recorder) as url:  # type: ignore[arg-type]
        yield url, backend, recorder


def _chat(url: str, tmp_path: Path, *args: str) -> tuple[int, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    argv = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace)]
    result = CliRunner().invoke(cli, [*argv, "--sessions-dir", str(tmp_path / "s"), *args])
    return result.exit_code, result.output


def test_foldline_serve_advertises_cache_edits_on_every_answer(served: tuple[str, Any, _Recorder]) -> None:
    url, _, _ = served
    headers = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    answers = [
        httpx2.get(f"{url}/v1/models/claude-sonnet-4-5", headers=headers),
        httpx2.post(f"{url}/v1/messages", headers=headers, json={"model": "claude-sonnet-4-5"}),  # invalid
        httpx2.get(f"{url}/no/such/path", headers=headers),
    ]
    assert [a.headers.get(CAPABILITIES_HEADER) for a in answers] == [CACHE_EDITS_BETA] * 3
    assert answers[1].status_code == 400


def test_chat_uses_cache_edits_against_foldline_serve_without_a_flag(
    served: tuple[str, Any, _Recorder], tmp_path: Path
) -> None:
    url, _, recorder = served
    assert _chat(url, tmp_path, "-p", "hi")[0] == 0
    assert CACHE_EDITS_BETA in recorder.betas[-1]
    assert _chat(url, tmp_path, "--no-cache-edits", "-p", "hi")[0] == 0
    assert CACHE_EDITS_BETA not in recorder.betas[-1]


class _PlainGet(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


def test_a_server_that_advertises_nothing_gets_no_cache_edits() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PlainGet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert discover_capabilities(url, "k", "claude-sonnet-4-5", timeout=5) is None
    finally:
        server.shutdown()
        server.server_close()
    assert discover_capabilities(None, "k", "claude-sonnet-4-5", timeout=5) is None  # the public API
    assert discover_capabilities(url, "k", "claude-sonnet-4-5", timeout=5) is None  # gone: no error


def test_the_header_names_the_beta_to_send() -> None:
    caps = advertised_capabilities("some-other-beta, cache-edits-2030-01-01")
    assert caps is not None
    assert caps.supports_cache_edits
    assert caps.cache_edits_beta == "cache-edits-2030-01-01"
    nothing = advertised_capabilities("")
    assert nothing is not None
    assert not nothing.supports_cache_edits
    assert advertised_capabilities(None) is None


def test_thinking_is_off_by_default_and_switched_on_with_a_budget(
    served: tuple[str, ScriptedBackend, _Recorder], tmp_path: Path
) -> None:
    url, backend, _ = served
    assert _chat(url, tmp_path, "-p", "hi")[0] == 0
    assert backend.calls[-1].thinking is None
    assert _chat(url, tmp_path, "--thinking", "-p", "hi")[0] == 0
    default = backend.calls[-1]
    assert default.thinking == {"type": "enabled", "budget_tokens": 8_000}
    assert default.max_tokens > 8_000  # the answer keeps room beside the thinking
    assert _chat(url, tmp_path, "--thinking-budget", "2048", "-p", "hi")[0] == 0
    assert backend.calls[-1].thinking == {"type": "enabled", "budget_tokens": 2048}
    assert _chat(url, tmp_path, "--no-thinking", "--thinking-budget", "2048", "-p", "hi")[0] == 0
    assert backend.calls[-1].thinking is None


def test_the_1m_switch_sends_the_long_context_beta_where_the_model_has_it(
    served: tuple[str, Any, _Recorder], tmp_path: Path
) -> None:
    url, _, recorder = served
    assert _chat(url, tmp_path, "-p", "hi")[0] == 0
    assert "context-1m" not in recorder.betas[-1]
    assert _chat(url, tmp_path, "--1m", "-p", "hi")[0] == 0
    assert "context-1m-2025-08-07" in recorder.betas[-1]
    code, out = _chat(url, tmp_path, "--1m", "--model", "claude-3-5-haiku-20241022", "-p", "hi")
    assert code != 0
    assert "no 1M-token window" in out
