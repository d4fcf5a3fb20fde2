"""Run the real server in-process for tests: uvicorn on a free loopback port, in a background thread.

`run_server(app)` yields the base URL (`http://127.0.0.1:PORT`) once uvicorn is accepting
connections, and on exit asks it to stop and joins the thread, so no socket or thread outlives the
`with` block. Any test in the project may use it with any ASGI app.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from starlette.types import ASGIApp

from foldline.server.config import ServerConfig
from foldline.server.limits import uvicorn_server

__all__ = ["run_server"]


@contextmanager
def run_server(app: ASGIApp, *, host: str = "127.0.0.1", startup_timeout: float = 10.0) -> Iterator[str]:
    """Serve `app` with uvicorn on a free port of `host` until the block exits.

    Args:
        app: any ASGI application (usually `foldline.server.app.create_app(...)`).
        host: interface to bind; loopback by default.
        startup_timeout: seconds to wait for uvicorn to start accepting.

    Yields:
        The base URL, e.g. `http://127.0.0.1:54321`, ready for `anthropic.Anthropic(base_url=...)`.

    Raises:
        RuntimeError: uvicorn did not start in time (its error is in the server log).
    """
    # IPPROTO_TCP, not 0: asyncio turns Nagle off only on accepted sockets whose proto says TCP, and
    # with Nagle on, every keep-alive request after the first waits ~40 ms for a delayed ACK.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    state = getattr(getattr(app, "state", None), "foldline", None)
    server = uvicorn_server(
        app,
        _server_config(app),
        on_exit=getattr(state, "close", None),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=1,
        access_log=False,
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="foldline-serve"
    )
    thread.start()
    try:
        deadline = time.monotonic() + startup_timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on {host}:{port}")
            time.sleep(0.01)
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=startup_timeout)
        sock.close()


def _server_config(app: ASGIApp) -> ServerConfig:
    """The `ServerConfig` of an app from `create_app` (its idle timeouts), else the defaults."""
    state = getattr(getattr(app, "state", None), "foldline", None)
    config = getattr(state, "config", None)
    return config if isinstance(config, ServerConfig) else ServerConfig()
