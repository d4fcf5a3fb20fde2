"""Tool progress (R1.3): recorded as `progress` entries in the transcript, shown, never sent."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from foldline.timeline import AssistantEntry, ProgressEntry, UserEntry

from .conftest import Harness, reload

pytestmark = pytest.mark.anyio


async def test_a_bash_call_leaves_a_progress_entry_between_the_call_and_its_result(
    scripted: Callable[..., Harness],
) -> None:
    h = scripted([{"tool_calls": [{"name": "Bash", "input": {"command": "echo hi"}}]}, {"text": "done"}])
    engine = await h.engine()
    assert (await engine.submit_message("run echo hi")).text == "done"
    records = reload(h).snapshot()
    [progress] = [r for r in records if isinstance(r, ProgressEntry)]
    assert progress.text == "Running: echo hi"
    call = next(
        r for r in records if isinstance(r, AssistantEntry) and r.message.content[-1]["type"] == "tool_use"
    )
    assert progress.tool_use_id == call.message.content[-1]["id"]
    result = next(
        r
        for r in records
        if isinstance(r, UserEntry)
        and isinstance(r.message.content, list)
        and r.message.content[0]["type"] == "tool_result"
    )
    assert records.index(call) < records.index(progress) < records.index(result)
    # UI only: the model's next request never carries it.
    assert "Running: echo hi" not in repr(h.requests()[-1].messages)


def _kind(content: object) -> object:
    """The type of the last block of a message's content (None for a plain string)."""
    return content[-1].get("type") if isinstance(content, list) and content else None
