"""The prompt cache's TTL choice (design.md R4.2.4) with the simulated user's pauses, side by side.

Plays the demo's managed session (its profile and seed; by default 300 turns on a 200K window)
through the real engine, with the simulated user pausing before each prompt (`SimulatedClock`;
the server's cache TTLs run on the same clock, so a pause past five minutes lets a 5-minute entry
expire), once per cache setting:

- `chosen` (the default): tools and system written for an hour, and on a turn's first request 1h
  breakpoints when the price rule says the pauses make them pay;
- `turns-5m`: tools and system for an hour, every message breakpoint for 5 minutes;
- `all-5m`: every breakpoint for 5 minutes (no choice made at all);
- `at-90`, `at-90-100k`, `at-90-50k` (opt-in): the chosen TTLs, but Collapse commits its folds only
  at 90% of the window (200K, or a 100K / 50K working window) instead of once they pay: what a
  longer context, read more often, does to the cache-read share and to the bill.

`ceiling` is the cache-read share no breakpoint or TTL could beat with the prompts the session sent:
1 - the tokens the server had never been sent before / all prompt tokens (`NoveltyCount`).

Each setting's session is one fleet unit (`foldline.fleet.Unit`, kind `ttl_choice:fleet_row`):
`--jobs`, `--address`, `--results` and `--runtime-env` as in `benchmarks/economics.py`.

Usage: python benchmarks/ttl_choice.py [--turns 300] [--context-window 200000] [--seed 7]
                                      [--settings chosen,at-90-50k] [--jobs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from economics import add_fleet_options, run_units
from foldline.config import CacheConfig, Config
from foldline.demo import DEMO_SETTINGS, run_session
from foldline.fleet import Unit
from foldline.server.caching import NoveltyCount


def _cache(cache: CacheConfig) -> Callable[[Config], Config]:
    return lambda config: dataclasses.replace(config, cache=cache)


def _commit_at_90(window: int | None) -> Callable[[Config], Config]:
    def tune(config: Config) -> Config:
        collapse = dataclasses.replace(config.collapse, commit_when_it_pays=False)
        return dataclasses.replace(config, collapse=collapse, context_window=window or config.context_window)

    return tune


SETTINGS: dict[str, Callable[[Config], Config]] = {
    "chosen": _cache(CacheConfig()),
    "turns-5m": _cache(CacheConfig(turn_ttl="5m")),
    "all-5m": _cache(CacheConfig(static_ttl="5m", turn_ttl="5m")),
    "at-90": _commit_at_90(None),
    "at-90-100k": _commit_at_90(100_000),
    "at-90-50k": _commit_at_90(50_000),
}
DEFAULT_SETTINGS = ("chosen", "turns-5m", "all-5m")


FLEET_KIND = "ttl_choice:fleet_row"
"""The fleet unit kind of one setting's session: `fleet_row`, with `benchmarks/` on the workers' path."""


def fleet_row(unit: Unit, root: Path) -> dict[str, Any]:
    """The fleet's unit function: the demo's managed session at the setting `unit.strategy`."""
    settings = dataclasses.replace(
        DEMO_SETTINGS, turns=unit.turns, context_window=unit.window, seed=unit.seed, profile=unit.profile
    )
    started = time.perf_counter()
    novelty = NoveltyCount()
    run = run_session(settings, root, managed=True, tune=SETTINGS[unit.strategy], novelty=novelty)
    report = asyncio.run(run)
    usage = report.usage
    hour = sum(r.cache_write_1h for r in report.requests if r.status is None)
    return {
        "setting": unit.strategy,
        "cost_usd": usage.cost(),
        "cache_read_share": usage.read_share,
        "read_ceiling": novelty.read_ceiling,
        "writes_1h": hour,
        "writes_5m": usage.cache_write - hour,
        "turns_completed": report.turns_done,
        "turns_planned": report.turns_planned,
        "facts_retained": report.facts_retained,
        "facts_asked": report.facts_asked,
        "http_400": report.http_400s,
        "wall_s": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--context-window", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=DEMO_SETTINGS.seed)
    parser.add_argument(
        "--settings", default=",".join(DEFAULT_SETTINGS), help="comma-separated: " + ", ".join(SETTINGS)
    )
    add_fleet_options(parser)
    args = parser.parse_args()
    unknown = [name for name in args.settings.split(",") if name not in SETTINGS]
    if unknown:  # before any session runs: each takes minutes
        parser.error(f"unknown setting(s) {', '.join(unknown)}; choose from {', '.join(SETTINGS)}")
    settings = dataclasses.replace(
        DEMO_SETTINGS, turns=args.turns, context_window=args.context_window, seed=args.seed
    )
    print(
        f"{settings.turns} turns of {settings.profile!r} (seed {settings.seed}) on a "
        f"{settings.context_window:,}-token window, the simulated user's pauses on the server's clock"
    )
    units = [
        Unit(
            kind=FLEET_KIND,
            profile=settings.profile,
            strategy=name,
            seed=settings.seed,
            turns=settings.turns,
            window=settings.context_window,
        )
        for name in args.settings.split(",")
    ]
    with tempfile.TemporaryDirectory(prefix="foldline-ttl-") as d:
        rows, _ = run_units(units, args, args.results or os.path.join(d, "results"))
    columns = ("cost", "cache read", "ceiling", "1h writes", "5m writes", "turns", "facts", "HTTP 400")
    widths = (9, 11, 8, 10, 10, 7, 5, 9)
    print(f"{'setting':<10} " + " ".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True)))
    for row in rows:
        cost, facts = f"${row['cost_usd']:.2f}", f"{row['facts_retained']}/{row['facts_asked']}"
        print(
            f"{row['setting']:<10} {cost:>9} {row['cache_read_share']:>10.1%} "
            f"{row['read_ceiling']:>7.1%} {row['writes_1h']:>10,} {row['writes_5m']:>10,} "
            f"{row['turns_completed']:>3}/{row['turns_planned']:<3} "
            f"{facts:>5} {row['http_400']:>9} ({row['wall_s']:.0f} s)",
            flush=True,
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
