"""Peers: Claude Code and opencode themselves, as rows of the economics table.

Each run generates the profile's workspace (`profiles.generate_workspace`, the repository the
economics sessions work in), starts `foldline serve --backend simulated` with the same seed,
profile and window as `benchmarks/economics.py` (`--seed S --profile P --context-window 200000`,
plus a request log), and types the same simulated user's prompts
(`profiles.user_prompts(..., output_facts=True)`, the economics sessions' prompts and planted
facts) into the real client through its own command line: `claude -p PROMPT --output-format json`
then `--continue`, or `opencode run --format json` then `--continue` with the prompt on stdin
(`opencode run` would wrap a prompt argument in double quotes; see `foldline.interop.OpenCode`).
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

`--json` prints one object per (client, seed) with the keys of economics' rows (`report_row`), so
`benchmarks/report.py` aggregates them beside the strategies; without it, the table.

Run: `PYTHONPATH=src .venv/bin/python benchmarks/peers.py --client claude-code --profile feature
[--turns 20] [--seeds 7,8,9] [--json]`
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from economics import WINDOW, print_table, report_row
from foldline import interop
from foldline._json import dumps
from foldline.config import Config
from foldline.errors import ClientRunError, ClientUnavailableError
from foldline.server.simulated.profiles import generate_workspace, user_prompts
from foldline.simulation import MeteredRequest, SimulationReport, score_facts

CLIENTS = {
    "claude-code": (interop.CLAUDE_CODE, "Claude Code 2.1.328, real client, its own compaction"),
    "opencode": (interop.OPENCODE, "opencode 1.18.33, real client, its own prune and compaction"),
}
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


class Driver:
    """One client's session: `turn` types a prompt and returns the answer's text."""

    def __init__(self, name: str, binary: Path, root: Path, url: str, turn_timeout: float) -> None:
        self.name = name
        if name == "claude-code":
            self.claude = interop.ClaudeCode(binary, root, url, turn_timeout=turn_timeout)
            self.claude.prepare()
        else:
            self.opencode = interop.OpenCode(binary, root, url, turn_timeout=turn_timeout)
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
        found = self.opencode.turn(prompt)
        errors = [e for e in found if e.get("type") == "error"]
        failed = bool(errors) or self.opencode.exit_status != 0
        if not interop.finished(found):
            if failed:
                raise ClientRunError(f"opencode did not finish its reply: {dumps(errors[:1]).decode()[:300]}")
            # opencode 1.18 leaves its loop without a word, exit 0, when a reply stops at the
            # context window (`model_context_window_exceeded`): the turn has no answer, and the user
            # types the next prompt, as one would (its next request compacts).
            return interop.answer(found), "ended without an answer (exit 0): a reply stopped at the window"
        if failed:
            # The session goes on, as a user's would: the refusal is counted from the server's log.
            note = f"exited {self.opencode.exit_status} after answering: {dumps(errors[:1]).decode()[:200]}"
            return interop.answer(found), note
        return interop.answer(found), None


def run(
    client: str, profile: str, seed: int, turns: int, root: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """One session of `client` on `profile`/`seed`: the economics row.

    Raises:
        ClientUnavailableError: the client cannot be installed here.
    """
    package, label = CLIENTS[client]
    binary = interop.installed(package)
    root.mkdir(parents=True, exist_ok=True)
    generate_workspace(root / "ws", seed)
    report = SimulationReport(
        profile=profile, seed=seed, turns_planned=turns, blocking_limit=Config().blocking_limit
    )
    started = time.perf_counter()
    window = ("--context-window", str(args.window))
    with interop.serve(root, "--seed", str(seed), "--profile", profile, *window) as server:
        driver = Driver(client, binary, root, server.url, args.turn_timeout)
        seen = 0
        for turn, prompt in enumerate(user_prompts(profile, turns, seed, output_facts=True)):
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
            if (turn + 1) % max(1, turns // 5) == 0:
                print(
                    f"    {profile}/{client}/{seed} turn {turn + 1:4}: "
                    f"{report.request_tokens[-1] if report.request_tokens else 0:>9,} tokens, "
                    f"{time.perf_counter() - started:6.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
        answered = [r for r in server.requests() if r["path"] == _MESSAGES and 200 <= r["status"] < 300]
    report.wall_s = time.perf_counter() - started
    report.main_requests = sum(1 for e in answered if is_main(e, interop.MODEL))
    score_facts(report, output_facts=True)
    return report_row(profile, client, label, report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client", choices=sorted(CLIENTS), required=True)
    parser.add_argument("--profile", default="feature")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--seeds", default="7,8,9", help="comma-separated seeds; each is one session")
    parser.add_argument("--window", type=int, default=WINDOW, help="the server's context window")
    parser.add_argument("--turn-timeout", type=float, default=600.0, help="seconds one client turn may take")
    parser.add_argument("--json", action="store_true", help="one JSON object per seed on stdout")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (int(s) for s in args.seeds.split(",") if s):
            print(
                f"== {args.profile} / {args.client}, seed {seed}, {args.turns} turns",
                file=sys.stderr,
                flush=True,
            )
            try:
                row = run(args.client, args.profile, seed, args.turns, Path(tmp) / str(seed), args)
            except ClientUnavailableError as e:
                print(f"peers: skipped {args.client}: {e}", file=sys.stderr)
                sys.exit(UNAVAILABLE)
            rows.append(row)
            print(
                f"   {args.profile}/{args.client}/{seed}: ${row['cost_usd']:.2f}, read "
                f"{row['cache_read_share']:.1%}, 400s {row['http_400']}, facts "
                f"{row['facts_retained']}/{row['facts_asked']}, turns {row['turns_completed']}, "
                f"{row['wall_s']} s",
                file=sys.stderr,
                flush=True,
            )
            if args.json:
                print(dumps(row).decode(), flush=True)
    if not args.json:
        print_table(rows)


if __name__ == "__main__":
    main()
