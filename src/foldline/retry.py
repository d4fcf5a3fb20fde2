"""The one retry layer (R5.6): bounded HTTP attempts per turn, `retry-after` honoured up to a cap.

Every HTTP attempt of a turn draws from one `AttemptBudget`, so no combination of layers can
multiply attempts (reliability.md §1.11: the 10 x 10 retry storm). A `retry-after` beyond the cap
surfaces at once as `RetriesExhaustedError` instead of a silent multi-minute hang.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from foldline.config import RetryConfig
from foldline.errors import ModelAPIError, ModelConnectionError, ModelHTTPError, RetriesExhaustedError

__all__ = ["AttemptBudget", "backoff_delay", "retrying"]

T = TypeVar("T")


@dataclass
class AttemptBudget:
    """HTTP attempts left for this turn."""

    remaining: int
    used: int = 0


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
    """Run `call` until it succeeds, a non-transient error occurs, or the budget runs out."""
    while True:
        if budget.remaining <= 0:
            raise RetriesExhaustedError("", f"no HTTP attempts left this turn ({budget.used} used)")
        budget.remaining -= 1
        budget.used += 1
        try:
            return await call()
        except (ModelHTTPError, ModelConnectionError) as e:
            if isinstance(e, ModelHTTPError) and not e.transient:
                raise
            delay = backoff_delay(e, budget.used, policy, rng)
            if budget.remaining <= 0:
                raise RetriesExhaustedError(
                    e.model, f"gave up after {budget.used} attempts: {e.message}"
                ) from e
            on_retry(budget.used, delay, e.message)
            await sleep(delay)
