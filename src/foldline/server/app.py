"""The Starlette application behind `foldline serve`: routes, auth, validation, caching, faults.

Request pipeline for `POST /v1/messages` (one concern per step):
guard (Host, Origin 403; Content-Type 415; body size 413 while it streams in; see `guard`) ->
auth (401) -> request number and fault (429/529/500, stall) -> JSON (400) ->
validator (400/413) -> cache_edits (400) -> model (404) -> backend -> prompt cache and
usage -> JSON body or SSE stream (with mid-stream faults).

Invariants: every error is the API's envelope `{"type": "error", "error": {...}, "request_id": ...}`
with its status; nothing ever puts a traceback in a response (unexpected exceptions become a 500
`api_error`, or an `error` event once a stream has started); CORS headers go only to origins the
config allows; the cache is written only for requests that were accepted.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from foldline._json import dumps, loads
from foldline.api.validate import ValidationLimits, validate_request, validate_window
from foldline.errors import RequestValidationError
from foldline.server._envelope import error_response
from foldline.server.backend import Backend, BackendRequest, ScenarioExhaustedError, ScriptedBackend
from foldline.server.caching import (
    CACHE_EDITS_BETA,
    FlatBlock,
    FlattenMemo,
    PromptCache,
    ReferenceRegistry,
    backend_messages,
    cache_edits_deletions,
    deleted_tokens,
    flatten,
    has_beta,
    total_tokens,
)
from foldline.server.config import ServerConfig
from foldline.server.envelope import FAULT_MESSAGES, error_body, request_id
from foldline.server.faults import Fault, FaultPlan
from foldline.server.guard import BodyTooLarge, RequestGuard
from foldline.server.sse import error_event, format_event, message_events

__all__ = ["RequestRecord", "ServerState", "create_app", "error_body"]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One `/v1/messages` request as the server handled it (for tests and the demo)."""

    number: int
    status: int
    fault: str | None
    stream: bool


@dataclass
class ServerState:
    """Everything one server instance remembers between requests."""

    config: ServerConfig
    backend: Backend
    faults: FaultPlan
    cache: PromptCache
    memo: FlattenMemo = field(default_factory=FlattenMemo)
    """Keys and token counts of blocks seen before, so a resent history is not hashed again."""
    references: ReferenceRegistry = field(default_factory=ReferenceRegistry)
    records: list[RequestRecord] = field(default_factory=list)
    _count: int = 0

    def next_number(self) -> int:
        """Number the next `/v1/messages` request (1-based, retries included)."""
        self._count += 1
        return self._count


