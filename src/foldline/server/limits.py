"""What one request, and the server as a whole, may cost: JSON shape, concurrency, idle connections.

Three bounds beside the guard's body cap (`guard`), each a number in `ServerConfig`:

- **JSON shape**, on every endpoint that reads a body. Before decoding (`check_values`), a body may
  hold at most `max_json_values` values (objects, arrays, strings, numbers...): a decoded empty `{}`
  costs about 70 bytes for its 3 bytes of JSON, and a one-letter string 50 bytes for 4, so 8 MB of
  `{},` became ~180 MB of Python objects (and many seconds of work) before any rule could refuse
  it. After decoding (`check_depth`), a body must nest no deeper than the encoder goes: orjson
  decodes 1,024 levels but encodes 254, and the server re-encodes what it is sent, so a body
  between the two was a 500; now it is a 400 that says so.
- **Concurrency** (`ConcurrencyLimit`): at most `max_concurrent_requests` requests in flight,
  streams until their last event; one more is answered at once with the API's 529
  `overloaded_error`, which every client already retries with backoff. A request takes its slot
  only once its body has arrived whole: a client that trickles its body (a byte every few seconds)
  costs a connection, never a slot, so 32 of them cannot lock everyone else out. Bodies still
  arriving share `max_pending_body_bytes` (past it, 529). With the shape bound, this bounds the
  server's memory: concurrency x the cost of one capped body, plus the bodies in transit.
- **Idle connections** (`uvicorn_config`): uvicorn closes a keep-alive connection idle for
  `keep_alive_timeout` seconds after a response, but never one that has not finished sending its
  request head (a client that connects and says nothing, or trickles headers: slowloris). The
  protocol here closes a connection whose request head is not complete `header_timeout` seconds
  after its first byte could have come, and one whose body is not complete `body_timeout` seconds
  after its head (a client that trickles its body would otherwise keep its connection, and its
  share of `max_pending_body_bytes`, for as long as it likes).

Stopping (`uvicorn_server`): told to stop (SIGTERM, Ctrl-C, or `should_exit` set), the server calls
its `on_exit` at once, before uvicorn waits for open responses (the app's `ServerState.close`
cancels every generation), and waits at most `shutdown_timeout` seconds for responses still being
sent: a long generation or a client that stopped reading never keeps it up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foldline._json import JSONEncodeError, dumps
from foldline.errors import RequestValidationError
from foldline.server._envelope import error_response
from foldline.server.config import ServerConfig

__all__ = ["ConcurrencyLimit", "check_depth", "check_values", "uvicorn_config", "uvicorn_server"]

_CHUNK = 1 << 20
"""Bytes of body `_values_outside_strings` looks at at once."""


def check_values(raw: bytes, max_values: int) -> None:
    """Raise a 400 `RequestValidationError` if `raw` holds more than `max_values` JSON values.

    Runs before the body is decoded, so a refused body never becomes Python objects. Every value
    but the first is a container or follows a comma, so `1 + commas + containers` outside string
    literals bounds the count. Counting those bytes in the whole body (C speed) settles almost
    every body; only one over the cap by that count pays for skipping its strings (see
    `_values_outside_strings`), in constant memory.
    """
    if 1 + _punctuation(raw, 0, len(raw)) <= max_values:
        return
    values = _values_outside_strings(raw, max_values)
    if values > max_values:
        raise RequestValidationError(
            f"The request body holds more than {max_values} JSON values, the most accepted per request "
            f"(ServerConfig.max_json_values; counted {values} so far); send fewer, larger values."
        )


def _punctuation(raw: bytes, start: int, end: int) -> int:
    return raw.count(b",", start, end) + raw.count(b"{", start, end) + raw.count(b"[", start, end)


def _values_outside_strings(raw: bytes, cap: int, chunk: int = _CHUNK) -> int:
    """`1 +` commas and containers outside string literals, or a count past `cap` once it passes it.

    A `chunk` of bytes at a time (memory a few times that): escaped backslashes and quotes
    are dropped, the rest split at quotes, and every other piece (outside a string) counted, all
    at C speed. A chunk never ends inside an escape: it is stretched past a trailing backslash run.
    """
    values, inside, start = 1, False, 0
    while start < len(raw) and values <= cap:
        end = min(start + chunk, len(raw))
        while end < len(raw) and raw[end - 1] == 0x5C:  # a backslash: keep its escaped byte too
            end += 1
        pieces = raw[start:end].replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')
        outside = b"".join(pieces[1 if inside else 0 :: 2])
        values += _punctuation(outside, 0, len(outside))
        inside ^= len(pieces) % 2 == 0  # an odd number of quotes in the chunk
        start = end
    return values


def check_depth(body: object) -> None:
    """Raise a 400 `RequestValidationError` if `body` nests too deep for the server to encode again.

    The decoder accepts 1,024 levels, the encoder 254, and the server re-encodes what it was sent
    (cache keys, events), so a body between the two would fail mid-answer. Encoding the whole body
    once proves every part of it encodes: each part nests less deeply than the body, and nothing
    the server writes wraps a part deeper than the body's own request envelope does.
    """
    try:
        dumps(body)
    except JSONEncodeError as e:
        raise RequestValidationError(
            "The request body nests JSON objects and arrays more deeply than this server can encode "
            f"({e}: at most 254 levels, counting the body itself); flatten the deepest values "
            "(tool inputs, metadata)."
        ) from None


class ConcurrencyLimit:
    """ASGI middleware: at most `max_concurrent_requests` HTTP requests in flight, else 529 at once.

    A request counts from the moment its body has arrived whole to its response's last byte (a
    stream until its final event), so slow readers of long streams hold their slot and slow
    writers of bodies do not. The body is read here first, within `max_pending_body_bytes` for all
    bodies still arriving, and handed to the app as one message; later `receive` calls (the app
    watching for a disconnect) go to the connection. Counting is plain: every request runs on the
    one event loop.
    """

    def __init__(self, app: ASGIApp, *, config: ServerConfig) -> None:
        self.app = app
        self.limit = config.max_concurrent_requests
        self.max_pending = config.max_pending_body_bytes
        self.in_flight = 0
        self.pending = 0
        """Bytes of bodies read so far by requests whose bodies have not all arrived."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await self._body(receive)
        except _PendingFull:
            await _overloaded(
                f"Overloaded: {self.max_pending:,} bytes of request bodies are already arriving "
                "(ServerConfig.max_pending_body_bytes); retry with backoff."
            )(scope, receive, send)
            return
        if body is None:  # the client left before its body was whole: nothing to answer
            return
        if self.in_flight >= self.limit:
            await _overloaded(
                f"Overloaded: this server is already answering {self.limit} requests "
                "(ServerConfig.max_concurrent_requests); retry with backoff."
            )(scope, receive, send)
            return
        self.in_flight += 1
        handed = False

        async def whole_body() -> Message:
            nonlocal handed
            if handed:
                return await receive()
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}

        try:
            await self.app(scope, whole_body, send)
        finally:
            self.in_flight -= 1

    async def _body(self, receive: Receive) -> bytes | None:
        """The request's whole body, or None when the client disconnected first.

        Raises:
            _PendingFull: this chunk would take the bodies in transit past `max_pending`.
        """
        chunks: list[bytes] = []
        taken = 0
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunk: bytes = message.get("body", b"")
                if self.pending + len(chunk) > self.max_pending:
                    raise _PendingFull
                self.pending += len(chunk)
                taken += len(chunk)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
        finally:
            self.pending -= taken


