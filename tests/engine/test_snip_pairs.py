"""Snip through the engine: what the tool says is what happens, and tool pairs stay whole (R3.1.2).

The model snips a tool-result message by its tag, plus an id that names nothing. The tool's answer
counts only the real one and names the unknown one; the next request holds neither the result nor
its call, so the model is never shown "[Tool call interrupted…]" for a tool that did run.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from foldline.api.normalize._base import INTERRUPTED_RESULT_TEXT
from foldline.config import Config
from foldline.engine import QueryEngine
from foldline.testing import FunctionProvider
from foldline.timeline import SnipBoundary, SystemEntry, Timeline
from foldline.tools import default_tools

pytestmark = pytest.mark.anyio

TAG = re.compile(r"\[id:([0-9a-z]+)\]")


async def test_snipping_a_result_removes_its_call_and_reports_unknown_ids(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "big.txt").write_text("bulky line\n" * 500)
    step = 0
    snip_answer: list[str] = []
    last_request: list[dict[str, Any]] = []

    def model(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        nonlocal step
        step += 1
        messages = body["messages"]
        last_request[:] = [body]
        if step == 1:
            return {"tool_calls": [{"name": "Read", "input": {"file_path": "big.txt"}}]}
        if step == 2:  # the Read result's message is the last one: snip it by its tag
            [tag] = TAG.findall(str(messages[-1]["content"]))
            return {"tool_calls": [{"name": "Snip", "input": {"ids": [tag, "zzzz9999"]}}]}
        if step == 3:
            snip_answer.append(str(messages[-1]["content"][0]["content"]))
        return {"text": "done"}

    engine = QueryEngine(
        provider=FunctionProvider(model),
        config=Config(model="claude-sonnet-4-5"),
        tools=default_tools(),
        workspace=tmp_path / "ws",
        timeline=Timeline(session_id="s1"),
        permission_mode="bypassPermissions",
    )
    assert (await engine.submit_message("read big.txt, then snip it")).text == "done"
    [answer] = snip_answer
    assert answer.startswith("Snipped 1 entry: ")
    assert "1 more message(s) holding their tool calls or results went with them" in answer
    assert answer.endswith("Unknown ids, not snipped: zzzz9999")
    [boundary] = [r for r in engine.timeline if isinstance(r, SnipBoundary)]
    assert len(boundary.removed_uuids) == 2  # the result and the reply that called Read
    sent = str(last_request[0]["messages"])
    assert "bulky line" not in sent
    assert INTERRUPTED_RESULT_TEXT not in sent
    assert "'name': 'Read'" not in sent  # the call went with its result
    [receipt] = [r for r in engine.timeline if isinstance(r, SystemEntry) and r.subtype == "compaction"]
    assert "unknown ids: zzzz9999" in receipt.content
    await engine.aclose()
