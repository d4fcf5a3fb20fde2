"""List prices per model (foldline.pricing): families, cache TTLs, the long-context rate."""

from __future__ import annotations

import pytest

from foldline.pricing import LONG_CONTEXT_THRESHOLD, call_cost, prices_for
from foldline.timeline import AssistantEntry, AssistantMessage, Usage
from foldline.usage import usage_of

# Small enough to stay under the long-context threshold; 100K tokens cost a tenth of the $/M price.
INPUT = Usage(input_tokens=100_000)
OUT = Usage(output_tokens=1_000_000)


@pytest.mark.parametrize(
    ("model", "per_input", "per_output"),
    [
        ("claude-sonnet-4-5", 3.0, 15.0),
        ("claude-sonnet-4-5-20250929", 3.0, 15.0),
        ("claude-3-7-sonnet-20250219", 3.0, 15.0),
        ("claude-opus-4-6", 5.0, 25.0),
        ("claude-opus-4-5-20251101", 5.0, 25.0),
        ("claude-opus-4-1-20250805", 15.0, 75.0),
        ("claude-opus-4-20250514", 15.0, 75.0),  # a date, not Opus 4.20
        ("claude-haiku-4-5", 1.0, 5.0),
        ("claude-3-5-haiku-20241022", 0.8, 4.0),
        ("claude-3-haiku-20240307", 0.25, 1.25),
    ],
    ids=lambda v: str(v),
)
def test_each_family_has_its_own_list_prices(model: str, per_input: float, per_output: float) -> None:
    assert prices_for(model).known
    assert call_cost(INPUT, model) == pytest.approx(per_input / 10)
    assert call_cost(OUT, model) == pytest.approx(per_output)


def test_an_unknown_model_is_priced_as_sonnet_and_says_so() -> None:
    prices = prices_for("my-local-llama")
    assert not prices.known
    assert call_cost(INPUT, "my-local-llama") == pytest.approx(0.3)


def test_cache_writes_cost_one_and_a_quarter_for_five_minutes_and_double_for_an_hour() -> None:
    five = Usage(cache_creation_input_tokens=100_000)  # no split: the default 5-minute TTL
    hour = Usage(
        cache_creation_input_tokens=100_000,
        cache_creation={"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 100_000},
    )
    assert call_cost(five, "claude-opus-4-6") == pytest.approx(0.625)
    assert call_cost(hour, "claude-opus-4-6") == pytest.approx(1.0)
    read = Usage(cache_read_input_tokens=100_000)
    assert call_cost(read, "claude-opus-4-6") == pytest.approx(0.05)


def test_long_context_rate_applies_to_the_whole_request_above_200k_input() -> None:
    at = Usage(input_tokens=LONG_CONTEXT_THRESHOLD, output_tokens=1_000)
    above = Usage(input_tokens=1_000, cache_read_input_tokens=LONG_CONTEXT_THRESHOLD, output_tokens=1_000)
    assert call_cost(at, "claude-sonnet-4-5") == pytest.approx((200_000 * 3 + 1_000 * 15) / 1e6)
    # Above the threshold (reads count): input 6, reads 0.60, output 22.50 per million.
    assert call_cost(above, "claude-sonnet-4-5") == pytest.approx(
        (1_000 * 6 + 200_000 * 0.6 + 1_000 * 22.5) / 1e6
    )
    # A model without a long-context rate keeps its normal prices.
    assert call_cost(above, "claude-opus-4-5") == pytest.approx(
        (1_000 * 5 + 200_000 * 0.5 + 1_000 * 25) / 1e6
    )


def test_uncached_cost_prices_every_input_token_at_base() -> None:
    usage = Usage(
        input_tokens=10, cache_creation_input_tokens=1_000, cache_read_input_tokens=1_000, output_tokens=5
    )
    assert call_cost(usage, "claude-haiku-4-5", cached=False) == pytest.approx((2_010 * 1 + 5 * 5) / 1e6)


def _reply(model: str, usage: Usage) -> AssistantEntry:
    message = AssistantMessage(id="m", model=model, content=[{"type": "text", "text": "x"}], usage=usage)
    return AssistantEntry(uuid="a", timestamp="t", message=message)


def test_a_session_that_switched_models_is_priced_call_by_call() -> None:
    totals = usage_of([_reply("claude-opus-4-1", OUT), _reply("claude-haiku-4-5", OUT)])
    assert totals.cost() == pytest.approx(75.0 + 5.0)
    assert (totals + totals).cost() == pytest.approx(160.0)
