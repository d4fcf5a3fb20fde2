"""The Starlette application behind `foldline serve`: routes, auth, validation, caching, faults.

Request pipeline for `POST /v1/messages` (one concern per step):
access log (every answer's status, outermost) -> capabilities header -> concurrency (529; see
`limits`) -> guard (Host, Origin 403; Content-Type 415; body size 413 while it streams in; see
`guard`) -> auth (401) -> request number and fault (429/529/500, stall) -> JSON (400, its shape too:
`limits`) -> validator (400/413) -> thinking signatures (400, `thinking`) -> context_management
edits (400 when malformed, `context_edits`) -> cache_edits (400) -> window (400; newer models get
their output room cut instead) -> model (404) -> backend -> thinking added and signed -> prompt
cache (read up to the first edited block) and usage -> JSON body or SSE stream (with mid-stream
faults). `count_tokens` runs the same checks and edits, without the backend.

A backend that generates over time (`GeneratingBackend`, the real model) runs in a worker thread
(`_Generation`), never on the event loop, so `/v1/models`, `count_tokens` and other requests are
answered while it works. A streamed request without thinking gets its events as the model makes
them: `message_start` once the prompt is read, a `text_delta` per decoded piece, the tool calls
and `message_delta` at the end (thinking, which summarises the finished reply, waits for it). A
client that disconnects, streaming or not, cancels its generation; a server told to stop
(`ServerState.close`, which `limits.uvicorn_server` calls on SIGTERM/SIGINT) cancels every
generation, ending each stream with an `overloaded_error` event.

Invariants: every error is the API's envelope `{"type": "error", "error": {...}, "request_id": ...}`
with its status; nothing ever puts a traceback in a response (unexpected exceptions become a 500
`api_error`, or an `error` event once a stream has started); CORS headers go only to origins the
config allows; the cache is written only for requests that were accepted.
"""

from __future__ import annotations

import hmac
import math
import secrets
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Mapping
from contextlib import aclosing, closing
from dataclasses import dataclass, field, replace
from typing import Any, assert_never

import anyio
import anyio.from_thread
import anyio.lowlevel
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foldline._json import dumps, loads
from foldline.api.validate import ValidationLimits, validate_request, validate_window
from foldline.errors import RequestValidationError
from foldline.providers.base import CAPABILITIES_HEADER
from foldline.server._envelope import error_response
from foldline.server.backend import (
    Backend,
    BackendRequest,
    Generated,
    GeneratingBackend,
    Prefilled,
    Reply,
    ScenarioExhaustedError,
    ScriptedBackend,
    TextDelta,
    message_id,
)
from foldline.server.caching import (
    CACHE_EDITS_BETA,
    FlatBlock,
    FlattenMemo,
    NoveltyCount,
    PromptCache,
    ReferenceRegistry,
    backend_messages,
    cache_edits_deletions,
    deleted_tokens,
    flatten,
    total_tokens,
)
from foldline.server.config import ServerConfig
from foldline.server.context_edits import (
    CONTEXT_MANAGEMENT_BETA,
    EditOutcome,
    apply_context_edits,
    parse_context_management,
)
from foldline.server.envelope import FAULT_MESSAGES, error_body, request_id
from foldline.server.faults import Fault, FaultPlan
from foldline.server.guard import BodyTooLarge, RequestGuard
from foldline.server.limits import ConcurrencyLimit, check_depth, check_values
from foldline.server.sse import (
    Event,
    block_events,
    block_start_events,
    block_stop_event,
    delta_event,
    end_events,
    error_event,
    format_event,
    message_events,
    start_event,
)
from foldline.server.thinking import (
    INTERLEAVED_THINKING_BETA,
    ThinkingSigner,
    check_signatures,
    display_omitted,
    thinking_on,
    with_thinking,
)

