"""A long simulated session through the real engine against `foldline serve --backend simulated`.

Starts `foldline serve --backend simulated --seed S --profile P` as a separate process (so the
server and the client use their own cores, as in real use), then plays the profile's user for
`--turns` turns through a real `Session` (real tools in a generated workspace), three times:

1. no management on an unlimited window: the session's shape (tool rounds per turn, the tool
   results' share of the tokens, the largest raw tool result, the request size over time, tool
   calls by name, errors, wall time), and server milliseconds per request at about 10K, 100K and
   180K-token requests (bodies the session really sent, POSTed again non-streaming: the first time
   and the median of repeats);
2. the same session on a 200K window without compaction, which must stop at the blocking limit with
   a clear message;
3. the same session on a 200K window with every level on (`Session.open`'s `install_levels`), the
   provider declaring `cache_edits` as foldline serve supports them (`FOLDLINE_SERVE_CAPABILITIES`).

Then a side-by-side table of the three: turns completed, API calls (main loop + forks), HTTP 400s,
requests over the 200K window's blocking limit, peak request, cache-read share, cost at Sonnet list
prices and its ratio to no management, planted facts retained of those asked, wall time. Usage and
token counts are the server's own (`usage` of each answer, metered at the client's provider for
the main loop and every fork alike); HTTP statuses are counted from the server's access log.
`--json` prints one JSON object per strategy on stdout (everything else goes to stderr).

Targets (issues 11, 13, 14): 300 turns in under 3 minutes on a 2-core machine; 0 errors; with every
level on, no HTTP 400 and no request over the blocking limit, cost <= 0.40x of no management,
cache-read share >= 0.95, planted facts retained.

Run: `PYTHONPATH=src .venv/bin/python benchmarks/simulator.py [--turns 300] [--profile feature]
[--seed 7] [--repeat 5] [--json]`
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from foldline._json import dumps
from foldline.config import Config, TranscriptConfig
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.providers.base import Capabilities
from foldline.server.caching import flatten, total_tokens
from foldline.simulation import SimulationReport, simulate
from foldline.stream import StreamEvent

SIZES = (10_000, 100_000, 180_000)
UNLIMITED = 100_000_000
_ACCESS = re.compile(r'"POST /v1/messages HTTP/[\d.]+" (\d{3})')


@dataclass
class Server:
    """A running `foldline serve`: its URL and its log (uvicorn's access lines)."""

    url: str
    log: Any

    def statuses(self) -> Counter[int]:
        """HTTP statuses of the `/v1/messages` requests the server answered so far."""
        self.log.seek(0)
        return Counter(int(m.group(1)) for m in _ACCESS.finditer(self.log.read()))


@contextmanager
def serve(
    seed: int,
    profile: str,
    window: int,
    verbosity_scale: float = 1.0,
    *,
    summary_fidelity: float = 1.0,
    summary_fact_budget: int | None = None,
) -> Iterator[Server]:
    """`foldline serve --backend simulated` on a free loopback port (its replies' length scaled by
    `verbosity_scale`, its summaries keeping each stated fact with probability `summary_fidelity`
    and at most `summary_fact_budget` of them, the server's default where None); yields it.

    Its prompt cache runs on a frozen clock (`--cache-clock frozen`): the sessions played on it
    have no pauses (`benchmarks/ttl_choice.py` measures those), so no entry should expire, and on
    the wall clock a machine loaded by other work could let one outlive its five minutes between
    two requests and change a row's bill."""
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
        "--verbosity-scale",
        str(verbosity_scale),
        "--cache-clock",
        "frozen",
        "--summary-fidelity",
        str(summary_fidelity),
        *(["--summary-fact-budget", str(summary_fact_budget)] if summary_fact_budget is not None else []),
    ]
    # Both streams to a file: uvicorn logs its banner to stderr and every request's status to stdout,
    # and an unread pipe would block the server.
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log, text=True, env=os.environ.copy())
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
            yield Server(match.group(1), log)
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
    url: str,
    args: argparse.Namespace,
    window: int,
    root: Path,
    *,
    levels: bool,
    capabilities: Capabilities | None = None,
) -> tuple[SimulationReport, Recorder]:
    inner = AnthropicProvider(base_url=url, api_key="benchmark", capabilities=capabilities)
    provider = Recorder(inner)
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
        levels=levels,
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


