"""The request guard: who may reach `foldline serve`, with what kind of body, and how much of it.

Binding loopback is not enough. Any web page open in the machine's browser can POST to
`http://127.0.0.1:8765`: a cross-site request whose body is `text/plain` or a form needs no CORS
preflight, and DNS rebinding (an attacker's name re-pointed at 127.0.0.1) even lets the page read
the answer. So every request passes this guard before any route, and is refused in the API's error
envelope when:

- its `Host` is neither loopback (127.0.0.0/8, `localhost`, `[::1]`, any port) nor configured
  (`ServerConfig.allowed_hosts`, `--allow-host`): 403 `permission_error`. A rebinding page's
  requests carry the attacker's name, so this is what stops them. No `Host` at all (HTTP/1.0) passes:
  browsers always send one;
- it carries an `Origin` that is not configured (`allowed_origins`, `--allow-origin`): 403
  `permission_error`. Clients that are not browsers send no `Origin`;
- it is a POST whose `Content-Type` is not `application/json` (parameters such as `charset` allowed;
  missing counts as wrong): 415 `invalid_request_error`;
- its body passes `max_request_bytes`: 413 `request_too_large`, from `Content-Length` before any of
  the body is read, else while a chunked body streams in: `receive` counts the bytes and raises
  `BodyTooLarge` at the cap, so the app never holds more than the cap and the guard one chunk more.

A configured origin gets the CORS answers a browser needs (the preflight, and
`access-control-allow-origin` on responses); no other response carries an `access-control-*` header.
"""

from __future__ import annotations

import ipaddress

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from foldline.api.validate import request_too_large
from foldline.server._envelope import error_response
from foldline.server.config import ServerConfig

__all__ = ["BodyTooLarge", "RequestGuard", "is_loopback_host"]


class BodyTooLarge(Exception):
    """Raised from the guarded `receive` once the body passes the cap; the guard answers 413."""

    status = 413


def _host_name(host: str) -> str:
    """`host` without its port, lower-cased, IPv6 without brackets (`[::1]:8765` -> `::1`)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        return host.split(":", 1)[0]
    return host  # no port, or a bare IPv6 address


def is_loopback_host(host: str) -> bool:
    """Whether a `Host` value names this machine's loopback: 127.0.0.0/8, `localhost`, `::1`."""
    name = _host_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _is_json(content_type: str | None) -> bool:
    return content_type is not None and content_type.split(";", 1)[0].strip().lower() == "application/json"


def _origin(origin: str) -> str:
    return origin.strip().lower().rstrip("/")


class RequestGuard:
    """ASGI middleware in front of the app: Host, Origin, Content-Type and the body cap (see module)."""

    def __init__(self, app: ASGIApp, *, config: ServerConfig) -> None:
        self.app = app
        self.max_bytes = config.max_request_bytes
        self.hosts = frozenset(_host_name(h) for h in config.allowed_hosts)
        self.origins = frozenset(_origin(o) for o in config.allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope["method"], headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        origin = headers.get("origin")
        if origin is not None:
            if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
                await _preflight(origin, headers)(scope, receive, send)
                return
            send = _with_cors(send, origin)
        await self._capped(scope, receive, send)

    def _refusal(self, method: str, headers: Headers) -> Response | None:
        """The error response for a request the guard refuses before reading it, else None."""
        host = headers.get("host")
        if host is not None and not is_loopback_host(host) and not {"*", _host_name(host)} & self.hosts:
            return error_response(
                403,
                f"Host {host!r} is not allowed: this server answers loopback names only (127.0.0.1, "
                f"localhost, [::1]). To reach it by this name, start it with --allow-host "
                f"{_host_name(host)} (ServerConfig.allowed_hosts).",
            )
        origin = headers.get("origin")
        if origin is not None and not {"*", _origin(origin)} & self.origins:
            return error_response(
                403,
                f"Origin {origin!r} is not allowed: web pages may not call this server. To serve that "
                f"page, start it with --allow-origin {origin} (ServerConfig.allowed_origins).",
            )
        content_type = headers.get("content-type")
        if method == "POST" and not _is_json(content_type):
            return error_response(
                415,
                f"Content-Type must be application/json, not {content_type or 'missing'!r}: send the "
                "body as JSON with the header `content-type: application/json`.",
            )
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            return _too_large(self.max_bytes)
        return None

    async def _capped(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app with a `receive` that stops at the cap, and answer 413 when it does."""
        seen = 0
        started = False

        async def capped_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(f"body passed {self.max_bytes} bytes")
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, capped_receive, tracked_send)
        except BodyTooLarge:
            if started:
                raise
            # The rest of the body is never read into the app; uvicorn discards it after the 413.
            await _too_large(self.max_bytes)(scope, receive, send)


def _too_large(max_bytes: int) -> Response:
    error = request_too_large(max_bytes)
    return error_response(error.status, error.message, error.error_type)


def _preflight(origin: str, headers: Headers) -> Response:
    """The CORS preflight answer for a configured origin: POST with whatever headers it asks for."""
    allow = {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": "POST",
        "access-control-max-age": "600",
        "vary": "origin",
    }
    if "access-control-request-headers" in headers:
        allow["access-control-allow-headers"] = headers["access-control-request-headers"]
    return Response(status_code=204, headers=allow)


def _with_cors(send: Send, origin: str) -> Send:
    """`send`, adding `access-control-allow-origin` (a configured origin) to the response's headers."""

    async def cors_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers["access-control-allow-origin"] = origin
            headers["access-control-expose-headers"] = "request-id, retry-after"
            headers.append("vary", "origin")
        await send(message)

    return cors_send
