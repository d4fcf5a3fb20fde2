"""A foldline session with every event `foldline inspect` marks, recorded by the real engine.

`record_session(path, workspace)` runs `QueryEngine` turns against a strict `ScriptedProvider` whose
replies carry chosen `usage` numbers, so the context climbs past the warning threshold, a Snip call
snips an exchange, the cache breaks once with no client-side change (the engine records that itself),
and the session is then compacted. The compaction levels that append the microcompact receipt, the
collapse commit and the compact boundary are other modules' work; here those records are appended
through the engine's own `SessionLog`, exactly as a level appends them, with the cache baseline
reset as R7.4 says each level does.

`SCRIPT_USAGE` is what each API call reported, in call order, so tests compute what to expect from
it instead of restating numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from foldline.cachebreak import CacheBreakDetector
from foldline.compact.snip import short_id
from foldline.config import Config
from foldline.engine import QueryEngine
from foldline.testing import ScriptedProvider
from foldline.timeline import (
    AssistantEntry,
    CollapseCommit,
    CompactBoundary,
    SystemEntry,
    UserEntry,
    UserMessage,
    new_uuid,
    now_iso,
)
from foldline.tools import default_tools
from foldline.transcript import open_session

INJECTION = "<script>alert('x')</script> & <b>bold</b>"
"""Typed into one prompt: the page must show it as text."""


def _usage(read: int, write: int, uncached: int = 40, output: int = 300) -> dict[str, int]:
    return {
        "input_tokens": uncached,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
        "output_tokens": output,
    }


SCRIPT_USAGE: list[dict[str, int]] = [
    _usage(0, 20_000),  # call 1: the first prompt writes the prefix
    _usage(20_000, 30_000),  # call 2
    _usage(50_000, 30_000),  # call 3: asks to Snip the first exchange
    _usage(30_000, 12_000),  # call 4: after the snip (an expected drop)
    _usage(42_000, 60_000),  # call 5
    _usage(102_000, 48_000),  # call 6: past the warning threshold
    _usage(5_000, 148_000),  # call 7: the cache breaks, nothing changed on the client
    _usage(150_000, 4_000),  # call 8: after the microcompact receipt and the collapse commit
    _usage(3_000, 14_000),  # call 9: after the compact boundary (an expected drop)
    _usage(17_000, 2_500),  # call 10
]
BREAK_CALL = 7
SNIP_CALL = 3
"""The call whose reply asked for the snip; the boundary follows its tool result."""
RECEIPT_AFTER = 7
"""The microcompact receipt and the collapse commit come after this many calls."""
COMPACT_AFTER = 8


def _reply(n: int, **reply: Any) -> dict[str, Any]:
    return {**reply, "usage": SCRIPT_USAGE[n - 1]}


async def record_session(path: Path, workspace: Path) -> None:
    """Write the session to `path` (created), running its tools in `workspace`."""
    provider = ScriptedProvider([])
    writer, timeline = open_session(path, session_id="inspect-demo", fsync="never")
    engine = QueryEngine(
        provider=provider,
        config=Config(model="claude-sonnet-4-5"),
        tools=default_tools(),
        workspace=workspace,
        timeline=timeline,
        transcript=writer,
        permission_mode="bypassPermissions",
    )
    engine._cache_watch = CacheBreakDetector(diff_dir=path.parent / "cache-breaks")
    try:
        provider.script.append(_reply(1, text="The design has three layers."))
        await engine.submit_message("Summarize the design.")
        provider.script.append(_reply(2, text="The tests cover each layer."))
        await engine.submit_message(f"Now the tests. {INJECTION}")
        first = next(e for e in engine.timeline.entries() if isinstance(e, AssistantEntry))
        provider.script += [
            _reply(3, tool_calls=[{"name": "Snip", "input": {"ids": [short_id(first.uuid)]}}]),
            _reply(4, text="Snipped the first answer."),
        ]
        await engine.submit_message("Drop the first answer, it is stale.")
        for n in (5, 6, 7):
            provider.script.append(_reply(n, text=f"Step {n} done."))
            await engine.submit_message(f"Do step {n}.")
        entries = engine.timeline.entries()
        span = [e for e in entries if isinstance(e, UserEntry | AssistantEntry)][-4:-2]
        engine.log.append(
            engine.log.entry(
                SystemEntry, subtype="microcompact", content="Cleared 3 old tool results (9,000 tokens)"
            )
        )
        engine.log.append(
            CollapseCommit(
                uuid=new_uuid(),
                timestamp=now_iso(),
                collapse_id="c1",
                first_uuid=span[0].uuid,
                last_uuid=span[-1].uuid,
                summary="Step 5 was done.",
                tokens_before=9_000,
                tokens_after=400,
            )
        )
        provider.script.append(_reply(8, text="Step 8 done."))
        await engine.submit_message("Do step 8.")
        last = engine.timeline.last_uuid
        engine.log.append(
            CompactBoundary(
                uuid=new_uuid(),
                timestamp=now_iso(),
                trigger="auto",
                logical_parent_uuid=last,
                pre_tokens=154_340,
                post_tokens=14_000,
            )
        )
        engine.log.append(
            engine.log.entry(
                UserEntry,
                is_compact_summary=True,
                message=UserMessage(content="Summary: the design, the tests and steps 5 to 8 are done."),
            )
        )
        engine._cache_watch.reset_baseline()  # what AutoCompact does after a compaction (R7.4)
        for n in (9, 10):
            provider.script.append(_reply(n, text=f"Step {n} done."))
            await engine.submit_message(f"Do step {n}.")
        provider.assert_complete()
    finally:
        await engine.aclose()
        writer.close()