__all__ = ["AccessRecord", "RequestRecord", "ServerState", "create_app", "error_body"]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One `/v1/messages` request as the server handled it (for tests and the demo)."""

    number: int
    status: int
    fault: str | None
    stream: bool


@dataclass(frozen=True, slots=True)
class AccessRecord:
    """One HTTP request as answered, whatever the route (the guard's refusals included)."""

    method: str
    path: str
    status: int
    error: str | None = None
    """The error envelope's `error.message` of a non-2xx answer (what the client was told)."""
    billed: dict[str, Any] | None = None
    """An answered `/v1/messages` request's bill: `model`, `tools` (how many the request declared)
    and the `usage` the answer reported, so a client the server cannot see into (a real agent's
    command line) is priced from the server's side, request by request."""


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
    access: list[AccessRecord] = field(default_factory=list)
    """Every answered HTTP request, any route (`AccessRecord`); a status of 0 means none was sent."""
    signer: ThinkingSigner = field(default_factory=lambda: ThinkingSigner(secrets.token_bytes(32)))
    """Signs the thinking blocks of this launch's replies and checks the ones sent back."""
    closing: bool = False
    """Set by `close`: every generation stops at its next step."""
    novelty: NoveltyCount | None = None
    """Counts the prompt tokens never sent before (`NoveltyCount`), where `create_app` was given one."""
    _count: int = 0

    def next_number(self) -> int:
        """Number the next `/v1/messages` request (1-based, retries included)."""
        self._count += 1
        return self._count

    def close(self) -> None:
        """The server is stopping: cancel every generation, running or queued, now.

        A plain assignment, so a signal handler may call it (it takes no lock).
        """
        self.closing = True


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
    config: ServerConfig = request.app.state.foldline.config
    check_values(raw, config.max_json_values)  # before decoding: bounds its memory
    try:
        body = loads(raw)
    except ValueError as e:
        raise _ApiError(400, f"There was an error parsing the body: {e}") from None
    if not isinstance(body, dict):
        raise _ApiError(400, "Input should be a valid dictionary")
    check_depth(body)
    return body, len(raw)


def _limits(state: ServerState, input_tokens: int | None, *, interleaved: bool = False) -> ValidationLimits:
    config = state.config
    return ValidationLimits(
        max_output_tokens={"": config.max_output_tokens, **config.max_output_by_model},
        context_window=config.context_window,
        input_tokens=input_tokens,
        max_request_bytes=config.max_request_bytes,
        max_media=config.max_media,
        prefill_allowed=config.prefill_allowed,
        allow_consecutive_roles=config.allow_consecutive_roles,
        interleaved_thinking=interleaved,
    )


def _betas(request: Request) -> frozenset[str]:
    """The request's `anthropic-beta` values (a comma-separated header, possibly repeated)."""
    values = request.headers.getlist("anthropic-beta")
    return frozenset(part.strip() for value in values for part in value.split(",") if part.strip())


@dataclass(frozen=True, slots=True)
class _Accepted:
    body: dict[str, Any]
    """What the model sees: the request after server-side context edits."""
    blocks: list[FlatBlock]
    deleted: set[str]
    betas: frozenset[str]
    edits: EditOutcome | None
    """None when the request had no `context_management`."""
    anchor: int
    """The last block before the first one a context edit changed (-1: none changed)."""
    original_tokens: int
    """The prompt before context edits and cache_edits."""
    max_tokens: int
    """What the reply may use: the request's `max_tokens`, less where the window stops it first."""


WINDOW_STOP_BETA = "model-context-window-exceeded-2025-08-26"


def _output_room(state: ServerState, body: Mapping[str, Any], prompt: int, betas: frozenset[str]) -> int:
    """`max_tokens`, cut to the room the window leaves on models that stop there rather than refuse."""
    asked = int(body["max_tokens"])
    model = str(body.get("model", ""))
    if WINDOW_STOP_BETA not in betas and not model.startswith(state.config.window_stop_models):
        return asked
    # A prompt over the window is still refused (rule A38); one that fits gets what is left.
    return max(1, min(asked, state.config.context_window - prompt))


def _first_change(before: list[FlatBlock], after: list[FlatBlock]) -> int:
    for index, (old, new) in enumerate(zip(before, after, strict=False)):
        if old.key != new.key:
            return index
    return min(len(before), len(after))


def _accept(request: Request, state: ServerState, body: dict[str, Any], size: int) -> _Accepted:
    """Validate a messages body; raises `RequestValidationError` or `_ApiError` when rejected."""
    betas = _betas(request)
    interleaved = INTERLEAVED_THINKING_BETA in betas
    # flatten assumes a well-formed body, so the schema and every rule but the window run first.
    validate_request(body, _limits(state, None, interleaved=interleaved), body_bytes=size)
    check_signatures(body, state.signer)
    edits = parse_context_management(body.get("context_management"), beta=CONTEXT_MANAGEMENT_BETA in betas)
    blocks = flatten(body, state.memo)
    original, outcome, anchor = total_tokens(blocks), None, -1
    if body.get("context_management") is not None:
        outcome = apply_context_edits(body, edits, original)
        if outcome.applied:
            edited = flatten(outcome.body, state.memo)
            anchor = _first_change(blocks, edited) - 1
            body, blocks = outcome.body, edited
    try:
        deleted = cache_edits_deletions(
            body, blocks, beta_enabled=CACHE_EDITS_BETA in betas, known=state.references.spans
        )
        edits_error = None
    except RequestValidationError as e:
        deleted, edits_error = set(), e
    # Deleted and cleared spans do not occupy the window: edits are how a client stays inside it.
    prompt = total_tokens(blocks) - deleted_tokens(blocks, deleted)
    max_tokens = _output_room(state, body, prompt, betas)
    # Every other rule passed above and none of them reads the prompt size: the window is all
    # that is left to check.
    checked = body if max_tokens == body["max_tokens"] else {**body, "max_tokens": max_tokens}
    validate_window(checked, _limits(state, prompt, interleaved=interleaved))
    if edits_error is not None:
        raise edits_error
    model = str(body["model"])
    if not model.startswith(state.config.model_prefixes):
        raise _ApiError(404, f"model: {model}")
    return _Accepted(body, blocks, deleted, betas, outcome, anchor, original, max_tokens)


def _backend_request(accepted: _Accepted) -> BackendRequest:
    body, blocks = accepted.body, accepted.blocks
    return BackendRequest(
        model=str(body["model"]),
        messages=backend_messages(body, accepted.deleted),
        system=body.get("system"),
        tools=list(body.get("tools") or ()),
        max_tokens=accepted.max_tokens,
        thinking=body.get("thinking"),
        request_key=blocks[-1].key if blocks else "",
    )


def _bill(state: ServerState, accepted: _Accepted, model: str) -> Any:
    """Read and write the prompt cache for an accepted request; the server's own usage of it."""
    usage = state.cache.apply(
        accepted.blocks, state.config.min_cacheable(model), accepted.deleted, anchor=accepted.anchor
    )
    state.references.record(accepted.blocks)
    if state.novelty is not None:
        state.novelty.add(accepted.blocks, accepted.deleted)
    return usage


def _message(
    state: ServerState, accepted: _Accepted, backend_request: BackendRequest, reply: Reply, usage: Any
) -> dict[str, Any]:
    """The complete response body of `reply`: thinking added and signed, the stop reason as sent."""
    interleaved = INTERLEAVED_THINKING_BETA in accepted.betas
    reply = with_thinking(reply, backend_request, interleaved=interleaved)
    rendered = reply.render(backend_request)
    sealed = state.signer.seal(rendered.content, omitted=display_omitted(backend_request.thinking))
    rendered = replace(rendered, content=sealed)
    if rendered.stop_reason == "max_tokens" and accepted.max_tokens < int(accepted.body["max_tokens"]):
        rendered = replace(rendered, stop_reason="model_context_window_exceeded")
    message = rendered.message(backend_request, usage.as_usage(rendered.output_tokens))
    if accepted.edits is not None:
        message["context_management"] = accepted.edits.response_field()
    return message


def _respond(state: ServerState, accepted: _Accepted) -> dict[str, Any]:
    """Ask the backend, bill the cache, and build the complete response body."""
    backend_request = _backend_request(accepted)
    reply = state.backend.reply(backend_request)
    return _message(state, accepted, backend_request, reply, _bill(state, accepted, backend_request.model))


_SHUTDOWN_MESSAGE = "The server is shutting down; retry the request."


class _Generation:
    """One `GeneratingBackend.generate` run in a daemon thread, its pieces handed to the event loop.

    The thread is a daemon so that a generation never holds the process open; it stops by itself
    at its next step once `cancel` was called or the server is closing.
    """

    def __init__(self, state: ServerState, backend: GeneratingBackend, request: BackendRequest) -> None:
        self.state = state
        self.backend = backend
        self.request = request
        self._cancelled = False

    def cancelled(self) -> bool:
        """Polled by the worker thread between steps."""
        return self._cancelled or self.state.closing

    def cancel(self) -> None:
        """Nobody waits for this generation any more (a plain assignment: safe from any thread)."""
        self._cancelled = True

    async def pieces(self) -> AsyncGenerator[Generated, None]:
        """The generation's pieces as they come; ends without a `Reply` when it was cancelled.

        Raises what the backend raised. Leaving the iteration early cancels the generation.
        """
        send, receive = anyio.create_memory_object_stream[Generated | BaseException](math.inf)
        token = anyio.lowlevel.current_token()

        def hand(item: Generated | BaseException) -> None:
            anyio.from_thread.run_sync(send.send_nowait, item, token=token)

        def work() -> None:
            try:
                with closing(self.backend.generate(self.request, self.cancelled)) as generated:
                    for item in generated:
                        hand(item)
            except Exception as e:  # the event loop gone or the reader gone, or the backend failed
                self.cancel()
                try:
                    hand(e)
                except Exception:
                    pass  # nobody is left to tell
            finally:
                try:
                    anyio.from_thread.run_sync(send.close, token=token)
                except Exception:
                    send.close()  # the event loop has ended: nothing else touches the stream now

        threading.Thread(target=work, name="foldline-generate", daemon=True).start()
        try:
            async with receive:
                async for item in receive:
                    if isinstance(item, BaseException):
                        raise item
                    yield item
        finally:
            self.cancel()


async def _until_disconnect(receive: Receive) -> None:
    """Return once the client has gone (the request body was read already, so nothing else comes)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _whole_reply(generation: _Generation, receive: Receive) -> Reply | None:
    """The generation's reply, off the event loop; None when the client left or the server stops."""
    reply: Reply | None = None
    async with anyio.create_task_group() as watch:

        async def cancel_on_disconnect() -> None:
            await _until_disconnect(receive)
            generation.cancel()

        watch.start_soon(cancel_on_disconnect)
        async with aclosing(generation.pieces()) as pieces:
            async for item in pieces:
                if isinstance(item, Reply):
                    reply = item
        watch.cancel_scope.cancel()
    return reply


async def _generated_events(
    state: ServerState,
    accepted: _Accepted,
    generation: _Generation,
    on_message: Callable[[dict[str, Any]], None],
) -> AsyncGenerator[Event, None]:
    """The SSE events of a generation, as its pieces come (see the module docstring).

    What was streamed as text is a prefix of the final text block (the backend's promise); the rest
    of the text, the tool calls and the final usage come once the reply is complete. `on_message`
    gets the complete response body then.
    """
    request = generation.request
    base: dict[str, Any] = {"id": message_id(request), "type": "message", "role": "assistant"}
    base["model"] = request.model
    reply: Reply | None = None
    usage: Any = None
    shown = ""
    async with aclosing(generation.pieces()) as pieces:
        async for item in pieces:
            if isinstance(item, Prefilled):
                usage = _bill(state, accepted, request.model)
                yield start_event({**base, "content": [], "usage": dict(item.usage)})
            elif isinstance(item, TextDelta):
                if not shown:
                    for event in block_start_events(0, {"type": "text", "text": ""}):
                        yield event
                shown += item.text
                yield delta_event(0, {"type": "text_delta", "text": item.text})
            elif isinstance(item, Reply):
                reply = item
            else:
                assert_never(item)
    if reply is None or usage is None:
        if state.closing:
            yield _error("overloaded_error", _SHUTDOWN_MESSAGE)
        return  # else the client left: nobody reads what would follow
    message = _message(state, accepted, request, reply, usage)
    content: list[dict[str, Any]] = list(message["content"])
    first = str(content[0].get("text", "")) if content and content[0].get("type") == "text" else ""
    if not first.startswith(shown):
        raise AssertionError("the backend streamed text its reply does not start with")
    start = 0
    if shown:
        rest = first[len(shown) :]
        if rest:
            yield delta_event(0, {"type": "text_delta", "text": rest})
        yield block_stop_event(0)
        start = 1
    for index in range(start, len(content)):
        for event in block_events(index, content[index], state.config.stream_chunk_tokens):
            yield event
    on_message(message)
    for event in end_events(message):
        yield event


def _error(error_type: str, message: str) -> Event:
    return "error", {"type": "error", "error": {"type": error_type, "message": message}}


async def _events_of(events: Iterable[Event]) -> AsyncGenerator[Event, None]:
    for event in events:
        yield event


class _EventStream(StreamingResponse):
    """An SSE response that can stall, emit an `error` event, or drop the connection mid-stream.

    With a `generation`, the client's disconnect cancels it; an exception while the events are made
    ends the stream with the API's `api_error` event (never a traceback).
    """

    def __init__(
        self,
        events: AsyncGenerator[Event, None],
        fault: Fault | None,
        request_id: str,
        generation: _Generation | None = None,
    ):
        super().__init__(
            (),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "request-id": request_id},
        )
        self.events = events
        self.fault = fault
        self.generation = generation

    async def _frames(self) -> AsyncIterator[bytes | None]:
        """SSE frames; None means: close the connection now, without finishing the response."""
        fault = self.fault
        n = 0
        try:
            async with aclosing(self.events) as events:
                async for name, data in events:
                    if fault is not None and n == fault.after_events:
                        if fault.kind == "cut":
                            yield None
                            return
                        if fault.kind == "error":
                            yield error_event("overloaded_error", FAULT_MESSAGES[529])
                            return
                        if fault.kind == "stall":
                            await anyio.sleep(fault.seconds)
                    n += 1
                    yield format_event(name, data)
        except Exception:
            # Deliberately no detail, as for a 500 before the stream started.
            yield error_event("api_error", FAULT_MESSAGES[500])

    async def _send_frames(self, send: Send) -> None:
        async for frame in self._frames():
            if frame is None:
                return  # the server closes the socket on an unfinished response: a real cut
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        generation = self.generation
        if generation is None:
            await self._send_frames(send)
            return
        async with anyio.create_task_group() as watch:

            async def cancel_on_disconnect() -> None:
                await _until_disconnect(receive)
                generation.cancel()
                watch.cancel_scope.cancel()

            watch.start_soon(cancel_on_disconnect)
            try:
                await self._send_frames(send)
            finally:
                generation.cancel()
                watch.cancel_scope.cancel()


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
    accepted = _accept(request, state, body, size)

    def bill(message: dict[str, Any]) -> None:
        billed = request.scope.get(_BILLED)
        if isinstance(billed, dict):
            billed.update(model=message["model"], tools=len(body.get("tools") or ()), usage=message["usage"])
            calls = [_call_line(b) for b in message.get("content") or () if b.get("type") == "tool_use"]
            if calls:  # what a benchmark scores a real client's turn on (`simulation.score_references`)
                billed["calls"] = calls

    backend = state.backend
    if isinstance(backend, GeneratingBackend):
        generation = _Generation(state, backend, _backend_request(accepted))
        if request.state.stream and not thinking_on(body.get("thinking")):
            events = _generated_events(state, accepted, generation, bill)
            return _EventStream(events, fault, request_id(), generation)
        reply = await _whole_reply(generation, request.receive)
        if reply is None:
            raise _ApiError(529, _SHUTDOWN_MESSAGE) if state.closing else _ClientGone()
        usage = _bill(state, accepted, generation.request.model)
        message = _message(state, accepted, generation.request, reply, usage)
    else:
        message = _respond(state, accepted)
    bill(message)
    if request.state.stream:
        chunk = state.config.stream_chunk_tokens
        return _EventStream(_events_of(message_events(message, chunk_tokens=chunk)), fault, request_id())
    return _plain_response(message, fault, request_id())


