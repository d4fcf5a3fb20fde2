"""Economics: the simulator's profiles under the context strategies other agents use, side by side.

Each (profile, strategy) pair plays the same simulated user for `--turns` turns through the real
engine and tools, over the real path: `Session` -> `AnthropicProvider` (the SDK) -> HTTP ->
`foldline serve --backend simulated` in a subprocess, whose prompt cache bills every request. The
in-process `foldline.testing.SimulatedProvider` is not used here: it bills every request as
uncached input (it has no prompt cache), so it cannot measure cost or cache-read share.

A strategy is a small class (`Strategy`): the engine's window, whether foldline's levels are
installed (`install_levels`, via `simulate(levels=...)`), which provider capabilities are declared,
and an optional request-time rewrite wrapped around the provider. The rewrites are what the other
agents do to the bytes they send, applied to every request the engine makes:

- `none` (opt-in): no management on an unlimited window. No model takes such a window, so nothing
  is judged against it.
- `truncate`: drop the oldest whole user turns (a turn starts at a typed prompt, so a tool_use and
  its tool_result are never split) until the request fits under the 200K window's AutoCompact
  threshold (LangGraph `trim_messages`-style).
- `mask10`: observation masking, every tool result but the last 10 replaced by a placeholder on
  every request (the naive form: the masked set moves with every request).
- `mask-batched`: the same masking in batches of 30 (`MaskBatched`), so the masked prefix stays put
  between batches and is read from the cache.
- `summary-opencode`: opencode's prune of old tool output (`Prune`: the newest 40K tokens protected,
  a prune only when it frees 20K), then on overflow one separate summary request with opencode's
  template and its per-heading guidance (`OPENCODE_INSTRUCTION`), its own system prompt and no tools.
- `summary-openhands`: OpenHands' LLM summarizing condenser: past 120 events (or the threshold), the
  older half summarized into its state summary (`OPENHANDS_INSTRUCTION`), the forgotten events and
  the previous summary sent as text in one user message, no system prompt.
- `anthropic-clear`: `clear_tool_uses_20250919` through the server's real `context_management`
  (`ContextManagement`; trigger 100K input tokens, keep 3 tool uses, `clear_at_least` 30K), with the
  `context-management-2025-06-27` beta. The provider sends body fields the SDK does not name through
  `extra_body`.
- `claude-code-design`: foldline's engine as Claude Code is designed: AutoCompact with its
  cache-sharing fork, no Collapse, no cache_edits.
- `foldline-no-edits`: every level, a provider that declares no `cache_edits` (the headline row).
- `foldline`: every level, `cache_edits` declared as foldline serve supports them (a feature with no
  public pricing: its billing is this server's own model).
- `limit`: the physical limit (`NoteOnly`, an oracle): each request is the system prompt, the
  tools, a note of the planted facts seen so far, a note of the earlier work the session refers
  back to and the current turn; every other token is dropped for free. No agent can do this; every
  row's cost is judged against it.
- `foldline-no-edits-at-90`: the headline row with Collapse committing only at 90% of the window
  (`CollapseConfig.commit_when_it_pays=False`), the default before design.md R3.3.7.
- `foldline-no-edits-100k`: the headline row managing to a 100K working window on the 200K model.
- `foldline-no-edits-summaries`: the headline row folding 10K-token spans into the model's
  summaries (`CollapseConfig.folds = "summary"`, R3.3.1), the default before record folds: every
  summary is a request to pay for and a place where a lossy summarizer drops what it was told.
- `foldline-no-edits-span3k`, `-span5k`, `-span10k` (opt-in): the headline row with 3K-, 5K- or
  10K-token record spans (2K by default); `-budget5k` / `-budget2k` / `-budget10k`: folds
  replaced by one summary at 5K / 2K / 10K tokens of them (3K by default); `-nudge25`: the Snip
  reminder past 25% of the window. Each is one design choice beside the defaults.
- `foldline-no-edits-memory` (opt-in): the headline row with the session memory refreshed beside
  Collapse, the old default, to measure that change side by side.
- `foldline-no-edits-no-snip` (opt-in): the headline row with Snip off (`Config.snip_enabled`), to
  measure what the model's snips cost and save.

The managed strategies run on a 200K window (the server refuses larger prompts with a 400). The
rewriting strategies run the engine itself on an unlimited window, so that the engine's own
blocking limit never refuses what the rewrite would have shrunk; the server still enforces 200K.
Token counts for the rewrites use the server's tokenizer (the one that bills), counted per message.

Per (profile, strategy, seed): cost at the model's list prices (`foldline.pricing`: 1-hour writes
at 2x, the long-context rate above 200K input tokens) over the main loop and every fork or summary
request, cache-read share, peak request, API calls, summary calls (requests that were not the main
loop's), HTTP 400s, planted facts retained of those asked, turns completed. Two kinds of fact are
planted (`profiles.planted_facts(output_facts=True)`): five the user states in a prompt, and three
that only a script's long output states once, in passing, which no answer repeats; the second kind
is reported apart (`output_facts_*`). The user also refers back to earlier work
(`profiles.references_for`: a file a fix changed, a test a check saw fail, a decision): per session
`references` asked, `recoveries` (the model paid extra calls to find the referent again) and
`quality_misses` (its work missed the referent); the table pools the miss rate over the seeds with
its 95% Wilson interval. `aggregate` gives each column's mean and range over the seeds.
`--json` prints one object per run on stdout (progress goes to stderr). Each (profile, strategy,
seed) is one fleet unit (`foldline.fleet.Unit`, kind `economics:fleet_row`): `--jobs N` runs N at
once on a local Ray (each an engine and a server process; `--jobs 1`, the default, runs them one
after another in this process, without Ray), `--address` on an existing Ray cluster instead, and
`--results URL` keeps every row and transcript in a results folder (any fsspec URL), so a stopped run
started again with the same folder runs only the units that have no row (docs/fleet.md).

`--verbosity-scale X` runs the simulated model with its replies' quoted lines times X
(`SimulatedConfig.verbosity_scale`); every row records the scale it ran at. `--fidelity 1.0,0.9,0.7`
runs every cell once per summary fidelity q (`foldline serve --summary-fidelity`: each stated fact
survives one summary with probability q) and `--summary-fact-budget N` caps the statements one
summary keeps; each unit carries its q as a knob, every row records `summary_fidelity` and
`summary_fact_budget`, and the table has one line per q with the facts retained pooled over the
seeds and their 95% Wilson interval.

Every session states the environment block foldline ships (`simulation.simulated_environment`:
its workspace, the simulated clock's date, a fixed platform, no git), every row alike, the limit's
too (its system prompt is kept whole); `--no-environment` sends none. Each row records whether it
sent one and the date it stated (`environment`, `environment_date`).

Run: `PYTHONPATH=src .venv/bin/python benchmarks/economics.py [--turns 300]
[--profiles feature,debug,swe] [--strategies truncate,...] [--seeds 7,8,9] [--verbosity-scale 1.0]
[--fidelity 1.0,0.7] [--summary-fact-budget N] [--no-environment] [--json] [--jobs 2]
[--address HOST:PORT] [--results URL]`
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from foldline._json import dumps, loads
from foldline.config import AutoCompactConfig, CollapseConfig, Config, SessionMemoryConfig, TranscriptConfig
from foldline.fleet import FleetReport, Unit, knobs, live_progress, run_fleet
from foldline.pricing import LONG_CONTEXT_THRESHOLD
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.providers.base import Capabilities, Provider, count_tokens
from foldline.server.caching import flatten, total_tokens
from foldline.server.config import SimulatedConfig
from foldline.server.simulated.profiles import Fact, Reference, planted_facts, references_for
from foldline.server.tokenizer import count_block
from foldline.simulation import MeteredRequest, SimulationReport, simulate
from foldline.stream import MessageDelta, MessageStart, StreamEvent, TextDelta
from foldline.system_prompt import system_prompt_for

FACT_BUDGET = SimulatedConfig().summary_fact_budget
"""The statements one summary keeps where a run does not say (`--summary-fact-budget`)."""
UNLIMITED = 100_000_000
WINDOW = 200_000
DEFAULT_PROFILES = ("feature", "debug", "swe")

# --- request rewriting --------------------------------------------------------------------------


class TokenCounter:
    """Tokens of a message by the server's tokenizer, remembered by the message's bytes."""

    def __init__(self) -> None:
        self._memo: dict[bytes, int] = {}

    def message(self, message: dict[str, Any]) -> int:
        key = dumps(message)
        tokens = self._memo.get(key)
        if tokens is None:
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            tokens = sum(count_block(b) for b in blocks if isinstance(b, dict))
            self._memo[key] = tokens
        return tokens

    def fixed(self, body: dict[str, Any]) -> int:
        """System and tools: everything but the messages."""
        return total_tokens(flatten({**body, "messages": []}))

    def body(self, body: dict[str, Any]) -> int:
        return self.fixed(body) + sum(self.message(m) for m in body["messages"])


def has_tool_result(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )


def turn_starts(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Indices of user messages that carry no tool_result: a typed prompt, where a cut splits no pair."""
    return [i for i, m in enumerate(messages) if m.get("role") == "user" and not has_tool_result(m)]


