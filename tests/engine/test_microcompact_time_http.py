"""Microcompact's time-based path against `foldline serve`, after a 61-minute gap on both clocks.

The server's prompt cache and the engine share one offset: advancing it is an hour passing for both,
so the server's 5-minute cache entries expire and the engine sees its last reply an hour old.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from foldline._types import JSONObject
from foldline.config import Config
from foldline.engine import QueryEngine
from foldline.events import CompactionEvent, UIEvent
from foldline.providers.anthropic import AnthropicProvider
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.testing import run_server
from foldline.timeline import AssistantEntry, ResultsCleared, SystemEntry, Usage
from foldline.tools import default_tools
from foldline.tools.base import BaseTool, ToolContext, ToolResult
from foldline.transcript import load_transcript, open_session

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-5"
PLACEHOLDER = Config().microcompact.placeholder


@dataclass
class Offset:
    """Seconds added to both clocks: the time that has "passed" beyond the real one."""

    seconds: float = 0.0

    def server(self) -> float:
        return time.monotonic() + self.seconds

    def engine(self) -> float:
        return time.time() + self.seconds


class _Lookup(BaseTool):
    """A tool outside the whitelist (R3.2.1): its results are never cleared."""

    name = "Lookup"
    description = "Looks a topic up in the team wiki."
    input_schema: JSONObject = {"type": "object", "properties": {"topic": {"type": "string"}}}  # noqa: RUF012
    concurrency_safe = True

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult(f"wiki page on {tool_input['topic']}: " + "notes and links " * 150)


def _results(body: Mapping[str, Any]) -> dict[str, str]:
    """tool_use id -> the text its result carries in a request body."""
    out: dict[str, str] = {}
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else ():
            if block["type"] == "tool_result":
                content = block["content"]
                out[block["tool_use_id"]] = content if isinstance(content, str) else str(content)
    return out


def _calls(body: Mapping[str, Any]) -> dict[str, str]:
    """tool_use id -> tool name, in call order."""
    return {
        block["id"]: block["name"]
        for message in body["messages"]
        if message["role"] == "assistant"
        for block in message["content"]
        if block["type"] == "tool_use"
    }


async def test_after_61_idle_minutes_only_old_whitelisted_results_are_cleared_then_cached_anew(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for i in range(9):
        (workspace / f"f{i}.txt").write_text(f"file {i}\n" + "some source line here\n" * 120)
    # 9 Reads with two Lookups among them (one old, one recent), then the turn ends.
    plan = [("Read", i) for i in range(9)]
    plan.insert(1, ("Lookup", 0))
    plan.insert(8, ("Lookup", 1))
    replies: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "Read", "input": {"file_path": str(workspace / f"f{n}.txt")}}
                if tool == "Read"
                else {"name": "Lookup", "input": {"topic": f"t{n}"}}
            ]
        }
        for tool, n in plan
    ]
    replies += [{"text": "all read"}, {"text": "still here"}, {"text": "and again"}]
    offset = Offset()
    backend = ScriptedBackend(replies=replies, select="sequence", strict=True)
    app = create_app(backend=backend, clock=offset.server)
    events: list[UIEvent] = []
    transcript = tmp_path / "s.jsonl"
    with run_server(app) as url:
        writer, timeline = open_session(transcript, session_id="s1", fsync="never")
        engine = QueryEngine(
            provider=AnthropicProvider(base_url=url, api_key="k"),  # no cache_edits: time path only
            system="You are a coding agent. " + "Read before you edit. " * 400,
            config=Config(model=MODEL),
            tools=[*default_tools(), _Lookup()],
            workspace=workspace,
            timeline=timeline,
            transcript=writer,
            permission_mode="bypassPermissions",
            instructions=False,
            clock=offset.engine,
        )
        engine.events.subscribers.append(events.append)
        await engine.submit_message("read the files")
        warm = len(backend.calls)
        assert warm == len(plan) + 1
        assert not [e for e in events if isinstance(e, CompactionEvent)]  # warm: nothing cleared

        offset.seconds += 61 * 60
        await engine.submit_message("are you there?")
        await engine.submit_message("and now?")
        await engine.aclose()
        writer.close()

    assert {r.status for r in app.state.foldline.records} == {200}
    bodies = [{"messages": c.messages} for c in backend.calls]  # what the server accepted
    before, after, next_ = bodies[warm - 1], bodies[warm], bodies[warm + 1]
    names = _calls(after)
    reads = [i for i, name in names.items() if name == "Read"]
    lookups = [i for i, name in names.items() if name == "Lookup"]
    old, recent = reads[:-5], reads[-5:]
    assert len(old) == 4
    sent_before, sent_after = _results(before), _results(after)
    for tool_use_id in old:
        assert sent_after[tool_use_id] == PLACEHOLDER
        assert sent_before[tool_use_id] != PLACEHOLDER
    for tool_use_id in recent + lookups:  # the 5 most recent and other tools' results: untouched
        assert sent_after[tool_use_id] == sent_before[tool_use_id]
        assert sent_after[tool_use_id] != PLACEHOLDER
    assert _results(next_) == sent_after  # cleared once, not again

    records = load_transcript(transcript).timeline().snapshot()
    (cleared,) = [r for r in records if isinstance(r, ResultsCleared)]
    assert list(cleared.tool_use_ids) == old
    (receipt,) = [r for r in records if isinstance(r, SystemEntry) and r.subtype == "compaction"]
    assert receipt.data is not None
    assert (receipt.data["path"], receipt.data["results"]) == ("time", 4)
    assert [e.level for e in events if isinstance(e, CompactionEvent)] == ["microcompact"]

    usages = [r.message.usage for r in records if isinstance(r, AssistantEntry) and r.message.usage]
    assert len(usages) == warm + 2
    first_warm = usages[warm - 1]
    assert first_warm.cache_read_input_tokens > 5_000  # the session was reading its cache
    cold, again = usages[warm], usages[warm + 1]
    # Four Read results of ~800 tokens each became the placeholder: the rewritten prompt is smaller.
    warm_prompt = first_warm.cache_read_input_tokens + first_warm.cache_creation_input_tokens
    assert cold.cache_creation_input_tokens < warm_prompt - 2_000
    _check_cold_then_warm(cold, again)


def _check_cold_then_warm(cold: Usage, again: Usage) -> None:
    """The hour-old cache is gone: one write of the whole rewritten prompt, then reads of it."""
    assert cold.cache_read_input_tokens == 0
    assert cold.cache_creation_input_tokens > 5_000
    assert again.cache_read_input_tokens >= cold.cache_creation_input_tokens
    assert again.cache_creation_input_tokens < again.cache_read_input_tokens // 10
