"""List prices per model: the one table the status line, `/cost`, `inspect` and the benchmarks price with.

Prices are Anthropic's published list prices in dollars per million tokens (docs/design.md P7 cites
the page and the date they were read). They are facts about the API, not tunables, so they live
here rather than in `Config`. Three rules the API bills by, all applied per request:

- a cache write costs 1.25x base input with the 5-minute TTL and 2x with the 1-hour one (P7); the
  usage's `cache_creation` split says which (no split: every write is 5-minute, the default TTL);
- a cache read costs 0.1x base input;
- a model with a long-context rate bills a request whose input (uncached + writes + reads) exceeds
  200K tokens at that rate, for every token of the request, output included.

A model the table does not know is priced as Sonnet (the default model), and `ModelPrices.known`
says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from foldline.timeline import Usage

__all__ = ["LONG_CONTEXT_THRESHOLD", "ModelPrices", "Rates", "call_cost", "prices_for"]

LONG_CONTEXT_THRESHOLD = 200_000
"""Input tokens above which a model's long-context rate applies to the whole request."""


@dataclass(frozen=True)
class Rates:
    """Dollars per million tokens for each kind of token of one request."""

    input: float
    write_5m: float
    write_1h: float
    read: float
    output: float

    @classmethod
    def of(cls, base: float, output: float) -> Rates:
        """The rates from the base input price by the standard cache multipliers (P7)."""
        return cls(base, base * 1.25, base * 2, base * 0.1, output)


@dataclass(frozen=True)
class ModelPrices:
    """What one model costs: its normal rates and, where the model has one, its long-context rate."""

    name: str
    """The family and versions these prices are for, as the pricing page names them."""
    base: Rates
    long_context: Rates | None = None
    known: bool = True
    """False when the model was not in the table and is priced as Sonnet."""

    def rates(self, prompt_tokens: int) -> Rates:
        """The rates a request with `prompt_tokens` input tokens is billed at."""
        if self.long_context is not None and prompt_tokens > LONG_CONTEXT_THRESHOLD:
            return self.long_context
        return self.base


_OPUS_OLD = ModelPrices("Opus 4 / 4.1 / 3", Rates.of(15.0, 75.0))
_OPUS_45 = ModelPrices("Opus 4.5", Rates.of(5.0, 25.0))
_OPUS_46 = ModelPrices("Opus 4.6+", Rates.of(5.0, 25.0), long_context=Rates.of(10.0, 37.5))
_SONNET = ModelPrices("Sonnet 3.7 / 4 / 4.5 / 4.6", Rates.of(3.0, 15.0), long_context=Rates.of(6.0, 22.5))
_HAIKU_45 = ModelPrices("Haiku 4.5", Rates.of(1.0, 5.0))
_HAIKU_35 = ModelPrices("Haiku 3.5", Rates.of(0.8, 4.0))
# Haiku 3 is the one model whose cache prices are not the standard multiples of its base price.
_HAIKU_3 = ModelPrices("Haiku 3", Rates(0.25, 0.30, 0.50, 0.03, 1.25))

# `claude-opus-4-6`, `claude-sonnet-4-5-20250929`, `claude-opus-4-20250514` (a date, not a minor
# version: at most two digits make a minor), and the older `claude-3-5-haiku-20241022`.
_NEW_NAME = re.compile(r"(opus|sonnet|haiku)-(\d{1,2})(?:-(\d{1,2}))?(?!\d)")
_OLD_NAME = re.compile(r"claude-(\d)(?:-(\d))?-(opus|sonnet|haiku)")


def _family(model: str) -> tuple[str, tuple[int, int]] | None:
    name = model.lower()
    if found := _NEW_NAME.search(name):
        return found[1], (int(found[2]), int(found[3] or 0))
    if found := _OLD_NAME.search(name):
        return found[3], (int(found[1]), int(found[2] or 0))
    return None


@lru_cache(maxsize=64)
def prices_for(model: str) -> ModelPrices:
    """The list prices of `model` (an API model id); Sonnet's, marked unknown, for anything else."""
    found = _family(model)
    if found is None:
        return ModelPrices(_SONNET.name, _SONNET.base, _SONNET.long_context, known=False)
    family, version = found
    if family == "opus":
        return _OPUS_46 if version >= (4, 6) else _OPUS_45 if version >= (4, 5) else _OPUS_OLD
    if family == "haiku":
        return _HAIKU_45 if version >= (4, 0) else _HAIKU_35 if version >= (3, 5) else _HAIKU_3
    return _SONNET


def _writes(usage: Usage) -> tuple[int, int]:
    """(5-minute, 1-hour) cache writes: the API's split where it gives one, else all 5-minute."""
    split = usage.cache_creation or {}
    hour = split.get("ephemeral_1h_input_tokens", 0)
    return usage.cache_creation_input_tokens - hour, hour


def call_cost(usage: Usage, model: str, *, cached: bool = True) -> float:
    """Dollars one request cost at `model`'s list prices.

    `cached=False` prices every input token at the base rate: what the request would have cost
    without prompt caching.
    """
    rates = prices_for(model).rates(usage.prompt_tokens)
    if not cached:
        return (usage.prompt_tokens * rates.input + usage.output_tokens * rates.output) / 1e6
    five, hour = _writes(usage)
    total = usage.input_tokens * rates.input + five * rates.write_5m + hour * rates.write_1h
    total += usage.cache_read_input_tokens * rates.read + usage.output_tokens * rates.output
    return total / 1e6