def mask_results(messages: list[dict[str, Any]], keep: int, placeholder: str) -> list[dict[str, Any]]:
    """`messages` with every tool_result but the last `keep` replaced by `placeholder` (new dicts)."""
    spots = [
        (i, j)
        for i, m in enumerate(messages)
        if isinstance(m.get("content"), list)
        for j, b in enumerate(m["content"])
        if isinstance(b, dict) and b.get("type") == "tool_result"
    ]
    old = spots[: max(0, len(spots) - keep)]
    if not old:
        return messages
    out = list(messages)
    for i, j in old:
        if out[i] is messages[i]:
            out[i] = {**messages[i], "content": list(messages[i]["content"])}
        out[i]["content"][j] = {**out[i]["content"][j], "content": placeholder}
    return out


class Rewriter(Protocol):
    """A request-time rewrite: the bytes an agent sends instead of its full history."""

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]: ...


def summarizers(rewriter: Rewriter | None) -> list[Summarize]:
    """The summary steps of a rewrite (their requests are outside the main loop's meter)."""
    if isinstance(rewriter, Chain):
        return [s for step in rewriter.steps for s in summarizers(step)]
    return [rewriter] if isinstance(rewriter, Summarize) else []


def rewriter_betas(rewriter: Rewriter) -> list[str]:
    """The beta headers a rewrite needs (`ContextManagement`'s), through a `Chain` too."""
    if isinstance(rewriter, Chain):
        return [b for step in rewriter.steps for b in rewriter_betas(step)]
    beta = getattr(rewriter, "beta", None)
    return [beta] if isinstance(beta, str) else []


class Rewriting:
    """A provider that rewrites each request body before sending it (the engine's history is untouched)."""

    def __init__(self, inner: Provider, rewriter: Rewriter) -> None:
        self.inner = inner
        self.rewriter = rewriter

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        return self._stream(body, betas)

    async def _stream(self, body: dict[str, Any], betas: Sequence[str]) -> AsyncIterator[StreamEvent]:
        sent = await self.rewriter.rewrite(body, self.inner)
        extra = [b for b in rewriter_betas(self.rewriter) if b not in betas]
        async for event in self.inner.stream(sent, betas=[*betas, *extra]):
            yield event

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


@dataclass
class Truncate:
    """Drop the oldest whole turns until the request fits under `threshold` tokens."""

    threshold: int
    counter: TokenCounter = field(default_factory=TokenCounter)
    dropped_max: int = 0
    """The most messages one request left out (for the test and the curious)."""

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]:
        messages = body["messages"]
        sizes = [self.counter.message(m) for m in messages]
        total = self.counter.fixed(body) + sum(sizes)
        if total <= self.threshold:
            return body
        starts = [s for s in turn_starts(messages) if s > 0]
        cut, dropped = (starts[-1] if starts else 0), 0
        for start in starts:
            dropped = sum(sizes[:start])
            if total - dropped <= self.threshold:
                cut = start
                break
        self.dropped_max = max(self.dropped_max, cut)
        return {**body, "messages": messages[cut:]}


@dataclass
class Mask:
    """Replace every tool result but the last `keep` with a placeholder, on every request.

    With `trigger`, only once the full request exceeds that many tokens (Anthropic's clear_tool_uses:
    the trigger is measured on the full prompt, which only grows, so once crossed it stays crossed).
    """

    keep: int
    placeholder: str
    trigger: int = 0
    counter: TokenCounter = field(default_factory=TokenCounter)
    _tripped: bool = False

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]:
        if not self._tripped and self.trigger:
            rough = len(dumps(body["messages"])) // 4  # cheap first: count exactly only near the trigger
            if rough < self.trigger // 2 or self.counter.body(body) <= self.trigger:
                return body
        self._tripped = True
        return {**body, "messages": mask_results(body["messages"], self.keep, self.placeholder)}


@dataclass
class MaskBatched:
    """Mask old tool results in batches: the prefix moves once per `batch` results, not on every request.

    Once more than `keep + batch` results are unmasked, every result but the newest `keep` is masked,
    and those stay masked; between two batches the masked prefix is byte-identical, so it is read from
    the cache. This is the cache-friendly form of observation masking (the OpenHands condenser's
    keep-last-N applied in steps).
    """

    keep: int
    batch: int
    placeholder: str
    masked: int = 0
    """The oldest tool results masked so far (the history only grows, so they stay the oldest)."""

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]:
        total = sum(
            1
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        )
        if total - self.masked > self.keep + self.batch:
            self.masked = total - self.keep
        return {**body, "messages": mask_results(body["messages"], total - self.masked, self.placeholder)}


@dataclass
class Prune:
    """opencode's prune of old tool outputs: walking back from the newest, tool output past the newest
    `protect` tokens is cleared, and only when at least `minimum` tokens would go (so the prefix moves
    in large steps). Cleared results stay cleared."""

    protect: int
    minimum: int
    placeholder: str
    counter: TokenCounter = field(default_factory=TokenCounter)
    cleared: int = 0
    """The oldest tool results cleared so far."""

    def sizes(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        return [
            count_block(b)
            for m in messages
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]:
        sizes = self.sizes(body["messages"])
        seen, cut = 0, 0
        for i in range(len(sizes) - 1, -1, -1):
            seen += sizes[i]
            if seen > self.protect:
                cut = i + 1
                break
        if cut > self.cleared and sum(sizes[self.cleared : cut]) >= self.minimum:
            self.cleared = cut
        return {
            **body,
            "messages": mask_results(body["messages"], len(sizes) - self.cleared, self.placeholder),
        }


@dataclass
class Chain:
    """Rewriters applied in order (opencode prunes, then summarizes what is still too big)."""

    steps: Sequence[Rewriter]

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]:
        for step in self.steps:
            body = await step.rewrite(body, inner)
        return body


@dataclass
class ContextManagement:
    """Ask the server for Anthropic's context editing: the request carries `context_management` and the
    `context-management-2025-06-27` beta, and `foldline serve` clears tool results server-side
    (the client's history is untouched, as with the real API)."""

    edits: list[dict[str, Any]]
    beta: str = "context-management-2025-06-27"

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]:
        return {**body, "context_management": {"edits": self.edits}}


