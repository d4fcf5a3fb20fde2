"""The demo: a long session through the levels on a small window, beside the same one unmanaged."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from foldline._json import loads
from foldline.cli import cli
from foldline.demo import DEMO_SETTINGS, LEVELS, level_counts, run_demo


@pytest.mark.slow
@pytest.mark.anyio
async def test_demo_session_goes_through_the_levels_and_costs_less_than_unmanaged(tmp_path: Path) -> None:
    result = await run_demo(DEMO_SETTINGS, workdir=tmp_path)  # the session `make demo` plays
    managed, unmanaged = result.managed, result.unmanaged
    assert managed.turns_done == unmanaged.turns_done == DEMO_SETTINGS.turns
    assert managed.errors == []
    assert managed.stopped is None
    # Issue 14's finding on this window: forks and unanchored estimates went over the limit.
    assert managed.http_400s == 0
    assert managed.over_limit() == 0  # main loop and every fork, counted by the server's tokenizer
    assert managed.facts_retained == managed.facts_asked > 0
    counts = level_counts(managed)
    assert set(counts) == set(LEVELS)
    # Snip depends on the model answering a nudge while something bulky is still uncleared; the
    # demo's repeated nudge (`DemoSettings.snip_renudge_turns`) makes that happen in every run.
    for level in LEVELS:
        assert counts[level] > 0, counts
    plain = level_counts(unmanaged)
    assert plain["microcompact"] == plain["collapse"] == plain["autocompact"] == 0
    assert managed.peak_request < unmanaged.peak_request
    assert managed.usage.cost() < unmanaged.usage.cost()
    assert result.transcript.exists()


@pytest.mark.slow
def test_demo_json_has_the_issue_keys(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    args = ["--profile", "swe", "--seed", "3", "--context-window", "40000"]
    result = CliRunner().invoke(cli, ["demo", "--turns", "12", "--json", "--html", str(page), *args])
    assert result.exit_code == 0, result.output
    report = loads(result.output.strip().splitlines()[-1])
    for key in ("turns", "api_calls", "http_400", "peak_context_tokens", "blocking_limit"):
        assert key in report
    for key in ("cache_read_share", "cost_usd", "cost_unmanaged_usd", "facts_planted", "facts_retained"):
        assert key in report
    assert set(report["levels"]) == set(LEVELS)
    assert report["turns"] == 12
    assert report["blocking_limit"] == 40_000 - 20_000 - 3_000  # the window asked for
    assert report["http_400"] == report["over_blocking_limit"] == 0
    assert report["api_calls"] >= 12
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_the_readme_shows_the_numbers_the_demo_prints() -> None:
    """The README's `make demo` sample: every number that comes from the demo's settings (turns,
    profile, seed, window, the limit requests are kept under) is the one the demo prints, and the
    table names the same window as the header (it used to say a 60K window, then a 37K limit)."""
    from foldline.demo import DEMO_SETTINGS, demo_header

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    sample = readme[readme.index("$ make demo") :]
    sample = sample[: sample.index("```")]
    lines = sample.splitlines()
    # Rich wraps the header at the console width; the README keeps the wrapped lines as printed.
    header = " ".join(lines[2:4])
    assert header == demo_header(DEMO_SETTINGS)
    window = f"{DEMO_SETTINGS.context_window:,}-token"
    assert f"foldline, {window} │" in sample
    assert f"{DEMO_SETTINGS.turns}/{DEMO_SETTINGS.turns}" in sample
    assert "37,000" in header  # 60,000 less the 20,000 reply reserve and the 3,000 margin
    prose = readme[: readme.index("$ make demo")]
    assert f"a {DEMO_SETTINGS.turns}-turn debugging session" in prose
    assert f"on a {DEMO_SETTINGS.context_window // 1000}K window" in prose
