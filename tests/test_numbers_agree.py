"""Every number a user reads about one session, from every view, agrees (issue 51, item 3).

One simulated session is recorded through `foldline simulate`'s own path (the server started
in-process, so the prompt cache is the server's); then its transcript is read by each view:
`/context`, `/cost` and `/cache` (the REPL's handlers on the resumed session), `foldline cache`,
`foldline inspect` and `simulate`'s report. Each view prints its numbers through the same texts
(`UsageTotals.dollars_text`, `read_share_text`), so they are compared as printed.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from foldline.cli import cli
from foldline.cli._slash import CATEGORIES, _cache, _context, _cost
from foldline.cli.simulate import simulated_server
from foldline.config import DESIGN_WINDOW, Config, TranscriptConfig
from foldline.inspection import render_html, session_view
from foldline.providers.anthropic import AnthropicProvider
from foldline.session import Session
from foldline.sessions import load_session
from foldline.simulation import SimulationReport, simulate
from foldline.testing import ScriptedProvider
from foldline.usage import usage_of

SEED, PROFILE, TURNS = 3, "feature", 4
WINDOW = 8_192
"""A window below design.md's 200K: the thresholds are scaled, where inspect printed negative ones."""


@dataclass
class Recorded:
    path: Path
    report: SimulationReport
    workspace: Path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    root = tmp_path_factory.mktemp("numbers")
    sessions = root / "sessions"
    config = Config(transcript=TranscriptConfig(sessions_dir=sessions, fsync="never"))

    async def run(url: str) -> SimulationReport:
        provider = AnthropicProvider(base_url=url, api_key="simulated")
        return await simulate(
            provider,
            profile=PROFILE,
            turns=TURNS,
            seed=SEED,
            workspace=root / "ws",
            sessions_dir=sessions,
            config=config,
        )

    with simulated_server(None, SEED, PROFILE) as url:
        report = asyncio.run(run(url))
    assert report.turns_done == TURNS, report.lines()
    return Recorded(sessions / f"simulated-{PROFILE}-{SEED}.jsonl", report, root / "ws")


@dataclass
class _Chat:
    """What `/context`, `/cost` and `/cache` read of the chat."""

    session: Session
    console: Console


def _repl_views(recorded: Recorded) -> tuple[str, str, str, Config]:
    """`/context`, `/cost` and `/cache` as the REPL prints them on the resumed session, on `WINDOW`."""
    config = Config(context_window=WINDOW, reference_window=DESIGN_WINDOW)  # as `foldline chat` sets it

    async def views() -> tuple[str, str, str]:
        async with Session.open(
            recorded.path, provider=ScriptedProvider([]), workspace=recorded.workspace, config=config
        ) as session:
            shown = []
            for view in (_context, _cost, _cache):
                console = Console(width=200, record=True, color_system=None)
                view(_Chat(session, console))  # type: ignore[arg-type]
                shown.append(console.export_text())
            return shown[0], shown[1], shown[2]

    context, cost, cache = asyncio.run(views())
    return context, cost, cache, config


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_view_of_one_session_gives_the_same_numbers(recorded: Recorded) -> None:
    totals = usage_of(load_session(recorded.path).records)
    dollars, share = totals.dollars_text(), totals.read_share_text()
    assert totals.requests > 0
    assert totals.cache_read > 0
    assert dollars.startswith("$")

    # simulate's report: its main-loop line is the transcript's; the whole includes the forks
    report = recorded.report
    simulated = _flat("\n".join(report.lines()))
    assert f"main loop {dollars}, cache-read share {share}" in simulated
    assert report.main_usage.cost() == pytest.approx(totals.cost())
    assert report.usage.cost() >= totals.cost()

    context, cost, cache, config = _repl_views(recorded)
    assert f"({share} from cache)" in cost
    assert f"cost {dollars}" in _flat(cost)
    assert f"cache reads: {share} of input tokens" in cache
    assert dollars in _flat(cache)

    env = {"COLUMNS": "200"}
    printed_cache = CliRunner(env=env).invoke(cli, ["cache", str(recorded.path)])
    assert printed_cache.exit_code == 0, printed_cache.output
    args = ["inspect", str(recorded.path), "--context-window", str(WINDOW)]
    printed_inspect = CliRunner(env=env).invoke(cli, args)
    assert printed_inspect.exit_code == 0, printed_inspect.output
    for printed in (printed_cache.output, printed_inspect.output):
        assert f"{share} of input tokens read from the cache" in printed
        assert dollars in _flat(printed)
    page = render_html(session_view(load_session(recorded.path), config))  # `inspect --html`'s cards
    assert f"<b>{share}</b><span>of input read from cache" in page
    assert f"<b>${totals.cost():.4f}</b><span>cost at list prices" in page

    # /context: the header's total is the grid's, and its thresholds are inspect's for that window
    header = re.search(r"context: ~([\d,]+) of ([\d,]+) tokens", context)
    assert header is not None, context
    used, window = (int(g.replace(",", "")) for g in header.groups())
    assert window == WINDOW
    legend = dict(re.findall(r"(\w[\w ]*?)\s+([\d,]+)\s+[\d.]+%", context))
    parts = {name: int(legend[name].replace(",", "")) for name in CATEGORIES}
    assert sum(v for k, v in parts.items() if k != "free") == used
    assert parts["free"] == max(0, WINDOW - used)
    thresholds = (config.warning_threshold, config.autocompact_threshold, config.blocking_limit)
    assert min(thresholds) > 0
    warning, autocompact, blocking = (f"{t:,}" for t in thresholds)
    assert f"warning at {warning}, autocompact at {autocompact}, blocking at {blocking}" in context
    assert f"(warning {warning}, autocompact {autocompact}, blocking {blocking})" in _flat(
        printed_inspect.output
    )


