"""Microcompact's cached path measured at `foldline serve`: a long Read-heavy session over real HTTP.

A scripted model reads one bulky file per turn (`Read` is whitelisted), so old results pile up and
Microcompact deletes them with `cache_edits` once the clearable ones pass 20,000 estimated tokens.
The server's prompt cache is wrapped to record each request's usage as the server billed it. Halfway
the engine is shut down and the session resumed from its transcript, as a restarted process would.

Printed: one row per request (turn, cache read, cache write, uncached input, deleted tokens, read
share) and a summary: overall read share, deletions, and whether any turn's read fell by more than
the span newly deleted (a cache break).

Run: `PYTHONPATH=src .venv/bin/python benchmarks/microcompact.py [--turns 100] [--chars 4000]`
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import tempfile
from collections.abc import AsyncIterator, Container, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foldline._json import dumps
from foldline.config import Config
from foldline.engine import QueryEngine
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.caching import CacheUsage, FlatBlock, PromptCache
from foldline.server.testing import run_server
from foldline.stream import StreamEvent
from foldline.timeline import SystemEntry
from foldline.tools import default_tools
from foldline.transcript import open_session

MODEL = "claude-sonnet-4-5"


@dataclass
class RecordingCache(PromptCache):
    """The server's prompt cache, keeping each request's usage as billed."""

    usages: list[CacheUsage] = field(default_factory=list)

    def apply(
        self,
        blocks: Sequence[FlatBlock],
        min_tokens: int,
        deleted: Container[str] = frozenset(),
        *,
        anchor: int = -1,
    ) -> CacheUsage:
        usage = super().apply(blocks, min_tokens, deleted, anchor=anchor)
        self.usages.append(usage)
        return usage


class RecordingProvider(AnthropicProvider):
    """`AnthropicProvider` that keeps every request body it sends (canonical JSON)."""

    def __init__(self, bodies: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bodies = bodies

    async def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        self.bodies.append(body)
        async for event in super().stream(body, betas=betas):
            yield event


@dataclass
class Measured:
    """What one session left behind."""

    usages: list[CacheUsage]
    bodies: list[dict[str, Any]]
    receipts: list[str]
    cache_breaks: list[str]
    statuses: list[int]


def _file_text(i: int, chars: int) -> str:
    line = f"file {i}: " + "lorem ipsum dolor sit amet consectetur " * 3
    return "\n".join(f"{line}{n}" for n in range(max(1, chars // (len(line) + 4))))


def _system(tokens: int) -> str:
    rule = "Keep every change small, tested and explained; read files before editing them. "
    return "You are a coding agent.\n" + "".join(
        f"{n}. {rule}\n" for n in range(tokens * 4 // (len(rule) + 6))
    )


async def measure(
    turns: int,
    workdir: Path,
    *,
    chars: int = 4_000,
    system_tokens: int = 10_000,
    resume_at: int | None = None,
) -> Measured:
    """Run a `turns`-request session against a local server; resume from the transcript at `resume_at`.

    `system_tokens` sizes the system prompt like a real agent's (Claude Code's system prompt and tool
    definitions are well over 10,000 tokens): what the cache keeps reading turn after turn.
    """
    workspace = workdir / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    for i in range(turns - 1):
        (workspace / f"f{i}.txt").write_text(_file_text(i, chars))
    replies: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "Read", "input": {"file_path": str(workspace / f"f{i}.txt")}}]}
        for i in range(turns - 1)
    ]
    replies.append({"text": "done"})
    app = create_app(backend=ScriptedBackend(replies=replies, select="sequence", strict=True))
    state = app.state.foldline
    cache = RecordingCache(clock=state.cache.clock)
    state.cache = cache
    bodies: list[dict[str, Any]] = []
    transcript = workdir / "s.jsonl"
    resume_at = resume_at if resume_at is not None else turns // 2
    with run_server(app) as url:
        for part, max_turns in enumerate((resume_at, None)):
            writer, timeline = open_session(transcript, session_id="mc", fsync="never")
            provider = RecordingProvider(
                bodies, base_url=url, api_key="k", capabilities=FOLDLINE_SERVE_CAPABILITIES
            )
            engine = QueryEngine(
                provider=provider,
                system=_system(system_tokens),
                config=Config(model=MODEL, max_turns=max_turns),
                tools=default_tools(),
                workspace=workspace,
                timeline=timeline,
                transcript=writer,
                permission_mode="bypassPermissions",
                instructions=False,
            )
            engine.answer_dangling_tool_calls()
            await engine.submit_message("Read every file, one at a time." if part == 0 else "go on")
            await engine.aclose()
            writer.close()
        writer, timeline = open_session(transcript, session_id="mc", fsync="never")
        writer.close()
    entries = [r for r in timeline if isinstance(r, SystemEntry)]
    return Measured(
        cache.usages,
        bodies,
        [e.content for e in entries if e.subtype == "compaction"],
        [e.content for e in entries if e.subtype == "cache_break"],
        [r.status for r in state.records],
    )


def read_share(usages: Sequence[CacheUsage]) -> float:
    """Cache reads over all billed input (reads + writes + uncached)."""
    read = sum(u.cache_read_input_tokens for u in usages)
    total = read + sum(u.cache_creation_input_tokens + u.input_tokens for u in usages)
    return read / total if total else 0.0


def worst_drop(usages: Sequence[CacheUsage]) -> int:
    """The largest fall of cache reads beyond what the newly deleted span explains (0: none)."""
    worst = 0
    for prev, cur in itertools.pairwise(usages):
        newly = max(0, cur.cache_deleted_input_tokens - prev.cache_deleted_input_tokens)
        worst = max(worst, prev.cache_read_input_tokens - newly - cur.cache_read_input_tokens)
    return worst


def pins_stable(bodies: Sequence[dict[str, Any]]) -> bool:
    """Every cache_edits block stays at its (message, block) position with the same bytes, later on."""
    seen: dict[tuple[int, int], bytes] = {}
    for body in bodies:
        for m, message in enumerate(body["messages"]):
            content = message["content"] if isinstance(message["content"], list) else []
            for b, block in enumerate(content):
                if block.get("type") == "cache_edits":
                    seen.setdefault((m, b), dumps(block, sort_keys=True))
        for (m, b), raw in seen.items():
            block = body["messages"][m]["content"][b]
            if dumps(block, sort_keys=True) != raw:
                return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--chars", type=int, default=4_000, help="characters per file read")
    parser.add_argument("--system-tokens", type=int, default=10_000, help="size of the system prompt")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        m = asyncio.run(measure(args.turns, Path(d), chars=args.chars, system_tokens=args.system_tokens))
    print(f"{'turn':>4} {'read':>8} {'write':>7} {'input':>6} {'deleted':>8} {'share':>6}")
    for i, u in enumerate(m.usages, 1):
        total = u.cache_read_input_tokens + u.cache_creation_input_tokens + u.input_tokens
        share = u.cache_read_input_tokens / total if total else 0.0
        print(
            f"{i:>4} {u.cache_read_input_tokens:>8,} {u.cache_creation_input_tokens:>7,} "
            f"{u.input_tokens:>6,} {u.cache_deleted_input_tokens:>8,} {share:>6.3f}"
        )
    print(f"requests: {len(m.usages)}, all 200: {set(m.statuses) == {200}}")
    print(f"receipts: {len(m.receipts)} (e.g. {m.receipts[0] if m.receipts else '-'})")
    print(f"cache-read share: {read_share(m.usages):.3f}")
    print(f"deleted at the end: {m.usages[-1].cache_deleted_input_tokens:,} tokens")
    print(
        f"worst unexplained drop in reads: {worst_drop(m.usages):,} tokens; "
        f"cache breaks: {len(m.cache_breaks)}"
    )
    print(f"pins byte-identical across turns and the resume: {pins_stable(m.bodies)}")


if __name__ == "__main__":
    main()
