"""In-process fake providers for tests: the engine's loop without a server, a socket or HTTP.

- `ScriptedProvider(script)` answers each call with the next item of its script and is strict: it
  records every call, a call past the end of the script fails the test (it never echoes), and
  `assert_complete()` fails while items remain.
- `FunctionProvider(fn)` answers each call with what `fn(body, betas)` returns (sync or async).
- `SimulatedProvider(seed=..., profile=...)` answers with the simulated coding model
  (`foldline.server.simulated.SimulatedBackend`), the same object `foldline serve --backend
  simulated` runs, so engine tests drive whole simulated sessions without HTTP.

A script item is a reply in the scripted server's friendly form (`{"text": ...}`, `{"thinking": ...}`,
`{"tool_calls": [...]}`, `{"content": [...]}`, with optional `stop_reason` and `usage`; see
`foldline.server.Reply`), a `Failure` (built with `http_error`, `overloaded`, `rate_limited`,
`prompt_too_long`, `in_stream_error`, `connection_error`, `stall`), or any exception instance, raised
as the call starts.

Invariants:
- One code path: a reply is rendered by the scripted server's own code (`Reply.render`, then
  `sse.message_events`) and every wire event goes through `providers.anthropic.map_event`, so the
  engine sees the `StreamEvent`s `AnthropicProvider` yields for the same reply from `foldline serve`.
- Every call is recorded (`calls`: a JSON copy of the body, the betas, the outcome) before it can fail.
- With `validate=True` (the default) a body the API would reject fails the test with
  `InvalidRequestSentError`, which no layer of the engine treats as a model error, so in-process
  tests still prove the engine never sends an invalid request.
- With `context_window`, a prompt that does not fit is answered as the server answers it: a 400 with
  the API's exact message, counted by the server's tokenizer; such a call does not use a script item.

Imports neither starlette nor uvicorn: works without the `server` extra.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import anyio

from foldline._json import dumps, loads
from foldline.api.validate import (
    ValidationLimits,
    find_errors,
    output_too_long_message,
    prompt_too_long_message,
)
from foldline.config import output_limits
from foldline.errors import ModelConnectionError, RequestValidationError, StreamCutError, UserError
from foldline.providers.anthropic import map_event
from foldline.providers.base import Capabilities
from foldline.providers.base import http_error as typed_http_error
from foldline.server.backend import BackendRequest, Reply
from foldline.server.caching import CacheUsage, flatten, total_tokens
from foldline.server.config import SimulatedConfig
from foldline.server.envelope import FAULT_MESSAGES, error_body
from foldline.server.simulated import SimulatedBackend
from foldline.server.sse import message_events
from foldline.stream import StreamEvent

__all__ = [
    "Call",
    "Failure",
    "FakeProviderError",
    "FunctionProvider",
    "InvalidRequestSentError",
    "ReplyLike",
    "ScriptItem",
    "ScriptNotCompleteError",
    "ScriptedProvider",
    "SimulatedProvider",
    "UnexpectedCallError",
    "connection_error",
    "http_error",
    "in_stream_error",
    "overloaded",
    "prompt_too_long",
    "rate_limited",
    "stall",
]

URL = "foldline-testing://in-process"
"""The address connection errors name: there is no real one."""


class FakeProviderError(AssertionError):
    """A test failure a fake provider detected (an `AssertionError`, so no retry layer handles it)."""


class UnexpectedCallError(FakeProviderError):
    """A `ScriptedProvider` was called after its script ran out."""


class ScriptNotCompleteError(FakeProviderError):
    """`assert_complete()`: script items were never used, or an unexpected call was made."""


class InvalidRequestSentError(FakeProviderError):
    """A request body the Messages API would reject was sent."""


@dataclass(frozen=True, kw_only=True)
class Failure:
    """A call that goes wrong: optionally part of a reply first, then silence and/or an error."""

    error: BaseException | Callable[[str], BaseException] | None = None
    """Raised once the events before it are out; a callable is given the request's model first.
    None: no error (a stall that ends, then the rest of the reply)."""
    reply: ReplyLike | None = None
    """The reply whose first `after_events` wire events go out before the failure."""
    after_events: int = 0
    """Wire events (`ping` included, as `--faults` counts them) sent before the failure."""
    stall_s: float = 0.0
    """Seconds of silence before the error or the rest of the reply; `math.inf` waits until cancelled."""
    status: int = 200
    """The HTTP status a server would have logged for this call."""


ReplyLike: TypeAlias = Reply | Mapping[str, Any]
"""A `Reply`, or the scenario-file form of one plus an optional `usage` object."""
ScriptItem: TypeAlias = ReplyLike | Failure | BaseException
"""What answers one call."""


def http_error(
    status: int,
    message: str | None = None,
    *,
    error_type: str | None = None,
    retry_after: float | None = None,
) -> Failure:
    """An HTTP error answer, as `AnthropicProvider` reports it: the typed `ModelHTTPError` for it
    (`PromptTooLongAPIError`, `OverloadedError`, ...) with the API's envelope as its body.

    Args:
        status: The HTTP status (400, 429, 500, 529, ...).
        message: The API's `error.message`; defaults to what `foldline serve`'s faults say.
        error_type: The API's `error.type`; defaults to the API's type for `status`.
        retry_after: The `retry-after` header's seconds, when the server sends one.
    """
    text = message if message is not None else FAULT_MESSAGES.get(status, f"HTTP {status}")
    body = error_body(status, text, error_type)
    kind = str(body["error"]["type"])

    def build(model: str) -> BaseException:
        return typed_http_error(model, status, body, text, error_type=kind, retry_after=retry_after)

    return Failure(error=build, status=status)


def overloaded() -> Failure:
    """HTTP 529 `overloaded_error`."""
    return http_error(529)


def rate_limited(retry_after: float | None = 1.0) -> Failure:
    """HTTP 429 `rate_limit_error` with `retry-after: SECONDS` (None: without the header)."""
    return http_error(429, retry_after=retry_after)


def prompt_too_long(tokens: int, maximum: int) -> Failure:
    """HTTP 400 with the API's exact message: `prompt is too long: N tokens > M maximum`."""
    return http_error(400, prompt_too_long_message(tokens, maximum))


