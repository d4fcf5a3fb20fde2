"""Batch, a composite tool: several primitive tool calls in one step (R1.6).

Each inner call goes through `ToolContext.run_tool`, which the engine provides: it applies the same
permission check as a top-level call and records the call as a virtual `assistant(tool_use)` +
`user(tool_result)` pair. The UI shows the inner chain; the API never sees it (virtual entries are
filtered, R1.5). The model sees one tool_result: the inner results, in order, as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foldline._types import JSONObject
from foldline.errors import ToolError
from foldline.tools.base import BaseTool, ToolContext, ToolResult

__all__ = ["BatchTool"]

MAX_CALLS = 20


class BatchTool(BaseTool):
    """Run several tool calls in one step; results come back together, in order."""

    name = "Batch"
    description = (
        "Run several tool calls (Read, Grep, Glob, Bash, Edit, Write) in one step, in the order "
        "given. Use it for a fixed sequence whose steps do not depend on each other's output."
    )
    input_schema: JSONObject = {  # noqa: RUF012 - read-only class constant
        "type": "object",
        "properties": {
            "calls": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "input": {"type": "object"}},
                    "required": ["name", "input"],
                },
            }
        },
        "required": ["calls"],
        "additionalProperties": False,
    }

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        calls: list[Any] = list(tool_input["calls"])
        if not calls or len(calls) > MAX_CALLS:
            raise ToolError(f"Invalid input: give between 1 and {MAX_CALLS} calls, got {len(calls)}")
        if ctx.run_tool is None:
            raise ToolError("Batch is not available here: the engine did not provide inner tool calls")
        parts: list[str] = []
        failed = 0
        for i, call in enumerate(calls, 1):
            if call.get("name") == self.name:
                raise ToolError("Invalid input: Batch calls cannot nest")
            result = await ctx.run_tool(str(call["name"]), call.get("input") or {})
            failed += result.is_error
            text = result.content if isinstance(result.content, str) else _text_of(result.content)
            status = "error" if result.is_error else "ok"
            parts.append(f"[{i}] {call['name']} ({status}):\n{text}")
        return ToolResult("\n\n".join(parts), is_error=failed == len(calls), structured={"calls": len(calls)})


def _text_of(blocks: list[JSONObject]) -> str:
    return "\n".join(str(b.get("text", f"[{b.get('type')} block]")) for b in blocks)