SUMMARY_SYSTEM = (
    "You are a helpful AI assistant tasked with summarizing conversations. Summarize what was done, "
    "what is being worked on, which files matter and what comes next, for another agent that will "
    "continue the work."
)
OPENCODE_INSTRUCTION = (
    "Write a detailed prompt that lets another agent continue the conversation above: what we did, "
    "what we are doing, which files we are working on and what comes next. Keep to this template:\n"
    "## Goal\n[the goals the user is after]\n"
    "## Instructions\n[the user's instructions that still matter; a plan or spec if there is one]\n"
    "## Discoveries\n[what was learned that the next agent needs when it goes on]\n"
    "## Accomplished\n[what is done, what is in progress, what is left]\n"
    "## Relevant files / directories\n[the files read, edited or created that matter for the task]\n"
)
"""opencode's compaction request (its template's headings, each with its guidance, in our words)."""
SUMMARY_INSTRUCTION = OPENCODE_INSTRUCTION
OPENHANDS_INSTRUCTION = (
    "You keep a state summary for an interactive agent, from the events it took and the previous "
    "summary if there is one. Track:\n"
    "USER_CONTEXT: (the user's essential requirements, goals and clarifications, concisely)\n"
    "COMPLETED: (tasks done so far, with brief results)\n"
    "PENDING: (tasks still to do)\n"
    "CURRENT_STATE: (current variables, data structures or other state that matters)\n"
    "For code tasks also: CODE_STATE (file paths, function signatures), TESTS (failing cases, errors, "
    "outputs), CHANGES (edits made), DEPS (dependencies, imports), VERSION_CONTROL_STATUS (branch, "
    "commits).\n"
    "Put first: the user's requirements and goals; tell completed from pending; keep every section "
    "short and relevant; skip what the task does not need.\n"
)
"""OpenHands' LLMSummarizingCondenser request (its sections and priorities, in our words): one user
message holding the previous summary and the forgotten events as text, no system prompt, no tools."""


def _event_text(message: dict[str, Any]) -> str:
    """One message as the plain text of an event (OpenHands renders events, not API messages)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_use":
            parts.append(f"[{block.get('name')}] {dumps(block.get('input', {})).decode()}")
        elif kind == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else _event_text({"content": inner}))
    return "\n".join(parts)


@dataclass
class Summarize:
    """Over `threshold` tokens (or `max_messages` messages), summarize the older turns in a separate
    request and keep `tail` tokens (or half of `max_messages`) verbatim.

    The summary request has its own system prompt and no tools, so it shares no cached prefix with the
    main loop; the next main request starts with the summary, so its prefix is written anew.
    `events=True` is OpenHands' form: the previous summary and the forgotten messages go as text in
    one user message under `instruction`; otherwise the older messages go as they are, followed by
    `instruction` (opencode's form).
    """

    threshold: int
    tail: int
    instruction: str = OPENCODE_INSTRUCTION
    system: str | None = SUMMARY_SYSTEM
    events: bool = False
    max_messages: int = 0
    counter: TokenCounter = field(default_factory=TokenCounter)
    summary: str | None = None
    covered: int = 0
    """Engine messages before this index are replaced by `summary`."""
    requests: list[MeteredRequest] = field(default_factory=list)
    """The summary requests, as the server billed them (`simulate`'s meter never sees them)."""

    def view(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.summary is None:
            return messages
        first = messages[self.covered]
        content = first["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        note = f"This session continues from an earlier conversation. Its summary:\n\n{self.summary}"
        return [
            {**first, "content": [{"type": "text", "text": note}, *blocks]},
            *messages[self.covered + 1 :],
        ]

    def too_many(self, view: list[dict[str, Any]]) -> bool:
        return bool(self.max_messages) and len(view) > self.max_messages

    def over(self, body: dict[str, Any], view: list[dict[str, Any]]) -> bool:
        if self.too_many(view):
            return True
        return self.counter.fixed(body) + sum(self.counter.message(m) for m in view) > self.threshold

    def cut_at(self, messages: list[dict[str, Any]]) -> int:
        starts = [s for s in turn_starts(messages) if s > self.covered]
        if self.too_many(self.view(messages)):
            keep_from = len(messages) - self.max_messages // 2
            return next((s for s in starts if s >= keep_from), starts[-1] if starts else 0)
        sizes = [self.counter.message(m) for m in messages]
        return next((s for s in starts if sum(sizes[s:]) <= self.tail), starts[-1] if starts else 0)

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]:
        messages = body["messages"]
        view = self.view(messages)
        if not self.over(body, view):
            return {**body, "messages": view}
        cut = self.cut_at(messages)
        if cut <= self.covered:
            return {**body, "messages": view}  # nothing older to fold: send it and let the server judge
        older = self.view(messages[:cut])
        self.summary = await self._summarize(body, older, inner)
        self.covered = cut
        return {**body, "messages": self.view(messages)}

    def _request(self, body: dict[str, Any], older: list[dict[str, Any]]) -> dict[str, Any]:
        if self.events:
            previous = f"<PREVIOUS SUMMARY>\n{self.summary or ''}\n</PREVIOUS SUMMARY>\n"
            start = self.covered + 1 if self.summary is not None else 0
            events = "".join(
                f"<EVENT id={i}>\n{_event_text(m)}\n</EVENT>\n" for i, m in enumerate(older[start:], start)
            )
            messages = [{"role": "user", "content": f"{self.instruction}\n{previous}{events}"}]
        else:
            messages = [*_strip_cache_control(older), {"role": "user", "content": self.instruction}]
        request = {"model": body["model"], "max_tokens": body.get("max_tokens", 8192), "messages": messages}
        if self.system is not None:
            request["system"] = self.system
        return request

    async def _summarize(self, body: dict[str, Any], older: list[dict[str, Any]], inner: Provider) -> str:
        metered = MeteredRequest(model=str(body["model"]))
        self.requests.append(metered)
        text: list[str] = []
        async for event in inner.stream(self._request(body, older)):
            if isinstance(event, MessageStart):
                metered.input = event.usage.input_tokens
                metered.cache_read = event.usage.cache_read_input_tokens
                metered.cache_write = event.usage.cache_creation_input_tokens
            elif isinstance(event, MessageDelta):
                metered.output = event.usage.output_tokens
            elif isinstance(event, TextDelta):
                text.append(event.text)
        return "".join(text)


def _strip_cache_control(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = copy.deepcopy(messages)
    for message in out:
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict):
                block.pop("cache_control", None)
    return out


# --- strategies ---------------------------------------------------------------------------------


class Strategy(Protocol):
    """How one agent manages its context, as a configuration of the same engine."""

    name: str
    label: str
    levels: bool
    """foldline's levels installed (`install_levels`)."""
    collapse: bool
    """Context Collapse among them (Claude Code's design has none)."""
    memory_with_collapse: bool
    """Session memory refreshed in the background although Collapse is on (the old default)."""
    snip: bool
    """The Snip tool offered and nudged (`Config.snip_enabled`); the model decides what it deletes."""
    commit_when_it_pays: bool
    """Collapse commits staged folds once they pay (design.md R3.3.7), not only at 90%."""

    def engine_window(self, window: int) -> int:
        """The engine's `Config.context_window` for a managed window of `window` tokens."""
        ...

    def capabilities(self) -> Capabilities | None:
        """What the provider declares (None: the SDK provider's defaults, no cache_edits)."""
        ...

    def rewriter(self, window: int) -> Rewriter | None:
        """The request-time rewrite, or None to send the engine's requests as they are."""
        ...


@dataclass
class NoManagement:
    name: str = "none"
    label: str = "no management, unlimited window (no real model takes it)"
    levels: bool = False
    collapse: bool = False
    memory_with_collapse: bool = False
    snip: bool = True
    commit_when_it_pays: bool = False

    def engine_window(self, window: int) -> int:
        return UNLIMITED

    def capabilities(self) -> Capabilities | None:
        return None

    def rewriter(self, window: int) -> Rewriter | None:
        return None


@dataclass
class Truncation(NoManagement):
    name: str = "truncate"
    label: str = "truncate oldest turns"

    def rewriter(self, window: int) -> Rewriter | None:
        return Truncate(Config(context_window=window).autocompact_threshold)


@dataclass
class Masking(NoManagement):
    name: str = "mask10"
    label: str = "observation masking, keep 10, re-masked every request (naive)"
    keep: int = 10

    def rewriter(self, window: int) -> Rewriter | None:
        return Mask(self.keep, "<MASKED>")


@dataclass
class BatchedMasking(NoManagement):
    name: str = "mask-batched"
    label: str = "observation masking, keep 10, masked in batches of 30"
    keep: int = 10
    batch: int = 30

    def rewriter(self, window: int) -> Rewriter | None:
        return MaskBatched(self.keep, self.batch, "<MASKED>")


@dataclass
class OpencodeSummary(NoManagement):
    name: str = "summary-opencode"
    label: str = "opencode: prune old tool output + summary on overflow"
    protect: int = 40_000
    """opencode's PRUNE_PROTECT: the newest tool output tokens never pruned."""
    minimum: int = 20_000
    """opencode's PRUNE_MINIMUM: a prune happens only when it frees this many tokens."""
    output_reserve: int = 32_000
    """opencode's overflow test: the prompt passes the window less the output room."""

    def rewriter(self, window: int) -> Rewriter | None:
        prune = Prune(self.protect, self.minimum, "[Old tool result content cleared]")
        return Chain([prune, Summarize(window - self.output_reserve, tail=0)])


@dataclass
class OpenhandsSummary(NoManagement):
    name: str = "summary-openhands"
    label: str = "OpenHands: LLM summarizing condenser (120 events, keep half)"
    max_events: int = 120

    def rewriter(self, window: int) -> Rewriter | None:
        threshold = Config(context_window=window).autocompact_threshold
        return Summarize(
            threshold,
            tail=window // 4,
            instruction=OPENHANDS_INSTRUCTION,
            system=None,
            events=True,
            max_messages=self.max_events,
        )


@dataclass
class NoteOnly:
    """The physical limit's request: the system prompt, the tools, a note of the planted facts seen
    before this turn (each as the sentence that stated it), a note of the earlier work stated before
    it (`Reference.note`) and the current turn, nothing else.

    An oracle, not an agent: it knows which facts and which earlier work the rest of the session asks
    for (`facts`, `references`, set from the profile for the run's seed) and drops everything else for
    free. The facts' note rides as a last system block, where the simulated model reads statements as
    it reads the conversation; the earlier work's rides as a text block before the current prompt, as
    the model resolves references from the conversation, never the system prompt.
    """

    facts: Sequence[Fact] = ()
    references: Sequence[Reference] = ()

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]:
        messages = body["messages"]
        starts = turn_starts(messages)
        cut = starts[-1] if starts else 0
        earlier = dumps(messages[:cut]).decode()
        seen = [f.line for f in self.facts if f.line in earlier]
        system = body.get("system") or []
        if isinstance(system, str):
            system = [{"type": "text", "text": system}]
        if seen:
            note = "Notes from earlier in this session: " + " ".join(s[0].upper() + s[1:] for s in seen)
            system = [*system, {"type": "text", "text": note}]
        kept = messages[cut:]
        done = [r.note for r in self.references if r.statement in earlier]
        if done and kept:
            first = kept[0]
            content = first.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
            work = {"type": "text", "text": "Notes on earlier work in this session: " + " ".join(done)}
            kept = [{**first, "content": [work, *blocks]}, *kept[1:]]
        return {**body, "system": system, "messages": kept}


@dataclass
class Limit(NoManagement):
    name: str = "limit"
    label: str = "physical limit: system prompt + tools + a note of the facts + the current turn (an oracle)"

    def rewriter(self, window: int) -> Rewriter | None:
        return NoteOnly()


@dataclass
class AnthropicClearing(NoManagement):
    name: str = "anthropic-clear"
    label: str = "context_management clear_tool_uses (server-side), clear_at_least 30K"
    trigger: int = 100_000
    """Anthropic's default trigger, in input tokens (scaled by `window / 200K` for other windows)."""
    keep: int = 3
    clear_at_least: int = 30_000

    def rewriter(self, window: int) -> Rewriter | None:
        scale = window / WINDOW
        return ContextManagement(
            [
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "input_tokens", "value": int(self.trigger * scale)},
                    "keep": {"type": "tool_uses", "value": self.keep},
                    "clear_at_least": {"type": "input_tokens", "value": int(self.clear_at_least * scale)},
                }
            ]
        )


