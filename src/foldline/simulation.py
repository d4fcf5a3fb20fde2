"""Simulated sessions: a profile's user typing into a real `Session`, and what the session looked like.

`simulate()` generates the profile's workspace, opens a `Session` (the real engine, the real tools)
over any provider (the in-process `foldline.testing.SimulatedProvider`, or an `AnthropicProvider`
pointed at `foldline serve --backend simulated`), types the profile's prompts one turn at a time,
and measures the session from its own timeline: tool rounds per turn, the tool results' share of
the tokens, the largest raw tool result (before the level-0 budget moved it to a file), the request
size over time, errors. A turn the engine refuses (the blocking limit, R3.4.1) stops the run and
its message is kept: that is the baseline compaction must beat.

The session's economics come from every request the provider was sent, main loop and forks
(ctx-agent, session memory, AutoCompact's summary) alike: `simulate` wraps the provider in a meter
that keeps each request's `usage` as the server billed it, or the HTTP status it was refused with.
Forks never enter the timeline, so the meter is the one place that sees them all. From those: the
cost at list prices, the cache-read share, the peak request and the requests over a blocking limit.
The planted facts (`profiles.facts_for`) are scored from the answers: a question the user asked is
retained when the answer contains the fact's value. References to earlier work
(`profiles.references_for`, `simulate(references=True)`) are scored from the referring turn's tool
calls, which the harness judges against the true referent it knows from the profile (the model never
sees it): a turn whose calls hold the referent's target (the changed module's tests, the failing
test, the decided value) found it; one that also searched the tree for the fix or ran the check
again paid a recovery; one without the target is a quality miss (a recovery that found nothing is
both). The levels' receipts are counted from the transcript's records once the session is closed.

The session states the environment block foldline ships (`simulated_environment`), the same bytes
on every run of a seed: the simulated clock's date, a fixed platform, no git.

Token counts here use the server's tokenizer, the one that bills the requests.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from foldline._json import dumps
from foldline.config import Config, TranscriptConfig
from foldline.errors import ModelAPIError, ModelHTTPError, PromptTooLongError
from foldline.events import UIEvent
from foldline.providers.base import Capabilities, Provider, count_tokens
from foldline.server.config import SimulatedConfig
from foldline.server.simulated.model import think_time
from foldline.server.simulated.profiles import (
    Reference,
    generate_workspace,
    planted_facts,
    references_for,
    user_prompts,
)
from foldline.server.tokenizer import count_block
from foldline.session import Session
from foldline.stream import MessageDelta, MessageStart, StreamEvent
from foldline.system_prompt import COMPACT_SYSTEM_PROMPT, environment_block
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    CollapseCommit,
    CompactBoundary,
    ResultsCleared,
    SnipBoundary,
    SystemEntry,
    Usage,
    UserEntry,
    seeded_uuids,
)
from foldline.tools import default_tools
from foldline.usage import UsageTotals, usage_of

__all__ = [
    "SIMULATED_HOST",
    "SIMULATION_SYSTEM_PROMPT",
    "MeteredRequest",
    "SimulatedClock",
    "SimulationReport",
    "quantile",
    "score_facts",
    "score_references",
    "simulate",
    "simulated_environment",
]

SIMULATION_SYSTEM_PROMPT = COMPACT_SYSTEM_PROMPT
"""The system prompt simulated sessions send, whatever their window: the short one the published
benchmark numbers (docs/benchmarks.md, the demo) were measured with. The simulated model answers
from the messages alone, so only its size matters; real sessions get `system_prompt_for` theirs."""

SIMULATED_HOST = ("linux", "/bin/bash")
"""The platform and shell a simulated session's environment block states, whatever machine runs it:
the requests, and so every token count and cost, are then the same bytes everywhere."""

_MOVED = re.compile(r"^\[Output too large for the context: ([\d,]+) characters")
_TOO_LONG = re.compile(r"prompt is too long: (\d+) tokens")


@dataclass
class MeteredRequest:
    """One request the provider was sent, as its answer reported it."""

    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0
    """The part of `cache_write` written with a 1-hour TTL (billed at 2x the input price, not 1.25x)."""
    output: int = 0
    status: int | None = None
    """The HTTP status of a refused request (its usage is then empty); None when answered."""
    refused_tokens: int = 0
    """A prompt-too-long refusal's token count, from the API's message."""
    error: str = ""
    """A refused request's error message, as the API gave it."""
    model: str = ""
    """The model the request named: what it is priced at."""

    @property
    def prompt(self) -> int:
        """Every input token of the request: uncached, cache writes and cache reads."""
        return self.input + self.cache_read + self.cache_write or self.refused_tokens