class _ApiError(Exception):
    """An error answer in the making: status, type, message, extra headers."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


def _check_auth(request: Request, state: ServerState) -> None:
    expected = state.config.api_key
    if expected is None:
        return
    given = request.headers.get("x-api-key") or ""
    bearer = request.headers.get("authorization", "")
    if not given and bearer.lower().startswith("bearer "):
        given = bearer[7:]
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise _ApiError(401, "invalid x-api-key")


def _fault_error(fault: Fault) -> _ApiError | None:
    if fault.kind == "429":
        seconds = f"{fault.retry_after:g}"
        return _ApiError(429, FAULT_MESSAGES[429], {"retry-after": seconds})
    if fault.kind in ("529", "500"):
        status = int(fault.kind)
        return _ApiError(status, FAULT_MESSAGES[status])
    return None


async def _read_json(request: Request) -> tuple[dict[str, Any], int]:
    raw = await request.body()  # the guard stops a body over the cap while it streams in
    try:
        body = loads(raw)
    except ValueError as e:
        raise _ApiError(400, f"There was an error parsing the body: {e}") from None
    if not isinstance(body, dict):
        raise _ApiError(400, "Input should be a valid dictionary")
    return body, len(raw)


def _limits(state: ServerState, input_tokens: int | None) -> ValidationLimits:
    config = state.config
    return ValidationLimits(
        max_output_tokens={"": config.max_output_tokens},
        context_window=config.context_window,
        input_tokens=input_tokens,
        max_request_bytes=config.max_request_bytes,
        max_media=config.max_media,
        prefill_allowed=config.prefill_allowed,
    )


@dataclass(frozen=True, slots=True)
class _Accepted:
    body: dict[str, Any]
    blocks: list[FlatBlock]
    deleted: set[str]


def _accept(request: Request, state: ServerState, body: dict[str, Any], size: int) -> _Accepted:
    """Validate a messages body; raises `RequestValidationError` or `_ApiError` when rejected."""
    # flatten assumes a well-formed body, so the schema and every rule but the window run first.
    validate_request(body, _limits(state, None), body_bytes=size)
    blocks = flatten(body, state.memo)
    beta = has_beta(request.headers.get("anthropic-beta"), CACHE_EDITS_BETA)
    try:
        deleted = cache_edits_deletions(body, blocks, beta_enabled=beta, known=state.references.spans)
        edits_error = None
    except RequestValidationError as e:
        deleted, edits_error = set(), e
    # Deleted spans do not occupy the window: cache_edits are how a client stays inside it.
    prompt = total_tokens(blocks) - deleted_tokens(blocks, deleted)
    # Every other rule passed above and none of them reads the prompt size: the window is all
    # that is left to check.
    validate_window(body, _limits(state, prompt))
    if edits_error is not None:
        raise edits_error
    model = str(body["model"])
    if not model.startswith(state.config.model_prefixes):
        raise _ApiError(404, f"model: {model}")
    return _Accepted(body, blocks, deleted)


def _respond(state: ServerState, accepted: _Accepted) -> dict[str, Any]:
    """Ask the backend, bill the cache, and build the complete response body."""
    body, blocks = accepted.body, accepted.blocks
    backend_request = BackendRequest(
        model=str(body["model"]),
        messages=backend_messages(body, accepted.deleted),
        system=body.get("system"),
        tools=list(body.get("tools") or ()),
        max_tokens=int(body["max_tokens"]),
        thinking=body.get("thinking"),
        request_key=blocks[-1].key if blocks else "",
    )
    rendered = state.backend.reply(backend_request).render(backend_request)
    usage = state.cache.apply(blocks, state.config.min_cacheable(backend_request.model), accepted.deleted)
    state.references.record(blocks)
    return rendered.message(backend_request, usage.as_usage(rendered.output_tokens))


class _EventStream(StreamingResponse):
    """An SSE response that can stall, emit an `error` event, or drop the connection mid-stream."""

    def __init__(self, message: Mapping[str, Any], fault: Fault | None, chunk_tokens: int, request_id: str):
        super().__init__(
            (),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "request-id": request_id},
        )
        self.message = message
        self.fault = fault
        self.chunk_tokens = chunk_tokens

    async def _frames(self) -> AsyncIterator[bytes | None]:
        """SSE frames; None means: close the connection now, without finishing the response."""
        fault = self.fault
        for n, (name, data) in enumerate(message_events(self.message, chunk_tokens=self.chunk_tokens)):
            if fault is not None and n == fault.after_events:
                if fault.kind == "cut":
                    yield None
                    return
                if fault.kind == "error":
                    yield error_event("overloaded_error", FAULT_MESSAGES[529])
                    return
                if fault.kind == "stall":
                    await anyio.sleep(fault.seconds)
            yield format_event(name, data)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        async for frame in self._frames():
            if frame is None:
                return  # the server closes the socket on an unfinished response: a real cut
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class _CutBody(Response):
    """A non-streaming response whose body is cut halfway."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        await send(
            {"type": "http.response.body", "body": self.body[: len(self.body) // 2], "more_body": True}
        )


def _plain_response(message: dict[str, Any], fault: Fault | None, request_id: str) -> Response:
    headers = {"request-id": request_id}
    if fault is not None and fault.kind == "error":
        return error_response(529, FAULT_MESSAGES[529])
    if fault is not None and fault.kind == "cut":
        return _CutBody(dumps(message), media_type="application/json", headers=headers)
    return Response(dumps(message), media_type="application/json", headers=headers)


async def _messages(request: Request) -> Response:
    state: ServerState = request.app.state.foldline
    _check_auth(request, state)
    number = state.next_number()
    fault = state.faults.for_request(number)
    kind = fault.kind if fault else None
    request.state.stream = False
    try:
        response = await _answer(request, state, fault)
    except Exception as e:
        state.records.append(RequestRecord(number, _status_of(e), kind, request.state.stream))
        raise
    state.records.append(RequestRecord(number, response.status_code, kind, request.state.stream))
    return response


async def _answer(request: Request, state: ServerState, fault: Fault | None) -> Response:
    """The response to one numbered `/v1/messages` request, its fault applied."""
    immediate = _fault_error(fault) if fault else None
    if immediate is not None:
        raise immediate
    if fault is not None and fault.kind == "stall" and fault.after_events == 0:
        await anyio.sleep(fault.seconds)
        fault = None
    body, size = await _read_json(request)
    request.state.stream = body.get("stream") is True
    message = _respond(state, _accept(request, state, body, size))
    if request.state.stream:
        return _EventStream(message, fault, state.config.stream_chunk_tokens, request_id())
    return _plain_response(message, fault, request_id())


def _status_of(error: Exception) -> int:
    return error.status if isinstance(error, _ApiError | RequestValidationError | BodyTooLarge) else 500


async def _model(request: Request) -> Response:
    """`GET /v1/models/{id}`: the Models API's object, plus this launch's limits.

    `context_window` and `max_output_tokens` are foldline's fields (the public object has no such
    limits): a client serving a model it has no table for (`foldline chat` on a local model) reads
    its window here instead of assuming Claude's.
    """
    state: ServerState = request.app.state.foldline
    _check_auth(request, state)
    model = str(request.path_params["model"])
    if not model.startswith(state.config.model_prefixes):
        raise _ApiError(404, f"model: {model}")
    config = state.config
    return JSONResponse(
        {
            "type": "model",
            "id": model,
            "display_name": model,
            "created_at": "1970-01-01T00:00:00Z",
            "context_window": config.context_window,
            "max_output_tokens": min(config.max_output_tokens, config.context_window),
        }
    )


async def _count_tokens(request: Request) -> Response:
    state: ServerState = request.app.state.foldline
    _check_auth(request, state)
    body, size = await _read_json(request)
    # count_tokens takes no max_tokens; the validator's rules need one that breaks none of them.
    thinking = body.get("thinking")
    budget = thinking.get("budget_tokens", 0) if isinstance(thinking, dict) else 0
    placeholder = budget + 1 if isinstance(budget, int) else 1  # must exceed any thinking budget (rule A26)
    checked = {**body, "max_tokens": placeholder} if "max_tokens" not in body else body
    # flatten assumes a well-formed body: validate without the window first, then with it.
    validate_request(checked, _limits(state, None), body_bytes=size)
    blocks = flatten(body, state.memo)
    beta = has_beta(request.headers.get("anthropic-beta"), CACHE_EDITS_BETA)
    # The count is what the request would bill and what the window holds: deletions excluded.
    deleted = cache_edits_deletions(body, blocks, beta_enabled=beta, known=state.references.spans)
    prompt = total_tokens(blocks) - deleted_tokens(blocks, deleted)
    validate_window(checked, _limits(state, prompt))
    return JSONResponse({"input_tokens": prompt})


async def _on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, _ApiError)
    return error_response(exc.status, exc.message, headers=exc.headers)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return error_response(exc.status, exc.message, exc.error_type)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error_response(404, f"Not found: {request.method} {request.url.path}")
    if exc.status_code == 405:
        return error_response(405, f"Method {request.method} not allowed on {request.url.path}")
    return error_response(exc.status_code, str(exc.detail))


