"""The compaction round through the engine, one session exercising every level that acts here.

A model (a `FunctionProvider` that reads each request) reads bulky files one at a time. Past the
nudge share it is reminded it can Snip, and snips the first two results by the `[id:...]` tags it
sees; later the clearable results pass the cached path's trigger and Microcompact deletes them with
`cache_edits` (pinned); a tool's oversized output goes to a file (level 0); after an idle hour the
time-based path clears old results client-side. Checked: Snip end to end (R3.1), every receipt in the
timeline, in `foldline show` and as an event (R3.0.1), and that resuming the transcript at the point
of any request rebuilds that request byte for byte (R2.2, R3.1.4, R3.2.4).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from foldline._json import dumps
from foldline._types import JSONObject
from foldline.cli import cli
from foldline.config import Config, TranscriptConfig
from foldline.engine import QueryEngine
from foldline.events import CompactionEvent, UIEvent
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES
from foldline.session import Session
from foldline.testing import FunctionProvider, ScriptedProvider
from foldline.timeline import AnyRecord, CachePin, ResultsCleared, SnipBoundary, SystemEntry
from foldline.tools import default_tools
from foldline.tools.base import BaseTool, ToolContext, ToolResult
from foldline.transcript import load_transcript, open_session

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-5"
SYSTEM = "You are a coding agent."
NUDGE = "by calling the Snip tool"
TAG = re.compile(r"\[id:([0-9a-z]+)\]")
READS = 14


class _Loud(BaseTool):
    """Output over the 50,000-character budget: level 0 moves it to a file."""

    name = "Loud"
    description = "Prints a lot."
    input_schema: JSONObject = {"type": "object", "properties": {}}  # noqa: RUF012
    concurrency_safe = True

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult("a" * 80_000)


def _tools() -> list[Any]:
    return [*default_tools(), _Loud()]


def _config() -> Config:
    # the nudge at 36,000 of 180,000 tokens; the engines driven here are built without a transcript
    # file to name, so the resumed session (which has one) must not name it either
    return Config(model=MODEL, snip_nudge_share=0.2, transcript=TranscriptConfig(named_to_model=False))


@dataclass
class Clock:
    offset: float = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def _text(message: Mapping[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else dumps(content).decode()


@dataclass
class Model:
    """Reads f0.. one per request, snips the first two results when nudged, then makes noise once."""

    workspace: Path
    transcript: Path
    reads: int = 0
    limit: int = READS
    snip_at: int | None = None
    snipped_files: tuple[str, ...] = ()
    loud: bool = False
    bodies: list[dict[str, Any]] = field(default_factory=list)
    files: list[bytes] = field(default_factory=list)
    """The transcript as it was on disk when each request arrived."""

    def __call__(self, body: dict[str, Any], betas: object) -> dict[str, Any]:
        self.bodies.append(body)
        self.files.append(self.transcript.read_bytes())
        messages = body["messages"]
        if self.snip_at is None and NUDGE in _text(messages[-1]):
            self.snip_at = len(self.bodies) - 1
            results = [m for m in messages if m["role"] == "user" and '"tool_result"' in _text(m)]
            ids = [TAG.findall(_text(m))[-1] for m in results[:2]]
            self.snipped_files = tuple(f"file {n}:" for n in range(2))
            return {"tool_calls": [{"name": "Snip", "input": {"ids": ids}}]}
        if self.reads < self.limit:
            path = self.workspace / f"f{self.reads}.txt"
            self.reads += 1
            return {"tool_calls": [{"name": "Read", "input": {"file_path": str(path)}}]}
        if not self.loud:
            self.loud = True
            return {"tool_calls": [{"name": "Loud", "input": {}}]}
        return {"text": "done"}


@dataclass
class Run:
    model: Model
    engine: QueryEngine
    events: list[UIEvent]
    records: list[AnyRecord]


async def _drive(tmp_path: Path) -> Run:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for n in range(READS):
        (workspace / f"f{n}.txt").write_text("\n".join(f"file {n}: line {i} " + "y" * 60 for i in range(260)))
    transcript = tmp_path / "s.jsonl"
    model = Model(workspace, transcript)
    clock = Clock()
    writer, timeline = open_session(transcript, session_id="s1", fsync="never")
    engine = QueryEngine(
        provider=FunctionProvider(model, capabilities=FOLDLINE_SERVE_CAPABILITIES),
        system=SYSTEM,
        config=_config(),
        tools=_tools(),
        workspace=workspace,
        timeline=timeline,
        transcript=writer,
        permission_mode="bypassPermissions",
        instructions=False,
        clock=clock,
        session_dir=tmp_path / "files",
    )
    events: list[UIEvent] = []
    engine.events.subscribers.append(events.append)
    await engine.submit_message("read every file")
    clock.offset += 61 * 60  # an idle hour: the cache has expired
    await engine.submit_message("still there?")
    await engine.submit_message("one more")
    await engine.aclose()
    writer.close()
    return Run(model, engine, events, load_transcript(transcript).timeline().snapshot())


def _receipts(records: list[AnyRecord]) -> list[SystemEntry]:
    return [
        r for r in records if isinstance(r, SystemEntry) and r.subtype in ("compaction", "tool_result_budget")
    ]


async def test_snip_nudged_called_carried_out_and_rebuilt_on_resume(tmp_path: Path) -> None:
    run = await _drive(tmp_path)
    model, bodies = run.model, run.model.bodies
    assert model.snip_at is not None, "the nudge never came"
    nudged = bodies[model.snip_at]
    assert all(NUDGE not in _text(m) for b in bodies[: model.snip_at] for m in b["messages"])
    for marker in model.snipped_files:  # the model saw them when it snipped...
        assert marker in dumps(nudged).decode()
    after = bodies[model.snip_at + 1]
    for marker in model.snipped_files:  # ...and the next request no longer carries them
        assert marker not in dumps(after).decode()
    assert "file 2:" in dumps(after).decode()

    (boundary,) = [r for r in run.records if isinstance(r, SnipBoundary)]
    snip_call = next(
        b["id"]
        for m in after["messages"]
        if m["role"] == "assistant"
        for b in m["content"]
        if b["name"] == "Snip"
    )
    assert boundary.tool_use_id == snip_call
    assert len(boundary.removed_uuids) == 4  # the two results and the two calls that made them
    snip_receipts = [r for r in _receipts(run.records) if (r.data or {}).get("level") == "snip"]
    assert len(snip_receipts) == 1
    assert snip_receipts[0].content.startswith("snipped 4 messages (2 to keep tool pairs whole)")
    assert [e.text for e in run.events if isinstance(e, CompactionEvent) and e.level == "snip"] == [
        snip_receipts[0].content
    ]

    # Resume on the finished transcript: the next request is the one the live engine would send.
    live = run.engine.build_request
    assert live is not None
    expected = live(run.engine.timeline.snapshot(), max_tokens=1024).body
    session = Session.open(
        tmp_path / "s.jsonl",
        provider=ScriptedProvider([], capabilities=FOLDLINE_SERVE_CAPABILITIES),
        workspace=tmp_path / "ws",
        config=_config(),
        system=SYSTEM,
        tools=_tools(),
    )
    try:
        resumed = session.engine.build_request
        assert resumed is not None
        assert dumps(resumed(session.engine.timeline.snapshot(), max_tokens=1024).body) == dumps(expected)
    finally:
        await session.aclose()


async def test_every_receipt_kind_is_in_the_timeline_in_show_and_an_event(tmp_path: Path) -> None:
    run = await _drive(tmp_path)
    receipts = _receipts(run.records)
    kinds = {
        "snip": [r for r in receipts if (r.data or {}).get("level") == "snip"],
        "cached": [r for r in receipts if (r.data or {}).get("path") == "cached"],
        "time": [r for r in receipts if (r.data or {}).get("path") == "time"],
        "budget": [r for r in receipts if r.subtype == "tool_result_budget"],
    }
    assert {k: len(v) >= 1 for k, v in kinds.items()} == dict.fromkeys(kinds, True)
    assert any(isinstance(r, CachePin) for r in run.records)
    assert any(isinstance(r, ResultsCleared) for r in run.records)

    events = [e for e in run.events if isinstance(e, CompactionEvent)]
    event_texts = [e.text for e in events]
    shown = CliRunner().invoke(cli, ["show", str(tmp_path / "s.jsonl"), "--max-chars", "400"])
    assert shown.exit_code == 0, shown.output
    for kind, entries in kinds.items():
        for entry in entries:
            assert entry.content in event_texts, kind
            assert entry.content in shown.output, kind
    assert {e.level for e in events} == {"snip", "microcompact", "budget"}
    assert len(events) == len(receipts)  # one event per receipt, none silent


async def test_resuming_at_every_request_rebuilds_its_bytes(tmp_path: Path) -> None:
    run = await _drive(tmp_path)
    model = run.model
    pins_seen = snips_seen = 0
    for i, (body, on_disk) in enumerate(zip(model.bodies, model.files, strict=True)):
        cut = tmp_path / f"cut{i}.jsonl"
        cut.write_bytes(on_disk)
        session = Session.open(
            cut,
            provider=ScriptedProvider([], capabilities=FOLDLINE_SERVE_CAPABILITIES),
            workspace=tmp_path / "ws",
            config=_config(),
            system=SYSTEM,
            tools=_tools(),
        )
        try:
            records = session.engine.timeline.snapshot()
            pins_seen += any(isinstance(r, CachePin) for r in records)
            snips_seen += any(isinstance(r, SnipBoundary) for r in records)
            build = session.engine.build_request
            assert build is not None
            rebuilt = build(records, max_tokens=body["max_tokens"]).body
            assert dumps(rebuilt) == dumps(body), f"request {i}"
        finally:
            await session.aclose()
    assert pins_seen > 0
    assert snips_seen > 0