def in_stream_error(
    reply: ReplyLike,
    after_events: int,
    *,
    error_type: str = "overloaded_error",
    message: str = FAULT_MESSAGES[529],
) -> Failure:
    """An `error` event inside a 200 stream, after `after_events` events of `reply`."""
    body = {"type": "error", "error": {"type": error_type, "message": message}}

    def build(model: str) -> BaseException:
        return typed_http_error(model, 200, body, message, error_type=error_type, in_stream=True)

    return Failure(error=build, reply=reply, after_events=after_events)


def connection_error(
    *, refused: bool = False, reply: ReplyLike | None = None, after_events: int = 0
) -> Failure:
    """The connection failed: refused (nothing listening), or cut after `after_events` events of `reply`."""

    def build(model: str) -> BaseException:
        if reply is not None:
            return StreamCutError(model, f"connection to {URL} dropped mid-stream", url=URL)
        why = "connection refused" if refused else "connection failed"
        return ModelConnectionError(model, f"cannot connect to {URL} ({why})", refused=refused, url=URL)

    status = 200 if reply is not None else 0
    return Failure(error=build, reply=reply, after_events=after_events, status=status)


def stall(reply: ReplyLike, after_events: int = 0, seconds: float = math.inf) -> Failure:
    """Silence for `seconds` after `after_events` events of `reply`, then the rest of it."""
    return Failure(reply=reply, after_events=after_events, stall_s=seconds)