def test_inspect_never_prints_a_negative_threshold(recorded: Recorded) -> None:
    """`--context-window 8192` printed warning -44,808 and autocompact -24,808: 200K's absolute
    margins subtracted from 8K. They are scaled as the engine scales them for that window."""
    for window in (1_000, WINDOW, 32_000, 200_000):
        result = CliRunner().invoke(cli, ["inspect", str(recorded.path), "--context-window", str(window)])
        assert result.exit_code == 0, result.output
        found = re.search(
            r"warning (-?[\d,]+), autocompact (-?[\d,]+), blocking (-?[\d,]+)", _flat(result.output)
        )
        assert found is not None, result.output
        assert all(not g.startswith("-") for g in found.groups()), found.group(0)
        config = Config(context_window=window, reference_window=DESIGN_WINDOW)
        expected = (config.warning_threshold, config.autocompact_threshold, config.blocking_limit)
        assert tuple(int(g.replace(",", "")) for g in found.groups()) == expected


def test_simulate_without_a_url_prints_what_foldline_serve_gives_for_the_same_seed(tmp_path: Path) -> None:
    """Without --url it printed 0.0% and $0.20 (an in-process model with no prompt cache) where
    the same seed against `foldline serve` printed 87.1% and $0.05. HTTP is the subject here: the
    server is the `foldline serve` command itself, in its own process."""
    import subprocess
    import sys
    import time

    command = [sys.executable, "-c", "from foldline.cli import main; main()", "serve", "--port", "0"]
    command += ["--backend", "simulated", "--seed", str(SEED), "--profile", PROFILE]
    log = tmp_path / "serve.log"
    with log.open("w") as err:  # a file, not a pipe: the access log must never block the server
        server = subprocess.Popen(command, stderr=err, text=True)
    try:
        found = None
        deadline = time.monotonic() + 60  # only against a hang: the banner comes in about a second
        while found is None and server.poll() is None and time.monotonic() < deadline:
            found = re.search(r"on (http://\S+) ", log.read_text())
            time.sleep(0.1)
        assert found is not None, log.read_text()
        args = ["simulate", "--profile", PROFILE, "--seed", str(SEED), "--turns", str(TURNS)]
        served = CliRunner().invoke(cli, [*args, "--url", found.group(1), "--workspace", str(tmp_path / "a")])
        local = CliRunner().invoke(cli, [*args, "--workspace", str(tmp_path / "b")])
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert served.exit_code == 0, served.output
    assert local.exit_code == 0, local.output

    def economics(output: str) -> list[str]:
        return [
            line
            for line in output.splitlines()
            if line.startswith(("cache-read share", "cost at list", "  main"))
        ]

    assert len(economics(served.output)) == 3
    assert economics(local.output) == economics(served.output)
    assert "cache-read share       0.0%" not in local.output