class _ClientGone(Exception):
    """The client disconnected before its answer was ready: there is no one to answer."""


async def _on_client_gone(request: Request, exc: Exception) -> Response:
    # nginx's "client closed request": what the access log and records show; nothing reaches anyone.
    return Response(status_code=499)


def _status_of(error: Exception) -> int:
    if isinstance(error, _ClientGone):
        return 499
    return error.status if isinstance(error, _ApiError | RequestValidationError | BodyTooLarge) else 500


async def _count_tokens(request: Request) -> Response:
    state: ServerState = request.app.state.foldline
    _check_auth(request, state)
    body, size = await _read_json(request)
    # count_tokens takes no max_tokens; the validator's rules need one that breaks none of them,
    # and the window check must not charge an output the caller never asked for.
    thinking = body.get("thinking")
    budget = thinking.get("budget_tokens", 0) if isinstance(thinking, dict) else 0
    placeholder = budget + 1 if isinstance(budget, int) else 1  # must exceed any thinking budget (rule A26)
    checked = {**body, "max_tokens": placeholder} if "max_tokens" not in body else body
    # Everything messages accepts is accepted here, checked the same way (signatures, betas, edits).
    accepted = _accept(request, state, checked, size)
    # The count is what the request would bill and what the window holds: edits and deletions excluded.
    prompt = total_tokens(accepted.blocks) - deleted_tokens(accepted.blocks, accepted.deleted)
    answer: dict[str, Any] = {"input_tokens": prompt}
    if accepted.edits is not None:
        answer["context_management"] = {"original_input_tokens": accepted.original_tokens}
    return JSONResponse(answer)