def _requests_usage(requests: Sequence[MeteredRequest]) -> UsageTotals:
    """Usage summed over the answered ones of `requests`."""
    totals = UsageTotals()
    for r in requests:
        if r.status is None:
            split = {"ephemeral_1h_input_tokens": r.cache_write_1h} if r.cache_write_1h else None
            usage = Usage(
                input_tokens=r.input,
                cache_read_input_tokens=r.cache_read,
                cache_creation_input_tokens=r.cache_write,
                cache_creation=split,
                output_tokens=r.output,
            )
            totals.add(usage, r.model)
    return totals


class _Meter:
    """A provider that passes every request through and keeps what each one was billed."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.requests: list[MeteredRequest] = []

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        return self._metered(body, betas)

    async def _metered(self, body: dict[str, Any], betas: Sequence[str]) -> AsyncIterator[StreamEvent]:
        request = MeteredRequest(model=str(body.get("model", "")))
        self.requests.append(request)
        try:
            async for event in self.inner.stream(body, betas=betas):
                if isinstance(event, MessageStart):
                    usage = event.usage
                    request.input = usage.input_tokens
                    request.cache_read = usage.cache_read_input_tokens
                    request.cache_write = usage.cache_creation_input_tokens
                    request.cache_write_1h = (usage.cache_creation or {}).get("ephemeral_1h_input_tokens", 0)
                elif isinstance(event, MessageDelta):
                    request.output = event.usage.output_tokens
                yield event
        except ModelHTTPError as e:
            request.status = e.status
            request.error = str(e)
            match = _TOO_LONG.search(str(e))
            request.refused_tokens = int(match.group(1)) if match else 0
            raise

    async def count_tokens(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> int | None:
        return await count_tokens(self.inner, body, betas)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)  # optional on a Provider, as the engine treats it
        if close is not None:
            await close()


@dataclass
class SimulatedClock:
    """Virtual time for a simulated session: epoch seconds that move only when the session says.

    `simulate(clock=...)` gives it to the engine (entry timestamps, the time-based Microcompact) and
    advances it by the simulated user's pause before each prompt (`think_time`); hand the same clock
    to the server (`create_app(clock=...)`) and its prompt cache's TTLs expire on the same time.
    Deterministic: the same seed gives the same times, whatever the machine's speed.
    """

    now: float = 1_767_225_600.0
    """2026-01-01T00:00:00Z: any fixed start would do."""

    def __call__(self) -> float:
        return self.now

    def today(self) -> date:
        """The date it is now, in UTC."""
        return datetime.fromtimestamp(self.now, UTC).date()

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass."""
        self.now += seconds


def simulated_environment(workspace: Path, clock: SimulatedClock | None = None) -> str:
    """The environment block a simulated session sends: the one foldline ships
    (`system_prompt.environment_block`), stating the workspace, the date on `clock` (default: a
    fresh `SimulatedClock`'s), `SIMULATED_HOST`, and no git repository (a generated workspace has
    none, whatever repository the folder it was generated in belongs to). Two runs of one seed in
    workspaces at the same path send the same bytes."""
    today = (clock or SimulatedClock()).today()
    return environment_block(workspace.resolve(), today=today, host=SIMULATED_HOST, git=False)