@dataclass
class Foldline:
    name: str = "foldline"
    label: str = "foldline, every level, cache_edits (no public pricing: this server's model)"
    levels: bool = True
    collapse: bool = True
    cache_edits: bool = True
    memory_with_collapse: bool = False
    snip: bool = True
    working_window: int | None = None
    """The window the engine manages to, when smaller than the server's (`Config.context_window`)."""
    commit_when_it_pays: bool = True
    """Collapse commits a staged fold once it pays (design.md R3.3.7), not only at 90%."""
    span_target_tokens: int = CollapseConfig().span_target_tokens
    """Tokens of finished turns one Collapse summary covers."""
    summaries_budget_tokens: int = CollapseConfig().summaries_budget_tokens
    """Tokens of fold summaries in view at which AutoCompact replaces them (design.md R3.3.8)."""
    snip_nudge_share: float = Config().snip_nudge_share
    """Share of the window past which the model is reminded it can Snip."""
    transcript_named: bool = TranscriptConfig().named_to_model
    """The system prompt names the session's transcript for the model to search (design.md §3.5)."""
    folds: Literal["summary", "record"] = CollapseConfig().folds
    """What stands in for a folded span: the model's summary or a record of the entries."""

    def engine_window(self, window: int) -> int:
        return min(window, self.working_window) if self.working_window else window

    def capabilities(self) -> Capabilities | None:
        return FOLDLINE_SERVE_CAPABILITIES if self.cache_edits else None

    def rewriter(self, window: int) -> Rewriter | None:
        return None


def _no_edits(suffix: str, label: str, **change: Any) -> Callable[[], Strategy]:
    """A variant of the headline row (`foldline-no-edits-SUFFIX`) with one design choice changed."""
    return lambda: Foldline(name=f"foldline-no-edits-{suffix}", label=label, cache_edits=False, **change)