async def _on_scenario_exhausted(request: Request, exc: Exception) -> Response:
    return error_response(500, f"scripted backend: {exc}")


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    # Deliberately no detail: the exception is logged server-side, never sent.
    return error_response(500, "Internal server error")


def create_app(
    config: ServerConfig | None = None,
    *,
    backend: Backend | None = None,
    faults: FaultPlan | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Starlette:
    """Build the local Messages API server.

    Args:
        config: limits, API key and cache settings (defaults: the real API's).
        backend: what answers accepted requests (default: `ScriptedBackend()` with no script, which
            echoes the last user message).
        faults: failures to inject (default: none).
        clock: seconds, monotonic; the prompt cache's TTLs run on it (inject a fake one in tests).

    Returns:
        The ASGI app; its `state.foldline` is the `ServerState` (cache, request records, backend).
    """
    config = config or ServerConfig()
    app = Starlette(
        routes=[
            Route("/v1/messages", _messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", _count_tokens, methods=["POST"]),
            Route("/v1/models/{model:path}", _model, methods=["GET"]),
        ],
        middleware=[Middleware(RequestGuard, config=config)],
        exception_handlers={
            _ApiError: _on_api_error,
            RequestValidationError: _on_validation_error,
            HTTPException: _on_http_error,
            ScenarioExhaustedError: _on_scenario_exhausted,
            Exception: _on_unexpected,
        },
    )
    app.state.foldline = ServerState(
        config=config,
        backend=backend if backend is not None else ScriptedBackend(),
        faults=faults or FaultPlan(),
        cache=PromptCache(clock=clock, lookback_blocks=config.lookback_blocks),
        memo=FlattenMemo(config.flatten_memo_bytes),
    )
    return app
