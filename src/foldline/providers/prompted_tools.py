"""Tools written into the prompt, and calls read back out of the reply, for a server that drops them.

Owns `PromptedTools`, a `Provider` over another one for a server whose chat template has no place
for tools (llama.cpp's `/props` says `supports_tools: False`, as for SmolLM2-135M-Instruct): sent
as the `tools` parameter they vanish from the prompt and the model answers "Read notes.txt" in prose.
Instead each request goes out with no `tools`; the system prompt ends with `render_tools`, one
line per tool in the one form a call takes (a JSON object on one line), and earlier calls and
results in the messages are written in that same form as text. The reply is read back by
`parse_call`, which is strict: the reply's first line (or the whole reply, inside a code fence at
most) must be one such object naming an offered tool with an input the tool's schema accepts; then
it becomes a `tool_use` block and what the model wrote after that line is dropped, as a stop
sequence at the line's end would; anything else stays the text it was. A prose answer is streamed
as it comes; only a reply that opens like a call is held.

Measured on 20 fixed prompts against SmolLM2-135M-Instruct (benchmarks/local_tool_calls.py,
docs/real-model.md).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from uuid import uuid4

from foldline._json import dumps, raw_decode
from foldline.errors import ToolError
from foldline.providers.base import Capabilities, Provider, count_tokens
from foldline.stream import BlockStart, BlockStop, InputJSONDelta, MessageDelta, StreamEvent, TextDelta
from foldline.tools.base import validate_input

__all__ = ["EXAMPLES", "PromptedTools", "as_text", "parse_call", "render_tools"]

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_EXAMPLE_VALUES: dict[str, object] = {
    "string": "...",
    "integer": 1,
    "number": 1,
    "boolean": True,
    "array": [],
}


def _call_line(name: str, tool_input: Mapping[str, Any]) -> str:
    """One call as the model is asked to write it."""
    return dumps({"tool": name, "input": dict(tool_input)}).decode()


def _first_sentence(text: str) -> str:
    head = text.strip().split("\n", 1)[0]
    end = head.find(". ")
    return head[: end + 1] if end >= 0 else head


def render_tools(tools: Sequence[Mapping[str, Any]]) -> str:
    """The tools as the system prompt's last part: how to call one, then one line per tool."""
    lines = [
        "You can use these tools. To use one, reply with only one line of JSON and nothing else:",
        '{"tool": "<tool name>", "input": {<its parameters>}}',
        "If no tool is needed, answer in plain text.",
        "Tools:",
    ]
    for tool in tools:
        schema: Mapping[str, Any] = tool.get("input_schema") or {}
        properties: Mapping[str, Any] = schema.get("properties") or {}
        required = [str(k) for k in schema.get("required", []) if k in properties]
        example = {k: _EXAMPLE_VALUES.get(str(properties[k].get("type")), "...") for k in required}
        optional = [k for k in properties if k not in required]
        extra = f" (optional: {', '.join(optional)})" if optional else ""
        description = _first_sentence(str(tool.get("description", "")))
        lines.append(f"{_call_line(str(tool['name']), example)} {description}{extra}")
    return "\n".join(lines)


