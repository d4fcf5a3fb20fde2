"""The tool loop on an in-process scripted model: parallel reads, serial writes, bash, resume.

The headline loop and the sixty-round turn also run end to end over real HTTP (`model`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from foldline._types import JSONObject
from foldline.config import ToolsConfig
from foldline.events import RecordEvent, TextDeltaEvent
from foldline.timeline import AssistantEntry, SystemEntry, UserEntry, ui_view
from foldline.tools import Decision, PermissionRules, default_tools
from foldline.tools.base import BaseTool, ToolContext, ToolResult
from foldline.tools.batch import BatchTool

from .conftest import Harness, assert_valid_next_request, reload


def _tool(name: str, **tool_input: object) -> dict[str, object]:
    return {"name": name, "input": tool_input}


@pytest.mark.anyio
async def test_multi_turn_tool_loop_writes_a_transcript_that_resumes_and_continues(
    model: Callable[..., Harness],
) -> None:
    h = model(
        [
            {
                "text": "Reading both.",
                "tool_calls": [_tool("Read", file_path="a.txt"), _tool("Read", file_path="b.txt")],
            },
            {"tool_calls": [_tool("Write", file_path="c.txt", content="A+B\n")]},
            {"tool_calls": [_tool("Bash", command="cat c.txt | tr a-z A-Z; echo done")]},
            {"text": "All done."},
            {"text": "Second turn answer."},
        ]
    )
    (h.workspace / "a.txt").write_text("alpha\n")
    (h.workspace / "b.txt").write_text("beta\n")
    engine = await h.engine()
    result = await engine.submit_message("combine a and b")
    assert (result.stop_reason, result.text) == ("end_turn", "All done.")
    assert (h.workspace / "c.txt").read_text() == "A+B\n"

    requests = h.requests()
    assert len(requests) == 4
    parallel_results = requests[1].messages[-1]["content"]
    # Both results in one user message, then the snip id tag (R3.1.1).
    assert [b["type"] for b in parallel_results] == ["tool_result", "tool_result", "text"]
    assert "alpha" in str(parallel_results[0]["content"])
    assert "beta" in str(parallel_results[1]["content"])
    bash_output = str(requests[3].messages[-1]["content"][0]["content"])
    assert "A+B" in bash_output
    assert "done" in bash_output
    assert "".join(e.text for e in h.events if isinstance(e, TextDeltaEvent)).startswith("Reading both.")

    # The transcript alone rebuilds the timeline, record for record.
    resumed = reload(h)
    assert resumed.snapshot() == engine.timeline.snapshot()

    again = await h.engine()
    assert_valid_next_request(h, again)
    second = await again.submit_message("and now?")
    assert second.text == "Second turn answer."
    assert len(h.requests()) == 5
    history = h.requests()[-1].messages
    assert history[0]["content"][0]["text"].startswith("combine a and b")
    assert sum(1 for m in history if m["role"] == "assistant") == 4


@pytest.mark.anyio
async def test_results_come_back_in_tool_use_order_and_writes_run_serially(
    scripted: Callable[..., Harness],
) -> None:
    h = scripted(
        [
            {
                "tool_calls": [
                    _tool("Bash", command="sleep 0.3; echo first >> log.txt"),
                    _tool("Bash", command="echo second >> log.txt"),
                    _tool("Glob", pattern="*.txt"),
                ]
            },
            {"text": "ok"},
        ]
    )
    engine = await h.engine()
    await engine.submit_message("go")
    assert (h.workspace / "log.txt").read_text() == "first\nsecond\n"
    results = [b for b in h.requests()[1].messages[-1]["content"] if b["type"] == "tool_result"]
    ids = [b["id"] for b in h.requests()[1].messages[-2]["content"] if b["type"] == "tool_use"]
    assert [r["tool_use_id"] for r in results] == ids
    assert "log.txt" in str(results[2]["content"])  # the Glob after the writes saw their file


@pytest.mark.anyio
async def test_every_record_is_announced_and_persisted(scripted: Callable[..., Harness]) -> None:
    h = scripted([{"tool_calls": [_tool("Read", file_path="missing.txt")]}, {"text": "no file"}])
    engine = await h.engine()
    await engine.submit_message("read it")
    announced = [e.record for e in h.events if isinstance(e, RecordEvent)]
    assert announced == list(reload(h).snapshot())
    kinds = [type(r).__name__ for r in announced]
    assert kinds == ["UserEntry", "AssistantEntry", "UserEntry", "AssistantEntry"]
    result = announced[2]
    assert isinstance(result, UserEntry)
    assert isinstance(result.message.content, list)
    assert result.message.content[0]["is_error"] is True
    assert isinstance(announced[3], AssistantEntry)


@pytest.mark.anyio
async def test_composite_tool_records_virtual_pairs_the_api_never_sees(
    scripted: Callable[..., Harness],
) -> None:
    inner = [_tool("Write", file_path="x.txt", content="hello\n"), _tool("Read", file_path="x.txt")]
    h = scripted([{"tool_calls": [_tool("Batch", calls=inner)]}, {"text": "batched"}])
    engine = await h.engine(tools=[*default_tools(), BatchTool()])
    await engine.submit_message("batch it")
    assert (h.workspace / "x.txt").read_text() == "hello\n"
    virtual = [e for e in ui_view(reload(h).snapshot()) if e.is_virtual]
    assert [type(e).__name__ for e in virtual] == ["AssistantEntry", "UserEntry"] * 2
    assert [e.message.content[0]["name"] for e in virtual if isinstance(e, AssistantEntry)] == [
        "Write",
        "Read",
    ]
    sent = repr(h.requests()[-1].messages)
    assert "toolu_virtual_" not in sent  # the inner calls never reach the API
    batch_result = h.requests()[-1].messages[-1]["content"][0]
    assert "[1] Write (ok)" in str(batch_result["content"])
    assert "hello" in str(batch_result["content"])


@pytest.mark.anyio
async def test_ask_callback_decides_calls_the_rules_leave_open(scripted: Callable[..., Harness]) -> None:
    h = scripted(
        [
            {
                "tool_calls": [
                    _tool("Bash", command="echo hi > out.txt"),
                    _tool("Bash", command="git log; rm -rf x"),
                ]
            },
            {"text": "ok"},
        ]
    )
    asked: list[str] = []

    async def ask(tool_name: str, tool_input: Mapping[str, Any], decision: Decision) -> bool:
        asked.append(str(tool_input["command"]))
        return "rm -rf" not in str(tool_input["command"])

    rules = PermissionRules.from_lists(allow=["Bash(git log:*)"])
    engine = await h.engine(permission_mode="default", rules=rules, ask=ask)
    await engine.submit_message("go")
    assert asked == ["echo hi > out.txt", "git log; rm -rf x"]  # `git log:*` never approves the chain
    results = [b for b in h.requests()[1].messages[-1]["content"] if b["type"] == "tool_result"]
    assert (h.workspace / "out.txt").read_text() == "hi\n"
    assert results[1]["is_error"] is True
    assert "Permission denied" in str(results[1]["content"])


class _LoudTool(BaseTool):
    """A tool whose output is over the 50,000-character budget (Bash and Grep cap their own)."""

    name = "Loud"
    description = "Prints a lot."
    input_schema: JSONObject = {"type": "object", "properties": {}}  # noqa: RUF012
    concurrency_safe = True

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult("a" * 80_000)


@pytest.mark.anyio
async def test_oversized_tool_output_is_recorded_as_a_preview_once(scripted: Callable[..., Harness]) -> None:
    h = scripted([{"tool_calls": [_tool("Loud")]}, {"text": "ok"}])
    engine = await h.engine(tools=[_LoudTool()], session_dir=h.workspace.parent / "session-files")
    await engine.submit_message("make noise")
    sent = str(h.requests()[1].messages[-1]["content"][0]["content"])
    assert "Output too large for the context" in sent
    assert len(sent) < 5_000
    [saved] = (h.workspace.parent / "session-files" / "tool-results").iterdir()
    assert saved.read_text() == "a" * 80_000
    notices = [r for r in reload(h).snapshot() if isinstance(r, SystemEntry)]
    assert [n.subtype for n in notices] == ["tool_result_budget"]  # never silent (R3.0.1)


@pytest.mark.anyio
async def test_a_turn_of_sixty_tool_rounds_completes(model: Callable[..., Harness]) -> None:
    h = model([{"tool_calls": [_tool("Bash", command=f"echo {i}")]} for i in range(60)] + [{"text": "done"}])
    engine = await h.engine()
    result = await engine.submit_message("work")
    assert (result.stop_reason, result.text, len(h.requests()), result.attempts) == (
        "end_turn",
        "done",
        61,
        61,
    )


@pytest.mark.anyio
async def test_max_turns_stops_cleanly_after_the_tool_results(scripted: Callable[..., Harness]) -> None:
    h = scripted([{"tool_calls": [_tool("Bash", command="echo x")]}] * 3, max_turns=3)
    engine = await h.engine()
    result = await engine.submit_message("work")
    assert (result.stop_reason, len(h.requests())) == ("max_turns", 3)
    assert_valid_next_request(h, engine)


class _Boom(BaseTool):
    name = "Boom"
    description = "fails"
    input_schema: JSONObject = {"type": "object", "properties": {}}  # noqa: RUF012

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raise RuntimeError("kaboom")


@pytest.mark.anyio
async def test_engine_wiring_limits_validation_denials_and_batch_errors(
    scripted: Callable[..., Harness],
) -> None:
    calls = [
        _tool("Bash", command="sleep 5"),
        _tool("Read", path="a.txt"),
        _tool("Batch", calls=[_tool("Boom")]),
        _tool("Bash", command="rm -rf /tmp/nope"),
    ]
    h = scripted([{"tool_calls": calls}, {"text": "end"}], tools=ToolsConfig(bash_timeout_s=0.5))
    rules = PermissionRules.from_lists(deny=["Bash(rm:*)"])
    engine = await h.engine(tools=[*default_tools(), BatchTool(), _Boom()], rules=rules)
    assert (await engine.submit_message("go")).text == "end"
    results = [str(b.get("content")) for b in h.requests()[1].messages[-1]["content"]]
    assert "timed out after 0.5s" in results[0]
    assert "InputValidationError" in results[1]
    assert "`file_path`" in results[1]
    assert "Permission denied" not in results[1]
    assert "kaboom" in results[2]
    assert results[3].count("Permission denied") == 1
