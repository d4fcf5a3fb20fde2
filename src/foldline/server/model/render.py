"""A Messages request as a real model sees it: chat-template text, token ids, and token positions.

The request (system, tools, messages with text, tool_use and tool_result blocks) is converted to the
Hugging Face chat format and rendered through the model's own chat template. Token positions of the
request's structure are found with markers: a private-use marker is put at the end of every block
that carries `cache_control` and around the content of every tool_result that carries a
`cache_reference`; the rendered text is searched for them, they are removed, and the clean text is
tokenized with offsets, so each marker's character offset maps to a token index. Templates differ
wildly, so nothing here assumes a layout; a marker the template dropped is simply not a position.

Invariants: the token ids are those of the marker-free text, so they never depend on where the
breakpoints are; a breakpoint position is a token boundary at or before the block's end, which is
all a prefix cache keyed on token ids needs (a prefix is correct to reuse wherever it ends).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Breakpoint", "RenderedPrompt", "chat_messages", "chat_tools", "render_prompt"]

_OPEN, _CLOSE = "\ue000", "\ue001"
_MARKER = re.compile(f"{_OPEN}(\\d+){_CLOSE}")


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A `cache_control` breakpoint: the prompt's first `position` tokens may be cached for `ttl`."""

    position: int
    ttl: str


@dataclass(frozen=True, slots=True)
class RenderedPrompt:
    """The prompt's token ids, its breakpoints, and each cache_reference's token span [start, end)."""

    text: str
    token_ids: list[int]
    breakpoints: list[Breakpoint] = field(default_factory=list)
    references: dict[str, tuple[int, int]] = field(default_factory=dict)


class _Marks:
    """Hands out numbered markers and remembers what each one stands for."""

    def __init__(self) -> None:
        self.count = 0
        self.breakpoints: dict[int, str] = {}
        """marker -> the breakpoint's TTL"""
        self.references: list[tuple[str, int, int]] = []
        """(cache_reference, opening marker, closing marker)"""

    def _next(self) -> tuple[int, str]:
        n = self.count
        self.count += 1
        return n, f"{_OPEN}{n}{_CLOSE}"

    def breakpoint(self, block: Mapping[str, Any]) -> str:
        control = block.get("cache_control")
        if not isinstance(control, Mapping):
            return ""
        n, marker = self._next()
        self.breakpoints[n] = "1h" if control.get("ttl") == "1h" else "5m"
        return marker

    def reference(self, name: str) -> tuple[str, str]:
        n, opening = self._next()
        m, closing = self._next()
        self.references.append((name, n, m))
        return opening, closing


def _text(content: object) -> str:
    """A content value (string or blocks) as plain text; media become placeholders."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in ("image", "document"):
            parts.append(f"[{kind}]")
    return "\n".join(parts)


def _blocks(content: object) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _user_turns(
    blocks: Sequence[Mapping[str, Any]], marks: _Marks, names: Mapping[str, str]
) -> list[dict[str, Any]]:
    """A user message's blocks: each tool_result its own `tool` message, text runs as `user` ones."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []

    def flush() -> None:
        if texts:
            out.append({"role": "user", "content": "\n".join(texts)})
            texts.clear()

    for block in blocks:
        kind = block.get("type")
        if kind == "tool_result":
            flush()
            body = _text(block.get("content"))
            reference = block.get("cache_reference")
            if isinstance(reference, str):
                opening, closing = marks.reference(reference)
                body = opening + body + closing
            tool_use_id = str(block.get("tool_use_id", ""))
            out.append(
                {
                    "role": "tool",
                    "content": body + marks.breakpoint(block),
                    "tool_call_id": tool_use_id,
                    "name": names.get(tool_use_id, ""),
                }
            )
        elif kind == "text":
            texts.append(str(block.get("text", "")) + marks.breakpoint(block))
        elif kind in ("image", "document"):
            texts.append(f"[{kind}]" + marks.breakpoint(block))
    flush()
    return out


def _assistant_turn(blocks: Sequence[Mapping[str, Any]], marks: _Marks) -> dict[str, Any]:
    """An assistant message; thinking is left out (chat templates have no place for signatures)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")) + marks.breakpoint(block))
        elif kind == "tool_use":
            # A breakpoint on a tool_use has no text to carry a marker: it is not a cache position.
            calls.append(
                {
                    "type": "function",
                    "id": str(block.get("id", "")),
                    "function": {
                        "name": str(block.get("name", "")),
                        "arguments": dict(block.get("input") or {}),
                    },
                }
            )
    turn: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
    if calls:
        turn["tool_calls"] = calls
    return turn


def chat_messages(
    system: str | Sequence[Mapping[str, Any]] | None,
    messages: Sequence[Mapping[str, Any]],
    marks: _Marks | None = None,
) -> list[dict[str, Any]]:
    """The request's system prompt and messages in the Hugging Face chat format."""
    marks = marks or _Marks()
    names = {
        str(b.get("id")): str(b.get("name"))
        for m in messages
        for b in _blocks(m.get("content"))
        if b.get("type") == "tool_use"
    }
    out: list[dict[str, Any]] = []
    system_blocks = _blocks(system)
    if system_blocks:
        text = "\n".join(str(b.get("text", "")) + marks.breakpoint(b) for b in system_blocks)
        out.append({"role": "system", "content": text})
    for message in messages:
        blocks = _blocks(message.get("content"))
        if message.get("role") == "assistant":
            out.append(_assistant_turn(blocks, marks))
        else:
            out.extend(_user_turns(blocks, marks, names))
    return out


