"""The benchmarks' summary-fidelity plumbing: each unit carries its q, every row records it, the
table and the report group rows by q with retention pooled over seeds and its Wilson interval, and
rows from before the setting read as q = 1."""

from __future__ import annotations

import argparse
import io
from typing import Any

import pytest
from tests.test_economics import BENCHMARKS, _five, _load_report, econ

from foldline.server.config import SimulatedConfig
from foldline.simulation import SimulationReport


def test_the_wilson_interval_matches_the_textbook_and_covers_the_extremes() -> None:
    # 8 of 10: the score interval is [0.490, 0.943] (Wilson 1927; Newcombe 1998, table I)
    low, high = econ.Retention(8, 10).interval()
    assert (round(low, 3), round(high, 3)) == (0.49, 0.943)
    low, high = econ.Retention(0, 10).interval()
    assert low == 0.0
    assert round(high, 3) == 0.278
    assert econ.Retention(10, 10).interval()[1] == 1.0
    assert econ.Retention(0, 0).show() == "-"
    assert econ.Retention(8, 10).show() == "8/10 80% [49%, 94%]"


def test_rows_are_aggregated_by_q_with_retention_pooled_over_seeds() -> None:
    full = [{**r, "summary_fidelity": 1.0} for r in _five("claude-code-design", (3.0,) * 5, facts=5)]
    lossy = [
        {**r, "summary_fidelity": 0.7, "facts_retained": kept}
        for r, kept in zip(_five("claude-code-design", (3.0,) * 5), (4, 3, 5, 2, 4), strict=True)
    ]
    old = _five("truncate", (2.0,) * 5)  # written before the setting: no q
    cells = econ.aggregate([*full, *lossy, *old])
    by = {(c["strategy"], c["summary_fidelity"]): c for c in cells}
    assert sorted(by) == [("claude-code-design", 0.7), ("claude-code-design", 1.0), ("truncate", 1.0)]
    assert by["claude-code-design", 0.7]["retention"] == econ.Retention(18, 25)
    assert by["claude-code-design", 1.0]["retention"] == econ.Retention(25, 25)
    assert by["truncate", 1.0]["summary_fact_budget"] == SimulatedConfig().summary_fact_budget
    lines = econ.table_lines(cells)
    assert lines[0].endswith("| q | retention [95%] |")
    assert any(line.endswith("| 0.7 | 18/25 72% [52%, 86%] |") for line in lines)


def test_the_printed_table_puts_each_qs_lines_together() -> None:
    rows = []
    for q in (0.7, 1.0, 0.7):
        for name in ("truncate", "claude-code-design"):
            rows += [{**r, "summary_fidelity": q} for r in _five(name, (2.0,) * 2)]
    out = io.StringIO()
    econ.print_table(rows, out)
    lines = out.getvalue().splitlines()[2:]
    assert [(line.split("|")[2].strip(), line.split("|")[-3].strip()) for line in lines] == [
        ("truncate", "1"),
        ("claude-code-design", "1"),
        ("truncate", "0.7"),
        ("claude-code-design", "0.7"),
    ]


def test_each_unit_carries_its_q_and_the_row_records_it(monkeypatch: pytest.MonkeyPatch) -> None:
    args = argparse.Namespace(
        turns=4,
        window=200_000,
        verbosity_scale=1.0,
        facts_at_end=False,
        pair_timeout=60.0,
        summary_fact_budget=9,
    )
    units = [econ.unit_of("debug", "truncate", 7, args, q) for q in econ.fidelities("1.0,0.7")]
    assert [u.knob("summary_fidelity", -1.0) for u in units] == [1.0, 0.7]
    assert units[0].key != units[1].key  # two rows in a results folder, not one
    nothing_kept = econ.unit_of(
        "debug", "truncate", 7, argparse.Namespace(**{**vars(args), "summary_fact_budget": 0})
    )
    assert nothing_kept.knob("summary_fact_budget", -1) == 0  # a budget of 0 is a budget, not "unset"
    seen: dict[str, Any] = {}

    def pair_row(profile: str, name: str, seed: int, given: argparse.Namespace, root: Any) -> dict[str, Any]:
        seen.update(vars(given))
        return {}

    monkeypatch.setattr(econ, "pair_row", pair_row)
    econ.fleet_row(units[1], None)
    assert (seen["summary_fidelity"], seen["summary_fact_budget"]) == (0.7, 9)
    row = econ.report_row(
        "debug", "x", "x", SimulationReport("debug", 7, 3), summary_fidelity=0.7, summary_fact_budget=9
    )
    assert (row["summary_fidelity"], row["summary_fact_budget"]) == (0.7, 9)


