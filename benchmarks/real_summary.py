"""A summary judge no one here wrote: a real model summarizes simulated sessions under each strategy's prompt.

Snapshots: `--snapshots` simulated sessions (`foldline.testing.SimulatedProvider`, the `--profile`
user, seeds from 0 up, a seed whose text passes `--max-snapshot-tokens` skipped, with the planted
facts of `profiles.planted_facts(output_facts=True)`: some the user states, some only a script's
output states), played in-process through the real engine and tools for `--turns` turns, then
written out as a plain-text conversation (tool results cut to their head and tail so a snapshot
fits SmolLM2's 8K window). A fact counts for a snapshot only if its
value is in that text.

The judge: SmolLM2-135M-Instruct (`foldline model fetch`) through `TransformersBackend`, greedy.
For each snapshot and each summary prompt it writes a summary of at most `--summary-tokens`
tokens; then, given only that summary, it is asked each fact's question ("What is the X?"), and the
answer counts when it contains the value. Two reference rows bound the judge: `full context` asks
the questions with the whole snapshot instead of a summary (what the model can answer at all), and
`no context` with nothing (what it guesses). `kept` is the share of facts whose value is in the
summary text itself (no judge involved).

The prompts: foldline's 9-section full compaction (`compact.prompts.summary_prompt`), its ctx-agent
span fold (`span_prompt`, the whole snapshot as the span), the opencode-like headings the economics
benchmark's `summary` strategy uses, and an OpenHands-like state summary (paraphrased from
OpenHands' `LLMSummarizingCondenser`: user context, completed, pending, code state, tests).

Run (about 15 minutes on one CPU thread at the defaults):

    OMP_NUM_THREADS=1 nice python benchmarks/real_summary.py --snapshots 3 --turns 6
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foldline.compact.prompts import span_prompt, summary_prompt
from foldline.config import Config, TranscriptConfig
from foldline.server.backend import BackendRequest
from foldline.server.simulated.profiles import Fact, planted_facts
from foldline.simulation import simulate
from foldline.testing import SimulatedProvider

OPENCODE_LIKE = (
    "Provide a detailed summary of the conversation above. Use these sections:\n"
    "## Goal\n## Instructions\n## Discoveries\n## Accomplished\n## Relevant files\n"
)
"""The economics benchmark's `summary` strategy instruction (opencode's compaction headings)."""

OPENHANDS_LIKE = (
    "You are maintaining a state summary for an agent that continues this work. Write it with "
    "these labels: USER_CONTEXT (what the user asked and every fact they stated), COMPLETED (what "
    "was done, with results), PENDING (what is left), CODE_STATE (files and functions touched), "
    "TESTS (commands run and their outcome). Keep exact names and values."
)
"""A paraphrase of OpenHands' `LLMSummarizingCondenser` prompt (its labels, not its text)."""

SYSTEM = "You are a helpful assistant."
FIRST_TAG, LAST_TAG = "s0001", "s0002"


@dataclass(frozen=True)
class Snapshot:
    seed: int
    text: str
    facts: tuple[Fact, ...]
    """The planted facts whose value the text holds."""


def _cut(text: str, keep: int) -> str:
    return text if len(text) <= 2 * keep else f"{text[:keep]} [...] {text[-keep:]}"


def _conversation(transcript: Path, result_chars: int) -> str:
    """The transcript's user and assistant turns as plain text, tool results cut to head and tail."""
    lines: list[str] = []
    for raw in transcript.read_text().splitlines():
        record = json.loads(raw)
        kind, content = record.get("kind"), record.get("message", {}).get("content")
        if kind not in ("user", "assistant"):
            continue
        if isinstance(content, str):
            lines.append(f"{kind.capitalize()}: {content}")
            continue
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "text" and block["text"].strip():
                lines.append(f"{kind.capitalize()}: {_cut(block['text'], result_chars)}")
            elif block.get("type") == "tool_use":
                lines.append(f"Assistant calls {block['name']} {_cut(json.dumps(block['input']), 80)}")
            elif block.get("type") == "tool_result":
                body = block.get("content")
                if isinstance(body, list):
                    body = "\n".join(str(b.get("text", "")) for b in body if isinstance(b, dict))
                lines.append(f"Tool result: {_cut(str(body), result_chars)}")
    return "\n".join(lines)


