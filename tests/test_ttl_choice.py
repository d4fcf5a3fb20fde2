"""benchmarks/ttl_choice.py: each row runs the demo's session with the setting it names."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

from tests._benchmarks import load_benchmark

from foldline.server.caching import NoveltyCount


def test_each_setting_writes_the_ttls_and_manages_the_window_it_names(tmp_path: Path) -> None:
    ttl = load_benchmark("ttl_choice")
    settings = dataclasses.replace(ttl.DEMO_SETTINGS, turns=3, context_window=200_000)
    hour: dict[str, int] = {}
    limit: dict[str, int] = {}
    for name in ("chosen", "all-5m", "at-90-50k"):
        novelty = NoveltyCount()
        run = ttl.run_session(
            settings, tmp_path / name, managed=True, tune=ttl.SETTINGS[name], novelty=novelty
        )
        report = asyncio.run(run)
        assert report.turns_done == 3
        hour[name] = sum(r.cache_write_1h for r in report.requests if r.status is None)
        limit[name] = report.blocking_limit
        # the server saw every prompt token the session was billed for, and some of them twice
        assert novelty.prompt_tokens == report.usage.prompt
        assert report.usage.read_share <= novelty.read_ceiling < 1
    assert hour["chosen"] > 0  # tools and system are written for an hour
    assert hour["all-5m"] == 0
    assert limit["at-90-50k"] < 50_000 < 150_000 < limit["chosen"]  # a 50K working window on 200K


def test_an_unknown_setting_is_refused_before_any_session_runs() -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [
            sys.executable,
            str(root / "benchmarks" / "ttl_choice.py"),
            "--turns",
            "300",
            "--settings",
            "chosen,at90",
        ],
        env={**os.environ, "PYTHONPATH": str(root / "src")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "unknown setting(s) at90" in done.stderr
    assert "at-90" in done.stderr  # the names it takes
    assert "turns of" not in done.stdout  # no session started