def chat_tools(tools: Sequence[Mapping[str, Any]], marks: _Marks | None = None) -> list[dict[str, Any]]:
    """Tool definitions as JSON-schema functions, the form chat templates take."""
    marks = marks or _Marks()
    out: list[dict[str, Any]] = []
    for tool in tools:
        function: dict[str, Any] = {"name": str(tool.get("name", ""))}
        if "description" in tool:
            # The description is the only free text of a tool, so it carries the breakpoint marker.
            function["description"] = str(tool["description"]) + marks.breakpoint(tool)
        function["parameters"] = dict(tool.get("input_schema") or {"type": "object", "properties": {}})
        out.append({"type": "function", "function": function})
    return out


def render_prompt(
    tokenizer: Any,
    *,
    system: str | Sequence[Mapping[str, Any]] | None,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] = (),
) -> RenderedPrompt:
    """Render a request through `tokenizer`'s chat template and locate its breakpoints and references.

    A trailing assistant message is a prefill: the template continues it instead of opening a new
    assistant turn.
    """
    marks = _Marks()
    hf_tools = chat_tools(tools, marks)
    hf_messages = chat_messages(system, messages, marks)
    template = str(getattr(tokenizer, "chat_template", "") or "")
    if "tool_calls" not in template:
        hf_messages = [_calls_as_text(m) for m in hf_messages]
    if hf_tools and "tools" not in template.replace("tool_calls", ""):
        hf_messages = _tools_in_system(hf_messages, hf_tools)
        hf_tools = []
    prefill = (
        bool(hf_messages) and hf_messages[-1]["role"] == "assistant" and "tool_calls" not in hf_messages[-1]
    )
    marked = str(
        tokenizer.apply_chat_template(
            hf_messages,
            tools=hf_tools or None,
            tokenize=False,
            add_generation_prompt=not prefill,
            continue_final_message=prefill,
        )
    )
    text, offsets = _strip_markers(marked)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = [int(i) for i in encoded["input_ids"]]
    starts = [int(s) for s, _ in encoded["offset_mapping"]]
    ends = [int(e) for _, e in encoded["offset_mapping"]]
    # Offsets are non-decreasing for the tokenizers chat models ship; a token that straddles a marker
    # ends after it, so the prefix stops before it.
    breakpoints = [
        Breakpoint(bisect.bisect_right(ends, offsets[n]), ttl)
        for n, ttl in sorted(marks.breakpoints.items())
        if n in offsets
    ]
    references: dict[str, tuple[int, int]] = {}
    for name, opening, closing in marks.references:
        # A name repeated later in the request keeps its first span, as the server's registry does.
        if opening in offsets and closing in offsets and name not in references:
            first = bisect.bisect_right(ends, offsets[opening])
            last = bisect.bisect_left(starts, offsets[closing])
            references[name] = (first, max(first, last))
    return RenderedPrompt(text=text, token_ids=ids, breakpoints=breakpoints, references=references)


TOOLS_PREAMBLE = (
    "You are an expert in composing functions. You are given a question and a set of possible "
    "functions. Based on the question, you will need to make one or more function/tool calls to "
    "achieve the purpose. If none of the functions can be used, answer in plain text.\n\n"
    "You have access to the following tools:\n<tools>{tools}</tools>\n\n"
    "To call tools, answer in this format and nothing else:\n"
    '<tool_call>[\n{{"name": "func_name1", "arguments": {{"argument1": "value1"}}}}\n]</tool_call>'
)
"""How tools are offered to a model whose chat template has no place for them (SmolLM2's, for one):
the wording SmolLM2's function-calling data used, which `toolcalls` parses."""


def _example(tools: Sequence[Mapping[str, Any]]) -> str:
    """Example calls to the first offered tool whose first required parameter is a string.

    Measured on SmolLM2-135M-Instruct: with the preamble alone it answered "Read the file notes.txt"
    with Python code; with one example it wrote the call, but behind foldline's own system prompt
    it copied the example's file name; two examples with different names are meant to show it
    that the value comes from the request.
    """
    for tool in tools:
        function = tool["function"]
        schema = function.get("parameters") or {}
        required = schema.get("required") or []
        properties = schema.get("properties") or {}
        if required and (properties.get(required[0]) or {}).get("type") == "string":
            name, parameter = function["name"], required[0]
            # Two examples with different values, so the value is seen to come from the request.
            return "".join(
                f"\n\nExample. User: {name} the file {value}\nAssistant: <tool_call>"
                f'[{{"name": "{name}", "arguments": {{"{parameter}": "{value}"}}}}]</tool_call>'
                for value in ("a.txt", "src/b.py")
            )
    return ""


def _tools_in_system(
    messages: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`messages` with the tool definitions written into the system message (one is added if none)."""
    from foldline._json import dumps

    listing = dumps([t["function"] for t in tools]).decode()
    preamble = TOOLS_PREAMBLE.format(tools=listing) + _example(tools)
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{preamble}"}, *messages[1:]]
    return [{"role": "system", "content": preamble}, *messages]


def _calls_as_text(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message's tool calls written into its text, for a template that drops `tool_calls`
    (the model must see the calls it made, in the form it is asked to make them)."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    from foldline._json import dumps

    written = "".join(
        "\n<tool_call>\n"
        + dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]}).decode()
        + "\n</tool_call>"
        for c in calls
    )
    rest = {k: v for k, v in message.items() if k != "tool_calls"}
    return {**rest, "content": (str(message.get("content") or "") + written).strip()}


def _strip_markers(marked: str) -> tuple[str, dict[int, int]]:
    """The text without markers, and each marker's offset in it (its first occurrence)."""
    pieces: list[str] = []
    offsets: dict[int, int] = {}
    length = 0
    last = 0
    for match in _MARKER.finditer(marked):
        pieces.append(marked[last : match.start()])
        length += match.start() - last
        offsets.setdefault(int(match.group(1)), length)
        last = match.end()
    pieces.append(marked[last:])
    return "".join(pieces), offsets
