"""The engine against injected faults: one bounded retry layer, retry-after, watchdog, in-stream errors."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from foldline.errors import RetriesExhaustedError
from foldline.events import RetryEvent
from foldline.timeline import AssistantEntry

from .conftest import Harness, reload


def _assistants(h: Harness) -> list[AssistantEntry]:
    return [r for r in reload(h).snapshot() if isinstance(r, AssistantEntry) and not r.is_api_error_message]


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
async def test_retry_after_beyond_the_cap_is_a_clear_error_not_a_hang(
    harness: Callable[..., Harness],
) -> None:
    h = harness([{"text": "never"}], faults="1:429/120")
    engine = await h.engine()
    started = time.monotonic()
    with pytest.raises(RetriesExhaustedError, match="retry after 120 s"):
        await engine.submit_message("hi")
    assert time.monotonic() - started < 10
    assert h.statuses() == [429]
    error = reload(h).snapshot()[-1]
    assert isinstance(error, AssistantEntry)
    assert error.is_api_error_message  # recorded for the user, filtered from the API (S0)


@pytest.mark.anyio
async def test_http_attempts_per_turn_never_exceed_the_cap(harness: Callable[..., Harness]) -> None:
    h = harness([{"text": "never"}], faults="1-50:529", retry={"max_attempts": 4})
    engine = await h.engine()
    with pytest.raises(RetriesExhaustedError, match="gave up after 4 attempts"):
        await engine.submit_message("hi")
    assert h.statuses() == [529] * 4  # counted at the server: the SDK's own retries are off


@pytest.mark.anyio
async def test_mid_stream_stall_trips_the_watchdog_and_the_retry_succeeds(
    harness: Callable[..., Harness],
) -> None:
    h = harness(
        [{"text": "slow " * 50}, {"text": "fast"}],
        faults="1:stall/30/4",
        retry={"stream_idle_timeout_s": 0.5},
    )
    engine = await h.engine()
    started = time.monotonic()
    result = await engine.submit_message("hi")
    assert time.monotonic() - started < 10
    assert result.text == "fast"
    assert "idle" in next(e.reason for e in h.events if isinstance(e, RetryEvent))
    assert len(_assistants(h)) == 1


@pytest.mark.parametrize("after_events", [1, 6], ids=["before-output", "after-output"])
@pytest.mark.anyio
async def test_in_stream_overload_is_retried_without_duplicate_entries(
    harness: Callable[..., Harness], after_events: int
) -> None:
    h = harness([{"text": "first " * 40}, {"text": "second"}], faults=f"1:error/{after_events}")
    engine = await h.engine()
    result = await engine.submit_message("hi")
    assert result.text == "second"
    assert h.statuses() == [200, 200]  # the error arrived inside a 200 stream
    assert [a.message.content[0]["text"] for a in _assistants(h)] == ["second"]
    assert len([e for e in h.events if isinstance(e, RetryEvent)]) == 1


@pytest.mark.anyio
async def test_stream_cut_mid_body_is_retried(harness: Callable[..., Harness]) -> None:
    h = harness([{"text": "cut " * 40}, {"text": "whole"}], faults="1:cut/5")
    engine = await h.engine()
    assert (await engine.submit_message("hi")).text == "whole"
    assert len(_assistants(h)) == 1


@pytest.mark.anyio
async def test_max_tokens_escalates_once_then_continues(harness: Callable[..., Harness]) -> None:
    text = " ".join(f"w{i}" for i in range(100))
    h = harness(
        [{"text": text}] * 4, max_output_tokens=20, escalated_max_output_tokens=40, max_output_recoveries=2
    )
    engine = await h.engine()
    result = await engine.submit_message("write a lot")
    assert [r.max_tokens for r in h.requests()] == [20, 40, 40, 40]
    assert result.stop_reason == "max_tokens"  # recoveries exhausted: the turn ends, it does not loop
    assert len(_assistants(h)) == 3  # the 20-token reply was discarded; three 40-token ones kept
    continuations = [m for m in h.requests()[-1].messages if "Output token limit hit" in repr(m)]
    assert len(continuations) == 2


@pytest.mark.anyio
async def test_max_tokens_escalation_that_suffices(harness: Callable[..., Harness]) -> None:
    text = " ".join(f"w{i}" for i in range(30))
    h = harness([{"text": text}] * 2, max_output_tokens=20, escalated_max_output_tokens=64)
    engine = await h.engine()
    result = await engine.submit_message("write")
    assert (result.stop_reason, [r.max_tokens for r in h.requests()]) == ("end_turn", [20, 64])
    assert len(_assistants(h)) == 1


@pytest.mark.anyio
async def test_retries_per_turn_stop_at_the_cap(harness: Callable[..., Harness]) -> None:
    odd = ",".join(f"{n}:529" for n in range(1, 40, 2))  # every round's first attempt fails
    replies = [{"tool_calls": [{"name": "Bash", "input": {"command": "true"}}]}] * 20
    h = harness(replies, faults=odd, retry={"max_retries_per_turn": 3})
    engine = await h.engine()
    with pytest.raises(RetriesExhaustedError, match="already retried 3 times"):
        await engine.submit_message("hi")
    assert h.statuses() == [529, 200] * 3 + [529]


@pytest.mark.anyio
async def test_ten_rounds_each_with_one_transient_failure_complete(harness: Callable[..., Harness]) -> None:
    odd = ",".join(f"{n}:500" for n in range(1, 21, 2))
    replies = [{"tool_calls": [{"name": "Bash", "input": {"command": "true"}}]}] * 9 + [{"text": "ok"}]
    h = harness(replies, faults=odd)
    result = await (await h.engine()).submit_message("hi")
    assert (result.text, result.attempts, h.statuses()) == ("ok", 20, [500, 200] * 10)
