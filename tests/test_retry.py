"""The one retry layer: transient errors retried within a per-turn attempt budget."""

from __future__ import annotations

import pytest

from foldline.config import RetryConfig
from foldline.errors import ModelConnectionError, ModelHTTPError, RetriesExhaustedError
from foldline.retry import AttemptBudget, retrying


class _Flaky:
    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def _http(status: int, retry_after: float | None = None, **kw: object) -> ModelHTTPError:
    return ModelHTTPError("m", status, {}, f"HTTP {status}", retry_after=retry_after, **kw)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_transient_errors_are_retried_with_retry_after_honoured() -> None:
    sleeps: list[float] = []

    async def sleep(delay: float) -> None:
        sleeps.append(delay)

    call = _Flaky([_http(529), _http(429, retry_after=3), ModelConnectionError("m", "reset")])
    budget = AttemptBudget(5)
    result = await retrying(call, policy=RetryConfig(), budget=budget, sleep=sleep, rng=lambda: 0.5)
    assert (result, call.calls, budget.used) == ("ok", 4, 4)
    assert sleeps == [0.5, 3.0, 2.0]  # backoff 0.5 * 2**(n-1), jitter centred; retry-after exact


@pytest.mark.anyio
async def test_non_transient_errors_are_not_retried() -> None:
    call = _Flaky([_http(400)])
    with pytest.raises(ModelHTTPError):
        await retrying(call, policy=RetryConfig(), budget=AttemptBudget(5))
    assert call.calls == 1


@pytest.mark.anyio
async def test_budget_bounds_attempts_and_exhaustion_is_not_transient() -> None:
    async def sleep(delay: float) -> None:
        return None

    call = _Flaky([_http(500)] * 10)
    with pytest.raises(RetriesExhaustedError, match="gave up after 3 attempts"):
        await retrying(call, policy=RetryConfig(max_attempts=3), budget=AttemptBudget(10), sleep=sleep)
    assert call.calls == 3


@pytest.mark.anyio
async def test_retry_after_beyond_the_cap_surfaces_at_once() -> None:
    call = _Flaky([_http(429, retry_after=120)])
    with pytest.raises(RetriesExhaustedError, match="retry after 120 s, beyond the cap of 60 s"):
        await retrying(call, policy=RetryConfig(max_retry_after_s=60), budget=AttemptBudget(5))
    assert call.calls == 1


def test_in_stream_errors_are_transient_by_type() -> None:
    assert _http(200, in_stream=True, error_type="overloaded_error").transient
    assert not _http(200, in_stream=True, error_type="invalid_request_error").transient


@pytest.mark.anyio
async def test_a_refused_connection_fails_fast() -> None:
    async def sleep(delay: float) -> None:
        return None

    call = _Flaky([ModelConnectionError("m", "refused", refused=True)] * 10)
    with pytest.raises(RetriesExhaustedError, match=r"m: gave up after 2 attempts .*refused"):
        await retrying(call, policy=RetryConfig(), budget=AttemptBudget(10), sleep=sleep)
    assert call.calls == 2
