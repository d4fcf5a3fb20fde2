"""benchmarks/ttl_choice.py: each row runs the demo's session with the cache setting it names."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from tests._benchmarks import load_benchmark


def test_each_setting_writes_the_ttls_it_names(tmp_path: Path) -> None:
    ttl = load_benchmark("ttl_choice")
    settings = dataclasses.replace(ttl.DEMO_SETTINGS, turns=3, context_window=200_000)
    hour: dict[str, int] = {}
    for name in ("chosen", "all-5m"):
        report = asyncio.run(ttl.play(settings, ttl.SETTINGS[name], tmp_path / name))
        assert report.turns_done == 3
        hour[name] = sum(r.cache_write_1h for r in report.requests if r.status is None)
    assert hour["chosen"] > 0  # tools and system are written for an hour
    assert hour["all-5m"] == 0