def _model_object(model_id: str, display_name: str, created_at: str) -> dict[str, Any]:
    return {"type": "model", "id": model_id, "display_name": display_name, "created_at": created_at}


async def _list_models(request: Request) -> Response:
    state: ServerState = request.app.state.foldline
    _check_auth(request, state)
    data = [_model_object(*model) for model in state.config.models]
    return JSONResponse(
        {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }
    )


async def _get_model(request: Request) -> Response:
    """`GET /v1/models/{id}`: a listed model by id or alias (`claude-sonnet-4-5`), or any other name
    messages accepts, plus this launch's limits.

    `context_window` and `max_output_tokens` are foldline's fields (the public object has no such
    limits): a client serving a model it has no table for (`foldline chat` on a local model) reads
    its window here instead of assuming Claude's.
    """
    state: ServerState = request.app.state.foldline
    _check_auth(request, state)
    config = state.config
    limits = {
        "context_window": config.context_window,
        "max_output_tokens": min(config.max_output_tokens, config.context_window),
    }
    wanted = str(request.path_params["model_id"])
    for model_id, name, created in config.models:
        if wanted == model_id or model_id.startswith(wanted + "-"):
            return JSONResponse(_model_object(model_id, name, created) | limits)
    if wanted.startswith(config.model_prefixes):
        return JSONResponse(_model_object(wanted, wanted, "2025-01-01T00:00:00Z") | limits)
    raise _ApiError(404, f"model: {wanted}")


