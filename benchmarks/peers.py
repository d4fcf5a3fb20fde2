"""Peers: Claude Code and opencode themselves, as rows of the economics table.

Each run generates the profile's workspace (`profiles.generate_workspace`, the repository the
economics sessions work in), starts `foldline serve --backend simulated` with the same seed,
profile and window as `benchmarks/economics.py` (`--seed S --profile P --context-window 200000`,
plus a request log), and types the same simulated user's prompts
(`profiles.user_prompts(..., output_facts=True)`, the economics sessions' prompts and planted
facts) into the real client through its own command line: `claude -p PROMPT --output-format json`
then `--continue`, or opencode's own HTTP API: one `opencode serve` for the session, the prompt
posted to it as its TUI posts one (see `foldline.interop.OpenCode`).
The clients manage their context with their own code (Claude Code's auto-compact, opencode's prune
and compaction): that is the comparison.

Everything priced comes from the server's side: its request log carries each answered
`/v1/messages` request's `usage`, model and tool count (`AccessRecord.billed`), so cost (Sonnet list
prices through `foldline.pricing`, every request alike, the clients' small-model side requests
included), cache-read share, peak request, API calls and HTTP 400s are the server's numbers.
`summary_calls` counts the requests that were not the main loop's, as far as the log can tell: a
request that declared no tools, or named another model than the session's. A compaction request
that keeps the main loop's tools (a cache-sharing fork) is counted as main. Facts retained are
judged from each turn's answer text by `simulation.score_facts`, exactly as economics judges
foldline's answers. A turn whose client fails (an error result, no finished reply, a timeout)
stops the run and is kept in `errors`, as `simulate` stops on an API error; a turn that answered
although the client reported an error (opencode exits 1 after compacting on the window's 400) is
noted in `errors` and the session goes on, the refusal counted in `http_400`.

Each client also runs at its best settings, each setting its own row, named after it so that
`benchmarks/report.py` sees each as a peer of its own:

- Claude Code: `--auto-compact-window 100000,60000` sets `CLAUDE_CODE_AUTO_COMPACT_WINDOW` (the
  window its auto-compact manages to) in its environment; rows `claude-code@100k`, `claude-code@60k`.
- opencode: `--opencode-compaction prune=true` (repeatable) writes the workspace's `opencode.json`
  `compaction` section; rows `opencode@prune=true`. opencode 1.18's keys are `auto` (compact when the
  context is full, default true), `prune` (clear old tool outputs, **default false**), `tail_turns`
  and `preserve_recent_tokens` (what a compaction keeps verbatim) and `reserved` (the buffer below
  the window). Its threshold is the model's usable input: `limit.input - reserved` where the model
  declares an input limit, otherwise `limit.context` less the model's output room, so `reserved` does
  not move the threshold for a model without `limit.input` (Sonnet's entry has none); the one knob
  that moves it there is the model's `limit` in the provider config, which is not a compaction
  setting and is not swept here. `prune=true` is the setting that changes what opencode sends.

`--defaults-too` adds the client's defaults (row `claude-code`, `opencode`) to a sweep. opencode runs
as one `opencode serve` per session, each turn posted to its session: booting `opencode run
--continue` afresh every turn reloaded the whole session each time (562 s for a 100-turn `feature`
session on this 2-core machine, most of it opencode's own CPU, against 98 s posted to one server for
the same row within 0.3%), and `opencode run --attach` returns before the turn is done (see
`interop.OpenCode`).

`--json` prints one object per (client setting, seed) with the keys of economics' rows (`report_row`), so
`benchmarks/report.py` aggregates them beside the strategies; without it, the table.

Each (setting, seed) session is one fleet unit (`foldline.fleet.Unit`, kind `peers:fleet_row`):
`--jobs`, `--address`, `--results` and `--runtime-env` as in `benchmarks/economics.py`. The client is
installed (npm, pinned) on the driver first, so a machine without npm skips the client before any
unit runs; each worker installs it into its own cache on first use, or finds it in the worker image
(docs/fleet.md).

Run: `PYTHONPATH=src .venv/bin/python benchmarks/peers.py --client claude-code --profile feature
[--turns 20] [--seeds 7,8,9] [--auto-compact-window 100000,60000] [--defaults-too]
[--verbosity-scale 1.0] [--fidelity 1.0,0.7] [--summary-fact-budget N] [--json]`

`--fidelity` and `--summary-fact-budget` set the simulated model's summaries as in
`benchmarks/economics.py` (`foldline serve --summary-fidelity`, `--summary-fact-budget`): a client's
own compaction requests are summaries the model answers, so each q is its own row, recorded in
`summary_fidelity` and `summary_fact_budget`.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from economics import (
    FACT_BUDGET,
    WINDOW,
    add_fidelity_options,
    add_fleet_options,
    checked_fidelity_options,
    print_table,
    report_row,
    run_units,
)
from foldline import interop
from foldline._json import dumps, loads
from foldline.config import Config
from foldline.errors import ClientRunError, ClientUnavailableError
from foldline.fleet import Unit, knobs
from foldline.server.simulated.profiles import generate_workspace, references_for, user_prompts
from foldline.simulation import MeteredRequest, SimulationReport, score_facts, score_references

CLIENTS = {
    "claude-code": (interop.CLAUDE_CODE, "Claude Code 2.1.328, real client, its own compaction"),
    "opencode": (interop.OPENCODE, "opencode 1.18.33, real client, its own prune and compaction"),
}
AUTO_COMPACT_WINDOW = "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
"""Claude Code's setting of the window its auto-compact manages to (tokens), read from its environment;
values under 100,000 are raised to 100,000."""
AUTOCOMPACT_PCT = "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"
"""Claude Code's setting of the share of that window (percent) at which it compacts, lower than its own."""
OPENCODE_COMPACTION: dict[str, type] = {
    "auto": bool,
    "prune": bool,
    "tail_turns": int,
    "preserve_recent_tokens": int,
    "reserved": int,
}
"""The keys of opencode 1.18's `compaction` section (its config schema) and their kinds."""
UNAVAILABLE = 3
"""The exit status when the client cannot be installed here (no npm, the registry unreachable)."""
_TOO_LONG = re.compile(r"prompt is too long: (\d+) tokens")
_MESSAGES = "/v1/messages"


