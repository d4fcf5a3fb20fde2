"""Server milliseconds per `/v1/messages` request at 10K, 100K, 180K and 1M prompt tokens.

A coding session is grown turn by turn (assistant text and one to three tool calls, user tool
results of mixed sizes from a one-line `Edit` acknowledgement to a 12K-token file, now and then a
new user prompt), and every request is marked by foldline's own `add_cache_breakpoints` (tools and
system breakpoints, the rolling message breakpoint, `cache_reference` names on tool results), as the
engine sends it. For each size, a fresh server (`create_app` under uvicorn via `run_server`)
receives the session's requests around that size in order, over real HTTP with keep-alive: the
first `--warm` ones warm the server (its prompt cache and memos), the next `--repeat` are timed,
each one turn longer than the one before, so each reads the previous turn's cache entry.

Columns: `server ms`, from the first ASGI event to the last byte of the response, measured by a
timing middleware around the app; `e2e ms`, the client's send-to-response time (pre-encoded bytes
over `http.client`, so no SDK cost); `cold ms`, the first request a fresh server sees at that size;
then the median time inside each pipeline step (parse, validate, flatten and count, cache_edits,
prompt cache, backend and render), found by wrapping the server module's functions with timers.

`--baseline REF` also runs the same measurement on the `src/` of git revision REF (in a
subprocess) and prints both side by side with the ratio before / after.

Run: `PYTHONPATH=src .venv/bin/python benchmarks/server_speed.py [--sizes 10000,100000,180000,1000000]
[--repeat N] [--warm N] [--baseline REF]`. Another benchmark can `from server_speed import measure`
and print `measure([...])` rows itself.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import orjson

from foldline.api.cache import PreparedMessages, add_cache_breakpoints
from foldline.server import app as server_app
from foldline.server.app import create_app
from foldline.server.config import ServerConfig
from foldline.server.testing import run_server
from foldline.server.tokenizer import count_block, count_tool

MODEL = "claude-sonnet-4-5"
BETA = "cache-edits-2025-06-01"
DEFAULT_SIZES = (10_000, 100_000, 180_000, 1_000_000)

_WORDS = (
    "self value result error config request response handler test data path line index item key "
    "name cache block token count message session client server parse render check update state"
).split()


def _code_line(rng: random.Random, n: int) -> str:
    indent = "    " * rng.randint(0, 3)
    a, b, c = rng.choice(_WORDS), rng.choice(_WORDS), rng.choice(_WORDS)
    forms = (
        f"{indent}{a}_{n} = {b}.{c}({rng.choice(_WORDS)}, {rng.randint(0, 999)})",
        f"{indent}if {a} is not None and {b}[{n}] > {c}:",
        f"{indent}return {{'{a}': {b}, '{c}': {n}}}",
        f"{indent}def {a}_{b}(self, {c}: int = {n}) -> str:",
        f"{indent}# {a} the {b} before the {c} of line {n}",
    )
    return rng.choice(forms)


def _file_text(rng: random.Random, path: str, lines: int) -> str:
    body = "\n".join(f"{i:6d}\t{_code_line(rng, i)}" for i in range(1, lines + 1))
    return f"{path}\n{body}"


def _tool_result(rng: random.Random, name: str, path: str) -> str:
    if name == "Edit":
        return f"The file {path} has been updated."
    if name == "Bash":
        return "\n".join(f"{path}:{i}: {_code_line(rng, i)}" for i in range(rng.randint(3, 120)))
    # Read / Grep: mostly small, sometimes a whole (large) file.
    lines = min(1200, int(rng.lognormvariate(3.8, 1.1)) + 5)
    return _file_text(rng, path, lines)


TOOLS: list[dict[str, Any]] = [
    {
        "name": name,
        "description": f"The {name} tool. " + " ".join(_WORDS) * 2,
        "input_schema": {
            "type": "object",
            "properties": {
                f"{p}_{name.lower()}": {"type": "string", "description": p * 3} for p in _WORDS[:8]
            },
            "required": [f"{_WORDS[0]}_{name.lower()}"],
        },
    }
    for name in ("Read", "Write", "Edit", "Bash", "Grep", "Glob", "Task", "WebFetch")
]
SYSTEM: list[dict[str, Any]] = [
    {"type": "text", "text": "You are a coding agent working in a repository. " * 30},
    {"type": "text", "text": "Environment: linux, python 3.11, git. " + "Follow the style guide. " * 40},
]


@dataclass
class Session:
    """A growing coding session: its messages, and the token count after each request-sized step."""

    seed: int = 1
    messages: list[dict[str, Any]] = field(default_factory=list)
    tokens: int = 0
    steps: list[tuple[int, int]] = field(default_factory=list)
    """(number of messages, prompt tokens) of each request the session sends, in order."""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.tokens = sum(count_tool(t) for t in TOOLS) + sum(count_block(b) for b in SYSTEM)
        self._add(
            "user", [{"type": "text", "text": "Please refactor the request handlers; keep tests green."}]
        )
        self.steps.append((len(self.messages), self.tokens))
        self._calls = 0

    def _add(self, role: str, content: list[dict[str, Any]]) -> None:
        self.messages.append({"role": role, "content": content})
        self.tokens += sum(count_block(b) for b in content)

    def grow_to(self, tokens: int) -> None:
        """Append turns until the last request has at least `tokens` tokens."""
        rng = self.rng
        while self.tokens < tokens:
            if rng.random() < 0.07:  # the model answers, the user asks something new
                self._add("assistant", [{"type": "text", "text": f"Done with step {self._calls}. " * 8}])
                self._add("user", [{"type": "text", "text": f"Now look at part {self._calls} as well."}])
                self.steps.append((len(self.messages), self.tokens))
                continue
            calls = []
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                self._calls += 1
                name = rng.choice(("Read", "Read", "Read", "Grep", "Bash", "Edit", "Edit"))
                path = f"src/pkg/module_{self._calls}.py"
                calls.append((f"toolu_{self._calls:06d}", name, path))
            text = (
                [{"type": "text", "text": "Let me look at that. " * rng.randint(1, 6)}]
                if rng.random() < 0.5
                else []
            )
            uses = [{"type": "tool_use", "id": i, "name": n, "input": {"file_path": p}} for i, n, p in calls]
            self._add("assistant", [*text, *uses])
            results = [
                {"type": "tool_result", "tool_use_id": i, "content": _tool_result(rng, n, p)}
                for i, n, p in calls
            ]
            self._add("user", results)
            self.steps.append((len(self.messages), self.tokens))

    def body(self, step: int, memo: PreparedMessages) -> dict[str, Any]:
        """The request body of step `step` as foldline marks it."""
        count = self.steps[step][0]
        marked = add_cache_breakpoints(
            self.messages[:count],  # type: ignore[arg-type]
            system=SYSTEM,
            tools=TOOLS,
            supports_cache_edits=True,
            memo=memo,
        )
        return {
            "model": MODEL,
            "max_tokens": 8192,
            "system": marked.system,
            "tools": marked.tools,
            "messages": marked.messages,
        }


@dataclass
class Row:
    """One size's measurement."""

    target: int
    tokens: int
    """Prompt tokens of the last timed request."""
    megabytes: float
    blocks: int
    server_ms: float
    e2e_ms: float
    cold_ms: float
    steps_ms: dict[str, float]


