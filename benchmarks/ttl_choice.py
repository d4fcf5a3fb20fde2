"""The prompt cache's TTL choice (design.md R4.2.4) with the simulated user's pauses, side by side.

Plays the demo's managed session (its profile and seed; by default 300 turns on a 200K window)
through the real engine, with the simulated user pausing before each prompt (`SimulatedClock`;
the server's cache TTLs run on the same clock, so a pause past five minutes lets a 5-minute entry
expire), once per cache setting:

- `chosen` (the default): tools and system written for an hour, and on a turn's first request 1h
  breakpoints when the price rule says the pauses make them pay;
- `turns-5m`: tools and system for an hour, every message breakpoint for 5 minutes;
- `all-5m`: every breakpoint for 5 minutes (no choice made at all).

Usage: python benchmarks/ttl_choice.py [--turns 300] [--context-window 200000] [--seed 7]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

from foldline.config import CacheConfig
from foldline.demo import DEMO_SETTINGS, DemoSettings, run_session
from foldline.simulation import SimulationReport

SETTINGS: dict[str, CacheConfig] = {
    "chosen": CacheConfig(),
    "turns-5m": CacheConfig(turn_ttl="5m"),
    "all-5m": CacheConfig(static_ttl="5m", turn_ttl="5m"),
}


async def play(settings: DemoSettings, cache: CacheConfig, root: Path) -> SimulationReport:
    """The demo's managed session with `cache` as its breakpoints' TTL setting."""
    return await run_session(settings, root, managed=True, cache=cache)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--context-window", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=DEMO_SETTINGS.seed)
    parser.add_argument(
        "--settings", default=",".join(SETTINGS), help="comma-separated: " + ", ".join(SETTINGS)
    )
    args = parser.parse_args()
    settings = dataclasses.replace(
        DEMO_SETTINGS, turns=args.turns, context_window=args.context_window, seed=args.seed
    )
    print(
        f"{settings.turns} turns of {settings.profile!r} (seed {settings.seed}) on a "
        f"{settings.context_window:,}-token window, the simulated user's pauses on the server's clock"
    )
    columns = ("cost", "cache read", "1h writes", "5m writes", "turns", "HTTP 400")
    widths = (9, 11, 10, 10, 7, 9)
    print(f"{'setting':<10} " + " ".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True)))
    for name in args.settings.split(","):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="foldline-ttl-") as d:
            report = asyncio.run(play(settings, SETTINGS[name], Path(d)))
        usage = report.usage
        hour = sum(r.cache_write_1h for r in report.requests if r.status is None)
        print(
            f"{name:<10} {f'${usage.cost():.2f}':>9} {usage.read_share:>10.1%} {hour:>10,} "
            f"{usage.cache_write - hour:>10,} {report.turns_done:>3}/{report.turns_planned:<3} "
            f"{report.http_400s:>9} ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