STRATEGIES: dict[str, Callable[[], Strategy]] = {
    "none": NoManagement,
    "truncate": Truncation,
    "mask10": Masking,
    "mask-batched": BatchedMasking,
    "summary-opencode": OpencodeSummary,
    "summary-openhands": OpenhandsSummary,
    "anthropic-clear": AnthropicClearing,
    "limit": Limit,
    "claude-code-design": lambda: Foldline(
        name="claude-code-design",
        label="Claude Code's design: AutoCompact with a cache-sharing fork, no Collapse, public API",
        collapse=False,
        cache_edits=False,
    ),
    "foldline-no-edits": lambda: Foldline(
        name="foldline-no-edits", label="foldline, every level, public API (headline)", cache_edits=False
    ),
    "foldline": Foldline,
    "foldline-no-edits-memory": _no_edits(
        "memory",
        "foldline-no-edits with session memory refreshed beside Collapse (the old default)",
        memory_with_collapse=True,
    ),
    "foldline-no-edits-no-snip": _no_edits(
        "no-snip", "foldline-no-edits with Snip off (no nudge, no id tags)", snip=False
    ),
    "foldline-no-edits-at-90": _no_edits(
        "at-90",
        "foldline-no-edits committing folds only at 90% of the window (the default before R3.3.7)",
        commit_when_it_pays=False,
    ),
    "foldline-no-edits-summaries": _no_edits(
        "summaries",
        "foldline-no-edits folding 10K-token spans into the model's summaries (R3.3.1, the old default)",
        folds="summary",
        span_target_tokens=10_000,
    ),
    "foldline-no-edits-span3k": _no_edits(
        "span3k",
        "foldline-no-edits folding 3K-token spans into records (2K by default)",
        span_target_tokens=3_000,
    ),
    "foldline-no-edits-span5k": _no_edits(
        "span5k",
        "foldline-no-edits folding 5K-token spans into records (2K by default)",
        span_target_tokens=5_000,
    ),
    "foldline-no-edits-span10k": _no_edits(
        "span10k",
        "foldline-no-edits folding 10K-token spans into records (2K by default)",
        span_target_tokens=10_000,
    ),
    "foldline-no-edits-budget5k": _no_edits(
        "budget5k",
        "foldline-no-edits replacing folds by one summary at 5K tokens of them (3K by default)",
        summaries_budget_tokens=5_000,
    ),
    "foldline-no-edits-budget2k": _no_edits(
        "budget2k",
        "foldline-no-edits replacing folds by one summary at 2K tokens of them (3K by default)",
        summaries_budget_tokens=2_000,
    ),
    "foldline-no-edits-budget10k": _no_edits(
        "budget10k",
        "foldline-no-edits replacing folds by one summary at 10K tokens of them (3K by default)",
        summaries_budget_tokens=10_000,
    ),
    "foldline-no-edits-nudge25": _no_edits(
        "nudge25",
        "foldline-no-edits reminding the model it can Snip past 25% of the window (50% by default)",
        snip_nudge_share=0.25,
    ),
    "foldline-no-edits-no-transcript": _no_edits(
        "no-transcript",
        "foldline-no-edits without the session's transcript named in the system prompt (the default before)",
        transcript_named=False,
    ),
    "foldline-no-edits-100k": _no_edits(
        "100k",
        "foldline-no-edits managing to a 100K working window on the 200K model",
        working_window=100_000,
    ),
}
"""Every strategy, in table order. `none` is opt-in (`--strategies`): no model takes its window;
`mask10` too (the naive masking no agent ships; `mask-batched` is its best form); `anthropic-clear`
(the slowest row, and 3-5x the headline's cost on every profile of the last page that ran it) and
`foldline` (cache_edits have no public pricing, so the row is never judged) to keep `make bench`
near two hours on two cores (122 minutes at c058fdd; the summaries row adds 15 sessions); and
`foldline-no-edits-memory`, `foldline-no-edits-no-snip`, `foldline-no-edits-span3k`,
`-span5k`, `-span10k`, `-budget5k`, `-budget2k`, `-budget10k` and `-nudge25`: each measures one change of
foldline's defaults side by side. `foldline-no-edits-summaries` (model-written folds, the default
before records), `foldline-no-edits-at-90` (the default before R3.3.7) and `foldline-no-edits-100k`
(a smaller working window) run by default: the page shows the design choices beside the headline."""
_OPT_IN = (
    "none",
    "mask10",
    "anthropic-clear",
    "foldline",
    "foldline-no-edits-memory",
    "foldline-no-edits-no-snip",
    "foldline-no-edits-span3k",
    "foldline-no-edits-span5k",
    "foldline-no-edits-span10k",
    "foldline-no-edits-budget5k",
    "foldline-no-edits-budget2k",
    "foldline-no-edits-budget10k",
    "foldline-no-edits-nudge25",
)
DEFAULT_STRATEGIES = tuple(n for n in STRATEGIES if n not in _OPT_IN)


# --- running ------------------------------------------------------------------------------------


class FirstBody:
    """A provider that notes the system prompt and tools of the first request it sends (`fixed`,
    by `TokenCounter.fixed`): what every request of the session carries besides its messages."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.fixed: int | None = None

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        if self.fixed is None:
            self.fixed = TokenCounter().fixed(body)
        return self.inner.stream(body, betas=betas)

    async def count_tokens(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> int | None:
        return await count_tokens(self.inner, body, betas)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


@dataclass
class Outcome:
    """One (profile, strategy) run."""

    profile: str
    strategy: Strategy
    report: SimulationReport
    http_400_server: int
    summary_requests: int
    fixed_tokens: int | None = None

    def row(self) -> dict[str, Any]:
        return report_row(
            self.profile,
            self.strategy.name,
            self.strategy.label,
            self.report,
            self.http_400_server,
            fixed_tokens=self.fixed_tokens,
        )


def report_row(
    profile: str,
    name: str,
    label: str,
    report: SimulationReport,
    http_400_server: int = 0,
    *,
    fixed_tokens: int | None = None,
    verbosity_scale: float = 1.0,
    summary_fidelity: float = 1.0,
    summary_fact_budget: int = FACT_BUDGET,
) -> dict[str, Any]:
    """The table's row of one session (`Outcome.row`; benchmarks/peers.py builds a real client's
    `SimulationReport` from the server's request log and prints this same row). `fixed_tokens`: the
    system prompt and tools of the session's first request, where known; `verbosity_scale`,
    `summary_fidelity` and `summary_fact_budget`: the simulated model's settings the session ran at."""
    usage = report.usage
    cost = usage.cost()
    last: dict[int, int] = {}
    for turn, tokens in zip(report.request_turn, report.request_tokens, strict=True):
        last[turn] = tokens
    return {
        "profile": profile,
        "strategy": name,
        "label": label,
        "cost_usd": round(cost, 4),
        "cost_uncached_usd": round(usage.cost(cached=False), 4),
        "seed": report.seed,
        # answered requests only: one refused as too long is not billed, at any rate
        "long_context_requests": sum(
            1 for r in report.requests if r.status is None and r.prompt > LONG_CONTEXT_THRESHOLD
        ),
        "cache_read_share": round(usage.read_share, 4),
        "cache_write_share": round(usage.cache_write / usage.prompt, 4) if usage.prompt else 0.0,
        "peak_context_tokens": report.peak_request,
        "api_calls": report.api_calls,
        "main_requests": report.main_requests,
        "summary_calls": report.fork_requests,
        "http_400": max(report.http_400s, http_400_server),
        "facts_planted": report.facts_planted,
        "facts_asked": report.facts_asked,
        "facts_retained": report.facts_retained,
        "output_facts_asked": report.output_facts_asked,
        "output_facts_retained": report.output_facts_retained,
        "references": report.references,
        "recoveries": report.recoveries,
        "quality_misses": report.quality_misses,
        "turns_completed": report.turns_done,
        "turns_planned": report.turns_planned,
        "receipts": report.receipts,
        "errors": report.errors[:3],
        "stopped": report.stopped,
        "wall_s": round(report.wall_s, 1),
        "context_per_turn": [last[t] for t in sorted(last)],
        "cost_per_turn": [round(c, 5) for c in report.turn_costs()],
        "fixed_tokens": fixed_tokens,
        "verbosity_scale": verbosity_scale,
        # foldline as shipped states its environment; the row says whether this session did, and
        # the date it stated (the simulated clock's: the same for every run of a seed)
        "environment": bool(report.environment),
        "environment_date": _stated_date(report.environment),
        "summary_fidelity": summary_fidelity,
        "summary_fact_budget": summary_fact_budget,
    }


