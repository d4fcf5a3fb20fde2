"""The Snip tool: the model asks for timeline entries to be removed by short id (R3.1.2).

The tool itself changes nothing. It validates the ids and returns them in
`ToolResult.structured["snip_ids"]`; the engine, which owns the timeline, resolves each short id
(`foldline.compact.snip.short_id`) to an entry uuid, appends a `snip_boundary` record with
`removed_uuids`, and reports unknown ids back to the model on its next turn. Keeping the effect in
the engine means the timeline has one writer (R1.2) and a refused or interrupted call snips nothing.
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
        text = f"Snipped {len(unique)} entr{'y' if len(unique) == 1 else 'ies'}: {', '.join(unique)}"
        return ToolResult(text, structured={"snip_ids": unique})