class _PendingFull(Exception):
    """A body chunk would take the bodies in transit past `max_pending_body_bytes`."""


def _overloaded(message: str) -> Response:
    return error_response(529, message, "overloaded_error")


class _Timer:
    """One deadline on a connection: `arm` (re)starts it, `cancel` stops it; when it fires, the
    transport is closed if `still_due()` says the awaited bytes have not all come."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.handle: asyncio.TimerHandle | None = None

    @property
    def armed(self) -> bool:
        return self.handle is not None

    def arm(
        self, loop: asyncio.AbstractEventLoop, transport: asyncio.BaseTransport, still_due: Callable[[], bool]
    ) -> None:
        self.cancel()

        def fire() -> None:
            self.handle = None
            if still_due() and not transport.is_closing():
                # for a body, the app's receive() then gets `http.disconnect`: its slot frees
                transport.close()

        self.handle = loop.call_later(self.seconds, fire)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


def uvicorn_config(app: ASGIApp, config: ServerConfig, **options: Any) -> Any:
    """A `uvicorn.Config` for `app` with the idle-connection bounds of `config` (see the module).

    `options` are passed on (`host`, `port`, `log_level`, ...). Returns `uvicorn.Config` (untyped).
    """
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedProtocol(H11Protocol):
        """uvicorn's h11 protocol, closing a connection whose request head or body is late."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self._head = _Timer(config.header_timeout)
            self._body = _Timer(config.body_timeout)
            super().connection_made(transport)
            self._head.arm(self.loop, self.transport, lambda: True)

        def on_response_complete(self) -> None:
            # The next request's head is due now: uvicorn's keep-alive timer covers the silence,
            # this one a head that starts and never ends. Armed first, because the parent goes on
            # to start a pipelined request at once (and `handle_events` then disarms it).
            if not self.transport.is_closing():
                self._head.arm(self.loop, self.transport, lambda: True)
            super().on_response_complete()

        def handle_events(self) -> None:
            super().handle_events()
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                self._head.cancel()
                if not cycle.more_body:
                    self._body.cancel()
                elif not self._body.armed:
                    self._body.arm(self.loop, self.transport, lambda: cycle.more_body)

        def connection_lost(self, exc: Exception | None) -> None:
            self._head.cancel()
            self._body.cancel()
            super().connection_lost(exc)

    return uvicorn.Config(
        app,
        http=TimedProtocol,
        timeout_keep_alive=config.keep_alive_timeout,
        **options,
    )


def uvicorn_server(
    app: ASGIApp, config: ServerConfig, *, on_exit: Callable[[], None] | None = None, **options: Any
) -> Any:
    """A `uvicorn.Server` for `app` (see the module): `uvicorn_config`'s bounds, at most
    `shutdown_timeout` seconds of graceful shutdown, and `on_exit` called the moment it is told to
    stop. `on_exit` may run inside a signal handler: it must take no lock. Returns `uvicorn.Server`.
    """
    import uvicorn

    class StoppingServer(uvicorn.Server):
        """uvicorn's server, telling the app it stops before it waits for the app's responses."""

        @property
        def should_exit(self) -> bool:
            return bool(self.__dict__.get("_should_exit", False))

        @should_exit.setter
        def should_exit(self, value: bool) -> None:
            self.__dict__["_should_exit"] = value
            if value and on_exit is not None:
                on_exit()

    options.setdefault("timeout_graceful_shutdown", config.shutdown_timeout)
    return StoppingServer(uvicorn_config(app, config, **options))
