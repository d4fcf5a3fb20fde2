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

- `none`: no management on an unlimited window (the cost baseline: every ratio is against it).
- `truncate`: drop the oldest whole user turns (a turn starts at a typed prompt, so a tool_use and
  its tool_result are never split) until the request fits under the 200K window's AutoCompact
  threshold (LangGraph `trim_messages`-style).
- `mask10`: observation masking, every tool result but the last 10 replaced by a placeholder on
  every request (OpenHands `ObservationMaskingCondenser`, JetBrains' keep-last-10).
- `summary`: over the threshold, one separate summary request with its own system prompt and no
  tools (so it shares no cache prefix with the main loop), the opencode headings, then the older
  turns replaced by the summary and about a quarter of the window kept verbatim (OpenHands
  `LLMSummarizingCondenser` / opencode compaction).
- `anthropic-clear`: Anthropic's `clear_tool_uses_20250919` defaults (trigger at 100K input tokens,
  keep the last 3 tool uses, no `clear_at_least`), as a client-side rewrite: once the full request
  is over the trigger, every tool result but the last 3 is replaced by a placeholder, as the server
  would. (`foldline serve` implements `context_management` now; the SDK's stable `messages.create`
  the provider calls takes no such parameter, so this strategy does not use it yet.)
- `foldline`: every level (`install_levels`), `cache_edits` declared as foldline serve supports them.
- `foldline-no-edits`: every level, a provider that declares no `cache_edits`.

The managed strategies run on a 200K window (the server refuses larger prompts with a 400). The
rewriting strategies run the engine itself on an unlimited window, so that the engine's own
blocking limit never refuses what the rewrite would have shrunk; the server still enforces 200K.
Token counts for the rewrites use the server's tokenizer (the one that bills), counted per message.

