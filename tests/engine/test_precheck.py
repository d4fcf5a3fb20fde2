"""A call that cannot succeed is refused before the person is asked to approve it.

A Write to an existing file the model had not read used to ask "Write wants to ...", and after a
"yes" fail with "File has not been read yet": the person approved something that never happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from foldline.config import Config
from foldline.engine import QueryEngine
from foldline.testing import FunctionProvider
from foldline.timeline import Timeline
from foldline.tools import default_tools

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "call",
    [
        {"name": "Write", "input": {"file_path": "notes.txt", "content": "new"}},
        {"name": "Edit", "input": {"file_path": "notes.txt", "old_string": "old", "new_string": "new"}},
    ],
    ids=["Write", "Edit"],
)
async def test_a_write_to_an_unread_file_is_refused_without_asking(
    tmp_path: Path, call: dict[str, Any]
) -> None:
    (tmp_path / "notes.txt").write_text("old")
    asked: list[str] = []

    async def ask(tool_name: str, tool_input: Mapping[str, Any], decision: object) -> bool:
        asked.append(tool_name)
        return True

    def model(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        last = body["messages"][-1]["content"]
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return {"text": "noted"}
        return {"tool_calls": [call]}

    provider = FunctionProvider(model)
    engine = QueryEngine(
        provider=provider,
        config=Config(),
        tools=default_tools(),
        workspace=tmp_path,
        timeline=Timeline(session_id="s"),
        ask=ask,  # type: ignore[arg-type]
    )
    await engine.submit_message("change notes.txt")
    result = provider.calls[-1].body["messages"][-1]["content"][0]
    assert result["is_error"]
    assert "has not been read yet" in str(result["content"])
    assert asked == []  # nobody was asked to approve a call that could not succeed
    assert (tmp_path / "notes.txt").read_text() == "old"
    await engine.aclose()