class _AccessLog:
    """Outermost middleware: records every answered request's status (`ServerState.access`, `request_log`)."""

    def __init__(self, app: ASGIApp, *, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = [0]
        error_body = bytearray()
        billed: dict[str, Any] = {}
        # The route fills this in (a dict shared through the scope, which the router copies shallowly).
        scope[_BILLED] = billed

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = int(message["status"])
            elif message["type"] == "http.response.body" and not 200 <= status[0] < 300:
                error_body.extend(message.get("body", b"")[: _ERROR_BYTES - len(error_body)])
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            record = AccessRecord(
                str(scope["method"]),
                str(scope["path"]),
                status[0],
                _error_text(error_body),
                billed if billed and 200 <= status[0] < 300 else None,
            )
            self._record(record)

    def _record(self, record: AccessRecord) -> None:
        state = self.state
        state.access.append(record)
        if state.config.request_log:
            entry: dict[str, Any] = {"method": record.method, "path": record.path, "status": record.status}
            if record.error is not None:
                entry["error"] = record.error
            if record.billed is not None:
                entry.update(record.billed)
            with open(state.config.request_log, "ab") as log:
                log.write(dumps(entry) + b"\n")


def _call_line(block: dict[str, Any]) -> str:
    """A reply's tool call as the request log keeps it: its name and its input's string values."""
    tool_input = block.get("input")
    values = tool_input.values() if isinstance(tool_input, dict) else ()
    return " ".join([str(block.get("name")), *(v for v in values if isinstance(v, str))])


_BILLED = "foldline.billed"
"""The scope key under which `_AccessLog` hands the messages route a dict for the answer's bill."""

_ERROR_BYTES = 4096
"""How much of an error answer's body the access log reads for its message."""


def _error_text(body: bytes | bytearray) -> str | None:
    """The envelope's `error.message`, or None when the body is not an error envelope."""
    try:
        parsed = loads(bytes(body))
    except ValueError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return str(error.get("message")) if isinstance(error, dict) else None


class _AdvertiseCapabilities:
    """Outermost middleware: every answer names the betas beyond the public API that this server
    takes (`CAPABILITIES_HEADER`), so a client can ask instead of being told by a flag."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_advertised(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    *message.get("headers", []),
                    (CAPABILITIES_HEADER.encode(), CACHE_EDITS_BETA.encode()),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_advertised)


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
    novelty: NoveltyCount | None = None,
) -> Starlette:
    """Build the local Messages API server.

    Args:
        config: limits, API key and cache settings (defaults: the real API's).
        backend: what answers accepted requests (default: `ScriptedBackend()` with no script, which
            echoes the last user message).
        faults: failures to inject (default: none).
        clock: seconds, monotonic; the prompt cache's TTLs run on it (inject a fake one in tests).
        novelty: counts every billed request's never-sent-before tokens (the cache-read share's
            ceiling, `NoveltyCount`); none by default.

    Returns:
        The ASGI app; its `state.foldline` is the `ServerState` (cache, request records, backend).
    """
    config = config or ServerConfig()
    state = ServerState(
        config=config,
        backend=backend if backend is not None else ScriptedBackend(),
        faults=faults or FaultPlan(),
        cache=PromptCache(clock=clock, lookback_blocks=config.lookback_blocks),
        memo=FlattenMemo(config.flatten_memo_bytes),
        novelty=novelty,
    )
    if config.thinking_key is not None:
        state.signer = ThinkingSigner(config.thinking_key)
    app = Starlette(
        routes=[
            Route("/v1/messages", _messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", _count_tokens, methods=["POST"]),
            Route("/v1/models", _list_models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", _get_model, methods=["GET"]),
        ],
        middleware=[
            Middleware(_AccessLog, state=state),
            Middleware(_AdvertiseCapabilities),
            # the guard first: a request it refuses is never read, and the body a slot waits for
            # is read through its cap
            Middleware(RequestGuard, config=config),
            Middleware(ConcurrencyLimit, config=config),
        ],
        exception_handlers={
            _ApiError: _on_api_error,
            RequestValidationError: _on_validation_error,
            HTTPException: _on_http_error,
            ScenarioExhaustedError: _on_scenario_exhausted,
            _ClientGone: _on_client_gone,
            Exception: _on_unexpected,
        },
    )
    app.state.foldline = state
    return app