def test_fidelity_lists_refuse_values_outside_zero_to_one() -> None:
    assert econ.fidelities("1.0, 0.9,0.7,0.9") == [1.0, 0.9, 0.7]
    for bad in ("1.2", "-0.1", "", "nan"):
        with pytest.raises(ValueError, match="--fidelity takes values between 0 and 1"):
            econ.fidelities(bad)


def test_the_server_is_started_with_the_units_summary_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    monkeypatch.syspath_prepend(str(BENCHMARKS))  # economics imports it so, run as a script
    import simulator

    started: list[list[str]] = []

    class Stop(Exception):
        pass

    def popen(command: list[str], **_: Any) -> Any:
        started.append(command)
        raise Stop

    monkeypatch.setattr(subprocess, "Popen", popen)
    with (
        pytest.raises(Stop),
        simulator.serve(7, "debug", 200_000, summary_fidelity=0.7, summary_fact_budget=9),
    ):
        pass
    command = started[0]
    assert command[command.index("--summary-fidelity") + 1] == "0.7"
    assert command[command.index("--summary-fact-budget") + 1] == "9"


def test_peers_units_carry_q_and_the_parser_takes_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _load_report()
    import peers

    args = peers.argument_parser().parse_args(["--client", "claude-code", "--fidelity", "1.0,0.7"])
    assert econ.fidelities(args.fidelity) == [1.0, 0.7]
    [setting] = peers.settings(args)
    unit = peers.unit_of(setting, 7, args, 0.7)
    assert unit.knob("summary_fidelity", -1.0) == 0.7
    assert unit.knob("summary_fact_budget", -1) == SimulatedConfig().summary_fact_budget
    seen: dict[str, Any] = {}
    monkeypatch.setattr(peers, "run", lambda *a: seen.update(vars(a[-1])) or {})
    peers.fleet_row(unit, None)
    assert seen["summary_fidelity"] == 0.7
    assert report.fidelity_list(argparse.Namespace(fidelity="0.7,0.9")) == [1.0, 0.9, 0.7]


def test_the_page_keeps_its_main_tables_at_q_1_and_groups_every_row_by_q() -> None:
    report = _load_report()
    main = [*_five("foldline-no-edits", (3.0,) * 5), *_five("claude-code@100k", (6.0,) * 5)]
    lossy = [{**r, "summary_fidelity": 0.7, "facts_retained": 3} for r in main]
    page = report.build_page([*main, *lossy], [], "feature 4", [])
    assert (
        page.count("| feature | foldline-no-edits | 5 | $3.00 |") == 2
    )  # main table and intervals: q 1 only
    assert "### Summary fidelity" in page
    assert "Wilson" in page
    assert "| 0.7 | feature | foldline-no-edits | 1 | 5 | 15/25 60% [41%, 77%] | $3.00 | 1 |" in page
    assert "| 1 | feature | foldline-no-edits | 1 | 5 | 25/25 100% [87%, 100%] | $3.00 | 1 |" in page
    section = page[page.index("### Summary fidelity") :]
    assert section.index("| 1 | feature |") < section.index("| 0.7 | feature |")
    # rows written before the setting: the page as it was, no section
    assert "### Summary fidelity" not in report.build_page(main, [], "feature 4", [])