def metered(entry: dict[str, Any]) -> MeteredRequest:
    """One request-log line of `/v1/messages` as `simulate`'s meter would have kept it."""
    status = int(entry["status"])
    if not 200 <= status < 300:
        error = str(entry.get("error") or "")
        match = _TOO_LONG.search(error)
        return MeteredRequest(status=status, error=error, refused_tokens=int(match.group(1)) if match else 0)
    usage = entry.get("usage") or {}
    split = usage.get("cache_creation") or {}
    return MeteredRequest(
        input=int(usage.get("input_tokens", 0)),
        cache_read=int(usage.get("cache_read_input_tokens", 0)),
        cache_write=int(usage.get("cache_creation_input_tokens", 0)),
        cache_write_1h=int(split.get("ephemeral_1h_input_tokens", 0)),
        output=int(usage.get("output_tokens", 0)),
        model=str(entry.get("model", "")),
    )


def is_main(entry: dict[str, Any], model: str) -> bool:
    """An answered request of the main loop, as far as the log tells: tools declared, the session's model."""
    return int(entry.get("tools", 0)) > 0 and str(entry.get("model", "")) == model


@dataclass(frozen=True)
class Setting:
    """One setting a client is run at: its row's name (`claude-code@100k`), what the label adds, and
    what it changes (Claude Code's environment, opencode's `compaction` section)."""

    client: str
    env: dict[str, str] = field(default_factory=dict)
    compaction: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        if self.env.get(AUTO_COMPACT_WINDOW):
            pct = f"-{self.env[AUTOCOMPACT_PCT]}pct" if self.env.get(AUTOCOMPACT_PCT) else ""
            return f"{self.client}@{int(self.env[AUTO_COMPACT_WINDOW]) // 1000}k{pct}"
        if self.compaction:
            return f"{self.client}@" + ",".join(f"{k}={_show(v)}" for k, v in self.compaction.items())
        return self.client

    @property
    def label(self) -> str:
        base = CLIENTS[self.client][1]
        if self.env.get(AUTO_COMPACT_WINDOW):
            return f"{base}, " + ", ".join(f"{k}={v}" for k, v in self.env.items())
        if self.compaction:
            return f"{base}, opencode.json compaction {dumps(self.compaction).decode()}"
        return f"{base}, its defaults"


