"""A request sent on a pooled keep-alive connection that the server had already closed is sent once
more on a new connection, through the real SDK over real sockets (`providers.anthropic.http_client`).

The server here answers the first request of a connection and then closes it on reading the next,
without a word: what llama.cpp's server now and then does right after a streamed reply.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from foldline.errors import ModelConnectionError
from foldline.providers.anthropic import AnthropicProvider

Served = tuple[str, list[int]]
"""The server's URL, and how many requests it answered on each connection it accepted."""

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


async def _read_request(reader: asyncio.StreamReader) -> bool:
    """Consume one HTTP request; False at end of stream."""
    head = await reader.readuntil(b"\r\n\r\n") if not reader.at_eof() else b""
    if not head:
        return False
    lines = head.lower().split(b"\r\n")
    length = next((int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length")), 0)
    await reader.readexactly(length)
    return True


@asynccontextmanager
async def _one_answer_per_connection(*, drop_every_second: bool = False) -> AsyncIterator[Served]:
    """A count_tokens server; yields its URL and the requests answered on each connection. With
    `drop_every_second`, each connection is closed unanswered on its second request; without, every
    request is dropped (a server that never answers)."""
    answered: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        answered.append(0)
        try:
            if drop_every_second and await _read_request(reader):
                payload = json.dumps({"input_tokens": 7}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                await writer.drain()
                answered[-1] += 1
            await _read_request(reader)  # the next request: read, never answered
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        port = server.sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}", answered
    finally:
        server.close()
        await server.wait_closed()


async def _three_counts(provider: AnthropicProvider) -> list[int]:
    """Three requests in a row on one provider's pooled connections, then the provider closed."""
    try:
        return [await provider.count_tokens(BODY) for _ in range(3)]
    finally:
        await provider.aclose()


@pytest.mark.anyio
async def test_a_request_on_a_connection_the_server_closed_goes_out_again_on_a_new_one() -> None:
    async with _one_answer_per_connection(drop_every_second=True) as (url, answered):
        counts = await _three_counts(AnthropicProvider(base_url=url))
    assert counts == [7, 7, 7]
    # each later request found its pooled connection closed and went out again on a fresh one
    assert answered == [1, 1, 1]


@pytest.mark.anyio
async def test_a_server_that_drops_every_request_is_an_error_after_one_resend() -> None:
    async with _one_answer_per_connection() as (url, answered):
        provider = AnthropicProvider(base_url=url)
        try:
            with pytest.raises(ModelConnectionError, match="without sending a response"):
                await provider.count_tokens(BODY)
        finally:
            await provider.aclose()
    assert answered == [0, 0]  # sent twice, never more


@pytest.mark.anyio
async def test_a_proxy_from_the_environment_is_used_and_resends_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client is the SDK's own (its proxies from the environment), not a bare one that drops
    them: the requests for a host that does not resolve reach the proxy, resent there as well."""
    async with _one_answer_per_connection(drop_every_second=True) as (url, answered):
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", url)
        counts = await _three_counts(AnthropicProvider(base_url="http://api.foldline-test.invalid"))
    assert counts == [7, 7, 7]
    assert answered == [1, 1, 1]
