"""The simulated model ends a turn whose reads were never cleared (a repeated read is not a re-read)."""

from __future__ import annotations

from typing import Any

from foldline.server.backend import BackendRequest
from foldline.server.simulated import SimulatedBackend

READ = {
    "name": "read",
    "description": "Read a file or directory from the local filesystem.",
    "input_schema": {
        "type": "object",
        "properties": {
            "filePath": {"type": "string", "description": "The absolute path to the file to read"}
        },
        "required": ["filePath"],
    },
}
LISTING = "<path>/w/calc.py</path>\n<type>file</type>\n" + (
    "<content>\n1: def add(a, b):\n2:     return a + b\n</content>"
)


def test_a_turn_of_uncleared_reads_ends() -> None:
    backend = SimulatedBackend(seed=0)
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Working directory: /w\nRead calc.py and explain it"}],
        }
    ]
    for _ in range(80):  # more than the most rounds a turn is ever planned (75)
        reply = backend.reply(BackendRequest(model="claude-sonnet-4-5", messages=messages, tools=[READ]))
        uses = [b for b in reply.content if b.get("type") == "tool_use"]
        if not uses:
            return
        for n, use in enumerate(uses):
            use["id"] = f"toolu_{len(messages)}_{n}"
        messages.append({"role": "assistant", "content": list(reply.content)})
        results = [{"type": "tool_result", "tool_use_id": u["id"], "content": LISTING} for u in uses]
        messages.append({"role": "user", "content": results})
    raise AssertionError(f"the turn never ended: {[b['input'] for b in uses]}")
