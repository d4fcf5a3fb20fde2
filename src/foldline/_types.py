"""Type aliases for loose wire JSON: accepted everywhere, narrowed where used."""

from __future__ import annotations

from typing import Any, TypeAlias

Block: TypeAlias = dict[str, Any]
"""One Messages API content block (`text`, `thinking`, `tool_use`, `tool_result`, `image`, ...).

Kept as the JSON object it came as, so opaque fields (thinking signatures, unknown block types,
`cache_control`) round-trip byte-exact.
"""

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object whose shape is owned by someone else (hook payloads, tool structured output)."""

MALFORMED_TOOL_CALL = "malformed_tool_call"
"""The reserved tool name a server gives a tool call its model botched (unreadable JSON, no name):
the client's tool runner answers it with an error result that says what was wrong, so the model can
try again and the loop never crashes (`foldline.server.model.toolcalls`, `foldline.executor`)."""
