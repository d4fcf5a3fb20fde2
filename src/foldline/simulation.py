"""Simulated sessions: a profile's user typing into a real `Session`, and what the session looked like.

`simulate()` generates the profile's workspace, opens a `Session` (the real engine, the real tools)
over any provider (the in-process `foldline.testing.SimulatedProvider`, or an `AnthropicProvider`
pointed at `foldline serve --backend simulated`), types the profile's prompts one turn at a time,
and measures the session from its own timeline: tool rounds per turn, the tool results' share of
the tokens, the largest raw tool result (before the level-0 budget moved it to a file), the request
size over time, errors. A turn the engine refuses (the blocking limit, R3.4.1) stops the run and
its message is kept: that is the baseline compaction must beat.

Token counts here use the server's tokenizer, the one that bills the requests.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from foldline._json import dumps
from foldline.config import Config, TranscriptConfig
from foldline.errors import ModelAPIError, PromptTooLongError
from foldline.providers.base import Provider
from foldline.server.simulated.profiles import generate_workspace, user_prompts
from foldline.server.tokenizer import count_block
from foldline.session import Session
from foldline.timeline import AnyRecord, AssistantEntry, UserEntry
from foldline.tools import default_tools

__all__ = ["SimulationReport", "quantile", "simulate"]

_MOVED = re.compile(r"^\[Output too large for the context: ([\d,]+) characters")


def quantile(values: Sequence[int], q: float) -> int:
    """The `q` quantile of `values` (nearest rank; 0 for none)."""
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class SimulationReport:
    """What a simulated session did."""

    profile: str
    seed: int
    turns_planned: int
    rounds_per_turn: list[int] = field(default_factory=list)
    """Tool rounds (assistant messages with tool calls) of each completed turn."""
    request_tokens: list[int] = field(default_factory=list)
    """Input tokens of every request, in order (input + cache reads + cache writes, from `usage`)."""
    request_turn: list[int] = field(default_factory=list)
    """The turn (0-based) of each request."""
    result_tokens: int = 0
    message_tokens: int = 0
    largest_raw_result: int = 0
    """Characters of the largest tool result before the level-0 budget."""
    largest_call: str = ""
    """The tool call that produced `largest_raw_result`."""
    result_chars: list[int] = field(default_factory=list)
    tool_calls: dict[str, int] = field(default_factory=dict)
    tool_errors: int = 0
    """Tool results marked `is_error` (a failed test run, a refused edit): the model's business."""
    tool_error_samples: list[str] = field(default_factory=list)
    """The first few failed calls and what they answered."""
    errors: list[str] = field(default_factory=list)
    """API and engine errors: a clean run has none."""
    stopped: str | None = None
    """Why the run stopped before its last turn (the blocking limit's message), or None."""
    answers: list[tuple[str, str]] = field(default_factory=list)
    """(prompt, final answer text) per completed turn."""
    wall_s: float = 0.0

    @property
    def turns_done(self) -> int:
        """Turns that completed."""
        return len(self.rounds_per_turn)

    @property
    def result_share(self) -> float:
        """Tool results' share of the conversation's tokens."""
        return self.result_tokens / self.message_tokens if self.message_tokens else 0.0

    def lines(self) -> list[str]:
        """The report as printed by `foldline simulate` and `benchmarks/simulator.py`."""
        rounds, chars = self.rounds_per_turn, self.result_chars
        calls = ", ".join(f"{k} {v}" for k, v in sorted(self.tool_calls.items(), key=lambda kv: -kv[1]))
        out = [
            f"turns completed        {self.turns_done} of {self.turns_planned}",
            f"wall time              {self.wall_s:.1f} s",
            f"API/engine errors      {len(self.errors)} {self.errors[:3]}",
            f"failed tool calls      {self.tool_errors} {self.tool_error_samples[:2]}",
            f"tool rounds per turn   median {quantile(rounds, 0.5)}, p90 {quantile(rounds, 0.9)}, "
            f"p99 {quantile(rounds, 0.99)}, max {max(rounds, default=0)}",
            f"chars per tool result  median {quantile(chars, 0.5):,}, p90 {quantile(chars, 0.9):,}, "
            f"p99 {quantile(chars, 0.99):,} (raw, before the level-0 budget)",
            f"tool-result share      {self.result_share:.0%} of the conversation's tokens",
            f"largest raw result     {self.largest_raw_result:,} chars: {self.largest_call[:100]}",
            f"tool calls             {calls}",
            "request size over time (turn: input tokens of its last request)",
        ]
        last_per_turn: dict[int, int] = {}
        for turn, tokens in zip(self.request_turn, self.request_tokens, strict=True):
            last_per_turn[turn] = tokens
        step = max(1, self.turns_planned // 10)
        for turn in sorted(last_per_turn):
            if (turn + 1) % step == 0 or turn == max(last_per_turn):
                out.append(f"  {turn + 1:5}  {last_per_turn[turn]:>10,}")
        if self.stopped:
            out.append(f"stopped                {self.stopped}")
        return out


def _measure(report: SimulationReport, records: Sequence[AnyRecord], turn: int) -> int:
    """Add one turn's records to the report; returns its tool rounds."""
    rounds = 0
    calls: dict[str, str] = {}
    for record in records:
        if isinstance(record, AssistantEntry):
            if record.is_api_error_message:
                continue
            blocks = record.message.content
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            rounds += 1 if uses else 0
            for block in uses:
                name = str(block.get("name"))
                calls[str(block.get("id"))] = f"{name} {dumps(block.get('input')).decode()}"
                report.tool_calls[name] = report.tool_calls.get(name, 0) + 1
            report.message_tokens += sum(count_block(b) for b in blocks)
            usage = record.message.usage
            if usage is not None:
                total = usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens
                report.request_tokens.append(total)
                report.request_turn.append(turn)
        elif isinstance(record, UserEntry):
            content = record.message.content
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            for block in blocks:
                tokens = count_block(block)
                report.message_tokens += tokens
                if block.get("type") != "tool_result":
                    continue
                report.result_tokens += tokens
                text = block.get("content")
                text = text if isinstance(text, str) else "".join(str(b.get("text", "")) for b in text or ())
                if block.get("is_error"):
                    report.tool_errors += 1
                    if len(report.tool_error_samples) < 5:
                        call = calls.get(str(block.get("tool_use_id")), "")
                        report.tool_error_samples.append(f"{call} -> {text[:200]}")
                moved = _MOVED.match(text)
                raw = int(moved.group(1).replace(",", "")) if moved else len(text)
                report.result_chars.append(raw)
                if raw > report.largest_raw_result:
                    report.largest_raw_result = raw
                    report.largest_call = calls.get(str(block.get("tool_use_id")), "")
    return rounds


async def simulate(
    provider: Provider,
    *,
    profile: str = "feature",
    turns: int = 20,
    seed: int = 0,
    workspace: Path,
    sessions_dir: Path,
    config: Config | None = None,
    on_turn: Callable[[int, SimulationReport], None] | None = None,
    levels: bool = True,
) -> SimulationReport:
    """Play `turns` prompts of `profile`'s user into a real session over `provider`.

    Args:
        provider: Who answers (its `aclose` is called at the end).
        profile: Which user and which workspace (`foldline.server.simulated.PROFILES`).
        turns: Prompts to type.
        seed: Seeds the workspace and the user (use the same seed for the model).
        workspace: Where the profile's repository is generated; the tools act there.
        sessions_dir: Where the transcript goes.
        config: The engine's configuration (default: `Config()` with fsync off, as benchmarks run).
        on_turn: Called after each turn with its number and the report so far.
        levels: Every compaction level on (`Session.open`'s default); False leaves only level 0 and
            Snip's machinery, the "no management" baseline.

    Returns:
        The report; a turn refused at the blocking limit stops the run (`report.stopped`).
    """
    generate_workspace(workspace, seed)
    config = config or Config(transcript=TranscriptConfig(sessions_dir=sessions_dir, fsync="never"))
    report = SimulationReport(profile=profile, seed=seed, turns_planned=turns)
    started = time.perf_counter()
    path = sessions_dir / f"simulated-{profile}-{seed}.jsonl"
    async with Session.open(
        path,
        provider=provider,
        workspace=workspace,
        config=config,
        tools=default_tools(),
        permission_mode="bypassPermissions",
        fsync="never",
        levels=levels,
    ) as session:
        for turn, prompt in enumerate(user_prompts(profile, turns, seed)):
            before = len(session.engine.timeline)
            try:
                result = await session.submit_message(prompt)
            except PromptTooLongError as e:
                report.stopped = f"turn {turn + 1}: {e}"
                break
            except ModelAPIError as e:
                report.errors.append(f"turn {turn + 1}: {e}")
                break
            records = list(session.engine.timeline)[before:]
            report.rounds_per_turn.append(_measure(report, records, turn))
            report.answers.append((prompt, result.text))
            if on_turn is not None:
                on_turn(turn, report)
    report.wall_s = time.perf_counter() - started
    return report