async def _snapshot(profile: str, seed: int, turns: int, root: Path, result_chars: int) -> Snapshot:
    workspace, sessions = root / f"ws{seed}", root / f"sessions{seed}"
    config = Config(transcript=TranscriptConfig(sessions_dir=sessions, fsync="never"))
    await simulate(
        SimulatedProvider(seed=seed, profile=profile),
        profile=profile,
        turns=turns,
        seed=seed,
        workspace=workspace,
        sessions_dir=sessions,
        config=config,
        levels=False,
        output_facts=True,
    )
    text = _conversation(next(sessions.rglob("*.jsonl")), result_chars)
    facts = tuple(f for f in planted_facts(seed, output_facts=True) if holds(text, f.value))
    return Snapshot(seed, text, facts)


class Judge:
    """SmolLM2 behind `TransformersBackend`: summaries, and answers from a given context."""

    def __init__(self, models_dir: Path | None) -> None:
        import torch

        from foldline.server.model.backend import TransformersBackend
        from foldline.server.model.fetch import fetch_model

        torch.set_num_threads(1)
        self.backend = TransformersBackend.load(fetch_model(models_dir=models_dir), min_cache_tokens=256)
        self.requests = 0

    def tokens(self, text: str) -> int:
        return len(self.backend.tokenizer(text, add_special_tokens=False)["input_ids"])

    def ask(self, context: str, instruction: str, max_tokens: int) -> str:
        """The model's greedy reply to `context` (cached at its end) followed by `instruction`."""
        blocks: list[dict[str, Any]] = []
        if context:
            blocks.append({"type": "text", "text": context, "cache_control": {"type": "ephemeral"}})
        blocks.append({"type": "text", "text": instruction})
        request = BackendRequest(
            model="smollm2",
            system=SYSTEM,
            messages=[{"role": "user", "content": blocks}],
            max_tokens=max_tokens,
            request_key=f"judge{self.requests}",
        )
        self.requests += 1
        reply = self.backend.reply(request)
        return "".join(str(b.get("text", "")) for b in reply.content if b.get("type") == "text")


def _prompts() -> dict[str, str]:
    return {
        "foldline 9 sections": summary_prompt(),
        "foldline span fold": span_prompt(FIRST_TAG, LAST_TAG),
        "opencode-like": OPENCODE_LIKE,
        "OpenHands-like": OPENHANDS_LIKE,
    }


def _tagged(text: str) -> str:
    """The snapshot with the span tags the span-fold prompt names on its first and last lines."""
    lines = text.split("\n")
    lines[0] = f"[id:{FIRST_TAG}] {lines[0]}"
    lines[-1] = f"[id:{LAST_TAG}] {lines[-1]}"
    return "\n".join(lines)


def holds(text: str, value: str) -> bool:
    """Whether `text` states `value` as a whole word ("10" is not in "1000000")."""
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.IGNORECASE) is not None


def _answered(judge: Judge, context: str, facts: tuple[Fact, ...]) -> tuple[int, list[str]]:
    answers = [judge.ask(context, f"Answer briefly. {fact.question}", 24) for fact in facts]
    return _right(facts, answers), answers


def _right(facts: tuple[Fact, ...], answers: list[str]) -> int:
    return sum(holds(answer, fact.value) for fact, answer in zip(facts, answers, strict=True))


def _spread(shares: list[float]) -> str:
    """Mean ± population standard deviation over the snapshots."""
    return f"{statistics.mean(shares):.0%} ± {statistics.pstdev(shares):.0%}"