def _show(value: Any) -> str:
    return "true" if value is True else "false" if value is False else str(value)


def client_of(strategy: str) -> str | None:
    """The real client a row's strategy names (`claude-code`, `claude-code@100k`), or None."""
    name = strategy.split("@", 1)[0]
    return name if name in CLIENTS else None


def parse_compaction(spec: str) -> dict[str, Any]:
    """`prune=true,reserved=40000` as opencode.json's `compaction` section.

    Raises:
        ValueError: a key opencode 1.18 does not have, or a value that is not a boolean or a count.
    """
    out: dict[str, Any] = {}
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        key, sep, raw = part.partition("=")
        if not sep or key not in OPENCODE_COMPACTION:
            raise ValueError(
                f"--opencode-compaction {part!r}: expected KEY=VALUE with KEY one of "
                f"{', '.join(OPENCODE_COMPACTION)}"
            )
        kind = OPENCODE_COMPACTION[key]
        if kind is bool:
            if raw not in ("true", "false"):
                raise ValueError(f"--opencode-compaction {part!r}: {key} is true or false")
            out[key] = raw == "true"
        else:
            if not raw.isdigit():
                raise ValueError(f"--opencode-compaction {part!r}: {key} is a whole number (tokens or turns)")
            out[key] = int(raw)
    return out


def settings(args: argparse.Namespace) -> list[Setting]:
    """The settings `args` asks `--client` to be run at: its defaults unless a sweep option is given
    (`--defaults-too` adds them to a sweep)."""
    if args.client == "claude-code":
        windows = [int(w) for spec in args.auto_compact_window for w in spec.split(",") if w.strip()]
        pcts = [str(int(p)) for spec in args.autocompact_pct for p in spec.split(",") if p.strip()]
        swept = [
            Setting("claude-code", env={AUTO_COMPACT_WINDOW: str(w), **({AUTOCOMPACT_PCT: p} if p else {})})
            for w in windows
            for p in (pcts or [""])
        ]
    else:
        swept = [Setting("opencode", compaction=parse_compaction(c)) for c in args.opencode_compaction]
    if swept and not args.defaults_too:
        return swept
    return [Setting(args.client), *swept]


class Driver:
    """One client's session: `turn` types a prompt and returns the answer's text."""

    def __init__(self, setting: Setting, binary: Path, root: Path, url: str, turn_timeout: float) -> None:
        self.name = setting.client
        if self.name == "claude-code":
            self.claude = interop.ClaudeCode(
                binary, root, url, turn_timeout=turn_timeout, extra_env=dict(setting.env)
            )
            self.claude.prepare()
        else:
            self.opencode = interop.OpenCode(
                binary, root, url, turn_timeout=turn_timeout, compaction=dict(setting.compaction)
            )
            self.opencode.prepare()

    def turn(self, prompt: str) -> tuple[str, str | None]:
        """The answer's text, and a note of what went wrong in a turn that still answered.

        Raises:
            ClientRunError: the client failed the turn.
        """
        if self.name == "claude-code":
            result = self.claude.turn(prompt)
            if result.get("is_error"):
                raise ClientRunError(f"claude answered an error: {str(result.get('result'))[:300]}")
            return str(result.get("result", "")), None
        reply = self.opencode.turn(prompt)
        error = dumps(reply.error).decode()[:300] if reply.error else None
        if not reply.finished:
            if error:
                raise ClientRunError(f"opencode did not finish its reply: {error}")
            # opencode 1.18 leaves its loop without a word when a reply stops at the context window
            # (`model_context_window_exceeded`): the turn has no answer, and the user types the next
            # prompt, as one would (its next request compacts).
            return (
                reply.text,
                f"ended without an answer (finish {reply.finish}): a reply stopped at the window",
            )
        if error:
            # The session goes on, as a user's would: the refusal is counted from the server's log.
            return reply.text, f"answered with an error recorded: {error}"
        return reply.text, None

    def close(self) -> None:
        """Stop what the client left running (opencode's server)."""
        if self.name == "opencode":
            self.opencode.close()


