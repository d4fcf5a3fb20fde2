"""Tool calls out of a real model's text: the tagged form, bare JSON, and the calls it botches.

Chat templates ask for calls in different shapes, and small models drift between them:

- tagged (Hermes, Qwen, SmolLM2): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, the
  body sometimes a JSON list of such objects (SmolLM2's tuning data), sometimes with `parameters`
  for `arguments`, sometimes with the closing tag cut off at the end of the reply;
- bare JSON (Qwen2.5-Coder and others): the whole reply is such an object or list, maybe inside a
  Markdown code fence.

A call in the tagged form that cannot be read (not JSON, no `name`, `arguments` not an object) is
the model's mistake, not the server's: it becomes a `tool_use` of the reserved tool
`MALFORMED_TOOL_CALL` whose input says what was wrong, and the client's tool runner answers it with
an error result the model reads (`foldline.executor`), so the loop goes on and nothing crashes. A
call to a tool the request does not offer is passed on as it is: the client answers "No such tool".

Bare JSON is only a call when it names an offered tool: a reply that merely is JSON (the model
answering with data) stays text.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from foldline._json import loads
from foldline._types import MALFORMED_TOOL_CALL

__all__ = ["MALFORMED_TOOL_CALL", "TOOL_CALL_END", "ParsedCall", "parse_tool_calls"]

TOOL_CALL_END = "</tool_call>"

# The closing tag may be missing when the reply ended (EOS or max_tokens) inside the call.
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One call: the tool's name and its input (for a botched call, the reserved name and the error)."""

    name: str
    input: dict[str, Any]


def _botched(error: str, raw: str) -> ParsedCall:
    return ParsedCall(MALFORMED_TOOL_CALL, {"error": error, "text": raw[:2000]})


def _call_of(obj: object, raw: str) -> ParsedCall:
    """The call one JSON value states, or a botched-call record saying why it is not one."""
    if not isinstance(obj, dict):
        return _botched("a tool call must be a JSON object with `name` and `arguments`", raw)
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return _botched("the tool call has no `name`", raw)
    arguments = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(arguments, str):  # some templates carry arguments as a JSON string
        try:
            arguments = loads(arguments)
        except ValueError:
            return _botched(f"the arguments of {name} are not valid JSON", raw)
    if not isinstance(arguments, dict):
        return _botched(f"the arguments of {name} must be a JSON object", raw)
    return ParsedCall(name, arguments)


def _calls_in(body: str) -> list[ParsedCall]:
    """The calls one `<tool_call>` body holds (an object, or a list of objects)."""
    try:
        value = loads(body)
    except ValueError:
        return [_botched("the tool call is not valid JSON", body)]
    if isinstance(value, list):
        return [_call_of(item, body) for item in value] or [_botched("the tool call list is empty", body)]
    return [_call_of(value, body)]


def _bare(text: str, tool_names: Collection[str]) -> list[ParsedCall] | None:
    """The calls of a reply that is nothing but a JSON call (or list of calls) to offered tools."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    if not stripped.startswith(("{", "[")):
        return None
    try:
        value = loads(stripped)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = [_call_of(item, stripped) for item in items]
    if not calls or any(c.name not in tool_names for c in calls):
        return None
    return calls


def parse_tool_calls(text: str, tool_names: Collection[str]) -> tuple[str, list[ParsedCall]]:
    """The text the model wrote outside its calls, and the calls, in order.

    Tagged calls are taken wherever they are; without any, a reply that is only a bare JSON call to
    an offered tool is one. Anything else is text.
    """
    calls: list[ParsedCall] = []
    kept: list[str] = []
    last = 0
    for match in _TAGGED.finditer(text):
        kept.append(text[last : match.start()])
        last = match.end()
        calls.extend(_calls_in(match.group(1)))
    if calls:
        kept.append(text[last:])
        return "".join(kept).strip(), calls
    bare = _bare(text, tool_names)
    if bare is not None:
        return "", bare
    return text.strip(), []