def _stated_date(environment: str) -> str | None:
    found = re.search(r"^Date: (\S+)$", environment, re.MULTILINE)
    return found.group(1) if found else None


async def play(
    provider: Provider,
    strategy: Strategy,
    rewriter: Rewriter | None,
    *,
    profile: str,
    turns: int,
    seed: int,
    window: int,
    root: Path,
    on_turn: Callable[[int, SimulationReport], None] | None = None,
    facts_at_end: bool = False,
    environment: bool = True,
) -> SimulationReport:
    """One session of `profile` under `strategy` over `provider` (whose capabilities it already has),
    its requests rewritten by `rewriter` (`strategy.rewriter(window)`) if any; `environment`: state
    the environment block foldline ships."""
    sent: Provider = Rewriting(provider, rewriter) if rewriter is not None else provider
    config = Config(
        context_window=strategy.engine_window(window),
        collapse=CollapseConfig(
            enabled=strategy.collapse,
            commit_when_it_pays=strategy.commit_when_it_pays,
            span_target_tokens=getattr(strategy, "span_target_tokens", CollapseConfig().span_target_tokens),
            summaries_budget_tokens=getattr(
                strategy, "summaries_budget_tokens", CollapseConfig().summaries_budget_tokens
            ),
            folds=getattr(strategy, "folds", CollapseConfig().folds),
        ),
        snip_enabled=strategy.snip,
        snip_nudge_share=getattr(strategy, "snip_nudge_share", Config().snip_nudge_share),
        autocompact=AutoCompactConfig(
            memory=SessionMemoryConfig(with_collapse=strategy.memory_with_collapse)
        ),
        transcript=TranscriptConfig(
            sessions_dir=root / "sessions",
            fsync="never",
            # foldline's design (and Claude Code's, which names its transcript after a compaction);
            # the other agents' designs played here name none
            named_to_model=getattr(strategy, "transcript_named", False),
        ),
    )
    report = await simulate(
        sent,
        profile=profile,
        turns=turns,
        seed=seed,
        workspace=root / "ws",
        sessions_dir=root / "sessions",
        config=config,
        on_turn=on_turn,
        levels=strategy.levels,
        output_facts=True,
        references=True,
        # foldline is judged with the system prompt it ships (the limit row sends it too)
        system=system_prompt_for(config.window, config.full_system_prompt_min_window),
        facts_at_end=facts_at_end,
        environment=environment,
    )
    for summarizer in summarizers(rewriter):
        report.requests.extend(summarizer.requests)  # answered requests outside the main loop
    return report


