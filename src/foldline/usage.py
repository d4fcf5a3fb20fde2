"""What a session cost: usage summed from the timeline's assistant entries, and where the cache broke.

Everything here reads the records the API's own `usage` fields left behind, so `/cost`, `/cache` and
the demo's table agree with the bill. Each call is priced when it is counted, at its own model's
list prices (`foldline.pricing`): a session that switched models, or crossed a long-context
threshold on some calls, is priced call by call. Cache breaks follow R7.3's phase 2: a break is a drop in
`cache_read_input_tokens` from one call to the next of more than 5% and more than 2,000 tokens.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from foldline.config import CacheConfig
from foldline.pricing import call_cost, prices_for
from foldline.timeline import AnyRecord, AssistantEntry, Usage

__all__ = ["CacheReadDrop", "UsageTotals", "cache_breaks", "is_cache_break", "usage_of"]

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
    dollars: float = 0.0
    """What the calls cost at their models' list prices."""
    dollars_uncached: float = 0.0
    """What they would have cost with every input token at the base rate."""
    unpriced: frozenset[str] = frozenset()
    """Models of counted calls that have no list price (a local model): no dollars are shown."""

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
            self.dollars + other.dollars,
            self.dollars_uncached + other.dollars_uncached,
            self.unpriced | other.unpriced,
        )

    def add(self, usage: Usage, model: str = "") -> None:
        """Count one API call to `model` (unknown or empty: priced as Sonnet)."""
        self.requests += 1
        self.input += usage.input_tokens
        self.cache_write += usage.cache_creation_input_tokens
        self.cache_read += usage.cache_read_input_tokens
        self.output += usage.output_tokens
        self.dollars += call_cost(usage, model)
        self.dollars_uncached += call_cost(usage, model, cached=False)
        if model and not prices_for(model).known:
            self.unpriced |= {model}

    def cost(self, *, cached: bool = True) -> float:
        """Dollars at list prices; `cached=False`: with every input token at the base rate (no caching)."""
        return self.dollars if cached else self.dollars_uncached

    # The two texts every view of a session prints (`/cost`, `/cache`, `foldline cache`, `inspect`,
    # `simulate`, the demo), so one session reads the same everywhere: same rounding, same rule for
    # a model with no list price.

    def dollars_text(self) -> str:
        """The cost with and without caching, or why there are no dollars (a model with no list price)."""
        if self.unpriced:
            return f"no dollars: {', '.join(sorted(self.unpriced))} has no list price"
        return f"${self.dollars:.4f} (without caching ${self.dollars_uncached:.4f})"

    def read_share_text(self) -> str:
        """The cache-read share of every input token."""
        return f"{self.read_share:.1%}"


def _billed(records: Iterable[AnyRecord]) -> Iterable[tuple[Usage, str]]:
    for record in records:
        if isinstance(record, AssistantEntry) and not record.is_api_error_message and not record.is_virtual:
            if record.message.usage is not None:
                yield record.message.usage, record.message.model


def _usages(records: Iterable[AnyRecord]) -> Iterable[Usage]:
    return (usage for usage, _ in _billed(records))


def usage_of(records: Iterable[AnyRecord]) -> UsageTotals:
    """Usage summed over every real API reply in `records`, each priced at its own model's prices."""
    totals = UsageTotals()
    for usage, model in _billed(records):
        totals.add(usage, model)
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
