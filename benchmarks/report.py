"""`make bench`: run the benchmarks and write docs/benchmarks.md with its tables and plots.

Runs `economics.py --json` (or reads a JSON-lines file it wrote, `--economics-json`), then
pipeline_overhead, resume, cli_startup, server_speed, microcompact and prefix_cache, each in its own
subprocess with `src/` on the path; their printed tables go into the markdown as they are, and the
targets are checked from their numbers. Plots (matplotlib) go to docs/img/bench_*.png: cost per
strategy per profile, cache-read share, and the request size over turns per strategy for one profile.

Where foldline misses a target the page says so, by how much, and what the run shows about why.
Seeds pair across rows (the same seed is the same simulated user): each cost has its 95% Student-t
interval over seeds, and each ratio (to the peer, the cheapest real-client row at the headline's
retention; to the `limit` row where one ran) is the mean of per-seed ratios with its interval. A cost
target is judged `met` or `MISSED` only when that interval clears it, otherwise "not decided at N
seeds".

With `--peers claude-code,opencode`, the real clients play the same profiles, turns and seeds
(`peers.py`) and their rows join the table; a client that cannot be installed (no npm, the registry
unreachable) is skipped with its reason printed.

With `--verbosity-scale 0.5,1,2` economics and peers run once per reply-length setting of the
simulated model (`foldline serve --verbosity-scale`); rows carry their `verbosity_scale` and are
aggregated by (profile, strategy, scale). The rows at 1.0 make the main tables; the page adds a
reply-length sweep: the headline's ratio to each scale's peer, with its interval and verdict.

With `--fidelity 1.0,0.9,0.7` economics and peers run once per summary fidelity q of the simulated
model (`foldline serve --summary-fidelity`: each stated fact survives one summary with probability
q); rows carry their `summary_fidelity` (a row without one ran at 1.0, every fact kept) and are
aggregated by q too. The rows at 1.0 make the main tables; the page adds a section with every row
grouped by q: facts retained of those asked, pooled over the seeds, with the 95% Wilson interval.

Run: `PYTHONPATH=src .venv/bin/python benchmarks/report.py [--turns 300] [--economics-json FILE]
[--skip prefix_cache,...] [--peers claude-code,opencode] [--peers-json FILE]
[--auto-compact-window 100000,60000] [--autocompact-pct 50] [--opencode-compaction prune=true]
[--verbosity-scale 0.5,1,2]
[--fidelity 1.0,0.7]`
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from economics import (
    DEFAULT_PROFILES,
    DEFAULT_STRATEGIES,
    STRATEGIES,
    WINDOW,
    Foldline,
    Retention,
    add_fleet_options,
    aggregate,
    feasible,
    fidelities,
    fidelity_of,
    mean_ci,
    miss_rate_text,
    run_units,
    scale_of,
    table_lines,
)  # beside this file: on the path when run as a script
from economics import unit_of as economics_unit
from foldline import interop
from foldline.errors import ClientUnavailableError
from foldline.fleet import Unit
from peers import CLIENTS, UNAVAILABLE, client_of
from peers import argument_parser as peer_parser
from peers import settings as peer_settings
from peers import unit_of as peer_unit

ROOT = Path(__file__).resolve().parents[1]
"""The list prices of the model the benchmarks run (the configured default)."""
HERE = ROOT / "benchmarks"
OTHERS: tuple[tuple[str, list[str], str], ...] = (
    (
        "pipeline_overhead",
        [],
        "Per-turn request assembly next to serializing the body, and the cold build a resumed session "
        "pays on its first turn: `cold` with nothing to start from (after a crash), `resume` from the "
        "head its last close left. Targets: turn <= 3x serialization; at 20K messages, the cold build "
        "on resume <= 10x serialization and with no saved head <= 15x.",
    ),
    ("resume", ["--mb", "20"], "Resume throughput against the fastest raw JSON decode. Target >= 0.8x."),
    (
        "cli_startup",
        [],
        "Start-up of `foldline --help`, `foldline chat --help` and `import foldline` against a bare "
        "interpreter.",
    ),
    (
        "server_speed",
        ["--sizes", "10000,100000,180000"],
        "The simulator server's milliseconds per request at 10K, 100K and 180K prompt tokens.",
    ),
    ("microcompact", [], "Microcompact's cached path (cache_edits) against rewriting the bytes."),
    (
        "prefix_cache",
        [],
        "Time to first token on the transformers backend (a small random model on CPU), cached prefix "
        "against cold. Target: cold / cached >= 5x.",
    ),
)
FOLDLINE = tuple(name for name, make in STRATEGIES.items() if isinstance(make(), Foldline))
"""foldline's own engine in its configurations (Claude Code's design included): not peers of each other."""
LAST_ROWS = HERE / "economics_last.jsonl"
RAW = HERE / "results"
"""Where each other benchmark's printed output is kept as it ran (`<name>.txt`)."""


def run_script(name: str, extra: Sequence[str], timeout: float) -> tuple[str, float, int]:
    """(stdout + stderr tail, seconds, exit status) of one benchmark script."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    started = time.perf_counter()
    print(f"== {name} {' '.join(extra)}", file=sys.stderr, flush=True)
    try:
        done = subprocess.run(
            [sys.executable, str(HERE / f"{name}.py"), *extra],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=timeout,
        )
        text, code = (
            done.stdout + (f"\n(stderr)\n{done.stderr[-2000:]}" if done.returncode else ""),
            done.returncode,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        text, code = out + f"\n(timed out after {timeout:.0f} s)", -1
    return text.rstrip(), time.perf_counter() - started, code


def keep_output(name: str, extra: Sequence[str], text: str, seconds: float, code: int) -> None:
    """Keep benchmark `name`'s output beside the rows, as the page quotes it (`kept_output` reads it)."""
    RAW.mkdir(exist_ok=True)
    (RAW / f"{name}.txt").write_text(f"$ {name}.py {' '.join(extra)}\nexit {code}, {seconds:.0f} s\n{text}\n")


def kept_output(name: str) -> tuple[str, float, int]:
    """(output, seconds, exit status) of benchmark `name` as `keep_output` kept it in `RAW`.

    Raises:
        SystemExit: nothing is kept for it, or not in the kept form (a run of `make bench` keeps it).
    """
    path = RAW / f"{name}.txt"
    if not path.exists():
        raise SystemExit(f"--kept-others: {path} is missing: run `make bench` once, or --skip {name}")
    _, status, *text = path.read_text().split("\n")
    found = re.fullmatch(r"exit (-?\d+), (\d+) s", status)
    if found is None:
        raise SystemExit(f"{path}:2: expected `exit CODE, SECONDS s`, found {status!r}")
    return "\n".join(text).rstrip(), float(found[2]), int(found[1])


PAIR_TIMEOUT = 3600.0
"""Seconds one economics session may take on the fleet (economics.py's default)."""


