"""Resume throughput: `load_transcript` next to the fastest raw JSON decode of the same file.

Builds a realistic transcript (user prompts, assistant turns with thinking/text/tool_use, tool
results from a few bytes to ~200 KB) in a temporary directory, then times, in one run:

- raw decode: read the file, split on `\\n`, decode every line with orjson and with msgspec
  (untyped); the faster of the two is the baseline;
- `load_transcript`: the same file decoded into typed records, damage checks included;
- `TranscriptWriter.resume`: lock, load, open for appending.

Target: resume at least 0.8x the raw decode throughput (raised from 0.5x by issue 17).

    python benchmarks/resume.py            # ~100 MB
    python benchmarks/resume.py --mb 10    # a quicker run
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec
import orjson

from foldline.timeline import AssistantEntry, AssistantMessage, Record, Usage, UserEntry, UserMessage
from foldline.transcript import TranscriptWriter, load_transcript

_WORDS = (
    "the file function test error value return import class self data path line result config "
    "update check build module request response token cache session tool output"
).split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(_WORDS, k=words))


def _turn(rng: random.Random, n: int, parent: str | None) -> list[Record]:
    """One user prompt, an assistant reply calling a tool, its result, and a closing reply."""
    ts = "2026-01-01T00:00:00.000Z"
    ids = [f"{n:08d}-{i}" for i in range(4)]
    tool_id = f"toolu_{n:08d}"
    # Real Claude Code lines: median ~1 KB, 90th percentile ~4 KB, a few tool results of 100s of KB.
    sizes, weights = [40, 300, 1_500, 4_000, 12_000, 60_000, 200_000], [20, 25, 20, 15, 10, 7, 3]
    result_size = rng.choices(sizes, weights)[0]
    tool_use = {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": _text(rng, 8)}}
    thinking = {"type": "thinking", "thinking": _text(rng, rng.randint(20, 400)), "signature": "c2ln" * 40}
    usage = Usage(input_tokens=rng.randint(1, 9000), output_tokens=rng.randint(1, 2000))
    result = {"type": "tool_result", "tool_use_id": tool_id, "content": _text(rng, result_size // 6)}
    return [
        UserEntry(uuid=ids[0], parent_uuid=parent, timestamp=ts, message=UserMessage(content=_text(rng, 30))),
        AssistantEntry(
            uuid=ids[1],
            parent_uuid=ids[0],
            timestamp=ts,
            message=AssistantMessage(
                id=f"msg_{n}a",
                model="claude-sonnet-4-5",
                content=[thinking, {"type": "text", "text": _text(rng, 60)}, tool_use],
                stop_reason="tool_use",
                usage=usage,
            ),
        ),
        UserEntry(uuid=ids[2], parent_uuid=ids[1], timestamp=ts, message=UserMessage(content=[result])),
        AssistantEntry(
            uuid=ids[3],
            parent_uuid=ids[2],
            timestamp=ts,
            message=AssistantMessage(
                id=f"msg_{n}b", content=[{"type": "text", "text": _text(rng, 150)}], usage=usage
            ),
        ),
    ]


def build(path: Path, megabytes: float) -> int:
    """Write a transcript of about `megabytes` MB; return its record count."""
    rng = random.Random(42)
    target, records, parent = megabytes * 1_000_000, 0, None
    with TranscriptWriter.create(path, session_id="bench", cwd="/bench", fsync="never") as writer:
        n = 0
        while writer.size < target:
            for record in _turn(rng, n, parent):
                writer.append(record)
                records += 1
            parent, n = f"{n:08d}-3", n + 1
    return records


def _raw(decode: Callable[[bytes], object]) -> Callable[[Path], int]:
    def run(path: Path) -> int:
        count = 0
        for line in path.read_bytes().split(b"\n"):
            if line:
                decode(line)
                count += 1
        return count

    return run


def _resume(path: Path) -> int:
    writer, loaded = TranscriptWriter.resume(path, fsync="never")
    writer.close()
    return len(loaded.records)


def best_of(runs: int, fns: dict[str, Callable[[Path], object]], path: Path) -> dict[str, float]:
    """The fastest of `runs` timings of each `fn(path)`, in seconds, taken in interleaved rounds.

    One round times every function once, so a slow spell of a shared machine falls on all of them
    alike instead of on whichever was measured during it.
    """
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(runs):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn(path)
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mb", type=float, default=100.0, help="transcript size in MB (default 100)")
    parser.add_argument("--runs", type=int, default=5, help="timings per measurement; the best counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        records = build(path, args.mb)
        size_mb = path.stat().st_size / 1_000_000
        load_records = len(load_transcript(path).records)
        assert load_records == records, (load_records, records)
        fns: dict[str, Callable[[Path], object]] = {
            "raw orjson.loads per line": _raw(orjson.loads),
            "raw msgspec.json.decode per line": _raw(msgspec.json.decode),
            "load_transcript (typed records)": load_transcript,
            "TranscriptWriter.resume": _resume,
        }
        rows = best_of(args.runs, fns, path)
    baseline = min(rows["raw orjson.loads per line"], rows["raw msgspec.json.decode per line"])
    print(f"transcript: {size_mb:.1f} MB, {records} records, best of {args.runs}")
    print(f"{'measurement':36} {'seconds':>8} {'MB/s':>8} {'vs raw':>7}")
    for name, seconds in rows.items():
        print(f"{name:36} {seconds:8.3f} {size_mb / seconds:8.0f} {baseline / seconds:6.2f}x")
    ratio = baseline / rows["load_transcript (typed records)"]
    verdict = "OK" if ratio >= 0.8 else "BELOW TARGET"
    print(f"resume / fastest raw decode = {ratio:.2f}x (target >= 0.8x): {verdict}")


if __name__ == "__main__":
    main()
