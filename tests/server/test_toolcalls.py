"""Tool calls out of a real model's text (`server.model.toolcalls`), on SmolLM2-135M-Instruct's own outputs.

The fixture file holds verbatim greedy outputs of the real model (captured with the prompts listed
beside them); the other tests pin the botched forms the model can produce, which must become a
clear error result for the model to read, never a crash or a silently dropped call.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from foldline._types import MALFORMED_TOOL_CALL
from foldline.executor import run_call
from foldline.server.model.toolcalls import parse_tool_calls
from foldline.tools.base import ToolContext

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "smollm2_tool_calls.json").read_text())


@pytest.mark.parametrize("case", FIXTURES["cases"], ids=lambda c: c["note"])
def test_the_real_models_outputs_parse_as_expected(case: dict[str, Any]) -> None:
    text, calls = parse_tool_calls(case["output"], set(case["tools"]))
    assert text == case["text"]
    assert [c.name for c in calls] == [name for name, _ in case["calls"]]
    for call, (name, expected) in zip(calls, case["calls"], strict=True):
        if name == MALFORMED_TOOL_CALL:
            assert call.input["error"]  # says what was wrong
        else:
            assert call.input == expected


def test_both_forms_are_in_the_fixtures() -> None:
    outputs = [c["output"] for c in FIXTURES["cases"] if c["calls"]]
    assert any(o.startswith("<tool_call>") for o in outputs)
    assert any(o.startswith("{") for o in outputs)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('{"name": "Read", "arguments": {"file_path": "a.txt"', "not valid JSON"),
        ('{"arguments": {"file_path": "a.txt"}}', "no `name`"),
        ('{"name": "Read", "arguments": ["a.txt"]}', "must be a JSON object"),
        ('{"name": "Read", "arguments": "{not json"}', "not valid JSON"),
        ('"Read a.txt"', "must be a JSON object"),
        ("[]", "list is empty"),
    ],
)
def test_a_botched_tagged_call_is_a_malformed_call_that_says_why(body: str, error: str) -> None:
    text, calls = parse_tool_calls(f"Reading.<tool_call>{body}</tool_call>", {"Read"})
    assert text == "Reading."
    assert len(calls) == 1
    assert calls[0].name == MALFORMED_TOOL_CALL
    assert error in calls[0].input["error"]
    assert calls[0].input["text"] == body


def test_other_call_shapes_are_read() -> None:
    # `parameters` for `arguments`, arguments as a JSON string, an unclosed tag at the end of a reply.
    assert parse_tool_calls(
        '<tool_call>{"name": "Read", "parameters": {"file_path": "x"}}</tool_call>', {"Read"}
    )[1][0].input == {"file_path": "x"}
    string_args = '<tool_call>{"name": "Read", "arguments": "{\\"file_path\\": \\"y\\"}"}</tool_call>'
    assert parse_tool_calls(string_args, {"Read"})[1][0].input == {"file_path": "y"}
    unclosed = parse_tool_calls('<tool_call>{"name": "Bash", "arguments": {"command": "ls"}}', {"Bash"})
    assert [(c.name, c.input) for c in unclosed[1]] == [("Bash", {"command": "ls"})]
    two = parse_tool_calls(
        '<tool_call>{"name": "Read", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "Bash", "arguments": {}}</tool_call>',
        {"Read", "Bash"},
    )
    assert [c.name for c in two[1]] == ["Read", "Bash"]


def test_bare_json_is_a_call_only_when_it_names_an_offered_tool() -> None:
    fenced = '```json\n[{"name": "Bash", "arguments": {"command": "ls"}}]\n```'
    assert [(c.name, c.input) for c in parse_tool_calls(fenced, {"Bash"})[1]] == [("Bash", {"command": "ls"})]
    data = '{"name": "Alice", "arguments": {"age": 3}}'
    assert parse_tool_calls(data, {"Bash"}) == (data, [])
    assert parse_tool_calls('{"answer": 4}', {"Bash"}) == ('{"answer": 4}', [])
    # Bare JSON with prose around it is prose: only a reply that is nothing but the call is one.
    assert parse_tool_calls('Use {"name": "Bash", "arguments": {}}', {"Bash"})[1] == []


async def _no_permission_needed(*_: object) -> None:
    return None


@pytest.mark.anyio
async def test_the_client_answers_a_malformed_call_with_an_error_result_the_model_can_act_on(
    tmp_path: Path,
) -> None:
    _, calls = parse_tool_calls(
        '<tool_call>{"name": "Read", "arguments": {"file_path": </tool_call>', {"Read"}
    )
    context = ToolContext(workspace=tmp_path)
    result = await run_call(None, calls[0].name, calls[0].input, context, _no_permission_needed)
    assert result.is_error
    assert "could not be read: the tool call is not valid JSON" in str(result.content)
    assert "<tool_call>" in str(result.content)  # says how to write it instead