def fleet_units(args: argparse.Namespace) -> list[Unit]:
    """Every session of the page's tables as one fleet: foldline's rows, the limit rows and the
    strategy classes (economics), and the real clients at their defaults and best settings (peers),
    each at every seed and reply-length setting. A client that cannot be installed here is left out
    with its reason printed."""
    seeds = [int(s) for s in args.seeds.split(",") if s]
    units: list[Unit] = []
    for scale, q in ((x, q) for x in scales(args) for q in fidelity_list(args)):
        settings = argparse.Namespace(
            turns=args.turns,
            window=WINDOW,
            verbosity_scale=scale,
            facts_at_end=False,
            pair_timeout=PAIR_TIMEOUT,
        )
        if not args.economics_json:
            units += [
                economics_unit(p, n, seed, settings, q)
                for p in DEFAULT_PROFILES
                for n in DEFAULT_STRATEGIES
                for seed in seeds
            ]
    for client in [c for c in args.peers.split(",") if c] if not args.peers_json else []:
        try:
            interop.installed(CLIENTS[client][0])
        except ClientUnavailableError as e:
            print(f"peers: {client} skipped: {e}", file=sys.stderr)
            continue
        for profile, scale in ((p, x) for p in DEFAULT_PROFILES for x in scales(args)):
            flags = ["--client", client, "--profile", profile, "--turns", str(args.turns)]
            flags += ["--seeds", args.seeds, "--verbosity-scale", str(scale)]
            flags += ["--fidelity", ",".join(map(str, fidelity_list(args)))]
            if client == "claude-code" and args.auto_compact_window:
                flags += ["--auto-compact-window", args.auto_compact_window, "--defaults-too"]
                flags += [x for pct in args.autocompact_pct for x in ("--autocompact-pct", pct)]
            if client == "opencode" and args.opencode_compaction:
                flags += [x for spec in args.opencode_compaction for x in ("--opencode-compaction", spec)]
                flags.append("--defaults-too")
            peer_args = peer_parser().parse_args(flags)
            units += [
                peer_unit(setting, seed, peer_args, q)
                for q in fidelity_list(args)
                for setting in peer_settings(peer_args)
                for seed in seeds
            ]
    return units


