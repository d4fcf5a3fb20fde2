"""The engine end to end over real HTTP: the official SDK against `foldline serve` on loopback.

Engine logic is tested in-process (`scripted`); these stay on HTTP because HTTP or the server is the
subject: attempts counted at the server (the SDK's own retries are off), a real `retry-after` header,
and the server's prompt cache. The headline loop, the sixty-round turn and prompt-too-long recovery
run over both in-process and real HTTP (the `model` fixture, in test_loop.py and test_hooks.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from foldline.errors import RetriesExhaustedError
from foldline.events import RetryEvent
from foldline.timeline import SystemEntry

from .conftest import Harness, reload
from .test_hooks import _words


@pytest.mark.anyio
async def test_a_server_side_eviction_is_reported_as_a_cache_break(harness: Callable[..., Harness]) -> None:
    server_time = [1_000.0]
    h = harness([{"text": "one"}, {"text": "two"}, {"text": "three"}], server_clock=lambda: server_time[0])
    engine = await h.engine(session_dir=h.workspace.parent / "files")
    await engine.submit_message(_words(3_000))
    await engine.submit_message("again")
    server_time[0] += (
        3_700  # every cache entry expires on the server (1h ones too); the client changed nothing
    )
    await engine.submit_message("and again")
    breaks = [r for r in reload(h).snapshot() if isinstance(r, SystemEntry) and r.subtype == "cache_break"]
    assert len(breaks) == 1
    assert "likely server-side" in breaks[0].content
    assert breaks[0].level == "warning"
    # R7.5.1: the server's own diagnosis travels with the break, beside the client's attribution.
    assert breaks[0].data is not None
    assert "expired" in str(breaks[0].data["server_reason"])
    assert "the server says:" in breaks[0].content


@pytest.mark.slow
@pytest.mark.anyio
async def test_retry_after_three_seconds_is_honoured(harness: Callable[..., Harness]) -> None:
    h = harness([{"text": "finally"}], faults="1:429/3")
    engine = await h.engine()
    started = time.monotonic()
    result = await engine.submit_message("hi")
    assert time.monotonic() - started >= 3.0
    assert (result.text, result.attempts, h.statuses()) == ("finally", 2, [429, 200])
    assert [e.delay for e in h.events if isinstance(e, RetryEvent)] == [3.0]


@pytest.mark.anyio
async def test_http_attempts_per_turn_never_exceed_the_cap(harness: Callable[..., Harness]) -> None:
    h = harness([{"text": "never"}], faults="1-50:529", retry={"max_attempts": 4})
    engine = await h.engine()
    with pytest.raises(RetriesExhaustedError, match="gave up after 4 attempts"):
        await engine.submit_message("hi")
    assert h.statuses() == [529] * 4  # counted at the server: the SDK's own retries are off


@pytest.mark.anyio
async def test_retries_per_turn_stop_at_the_cap(harness: Callable[..., Harness]) -> None:
    odd = ",".join(f"{n}:529" for n in range(1, 40, 2))  # every round's first attempt fails
    replies = [{"tool_calls": [{"name": "Bash", "input": {"command": "true"}}]}] * 20
    h = harness(replies, faults=odd, retry={"max_retries_per_turn": 3})
    engine = await h.engine()
    with pytest.raises(RetriesExhaustedError, match="already retried 3 times"):
        await engine.submit_message("hi")
    assert h.statuses() == [529, 200] * 3 + [529]