def parse_call(text: str, tools: Sequence[Mapping[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """The call `text` is, as (tool name, input), or None: then it is a text answer.

    Strict on purpose: the whole reply (inside a Markdown code fence at most) is one JSON object with
    exactly the keys `tool` and `input`, the tool is one of `tools`, and its schema accepts the input.
    The one slip let through is closing braces after the object (`…"notes.txt"}}}`): SmolLM2-135M
    ends calls that way, and nothing else can be meant.
    """
    body = text.strip()
    if (fenced := _FENCE.match(body)) is not None:
        body = fenced[1]
    if not body.startswith("{"):
        return None
    try:
        value, end = raw_decode(body, 0)
    except (ValueError, RecursionError):
        return None
    if body[end:].strip("} \t"):  # closing braces past the object are a small model's slip, no more
        return None
    if not isinstance(value, dict) or set(value) != {"tool", "input"}:
        return None
    name, tool_input = value["tool"], value["input"]
    schema = next((t.get("input_schema") for t in tools if t.get("name") == name), None)
    if not isinstance(name, str) or schema is None or not isinstance(tool_input, dict):
        return None
    try:
        validate_input(dict(schema), tool_input)
    except ToolError:
        return None
    return name, tool_input


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        content = "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    label = "Error from the tool" if block.get("is_error") else "Tool result"
    return f"{label}:\n{content}"


def _as_text_block(block: Mapping[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "tool_use":
        text = _call_line(str(block.get("name")), block.get("input") or {})
    elif kind == "tool_result":
        text = _result_text(block)
    else:
        return dict(block)
    out: dict[str, Any] = {"type": "text", "text": text}
    if "cache_control" in block:
        out["cache_control"] = block["cache_control"]
    return out


EXAMPLES: tuple[tuple[str, str, dict[str, Any] | str], ...] = (
    ("Grep", "Search for main in app", {"pattern": "main", "path": "app"}),
    ("Write", "Write hi to b.txt", {"file_path": "b.txt", "content": "hi"}),
    ("Glob", "Find files named *.cfg", {"pattern": "**/*.cfg"}),
    ("Read", "Show me docs/guide.md", {"file_path": "docs/guide.md"}),
    ("", "What is 2 + 2?", "4"),
    ("Bash", "Run make build", {"command": "make build"}),
    ("Grep", "Look for parse_args usages", {"pattern": "parse_args"}),
    ("Write", "Create todo.md containing buy milk", {"file_path": "todo.md", "content": "buy milk"}),
    ("Glob", "List the YAML files", {"pattern": "**/*.yaml"}),
    ("Bash", "Run pwd", {"command": "pwd"}),
    ("Read", "Read a.txt", {"file_path": "a.txt"}),
)
"""Example turns put before the conversation, two per offered built-in tool and one plain answer
(tool, prompt, input or answer). A 135M model copies a pattern it sees in the chat where it ignores
an instruction in the system prompt: without them 1 of the 20 benchmark prompts became a call. The
values are none of the benchmark's; the most common tools come last, as the model leans to the
last one it saw."""


def _examples(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    offered = {str(t.get("name")) for t in tools}
    turns: list[dict[str, Any]] = []
    for name, prompt, answer in EXAMPLES:
        if name and name not in offered:
            continue
        reply = answer if isinstance(answer, str) else _call_line(name, answer)
        turns += [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]
    return turns if len(turns) > 2 else []  # the plain answer alone shows no call


def as_text(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with its tools in the system prompt, example turns before its messages, and every call
    and result as text (no `tools`)."""
    tools: list[Mapping[str, Any]] = list(body.get("tools") or [])
    out = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}
    if not tools:
        return out
    messages = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            content = [_as_text_block(b) if isinstance(b, Mapping) else b for b in content]
        messages.append({**message, "content": content})
    out["messages"] = [*_examples(tools), *messages]
    system = body.get("system")
    rendered = {"type": "text", "text": render_tools(tools)}
    if isinstance(system, str):
        out["system"] = [{"type": "text", "text": system}, rendered]
    elif isinstance(system, list):
        out["system"] = [*system, rendered]
    else:
        out["system"] = [rendered]
    return out


def _call_events(index: int, name: str, tool_input: dict[str, Any]) -> list[StreamEvent]:
    block = {"type": "tool_use", "id": f"toolu_{uuid4().hex[:24]}", "name": name, "input": {}}
    return [BlockStart(index, block), InputJSONDelta(index, dumps(tool_input).decode())]


def _more_text(
    event: TextDelta, held: dict[int, tuple[BlockStart, list[TextDelta]]], tools: Sequence[Mapping[str, Any]]
) -> list[StreamEvent]:
    """What to send on for one more piece of a held text block: nothing while it may be a call; the
    held text once it is prose; the call once its line is complete and valid."""
    start, deltas = held[event.index]
    deltas.append(event)
    so_far = "".join(d.text for d in deltas).lstrip()
    if so_far and not so_far.startswith(("{", "`")):  # prose: it and the rest go through
        del held[event.index]
        return [start, *deltas]
    if so_far.startswith("{") and "\n" in so_far:
        # A call is one line: the line ends it, as a stop sequence would (models go on explaining
        # the call they made); a first line that is no call stays text.
        call = parse_call(so_far.split("\n", 1)[0], tools)
        if call is not None:
            del held[event.index]
            return _call_events(event.index, *call)
    return []


class PromptedTools:
    """A `Provider` over `inner` that writes the tools into the prompt and reads calls from the reply.

    Args:
        inner: the provider that talks to the server.
        temperature: sent with a request that sets none (`Config.tools_in_prompt_temperature`).
    """

    def __init__(self, inner: Provider, *, temperature: float | None = None) -> None:
        self.inner = inner
        self.temperature = temperature

    @property
    def capabilities(self) -> Capabilities:
        """The server's, unchanged."""
        return self.inner.capabilities

    async def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        """One attempt: the request with its tools as text, the reply with a call as a `tool_use` block."""
        tools: list[Mapping[str, Any]] = list(body.get("tools") or [])
        sent = as_text(body)
        if self.temperature is not None and tools:
            sent.setdefault("temperature", self.temperature)
        events = self.inner.stream(sent, betas=betas)
        if not tools:
            async for event in events:
                yield event
            return
        held: dict[int, tuple[BlockStart, list[TextDelta]]] = {}  # text that opens like a call
        ended: set[int] = set()  # blocks that were a call: what the model wrote past its line is dropped
        called = False
        async for event in events:
            if isinstance(event, BlockStart) and event.block.get("type") == "text":
                held[event.index] = (event, [])
                continue
            if isinstance(event, TextDelta) and event.index in ended:
                continue
            if isinstance(event, TextDelta) and event.index in held:
                out = _more_text(event, held, tools)
                if out and isinstance(out[0], BlockStart) and out[0].block.get("type") == "tool_use":
                    ended.add(event.index)
                    called = True
                for each in out:
                    yield each
                continue
            if isinstance(event, BlockStop) and event.index in held:
                start, deltas = held.pop(event.index)
                call = parse_call("".join(d.text for d in deltas), tools)
                if call is None:
                    yield start
                    for delta in deltas:
                        yield delta
                else:
                    called = True
                    for made in _call_events(event.index, *call):
                        yield made
                yield event
                continue
            if isinstance(event, MessageDelta) and called:
                yield MessageDelta("tool_use", event.stop_sequence, event.usage)
                continue
            yield event

    async def count_tokens(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> int | None:
        """The server's count of the request as it is sent."""
        return await count_tokens(self.inner, as_text(body), betas)

    async def aclose(self) -> None:
        """Close the inner provider."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
