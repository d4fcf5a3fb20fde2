"""The Snip tool: the model asks for timeline entries to be removed by short id (R3.1.2).

The tool itself changes nothing. It validates the ids, resolves them through `ToolContext.snip_ids`
(the engine's view of the records) and answers with what will really go: the ids that name a message
still in the conversation, the ones that name nothing (named, never dropped silently), and the tool
calls or results removed with them to keep each pair whole. An answer where no id names anything is
an error, so nothing is carried out. The ids go back in `ToolResult.structured["snip_ids"]`; the
compaction round's Snip stage appends the `snip_boundary` record. Keeping the effect in the engine
means the timeline has one writer (R1.2) and a refused or interrupted call snips nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from foldline._types import JSONObject
from foldline.errors import ToolError
from foldline.tools.base import BaseTool, ToolContext, ToolResult

__all__ = ["SnipTool"]

_SHORT_ID = re.compile(r"[0-9a-z]{1,16}")


class SnipTool(BaseTool):
    """Remove stale entries from the conversation context by their short ids."""

    name = "Snip"
    description = (
        "Remove messages you no longer need from the conversation context, by the short ids shown "
        "in their `[id:...]` tags. Use it for bulky tool output that has served its purpose. The "
        "removal takes effect from your next turn; the user still sees the full history."
    )
    input_schema: JSONObject = {  # noqa: RUF012 - read-only class constant
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "string"}, "description": "Short ids to remove"},
        },
        "required": ["ids"],
        "additionalProperties": False,
    }
    compactable = False

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        ids: list[Any] = list(tool_input["ids"])
        if not ids:
            raise ToolError("Invalid input: `ids` is empty; give the short ids to remove")
        bad = [i for i in ids if not isinstance(i, str) or not _SHORT_ID.fullmatch(i)]
        if bad:
            raise ToolError(f"Invalid short ids (expected lowercase base-36 like 'k3x9a1b2'): {bad}")
        unique = list(dict.fromkeys(ids))
        named, unknown, partners = ctx.snip_ids(unique) if ctx.snip_ids else (tuple(unique), (), 0)
        if not named:
            raise ToolError(
                f"Nothing snipped: no message in the conversation has the id(s) {', '.join(unknown)} "
                "(mistyped, or already snipped); use the ids of the `[id:...]` tags you see"
            )
        text = f"Snipped {len(named)} entr{'y' if len(named) == 1 else 'ies'}: {', '.join(named)}"
        if partners:
            text += f"; {partners} more message(s) holding their tool calls or results went with them"
        if unknown:
            text += f". Unknown ids, not snipped: {', '.join(unknown)}"
        return ToolResult(text, structured={"snip_ids": list(named), "unknown_ids": list(unknown)})