class _Timer:
    """ASGI middleware: seconds from the first event of each HTTP request to its last body byte."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.times: list[float] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def timed_send(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.times.append(time.perf_counter() - start)

        await self.app(scope, receive, timed_send)


_STEPS: dict[str, tuple[str, ...]] = {
    "parse": ("loads",),
    "validate": ("validate_request", "check_window"),
    "flatten": ("flatten",),
    "edits": ("cache_edits_deletions",),
    "cache": ("PromptCache.apply",),
    "render": ("ScriptedBackend.reply", "backend_messages", "_plain_response"),
}
"""Pipeline step -> names in `foldline.server.app` (or `Class.method` of classes it imports) to time.
A name missing from the server under test is skipped, so old and new servers time alike."""


@contextmanager
def _step_timers() -> Iterator[dict[str, list[float]]]:
    """Wrap the server module's step functions with timers; yields step -> seconds per call."""
    spent: dict[str, list[float]] = {step: [] for step in _STEPS}
    undo: list[Callable[[], None]] = []

    def wrap(owner: Any, attr: str, step: str) -> None:
        original = getattr(owner, attr)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[step].append(time.perf_counter() - start)

        setattr(owner, attr, timed)
        undo.append(lambda: setattr(owner, attr, original))

    for step, names in _STEPS.items():
        for name in names:
            owner_name, _, attr = name.rpartition(".")
            owner = getattr(server_app, owner_name, None) if owner_name else server_app
            if owner is not None and callable(getattr(owner, attr, None)):
                wrap(owner, attr, step)
    try:
        yield spent
    finally:
        for restore in reversed(undo):
            restore()


def _post(conn: http.client.HTTPConnection, data: bytes) -> tuple[float, dict[str, Any]]:
    headers = {"content-type": "application/json", "anthropic-beta": BETA, "anthropic-version": "2023-06-01"}
    start = time.perf_counter()
    conn.request("POST", "/v1/messages", body=data, headers=headers)
    response = conn.getresponse()
    payload = response.read()
    elapsed = time.perf_counter() - start
    if response.status != 200:
        raise RuntimeError(f"server answered {response.status}: {payload[:300]!r}")
    return elapsed, orjson.loads(payload)


