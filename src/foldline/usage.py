"""What a session cost: usage summed from the timeline's assistant entries, and where the cache broke.

Everything here reads the records the API's own `usage` fields left behind, so `/cost`, `/cache` and
the demo's table agree with the bill. Cache breaks follow R7.3's phase 2: a break is a drop in
`cache_read_input_tokens` from one call to the next of more than 5% and more than 2,000 tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from foldline.config import CacheConfig
from foldline.timeline import AnyRecord, AssistantEntry, Usage

__all__ = ["SONNET_PRICES", "CacheReadDrop", "UsageTotals", "cache_breaks", "is_cache_break", "usage_of"]

SONNET_PRICES: Mapping[str, float] = MappingProxyType(
    {"input": 3.00, "cache_write": 3.75, "cache_read": 0.30, "output": 15.00}
)
"""Sonnet 4.5 list prices in $ per million tokens (design.md P7)."""

_CACHE = CacheConfig()


def is_cache_break(before: int, after: int, config: CacheConfig = _CACHE) -> bool:
    """R7.3: cache reads fell by more than 5% AND by more than 2,000 tokens (`config`'s thresholds)."""
    drop = before - after
    return drop > config.break_min_tokens and drop > before * config.break_min_fraction


@dataclass
class UsageTotals:
    """Usage summed over API calls."""

    requests: int = 0
    input: int = 0
    cache_write: int = 0
    cache_read: int = 0
    output: int = 0

    @property
    def prompt(self) -> int:
        """Every input token: uncached + cache writes + cache reads."""
        return self.input + self.cache_write + self.cache_read

    @property
    def read_share(self) -> float:
        """Fraction of input tokens served from the cache."""
        return self.cache_read / self.prompt if self.prompt else 0.0

    def __add__(self, other: UsageTotals) -> UsageTotals:
        return UsageTotals(
            self.requests + other.requests,
            self.input + other.input,
            self.cache_write + other.cache_write,
            self.cache_read + other.cache_read,
            self.output + other.output,
        )

    def add(self, usage: Usage) -> None:
        """Count one API call."""
        self.requests += 1
        self.input += usage.input_tokens
        self.cache_write += usage.cache_creation_input_tokens
        self.cache_read += usage.cache_read_input_tokens
        self.output += usage.output_tokens

    def cost(self, prices: Mapping[str, float] = SONNET_PRICES, *, cached: bool = True) -> float:
        """Dollars; `cached=False` prices every input token at the base rate (no prompt caching)."""
        if not cached:
            return (self.prompt * prices["input"] + self.output * prices["output"]) / 1e6
        total = self.input * prices["input"] + self.cache_write * prices["cache_write"]
        total += self.cache_read * prices["cache_read"] + self.output * prices["output"]
        return total / 1e6


def _usages(records: Iterable[AnyRecord]) -> Iterable[Usage]:
    for record in records:
        if isinstance(record, AssistantEntry) and not record.is_api_error_message and not record.is_virtual:
            if record.message.usage is not None:
                yield record.message.usage


def usage_of(records: Iterable[AnyRecord]) -> UsageTotals:
    """Usage summed over every real API reply in `records`."""
    totals = UsageTotals()
    for usage in _usages(records):
        totals.add(usage)
    return totals


@dataclass(frozen=True)
class CacheReadDrop:
    """A call whose cache reads fell sharply from the previous call's (R7.3), found from usage alone."""

    call: int
    """1-based index of the call among the session's API replies."""
    before: int
    after: int


def cache_breaks(records: Iterable[AnyRecord]) -> list[CacheReadDrop]:
    """Every call where `cache_read_input_tokens` fell by more than 5% and more than 2,000 tokens."""
    breaks: list[CacheReadDrop] = []
    previous: int | None = None
    for call, usage in enumerate(_usages(records), 1):
        read = usage.cache_read_input_tokens
        if previous is not None and is_cache_break(previous, read):
            breaks.append(CacheReadDrop(call, previous, read))
        previous = read
    return breaks