def _environment(environment: bool | str, workspace: Path, clock: SimulatedClock | None) -> str:
    if isinstance(environment, str):
        return environment
    return simulated_environment(workspace, clock) if environment else ""


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
    environment: str = ""
    """The environment block the session's system prompt carried ("" when it sent none)."""
    requests: list[MeteredRequest] = field(default_factory=list)
    """Every request the provider was sent, main loop and forks, in order (see `_Meter`)."""
    main_requests: int = 0
    """The main loop's answered requests (the timeline's API replies); the rest were forks."""
    blocking_limit: int = 0
    """The session's blocking limit (`Config.blocking_limit`)."""
    facts_planted: int = 0
    """Planted facts the user stated in the turns that ran."""
    facts_asked: int = 0
    """Questions for a planted fact that the user asked and the session answered."""
    facts_retained: int = 0
    """...whose answer contained the fact's value."""
    output_facts_asked: int = 0
    """Of `facts_asked`: facts only a script's output stated (`simulate(output_facts=True)`)."""
    output_facts_retained: int = 0
    """...of which the answer still knew the value."""
    fact_answers: list[tuple[str, str, bool]] = field(default_factory=list)
    """(subject, value, retained) per question asked."""
    references: int = 0
    """Turns that referred back to earlier work (`simulate(references=True)`) and completed."""
    recoveries: int = 0
    """...of which the model paid extra calls to recover the referent (a search, a check run again)."""
    quality_misses: int = 0
    """...of which the work missed the referent (a wrong or no target, a decision not applied)."""
    reference_turns: list[tuple[str, list[str]]] = field(default_factory=list)
    """(prompt, its calls as `Name value...`) per completed referring turn: what they are scored on."""
    reference_outcomes: list[tuple[str, str, bool, bool]] = field(default_factory=list)
    """(kind, referent, recovered, missed) per referring turn."""
    receipts: dict[str, int] = field(default_factory=dict)
    """How often each level acted, from the transcript's receipts and control records."""
    main_usage: UsageTotals = field(default_factory=UsageTotals)
    """The transcript's usage (`usage.usage_of`): the main loop's replies, what `/cost`, `/cache` and
    `foldline inspect` show of the session; `usage` adds the forks, which no transcript records."""
    turn_ends: list[int] = field(default_factory=list)
    """`len(requests)` after each completed turn: turn i's requests are `requests[ends[i-1]:ends[i]]`
    (a background fork a turn started is counted in the turn it finished in)."""

    def turn_costs(self) -> list[float]:
        """Each completed turn's cost in dollars at list prices, its forks included."""
        costs, start = [], 0
        for end in self.turn_ends:
            costs.append(_requests_usage(self.requests[start:end]).cost())
            start = end
        return costs

    @property
    def usage(self) -> UsageTotals:
        """Usage summed over every answered request, forks included."""
        return _requests_usage(self.requests)

    @property
    def api_calls(self) -> int:
        """Requests sent, main loop and forks, refused ones included."""
        return len(self.requests)

    @property
    def fork_requests(self) -> int:
        """Answered requests that were not the main loop's: ctx-agent, session memory, summaries."""
        return self.usage.requests - self.main_requests

    @property
    def http_400s(self) -> int:
        """Requests refused with HTTP 400."""
        return sum(1 for r in self.requests if r.status == 400)

    @property
    def peak_request(self) -> int:
        """The largest request's input tokens (answered or refused as too long)."""
        return max((r.prompt for r in self.requests), default=0)

    def over_limit(self, limit: int | None = None) -> int:
        """Requests whose input tokens exceeded `limit` (default: the session's blocking limit)."""
        limit = self.blocking_limit if limit is None else limit
        return sum(1 for r in self.requests if r.prompt > limit)

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
        usage = self.usage
        receipts = ", ".join(f"{k} {v}" for k, v in sorted(self.receipts.items())) or "none"
        out += [
            f"API calls              {self.api_calls} ({self.main_requests} main loop, "
            f"{self.fork_requests} forks, {self.http_400s} HTTP 400)",
            f"peak request           {self.peak_request:,} tokens; {self.over_limit()} requests over the "
            f"blocking limit ({self.blocking_limit:,})",
            f"cache-read share       {usage.read_share_text()} of all input tokens",
            f"cost at list prices    {usage.dollars_text()}",
            f"  main loop            {self.main_usage.dollars_text()}, cache-read share "
            f"{self.main_usage.read_share_text()}: the transcript's, as /cost and inspect show it",
            f"  forks                {self.fork_requests} requests (ctx-agent, session memory, summaries; "
            "not in the transcript)",
            f"planted facts          {self.facts_retained} of {self.facts_asked} asked retained "
            f"({self.facts_planted} planted)",
            f"earlier work           {self.references} references, {self.recoveries} recovered, "
            f"{self.quality_misses} missed",
            f"level receipts         {receipts}",
        ]
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


