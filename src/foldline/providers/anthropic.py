"""The Anthropic Messages API (and anything that speaks it) through the official `anthropic` SDK.

The SDK's own retries are turned off (`max_retries=0`): the engine owns the one retry layer, so
HTTP attempts per turn are bounded in one place (design.md F11). SDK errors are mapped to
foldline's in one context manager.

One failure is not the server's answer and is not left to that layer: a request sent on a pooled
keep-alive connection the server had just closed ("Server disconnected without sending a response").
llama.cpp's server closes one now and then right after a streamed reply; the request never reached
it, so `http_client`'s transport sends it once more on a fresh connection, as browsers and urllib3
do, rather than charging the turn a retry and a backoff.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import anthropic
import httpx2

from foldline.errors import ModelConnectionError, StreamCutError
from foldline.providers.base import CAPABILITIES_HEADER, Capabilities, advertised_capabilities, http_error
from foldline.stream import (
    BlockStart,
    BlockStop,
    InputJSONDelta,
    MessageDelta,
    MessageStart,
    MessageStop,
    SignatureDelta,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)
from foldline.timeline import Usage

__all__ = [
    "FOLDLINE_SERVE_CAPABILITIES",
    "AnthropicProvider",
    "discover_capabilities",
    "http_client",
    "map_event",
]

FOLDLINE_SERVE_CAPABILITIES = Capabilities(
    name="foldline-serve", supports_cache_edits=True, cache_edits_beta="cache-edits-2025-06-01"
)
"""What `foldline serve` declares: `cache_reference` and `cache_edits` behind its beta header (R8.4).
The client never guesses it from a URL: the demo declares it, `foldline chat` asks the server
(`discover_capabilities`) unless `--cache-edits` / `--no-cache-edits` says."""


def discover_capabilities(
    base_url: str | None, api_key: str | None, model: str, *, timeout: float
) -> Capabilities | None:
    """Ask the server at `base_url` what it supports, from the `CAPABILITIES_HEADER` of its answer
    to `GET /v1/models/{model}` (any status: a 404 from `foldline serve` carries it too).

    None, so the public API's defaults apply, when there is no `base_url` (the public API, which
    advertises nothing), the server does not answer within `timeout` seconds, or it advertises
    nothing. A failed probe is never an error: the chat's first request reports a dead server.
    """
    if not base_url:
        return None
    headers = {"x-api-key": api_key or "unused-by-local-servers", "anthropic-version": "2023-06-01"}
    try:
        answer = httpx2.get(f"{base_url.rstrip('/')}/v1/models/{model}", headers=headers, timeout=timeout)
    except httpx2.HTTPError:
        return None
    return advertised_capabilities(answer.headers.get(CAPABILITIES_HEADER))


class AnthropicProvider:
    """A `Provider` over `anthropic.AsyncAnthropic`.

    Args:
        api_key: API key, sent as `x-api-key` and as a bearer token (`foldline chat` takes
            `$ANTHROPIC_API_KEY`); a placeholder when omitted, for local servers that check nothing.
        base_url: Another server that speaks the API, e.g. `foldline serve`.
        capabilities: What the endpoint supports (cache_edits only where declared).
        client: An existing client (tests inject one with custom transport).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        capabilities: Capabilities | None = None,
        client: anthropic.AsyncAnthropic | None = None,
        timeout: float = 600.0,
    ) -> None:
        key = api_key or "unused-by-local-servers"
        # This SDK sends the key only as `Authorization: Bearer`; the API (and servers that check
        # as it does) read `x-api-key`, so the key goes in both.
        self._client = client or anthropic.AsyncAnthropic(
            api_key=key,
            base_url=base_url,
            max_retries=0,
            timeout=timeout,
            default_headers={"x-api-key": key},
            http_client=http_client(timeout=timeout),
        )
        self._capabilities = capabilities or Capabilities(name="anthropic")

    @property
    def capabilities(self) -> Capabilities:
        """What this endpoint supports."""
        return self._capabilities

    async def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        """One streaming HTTP attempt; yields foldline stream events."""
        model = str(body.get("model", ""))
        headers = {"anthropic-beta": ",".join(betas)} if betas else None
        request = {k: v for k, v in body.items() if k != "stream" and k in _SDK_PARAMS}
        extra = {k: v for k, v in body.items() if k != "stream" and k not in _SDK_PARAMS} or None
        answered: list[bool] = []  # the server sent its status and headers: a later failure is a cut
        with _map_api_errors(model, str(self._client.base_url), answered):
            events = await self._client.messages.create(
                **request, stream=True, extra_headers=headers, extra_body=extra
            )
            answered.append(True)
            try:
                async for raw in events:
                    event = map_event(raw.model_dump(mode="json", exclude_none=True))
                    if event is not None:
                        yield event
            finally:
                await events.close()

    async def count_tokens(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> int | None:
        """`POST /v1/messages/count_tokens` for `body` (free, and not a model run)."""
        model = str(body.get("model", ""))
        headers = {"anthropic-beta": ",".join(betas)} if betas else None
        request = {k: v for k, v in body.items() if k in _COUNTED}
        with _map_api_errors(model, str(self._client.base_url)):
            counted = await self._client.messages.count_tokens(**request, extra_headers=headers)
        return counted.input_tokens

    async def aclose(self) -> None:
        """Close the underlying HTTP client."""
        await self._client.close()


_STALE = "Server disconnected without sending a response"
"""httpcore's words for a connection closed before any byte of the answer: on a pooled connection,
one the server closed while it sat idle, so the request was never read."""


class _ResendOnStale(httpx2.AsyncBaseTransport):
    """A transport that resends a request once, on a new connection, when the pooled one it went out
    on was already closed (`_STALE`). Any other failure, and a second one, surface as they are."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self._inner.handle_async_request(request)
        except httpx2.RemoteProtocolError as e:
            if _STALE not in str(e):
                raise
        # The pool dropped the closed connection when the first try failed: this one opens afresh.
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _ResendingTransports(httpx2.AsyncClient):
    """Below the SDK's default client in `_HttpClient`'s MRO: it receives the transports that client
    built (its TCP keep-alive socket options, connection limits and environment proxies) and wraps
    each in `_ResendOnStale` before httpx takes them."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["transport"] = _ResendOnStale(kwargs["transport"])
        mounts = kwargs.get("mounts") or {}
        kwargs["mounts"] = {key: None if t is None else _ResendOnStale(t) for key, t in mounts.items()}
        super().__init__(**kwargs)


# The SDK tells type checkers its default client is `httpx2.AsyncClient` itself (whence no
# consistent MRO for them); at run time it is the subclass that builds the transports.
class _HttpClient(anthropic.DefaultAsyncHttpxClient, _ResendingTransports):  # type: ignore[misc]
    """The SDK's default HTTP client, every transport of it resending on a stale connection."""

    def __init__(self, **kwargs: Any) -> None:  # spelled out: type checkers see no MRO to take it from
        super().__init__(**kwargs)


def http_client(*, timeout: float = 600.0, **kwargs: Any) -> httpx2.AsyncClient:
    """The HTTP client `AnthropicProvider` builds its SDK client on: the SDK's own default (keep-alive
    socket options, limits, proxies from the environment), and a request that went out on a
    connection the server had closed is sent once more (`_ResendOnStale`). `kwargs` go to the
    client (tests add `event_hooks`)."""
    return cast(httpx2.AsyncClient, _HttpClient(timeout=timeout, **kwargs))


_SDK_PARAMS = frozenset(inspect.signature(anthropic.resources.AsyncMessages.create).parameters) - {
    "self",
    "extra_body",
    "extra_headers",
    "extra_query",
    "timeout",
}
"""The body fields this SDK version names; the rest (a beta's `context_management`, newer fields) go
through `extra_body` as they are, so a field the SDK predates is never refused client-side."""

_COUNTED = ("model", "messages", "system", "tools", "tool_choice", "thinking")
"""The request fields `count_tokens` takes (max_tokens, stream, metadata and sampling are refused)."""


@contextmanager
def _map_api_errors(model: str, url: str, answered: Sequence[bool] = ()) -> Iterator[None]:
    """Turn SDK exceptions into foldline's, most specific first, keeping the cause. A connection
    failure once `answered` holds something (the response began) is a `StreamCutError`."""
    try:
        yield
    except anthropic.APIStatusError as e:
        in_stream = e.status_code == 200  # an `error` event inside a 200 stream
        error_type: str = e.type or ""
        if in_stream and not error_type and isinstance(e.body, dict):
            error_type = str(e.body.get("error", {}).get("type", ""))
        message = e.api_message or str(e.message)
        raise http_error(
            model,
            e.status_code,
            e.body,
            message,
            error_type=error_type,
            retry_after=_retry_after(e.response.headers),
            in_stream=in_stream,
        ) from e
    except anthropic.APIConnectionError as e:
        if answered:  # the SDK words a read that broke off as a failure to connect
            raise StreamCutError(model, f"the reply from {url} broke off mid-stream ({e})", url=url) from e
        refused = _refused(e)
        why = "connection refused" if refused else str(e)
        raise ModelConnectionError(model, f"cannot connect to {url} ({why})", refused=refused, url=url) from e
    except httpx2.TransportError as e:  # a stream cut mid-body surfaces unwrapped from the SDK
        raise StreamCutError(model, f"the reply from {url} broke off mid-stream ({e!r})", url=url) from e


def _refused(error: BaseException) -> bool:
    """Whether nothing was listening: a `ConnectionRefusedError` somewhere in the cause chain."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _retry_after(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                continue
    return None


def _usage(data: dict[str, Any] | None) -> Usage:
    data = data or {}
    fields = (
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "cache_deleted_input_tokens",
    )
    values = {k: int(data[k]) for k in fields if isinstance(data.get(k), int)}
    creation = data.get("cache_creation")
    reason = data.get("cache_miss_reason")
    return Usage(
        **values,
        cache_creation=dict(creation) if isinstance(creation, dict) else None,
        cache_miss_reason=reason if isinstance(reason, str) else None,
    )


def map_event(data: dict[str, Any]) -> StreamEvent | None:
    """Map one wire stream event (as JSON) to a foldline stream event; `None` for pings/unknown."""
    kind = data.get("type")
    if kind == "message_start":
        message = data["message"]
        return MessageStart(
            id=message["id"], model=message.get("model", ""), usage=_usage(message.get("usage"))
        )
    if kind == "content_block_start":
        return BlockStart(index=data["index"], block=_start_block(data["content_block"]))
    if kind == "content_block_delta":
        return _map_delta(data["index"], data["delta"])
    if kind == "content_block_stop":
        return BlockStop(index=data["index"])
    if kind == "message_delta":
        delta = data.get("delta", {})
        return MessageDelta(
            stop_reason=delta.get("stop_reason"),
            stop_sequence=delta.get("stop_sequence"),
            usage=_usage(data.get("usage")),
        )
    if kind == "message_stop":
        return MessageStop()
    return None


def _start_block(block: dict[str, Any]) -> dict[str, Any]:
    # Deltas build text/thinking/input up from empty; the start event's copies are placeholders.
    block = dict(block)
    if block.get("type") == "tool_use":
        block.setdefault("input", {})
    return block


def _map_delta(index: int, delta: dict[str, Any]) -> StreamEvent | None:
    kind = delta.get("type")
    if kind == "text_delta":
        return TextDelta(index, delta["text"])
    if kind == "thinking_delta":
        return ThinkingDelta(index, delta["thinking"])
    if kind == "signature_delta":
        return SignatureDelta(index, delta["signature"])
    if kind == "input_json_delta":
        return InputJSONDelta(index, delta["partial_json"])
    return None
