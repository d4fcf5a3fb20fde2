"""Per-turn cost of request assembly next to serializing the request it produces.

For sessions of 200, 2,000 and 20,000 API messages (tool-heavy turns, streamed replies written one
block per entry, thinking, snip tags, cache_edits support), time what the next turn spends in
`build_request` (projection -> normalize -> cache breakpoints -> params) and compare it with
`orjson.dumps` of the body it produced, the floor any client pays to send it.
Target (issue "request-assembly"): at most 3x serialization, growing linearly with the session.
The `cold ms` column is the first build of a fresh assembler with nothing to start from (a session
resumed after a crash); `cold/dumps` is its ratio to serialization. The `resume ms` column is what a
session resumed after a clean close pays: the head its close left beside the transcript is checked
(the transcript's digest, here over the records written as a real JSONL file) and taken back
(`api.frozen_head.load_head`), then the first build normalizes only what follows it.
`resume/dumps` is its ratio to serialization, target (issue 17) <= 10x at 20K messages.
Every time is the best of several (`--repeat` turns, `--trials` cold and resumed builds): on a
shared machine the best is the least disturbed, and the ratios compare like with like.

Run: `.venv/bin/python benchmarks/pipeline_overhead.py [--repeat N]`
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import orjson

from foldline._json import encode_line
from foldline.api.frozen_head import load_head, save_head
from foldline.api.params import RequestAssembler, build_request
from foldline.config import Config
from foldline.providers.base import Capabilities
from foldline.timeline import AnyRecord, AssistantEntry, AssistantMessage, UserEntry, UserMessage

CAPS = Capabilities(name="local", supports_cache_edits=True, cache_edits_beta="cache-edits-2025-06-01")
TOOLS = [
    {"name": name, "description": f"The {name} tool.", "input_schema": {"type": "object"}}
    for name in ("Read", "Write", "Edit", "Bash", "Grep", "Glob", "Snip")
]
SYSTEM = ["You are a coding agent. " * 40, "Environment: linux, python 3.11."]
_OUTPUT = "def handler(event):\n    return event['body']\n" * 12


def _uid(n: int) -> str:
    return f"{n:08x}-5555-4000-8000-{n:012x}"


def session(messages: int) -> list[AnyRecord]:
    """A session whose next request has about `messages` messages: a typed prompt, then tool turns."""
    records: list[AnyRecord] = []
    n = 0

    def add_user(content: str | list[dict[str, object]]) -> None:
        nonlocal n
        n += 1
        records.append(
            UserEntry(
                uuid=_uid(n), timestamp="2026-01-01T00:00:00.000Z", message=UserMessage(content=content)
            )
        )

    add_user("Please refactor the request handlers and keep the tests green.")
    for turn in range(messages // 2):
        ids = [f"toolu_{turn:05d}_{k}" for k in range(2)]
        blocks = [
            {"type": "thinking", "thinking": f"Next I check step {turn}.", "signature": f"sig{turn:05d}" * 8},
            {"type": "text", "text": f"Reading the files for step {turn}."},
            *({"type": "tool_use", "id": t, "name": "Read", "input": {"path": f"src/{t}.py"}} for t in ids),
        ]
        for block in blocks:
            n += 1
            records.append(
                AssistantEntry(
                    uuid=_uid(n),
                    timestamp="2026-01-01T00:00:00.000Z",
                    message=AssistantMessage(id=f"msg_{turn:06d}", content=[block]),
                )
            )
        for t in ids:
            add_user([{"type": "tool_result", "tool_use_id": t, "content": _OUTPUT}])
    return records


def turn_boundaries(records: list[AnyRecord]) -> list[int]:
    """Record counts at which a request is due: after each batch of tool results (or the prompt)."""
    ends = [i + 1 for i, r in enumerate(records) if isinstance(r, UserEntry)]
    return [n for n, nxt in zip(ends, [*ends[1:], None], strict=True) if nxt != n + 1]


def resumed(records: list[AnyRecord], warm: RequestAssembler, config: Config, trials: int) -> float:
    """Best seconds from a saved head to the first request of a fresh assembler (see the docstring)."""
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        transcript, where = Path(tmp) / "session.jsonl", Path(tmp) / "session"
        transcript.write_bytes(b"".join(encode_line(r) for r in records))
        assert save_head(warm, transcript, where, len(records))
        for _ in range(trials):
            begin = time.perf_counter()
            fresh = RequestAssembler(config, SYSTEM, TOOLS, CAPS)
            assert load_head(fresh, transcript, where)
            plan = fresh.build(records)
            best = min(best, time.perf_counter() - begin)
            assert plan.body == build_request(records, config, SYSTEM, TOOLS, CAPS).body
    return best


def measure(size: int, repeat: int, trials: int) -> tuple[int, float, float, float, float, float]:
    """(messages, MB, best per-turn assemble s, best dumps s, best cold build s, best resumed build s)."""
    config = Config(thinking_budget_tokens=2048)
    records = session(size + 2 * repeat)
    due = turn_boundaries(records)
    start = next(i for i, n in enumerate(due) if n >= len(records) - 6 * repeat - 6)
    cold = float("inf")
    for _ in range(trials):
        assembler = RequestAssembler(config, SYSTEM, TOOLS, CAPS)
        begin = time.perf_counter()
        assembler.build(records[: due[start]])
        cold = min(cold, time.perf_counter() - begin)
    turns, dumps = [], []
    for n in due[start + 1 : start + 1 + repeat]:
        begin = time.perf_counter()
        plan = assembler.build(records[:n])
        turns.append(time.perf_counter() - begin)
        begin = time.perf_counter()
        data = orjson.dumps(plan.body)
        dumps.append(time.perf_counter() - begin)
    assert plan.body == build_request(records[:n], config, SYSTEM, TOOLS, CAPS).body
    messages = len(plan.body["messages"])
    resume = resumed(records[:n], assembler, config, trials)
    return messages, len(data) / 1e6, min(turns), min(dumps), cold, resume


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9, help="turns timed per session size")
    # As many cold builds as timed turns: the ratios set the best of N builds against the best of N
    # serializations, and with fewer builds than turns the build was the likelier to be disturbed.
    parser.add_argument("--trials", type=int, default=9, help="cold and resumed builds timed per size")
    args = parser.parse_args()
    print(
        f"{'messages':>9} {'body MB':>8} {'turn ms':>8} {'dumps ms':>9} {'ratio':>6} {'cold ms':>8} "
        f"{'cold/dumps':>10} {'resume ms':>9} {'resume/dumps':>12}"
    )
    for size in (200, 2_000, 20_000):
        messages, megabytes, turn, dumps, cold, resume = measure(size, args.repeat, args.trials)
        print(
            f"{messages:>9} {megabytes:>8.2f} {turn * 1e3:>8.2f} {dumps * 1e3:>9.2f} "
            f"{turn / dumps:>6.2f} {cold * 1e3:>8.1f} {cold / dumps:>10.1f} {resume * 1e3:>9.1f} "
            f"{resume / dumps:>12.1f}"
        )


if __name__ == "__main__":
    main()
