"""Mutated valid requests never get a 5xx or a logged traceback from the server.

A malformed body that reached `flatten` before validation used to crash into a 500 `api_error`;
these tests pin the exact cases that did and fuzz the rest.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foldline.server.app import create_app
from foldline.server.testing import run_server

MODEL = "claude-sonnet-4-5"
_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

_VALID: list[dict[str, Any]] = [
    {"model": MODEL, "max_tokens": 50, "messages": [{"role": "user", "content": "hello"}]},
    {
        "model": MODEL,
        "max_tokens": 50,
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "tools": [{"name": "Read", "description": "read a file", "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "auto"},
        "metadata": {"user_id": "u"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "read a.py"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a.py"}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x = 1"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": _PNG}},
                    {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral", "ttl": "5m"}},
                ],
            },
        ],
    },
    {
        "model": MODEL,
        "max_tokens": 2000,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "stop_sequences": ["END"],
        "messages": [
            {"role": "user", "content": "think"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "text", "text": "ok"},
                ],
            },
            {"role": "user", "content": "more"},
        ],
    },
]

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*here, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*here, index))
    return found


@st.composite
def _mutated(draw: st.DrawFn) -> dict[str, Any]:
    body = copy.deepcopy(draw(st.sampled_from(_VALID)))
    body["stream"] = draw(st.booleans())
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(body)))
        if not path:
            continue
        parent: Any = body
        for part in path[:-1]:
            parent = parent[part]
        key = path[-1]
        action = draw(st.sampled_from(["replace", "delete", "add", "duplicate", "truncate"]))
        target = parent[key]
        if action == "replace":
            parent[key] = draw(_json)
        elif action == "delete" and isinstance(parent, dict):
            del parent[key]
        elif action == "add" and isinstance(target, dict):
            target[draw(st.text(max_size=6))] = draw(_json)
        elif action == "duplicate" and isinstance(target, list) and target:
            target.append(copy.deepcopy(target[draw(st.integers(0, len(target) - 1))]))
        elif action == "truncate" and isinstance(target, list):
            del target[draw(st.integers(0, len(target))) :]
    return body


def _check(status: int, content_type: str, text: str, stream: bool) -> None:
    assert status < 500, text
    if status >= 400:
        body = json.loads(text)
        assert body["type"] == "error", text
        assert isinstance(body["error"]["message"], str), text
        assert isinstance(body["error"]["type"], str)
        return
    assert status == 200
    if stream:
        assert content_type.startswith("text/event-stream")
        events = [line[7:] for line in text.splitlines() if line.startswith("event: ")]
        assert events[0] == "message_start", text
        assert events[-1] == "message_stop", text
        for line in text.splitlines():
            if line.startswith("data: "):
                json.loads(line[6:])
    else:
        message = json.loads(text)
        assert message["type"] == "message"
        assert message["role"] == "assistant"
        assert isinstance(message["content"], list)
        assert "usage" in message


class _Errors(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def log_errors() -> Any:
    handler = _Errors()
    root = logging.getLogger()
    root.addHandler(handler)
    yield handler.records
    root.removeHandler(handler)


_APP = create_app()


async def _post(path: str, **kwargs: Any) -> httpx2.Response:
    transport = httpx2.ASGITransport(app=_APP)
    async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as client:
        return await client.post(path, **kwargs)


async def _post_both(body: dict[str, Any]) -> tuple[httpx2.Response, httpx2.Response]:
    """`body` posted to /v1/messages, then to /v1/messages/count_tokens."""
    transport = httpx2.ASGITransport(app=_APP)
    async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as client:
        return (
            await client.post("/v1/messages", json=body),
            await client.post("/v1/messages/count_tokens", json=body),
        )


@pytest.mark.parametrize(
    ("key", "value"),
    [("messages", -1), ("messages", True), ("tools", -1), ("system", 3)],
)
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_malformed_field_is_a_400_not_a_500(key: str, value: Any, path: str, log_errors: Any) -> None:
    body = {**_VALID[1], key: value}
    response = asyncio.run(_post(path, json=body))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
    assert response.headers["request-id"].startswith("req_")
    assert not log_errors


def test_tool_description_list_is_a_400() -> None:
    tools = [{"name": "Read", "description": ["a"], "input_schema": {"type": "object"}}]
    response = asyncio.run(_post("/v1/messages", json={**_VALID[0], "tools": tools}))
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "tools.0.custom.description: Input should be a valid string"


@pytest.mark.parametrize("content", [b"not json", b"[1]", b"\xff\xfe", b'"x"', b""])
def test_non_object_bodies_get_the_envelope(content: bytes, log_errors: Any) -> None:
    headers = {"content-type": "application/json"}
    response = asyncio.run(_post("/v1/messages", content=content, headers=headers))
    assert response.status_code == 400
    assert response.json()["type"] == "error"
    assert not log_errors


@pytest.mark.slow
@settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(body=_mutated())
def test_fuzz_in_process(body: dict[str, Any], log_errors: Any) -> None:
    # One event loop and client for both calls: a loop per call was a third of the test's time.
    response, counted = asyncio.run(_post_both(body))
    _check(
        response.status_code,
        response.headers.get("content-type", ""),
        response.text,
        body.get("stream") is True,
    )
    assert counted.status_code < 500, counted.text
    assert not [r for r in log_errors if r.levelno >= logging.ERROR or r.exc_info]


@pytest.fixture(scope="module")
def real_url() -> Any:
    with run_server(create_app()) as url:
        yield url


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_mutated())
def test_fuzz_over_http(body: dict[str, Any], real_url: str, log_errors: Any) -> None:
    with httpx2.Client(base_url=real_url) as client:
        response = client.post("/v1/messages", json=body)
    _check(
        response.status_code,
        response.headers.get("content-type", ""),
        response.text,
        body.get("stream") is True,
    )
    assert not [r for r in log_errors if r.levelno >= logging.ERROR or r.exc_info]