def run_the_fleet(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """The economics rows, the peers' rows and the page's line on the fleet that ran them all."""
    units = fleet_units(args)
    if not units:
        return [], [], ""
    with tempfile.TemporaryDirectory() as tmp:
        rows, report = run_units(units, args, args.results or os.path.join(tmp, "results"))
    return (
        [r for r in rows if client_of(r["strategy"]) is None],
        [r for r in rows if client_of(r["strategy"])],
        fleet_line(report.manifest, rows),
    )


def fleet_line(manifest: dict[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """The page's line on the fleet that ran its rows, from the fleet's manifest (`fleet.json` in
    the results folder), so a page rebuilt from kept rows still names the commit, size and wall time."""
    full = str(manifest.get("commit") or "unknown")
    commit = full[:12] + ("-dirty" if full.endswith("-dirty") else "")
    failed = int(manifest.get("failed") or 0)
    runs = manifest.get("runs") or []
    wall = f"{float(manifest['wall_s']) / 60:.1f} minutes of wall time"
    if len(runs) > 1:  # stopped and resumed: the last run's wall alone would flatter it
        wall = (
            f"{float(manifest['wall_s_all_runs']) / 60:.1f} minutes of wall time over {len(runs)} runs "
            f"(stopped and resumed; the last, {wall})"
        )
    return (
        f"Every session of the economics and real-client tables below ran as one fleet (`foldline.fleet`, "
        f"docs/fleet.md) at commit "
        f"`{commit}`: {manifest['units']} units on {float(manifest['workers']):g} workers (Ray CPUs, one "
        f"unit each) on {manifest['nodes']} node(s), {wall}"
        + (f", {failed} units failed (their errors are in the results folder)" if failed else "")
        + _other_commits(rows, full)
        + "."
    )


def _other_commits(rows: Sequence[dict[str, Any]], commit: str) -> str:
    """What the page's line adds when a resumed fleet kept rows made at other commits."""
    others = sorted({str(r.get("commit"))[:12] for r in rows if r.get("commit") != commit})
    if not others:
        return ""
    kept = sum(1 for r in rows if r.get("commit") != commit)
    return f" ({kept} rows kept from an earlier run of the fleet, at {', '.join(f'`{c}`' for c in others)})"


def economics(
    args: argparse.Namespace, fleet_rows: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    if args.economics_json:
        lines = Path(args.economics_json).read_text().splitlines()
    elif fleet_rows is not None:
        lines = [json.dumps(r) for r in fleet_rows]
        Path(args.rows).write_text("".join(f"{line}\n" for line in lines))
    else:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        lines = []
        for scale in scales(args):  # one run per reply-length setting of the simulated model
            command = [sys.executable, str(HERE / "economics.py"), "--json", "--turns", str(args.turns)]
            command += ["--jobs", str(args.jobs), "--seeds", args.seeds, "--verbosity-scale", str(scale)]
            command += ["--fidelity", ",".join(map(str, fidelity_list(args)))]
            lines += subprocess.run(
                command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT, check=True
            ).stdout.splitlines()
        # kept beside the page, so its tables can be rebuilt without the hour-long run
        Path(args.rows).write_text("".join(f"{line}\n" for line in lines if line.startswith("{")))
    rows = [{"seed": 7, **json.loads(line)} for line in lines if line.startswith("{")]  # older rows: seed 7
    # `economics.py --jobs N` prints pairs as they finish: put them back in profile, strategy order
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    return sorted(
        rows, key=lambda r: (profiles.index(r["profile"]), _strategy_rank(r["strategy"]), r.get("seed", 7))
    )


PEERS_ROWS = HERE / "peers_last.jsonl"


def scales(args: argparse.Namespace) -> list[float]:
    """The simulated model's reply-length settings to run (`--verbosity-scale`), 1.0 first: the main
    table's."""
    found = [float(x) for x in str(args.verbosity_scale).split(",") if x.strip()]
    return sorted(set(found) | {1.0}, key=lambda x: (x != 1.0, x))


def fidelity_list(args: argparse.Namespace) -> list[float]:
    """The summary fidelities to run (`--fidelity`), 1.0 first: the main tables'."""
    found = fidelities(str(getattr(args, "fidelity", "1.0")))
    return sorted(set(found) | {1.0}, key=lambda q: (q != 1.0, -q))


def peers(
    args: argparse.Namespace, profiles: Sequence[str], fleet_rows: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Rows of the real clients (`benchmarks/peers.py`), one per (client, profile, seed); a client
    that cannot be installed here is skipped with its reason printed."""
    if args.peers_json:
        lines = Path(args.peers_json).read_text().splitlines()
        return [json.loads(line) for line in lines if line.startswith("{")]
    if fleet_rows is not None:
        Path(args.peers_rows).write_text("".join(f"{json.dumps(r)}\n" for r in fleet_rows))
        return fleet_rows
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    rows: list[dict[str, Any]] = []
    runs = [(c, p, x) for c in args.peers.split(",") if c for p in profiles for x in scales(args)]
    skipped: set[str] = set()
    for client, profile, scale in runs:
        if client in skipped:
            continue
        command = [sys.executable, str(HERE / "peers.py"), "--json", "--client", client]
        command += ["--profile", profile, "--turns", str(args.turns), "--seeds", args.seeds]
        command += ["--verbosity-scale", str(scale), "--fidelity", ",".join(map(str, fidelity_list(args)))]
        if client == "claude-code" and args.auto_compact_window:
            command += ["--auto-compact-window", args.auto_compact_window, "--defaults-too"]
            command += [x for pct in args.autocompact_pct for x in ("--autocompact-pct", pct)]
        if client == "opencode":
            for spec in args.opencode_compaction:
                command += ["--opencode-compaction", spec]
            if args.opencode_compaction:
                command.append("--defaults-too")
        print(f"== peers {client} {profile} (reply length x{scale})", file=sys.stderr, flush=True)
        # progress and a skip's reason go to stderr, which is left to the terminal
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT, check=False)
        if done.returncode == UNAVAILABLE:
            print(f"peers: {client} skipped (the reason is printed above)", file=sys.stderr)
            skipped.add(client)
            continue
        if done.returncode != 0:
            raise RuntimeError(f"peers.py --client {client} --profile {profile} exited {done.returncode}")
        rows += [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    Path(args.peers_rows).write_text("".join(f"{json.dumps(r)}\n" for r in rows))
    return rows


def _strategy_rank(name: str) -> int:
    order = list(STRATEGIES)
    return order.index(name) if name in order else len(order)


# --- the economics section ----------------------------------------------------------------------

HEADLINE = "foldline-no-edits"
"""foldline on the public API: the row the targets are judged on (`foldline` needs cache_edits, which
has no public pricing; this server's billing of it is its own model)."""
JUDGED = (HEADLINE, "foldline-no-edits-at-90", "foldline-no-edits-100k")
"""The configurations judged against the target: the defaults, the defaults before design.md R3.3.7
(folds committed only at 90% of the window), and the defaults managing to a 100K working window
(`Config(context_window=100_000)`), each on the public API."""


LIMIT = "limit"
"""The physical-limit row (system prompt, tools, a note of what the remaining work needs and the
current turn): no agent, so never a peer and never the cheapest strategy; every row's ratio to it."""
PEER_TARGET = 0.75
"""The headline's target: at most this many times the cost of the cheapest real peer."""
LIMIT_TARGET = 1.25
"""The headline's target: at most this many times the cost of the limit row, where summaries keep
every fact (q = 1, the main tables). The cache-read share is shown but no longer judged: the ceiling
of foldline's own prompts (`ttl_choice.py`'s, no breakpoint or TTL could read more) is below 0.95."""


def retained(cell: dict[str, Any]) -> float:
    """Mean planted facts retained, the user's and the tool outputs' together."""
    return float(cell["facts_retained"].mean)


class Ratio(NamedTuple):
    """One row's cost over another's, paired by seed (a seed is the same simulated user in both): the
    mean of the per-seed ratios and its 95% Student-t interval."""

    mean: float
    low: float
    high: float
    seeds: int

    def show(self) -> str:
        if self.seeds < 2:
            return f"{self.mean:.2f}x (1 seed, no interval)"
        return f"{self.mean:.2f}x [{self.low:.2f}, {self.high:.2f}]"


def paired_ratio(cell: dict[str, Any], base: dict[str, Any]) -> Ratio | None:
    """`cell`'s cost over `base`'s on the seeds both ran; None when they share no seed."""
    mine, theirs = cell["cost_by_seed"], base["cost_by_seed"]
    ratios = [mine[s] / theirs[s] for s in sorted(set(mine) & set(theirs)) if theirs[s] > 0]
    if not ratios:
        return None
    mean, low, high = mean_ci(ratios)
    return Ratio(mean, low, high, len(ratios))


def verdict(ratio: Ratio, target: float) -> str:
    """`met` only when the whole interval is below `target`, `missed` only when it is all above; in
    between the seeds cannot tell, and the page says so rather than read the mean."""
    if ratio.high < target:
        return "met"
    if ratio.low > target:
        return "**MISSED**"
    return f"not decided at {ratio.seeds} seeds"


def real_peer(cells: Sequence[dict[str, Any]], fold: dict[str, Any]) -> dict[str, Any] | None:
    """The peer of `fold`: the cheapest real-client row (any client, any setting) that completed every
    seed, at `fold`'s retention or better; None when no client row qualifies."""
    clients = [c for c in cells if client_of(c["strategy"]) is not None and _completes(c)]
    kept = [c for c in clients if retained(c) >= retained(fold)]
    return min(kept, key=_cost) if kept else None


def verdicts(cells: Sequence[dict[str, Any]]) -> list[str]:
    """Per profile: who is cheapest at equal retention and why, then each judged row's targets."""
    out: list[str] = []
    for profile in dict.fromkeys(c["profile"] for c in cells):
        mine = {c["strategy"]: c for c in cells if c["profile"] == profile}
        fold = mine.get(HEADLINE)
        out.append(f"**{profile}**:")
        done = [c for c in mine.values() if _completes(c) and c["strategy"] not in ("none", LIMIT)]
        if fold is None or not done:
            out += ["- no headline row or no strategy completed every seed.", ""]
            continue
        cheapest = min(done, key=_cost)
        kept = [c for c in done if retained(c) >= retained(fold)]
        best = min(kept, key=_cost)
        out.append(
            f"- cheapest strategy that completed every turn of every seed: `{cheapest['strategy']}`, "
            f"${cheapest['cost_usd'].mean:,.2f}, keeping {retained(cheapest):.1f} of "
            f"{cheapest['facts_asked'].mean:.0f} facts; cheapest at {HEADLINE}'s retention "
            f"({retained(fold):.1f}) or better: `{best['strategy']}`, ${best['cost_usd'].mean:,.2f}."
        )
        if best is not fold and best["strategy"] in FOLDLINE:
            # Another of foldline's own configurations: no judged row's peer line explains it.
            out.append(f"- why `{best['strategy']}` and not {HEADLINE}: {_why(fold, best)}")
        clients = [c for c in done if client_of(c["strategy"]) is not None]
        # The target is judged against real clients where any played the profile; without them,
        # against the strategies other agents use, and the line says which.
        others = clients or [c for c in done if c["strategy"] not in FOLDLINE]
        kind = "real client" if clients else "strategy (no real client played this profile)"
        for name in JUDGED:
            if name in mine:
                out += _judge(mine[name], others, kind, mine.get(LIMIT))
        out.append("")
    return out


def _judge(
    fold: dict[str, Any], others: Sequence[dict[str, Any]], kind: str, limit: dict[str, Any] | None
) -> list[str]:
    """One foldline row against the targets, each ratio paired by seed with its 95% interval: the
    cheapest peer at its retention, the limit row, cache share, 400s."""
    name = fold["strategy"]
    prefix = "" if name == HEADLINE else f"`{name}`: "
    out: list[str] = []
    peers = [c for c in others if retained(c) >= retained(fold)]
    peer = min(peers, key=_cost) if peers else None
    checks: list[tuple[str, str, str]] = []
    target = f"cost <= {PEER_TARGET}x the cheapest {kind} at equal or better retention"
    if peer is not None:
        ratio = paired_ratio(fold, peer)
        if ratio is None:
            out.append(f"- {prefix}{target}: no seed was run by both it and `{peer['strategy']}`.")
        else:
            checks.append(
                (
                    target,
                    verdict(ratio, PEER_TARGET),
                    f"{ratio.show()} of `{peer['strategy']}` (${peer['cost_usd'].mean:,.2f}) over "
                    f"{ratio.seeds} paired seeds, keeping {retained(fold):.1f} facts",
                )
            )
    elif others:
        # Nothing to be cheaper than: every peer that completed kept fewer facts. Not a win on
        # cost either, so the line names the cheapest peer and what it gave up.
        rival = min(others, key=_cost)
        out.append(
            f"- {prefix}no peer kept as many facts: the cheapest, `{rival['strategy']}` "
            f"(${rival['cost_usd'].mean:,.2f}), kept {retained(rival):.1f} against "
            f"{retained(fold):.1f}; the cost target has no peer to be judged against."
        )
    if limit is not None:
        ratio = paired_ratio(fold, limit)
        if ratio is not None:
            checks.append(
                (
                    f"cost <= {LIMIT_TARGET:g}x the limit row",
                    verdict(ratio, LIMIT_TARGET),
                    f"{ratio.show()} of `{LIMIT}` (${limit['cost_usd'].mean:,.2f}) over "
                    f"{ratio.seeds} paired seeds",
                )
            )
    checks.append(("zero HTTP 400s", _met(fold["http_400"].high == 0), fold["http_400"].show(".0f")))
    out += [f"- {prefix}{judged}: {what} ({value})" for what, judged, value in checks]
    out.append(f"- {prefix}cache-read share: {fold['cache_read_share'].mean:.1%} (shown, not judged)")
    if peer is not None:
        out.append(f"- {prefix}why: {_why(fold, peer)}")
    return out


def _met(ok: bool) -> str:
    return "met" if ok else "**MISSED**"


def interval_lines(cells: Sequence[dict[str, Any]]) -> list[str]:
    """Per row: its cost's 95% interval, its system prompt and tools (tokens, where the rows know
    them), and its cost over the profile's peer and over the limit row, paired by seed."""
    out = [
        "| profile | strategy | seeds | cost | 95% interval | system + tools (tokens) "
        f"| x peer [95%] | x `{LIMIT}` [95%] |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    named: list[str] = []
    for profile in dict.fromkeys(c["profile"] for c in cells):
        mine = [c for c in cells if c["profile"] == profile]
        fold = next((c for c in mine if c["strategy"] == HEADLINE), None)
        peer = real_peer(mine, fold) if fold is not None else None
        if peer is not None:
            named.append(f"{profile}: `{peer['strategy']}`")
        limit = next((c for c in mine if c["strategy"] == LIMIT), None)
        for c in mine:
            fixed = c.get("fixed_tokens")
            to_peer = paired_ratio(c, peer) if peer is not None and c is not peer else None
            to_limit = paired_ratio(c, limit) if limit is not None and c is not limit else None
            out.append(
                f"| {profile} | {c['strategy']} | {len(c['seeds'])} | ${c['cost_usd'].mean:,.2f} "
                f"| {c['cost_usd'].show_ci(',.2f')} | {fixed.show(',.0f') if fixed is not None else ''} "
                f"| {to_peer.show() if to_peer else ''} | {to_limit.show() if to_limit else ''} |"
            )
    peers = "; ".join(named) if named else "none (no real client completed a profile at its retention)"
    return [*out, "", f"The peer (the cheapest real client at {HEADLINE}'s retention or better): {peers}."]


def sweep_lines(cells: Sequence[dict[str, Any]]) -> list[str]:
    """Per profile and reply-length scale: the headline's ratio to that scale's peer and to that
    scale's limit row, where they ran, each with its verdict."""
    out = [
        f"| profile | reply length x | `{HEADLINE}` | peer | x peer [95%] | {PEER_TARGET}x target "
        f"| x `{LIMIT}` [95%] | {LIMIT_TARGET:g}x target |",
        "|---|--:|--:|---|--:|---|--:|---|",
    ]
    profiles = list(dict.fromkeys(c["profile"] for c in cells))
    keys = sorted({(c["profile"], c["verbosity_scale"]) for c in cells})
    keys.sort(key=lambda k: profiles.index(k[0]))  # stable: each profile's scales stay in order
    for profile, scale in keys:
        mine = [c for c in cells if c["profile"] == profile and c["verbosity_scale"] == scale]
        fold = next((c for c in mine if c["strategy"] == HEADLINE), None)
        if fold is None:
            continue
        peer = real_peer(mine, fold)
        limit = next((c for c in mine if c["strategy"] == LIMIT), None)
        to_peer = paired_ratio(fold, peer) if peer is not None else None
        to_limit = paired_ratio(fold, limit) if limit is not None else None
        if to_peer is None and to_limit is None:
            continue
        shown = f"`{peer['strategy']}`" if peer is not None and to_peer else "not run"
        peer_cells = f"{to_peer.show()} | {verdict(to_peer, PEER_TARGET)}" if to_peer else " | "
        limit_cells = f"{to_limit.show()} | {verdict(to_limit, LIMIT_TARGET)}" if to_limit else " | "
        out.append(
            f"| {profile} | {scale:g} | ${fold['cost_usd'].mean:,.2f} | {shown} "
            f"| {peer_cells} | {limit_cells} |"
        )
    if len(out) == 2:
        return [f"No reply length has `{HEADLINE}` beside a real client or the `{LIMIT}` row."]
    return out


LONG_TEXT = (
    "One seed per profile, 1,000 turns, the headline row (`economics.py --turns 1000 --strategies "
    f"{HEADLINE} --seeds 7 --facts-at-end`): the planted facts are asked in the last turns, the one "
    "stated in turn 2 in the very last. Targets: the mean cost of turns 900-1,000 within 1.25x of turns "
    "100-200, no HTTP 400, every fact still answered. The rows are kept beside the page (`--long-json`: "
    "`benchmarks/long_sessions.jsonl` for this page's, `benchmarks/results/retention_long.jsonl` for "
    "the retention page's, at summary fidelity q)."
)


def long_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The long sessions' table: per-turn cost early and late, their ratio and the verdicts."""
    out = [
        "| profile | q | turns | cost | per turn, 100-200 | per turn, 900-1,000 | ratio | HTTP 400 | facts "
        "| earlier work missed | compactions | peak context |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        costs = r.get("cost_per_turn") or []
        if len(costs) < 1_000:
            continue
        early, late = sum(costs[100:200]) / 100, sum(costs[900:1000]) / 100
        ratio = late / early if early else float("inf")
        flat = "met" if ratio <= 1.25 else "**MISSED**"
        missed = f"{r['quality_misses']}/{r['references']}" if r.get("references") else "-"
        q = r.get("summary_fidelity", 1.0)
        compactions = r["receipts"].get("compact_boundary", 0)
        out.append(
            f"| {r['profile']} | {q:g} | {r['turns_completed']}/{r['turns_planned']} | ${r['cost_usd']:,.2f} "
            f"| ${early:.4f} | ${late:.4f} | {ratio:.2f}x ({flat}) | {r['http_400']} "
            f"| {r['facts_retained']}/{r['facts_asked']} | {missed} | {compactions} "
            f"| {r['peak_context_tokens']:,} |"
        )
    return out if len(out) > 2 else ["No session of 1,000 turns or more was given."]


def _completes(cell: dict[str, Any]) -> bool:
    """Feasible; or a real client that finished every turn of every seed: its 400s are the window's
    prompt-too-long, answered by its own reactive compaction as its authors ship it, so they are
    counted in the table but not held against it as a peer."""
    finished = cell["turns_completed"].low >= cell["turns_planned"].high
    return feasible(cell) or (client_of(cell["strategy"]) is not None and finished)


def _why(fold: dict[str, Any], other: dict[str, Any]) -> str:
    """What the two rows show about where the cost difference comes from: cache reads dominate a
    long session's bill, so the mean context each request carries decides most of it."""
    return (
        f"`{fold['strategy']}` made {fold['api_calls'].mean:.0f} requests "
        f"({fold['summary_calls'].mean:.0f} of them summaries or forks) carrying {_mean_context(fold)} "
        f"tokens on average (peak {fold['peak_context_tokens'].mean:,.0f}) at a "
        f"{fold['cache_read_share'].mean:.1%} cache-read share; `{other['strategy']}` made "
        f"{other['api_calls'].mean:.0f} ({other['summary_calls'].mean:.0f}) carrying {_mean_context(other)} "
        f"(peak {other['peak_context_tokens'].mean:,.0f}) at {other['cache_read_share'].mean:.1%}."
    )


def _mean_context(cell: dict[str, Any]) -> str:
    """The mean over turns of the context each turn ended with, as the cell's seeds averaged it."""
    mean = cell.get("mean_context_tokens")
    return f"{mean.mean:,.0f}" if mean is not None else "?"


def _cost(cell: dict[str, Any]) -> float:
    return float(cell["cost_usd"].mean)


def plots(
    rows: Sequence[dict[str, Any]], img: Path, context_profile: str, prefix: str = "bench"
) -> list[str]:
    """Write the PNGs (means over seeds; the context plot from the first seed); their markdown links.

    Each page names its own (`prefix`): `make bench-quick` must not overwrite the main page's plots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    by = {(c["profile"], c["strategy"]): c for c in aggregate(rows)}
    first = min(r["seed"] for r in rows)
    one = {(r["profile"], r["strategy"]): r for r in rows if r["seed"] == first}
    links = []
    for key, title, fmt, name in (
        ("cost_usd", "Cost at Sonnet list prices (USD)", "${:,.2f}", f"{prefix}_cost.png"),
        ("cache_read_share", "Cache-read share of input tokens", "{:.0%}", f"{prefix}_cache_read.png"),
    ):
        fig, ax = plt.subplots(figsize=(10, 4.5))
        width = 0.8 / max(1, len(strategies))
        for i, strategy in enumerate(strategies):
            xs = [p + i * width for p in range(len(profiles))]
            ys = [by[(p, strategy)][key].mean if (p, strategy) in by else 0 for p in profiles]
            bars = ax.bar(xs, ys, width, label=strategy)
            if len(profiles) * len(strategies) <= 30:
                ax.bar_label(bars, [fmt.format(y) for y in ys], fontsize=6, rotation=90, padding=2)
        ax.set_xticks([p + 0.4 - width / 2 for p in range(len(profiles))], profiles)
        ax.set_title(title)
        ax.legend(fontsize=7, ncols=4)
        ax.margins(y=0.15)
        fig.tight_layout()
        fig.savefig(img / name, dpi=110)
        plt.close(fig)
        links.append(f"![{title}](img/{name})")
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for strategy in strategies:
        row = one.get((context_profile, strategy))
        if row and row.get("context_per_turn"):
            ax.plot(range(1, len(row["context_per_turn"]) + 1), row["context_per_turn"], label=strategy, lw=1)
    ax.axhline(200_000, color="grey", ls="--", lw=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("turn")
    ax.set_ylabel("input tokens of the turn's last request")
    ax.set_title(f"Context over turns, profile {context_profile}, seed {first} (dashed: the 200K window)")
    ax.legend(fontsize=7, ncols=4)
    fig.tight_layout()
    name = f"{prefix}_context_{context_profile}.png"
    fig.savefig(img / name, dpi=110)
    plt.close(fig)
    links.append(f"![Context over turns]({'img/' + name})")
    return links


# --- the page -----------------------------------------------------------------------------------

PREAMBLE = """# Benchmarks

Written by `{make}` (`benchmarks/report.py`); every number below was measured in that run on
the machine that ran it. Do not edit by hand: rerun `{make}`.
"""

ECONOMICS_TEXT = """## Economics: foldline against the strategies other agents use

`benchmarks/economics.py` plays each simulator profile's user ({turns} turns, seeds {seeds}) through
the real engine and tools, `AnthropicProvider` (the SDK) and HTTP to `foldline serve --backend
simulated` in a subprocess, whose prompt cache bills every request. Every cell is the mean over the
seeds, with the range in brackets where the seeds differ (the 95% intervals are in the next table).
foldline's rows send the system prompt foldline ships. Strategies (each a small class in
`benchmarks/economics.py` over the same engine), each in the form its authors ship:

{strategies}

"""
STRATEGY_TEXT = {
    "truncate": "the oldest whole turns dropped from each request until it fits under the 200K "
    "window's AutoCompact threshold; a cut falls on a typed prompt, so no tool pair is split.",
    "mask10": "observation masking, every tool result but the last 10 replaced on every request (the "
    "naive form: the masked set moves with every request, so the cached prefix breaks each time).",
    "mask-batched": "observation masking in batches of 30, so the masked prefix stays put between batches.",
    "summary-opencode": "opencode's prune of old tool output (the newest 40K tokens protected, a prune "
    "only when it frees 20K) and, on overflow (the window less 32K of output room), one summary request "
    "with opencode's template (Goal / Instructions / Discoveries / Accomplished / Relevant files).",
    "summary-openhands": "OpenHands' LLM summarizing condenser: past 120 events (or the threshold), the "
    "older half summarized into its state summary (USER_CONTEXT / COMPLETED / PENDING / ...), the events "
    "sent as text in one user message with the previous summary.",
    "anthropic-clear": "Anthropic's `clear_tool_uses_20250919` through `foldline serve`'s real "
    "`context_management` (trigger 100K input tokens, keep 3 tool uses, `clear_at_least` 30K).",
    "limit": "**the physical limit**, an oracle no agent can be: each request is the system prompt, the "
    "tools, a note of the planted facts stated so far, a note of the earlier work the session refers back "
    "to and the current turn; everything else is dropped "
    "for free, and every new token is written once. Every row's cost is also given as a multiple of it.",
    "claude-code-design": "foldline's engine as Claude Code is designed: AutoCompact with a "
    "cache-sharing summary fork, no Context Collapse, the public API (no cache_edits).",
    "foldline-no-edits": "every level, the public API: **the headline row** (foldline's defaults: Context "
    "Collapse folds 2K-token spans into records of their turns, with no summary request, and commits a "
    "fold as soon as the reads it saves pay for its cache rewrite, design.md R3.3.7).",
    "foldline-no-edits-at-90": "the headline row with folds committed only at 90% of the window, the "
    "default before R3.3.7: a design choice, side by side.",
    "foldline-no-edits-100k": "the headline row managing to a 100K working window on the 200K model "
    "(`Config(context_window=100_000)`): a setting a user chooses, not the default.",
    "foldline-no-edits-no-transcript": "the headline row without the session's transcript named in its "
    "system prompt (`TranscriptConfig.named_to_model`, design.md §3.5; the default names it, so a detail a "
    "summary dropped can be searched for): the default before, side by side.",
    "foldline-no-edits-summaries": "the headline row folding 10K-token spans into the model's own "
    'summaries (R3.3.1), the default before record folds (design.md, "Record folds"): a design choice, '
    "side by side.",
    "foldline": "every level with `cache_edits`. That feature has no public pricing; its billing here is "
    "this server's own model, so this row is shown but not judged.",
}
"""What each strategy row is, for the page (only the rows that ran are described)."""


ECONOMICS_TAIL = """No strategy is judged against "no management": no model takes an unbounded window. The
managed strategies run on a 200K window (the server answers a larger prompt with a 400). Cost is at the
model's list prices from `foldline.pricing` (Sonnet: $3 input, $3.75 5-minute write, $6 1-hour write,
$0.30 read, $15 output per million) over the main loop and every other request (forks, summaries),
with the long-context rates (2x input, 1.5x output) on any request whose prompt passes 200K tokens.
Facts are planted in two ways, and each is asked for about 60% of the session later; a fact is
retained when the answer contains its value:

- **user**: the user states five facts early ("Note for later: the staging port is 6543.").
- **tool output**: the user has three scripts run early; each prints one value among 60 lines of
  progress, which the answer does not repeat. Only the tool result held it.

The user also refers back to earlier work by what was done, never by name (`profiles.references_for`):
"Rerun the tests of the module you changed when we fixed the rounding bug." (a file the model's fix
changed), "Rerun the test that failed in the parser check." (one failing test among 79 lines of a
script's output), "Apply the decision on the cache key to the orders module." (a decision the user
stated early). The simulated model resolves each from what the request holds; a file or a result it
lost costs extra calls to find again (**recovered**: a search of the tree, the whole check rerun), a
decision it lost is applied wrongly (**missed**). The miss rate is pooled over the seeds, with its
95% Wilson interval.

A run that stopped early asked fewer questions; a strategy is feasible when every seed completed
every turn with no HTTP 400. A real client that completed every turn stays a peer even with 400s:
they are the window's prompt-too-long, answered by its own compaction as its authors ship it (the
table counts them).
"""


INTERVALS_TEXT = (
    "Seeds are paired: a seed is the same simulated user, with the same prompts, in every row. Each "
    "cost's interval is the 95% Student-t interval of its mean over the seeds; a ratio (`x peer`, "
    f"`x {LIMIT}`) is the mean of the per-seed ratios over the seeds both rows ran, with its 95% "
    "interval. One seed gives no interval. System + tools: the tokens of the first request's system "
    "prompt and tool definitions (foldline's rows); for a real client, whose request log keeps no parts "
    "of a request, its smallest main-loop request: system prompt, tools and the first typed prompt."
)

SWEEP_TEXT = (
    "The same sessions with the simulated model's replies quoting more or fewer lines of the tool "
    "results (`foldline serve --verbosity-scale X`: both numbers of `SimulatedConfig.verbosity` times "
    f"X; 1.0 is the calibration the tables above ran at). At each scale, `{HEADLINE}`'s cost over that "
    "scale's peer (the cheapest real client at its retention), paired by seed, and the verdict on the "
    f"{PEER_TARGET}x target by the same rule. A verdict that changes with the scale is decided by the "
    "simulator, not by the agents."
)

FIDELITY_TEXT = (
    "The same sessions with lossy summaries: at summary fidelity q each statement a summary would keep "
    '("the X is Y.", whoever said it; the model does not know which were planted) survives one '
    "summary request with probability q, drawn from the seed, the statement and the summarized "
    "content, never the request's wording, so every strategy's summary of the same content loses the "
    "same facts; a fact carried through k summaries survives with about q^k (`foldline serve "
    "--summary-fidelity`). Retention is facts retained of those asked, pooled over the seeds (each "
    "asked fact one trial), with its 95% Wilson score interval; pooling treats every asked fact as an "
    "independent trial and ignores differences between seeds, so where seeds differ the interval is "
    "too narrow. A "
    "strategy that summarizes less loses less as q falls; at q = 1 summaries lose nothing, as in the "
    "tables above."
)


def fidelity_lines(cells: Sequence[dict[str, Any]]) -> list[str]:
    """Every cell grouped by q (highest first), then profile and strategy: retention with its
    interval, and cost."""
    out = [
        "| q | profile | strategy | reply length x | seeds | retention [95%] | cost | summary calls |",
        "|--:|---|---|--:|--:|--:|--:|--:|",
    ]
    for c in sorted(cells, key=lambda c: -c["summary_fidelity"]):  # stable: row order within a q
        out.append(
            f"| {c['summary_fidelity']:g} | {c['profile']} | {c['strategy']} | {c['verbosity_scale']:g} "
            f"| {len(c['seeds'])} | {c['retention'].show()} | ${c['cost_usd'].show(',.2f')} "
            f"| {c['summary_calls'].show('.0f')} |"
        )
    return out


RETENTION_Q = 0.7
"""The summary fidelity the retention targets are judged at: a summary keeps each fact with 0.7."""
RETENTION_TARGET = 0.9
"""At `RETENTION_Q`, the headline keeps at least this share of the planted facts (the interval's low end)."""
RETENTION_PEER_TARGET = 0.75
"""At `RETENTION_Q`, the headline's cost over the cheapest peer setting that keeps as many facts."""
RETENTION_TARGET_TEXT = (
    f"Targets, per profile: at q = {RETENTION_Q:g}, `{HEADLINE}` keeps at least {RETENTION_TARGET:.0%} "
    "of the planted facts (the low end of the Wilson interval), misses no more of the earlier-work "
    "references than the best real-client setting (the lowest pooled miss rate), and costs at most "
    f"{RETENTION_PEER_TARGET}x the cheapest real-client setting that keeps as many facts (where none "
    f"keeps as many: at most {RETENTION_PEER_TARGET}x the cheapest setting, keeping more facts than "
    f"every one); at q = 1, at most {LIMIT_TARGET}x the `{LIMIT}` row. Costs are paired by "
    "seed; a cost target is `met` only when the whole 95% interval is below it."
)


def _share_verdict(retention: Retention, target: float) -> str:
    low, high = retention.interval()
    if retention.asked == 0:
        return "not measured"
    if low >= target:
        return "met"
    return "**MISSED**" if high < target else "not decided"


def retention_target_lines(cells: Sequence[dict[str, Any]]) -> list[str]:
    """Per profile, the headline against the retention targets at `RETENTION_Q` and at q = 1."""
    out: list[str] = []
    for profile in dict.fromkeys(c["profile"] for c in cells):
        at = {
            (c["strategy"], c["summary_fidelity"]): c
            for c in cells
            if c["profile"] == profile and c["verbosity_scale"] == 1.0
        }
        out.append(f"**{profile}**:")
        fold = at.get((HEADLINE, RETENTION_Q))
        if fold is None:
            out += [f"- no `{HEADLINE}` row at q = {RETENTION_Q:g}.", ""]
            continue
        kept: Retention = fold["retention"]
        out.append(
            f"- {_share_verdict(kept, RETENTION_TARGET)}: at least {RETENTION_TARGET:.0%} of the facts at "
            f"q = {RETENTION_Q:g} ({kept.show()})"
        )
        clients = [
            c
            for (name, q), c in at.items()
            if q == RETENTION_Q and client_of(name) is not None and _completes(c) and c["references"].mean
        ]
        if not clients:
            out.append(f"- no real client played {profile} at q = {RETENTION_Q:g}: nothing to judge against.")
        else:
            best = min(clients, key=lambda c: c["miss_rate"][0])
            mine, theirs = fold["miss_rate"][0], best["miss_rate"][0]
            out.append(
                f"- {_met(mine <= theirs)}: misses no more earlier work than the best peer "
                f"({miss_rate_text(fold)} against `{best['strategy']}`'s {miss_rate_text(best)})"
            )
            keeping = [c for c in clients if _share(c) >= _share(fold)]
            # where none keeps as many, foldline keeps more than every one: judged against the cheapest
            peer = min(keeping or clients, key=_cost)
            ratio = paired_ratio(fold, peer)
            named = f"`{peer['strategy']}` ({peer['retention'].show()})"
            what = (
                f"the cheapest peer setting keeping as many facts, {named}"
                if keeping
                else f"the cheapest peer setting, {named}, none keeping as many"
            )
            if ratio is None:
                out.append(f"- cost against {what}: no seed was run by both.")
            else:
                out.append(
                    f"- {verdict(ratio, RETENTION_PEER_TARGET)}: cost <= {RETENTION_PEER_TARGET}x {what}: "
                    f"{ratio.show()} (${peer['cost_usd'].mean:,.2f}) over {ratio.seeds} paired seeds"
                )
        lossless, limit = at.get((HEADLINE, 1.0)), at.get((LIMIT, 1.0))
        ratio = paired_ratio(lossless, limit) if lossless and limit else None
        if ratio is None:
            out.append(f"- no `{HEADLINE}` and `{LIMIT}` rows on common seeds at q = 1.")
        else:
            out.append(
                f"- {verdict(ratio, LIMIT_TARGET)}: cost <= {LIMIT_TARGET}x the `{LIMIT}` "
                f"row at q = 1: {ratio.show()} over {ratio.seeds} paired seeds"
            )
        out.append("")
    return out


def _share(cell: dict[str, Any]) -> float:
    retention: Retention = cell["retention"]
    return retention.kept / retention.asked if retention.asked else 0.0


LIMIT_TEXT = (
    f"`{LIMIT}`: the physical-limit row, no agent: each request carries only the system prompt, the "
    "tools, a note of what the remaining work needs and the current turn, every new token written "
    "once. It is neither a peer nor a candidate for the cheapest strategy; every row's cost is shown "
    "over it."
)

PEERS_TEXT = (
    "Real clients: {rows}. `benchmarks/peers.py` types the same simulated user's prompts into the "
    "client's own command line against the same server, profile and seed; the client manages its "
    "context with its own code. Cost, cache share and API calls are the server's per-request usage "
    "(its request log); summary calls are the requests with no tools or another model, so a "
    "compaction that keeps the main loop's tools counts as main; facts are judged from the answers "
    "as foldline's are."
)


def _strategy_list(rows: Sequence[dict[str, Any]]) -> str:
    """The page's description of the strategy rows that ran, in table order."""
    names = [n for n in dict.fromkeys(r["strategy"] for r in rows) if n in STRATEGY_TEXT]
    return "\n".join(f"- `{n}`: {STRATEGY_TEXT[n]}" for n in names)


def _coverage(rows: Sequence[dict[str, Any]], clients: Sequence[str]) -> str:
    """Which profiles and seeds each real client played, and which profiles it did not: a profile
    without a client's rows is judged without that peer, and the page says so."""
    profiles = list(dict.fromkeys(r["profile"] for r in rows))
    parts = []
    for client in clients:
        played: dict[str, list[int]] = {}
        for r in rows:
            if client_of(r["strategy"]) == client:
                played.setdefault(r["profile"], []).append(r["seed"])
        missing = [p for p in profiles if p not in played]
        text = "; ".join(f"{p} (seeds {', '.join(map(str, sorted(set(s))))})" for p, s in played.items())
        parts.append(f"`{client}` played {text}" + (f", not {', '.join(missing)}" if missing else ""))
    return "Peer coverage: " + ". ".join(parts) + "."


def build_page(
    rows: Sequence[dict[str, Any]],
    others: Sequence[tuple[str, str, str, float, int]],
    turns: str,
    links: list[str],
    make: str = "make bench",
    long_rows: Sequence[dict[str, Any]] = (),
    note: str = "",
) -> str:
    everything = rows
    # the calibrated simulator, summaries keeping every fact: the main tables
    rows = [r for r in everything if scale_of(r) == 1.0 and fidelity_of(r) == 1.0]
    cells = aggregate(rows)
    seeds = ", ".join(str(s) for s in sorted({r["seed"] for r in rows})) or "-"
    lines = [
        PREAMBLE.format(make=make),
        *([note.strip(), ""] if note else []),
        ECONOMICS_TEXT.format(turns=turns, seeds=seeds, strategies=_strategy_list(rows)) + ECONOMICS_TAIL,
        *table_lines(cells),
        "",
    ]
    clients = [name for name in CLIENTS if any(client_of(r["strategy"]) == name for r in rows)]
    if clients:
        lines += [PEERS_TEXT.format(rows=", ".join(f"`{c}` ({CLIENTS[c][1]})" for c in clients)), ""]
        lines += [_coverage(rows, clients), ""]
    if any(r["strategy"] == LIMIT for r in rows):
        lines += [LIMIT_TEXT, ""]
    lines += ["### Intervals and ratios, paired by seed", "", INTERVALS_TEXT, "", *interval_lines(cells), ""]
    lines += ["### Who wins, and foldline against its target", ""]
    lines += [
        f"Target: `{HEADLINE}` at most {PEER_TARGET}x the cheapest real client (any setting) at equal or "
        f"better retention, at most {LIMIT_TARGET:g}x the `{LIMIT}` row and zero HTTP 400s. The "
        "cache-read share is shown, not judged: the ceiling of foldline's own prompts, which no breakpoint "
        "or TTL could read past, is below 0.95 (the TTL choice's table). A cost target is `met` only when "
        "the 95% interval of the paired ratio lies wholly below it, `MISSED` only when wholly above, and "
        "otherwise not decided at that many seeds.",
        "",
        *verdicts(cells),
    ]
    if any(scale_of(r) != 1.0 for r in everything):
        at_full = [r for r in everything if fidelity_of(r) == 1.0]
        lines += ["### Reply-length sweep", "", SWEEP_TEXT, "", *sweep_lines(aggregate(at_full)), ""]
    if any(fidelity_of(r) != 1.0 for r in everything):
        at_scale = aggregate([r for r in everything if scale_of(r) == 1.0])
        lines += ["### Summary fidelity", "", FIDELITY_TEXT, "", *fidelity_lines(aggregate(everything)), ""]
        lines += [
            "### Against the retention targets",
            "",
            RETENTION_TARGET_TEXT,
            "",
            *retention_target_lines(at_scale),
        ]
    if long_rows:
        lines += ["### Long sessions", "", LONG_TEXT, "", *long_lines(long_rows), ""]
    lines += ["### Plots", "", *links, ""]
    wall = sum(r["wall_s"] for r in rows)
    lines += [f"The economics runs took {wall / 60:.0f} minutes of session wall time in all.", ""]
    for name, text, about, seconds, code in others:
        lines += [f"## {name}", "", about, ""]
        status = "" if code == 0 else f" (exit status {code})"
        lines += [f"`benchmarks/{name}.py`, {seconds:.0f} s{status}:", "", "```", text, "```", ""]
        lines += [*_target_lines(name, text), ""]
    return "\n".join(lines).rstrip() + "\n"


def _target_lines(name: str, text: str) -> list[str]:
    if name == "pipeline_overhead":
        last = [line.split() for line in text.splitlines() if line.strip().startswith("20")]
        if last and len(last[-1]) >= 9:
            cold, resumed = float(last[-1][6]), float(last[-1][8])
            return [
                f"Cold build on resume at 20K messages: {resumed:.1f}x serialization, target <= 10x: "
                f"{'met' if resumed <= 10 else '**MISSED**'}. That is a session resumed after a clean "
                "close, whose close left the normalized head beside the transcript "
                "(`api/frozen_head.py`): the resume checks that the transcript still starts with the "
                "same bytes (SHA-256), parses what normalization changed (blocks it passed through are "
                "saved as places in the entries and taken from them again) and normalizes only what "
                "follows the head. What is left is projection, cache breakpoints and two "
                "young-generation garbage collections over the objects the resume created.",
                "",
                f"Cold build with no saved head at 20K messages (a session that was killed, or an "
                f"older foldline's): {cold:.1f}x serialization, target <= 15x: "
                f"{'met' if cold <= 15 else '**MISSED**'}. The first build normalizes everything; a "
                "reply written block by block is joined as it is lifted, and one scan proves the "
                "seven edge steps idle on a clean session. Later turns are incremental either way, "
                "which is why the per-turn column stays under serialization. Every time is the best "
                "of nine, and still varies by about a fifth from run to run on a shared 2-core "
                "machine, so either verdict can flip near its target.",
            ]
    if name == "cli_startup":
        match = re.search(r"chat --help = ([\d.]+) s \(target <= ([\d.]+) s\)", text)
        if match:
            seconds, target = float(match.group(1)), float(match.group(2))
            return [
                f"`foldline chat --help`: {seconds:.3f} s, target <= {target:g} s on a quiet machine: "
                f"{'met' if seconds <= target else '**MISSED**'}."
            ]
    if name == "resume":
        match = re.search(r"= ([\d.]+)x", text)
        if match:
            ratio = float(match.group(1))
            return [
                f"Resume: {ratio:.2f}x raw decode, target >= 0.8x: {'met' if ratio >= 0.8 else '**MISSED**'}."
            ]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--economics-json", help="read economics rows from this JSON-lines file instead")
    parser.add_argument("--seeds", default="7,8,9", help="economics seeds, comma-separated")
    parser.add_argument(
        "--verbosity-scale",
        default="1.0",
        help="the simulated model's reply-length settings, comma-separated (economics.py and peers.py run "
        "once per value; 1.0, always run, makes the main tables; the others the reply-length sweep)",
    )
    parser.add_argument(
        "--fidelity",
        default="1.0",
        help="summary fidelities q of the simulated model, comma-separated (economics.py and peers.py run "
        "once per value; 1.0, always run, makes the main tables; the others the summary-fidelity section)",
    )
    parser.add_argument("--rows", default=str(LAST_ROWS), help="where the economics rows are kept")
    parser.add_argument("--skip", default="", help="comma-separated scripts not to run")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per script")
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument(
        "--peers",
        default="",
        help="real clients to add as rows, comma-separated (claude-code,opencode: benchmarks/peers.py, "
        "the same turns and seeds; about 5 s a turn for Claude Code, 20 s for opencode)",
    )
    parser.add_argument(
        "--auto-compact-window",
        default="",
        help="Claude Code also at these CLAUDE_CODE_AUTO_COMPACT_WINDOW values, comma-separated (peers.py)",
    )
    parser.add_argument(
        "--autocompact-pct",
        action="append",
        default=[],
        help="with --auto-compact-window, Claude Code compacting at these shares of that window, "
        "comma-separated, repeatable (peers.py: CLAUDE_AUTOCOMPACT_PCT_OVERRIDE)",
    )
    parser.add_argument(
        "--opencode-compaction",
        action="append",
        default=[],
        help="opencode also at these compaction settings, KEY=VALUE[,...], repeatable (peers.py)",
    )
    parser.add_argument("--peers-json", help="read the peers' rows from this JSON-lines file instead")
    parser.add_argument(
        "--note", help="a markdown file said under the page's first paragraph: how and where its rows ran"
    )
    parser.add_argument(
        "--long-json",
        default=str(HERE / "long_sessions.jsonl") if (HERE / "long_sessions.jsonl").exists() else "",
        help="economics rows of 1,000-turn sessions to show as the long-session table",
    )
    parser.add_argument("--peers-rows", default=str(PEERS_ROWS), help="where the peers' rows are kept")
    parser.add_argument(
        "--fleet-json",
        help="with --economics-json / --peers-json: the manifest (fleet.json in the results folder) of "
        "the fleet that made those rows, named on the page as a fleet run would name it",
    )
    parser.add_argument(
        "--kept-others",
        action="store_true",
        help="quote every other benchmark's output as it was kept (benchmarks/results/<name>.txt) instead "
        "of running it: the page rebuilt whole from one earlier run",
    )
    add_fleet_options(parser)
    parser.set_defaults(jobs=2)
    args = parser.parse_args()
    try:
        fidelity_list(args)
    except ValueError as e:
        parser.error(str(e))
    skip = set(args.skip.split(","))
    fleet_economics, fleet_peers, ran_on = run_the_fleet(args) if "economics" not in skip else ([], [], "")
    rows = economics(args, fleet_economics) if "economics" not in skip else []
    if args.peers or args.peers_json:
        profiles = list(dict.fromkeys(r["profile"] for r in rows)) or list(DEFAULT_PROFILES)
        rows += peers(args, profiles, fleet_peers if ran_on else None)
    if args.fleet_json and not ran_on:
        ran_on = fleet_line(json.loads(Path(args.fleet_json).read_text()), rows)
    planned = {r["profile"]: r["turns_planned"] for r in rows}  # the same for every seed
    turns = ", ".join(f"{p} {t}" for p, t in planned.items()) or str(args.turns)
    others = []
    for name, extra, about in OTHERS:
        if name in skip:
            continue
        if args.kept_others:
            text, seconds, code = kept_output(name)
        else:
            text, seconds, code = run_script(name, extra, args.timeout)
            keep_output(name, extra, text, seconds, code)
        others.append((name, text, about, seconds, code))
    out = Path(args.out)
    profile = "debug" if any(r["profile"] == "debug" for r in rows) else (rows[0]["profile"] if rows else "")
    prefix = out.stem.replace("benchmarks", "bench")  # benchmarks.md: bench_*.png, as it always was
    # the plots show the calibrated simulator with summaries that keep every fact
    main_rows = [r for r in rows if scale_of(r) == 1.0 and fidelity_of(r) == 1.0]
    links = plots(main_rows, out.parent / "img", profile, prefix) if main_rows else []
    make = "make bench" if prefix == "bench" else f"make {prefix}"
    long_rows = (
        [json.loads(x) for x in Path(args.long_json).read_text().splitlines()] if args.long_json else []
    )
    note = "\n\n".join(x for x in (ran_on, Path(args.note).read_text() if args.note else "") if x)
    out.write_text(build_page(rows, others, turns, links, make, long_rows, note))
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