def measure_one(session: Session, target: int, *, warm: int = 3, repeat: int = 5) -> Row:
    """Time the requests of `session` around `target` tokens against a fresh server."""
    session.grow_to(target)
    first = next(i for i, (_, tokens) in enumerate(session.steps) if tokens >= target)
    session.grow_to(session.steps[-1][1] + 1)
    while len(session.steps) < first + repeat:
        session.grow_to(session.steps[-1][1] + 1)
    start = max(0, first - warm)
    memo = PreparedMessages()
    bodies = [orjson.dumps(session.body(step, memo)) for step in range(start, first + repeat)]
    app = _Timer(create_app(ServerConfig(context_window=max(200_000, 2 * target))))
    with run_server(app) as url, _step_timers() as spent:
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        conn.connect()
        # http.client writes headers and body separately: without this, delayed ACKs add 40 ms.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        e2e: list[float] = []
        for data in bodies:
            seconds, reply = _post(conn, data)
            e2e.append(seconds)
            for values in spent.values():
                values.append(-1.0)  # a request boundary in each step's list
        conn.close()
    timed = len(bodies) - repeat
    usage = reply["usage"]
    tokens = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert usage["cache_read_input_tokens"] > 0, "the timed requests should read the previous turn's cache"
    steps_ms = {step: 1e3 * statistics.median(_per_request(values)[timed:]) for step, values in spent.items()}
    last = orjson.loads(bodies[-1])
    return Row(
        target=target,
        tokens=tokens,
        megabytes=len(bodies[-1]) / 1e6,
        blocks=sum(len(m["content"]) for m in last["messages"]),
        server_ms=1e3 * statistics.median(app.times[timed:]),
        e2e_ms=1e3 * statistics.median(e2e[timed:]),
        cold_ms=1e3 * app.times[0],
        steps_ms=steps_ms,
    )


def _per_request(values: list[float]) -> list[float]:
    """Sum each request's calls (requests are separated by -1.0 markers)."""
    totals: list[float] = []
    current = 0.0
    for value in values:
        if value < 0:
            totals.append(current)
            current = 0.0
        else:
            current += value
    return totals


def measure(
    sizes: tuple[int, ...] | list[int] = DEFAULT_SIZES, *, warm: int = 3, repeat: int = 5
) -> list[Row]:
    """One `Row` per size (prompt tokens), all from one growing session."""
    session = Session()
    return [measure_one(session, size, warm=warm, repeat=repeat) for size in sorted(sizes)]


def format_rows(rows: list[Row], baseline: list[Row] | None = None) -> str:
    """The table `main` prints; with `baseline`, its server ms and the before / after ratio too."""
    steps = list(rows[0].steps_ms) if rows else []
    head = (
        f"{'target':>9} {'tokens':>9} {'MB':>6} {'blocks':>6} {'server ms':>9} {'e2e ms':>8} {'cold ms':>8}"
    )
    if baseline:
        head += f" {'before ms':>9} {'ratio':>6}"
    lines = [head + "  " + " ".join(f"{s:>8}" for s in steps)]
    before = {row.target: row for row in baseline or ()}
    for row in rows:
        line = (
            f"{row.target:>9} {row.tokens:>9} {row.megabytes:>6.2f} {row.blocks:>6} {row.server_ms:>9.2f} "
            f"{row.e2e_ms:>8.2f} {row.cold_ms:>8.1f}"
        )
        if baseline:
            old = before.get(row.target)
            line += (
                f" {old.server_ms:>9.2f} {old.server_ms / row.server_ms:>6.1f}"
                if old
                else f" {'-':>9} {'-':>6}"
            )
        lines.append(line + "  " + " ".join(f"{row.steps_ms[s]:>8.2f}" for s in steps))
    if baseline:
        lines.append("")
        lines.append("before, per step (ms): " + ", ".join(s for s in steps))
        for row in baseline:
            lines.append(f"{row.target:>9} " + " ".join(f"{row.steps_ms.get(s, 0.0):>8.2f}" for s in steps))
    return "\n".join(lines)


def _baseline(ref: str, sizes: list[int], warm: int, repeat: int) -> list[Row]:
    """Run this script on the `src/` of git revision `ref` in a subprocess; its rows."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(["git", "archive", ref, "src"], cwd=root, capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src")}
        args = ["--json", "--sizes", ",".join(map(str, sizes)), "--warm", str(warm), "--repeat", str(repeat)]
        out = subprocess.run(
            [sys.executable, __file__, *args], env=env, capture_output=True, check=True, text=True
        )
    return [Row(**row) for row in json.loads(out.stdout)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="prompt tokens, comma-separated"
    )
    parser.add_argument("--warm", type=int, default=3, help="untimed requests before the timed ones")
    parser.add_argument("--repeat", type=int, default=5, help="timed requests per size")
    parser.add_argument("--baseline", metavar="REF", help="also time the server of git revision REF")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON (for --baseline)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    baseline = _baseline(args.baseline, sizes, args.warm, args.repeat) if args.baseline else None
    rows = measure(sizes, warm=args.warm, repeat=args.repeat)
    if args.json:
        print(json.dumps([asdict(row) for row in rows]))
        return
    print(format_rows(rows, baseline))


if __name__ == "__main__":
    main()
