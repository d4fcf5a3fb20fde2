"""Prompt too long at `foldline serve`, recovered by Microcompact's cache_edits (R5.4, R3.2.3).

The server leaves spans deleted by `cache_edits` out of the context it measures, so deleting old
whitelisted results shortens the retried request without rewriting a byte of it. The cached path's
own trigger is set out of reach here, so only the recovery can have deleted them.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from foldline.config import Config, MicrocompactConfig
from foldline.engine import QueryEngine
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.config import ServerConfig
from foldline.server.testing import run_server
from foldline.timeline import CachePin, SystemEntry
from foldline.tools import default_tools
from foldline.transcript import load_transcript, open_session

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-5"
READS = 14


async def test_prompt_too_long_is_recovered_by_deleting_old_results_with_cache_edits(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for n in range(READS):
        lines = (f"file {n}: line {i} " + "y" * 60 for i in range(LINES))
        (workspace / f"f{n}.txt").write_text("\n".join(lines))
    replies: list[dict[str, Any]] = []
    for n in range(READS):  # one file per turn: each turn may recover once (R5.4)
        read = {"name": "Read", "input": {"file_path": str(workspace / f"f{n}.txt")}}
        replies.append({"tool_calls": [read]})
        replies.append({"text": f"read f{n}"})
    backend = ScriptedBackend(replies=replies, select="sequence", strict=True)
    app = create_app(ServerConfig(context_window=WINDOW), backend=backend)
    transcript = tmp_path / "s.jsonl"
    with run_server(app) as url:
        writer, timeline = open_session(transcript, session_id="s1", fsync="never")
        engine = QueryEngine(
            provider=AnthropicProvider(base_url=url, api_key="k", capabilities=FOLDLINE_SERVE_CAPABILITIES),
            config=Config(
                model=MODEL,
                max_output_tokens=1_024,
                microcompact=MicrocompactConfig(cached_trigger_tokens=10**9),
            ),
            tools=default_tools(),
            workspace=workspace,
            timeline=timeline,
            transcript=writer,
            permission_mode="bypassPermissions",
            instructions=False,
        )
        texts = [(await engine.submit_message(f"read f{n}.txt")).text for n in range(READS)]
        await engine.aclose()
        writer.close()
    statuses = [r.status for r in app.state.foldline.records]
    assert texts == [f"read f{n}" for n in range(READS)]
    refused = statuses.count(400)
    assert refused >= 2
    assert statuses[-1] == 200
    assert all(b == 200 for a, b in itertools.pairwise(statuses) if a == 400)  # each retry went through
    records = load_transcript(transcript).timeline().snapshot()
    assert any(isinstance(r, CachePin) for r in records)
    receipts = [r for r in records if isinstance(r, SystemEntry) and r.subtype == "compaction"]
    assert [(r.data or {}).get("trigger") for r in receipts] == ["prompt_too_long"] * refused


WINDOW = 30_000
LINES = 200
