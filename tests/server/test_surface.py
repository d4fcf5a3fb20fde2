"""The rest of the surface real clients use: models, count_tokens, the window's stop, the access log."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette
from tests.server.conftest import MODEL, words

from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.caching import flatten, total_tokens
from foldline.server.config import ServerConfig


def _send(
    app: Starlette, method: str, path: str, body: Mapping[str, Any] | None = None, **headers: str
) -> httpx2.Response:
    async def go() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.request(method, path, json=body, headers=headers)

    return asyncio.run(go())


def test_models_are_listed_and_found_by_id_or_alias() -> None:
    app = create_app()
    listed = _send(app, "GET", "/v1/models").json()
    ids = [m["id"] for m in listed["data"]]
    assert "claude-sonnet-4-5-20250929" in ids
    assert listed["has_more"] is False
    assert (listed["first_id"], listed["last_id"]) == (ids[0], ids[-1])
    assert all(m["type"] == "model" and m["display_name"] and m["created_at"] for m in listed["data"])
    assert _send(app, "GET", "/v1/models/claude-sonnet-4-5").json()["id"] == "claude-sonnet-4-5-20250929"
    assert (
        _send(app, "GET", "/v1/models/claude-haiku-4-5-20251001").json()["display_name"] == "Claude Haiku 4.5"
    )
    missing = _send(app, "GET", "/v1/models/gpt-4o")
    assert missing.status_code == 404
    assert missing.json()["error"] == {"type": "not_found_error", "message": "model: gpt-4o"}


def test_models_need_the_key_when_one_is_set() -> None:
    app = create_app(ServerConfig(api_key="secret"))
    assert _send(app, "GET", "/v1/models").status_code == 401
    assert _send(app, "GET", "/v1/models", **{"x-api-key": "secret"}).status_code == 200


def test_count_tokens_takes_what_messages_takes() -> None:
    app = create_app(backend=ScriptedBackend())
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 32_000,
        "stream": True,
        "metadata": {"user_id": '{"device_id": "d"}'},
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "tools": [
            {"name": "Read", "description": "read", "input_schema": {"type": "object"}, "defer_loading": True}
        ],
        "tool_choice": {"type": "auto"},
        "thinking": {"type": "enabled", "budget_tokens": 31_999, "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    betas = "claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27"
    counted = _send(app, "POST", "/v1/messages/count_tokens", body, **{"anthropic-beta": betas})
    assert counted.status_code == 200, counted.text
    expected = total_tokens(flatten(body))
    assert counted.json() == {
        "input_tokens": expected,
        "context_management": {"original_input_tokens": expected},
    }
    sent = _send(app, "POST", "/v1/messages", {**body, "stream": False}, **{"anthropic-beta": betas})
    assert sent.status_code == 200, sent.text


def test_context_management_without_its_beta_is_refused_by_count_tokens_too() -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "context_management": {"edits": [{"type": "clear_thinking_20251015"}]},
    }
    response = _send(create_app(), "POST", "/v1/messages/count_tokens", body)
    assert response.status_code == 400
    assert "context-management-2025-06-27" in response.json()["error"]["message"]


def _long(model: str, prompt: int, max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": words(prompt)}],
    }


def test_newer_models_stop_at_the_window_instead_of_refusing_the_output_room() -> None:
    backend = ScriptedBackend(replies=[{"text": words(400, "o")}])
    app = create_app(ServerConfig(context_window=1_000), backend=backend)
    answer = _send(app, "POST", "/v1/messages", _long(MODEL, 800, 32_000))
    assert answer.status_code == 200, answer.text
    assert answer.json()["stop_reason"] == "model_context_window_exceeded"
    assert answer.json()["usage"]["output_tokens"] == 1_000 - total_tokens(flatten(_long(MODEL, 800, 1)))
    older = _send(app, "POST", "/v1/messages", _long("claude-3-7-sonnet-20250219", 800, 32_000))
    assert older.status_code == 400
    assert older.json()["error"]["message"].startswith("input length and `max_tokens` exceed context limit: ")
    beta = {"anthropic-beta": "model-context-window-exceeded-2025-08-26"}
    assert (
        _send(
            app, "POST", "/v1/messages", _long("claude-3-7-sonnet-20250219", 800, 32_000), **beta
        ).status_code
        == 200
    )


def test_a_prompt_over_the_window_gets_the_text_claude_code_compacts_on() -> None:
    app = create_app(ServerConfig(context_window=1_000))
    body = _long(MODEL, 1_200, 32_000)
    response = _send(app, "POST", "/v1/messages", body)
    assert response.status_code == 400
    prompt = total_tokens(flatten(body))
    assert response.json()["error"]["message"] == f"prompt is too long: {prompt} tokens > 1000 maximum"


def test_every_answered_request_is_logged_with_its_status(tmp_path: Path) -> None:
    log = tmp_path / "requests.jsonl"
    app = create_app(ServerConfig(request_log=str(log)))
    _send(app, "GET", "/v1/models")
    _send(app, "POST", "/v1/messages", _long(MODEL, 5, 10))
    _send(app, "POST", "/v1/messages", {"model": MODEL})
    _send(app, "GET", "/v1/nowhere")
    _send(app, "POST", "/v1/messages", _long(MODEL, 5, 10), origin="https://evil.example")  # the guard's 403
    expected = [
        ("GET", "/v1/models", 200),
        ("POST", "/v1/messages", 200),
        ("POST", "/v1/messages", 400),
        ("GET", "/v1/nowhere", 404),
        ("POST", "/v1/messages", 403),
    ]
    assert [(r.method, r.path, r.status) for r in app.state.foldline.access] == expected
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["method"], r["path"], r["status"]) for r in lines] == expected
    assert "error" not in lines[0]
    assert lines[2]["error"] == "messages: Field required"
    assert lines[4]["error"].startswith("Origin 'https://evil.example' is not allowed")


def test_an_answered_messages_request_is_logged_with_its_bill(tmp_path: Path) -> None:
    """A client the server cannot see into (a real agent's command line) is priced from this log."""
    log = tmp_path / "requests.jsonl"
    app = create_app(ServerConfig(request_log=str(log)))
    body = {**_long(MODEL, 5, 10), "tools": [{"name": "Read", "input_schema": {"type": "object"}}]}
    first = _send(app, "POST", "/v1/messages", body).json()
    second = _send(app, "POST", "/v1/messages", body).json()
    _send(app, "POST", "/v1/messages", {"model": MODEL})
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [line["usage"] for line in lines[:2]] == [first["usage"], second["usage"]]
    assert [(line["model"], line["tools"]) for line in lines[:2]] == [(MODEL, 1), (MODEL, 1)]
    assert "usage" not in lines[2]  # a refused request was billed nothing
    assert app.state.foldline.access[0].billed == {"model": MODEL, "tools": 1, "usage": first["usage"]}


def test_consecutive_user_messages_are_combined_not_refused() -> None:
    body = {
        "model": MODEL,
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    }
    assert _send(create_app(), "POST", "/v1/messages", body).status_code == 200
    strict = create_app(ServerConfig(allow_consecutive_roles=False))
    assert "roles must alternate" in _send(strict, "POST", "/v1/messages", body).json()["error"]["message"]


@pytest.mark.parametrize(
    "beta",
    [
        "claude-code-20250219",
        "advanced-tool-use-2025-11-20",
        "structured-outputs-2025-11-13",
        "thinking-token-count-2026-05-13",
        "fine-grained-tool-streaming-2025-05-14",
    ],
)
def test_betas_without_a_server_side_effect_are_accepted(beta: str) -> None:
    response = _send(create_app(), "POST", "/v1/messages", _long(MODEL, 5, 10), **{"anthropic-beta": beta})
    assert response.status_code == 200
