"""The engine against injected faults: one bounded retry layer, retry-after, watchdog, in-stream errors.

In-process (`foldline.testing` failures); the attempt caps also run once over real HTTP, counted at
the server, in test_over_http.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from foldline.errors import RetriesExhaustedError
from foldline.events import RetryEvent
from foldline.testing import connection_error, http_error, in_stream_error, overloaded, rate_limited, stall
from foldline.timeline import AssistantEntry

from .conftest import Harness, reload


def _assistants(h: Harness) -> list[AssistantEntry]:
    return [r for r in reload(h).snapshot() if isinstance(r, AssistantEntry) and not r.is_api_error_message]


@pytest.mark.anyio
async def test_retry_after_beyond_the_cap_is_a_clear_error_not_a_hang(
    scripted: Callable[..., Harness],
) -> None:
    h = scripted([rate_limited(retry_after=120)])
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
async def test_http_attempts_per_turn_never_exceed_the_cap(scripted: Callable[..., Harness]) -> None:
    h = scripted([overloaded()] * 4, retry={"max_attempts": 4})
    engine = await h.engine()
    with pytest.raises(RetriesExhaustedError, match="gave up after 4 attempts"):
        await engine.submit_message("hi")
    assert h.statuses() == [529] * 4


@pytest.mark.anyio
async def test_mid_stream_stall_trips_the_watchdog_and_the_retry_succeeds(
    scripted: Callable[..., Harness],
) -> None:
    h = scripted(
        [stall({"text": "slow " * 50}, after_events=4), {"text": "fast"}],
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
    scripted: Callable[..., Harness], after_events: int
) -> None:
    h = scripted([in_stream_error({"text": "first " * 40}, after_events), {"text": "second"}])
    engine = await h.engine()
    result = await engine.submit_message("hi")
    assert result.text == "second"
    assert h.statuses() == [200, 200]  # the error arrived inside a 200 stream
    assert [a.message.content[0]["text"] for a in _assistants(h)] == ["second"]
    assert len([e for e in h.events if isinstance(e, RetryEvent)]) == 1


@pytest.mark.anyio
async def test_stream_cut_mid_body_is_retried(scripted: Callable[..., Harness]) -> None:
    h = scripted([connection_error(reply={"text": "cut " * 40}, after_events=5), {"text": "whole"}])
    engine = await h.engine()
    assert (await engine.submit_message("hi")).text == "whole"
    assert len(_assistants(h)) == 1


@pytest.mark.anyio
async def test_max_tokens_escalates_once_then_continues(scripted: Callable[..., Harness]) -> None:
    text = " ".join(f"w{i}" for i in range(100))
    h = scripted(
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
async def test_max_tokens_escalation_that_suffices(scripted: Callable[..., Harness]) -> None:
    text = " ".join(f"w{i}" for i in range(30))
    h = scripted([{"text": text}] * 2, max_output_tokens=20, escalated_max_output_tokens=64)
    engine = await h.engine()
    result = await engine.submit_message("write")
    assert (result.stop_reason, [r.max_tokens for r in h.requests()]) == ("end_turn", [20, 64])
    assert len(_assistants(h)) == 1


@pytest.mark.anyio
async def test_retries_per_turn_stop_at_the_cap(scripted: Callable[..., Harness]) -> None:
    bash = {"tool_calls": [{"name": "Bash", "input": {"command": "true"}}]}
    h = scripted(
        [overloaded(), bash] * 3 + [overloaded()], retry={"max_retries_per_turn": 3}
    )  # every round's first attempt fails
    engine = await h.engine()
    with pytest.raises(RetriesExhaustedError, match="already retried 3 times"):
        await engine.submit_message("hi")
    assert h.statuses() == [529, 200] * 3 + [529]


@pytest.mark.anyio
async def test_ten_rounds_each_with_one_transient_failure_complete(scripted: Callable[..., Harness]) -> None:
    bash = {"tool_calls": [{"name": "Bash", "input": {"command": "true"}}]}
    h = scripted([http_error(500), bash] * 9 + [http_error(500), {"text": "ok"}])
    result = await (await h.engine()).submit_message("hi")
    assert (result.text, result.attempts, h.statuses()) == ("ok", 20, [500, 200] * 10)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model_name", "limit"), [("claude-3-5-haiku-20241022", 8_192), ("claude-opus-4-1", 32_000)]
)
async def test_max_tokens_escalation_stops_at_the_models_output_limit(
    model: Callable[..., Harness], model_name: str, limit: int
) -> None:
    """R5.5: the 64K retry on a model whose output limit is lower asks for that limit, not 64K (which
    the API refuses with a 400, losing the reply); the server and the in-process fake both enforce it."""
    text = " ".join(f"w{i}" for i in range(60))
    h = model([{"text": text}] * 2, model=model_name, max_output_tokens=20)
    engine = await h.engine()
    result = await engine.submit_message("write")
    assert (result.stop_reason, [r.max_tokens for r in h.requests()]) == ("end_turn", [20, limit])
    assert h.statuses() == [200, 200]