@dataclass
class Strategy:
    """One run of the session and what the server saw of it."""

    name: str
    report: SimulationReport
    statuses: Counter[int]

    def row(self, baseline_cost: float, limit: int) -> dict[str, Any]:
        """The strategy's numbers, as the table prints them and `--json` writes them."""
        report, usage = self.report, self.report.usage
        cost = usage.cost()
        return {
            "strategy": self.name,
            "turns_completed": report.turns_done,
            "turns_planned": report.turns_planned,
            "api_calls": report.api_calls,
            "main_requests": report.main_requests,
            "fork_requests": report.fork_requests,
            "http_400_server": self.statuses.get(400, 0),
            "http_400_client": report.http_400s,
            "server_statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "blocking_limit": limit,
            "over_blocking_limit": report.over_limit(limit),
            "peak_request_tokens": report.peak_request,
            "cache_read_share": round(usage.read_share, 4),
            "cost_usd": round(cost, 4),
            "cost_ratio": round(cost / baseline_cost, 4) if baseline_cost else None,
            "facts_planted": report.facts_planted,
            "facts_asked": report.facts_asked,
            "facts_retained": report.facts_retained,
            "receipts": report.receipts,
            "errors": report.errors,
            "stopped": report.stopped,
            "wall_s": round(report.wall_s, 1),
        }


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    limit = rows[0]["blocking_limit"]
    columns = [
        ("strategy", "{}", 0),
        ("turns", "{turns_completed}/{turns_planned}", 7),
        ("API calls", "{api_calls}", 9),
        ("HTTP 400", "{http_400_server}", 8),
        (f"> {limit // 1000}K", "{over_blocking_limit}", 7),
        ("peak ctx", "{peak_request_tokens:,}", 11),
        ("cache read", "{cache_read_share:.1%}", 10),
        ("cost", "${cost_usd:,.2f}", 9),
        ("vs none", "{ratio}", 7),
        ("facts", "{facts_retained}/{facts_asked}", 5),
        ("wall", "{wall_s:.0f} s", 7),
    ]
    width = max(len(r["strategy"]) for r in rows)
    print(f"{'strategy':<{width}}  " + "  ".join(f"{title:>{w}}" for title, _, w in columns[1:]))
    for r in rows:
        ratio = f"{r['cost_ratio']:.2f}x" if r["cost_ratio"] is not None else "-"
        cells = [fmt.format(**r, ratio=ratio) for _, fmt, _ in columns[1:]]
        print(
            f"{r['strategy']:<{width}}  "
            + "  ".join(f"{c:>{w}}" for c, (_, _, w) in zip(cells, columns[1:], strict=True))
        )
    print(
        f"(> {limit // 1000}K: requests whose input tokens exceeded the 200K window's blocking limit "
        f"({limit:,}); HTTP 400 counted from the server's access log; cost at Sonnet list prices over "
        "the main loop and every fork; facts: planted facts retained of those asked)"
    )
    for r in rows:
        receipts = ", ".join(f"{k} {v}" for k, v in sorted(r["receipts"].items())) or "none"
        print(
            f"  {r['strategy']}: {r['main_requests']} main + {r['fork_requests']} forks; receipts: {receipts}"
        )
        if r["stopped"]:
            print(f"    stopped: {r['stopped']}")
        if r["errors"]:
            print(f"    errors: {r['errors'][:3]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--profile", default="feature", choices=("feature", "debug", "refactor", "swe"))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="one JSON object per strategy on stdout")
    args = parser.parse_args()
    out = sys.stdout
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        rows = strategies(args)
    if args.json:
        for row in rows:
            out.write(dumps(row).decode() + "\n")
    else:
        print()
        print_table(rows)


def strategies(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run the three strategies and return their rows."""
    limit = Config(context_window=200_000).blocking_limit
    done: list[Strategy] = []
    with tempfile.TemporaryDirectory() as tmp:
        print(
            f"== {args.turns} turns of profile {args.profile!r}, seed {args.seed}, "
            "unlimited window, no management"
        )
        with serve(args.seed, args.profile, UNLIMITED) as server:
            report, recorder = asyncio.run(
                run(server.url, args, UNLIMITED, Path(tmp) / "unlimited", levels=False)
            )
            statuses = server.statuses()
            print_report(report)
            time_server(server.url, recorder, args.repeat)
        done.append(Strategy("no management, unlimited window", report, statuses))

        print(f"\n== the same session on a 200K window, no compaction (blocking limit {limit:,})")
        with serve(args.seed, args.profile, 200_000) as server:
            baseline, _ = asyncio.run(run(server.url, args, 200_000, Path(tmp) / "baseline", levels=False))
            statuses = server.statuses()
        print(f"turns completed        {baseline.turns_done} of {baseline.turns_planned}")
        print(f"stopped                {baseline.stopped or 'no: it never reached the limit'}")
        print(f"API/engine errors      {len(baseline.errors)} {baseline.errors[:3]}")
        done.append(Strategy("200K, no compaction", baseline, statuses))

        print("\n== the same session on a 200K window, every level on, cache_edits declared")
        with serve(args.seed, args.profile, 200_000) as server:
            managed, _ = asyncio.run(
                run(
                    server.url,
                    args,
                    200_000,
                    Path(tmp) / "managed",
                    levels=True,
                    capabilities=FOLDLINE_SERVE_CAPABILITIES,
                )
            )
            statuses = server.statuses()
        print("\n".join(managed.lines()))
        done.append(Strategy("foldline, every level, 200K", managed, statuses))
    baseline_cost = done[0].report.usage.cost()
    return [s.row(baseline_cost, limit) for s in done]


if __name__ == "__main__":
    main()
