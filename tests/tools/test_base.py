"""The tool interface: default tools, API specs, result blocks, input validation, the Snip tool."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from foldline._types import Block
from foldline.compact.snip import short_id
from foldline.tools import (
    EditTool,
    PermissionRules,
    ReadTool,
    SnipTool,
    Tool,
    ToolContext,
    ToolResult,
    authorize,
    default_tools,
    find_tool,
    result_block,
    tool_specs,
)
from foldline.tools import __all__ as tools_all
from foldline.tools.base import validate_input

pytestmark = pytest.mark.anyio


def test_default_tools_names_flags_and_protocol() -> None:
    tools = default_tools()
    assert [t.name for t in tools] == ["Read", "Write", "Edit", "Bash", "Grep", "Glob", "Snip"]
    assert {t.name for t in tools if t.concurrency_safe} == {"Read", "Grep", "Glob"}
    assert all(isinstance(t, Tool) for t in tools)
    assert not find_tool(tools, "Snip").compactable  # type: ignore[union-attr]
    assert find_tool(tools, "WebFetch") is None


def test_tool_specs_are_api_tool_entries() -> None:
    specs = tool_specs(default_tools())
    for spec in specs:
        assert set(spec) == {"name", "description", "input_schema"}
        schema = spec["input_schema"]
        assert schema["type"] == "object"
        assert set(schema["required"]) <= set(schema["properties"])
    assert tool_specs(default_tools()) == specs  # stable: the cached prefix depends on it


def test_result_block_keeps_structured_data_off_the_wire() -> None:
    ok = ToolResult("done", structured={"exit_code": 0})
    assert result_block("toolu_1", ok) == {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}
    failed = result_block("toolu_2", ToolResult("boom", is_error=True))
    assert failed["is_error"] is True


def test_context_canonicalises_workspace_and_cwd(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    ctx = ToolContext(workspace=tmp_path / "link" / "sub" / "..", cwd=Path("sub"))
    assert ctx.workspace == real
    assert ctx.cwd == real / "sub"
    assert ctx.resolve("../x") == real / "x"


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        pytest.param({}, "`a` is missing", id="missing"),
        pytest.param({"a": "s", "n": 1.5}, "`n` must be of type integer", id="float-for-int"),
        pytest.param({"a": "s", "flag": 1}, "`flag` must be of type boolean", id="int-for-bool"),
        pytest.param({"a": "s", "ids": "x"}, "`ids` must be of type array", id="str-for-array"),
    ],
)
def test_validate_input(tool_input: dict[str, object], message: str) -> None:
    schema = {
        "type": "object",
        "required": ["a"],
        "properties": {
            "a": {"type": "string"},
            "n": {"type": "integer"},
            "flag": {"type": "boolean"},
            "ids": {"type": "array"},
        },
    }
    with pytest.raises(Exception, match=message):
        validate_input(schema, tool_input)


def test_public_all_is_sorted() -> None:
    assert tools_all == sorted(tools_all)


async def test_snip_returns_ids_for_the_engine(ctx: ToolContext) -> None:
    ids = [short_id("0f0e0d0c-0b0a-4000-8000-000000000000"), short_id("ffffffff-ffff-4fff-8fff-ffffffffffff")]
    result = await SnipTool().run({"ids": [*ids, ids[0]]}, ctx)
    assert not result.is_error
    assert result.structured == {"snip_ids": ids, "unknown_ids": []}
    assert result.content == f"Snipped 2 entries: {ids[0]}, {ids[1]}"


async def test_snip_names_unknown_ids_and_counts_only_real_ones(workspace: Path) -> None:
    """R3.1.2: "Snipped N" counts what is really removed; ids that name nothing are reported."""

    def resolve(ids: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], int]:
        return tuple(i for i in ids if i == "abc1"), tuple(i for i in ids if i != "abc1"), 1

    ctx = ToolContext(workspace=workspace, snip_ids=resolve)
    result = await SnipTool().run({"ids": ["abc1", "zzz9"]}, ctx)
    assert not result.is_error
    assert result.structured == {"snip_ids": ["abc1"], "unknown_ids": ["zzz9"]}
    assert result.content == (
        "Snipped 1 entry: abc1; 1 more message(s) holding their tool calls or results went with them. "
        "Unknown ids, not snipped: zzz9"
    )
    nothing = await SnipTool().run({"ids": ["zzz9"]}, ctx)
    assert nothing.is_error  # an error result: the stage carries nothing out
    assert "no message in the conversation has the id(s) zzz9" in str(nothing.content)


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        pytest.param([], "`ids` is empty", id="empty"),
        pytest.param(["ABC"], "Invalid short ids", id="uppercase"),
        pytest.param(["a b"], "Invalid short ids", id="space"),
        pytest.param([3], "Invalid short ids", id="not-a-string"),
    ],
)
async def test_snip_rejects_bad_ids(ctx: ToolContext, ids: list[object], message: str) -> None:
    result = await SnipTool().run({"ids": ids}, ctx)
    assert result.is_error
    assert message in str(result.content)
    assert result.structured is None


async def test_the_documented_engine_flow(ctx: ToolContext, workspace: Path) -> None:
    """The package docstring's recipe, run for real: permission, execution, API block."""
    tools = default_tools()
    rules = PermissionRules.from_lists(allow=["Bash(echo:*)"], deny=["Bash(rm:*)"])
    blocks: list[Block] = [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "echo hi"}},
        {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "echo x; rm -rf ."}},
        {"type": "tool_use", "id": "t3", "name": "Nope", "input": {}},
    ]
    results = []
    for block in blocks:
        tool = find_tool(tools, block["name"])
        if tool is None:
            results.append(
                result_block(block["id"], ToolResult(f"unknown tool {block['name']}", is_error=True))
            )
            continue
        decision = await authorize(tool.name, block["input"], ctx, rules, "default", None)
        if decision.behavior == "deny":
            result = ToolResult(decision.reason, is_error=True)
        else:
            result = await tool.run(block["input"], ctx)
        results.append(result_block(block["id"], result))
    assert results[0] == {"type": "tool_result", "tool_use_id": "t1", "content": "hi\nExit code: 0"}
    assert results[1]["is_error"] is True
    assert "rm -rf ." in results[1]["content"]
    assert results[2]["is_error"] is True
    assert await anyio.Path(workspace).exists()  # the denied rm never ran


async def test_for_turn_shares_the_read_registry_but_not_the_abort(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "f.txt").write_text("old\n")
    first = ctx.for_turn()
    assert not (await ReadTool().run({"file_path": "f.txt"}, first)).is_error
    first.abort.set()
    second = ctx.for_turn()
    assert not second.abort.is_set()
    edit = await EditTool().run({"file_path": "f.txt", "old_string": "old", "new_string": "new"}, second)
    assert not edit.is_error, edit.content
    assert second.workspace == ctx.workspace
