"""A long simulated session through the real engine against `foldline serve --backend simulated`.

Starts `foldline serve --backend simulated --seed S --profile P` as a separate process (so the
server and the client use their own cores, as in real use), then plays the profile's user for
`--turns` turns through a real `Session` (real tools in a generated workspace) and prints:

- the session's shape: tool rounds per turn (median, p90, p99, max), the tool results' share of the
  tokens, the largest raw tool result (before the level-0 budget), the request size over time,
  tool calls by name, API errors and failed tool calls, wall time;
- the baseline without compaction: the same session against a 200K window, which must stop at the
  blocking limit with a clear message (`--no-baseline` skips it);
- server milliseconds per request at about 10K, 100K and 180K-token requests: bodies the session
  really sent, POSTed again to the server (non-streaming), the first time and the median of repeats.

Targets (issue 11): 300 turns in under 3 minutes on a 2-core machine; 0 errors.

Run: `PYTHONPATH=src .venv/bin/python benchmarks/simulator.py [--turns 300] [--profile feature]
[--seed 7] [--repeat 5] [--no-baseline]`
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from foldline._json import dumps
from foldline.config import Config, TranscriptConfig
from foldline.providers.anthropic import AnthropicProvider
from foldline.providers.base import Capabilities
from foldline.server.caching import flatten, total_tokens
from foldline.simulation import SimulationReport, simulate
from foldline.stream import StreamEvent

SIZES = (10_000, 100_000, 180_000)


@contextmanager
def serve(seed: int, profile: str, window: int) -> Iterator[str]:
    """`foldline serve --backend simulated` on a free loopback port; yields its URL."""
    command = [
        sys.executable,
        "-c",
        "from foldline.cli import main; main()",
        "serve",
        "--backend",
        "simulated",
        "--seed",
        str(seed),
        "--profile",
        profile,
        "--port",
        "0",
        "--context-window",
        str(window),
    ]
    # stderr to a file: uvicorn logs every request there, and an unread pipe would block the server
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=log, text=True, env=os.environ.copy()
        )
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and process.poll() is None:
                log.seek(0)
                match = re.search(r"on (http://\S+) ", log.read())
                if match:
                    break
                time.sleep(0.05)
            else:
                raise RuntimeError("foldline serve did not start")
            yield match.group(1)
        finally:
            process.terminate()
            process.wait(timeout=10)


class Recorder:
    """An `AnthropicProvider` that keeps the first body the session sent past each size in `SIZES`."""

    def __init__(self, inner: AnthropicProvider) -> None:
        self.inner = inner
        self.bodies: dict[int, tuple[int, dict[str, Any]]] = {}

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        rough = len(dumps(body)) // 4  # cheap first: count exactly only near a size not yet kept
        for size in SIZES:
            if size not in self.bodies and rough >= size * 0.8:
                tokens = total_tokens(flatten(body))
                if tokens >= size:
                    self.bodies[size] = (tokens, body)
        return self.inner.stream(body, betas=betas)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def run(
    url: str, args: argparse.Namespace, window: int, root: Path
) -> tuple[SimulationReport, Recorder]:
    provider = Recorder(AnthropicProvider(base_url=url, api_key="benchmark"))
    config = Config(
        context_window=window,
        transcript=TranscriptConfig(sessions_dir=root / "sessions", fsync="never"),
    )

    def progress(turn: int, report: SimulationReport) -> None:
        if (turn + 1) % max(1, args.turns // 10) == 0:
            last = report.request_tokens[-1] if report.request_tokens else 0
            print(
                f"  turn {turn + 1:4}: {last:>9,} tokens, {time.perf_counter() - started:6.1f} s", flush=True
            )

    started = time.perf_counter()
    report = await simulate(
        provider,
        profile=args.profile,
        turns=args.turns,
        seed=args.seed,
        workspace=root / "ws",
        sessions_dir=root / "sessions",
        config=config,
        on_turn=progress,
    )
    return report, provider


def print_report(report: SimulationReport) -> None:
    print("\n".join(report.lines()))
    print("(real Claude Code sessions: tool rounds per turn median 1, p90 8, p99 36, max 75;")
    print(
        " characters per tool result as stored median 160, p90 3,832, p99 17,077; results 55% of characters)"
    )


def time_server(url: str, recorder: Recorder, repeat: int) -> None:
    print("server ms per request (non-streaming POST of a body the session sent)")
    print(f"  {'tokens':>9}  {'first':>8}  {'median':>8}")
    address = urlparse(url)
    connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=120)
    headers = {"content-type": "application/json", "x-api-key": "benchmark"}
    for size in SIZES:
        if size not in recorder.bodies:
            print(f"  {size:>9,}  (the session never sent a request this large)")
            continue
        tokens, body = recorder.bodies[size]
        payload = dumps({**body, "stream": False})
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            connection.request("POST", "/v1/messages", body=payload, headers=headers)
            response = connection.getresponse()
            response.read()
            times.append((time.perf_counter() - started) * 1000)
            assert response.status == 200, response.status
        print(f"  {tokens:>9,}  {times[0]:>8.1f}  {statistics.median(times):>8.1f}")
    connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--profile", default="feature", choices=("feature", "debug", "refactor", "swe"))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    unlimited = 100_000_000
    with tempfile.TemporaryDirectory() as tmp:
        print(f"== {args.turns} turns of profile {args.profile!r}, seed {args.seed}, unlimited window")
        with serve(args.seed, args.profile, unlimited) as url:
            report, recorder = asyncio.run(run(url, args, unlimited, Path(tmp) / "unlimited"))
            print_report(report)
            time_server(url, recorder, args.repeat)
        if not args.no_baseline:
            limit = Config().blocking_limit
            print(f"\n== the same session on a 200K window, no compaction (blocking limit {limit:,})")
            with serve(args.seed, args.profile, 200_000) as url:
                baseline, _ = asyncio.run(run(url, args, 200_000, Path(tmp) / "baseline"))
            print(f"turns completed        {baseline.turns_done} of {baseline.turns_planned}")
            print(f"stopped                {baseline.stopped or 'no: it never reached the limit'}")
            print(f"API/engine errors      {len(baseline.errors)} {baseline.errors[:3]}")


if __name__ == "__main__":
    main()