def run(
    setting: Setting, profile: str, seed: int, turns: int, root: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """One session of the client at `setting` on `profile`/`seed`: the economics row.

    Raises:
        ClientUnavailableError: the client cannot be installed here.
    """
    client = setting.client
    package, _ = CLIENTS[client]
    binary = interop.installed(package)
    root.mkdir(parents=True, exist_ok=True)
    generate_workspace(root / "ws", seed, references=True)
    questions = {r.question for r in references_for(seed)}
    report = SimulationReport(
        profile=profile, seed=seed, turns_planned=turns, blocking_limit=Config().blocking_limit
    )
    started = time.perf_counter()
    fidelity = getattr(args, "summary_fidelity", 1.0)
    budget = getattr(args, "summary_fact_budget", FACT_BUDGET)
    window = ("--context-window", str(args.window), "--verbosity-scale", str(args.verbosity_scale))
    summaries = ("--summary-fidelity", str(fidelity), "--summary-fact-budget", str(budget))
    with interop.serve(root, "--seed", str(seed), "--profile", profile, *window, *summaries) as server:
        driver = Driver(setting, binary, root, server.url, args.turn_timeout)
        try:
            seen = 0
            prompts = user_prompts(profile, turns, seed, output_facts=True, references=True)
            for turn, prompt in enumerate(prompts):
                try:
                    text, note = driver.turn(prompt)
                except (ClientRunError, subprocess.TimeoutExpired) as e:
                    report.errors.append(f"turn {turn + 1}: {e}")
                    failed = True
                else:
                    failed = False
                    if note is not None:
                        report.errors.append(f"turn {turn + 1}: {note}")
                entries = [r for r in server.requests() if r["path"] == _MESSAGES][seen:]
                seen += len(entries)
                for entry in entries:
                    request = metered(entry)
                    report.requests.append(request)
                    if request.status is None:
                        report.request_tokens.append(request.prompt)
                        report.request_turn.append(turn)
                if failed:
                    break
                report.rounds_per_turn.append(sum(1 for e in entries if is_main(e, interop.MODEL)))
                report.answers.append((prompt, text))
                if prompt in questions:  # the replies' calls, as the server logged them
                    report.reference_turns.append((prompt, [c for e in entries for c in e.get("calls", ())]))
                report.turn_ends.append(len(report.requests))
                if (turn + 1) % max(1, turns // 5) == 0:
                    print(
                        f"    {profile}/{setting.name}/{seed} turn {turn + 1:4}: "
                        f"{report.request_tokens[-1] if report.request_tokens else 0:>9,} tokens, "
                        f"{time.perf_counter() - started:6.1f} s",
                        file=sys.stderr,
                        flush=True,
                    )
        finally:
            driver.close()
        answered = [r for r in server.requests() if r["path"] == _MESSAGES and 200 <= r["status"] < 300]
    report.wall_s = time.perf_counter() - started
    report.main_requests = sum(1 for e in answered if is_main(e, interop.MODEL))
    score_facts(report, output_facts=True)
    score_references(report)
    row = report_row(
        profile,
        setting.name,
        setting.label,
        report,
        verbosity_scale=args.verbosity_scale,
        summary_fidelity=fidelity,
        summary_fact_budget=budget,
    )
    row["client"] = client
    # The log keeps no request's parts; the smallest main-loop request is the client's system
    # prompt and tools plus its first typed prompt (an upper bound on system + tools, by the prompt).
    mains = [metered(e).prompt for e in answered if is_main(e, interop.MODEL)]
    row["fixed_tokens"] = min(mains) if mains else None
    return row


FLEET_KIND = "peers:fleet_row"
"""The fleet unit kind of one client session: `fleet_row`, with `benchmarks/` on the workers' path."""


def unit_of(setting: Setting, seed: int, args: argparse.Namespace, fidelity: float = 1.0) -> Unit:
    """One session of the client at `setting`, the model's summaries at `fidelity`, as a fleet unit
    (the setting travels as JSON knobs)."""
    return Unit(
        kind=FLEET_KIND,
        profile=args.profile,
        strategy=setting.name,
        seed=seed,
        turns=args.turns,
        window=args.window,
        knobs=knobs(
            client=setting.client,
            env=dumps(setting.env, sort_keys=True).decode(),
            compaction=dumps(setting.compaction, sort_keys=True).decode(),
            turn_timeout=float(args.turn_timeout),
            verbosity_scale=float(args.verbosity_scale),
            summary_fidelity=float(fidelity),
            summary_fact_budget=int(getattr(args, "summary_fact_budget", FACT_BUDGET)),
        ),
    )


def fleet_row(unit: Unit, root: Path) -> dict[str, Any]:
    """The fleet's unit function: one client session's row, run in `root`."""
    setting = Setting(
        str(unit.knob("client", "")),
        env=loads(str(unit.knob("env", "{}"))),
        compaction=loads(str(unit.knob("compaction", "{}"))),
    )
    args = argparse.Namespace(
        window=unit.window,
        verbosity_scale=float(unit.knob("verbosity_scale", 1.0)),
        turn_timeout=float(unit.knob("turn_timeout", 600.0)),
        summary_fidelity=float(unit.knob("summary_fidelity", 1.0)),
        summary_fact_budget=int(unit.knob("summary_fact_budget", FACT_BUDGET)),
    )
    return run(setting, unit.profile, unit.seed, unit.turns, root, args)


def argument_parser() -> argparse.ArgumentParser:
    """The command line of `main` (the tests parse settings with it)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=sorted(CLIENTS), required=True)
    parser.add_argument("--profile", default="feature")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--seeds", default="7,8,9", help="comma-separated seeds; each is one session")
    parser.add_argument("--window", type=int, default=WINDOW, help="the server's context window")
    parser.add_argument("--turn-timeout", type=float, default=600.0, help="seconds one client turn may take")
    parser.add_argument(
        "--auto-compact-window",
        action="append",
        default=[],
        metavar="N[,N...]",
        help=f"claude-code: run at {AUTO_COMPACT_WINDOW}=N (tokens), one row `claude-code@<N/1000>k` "
        "per value; repeatable",
    )
    parser.add_argument(
        "--opencode-compaction",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE...]",
        help="opencode: run with these opencode.json compaction settings "
        f"({', '.join(OPENCODE_COMPACTION)}), one row `opencode@KEY=VALUE,...` per occurrence; repeatable",
    )
    parser.add_argument(
        "--autocompact-pct",
        action="append",
        default=[],
        metavar="P[,P...]",
        help="with --auto-compact-window, also set CLAUDE_AUTOCOMPACT_PCT_OVERRIDE (the share of the window "
        "at which Claude Code compacts) to each P; every (window, P) pair is its own row",
    )
    parser.add_argument(
        "--defaults-too", action="store_true", help="with a sweep option, also run the client at its defaults"
    )
    parser.add_argument(
        "--verbosity-scale",
        type=float,
        default=1.0,
        help="the simulated model's reply length, times its calibration (foldline serve --verbosity-scale)",
    )
    add_fidelity_options(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object per seed on stdout")
    add_fleet_options(parser)
    return parser


def main() -> None:
    parser = argument_parser()
    args = parser.parse_args()
    if not args.verbosity_scale >= 0:
        parser.error(f"--verbosity-scale must be 0 or more, not {args.verbosity_scale}")
    qs = checked_fidelity_options(parser, args)
    if args.auto_compact_window and args.client != "claude-code":
        parser.error("--auto-compact-window is Claude Code's setting: use it with --client claude-code")
    if args.opencode_compaction and args.client != "opencode":
        parser.error("--opencode-compaction is opencode's setting: use it with --client opencode")
    try:
        runs = settings(args)
    except ValueError as e:
        parser.error(str(e))
    try:
        interop.installed(CLIENTS[args.client][0])  # here first: no npm skips the client, not each unit
    except ClientUnavailableError as e:
        print(f"peers: skipped {args.client}: {e}", file=sys.stderr)
        sys.exit(UNAVAILABLE)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    units = [unit_of(setting, seed, args, q) for q in qs for setting in runs for seed in seeds]
    with tempfile.TemporaryDirectory() as tmp:
        rows, _ = run_units(units, args, args.results or os.path.join(tmp, "results"))
    if args.json:
        for row in rows:
            print(dumps(row).decode(), flush=True)
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
