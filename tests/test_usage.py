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