Per pair: cost at Sonnet list prices (main loop and every fork or summary request), cache-read
share, peak request, API calls, summary calls (requests that were not the main loop's: foldline's
forks, the summary strategy's summaries), HTTP 400s, planted facts retained of those asked, turns
completed, cost ratio to `none` on the same profile. Two kinds of fact are planted
(`profiles.planted_facts(output_facts=True)`): five the user states in a prompt, and three that
only a script's long output states once, in passing, which no answer repeats. Masking or clearing
old tool results cannot lose the first kind; it can lose the second, so the second is reported
apart (`output_facts_*`). `--json` prints one object per pair on stdout (progress goes to stderr).
`--jobs N` runs N pairs at once (each pair is an engine and a server process; on a 2-core machine
the engine and its server each use under a core, so 2 jobs roughly halve the wall time: all 21 pairs
at 300 turns took 55 minutes).

Run: `PYTHONPATH=src .venv/bin/python benchmarks/economics.py [--turns 300]
[--profiles feature,debug,swe] [--strategies none,truncate,...] [--seed 7] [--json]`
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import multiprocessing
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from foldline._json import dumps
from foldline.config import Config, TranscriptConfig
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.providers.base import Capabilities, Provider
from foldline.server.caching import flatten, total_tokens
from foldline.server.tokenizer import count_block
from foldline.simulation import MeteredRequest, SimulationReport, simulate
from foldline.stream import MessageDelta, MessageStart, StreamEvent, TextDelta

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
        async for event in self.inner.stream(sent, betas=betas):
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


SUMMARY_SYSTEM = (
    "You are a helpful AI assistant tasked with summarizing conversations. Summarize what was done, "
    "what is being worked on, which files matter and what comes next, for another agent that will "
    "continue the work."
)
SUMMARY_INSTRUCTION = (
    "Provide a detailed summary of the conversation above. Use these sections:\n"
    "## Goal\n## Instructions\n## Discoveries\n## Accomplished\n## Relevant files\n"
)


@dataclass
class Summarize:
    """Over `threshold`, summarize the older turns in a separate request and keep `tail` tokens verbatim.

    The summary request has its own system prompt and no tools, so it shares no cached prefix with the
    main loop; the next main request starts with the summary, so its prefix is written anew.
    """

    threshold: int
    tail: int
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

    async def rewrite(self, body: dict[str, Any], inner: Provider) -> dict[str, Any]:
        messages = body["messages"]
        view = self.view(messages)
        if self.counter.fixed(body) + sum(self.counter.message(m) for m in view) <= self.threshold:
            return {**body, "messages": view}
        sizes = [self.counter.message(m) for m in messages]
        starts = [s for s in turn_starts(messages) if s > self.covered]
        cut = next((s for s in starts if sum(sizes[s:]) <= self.tail), starts[-1] if starts else 0)
        if cut <= self.covered:
            return {**body, "messages": view}  # nothing older to fold: send it and let the server judge
        older = self.view(messages[:cut])
        self.summary = await self._summarize(body, older, inner)
        self.covered = cut
        return {**body, "messages": self.view(messages)}

    async def _summarize(self, body: dict[str, Any], older: list[dict[str, Any]], inner: Provider) -> str:
        request = {
            "model": body["model"],
            "max_tokens": body.get("max_tokens", 8192),
            "system": SUMMARY_SYSTEM,
            "messages": [*_strip_cache_control(older), {"role": "user", "content": SUMMARY_INSTRUCTION}],
        }
        metered = MeteredRequest()
        self.requests.append(metered)
        text: list[str] = []
        async for event in inner.stream(request):
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
    label: str = "no management, unlimited window"
    levels: bool = False

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
    label: str = "observation masking, keep 10"
    keep: int = 10

    def rewriter(self, window: int) -> Rewriter | None:
        return Mask(self.keep, "<MASKED>")


@dataclass
class Summary(NoManagement):
    name: str = "summary"
    label: str = "LLM summary, no cache sharing"

    def rewriter(self, window: int) -> Rewriter | None:
        return Summarize(Config(context_window=window).autocompact_threshold, tail=window // 4)


@dataclass
class AnthropicClearing(NoManagement):
    name: str = "anthropic-clear"
    label: str = "clear_tool_uses defaults (client-side)"
    trigger: int = 100_000
    """Anthropic's default trigger, in input tokens (scaled by `window / 200K` for other windows)."""
    keep: int = 3

    def rewriter(self, window: int) -> Rewriter | None:
        trigger = self.trigger * window // WINDOW
        return Mask(self.keep, "[tool result cleared]", trigger=trigger)


@dataclass
class Foldline:
    name: str = "foldline"
    label: str = "foldline, every level, cache_edits"
    levels: bool = True
    cache_edits: bool = True

    def engine_window(self, window: int) -> int:
        return window

    def capabilities(self) -> Capabilities | None:
        return FOLDLINE_SERVE_CAPABILITIES if self.cache_edits else None

    def rewriter(self, window: int) -> Rewriter | None:
        return None


STRATEGIES: dict[str, Callable[[], Strategy]] = {
    "none": NoManagement,
    "truncate": Truncation,
    "mask10": Masking,
    "summary": Summary,
    "anthropic-clear": AnthropicClearing,
    "foldline": Foldline,
    "foldline-no-edits": lambda: Foldline(
        name="foldline-no-edits", label="foldline, every level, no cache_edits", cache_edits=False
    ),
}


# --- running ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One (profile, strategy) run."""

    profile: str
    strategy: Strategy
    report: SimulationReport
    http_400_server: int
    summary_requests: int

    def row(self, baseline_cost: float | None) -> dict[str, Any]:
        report, usage = self.report, self.report.usage
        cost = usage.cost()
        last: dict[int, int] = {}
        for turn, tokens in zip(report.request_turn, report.request_tokens, strict=True):
            last[turn] = tokens
        return {
            "profile": self.profile,
            "strategy": self.strategy.name,
            "label": self.strategy.label,
            "cost_usd": round(cost, 4),
            "cost_uncached_usd": round(usage.cost(cached=False), 4),
            "ratio_vs_none": round(cost / baseline_cost, 4) if baseline_cost else None,
            "cache_read_share": round(usage.read_share, 4),
            "cache_write_share": round(usage.cache_write / usage.prompt, 4) if usage.prompt else 0.0,
            "peak_context_tokens": report.peak_request,
            "api_calls": report.api_calls,
            "main_requests": report.main_requests,
            "summary_calls": report.fork_requests,
            "http_400": max(report.http_400s, self.http_400_server),
            "facts_planted": report.facts_planted,
            "facts_asked": report.facts_asked,
            "facts_retained": report.facts_retained,
            "output_facts_asked": report.output_facts_asked,
            "output_facts_retained": report.output_facts_retained,
            "turns_completed": report.turns_done,
            "turns_planned": report.turns_planned,
            "receipts": report.receipts,
            "errors": report.errors[:3],
            "stopped": report.stopped,
            "wall_s": round(report.wall_s, 1),
            "context_per_turn": [last[t] for t in sorted(last)],
        }


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
) -> SimulationReport:
    """One session of `profile` under `strategy` over `provider` (whose capabilities it already has),
    its requests rewritten by `rewriter` (`strategy.rewriter(window)`) if any."""
    sent: Provider = Rewriting(provider, rewriter) if rewriter is not None else provider
    config = Config(
        context_window=strategy.engine_window(window),
        transcript=TranscriptConfig(sessions_dir=root / "sessions", fsync="never"),
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
    )
    if isinstance(rewriter, Summarize):
        report.requests.extend(rewriter.requests)  # answered requests outside the main loop
    return report


def run_pair(profile: str, strategy: Strategy, args: argparse.Namespace, root: Path) -> Outcome:
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
    with serve(args.seed, profile, server_window) as server:
        provider = AnthropicProvider(
            base_url=server.url, api_key="benchmark", capabilities=strategy.capabilities()
        )
        rewriter = strategy.rewriter(args.window)
        try:
            report = asyncio.run(
                asyncio.wait_for(
                    play(
                        provider,
                        strategy,
                        rewriter,
                        profile=profile,
                        turns=args.turns,
                        seed=args.seed,
                        window=args.window,
                        root=root,
                        on_turn=progress,
                    ),
                    args.pair_timeout,
                )
            )
        except TimeoutError:
            # A hung run must not stall the table: keep what the last completed turn saw.
            report = seen.get("report") or SimulationReport(
                profile=profile, seed=args.seed, turns_planned=args.turns
            )
            report.wall_s = time.perf_counter() - started
            report.errors.append(f"timed out after {args.pair_timeout} s")
        statuses = server.statuses()
    summaries = len(rewriter.requests) if isinstance(rewriter, Summarize) else 0
    return Outcome(profile, strategy, report, statuses.get(400, 0), summaries)


def user_facts(row: dict[str, Any]) -> tuple[int, int]:
    """(retained, asked) of the facts the user stated in a prompt (rows of older runs have no
    output facts)."""
    output = row.get("output_facts_retained", 0), row.get("output_facts_asked", 0)
    return row["facts_retained"] - output[0], row["facts_asked"] - output[1]


def pair_row(profile: str, name: str, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """One pair's row, its ratio to `none` left for the caller (pairs may run in other processes)."""
    strategy = STRATEGIES[name]()
    print(f"== {profile} / {strategy.label}, {args.turns} turns", file=sys.stderr, flush=True)
    row = run_pair(profile, strategy, args, root).row(None)
    print(
        f"   {profile}/{name}: ${row['cost_usd']:.2f}, read {row['cache_read_share']:.1%}, "
        f"peak {row['peak_context_tokens']:,}, 400s {row['http_400']}, facts "
        f"{row['facts_retained']}/{row['facts_asked']}, {row['wall_s']} s",
        file=sys.stderr,
        flush=True,
    )
    return row


def print_table(rows: Sequence[dict[str, Any]], out: Any = sys.stdout) -> None:
    """The side-by-side table (markdown), one line per (profile, strategy)."""
    head = (
        "| profile | strategy | cost | vs none | cache read | peak ctx | API calls | summary calls "
        "| HTTP 400 | facts (user) | facts (tool output) | turns |"
    )
    print(head, file=out)
    print("|" + "---|" * 12, file=out)
    for r in rows:
        ratio = f"{r['ratio_vs_none']:.2f}x" if r["ratio_vs_none"] is not None else "-"
        print(
            f"| {r['profile']} | {r['strategy']} | ${r['cost_usd']:,.2f} | {ratio} | "
            f"{r['cache_read_share']:.1%} | {r['peak_context_tokens']:,} | {r['api_calls']} | "
            f"{r['summary_calls']} | {r['http_400']} | {'/'.join(map(str, user_facts(r)))} | "
            f"{r['output_facts_retained']}/{r['output_facts_asked']} | "
            f"{r['turns_completed']}/{r['turns_planned']} |",
            file=out,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--profiles", default=",".join(DEFAULT_PROFILES))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pair-timeout", type=float, default=3600.0, help="seconds per (profile, strategy)")
    parser.add_argument("--window", type=int, default=WINDOW, help="the managed strategies' window")
    parser.add_argument("--json", action="store_true", help="one JSON object per (profile, strategy)")
    parser.add_argument("--jobs", type=int, default=1, help="pairs run at once, each in its own process")
    args = parser.parse_args()
    profiles = [p for p in args.profiles.split(",") if p]
    names = [s for s in args.strategies.split(",") if s]
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        parser.error(f"unknown strategies {unknown}; choose from {', '.join(STRATEGIES)}")
    names = ["none", *(n for n in names if n != "none")]  # first: every ratio is against it
    pairs = [(profile, name) for profile in profiles for name in names]
    rows: list[dict[str, Any]] = []
    held: dict[str, list[dict[str, Any]]] = {p: [] for p in profiles}
    baseline: dict[str, float] = {}

    def done(row: dict[str, Any]) -> None:
        """Hold a profile's rows until its `none` run gives the cost every ratio divides by."""
        profile = row["profile"]
        if row["strategy"] == "none":
            baseline[profile] = row["cost_usd"]
        held[profile].append(row)
        if profile not in baseline:
            return
        ready, held[profile] = held[profile], []
        base = baseline[profile]
        for r in ready:
            r["ratio_vs_none"] = round(r["cost_usd"] / base, 4) if base else None
            rows.append(r)
            if args.json:
                print(dumps(r).decode(), flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = [pool.submit(pair_row, p, n, args, Path(tmp) / p / n) for p, n in pairs]
                for future in as_completed(futures):
                    done(future.result())
        else:
            for p, n in pairs:
                done(pair_row(p, n, args, Path(tmp) / p / n))
    if not args.json:
        order = {pair: i for i, pair in enumerate(pairs)}
        print_table(sorted(rows, key=lambda r: order[(r["profile"], r["strategy"])]))


if __name__ == "__main__":
    main()