def _table(rows: dict[str, list[tuple[float, float]]]) -> None:
    print()
    print("| context given to the judge | snapshots | facts kept in the summary | facts answered |")
    print("|---|---|---|---|")
    for name, values in rows.items():
        if not values:
            continue
        kept = [k for k, _ in values]
        answered = [a for _, a in values]
        kept_cell = "—" if name in ("full context", "no context") else _spread(kept)
        print(f"| {name} | {len(values)} | {kept_cell} | {_spread(answered)} |")


def _rescore(path: Path, args: argparse.Namespace) -> None:
    """The table again from a `--json` log: snapshots rebuilt (no model), summaries and answers read."""
    log = json.loads(path.read_text())
    rows: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in sorted({e["seed"] for e in log}):
            snap = asyncio.run(_snapshot(args.profile, seed, args.turns, Path(tmp), args.result_chars))
            n = len(snap.facts)
            for entry in (e for e in log if e["seed"] == seed):
                summary = entry.get("summary")
                kept = sum(holds(summary, f.value) for f in snap.facts) / n if summary is not None else 0.0
                rows.setdefault(entry["prompt"], []).append((kept, _right(snap.facts, entry["answers"]) / n))
    _table(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--snapshots", type=int, default=3)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--profile", default="feature")
    parser.add_argument("--summary-tokens", type=int, default=160)
    parser.add_argument("--result-chars", type=int, default=160, help="Head and tail kept of a tool result.")
    parser.add_argument("--max-snapshot-tokens", type=int, default=5_000)
    parser.add_argument("--models-dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="Write every summary and answer here.")
    parser.add_argument("--rescore", type=Path, default=None, help="Score a --json log again (no model).")
    args = parser.parse_args(argv)
    if args.rescore is not None:
        _rescore(args.rescore, args)
        return 0

    started = time.monotonic()
    judge = Judge(args.models_dir)
    rows: dict[str, list[tuple[float, float]]] = {
        name: [] for name in [*_prompts(), "full context", "no context"]
    }
    log: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        taken, seed = 0, -1
        while taken < args.snapshots and seed < 4 * args.snapshots:
            seed += 1
            snap = asyncio.run(_snapshot(args.profile, seed, args.turns, Path(tmp), args.result_chars))
            size = judge.tokens(snap.text)
            print(f"snapshot seed {seed}: {size} tokens, {len(snap.facts)} facts in it", flush=True)
            if size > args.max_snapshot_tokens or not snap.facts:
                print("  skipped (too long for the window, or no fact in it)", flush=True)
                continue
            taken += 1
            n = len(snap.facts)
            right, answers = _answered(judge, _tagged(snap.text), snap.facts)
            rows["full context"].append((1.0, right / n))
            log.append({"seed": seed, "prompt": "full context", "answers": answers})
            right, answers = _answered(judge, "", snap.facts)
            rows["no context"].append((0.0, right / n))
            log.append({"seed": seed, "prompt": "no context", "answers": answers})
            for name, instruction in _prompts().items():
                summary = judge.ask(_tagged(snap.text), instruction, args.summary_tokens)
                kept = sum(holds(summary, f.value) for f in snap.facts)
                right, answers = _answered(
                    judge, f"Summary of an earlier conversation:\n{summary}", snap.facts
                )
                rows[name].append((kept / n, right / n))
                log.append({"seed": seed, "prompt": name, "summary": summary, "answers": answers})
                print(f"  {name}: kept {kept}/{n}, answered {right}/{n}", flush=True)
    print()
    print(
        f"judge: SmolLM2-135M-Instruct, greedy; profile {args.profile}, {args.turns} turns per snapshot; "
        f"{judge.requests} model requests in {time.monotonic() - started:.0f} s"
    )
    _table(rows)
    if args.json is not None:
        args.json.write_text(json.dumps(log, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
