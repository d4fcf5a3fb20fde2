"""Usage totals, cost and cache-break detection from the timeline (R7.3 phase 2)."""

from __future__ import annotations

import pytest

from foldline.timeline import AssistantEntry, AssistantMessage, Usage
from foldline.usage import UsageTotals, cache_breaks, usage_of


def _reply(read: int, write: int = 0, uncached: int = 10, output: int = 5, **kw: bool) -> AssistantEntry:
    usage = Usage(
        input_tokens=uncached,
        cache_read_input_tokens=read,
        cache_creation_input_tokens=write,
        output_tokens=output,
    )
    message = AssistantMessage(id="m", content=[{"type": "text", "text": "x"}], usage=usage)
    return AssistantEntry(uuid="a", timestamp="t", message=message, **kw)


def test_totals_and_cost() -> None:
    totals = usage_of([_reply(0, write=1000), _reply(1000, write=200)])
    assert (totals.requests, totals.prompt, totals.cache_read, totals.output) == (2, 2220, 1000, 10)
    assert totals.cost() == pytest.approx((20 * 3 + 1200 * 3.75 + 1000 * 0.3 + 10 * 15) / 1e6)
    assert totals.cost(cached=False) == pytest.approx((2220 * 3 + 10 * 15) / 1e6)
    assert (totals + totals).requests == 4


def test_error_and_virtual_entries_are_not_billed() -> None:
    assert usage_of([_reply(5, is_api_error_message=True), _reply(5, is_virtual=True)]) == UsageTotals()


def test_a_break_needs_both_five_percent_and_two_thousand_tokens() -> None:
    reads = [100_000, 97_000, 96_000, 50_000, 49_000, 1_000, 0]
    breaks = cache_breaks([_reply(r) for r in reads])
    # 100k->97k: 3% (no); 97k->96k: 1k tokens (no); 96k->50k: yes; 50k->49k: 2% (no);
    # 49k->1k: yes; 1k->0: 100% but only 1k tokens (no).
    assert [(b.call, b.before, b.after) for b in breaks] == [(4, 96_000, 50_000), (6, 49_000, 1_000)]


def test_a_model_with_no_list_price_shows_no_dollars_in_cost_and_cache_alike() -> None:
    """/cost said a local model has no list price while /cache priced the same calls as Sonnet."""
    from rich.console import Console

    from foldline.cachestats import cache_stats
    from foldline.cli.inspect import _stats_table

    usage = Usage(input_tokens=10_000, cache_read_input_tokens=5_000, output_tokens=1_000)
    message = AssistantMessage(id="m", model="smollm2-135m-instruct", content=[], usage=usage)
    records = [AssistantEntry(uuid="a", timestamp="2026-01-01T00:00:00Z", message=message)]
    totals = usage_of(records)
    assert totals.dollars_text() == "no dollars: smollm2-135m-instruct has no list price"
    console = Console(width=200, record=True, color_system=None)
    console.print(_stats_table(cache_stats(records)))  # what /cache and `foldline cache` print
    shown = console.export_text()
    assert "no dollars: smollm2-135m-instruct has no list price" in shown
    assert f"{totals.read_share_text()} of input tokens" in shown
    assert "$" not in shown  # nor a break's extra cost
    sonnet = AssistantMessage(id="n", model="claude-sonnet-4-5", content=[], usage=usage)
    priced = usage_of([AssistantEntry(uuid="b", timestamp="2026-01-01T00:00:00Z", message=sonnet)])
    assert priced.dollars_text() == f"${priced.cost():.4f} (without caching ${priced.cost(cached=False):.4f})"