def run_pair(profile: str, strategy: Strategy, seed: int, args: argparse.Namespace, root: Path) -> Outcome:
    from simulator import serve  # benchmarks/ is on sys.path when run as a script

    started = time.perf_counter()

    seen: dict[str, SimulationReport] = {}

    def progress(turn: int, report: SimulationReport) -> None:
        seen["report"] = report
        if (turn + 1) % max(1, args.turns // 5) == 0:
            last = report.request_tokens[-1] if report.request_tokens else 0
            print(
                f"    {profile}/{strategy.name} turn {turn + 1:4}: {last:>9,} tokens, "
                f"{time.perf_counter() - started:6.1f} s",
                file=sys.stderr,
                flush=True,
            )

    server_window = UNLIMITED if strategy.name == "none" else args.window
    with serve(
        seed,
        profile,
        server_window,
        getattr(args, "verbosity_scale", 1.0),
        summary_fidelity=getattr(args, "summary_fidelity", 1.0),
        summary_fact_budget=getattr(args, "summary_fact_budget", FACT_BUDGET),
    ) as server:
        provider = FirstBody(
            AnthropicProvider(base_url=server.url, api_key="benchmark", capabilities=strategy.capabilities())
        )
        rewriter = strategy.rewriter(args.window)
        if isinstance(rewriter, NoteOnly):  # the oracle knows the session's facts and earlier work
            rewriter.facts = planted_facts(seed, output_facts=True)
            rewriter.references = references_for(seed)
        try:
            report = asyncio.run(
                asyncio.wait_for(
                    play(
                        provider,
                        strategy,
                        rewriter,
                        profile=profile,
                        turns=args.turns,
                        seed=seed,
                        window=args.window,
                        root=root,
                        on_turn=progress,
                        facts_at_end=args.facts_at_end,
                        environment=getattr(args, "environment", True),
                    ),
                    args.pair_timeout,
                )
            )
        except TimeoutError:
            # A hung run must not stall the table: keep what the last completed turn saw.
            report = seen.get("report") or SimulationReport(
                profile=profile, seed=seed, turns_planned=args.turns
            )
            report.wall_s = time.perf_counter() - started
            report.errors.append(f"timed out after {args.pair_timeout} s")
        statuses = server.statuses()
    summaries = sum(len(s.requests) for s in summarizers(rewriter))
    return Outcome(profile, strategy, report, statuses.get(400, 0), summaries, provider.fixed)


FLEET_KIND = "economics:fleet_row"
"""The fleet unit kind of one (profile, strategy, seed) session: `fleet_row`, found on the workers
with `benchmarks/` on their path."""


def unit_of(profile: str, name: str, seed: int, args: argparse.Namespace, fidelity: float = 1.0) -> Unit:
    """One (profile, strategy, seed) session of this run, its summaries at `fidelity`, as a fleet unit."""
    return Unit(
        kind=FLEET_KIND,
        profile=profile,
        strategy=name,
        seed=seed,
        turns=args.turns,
        window=args.window,
        knobs=knobs(
            verbosity_scale=float(args.verbosity_scale),
            facts_at_end=bool(args.facts_at_end),
            pair_timeout=float(args.pair_timeout),
            environment=bool(getattr(args, "environment", True)),
            summary_fidelity=float(fidelity),
            summary_fact_budget=int(getattr(args, "summary_fact_budget", FACT_BUDGET)),
        ),
    )


def fleet_row(unit: Unit, root: Path) -> dict[str, Any]:
    """The fleet's unit function: one pair's row, run in `root` (a fresh folder of one length)."""
    args = argparse.Namespace(
        turns=unit.turns,
        window=unit.window,
        verbosity_scale=float(unit.knob("verbosity_scale", 1.0)),
        facts_at_end=bool(unit.knob("facts_at_end", False)),
        pair_timeout=float(unit.knob("pair_timeout", 3600.0)),
        environment=bool(unit.knob("environment", True)),
        summary_fidelity=float(unit.knob("summary_fidelity", 1.0)),
        summary_fact_budget=int(unit.knob("summary_fact_budget", FACT_BUDGET)),
    )
    return pair_row(unit.profile, unit.strategy, unit.seed, args, root)


def run_units(
    units: Sequence[Unit], args: argparse.Namespace, results: str
) -> tuple[list[dict[str, Any]], FleetReport]:
    """Every unit's row (in the units' order) and the fleet that made them, from the fleet
    (`--jobs`, `--address`) into the results folder `results`."""
    here = str(Path(__file__).resolve().parent)
    runtime_env = loads(args.runtime_env) if getattr(args, "runtime_env", None) else None
    with live_progress() as progress:
        report = run_fleet(
            units,
            results,
            address=args.address,
            workers=args.jobs,
            in_process=args.jobs <= 1 and args.address is None and not getattr(args, "ray", False),
            paths=[here, str(Path(here).parent / "src")],
            runtime_env=runtime_env,
            progress=progress,
        )
    for failure in report.failed:
        print(f"economics: {failure['unit_key']} failed: {failure['error'][-600:]}", file=sys.stderr)
    print(
        f"fleet: {len(report.rows)} rows, {len(report.failed)} failed, {report.wall_s:.0f} s on "
        f"{report.workers:g} CPUs, {report.nodes} node(s); results in {results}",
        file=sys.stderr,
        flush=True,
    )
    return [{k: v for k, v in row.items() if k != "unit"} for row in report.rows], report


def add_fleet_options(parser: argparse.ArgumentParser) -> None:
    """`--jobs`, `--address`, `--results` and `--runtime-env`: where the units run and their rows go."""
    parser.add_argument(
        "--jobs", type=int, default=1, help="local workers (Ray CPUs); 1 runs the units in this process"
    )
    parser.add_argument("--address", default=None, help="an existing Ray cluster to run the units on")
    parser.add_argument("--ray", action="store_true", help="a local Ray even at --jobs 1 (to time it)")
    parser.add_argument(
        "--results",
        default=None,
        help="the results folder (a path or fsspec URL); a unit with a row there is not run again "
        "(default: a temporary folder)",
    )
    parser.add_argument(
        "--runtime-env", default=None, help="Ray's runtime environment as JSON (working_dir, pip, env_vars)"
    )


def add_fidelity_options(parser: argparse.ArgumentParser) -> None:
    """`--fidelity` and `--summary-fact-budget`: how lossy the simulated model's summaries are."""
    parser.add_argument(
        "--fidelity",
        default="1.0",
        help="summary fidelities q, comma-separated: every cell runs once per q (foldline serve "
        "--summary-fidelity: each stated fact survives one summary with probability q)",
    )
    parser.add_argument(
        "--summary-fact-budget",
        type=int,
        default=FACT_BUDGET,
        help="most stated facts one summary keeps, the oldest lost first "
        "(foldline serve --summary-fact-budget)",
    )


def user_facts(row: dict[str, Any]) -> tuple[int, int]:
    """(retained, asked) of the facts the user stated in a prompt (rows of older runs have no
    output facts)."""
    output = row.get("output_facts_retained", 0), row.get("output_facts_asked", 0)
    return row["facts_retained"] - output[0], row["facts_asked"] - output[1]


def pair_row(profile: str, name: str, seed: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """One (profile, strategy, seed) row (pairs may run in other processes)."""
    strategy = STRATEGIES[name]()
    print(f"== {profile} / {strategy.label}, seed {seed}, {args.turns} turns", file=sys.stderr, flush=True)
    row = {
        **run_pair(profile, strategy, seed, args, root).row(),
        "verbosity_scale": args.verbosity_scale,
        "summary_fidelity": getattr(args, "summary_fidelity", 1.0),
        "summary_fact_budget": getattr(args, "summary_fact_budget", FACT_BUDGET),
    }
    print(
        f"   {profile}/{name}/{seed}: ${row['cost_usd']:.2f}, read {row['cache_read_share']:.1%}, "
        f"peak {row['peak_context_tokens']:,}, 400s {row['http_400']}, facts "
        f"{row['facts_retained']}/{row['facts_asked']} at q {row['summary_fidelity']:g}, earlier work "
        f"{row['references']} referred, {row['recoveries']} recovered, {row['quality_misses']} missed, "
        f"{row['wall_s']} s",
        file=sys.stderr,
        flush=True,
    )
    return row


STUDENT_T = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
"""Student's t, two-sided 95% (the 0.975 quantile), for 1..30 degrees of freedom (a printed table:
no statistics package is a dependency). Past 30 the value for 30 is used, which only widens an
interval (the true quantile falls towards 1.960)."""


def mean_ci(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high): the mean and its 95% Student-t confidence interval. One value has no
    interval: (-inf, inf), which decides no verdict."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, float("-inf"), float("inf")
    half = STUDENT_T[min(len(values) - 1, len(STUDENT_T)) - 1] * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class Spread:
    """Mean, range and the mean's 95% confidence interval of one column over seeds."""

    mean: float
    low: float
    high: float
    ci_low: float = float("-inf")
    ci_high: float = float("inf")

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        mean, ci_low, ci_high = mean_ci(values)
        return cls(mean, min(values), max(values), ci_low, ci_high)

    def show(self, fmt: str) -> str:
        if self.low == self.high:
            return format(self.mean, fmt)
        return f"{format(self.mean, fmt)} ({format(self.low, fmt)}–{format(self.high, fmt)})"

    def show_ci(self, fmt: str) -> str:
        """The 95% interval of the mean, `[low, high]`, or `-` where one seed gives none."""
        if self.ci_low == float("-inf"):
            return "-"
        return f"[{format(self.ci_low, fmt)}, {format(self.ci_high, fmt)}]"


COLUMNS = (
    "cost_usd",
    "cache_read_share",
    "peak_context_tokens",
    "api_calls",
    "summary_calls",
    "http_400",
    "facts_retained",
    "facts_asked",
    "output_facts_retained",
    "output_facts_asked",
    "turns_completed",
    "turns_planned",
)


def scale_of(row: dict[str, Any]) -> float:
    """The simulated model's reply-length scale a row ran at (rows from before the knob: 1.0)."""
    return float(row.get("verbosity_scale", 1.0))


def fidelity_of(row: dict[str, Any]) -> float:
    """The summary fidelity q a row ran at (rows from before the setting: 1.0, every fact kept)."""
    return float(row.get("summary_fidelity", 1.0))


WILSON_Z = 1.959964
"""The normal 0.975 quantile: a two-sided 95% interval."""


@dataclass(frozen=True)
class Retention:
    """Facts retained of those asked, pooled over a cell's seeds, with the 95% Wilson score interval
    of the share (each asked fact one trial; seeds pooled, so it is narrower than a per-seed
    interval would be where seeds differ)."""

    kept: int
    asked: int

    def interval(self) -> tuple[float, float]:
        """(low, high) of the share; (0, 1) when nothing was asked."""
        if self.asked == 0:
            return 0.0, 1.0
        n, share, z2 = self.asked, self.kept / self.asked, WILSON_Z**2
        centre = (share + z2 / (2 * n)) / (1 + z2 / n)
        half = WILSON_Z / (1 + z2 / n) * (share * (1 - share) / n + z2 / (4 * n * n)) ** 0.5
        # at 0 or all kept the interval ends exactly at 0 or 1 (rounding would leave 0.9999...)
        low = 0.0 if self.kept == 0 else max(0.0, centre - half)
        return low, 1.0 if self.kept == self.asked else min(1.0, centre + half)

    def show(self) -> str:
        if self.asked == 0:
            return "-"
        low, high = self.interval()
        return f"{self.kept}/{self.asked} {self.kept / self.asked:.0%} [{low:.0%}, {high:.0%}]"


def aggregate(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (profile, strategy, reply-length scale, summary fidelity): each column's `Spread`
    over the seeds that ran, in row order; `retention` (facts kept of those asked, pooled over the
    seeds, with its Wilson interval); `cost_by_seed` (each seed's cost, for ratios paired by seed: a
    seed is the same simulated user in every row) and `fixed_tokens` (the system prompt and tools,
    where the rows know them)."""
    groups: dict[tuple[str, str, float, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["profile"], r["strategy"], scale_of(r), fidelity_of(r)), []).append(r)
    out = []
    for (profile, strategy, scale, fidelity), group in groups.items():
        cells: dict[str, Any] = {"profile": profile, "strategy": strategy, "label": group[0]["label"]}
        cells["verbosity_scale"] = scale
        cells["summary_fidelity"] = fidelity
        cells["summary_fact_budget"] = group[0].get("summary_fact_budget", FACT_BUDGET)
        cells["retention"] = Retention(
            sum(int(r["facts_retained"]) for r in group), sum(int(r["facts_asked"]) for r in group)
        )
        cells["seeds"] = sorted(r["seed"] for r in group)
        for column in COLUMNS:
            cells[column] = Spread.of([float(r[column]) for r in group])
        for column in REFERENCE_COLUMNS:
            cells[column] = Spread.of([float(r.get(column, 0)) for r in group])
        # pooled over seeds: a session asks only a few references, too few for a per-seed rate
        cells["miss_rate"] = wilson(
            sum(int(r.get("quality_misses", 0)) for r in group),
            sum(int(r.get("references", 0)) for r in group),
        )
        user = [user_facts(r) for r in group]
        cells["user_facts_retained"] = Spread.of([float(k) for k, _ in user])
        cells["user_facts_asked"] = Spread.of([float(a) for _, a in user])
        cells["cost_by_seed"] = {r["seed"]: float(r["cost_usd"]) for r in group}  # seeds pair across rows
        fixed = [float(r["fixed_tokens"]) for r in group if r.get("fixed_tokens") is not None]
        cells["fixed_tokens"] = Spread.of(fixed) if fixed else None
        contexts = [r["context_per_turn"] for r in group if r.get("context_per_turn")]
        if contexts:  # what each request carried, on average: cache reads make most of a long bill
            cells["mean_context_tokens"] = Spread.of([sum(c) / len(c) for c in contexts])
        out.append(cells)
    return out


def wilson(hits: int, trials: int) -> tuple[float, float, float]:
    """(rate, low, high): `hits / trials` and its 95% Wilson score interval (0 trials: no interval)."""
    if trials == 0:
        return 0.0, float("-inf"), float("inf")
    z, rate = 1.96, hits / trials
    centre = (rate + z * z / (2 * trials)) / (1 + z * z / trials)
    half = z * ((rate * (1 - rate) + z * z / (4 * trials)) / trials) ** 0.5 / (1 + z * z / trials)
    return rate, max(0.0, centre - half), min(1.0, centre + half)


REFERENCE_COLUMNS = ("references", "recoveries", "quality_misses")
"""Earlier-work columns (rows of older runs have none: they count 0)."""


def miss_rate_text(cell: dict[str, Any]) -> str:
    """The pooled miss rate of a cell's references with its 95% interval, or `-` where none were asked."""
    rate, low, high = cell["miss_rate"]
    if low == float("-inf"):
        return "-"
    return f"{rate:.0%} [{low:.0%}, {high:.0%}]"


def feasible(cell: dict[str, Any]) -> bool:
    """Completed every turn of every seed with no HTTP 400."""
    return cell["turns_completed"].low >= cell["turns_planned"].high and cell["http_400"].high == 0


def table_lines(cells: Sequence[dict[str, Any]]) -> list[str]:
    """The side-by-side table (markdown), one line per `aggregate` cell: mean (range) over seeds."""
    out = [
        "| profile | strategy | seeds | cost | cache read | peak context | API calls | summary calls "
        "| HTTP 400 | facts (user) | facts (tool output) | earlier work: referred | recovered "
        "| missed | miss rate [95%] | turns | q | retention [95%] |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for c in cells:
        out.append(
            f"| {c['profile']} | {c['strategy']} | {len(c['seeds'])} | ${c['cost_usd'].show(',.2f')} "
            f"| {c['cache_read_share'].show('.1%')} | {c['peak_context_tokens'].show(',.0f')} "
            f"| {c['api_calls'].show('.0f')} | {c['summary_calls'].show('.0f')} "
            f"| {c['http_400'].show('.0f')} "
            f"| {c['user_facts_retained'].show('.1f')}/{c['user_facts_asked'].show('.0f')} "
            f"| {c['output_facts_retained'].show('.1f')}/{c['output_facts_asked'].show('.0f')} "
            f"| {c['references'].show('.0f')} | {c['recoveries'].show('.1f')} "
            f"| {c['quality_misses'].show('.1f')} | {miss_rate_text(c)} "
            f"| {c['turns_completed'].show('.0f')}/{c['turns_planned'].show('.0f')} "
            f"| {c['summary_fidelity']:g} | {c['retention'].show()} |"
        )
    return out


def print_table(rows: Sequence[dict[str, Any]], out: Any = sys.stdout) -> None:
    """The table, its lines grouped by q (the rows' order within each)."""
    cells = sorted(aggregate(rows), key=lambda c: -c["summary_fidelity"])
    print("\n".join(table_lines(cells)), file=out)


def checked_fidelity_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[float]:
    """The q values of `add_fidelity_options`' flags, or the parser's error for a bad one."""
    try:
        qs = fidelities(args.fidelity)
    except ValueError as e:
        parser.error(str(e))
    if args.summary_fact_budget < 0:
        parser.error(f"--summary-fact-budget must be 0 or more, not {args.summary_fact_budget}")
    return qs


def fidelities(text: str) -> list[float]:
    """`--fidelity`'s comma-separated values, each checked to lie in [0, 1].

    Raises:
        ValueError: a value that is no number or lies outside [0, 1].
    """
    values = [float(x) for x in text.split(",") if x.strip()]
    wrong = [v for v in values if not 0.0 <= v <= 1.0]
    if wrong or not values:
        raise ValueError(f"--fidelity takes values between 0 and 1, not {text!r}")
    return list(dict.fromkeys(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--profiles", default=",".join(DEFAULT_PROFILES))
    parser.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES))
    parser.add_argument("--seeds", default="7,8,9", help="comma-separated seeds; every cell runs each")
    parser.add_argument("--pair-timeout", type=float, default=3600.0, help="seconds per (profile, strategy)")
    parser.add_argument("--window", type=int, default=WINDOW, help="the managed strategies' window")
    parser.add_argument("--json", action="store_true", help="one JSON object per (profile, strategy, seed)")
    add_fleet_options(parser)
    parser.add_argument(
        "--facts-at-end",
        action="store_true",
        help="ask for the planted facts in the last turns (the first one stated in the very last)",
    )
    parser.add_argument(
        "--verbosity-scale",
        type=float,
        default=1.0,
        help="the simulated model's reply length, times its calibration (foldline serve --verbosity-scale)",
    )
    parser.add_argument(
        "--no-environment",
        dest="environment",
        action="store_false",
        help="send no environment block (foldline as shipped sends one: every row does by default)",
    )
    add_fidelity_options(parser)
    args = parser.parse_args()
    if not args.verbosity_scale >= 0:
        parser.error(f"--verbosity-scale must be 0 or more, not {args.verbosity_scale}")
    qs = checked_fidelity_options(parser, args)
    profiles = [p for p in args.profiles.split(",") if p]
    names = [s for s in args.strategies.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        parser.error(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")
    cells = [(p, n, seed, q) for q in qs for p in profiles for n in names for seed in seeds]
    units = [unit_of(p, n, seed, args, q) for p, n, seed, q in cells]
    with tempfile.TemporaryDirectory() as tmp:
        rows, _ = run_units(units, args, args.results or os.path.join(tmp, "results"))
    if args.json:
        for row in rows:
            print(dumps(row).decode(), flush=True)
    else:
        print_table(rows)  # the rows come back in the units' order: profile, strategy, seed


if __name__ == "__main__":
    main()