@dataclass(kw_only=True)
class Call:
    """One call a fake provider received."""

    body: dict[str, Any]
    """The request body, copied through JSON as it would travel."""
    betas: tuple[str, ...]
    status: int | None = None
    """What a server would have logged: 200 for a reply (even one that fails mid-stream), the error
    status for an HTTP error, 0 for a connection that never got a response, None while undecided or
    for a raised exception."""
    message: dict[str, Any] | None = None
    """The complete response message the reply rendered to (None when no reply was rendered)."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The body's `messages`."""
        return list(self.body.get("messages") or ())

    @property
    def max_tokens(self) -> int:
        """The body's `max_tokens`."""
        return int(self.body["max_tokens"])

    @property
    def model(self) -> str:
        """The body's `model`."""
        return str(self.body.get("model", ""))


class _FakeProvider:
    """What both fakes share: recording, validation, the context window, rendering and streaming."""

    def __init__(
        self,
        *,
        capabilities: Capabilities | None = None,
        validate: bool = True,
        context_window: int | None = None,
        chunk_tokens: int = 8,
    ) -> None:
        self._capabilities = capabilities or Capabilities(name="foldline-testing")
        self.validate = validate
        """Check every body with `foldline.api.validate.find_errors`; fail the test on any error."""
        self.context_window = context_window
        """Answer a prompt that does not fit as the API does (a 400), without using a script item."""
        self.chunk_tokens = chunk_tokens
        """Tokens per text / thinking / input-JSON delta, as `foldline serve` streams them."""
        self.calls: list[Call] = []
        """Every call received, in order."""
        self.counted = 0
        """How many `count_tokens` requests it answered."""

    @property
    def capabilities(self) -> Capabilities:
        """What the fake declares (e.g. `supports_cache_edits=True`)."""
        return self._capabilities

    async def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        """Record the call, check the body, then stream the answer's events (or fail as scripted)."""
        call = Call(body=loads(dumps(body)), betas=tuple(betas))
        self.calls.append(call)
        if self.validate:
            self._check(call)
        window_error = self._window_error(call)
        item: ScriptItem = window_error if window_error is not None else await self._answer(call)
        async for event in self._play(call, item):
            yield event

    async def count_tokens(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> int | None:
        """The body's input tokens by the local server's tokenizer, as this fake's window counts them."""
        self.counted += 1
        return total_tokens(flatten(body))

    async def _answer(self, call: Call) -> ScriptItem:
        raise NotImplementedError

    def _check(self, call: Call) -> None:
        # Each model's output limit as the API (and `foldline serve`) enforces it (rule A40).
        errors = find_errors(call.body, ValidationLimits(max_output_tokens=output_limits()))
        errors += self._cache_edits_errors(call)
        if errors:
            listed = "\n".join(f"- {e.path or '<body>'}: {e}" for e in errors)
            raise InvalidRequestSentError(f"call #{len(self.calls)} sent a body the API rejects:\n{listed}")

    def _cache_edits_errors(self, call: Call) -> list[RequestValidationError]:
        if '"cache_edits"' not in dumps(call.body).decode():
            return []
        caps = self.capabilities
        if not caps.supports_cache_edits:
            return [RequestValidationError(f"cache_edits sent to a provider without them ({caps.name})")]
        if caps.cache_edits_beta is not None and caps.cache_edits_beta not in call.betas:
            return [RequestValidationError(f"cache_edits sent without the {caps.cache_edits_beta} beta")]
        return []

    def _window_error(self, call: Call) -> Failure | None:
        if self.context_window is None:
            return None
        prompt, window = total_tokens(flatten(call.body)), self.context_window
        if prompt > window:
            return http_error(400, prompt_too_long_message(prompt, window))
        if prompt + call.max_tokens > window:
            return http_error(400, output_too_long_message(prompt, call.max_tokens, window))
        return None

    async def _play(self, call: Call, item: ScriptItem) -> AsyncIterator[StreamEvent]:
        if isinstance(item, BaseException):
            raise item
        failure = item if isinstance(item, Failure) else Failure(reply=item, after_events=-1)
        call.status = failure.status
        fired = False
        wire = self._wire_events(call, failure.reply) if failure.reply is not None else iter(())
        for n, data in enumerate(wire):
            if n == failure.after_events:
                fired = True
                await self._fail(call, failure)
            event = map_event(data)
            if event is not None:
                yield event
        if not fired and failure.after_events >= 0:
            await self._fail(call, failure)

    async def _fail(self, call: Call, failure: Failure) -> None:
        if failure.stall_s == math.inf:
            await anyio.sleep_forever()
        elif failure.stall_s > 0:
            await anyio.sleep(failure.stall_s)
        error = failure.error
        if error is None:
            return
        raise error if isinstance(error, BaseException) else error(call.model)

    def _wire_events(self, call: Call, reply: ReplyLike) -> Iterator[dict[str, Any]]:
        """The reply as the wire events `foldline serve` would stream for this body."""
        parsed, usage = _parse_reply(reply)
        body = call.body
        request = BackendRequest(
            model=call.model,
            messages=call.messages,
            system=body.get("system"),
            tools=list(body.get("tools") or ()),
            max_tokens=call.max_tokens,
            thinking=body.get("thinking"),
            request_key=hashlib.sha256(dumps(body)).hexdigest(),
        )
        rendered = parsed.render(request)
        estimate = CacheUsage(input_tokens=total_tokens(flatten(body))).as_usage(rendered.output_tokens)
        call.message = rendered.message(request, {**estimate, **(usage or {})})
        for _name, data in message_events(call.message, chunk_tokens=self.chunk_tokens):
            yield data


def _parse_reply(reply: ReplyLike) -> tuple[Reply, Mapping[str, Any] | None]:
    if isinstance(reply, Reply):
        return reply, None
    if "when" in reply:
        raise UserError("a fake provider answers in order: `when` is for the scripted server's scenarios")
    usage = reply.get("usage")
    if usage is not None and not isinstance(usage, Mapping):
        raise UserError(f"a reply's `usage` must be an object, not {usage!r}")
    return Reply.from_json({k: v for k, v in reply.items() if k != "usage"}), usage


def _check_item(item: object, index: int) -> ScriptItem:
    if isinstance(item, Reply | Failure | BaseException):
        return item
    if isinstance(item, Mapping):
        _parse_reply(item)  # a bad reply fails when the script is written, not mid-test
        return item
    raise UserError(f"script item #{index + 1} is not a reply, a Failure or an exception: {item!r}")


class ScriptedProvider(_FakeProvider):
    """A strict `Provider` that answers call N with script item N.

    Args:
        script: Replies (scenario form or `Reply`), `Failure`s and exceptions, one per call.
        capabilities: What the provider declares.
        validate: Fail the test when a body the API would reject is sent (default on).
        context_window: Answer prompts that do not fit with the API's 400 (no script item used).
        chunk_tokens: Tokens per streamed delta.

    Example:
        ```python
        provider = ScriptedProvider([overloaded(), {"text": "hello"}])
        await QueryEngine(provider=provider).submit_message("hi")  # retried once, then answered
        provider.assert_complete()
        ```
    """

    def __init__(
        self,
        script: Sequence[ScriptItem] = (),
        *,
        capabilities: Capabilities | None = None,
        validate: bool = True,
        context_window: int | None = None,
        chunk_tokens: int = 8,
    ) -> None:
        super().__init__(
            capabilities=capabilities,
            validate=validate,
            context_window=context_window,
            chunk_tokens=chunk_tokens,
        )
        self.script: list[ScriptItem] = [_check_item(item, i) for i, item in enumerate(script)]
        self.used = 0
        """Script items used so far."""
        self._unexpected: list[str] = []

    @property
    def remaining(self) -> int:
        """Script items not yet used."""
        return len(self.script) - self.used

    async def _answer(self, call: Call) -> ScriptItem:
        if self.used >= len(self.script):
            last = call.messages[-1] if call.messages else None
            what = (
                f"ScriptedProvider has {len(self.script)} item(s), all used; call #{len(self.calls)} was not "
                f"expected. Its last message: {_short(last)}"
            )
            self._unexpected.append(what)
            raise UnexpectedCallError(what)
        self.used += 1
        return self.script[self.used - 1]

    def assert_complete(self) -> None:
        """Fail unless every script item was used and no unexpected call was made."""
        if self._unexpected:
            raise ScriptNotCompleteError(self._unexpected[0])
        if self.remaining:
            unused = ", ".join(_short(item) for item in self.script[self.used :])
            raise ScriptNotCompleteError(
                f"ScriptedProvider used {self.used} of {len(self.script)} item(s); never used: {unused}"
            )


Answer: TypeAlias = Callable[[dict[str, Any], tuple[str, ...]], ScriptItem | Awaitable[ScriptItem]]
"""`fn(body, betas)`: a reply, a `Failure` or an exception to raise (or an awaitable of one)."""


class FunctionProvider(_FakeProvider):
    """A `Provider` whose replies a function computes from each request body and its betas.

    Args:
        fn: `fn(body, betas)`, sync or async, returns a reply, a `Failure` or an exception (or raises).
        capabilities: What the provider declares.
        validate: Fail the test when a body the API would reject is sent (default on).
        context_window: Answer prompts that do not fit with the API's 400 (`fn` is not called).
        chunk_tokens: Tokens per streamed delta.
    """

    def __init__(
        self,
        fn: Answer,
        *,
        capabilities: Capabilities | None = None,
        validate: bool = True,
        context_window: int | None = None,
        chunk_tokens: int = 8,
    ) -> None:
        super().__init__(
            capabilities=capabilities,
            validate=validate,
            context_window=context_window,
            chunk_tokens=chunk_tokens,
        )
        self.fn = fn

    async def _answer(self, call: Call) -> ScriptItem:
        result = self.fn(loads(dumps(call.body)), call.betas)
        if inspect.isawaitable(result):
            result = await result
        return _check_item(result, len(self.calls) - 1)


def backend_request(body: Mapping[str, Any]) -> BackendRequest:
    """The request a server backend sees for `body` (no cache_edits applied)."""
    return BackendRequest(
        model=str(body.get("model", "")),
        messages=list(body.get("messages") or ()),
        system=body.get("system"),
        tools=list(body.get("tools") or ()),
        max_tokens=int(body["max_tokens"]),
        thinking=body.get("thinking"),
        request_key=hashlib.sha256(dumps(body)).hexdigest(),
    )


class SimulatedProvider(FunctionProvider):
    """A `Provider` answered in-process by the simulated coding model (`SimulatedBackend`).

    Args:
        seed: The model's seed (same seed, same requests: same replies).
        profile: The profile it is meant for (`foldline.server.simulated.PROFILES`).
        config: The model's calibration (`SimulatedConfig`: reply length, summary fidelity, ...);
            the defaults when None.
        capabilities, validate, context_window, chunk_tokens: as for `FunctionProvider`.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        profile: str = "feature",
        config: SimulatedConfig | None = None,
        capabilities: Capabilities | None = None,
        validate: bool = True,
        context_window: int | None = None,
        chunk_tokens: int = 8,
    ) -> None:
        self.backend = SimulatedBackend(seed=seed, profile=profile, config=config or SimulatedConfig())
        """The model answering (its `answered` counts requests)."""
        super().__init__(
            lambda body, betas: self.backend.reply(backend_request(body)),
            capabilities=capabilities,
            validate=validate,
            context_window=context_window,
            chunk_tokens=chunk_tokens,
        )


def _short(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
