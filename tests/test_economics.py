"""benchmarks/economics.py: every strategy runs a short session, and the rewrites do what they claim.

The sessions run in-process on `foldline.testing.SimulatedProvider` (strict: a body the API would
refuse, such as a tool_result whose tool_use was dropped, fails the call), on small thresholds so
that each rewrite really acts within 6 turns.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from foldline.testing import SimulatedProvider

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("economics", BENCHMARKS / "economics.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["economics"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


econ = _load()
COLUMNS = {
    "cost_usd",
    "cache_read_share",
    "peak_context_tokens",
    "api_calls",
    "summary_calls",
    "http_400",
    "facts_planted",
    "facts_retained",
    "output_facts_asked",
    "output_facts_retained",
    "turns_completed",
    "ratio_vs_none",
}


def _session(tmp_path: Path, strategy: Any, rewriter: Any, *, turns: int = 6, window: int = 60_000) -> Any:
    provider = SimulatedProvider(
        seed=7, profile="feature", capabilities=strategy.capabilities(), context_window=window
    )
    report = asyncio.run(
        econ.play(
            provider,
            strategy,
            rewriter,
            profile="feature",
            turns=turns,
            seed=7,
            window=window,
            root=tmp_path,
        )
    )
    return report, provider


def _tool_results(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if b.get("type") == "tool_result"] if isinstance(content, list) else []


@pytest.mark.slow  # seven 6-turn sessions with real tools in a generated workspace
@pytest.mark.parametrize("name", list(econ.STRATEGIES))
def test_every_strategy_completes_a_short_session_and_reports_every_column(tmp_path: Path, name: str) -> None:
    strategy = econ.STRATEGIES[name]()
    report, provider = _session(tmp_path, strategy, strategy.rewriter(60_000))
    assert report.turns_done == 6
    assert not report.errors
    assert report.stopped is None
    row = econ.Outcome("feature", strategy, report, 0, 0).row(baseline_cost=report.usage.cost() * 2)
    assert COLUMNS <= row.keys()
    assert row["strategy"] == name
    assert row["api_calls"] == len(provider.calls) > 0
    assert row["ratio_vs_none"] == pytest.approx(0.5, abs=0.01)
    assert len(row["context_per_turn"]) == 6


def test_masking_replaces_all_but_the_last_results_in_what_is_sent_not_in_the_history(tmp_path: Path) -> None:
    strategy = econ.Masking(keep=2)
    report, provider = _session(tmp_path, strategy, strategy.rewriter(60_000))
    last = [b for m in provider.calls[-1].body["messages"] for b in _tool_results(m)]
    assert len(last) > 2
    assert all(b["content"] == "<MASKED>" for b in last[:-2])
    assert all(b["content"] != "<MASKED>" for b in last[-2:])
    # the engine's own history keeps the full results: only the bytes sent were rewritten
    assert all(size > len("<MASKED>") for size in report.result_chars)


def test_truncation_drops_whole_turns_and_never_splits_a_tool_pair(tmp_path: Path) -> None:
    strategy = econ.Truncation()
    rewriter = econ.Truncate(threshold=6_000)
    report, provider = _session(tmp_path, strategy, rewriter)
    assert report.turns_done == 6
    assert rewriter.dropped_max > 0
    for call in provider.calls:
        messages = call.body["messages"]
        assert messages[0]["role"] == "user"
        assert not _tool_results(messages[0])
        for before, after in itertools.pairwise(messages):
            ids = {b["tool_use_id"] for b in _tool_results(after)}
            uses = {b["id"] for b in before["content"] if b.get("type") == "tool_use"} if ids else set()
            assert ids <= uses


def test_summary_is_a_separate_uncached_request_and_replaces_the_older_turns(tmp_path: Path) -> None:
    strategy = econ.Summary()
    rewriter = econ.Summarize(threshold=8_000, tail=2_000)
    report, provider = _session(tmp_path, strategy, rewriter)
    summaries = [c for c in provider.calls if c.body.get("system") == econ.SUMMARY_SYSTEM]
    assert summaries
    assert len(summaries) == len(rewriter.requests)
    assert all("tools" not in c.body for c in summaries)
    # its own requests count as summary calls, beside the main loop's
    assert report.fork_requests == len(summaries)
    after = provider.calls[provider.calls.index(summaries[-1]) + 1].body["messages"]
    assert "continues from an earlier conversation" in after[0]["content"][0]["text"]


def test_anthropic_clearing_waits_for_its_trigger_then_keeps_three() -> None:
    mask = econ.Mask(3, "[cleared]", trigger=10**9)
    results = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * 50}]}
        for i in range(6)
    ]
    body = {"model": "m", "messages": results}
    assert asyncio.run(mask.rewrite(body, None)) is body  # under the trigger: sent as it is
    mask.trigger = 1
    sent = asyncio.run(mask.rewrite(body, None))["messages"]
    assert [m["content"][0]["content"] for m in sent] == ["[cleared]"] * 3 + ["x" * 50] * 3
    assert results[0]["content"][0]["content"] == "x" * 50  # the caller's body is not mutated


@pytest.mark.slow  # a 40-turn session with real tools
def test_masking_loses_a_fact_only_a_tool_result_held_and_keeps_the_users(tmp_path: Path) -> None:
    # (that the model recalls such a fact while its result is in view: tests/server/test_simulated.py)
    strategy = econ.Masking(keep=10)
    # a window the unmanaged growth of 40 turns fits in: what is measured is what masking drops
    report, provider = _session(tmp_path, strategy, strategy.rewriter(120_000), turns=40, window=120_000)
    assert report.turns_done == 40
    row = econ.Outcome("feature", strategy, report, 0, 0).row(None)
    assert row["facts_asked"] == 8  # the user's five, the scripts' three
    assert row["output_facts_asked"] == 3
    assert row["output_facts_retained"] == 0  # the scripts ran 25 turns before the questions
    assert row["facts_retained"] == 5
    ran = [c for c in provider.calls if "stress test seed is" in str(c.body["messages"])]
    assert ran  # the value did reach the model, until masking took it out


def _load_report() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_report", BENCHMARKS / "report.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(strategy: str, cost: float, *, facts: int = 5, share: float = 0.99) -> dict[str, Any]:
    return {
        "profile": "feature",
        "strategy": strategy,
        "cost_usd": cost,
        "cost_uncached_usd": cost * 8,
        "cache_write_share": 0.01,
        "ratio_vs_none": cost / 10.0,
        "cache_read_share": share,
        "peak_context_tokens": 100_000,
        "api_calls": 10,
        "summary_calls": 1,
        "http_400": 0,
        "facts_planted": 5,
        "facts_asked": 5,
        "facts_retained": facts,
        "turns_completed": 4,
        "turns_planned": 4,
        "receipts": {},
        "errors": [],
        "stopped": None,
        "context_per_turn": [50_000, 170_000, 200_000, 210_000],
    }


def test_the_report_says_which_targets_foldline_missed_and_why() -> None:
    report = _load_report()
    rows = [_row("none", 10.0), _row("truncate", 4.0, facts=2), _row("summary", 8.0), _row("foldline", 5.0)]
    lines = "\n".join(report.verdicts(rows))
    assert "**MISSED**: cost <= 0.40x no management (0.50x)" in lines
    assert "**MISSED**: cost <= 0.75x the cheapest other strategy that completed every turn (1.25x" in lines
    assert "met: cost <= 0.75x the cheapest other strategy that also retained as many facts (0.62x" in lines
    assert "met: facts the user stated, retained >= the best other strategy's (5 vs 5)" in lines
    assert "tool output" not in lines  # rows without output facts are not judged on them
    assert "threshold at turn 2 of 4" in lines  # the why: where the unmanaged session crossed 167K
    assert "why against the cheapest: foldline's requests carried" in lines
    cheap = [_row("none", 10.0), _row("summary", 8.0), _row("foldline", 3.0, share=0.9)]
    lines = "\n".join(report.verdicts(cheap))
    assert "met: cost <= 0.40x no management" in lines
    assert "**MISSED**: cache-read share >= 0.95 (90.0%)" in lines
    assert "why the cost" not in lines


def test_the_report_judges_the_cold_build_on_resume_from_the_overhead_table() -> None:
    report = _load_report()
    table = (
        " messages  body MB  turn ms  dumps ms  ratio  cold ms cold/dumps resume ms resume/dumps\n"
        "    20017    18.29     6.83     37.93   0.18   1257.9       33.2     230.0          6.1\n"
    )
    [line] = report._target_lines("pipeline_overhead", table)
    assert line.startswith("Cold build on resume at 20K messages: 6.1x serialization, target <= 10x: met.")
    assert "everything: 33.2x" in line
    slow = table.replace("6.1\n", "12.5\n")
    assert "target <= 10x: **MISSED**" in report._target_lines("pipeline_overhead", slow)[0]


def test_the_report_solves_input_and_output_tokens_from_the_two_costs() -> None:
    report = _load_report()
    inputs, outputs, read, write = 100.0, 0.5, 0.9, 0.05  # millions of tokens, shares
    cost = inputs * (0.3 * read + 3.75 * write + 3.0 * (1 - read - write)) + 15 * outputs
    row = {"cost_usd": cost, "cost_uncached_usd": 3 * inputs + 15 * outputs}
    solved = report.tokens_of({**row, "cache_read_share": read, "cache_write_share": write})
    assert solved == pytest.approx((inputs, outputs))
    fold = {**_row("foldline", 50.0), **row, "cache_read_share": read, "cache_write_share": write}
    summary = {**fold, "strategy": "summary", "cost_uncached_usd": 3 * 120 + 15 * 0.2}
    summary["cost_usd"] = 120 * (0.3 * read + 3.75 * write + 3.0 * (1 - read - write)) + 15 * 0.2
    why = report._against_why(fold, summary)
    assert "100.0M input tokens against `summary`'s 120.0M (17% fewer)" in why
    assert "0.50M output tokens against 0.20M, $4.50 more" in why
