"""A real session: `foldline chat` against SmolLM2-135M-Instruct on its own 8K window.

Everything is the shipped path: `foldline serve --backend transformers --model DIR` in one
subprocess (the model answers every request, compaction summaries included), `foldline chat` in
another, typing `--turns` prompts into its REPL. The chat learns the window (8,192) and output
limit from the server (`GET /v1/models/{id}`), scales every threshold to it, and keeps the model's
free-form summaries (`--summary-format free`: a 135M model does not write the requested sections).
The prompts ask for file reads and commands, so the model's tool calls run through the real tools;
every other prompt pastes a log into the prompt line, so the context passes the compaction
thresholds within the session whether or not the model manages its tool calls (a 135M model
mostly does not).

Afterwards the transcript and the server's access log are read back: turns, tool calls (and how
many were errors), compaction records with their summaries, HTTP statuses. Run:

    OMP_NUM_THREADS=1 nice python benchmarks/real_session.py --turns 10 --max-output-tokens 96

The model directory is fetched and converted on first use (`foldline model fetch`), into
`--models-dir` (default: the user cache folder).
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
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _pasted(name: str, count: int) -> str:
    """A log the user pastes into one prompt line (about 13 SmolLM2 tokens per entry): the context
    grows by what the user types, whether or not the model manages a tool call."""
    return f"Here is the {name} log: " + " ".join(
        f"[{name} {i}] step {i} finished in {i % 7 + 1} s;" for i in range(count)
    )


PROMPTS = (
    "Read the file notes.txt",
    _pasted("build", 90) + " Did the build pass?",
    "Run the command `wc -l notes.txt todo.txt` with Bash",
    _pasted("deploy", 90) + " How long did step 3 take?",
    "What is the name of the project?",
    _pasted("test", 90) + " Summarize the test log.",
    "Run the command `ls` with Bash",
    _pasted("release", 90) + " Which step was last?",
    "Which database does the project use?",
    "Read the file todo.txt",
)
"""One prompt per turn, cycled when --turns is larger."""

MODEL_NAME = "smollm2-135m-instruct"
FOLDLINE = (sys.executable, "-c", "from foldline.cli import main; main()")


def _lines(prefix: str, count: int) -> str:
    """About 16 SmolLM2 tokens per line: files of a few thousand tokens fill the 8K window fast."""
    return "".join(f"{prefix} {i}: the nightly job finished step {i} without errors.\n" for i in range(count))


WORKSPACE_FILES = {
    "notes.txt": "Project Basket: a web shop.\nThe database is PostgreSQL 15 on port 5433.\n"
    "The deploy key is in vault.\n" + _lines("note", 120),
    "todo.txt": "1. Fix the tax rate in cart.py (0.2 should be 0.25).\n2. Add a test for checkout.\n"
    + _lines("todo", 120),
    "server.log": _lines("log", 150),
    "config.txt": "port = 8080\nworkers = 4\ndatabase = postgresql://localhost:5433/basket\n"
    + _lines("cfg", 120),
    "changelog.txt": "v1.2: checkout rewritten.\nv1.1: cart totals fixed.\n" + _lines("change", 120),
}


@dataclass
class SessionReport:
    """What the transcript and the server log say about the session."""

    turns: int = 0
    requests: Counter[int] = field(default_factory=Counter)
    """HTTP status -> how many `POST /v1/messages` got it."""
    counts: Counter[int] = field(default_factory=Counter)
    """The same for `POST /v1/messages/count_tokens`."""
    tool_calls: Counter[str] = field(default_factory=Counter)
    tool_errors: int = 0
    compactions: list[dict[str, Any]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    seconds: float = 0.0


def start_server(
    model_dir: Path, log: Path, window: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """`foldline serve --backend transformers` on a free port; returns the process and its URL.

    `window` launches it with a smaller context window than the model's own (`--context-window`).
    """
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    command = [*FOLDLINE, "serve", "--backend", "transformers", "--model", str(model_dir), "--port", "0"]
    if window is not None:
        command += ["--context-window", str(window)]
    with log.open("wb") as handle:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(
            command,
            stdout=handle,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = re.search(r"on (http://127\.0\.0\.1:\d+)", log.read_text(errors="replace"))
        if found and "startup complete" in log.read_text(errors="replace"):
            return process, found.group(1)
        if process.poll() is not None:
            raise RuntimeError(f"foldline serve exited:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    process.kill()
    raise RuntimeError("foldline serve did not start in 10 minutes")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    """Stop the server; one still inside a generation (a cancelled fork's) is killed after 30 s."""
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def run_chat(
    base_url: str,
    workspace: Path,
    sessions: Path,
    prompts: list[str],
    max_output: int,
    max_rounds: int,
    timeout: float,
) -> str:
    """Type `prompts` into `foldline chat`'s REPL; returns what it printed."""
    command = [
        *FOLDLINE, "chat", "--repl", "--base-url", base_url, "--model", MODEL_NAME,
        "--max-output-tokens", str(max_output), "--summary-format", "free", "--max-turns", str(max_rounds),
        "--permission-mode", "bypassPermissions", "--workspace", str(workspace),
        "--sessions-dir", str(sessions),
    ]  # fmt: skip
    done = subprocess.run(
        command,
        input="\n".join(prompts) + "\n",
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "120", "ANTHROPIC_API_KEY": "local"},
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"foldline chat failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout + done.stderr


def read_back(sessions: Path, server_log: Path, prompts: list[str]) -> SessionReport:
    """The session's transcript and the server's access log, summarised."""
    report = SessionReport()
    transcripts = sorted(sessions.rglob("*.jsonl"))
    assert transcripts, f"no transcript under {sessions}"
    typed = set(prompts)
    for line in transcripts[0].read_text().splitlines():
        record = json.loads(line)
        kind = record.get("kind")
        text = record.get("message", {}).get("content")
        if kind == "user" and isinstance(text, str) and text in typed:
            report.turns += 1
        content = record.get("message", {}).get("content")
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "tool_use":
                report.tool_calls[block["name"]] += 1
            elif block.get("type") == "tool_result" and block.get("is_error"):
                report.tool_errors += 1
            elif block.get("type") == "text" and kind == "assistant":
                report.answers.append(block["text"])
        if kind in ("collapse_commit", "compact_boundary"):
            report.compactions.append(record)
        if kind == "user" and record.get("is_compact_summary"):
            report.compactions.append({"kind": "compact_summary", "summary": record["message"]["content"]})
    log = server_log.read_text(errors="replace")
    for status in re.findall(r'"POST /v1/messages(?:\?[^" ]*)? HTTP/[\d.]+" (\d{3})', log):
        report.requests[int(status)] += 1
    # count_tokens answers a prompt over the window with a 400 whose number is the count: foldline
    # asks near the limit, by design; those are not refused requests.
    for status in re.findall(r'"POST /v1/messages/count_tokens[^"]*" (\d{3})', log):
        report.counts[int(status)] += 1
    return report


def _print(report: SessionReport, root: Path) -> None:
    print(f"session under {root}: {report.turns} turns in {report.seconds:.0f} s")
    print(f"HTTP statuses of POST /v1/messages: {dict(sorted(report.requests.items()))}")
    print(f"HTTP statuses of POST /v1/messages/count_tokens: {dict(sorted(report.counts.items()))}")
    print(f"tool calls: {dict(report.tool_calls)} ({report.tool_errors} error results)")
    print(f"compaction records: {len(report.compactions)}")
    for record in report.compactions:
        summary = str(record.get("summary", ""))
        print(
            f"  {record['kind']}: tokens {record.get('tokens_before', '?')} -> "
            f"{record.get('tokens_after', '?')}; summary: {summary[:300]!r}"
        )
    print("chat output (tail):")
    chat = root / "chat.txt"
    print(chat.read_text()[-4000:] if chat.exists() else "(no chat.txt)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--max-output-tokens", type=int, default=96)
    parser.add_argument("--max-rounds", type=int, default=2, help="Model rounds per turn (--max-turns).")
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--keep", type=Path, default=None, help="Keep the workspace, sessions and logs here.")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument(
        "--read", type=Path, default=None, help="Only report on a --keep folder of a past run."
    )
    args = parser.parse_args(argv)
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(args.turns)]
    if args.read is not None:
        _print(read_back(args.read / "sessions", args.read / "server.log", prompts), args.read)
        return 0

    import torch

    from foldline.server.model.fetch import fetch_model

    torch.set_num_threads(1)
    model_dir = fetch_model(models_dir=args.models_dir)
    root = args.keep or Path(tempfile.mkdtemp(prefix="foldline-real-session-"))
    workspace, sessions = root / "workspace", root / "sessions"
    workspace.mkdir(parents=True, exist_ok=True)
    for name, text in WORKSPACE_FILES.items():
        (workspace / name).write_text(text)
    server_log = root / "server.log"
    started = time.monotonic()
    server, base_url = start_server(model_dir, server_log)
    try:
        printed = run_chat(
            base_url, workspace, sessions, prompts, args.max_output_tokens, args.max_rounds, args.timeout
        )
        (root / "chat.txt").write_text(printed)
    finally:
        stop_server(server)
    report = read_back(sessions, server_log, prompts)
    report.seconds = time.monotonic() - started
    _print(report, root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
