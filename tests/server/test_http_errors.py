"""Errors over HTTP: the validator's rules, auth, unknown paths and models, and no tracebacks ever."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
from tests.server.conftest import MODEL, Served, words

from foldline.api.validate import ValidationLimits, find_errors
from foldline.server.backend import BackendRequest, Reply
from foldline.server.caching import flatten, total_tokens
from foldline.server.config import ServerConfig

USER = {"role": "user", "content": "hi"}
CC = {"type": "ephemeral"}


def _body(**overrides: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 100, "messages": [USER], **overrides}


RULES: dict[str, dict[str, Any]] = {
    "tool pairing": _body(
        messages=[
            USER,
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}],
            },
            {"role": "user", "content": "and?"},
        ]
    ),
    "empty content": _body(messages=[{"role": "user", "content": []}]),
    "five breakpoints": _body(
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": f"t{i}", "cache_control": CC} for i in range(5)],
            }
        ]
    ),
    "max_tokens over the model maximum": _body(max_tokens=64_001),
}


@pytest.mark.parametrize("rule", list(RULES))
def test_validator_rules_reach_the_client_verbatim(serve: Callable[..., Served], rule: str) -> None:
    served = serve()
    body = RULES[rule]
    expected = find_errors(
        body,
        ValidationLimits(
            max_output_tokens={"": 64_000}, context_window=200_000, input_tokens=total_tokens(flatten(body))
        ),
    )[0]
    with pytest.raises(anthropic.APIStatusError) as caught:
        served.client.messages.create(**body, timeout=30)  # an explicit timeout skips the SDK's size guard
    assert caught.value.status_code == expected.status == 400
    assert caught.value.body == {  # type: ignore[comparison-overlap]
        "type": "error",
        "error": {"type": "invalid_request_error", "message": expected.message},
        "request_id": caught.value.response.headers["request-id"],
    }


def test_prompt_too_long(serve: Callable[..., Served]) -> None:
    served = serve(config=ServerConfig(context_window=500))
    body = _body(messages=[{"role": "user", "content": words(600)}])
    with pytest.raises(anthropic.BadRequestError) as caught:
        served.client.messages.create(**body)
    assert (
        caught.value.body["error"]["message"]
        == f"prompt is too long: {total_tokens(flatten(body))} tokens > 500 maximum"
    )  # type: ignore[index]


def test_request_too_large_is_413(serve: Callable[..., Served]) -> None:
    served = serve(config=ServerConfig(max_request_bytes=2048))
    with pytest.raises(anthropic.APIStatusError) as caught:
        served.client.messages.create(**_body(messages=[{"role": "user", "content": "x" * 4000}]))
    assert caught.value.status_code == 413
    assert caught.value.body["error"]["type"] == "request_too_large"  # type: ignore[index]
    message = caught.value.body["error"]["message"]  # type: ignore[index]
    assert message.startswith("Request exceeds the maximum allowed number of bytes.")


def test_api_key_is_checked(serve: Callable[..., Served]) -> None:
    served = serve(config=ServerConfig(api_key="s3cret"), api_key="wrong")
    with pytest.raises(anthropic.AuthenticationError) as caught:
        served.client.messages.create(**_body())
    assert caught.value.body["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}  # type: ignore[index]
    assert served.client.with_options(api_key="s3cret").messages.create(**_body()).role == "assistant"
    bearer = anthropic.Anthropic(base_url=served.url, auth_token="s3cret", api_key=None, max_retries=0)
    with bearer:
        assert bearer.messages.count_tokens(model=MODEL, messages=[USER]).input_tokens == 1


def test_unknown_model_is_404(serve: Callable[..., Served]) -> None:
    served = serve()
    with pytest.raises(anthropic.NotFoundError) as caught:
        served.client.messages.create(**_body(model="gpt-4o"))
    assert caught.value.body["error"] == {"type": "not_found_error", "message": "model: gpt-4o"}  # type: ignore[index]


def _raw(served: Served, method: str, path: str, **kwargs: Any) -> httpx2.Response:
    with httpx2.Client() as http:
        return http.request(method, served.url + path, **kwargs)


@pytest.mark.parametrize(
    ("method", "path", "content", "status", "error_type"),
    [
        ("POST", "/v1/messages", b"{not json", 400, "invalid_request_error"),
        ("POST", "/v1/messages", b"[1, 2]", 400, "invalid_request_error"),
        ("GET", "/v1/nothing", b"", 404, "not_found_error"),
        ("GET", "/v1/messages", b"", 405, "invalid_request_error"),
    ],
    ids=["bad-json", "not-an-object", "unknown-path", "wrong-method"],
)
def test_malformed_requests_get_the_envelope(
    serve: Callable[..., Served], method: str, path: str, content: bytes, status: int, error_type: str
) -> None:
    headers = {"content-type": "application/json"}
    response = _raw(serve(), method, path, content=content, headers=headers)
    assert response.status_code == status
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == error_type
    assert body["request_id"].startswith("req_")
    assert "Traceback" not in response.text


class _Broken:
    def reply(self, request: BackendRequest) -> Reply:
        raise RuntimeError("secret internal detail")


@pytest.mark.parametrize("stream", [False, True])
def test_a_crash_is_an_api_error_without_traceback(serve: Callable[..., Served], stream: bool) -> None:
    served = serve(backend=_Broken())
    response = _raw(served, "POST", "/v1/messages", json=_body(stream=stream))
    assert response.status_code == 500
    assert response.json()["error"] == {"type": "api_error", "message": "Internal server error"}
    assert "secret" not in response.text
    assert "Traceback" not in response.text


def test_strict_scenario_exhaustion_is_a_clear_500(serve: Callable[..., Served]) -> None:
    from foldline.server.backend import ScriptedBackend

    served = serve(backend=ScriptedBackend(replies=[{"text": "only one"}], select="sequence", strict=True))
    served.client.messages.create(**_body())
    with pytest.raises(anthropic.InternalServerError) as caught:
        served.client.messages.create(**_body())
    assert "scenario has 1 replies" in caught.value.body["error"]["message"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("model", "limit"),
    [
        ("claude-3-5-haiku-20241022", 8_192),
        ("claude-opus-4-1-20250805", 32_000),
        ("claude-sonnet-4-5", 64_000),
    ],
)
def test_max_tokens_over_the_models_own_limit_is_refused(
    serve: Callable[..., Served], model: str, limit: int
) -> None:
    """Rule A40 per model, in the API's words: `foldline serve` no longer allows 64K to every model."""
    served = serve()
    with pytest.raises(anthropic.BadRequestError) as caught:
        served.client.messages.create(model=model, max_tokens=limit + 1, messages=[USER], timeout=30)
    assert caught.value.body["error"]["message"] == (  # type: ignore[index]
        f"max_tokens: {limit + 1} > {limit}, which is the maximum allowed number of output tokens for {model}"
    )
    assert served.client.messages.create(model=model, max_tokens=limit, messages=[USER], timeout=30).content