def _count_receipts(records: Iterable[AnyRecord]) -> dict[str, int]:
    """Each level's actions, by name: its receipts and the control records it appended."""
    counts: dict[str, int] = {}

    def bump(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for record in records:
        if isinstance(record, SystemEntry):
            if record.subtype == "compaction":
                data = record.data if isinstance(record.data, dict) else {}
                # AutoCompact's receipts carry their outcome rather than a level name
                level = data.get("level") or (f"autocompact:{data['outcome']}" if "outcome" in data else None)
                bump(f"receipt:{level or 'unknown'}")
            elif record.subtype in ("collapse", "tool_result_budget"):
                bump(f"receipt:{record.subtype}")
        elif isinstance(record, CompactBoundary):
            bump("compact_boundary")
        elif isinstance(record, SnipBoundary):
            bump("snip_boundary")
        elif isinstance(record, CollapseCommit):
            bump("collapse_commit")
        elif isinstance(record, ResultsCleared):
            bump("results_cleared")
    return counts


def score_facts(report: SimulationReport, *, output_facts: bool) -> None:
    """Which planted facts the typed prompts stated, and which asked ones the answers still knew
    (from `report.answers`; the peers benchmark scores a real client's answers with it too)."""
    facts = planted_facts(report.seed, output_facts=output_facts)
    typed = [prompt for prompt, _ in report.answers]
    report.facts_planted = sum(1 for f in facts if any(p.startswith(f.statement) for p in typed))
    for prompt, answer in report.answers:
        for fact in facts:
            if prompt == fact.question:
                retained = fact.value in answer
                report.fact_answers.append((fact.subject, fact.value, retained))
                if fact.script is not None:
                    report.output_facts_asked += 1
                    report.output_facts_retained += retained
    report.facts_asked = len(report.fact_answers)
    report.facts_retained = sum(1 for *_, retained in report.fact_answers if retained)


def _calls_of(records: Sequence[AnyRecord]) -> list[str]:
    """A turn's tool calls, each as its name and its input's string values (what scoring reads)."""
    out = []
    for record in records:
        if isinstance(record, AssistantEntry) and not record.is_api_error_message:
            for block in record.message.content:
                if block.get("type") == "tool_use":
                    tool_input = block.get("input")
                    values = tool_input.values() if isinstance(tool_input, dict) else ()
                    out.append(" ".join([str(block.get("name")), *(v for v in values if isinstance(v, str))]))
    return out


def _reference_outcome(reference: Reference, calls: Sequence[str]) -> tuple[bool, bool]:
    """(recovered, missed) of one referring turn's calls against the true referent."""
    target = re.compile(rf"{re.escape(reference.target)}(?![\w.])")
    found = any(target.search(call) for call in calls)
    recovered = bool(reference.recovery) and any(reference.recovery in call for call in calls)
    return recovered, not found


def score_references(report: SimulationReport) -> None:
    """Each referring turn's outcome (`report.reference_turns`), judged against the profile's true
    referents: a turn is a recovery when it ran the recovery's call, a miss when no call held the
    referent's target."""
    by_question = {r.question: r for r in references_for(report.seed)}
    report.reference_outcomes = []
    for prompt, calls in report.reference_turns:
        reference = by_question[prompt]
        recovered, missed = _reference_outcome(reference, calls)
        report.reference_outcomes.append((reference.kind, reference.referent, recovered, missed))
    report.references = len(report.reference_outcomes)
    report.recoveries = sum(1 for *_, recovered, _ in report.reference_outcomes if recovered)
    report.quality_misses = sum(1 for *_, missed in report.reference_outcomes if missed)


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
    on_event: Callable[[UIEvent], None] | None = None,
    output_facts: bool = False,
    clock: SimulatedClock | None = None,
    settle: bool = True,
    system: str = SIMULATION_SYSTEM_PROMPT,
    facts_at_end: bool = False,
    environment: bool | str = True,
    references: bool = False,
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
        on_event: The session's UI event callback (the demo prints compactions as they fire).
        output_facts: Also plant facts that only a script's output states
            (`profiles.output_facts_for`); they count in the `facts_*` totals and, apart, in
            `output_facts_*`.
        clock: Virtual time (`SimulatedClock`): the engine runs on it, and before each prompt after
            the first it advances by the user's pause (`think_time`, `SimulatedConfig.
            think_time_quantiles`), drawn from the seed and the turn alone. None: the wall clock, and
            no time passes between turns.
        settle: Before each prompt, wait for the background work the turn before started (Context
            Collapse's ctx-agent, the session memory), as a user's pause lets it finish: a run is
            then the same on a loaded machine as on an idle one. It finishes before the pause
            passes on `clock`, as it starts when the turn ends and takes seconds: its forks find
            the cache the turn left warm. False: the next prompt races it.
        system: The static system prompt (default the short `SIMULATION_SYSTEM_PROMPT`; the
            benchmarks send the one foldline ships, `system_prompt.system_prompt_for`).
        facts_at_end: Ask for the planted facts in the session's last turns, the first stated
            last (`profiles.user_prompts`), instead of about 60% of the session after each.
        environment: Send the environment block foldline ships (`simulated_environment`: the
            workspace, the date on `clock`, a fixed platform, no git), as a session does: the
            simulated model's work is the same without it (tests/test_simulation_environment.py),
            only the requests' size is foldline's as shipped. A string is the block to send
            instead; False sends none.
        references: Also have the user refer back to earlier work (`profiles.references_for`):
            scored into `references`, `recoveries` and `quality_misses` (`score_references`).

    Returns:
        The report; a turn refused at the blocking limit stops the run (`report.stopped`). Its
        `requests` are every request `provider` was sent, forks included, metered at the provider.
    """
    generate_workspace(workspace, seed, references=references)
    questions = {r.question for r in references_for(seed)} if references else set()
    config = config or Config(transcript=TranscriptConfig(sessions_dir=sessions_dir, fsync="never"))
    report = SimulationReport(
        profile=profile,
        seed=seed,
        turns_planned=turns,
        blocking_limit=config.blocking_limit,
        environment=_environment(environment, workspace, clock),
    )
    meter = _Meter(provider)
    report.requests = meter.requests
    started = time.perf_counter()
    path = sessions_dir / f"simulated-{profile}-{seed}.jsonl"
    # Ids reach the model (message tags, collapse ids): drawn from the seed, a rerun sends the same bytes
    with seeded_uuids(seed):
        async with Session.open(
            path,
            provider=meter,
            workspace=workspace,
            config=config,
            tools=default_tools(),
            permission_mode="bypassPermissions",
            fsync="never",
            levels=levels,
            on_event=on_event,
            clock=clock,
            system=system,
            environment=report.environment,
        ) as session:
            for turn, prompt in enumerate(
                user_prompts(
                    profile,
                    turns,
                    seed,
                    output_facts=output_facts,
                    facts_at_end=facts_at_end,
                    references=references,
                )
            ):
                if settle:
                    await session.engine.drain()
                if clock is not None:
                    clock.advance(think_time(seed, turn, SimulatedConfig().think_time_quantiles))
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
                if prompt in questions:
                    report.reference_turns.append((prompt, _calls_of(records)))
                report.turn_ends.append(len(meter.requests))
                if on_turn is not None:
                    on_turn(turn, report)
    # Closing drained the background tail (its forks are metered); read the records after it.
    final = session.engine.timeline.snapshot()
    report.wall_s = time.perf_counter() - started
    report.main_requests = usage_of(final).requests
    report.main_usage = usage_of(final)
    report.receipts = _count_receipts(final)
    score_facts(report, output_facts=output_facts)
    score_references(report)
    return report
