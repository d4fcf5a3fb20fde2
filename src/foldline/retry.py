"""The one retry layer (R5.6): retries bounded per request and per turn, `retry-after` honoured up to a cap.

Also the stream idle watchdog (R5.7, `idle_watchdog`) that the main loop and every forked request
wrap their streams in: a stream that goes silent becomes a retryable connection error.

Only retries are bounded, never progress: a turn may make as many successful requests as its tool
loop needs, but each request gets at most `RetryConfig.max_attempts` attempts and the whole turn at
most `RetryConfig.max_retries_per_turn` retries, so no combination of layers can multiply attempts
(design.md F11: the 10 x 10 retry storm). A `retry-after` beyond the cap surfaces at once as
`RetriesExhaustedError` instead of a silent multi-minute hang. A refused connection (nothing
listening) is retried at most `refused_max_attempts - 1` times: backing off will not start a server.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from foldline.config import RetryConfig
from foldline.errors import ModelAPIError, ModelConnectionError, ModelHTTPError, RetriesExhaustedError

__all__ = ["AttemptBudget", "backoff_delay", "idle_watchdog", "retrying"]

T = TypeVar("T")


async def idle_watchdog(stream: AsyncIterator[T], idle_s: float, model: str) -> AsyncIterator[T]:
    """R5.7: `stream`'s events, aborted with a (retryable) `ModelConnectionError` after `idle_s`
    seconds without one; the stream is closed either way."""
    try:
        while True:
            try:
                async with asyncio.timeout(idle_s):
                    event = await anext(stream)
            except StopAsyncIteration:
                return
            except TimeoutError as e:
                raise ModelConnectionError(model, f"stream idle for {idle_s:g} s; aborted") from e
            yield event
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()


@dataclass
class AttemptBudget:
    """One turn's retry allowance, and what it has used so far."""

    retries_left: int
    """Retries (attempts after a request's first) this turn may still make."""
    used: int = 0
    """HTTP attempts made this turn, first attempts and retries together."""
    retries: int = 0


def backoff_delay(error: ModelAPIError, attempt: int, policy: RetryConfig, rng: Callable[[], float]) -> float:
    """Seconds to wait before the next attempt: the server's `retry-after`, else jittered backoff."""
    retry_after = error.retry_after if isinstance(error, ModelHTTPError) else None
    if retry_after is not None:
        if retry_after > policy.max_retry_after_s:
            raise RetriesExhaustedError(
                error.model,
                f"the server asked to retry after {retry_after:g} s, beyond the cap of "
                f"{policy.max_retry_after_s:g} s (RetryConfig.max_retry_after_s); "
                f"try again later: {error.message}",
            ) from error
        return retry_after
    exponential: float = min(policy.max_backoff_s, policy.base_backoff_s * 2.0 ** (attempt - 1))
    return exponential * (0.75 + 0.5 * rng())


async def retrying(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryConfig,
    budget: AttemptBudget,
    on_retry: Callable[[int, float, str], None] = lambda attempt, delay, reason: None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: Callable[[], float] = random.random,
) -> T:
    """Run `call` until it succeeds, a non-transient error occurs, or a retry bound is reached."""
    attempt = 0
    while True:
        attempt += 1
        budget.used += 1
        try:
            return await call()
        except (ModelHTTPError, ModelConnectionError) as e:
            if isinstance(e, ModelHTTPError) and not e.transient:
                raise
            delay = backoff_delay(e, attempt, policy, rng)
            refused = isinstance(e, ModelConnectionError) and e.refused
            limit = min(policy.max_attempts, policy.refused_max_attempts) if refused else policy.max_attempts
            if attempt >= limit:
                what = "the connection was refused" if refused else "every attempt failed"
                raise RetriesExhaustedError(
                    e.model, f"gave up after {attempt} attempts of this request ({what}): {e.message}"
                ) from e
            if budget.retries_left <= 0:
                raise RetriesExhaustedError(
                    e.model,
                    f"gave up: this turn already retried {budget.retries} times "
                    f"(RetryConfig.max_retries_per_turn): {e.message}",
                ) from e
            budget.retries_left -= 1
            budget.retries += 1
            on_retry(attempt, delay, e.message)
            await sleep(delay)
