"""Shape: the API's schema layer (required fields, types, enums, patterns, extra inputs).

A body with shape errors gets only those: the API's schema layer stops before its semantic checks,
and the semantic checks may then assume a well-formed body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from foldline.api.validate._errors import _ROOT, _bare, _error, _Loc
from foldline.api.validate._limits import MIN_THINKING_BUDGET
from foldline.errors import RequestValidationError

_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
_THINKING = frozenset({"thinking", "redacted_thinking"})

_USER_BLOCKS = (
    "text",
    "image",
    "document",
    "search_result",
    "tool_result",
    "container_upload",
    "cache_edits",
)
_ASSISTANT_BLOCKS = (
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "advisor_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
)
_TOOL_RESULT_BLOCKS = ("text", "image", "document", "search_result", "tool_reference")

# Extra keys the API's schema forbids, for the block types whose fields are stable and documented.
# `cache_reference` on tool_result is the cache_edits extension (R3.2.3) the local server speaks.
_BLOCK_FIELDS: dict[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "cache_control", "citations"}),
    "image": frozenset({"type", "source", "cache_control"}),
    "document": frozenset({"type", "source", "title", "context", "citations", "cache_control"}),
    "tool_use": frozenset({"type", "id", "name", "input", "cache_control", "caller"}),
    "tool_result": frozenset(
        {"type", "tool_use_id", "content", "is_error", "cache_control", "cache_reference"}
    ),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
}


_KIND_NAMES: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "list",
    dict: "dictionary",
}


def _is_kind(value: object, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind is dict:
        return isinstance(value, Mapping)
    return isinstance(value, kind)


def _enum_text(options: Sequence[str]) -> str:
    quoted = [f"'{option}'" for option in options]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f"Input should be {listed}"


class _Shape:
    """Collects schema errors while walking the body; each method checks one part of the schema."""

    def __init__(self) -> None:
        self.errors: list[RequestValidationError] = []

    def add(self, loc: _Loc, text: str) -> None:
        self.errors.append(_error(loc, text))

    def field(
        self, obj: Mapping[str, Any], key: str, kind: type, loc: _Loc, *, required: bool = False
    ) -> Any:
        """The value at `obj[key]` if it has the right JSON kind, else `None` (and an error if due).

        A `null` optional field counts as absent, as in the API's schema.
        """
        value = obj.get(key)
        if value is None:
            if required:
                self.add(
                    loc.at(key),
                    "Field required" if key not in obj else f"Input should be a valid {_KIND_NAMES[kind]}",
                )
            return None
        if not _is_kind(value, kind):
            self.add(loc.at(key), f"Input should be a valid {_KIND_NAMES[kind]}")
            return None
        return value

    def extra_fields(self, block: Mapping[str, Any], allowed: frozenset[str], loc: _Loc) -> None:
        for key in block:
            if key not in allowed:
                self.add(loc.at(key), "Extra inputs are not permitted")

    def blocks(self, value: object, loc: _Loc) -> list[Any]:
        """The blocks of a `string | list of blocks` field: none for a string, none after an error
        for any other kind."""
        if isinstance(value, list):
            return value
        if not isinstance(value, str):
            self.add(loc, "Input should be a valid string or a valid list")
        return []

    def tagged(self, obj: Any, tags: Sequence[str], loc: _Loc) -> str | None:
        """The `type` of a discriminated-union member, or `None` after reporting why it has none."""
        if not isinstance(obj, Mapping):
            self.add(loc, "Input should be a valid dictionary")
            return None
        tag = obj.get("type")
        if not isinstance(tag, str):
            self.add(loc, "Unable to extract tag using discriminator 'type'")
            return None
        if tag not in tags:
            expected = ", ".join(f"'{name}'" for name in tags)
            self.add(
                loc,
                f"Input tag '{tag}' found using 'type' does not match any of the expected tags: {expected}",
            )
            return None
        return tag


def _check_shape(body: Mapping[str, Any]) -> list[RequestValidationError]:
    shape = _Shape()
    shape.field(body, "model", str, _ROOT, required=True)
    messages = shape.field(body, "messages", list, _ROOT, required=True)
    max_tokens = shape.field(body, "max_tokens", int, _ROOT, required=True)
    if max_tokens is not None and max_tokens < 1:
        shape.add(_ROOT.at("max_tokens"), "Input should be greater than or equal to 1")
    at_messages = _ROOT.at("messages")
    for index, message in enumerate(messages or ()):
        _shape_message(shape, message, at_messages.at(index))
    _shape_system(shape, body)
    _shape_tools(shape, body)
    _shape_tool_choice(shape, body)
    _shape_thinking(shape, body)
    _shape_sampling(shape, body)
    _shape_cache_control(shape, body, _ROOT)
    return shape.errors


def _shape_message(shape: _Shape, message: Any, loc: _Loc) -> None:
    if not isinstance(message, Mapping):
        shape.add(loc, "Input should be a valid dictionary")
        return
    role = shape.field(message, "role", str, loc, required=True)
    if role == "system":
        shape.errors.append(
            _bare(
                'messages: Unexpected role "system". The Messages API accepts a top-level `system` '
                'parameter, not "system" as an input message role.',
                loc.at("role"),
            )
        )
        return
    if role is not None and role not in ("user", "assistant"):
        shape.add(loc.at("role"), _enum_text(("user", "assistant")))
        return
    if "content" not in message:
        shape.add(loc.at("content"), "Field required")
        return
    allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
    content = loc.at("content")
    for index, block in enumerate(shape.blocks(message["content"], content)):
        _shape_block(shape, block, allowed, content.at(index))


def _shape_block(shape: _Shape, block: Any, allowed: Sequence[str], loc: _Loc) -> None:
    # A wrong-role block (tool_result in an assistant turn) is reported as an unknown tag for that role.
    kind = shape.tagged(block, allowed, loc)
    if kind is None:
        return
    here = loc.tag(kind)
    if kind in _BLOCK_FIELDS:
        shape.extra_fields(block, _BLOCK_FIELDS[kind], here)
    checker = _BLOCK_SHAPES.get(kind)
    if checker is not None:
        checker(shape, block, here)
    if kind not in _THINKING:
        _shape_cache_control(shape, block, here)


def _shape_text(shape: _Shape, block: Mapping[str, Any], loc: _Loc) -> None:
    shape.field(block, "text", str, loc, required=True)


def _source_kind(shape: _Shape, block: Mapping[str, Any], kinds: Sequence[str], loc: _Loc) -> str | None:
    """The `type` of a media block's required `source`, or `None` after reporting why it has none."""
    if "source" not in block:
        shape.add(loc.at("source"), "Field required")
        return None
    return shape.tagged(block["source"], kinds, loc.at("source"))


def _shape_image(shape: _Shape, block: Mapping[str, Any], loc: _Loc) -> None:
    if _source_kind(shape, block, ("base64", "url", "file"), loc) != "base64":
        return
    source = block["source"]
    here = loc.at("source").tag("base64")
    media_type = shape.field(source, "media_type", str, here, required=True)
    if media_type is not None and media_type not in _IMAGE_TYPES:
        shape.add(here.at("media_type"), _enum_text(_IMAGE_TYPES))
    shape.field(source, "data", str, here, required=True)


def _shape_document(shape: _Shape, block: Mapping[str, Any], loc: _Loc) -> None:
    kind = _source_kind(shape, block, ("base64", "text", "content", "url", "file"), loc)
    if kind in ("base64", "text"):
        here = loc.at("source").tag(kind)
        shape.field(block["source"], "media_type", str, here, required=True)
        shape.field(block["source"], "data", str, here, required=True)


def _shape_tool_id(shape: _Shape, block: Mapping[str, Any], key: str, loc: _Loc) -> None:
    tool_id = shape.field(block, key, str, loc, required=True)
    if tool_id is not None and not _TOOL_ID.match(tool_id):
        shape.add(loc.at(key), f"String should match pattern '{_TOOL_ID.pattern}'")


def _shape_tool_use(shape: _Shape, block: Mapping[str, Any], loc: _Loc) -> None:
    _shape_tool_id(shape, block, "id", loc)
    shape.field(block, "name", str, loc, required=True)
    shape.field(block, "input", dict, loc, required=True)


def _shape_tool_result(shape: _Shape, block: Mapping[str, Any], loc: _Loc) -> None:
    _shape_tool_id(shape, block, "tool_use_id", loc)
    shape.field(block, "is_error", bool, loc)
    content = block.get("content")
    if content is None:
        return
    here = loc.at("content")
    for index, item in enumerate(shape.blocks(content, here)):
        _shape_block(shape, item, _TOOL_RESULT_BLOCKS, here.at(index))


def _shape_thinking_block(shape: _Shape, block: Mapping[str, Any], loc: _Loc) -> None:
    shape.field(block, "thinking", str, loc, required=True)
    shape.field(block, "signature", str, loc, required=True)


def _shape_redacted(shape: _Shape, block: Mapping[str, Any], loc: _Loc) -> None:
    shape.field(block, "data", str, loc, required=True)


_BLOCK_SHAPES: dict[str, Callable[[_Shape, Mapping[str, Any], _Loc], None]] = {
    "text": _shape_text,
    "image": _shape_image,
    "document": _shape_document,
    "tool_use": _shape_tool_use,
    "tool_result": _shape_tool_result,
    "thinking": _shape_thinking_block,
    "redacted_thinking": _shape_redacted,
}


def _shape_cache_control(shape: _Shape, block: Mapping[str, Any], loc: _Loc) -> None:
    control = shape.field(block, "cache_control", dict, loc)
    if control is None:
        return
    here = loc.at("cache_control")
    kind = shape.field(control, "type", str, here, required=True)
    if kind is not None and kind != "ephemeral":
        shape.add(here.at("type"), _enum_text(("ephemeral",)))
    ttl = shape.field(control, "ttl", str, here)
    if ttl is not None and ttl not in ("5m", "1h"):
        shape.add(here.at("ttl"), _enum_text(("5m", "1h")))


def _shape_system(shape: _Shape, body: Mapping[str, Any]) -> None:
    system = body.get("system")
    if system is None:
        return
    for index, block in enumerate(shape.blocks(system, _ROOT.at("system"))):
        loc = _ROOT.at("system").at(index)
        if shape.tagged(block, ("text",), loc) == "text":
            shape.extra_fields(block, _BLOCK_FIELDS["text"], loc)
            _shape_text(shape, block, loc)
            _shape_cache_control(shape, block, loc)


def _shape_tools(shape: _Shape, body: Mapping[str, Any]) -> None:
    tools = shape.field(body, "tools", list, _ROOT)
    names: list[str] = []
    for index, tool in enumerate(tools or ()):
        loc = _ROOT.at("tools").at(index)
        if not isinstance(tool, Mapping):
            shape.add(loc, "Input should be a valid dictionary")
            continue
        kind = tool.get("type") or "custom"
        here = loc.tag(kind if isinstance(kind, str) else "custom")
        name = shape.field(tool, "name", str, here, required=True)
        if name is not None and kind == "custom" and not _TOOL_NAME.match(name):
            shape.add(here.at("name"), f"String should match pattern '{_TOOL_NAME.pattern}'")
        if kind == "custom":
            shape.field(tool, "description", str, here)
            shape.field(tool, "input_schema", dict, here, required=True)
        _shape_cache_control(shape, tool, here)
        if name is not None:
            names.append(name)
    if len(set(names)) != len(names):
        shape.add(_ROOT.at("tools"), "Tool names must be unique.")


def _shape_tool_choice(shape: _Shape, body: Mapping[str, Any]) -> None:
    if body.get("tool_choice") is None:
        return
    loc = _ROOT.at("tool_choice")
    kind = shape.tagged(body["tool_choice"], ("auto", "any", "tool", "none"), loc)
    if kind is not None:
        shape.field(body["tool_choice"], "disable_parallel_tool_use", bool, loc.tag(kind))
    if kind == "tool":
        shape.field(body["tool_choice"], "name", str, loc.tag(kind), required=True)


def _shape_thinking(shape: _Shape, body: Mapping[str, Any]) -> None:
    if body.get("thinking") is None:
        return
    loc = _ROOT.at("thinking")
    kind = shape.tagged(body["thinking"], ("enabled", "disabled", "adaptive"), loc)
    if kind != "enabled":
        return
    here = loc.tag("enabled")
    budget = shape.field(body["thinking"], "budget_tokens", int, here, required=True)
    if budget is not None and budget < MIN_THINKING_BUDGET:
        shape.add(here.at("budget_tokens"), f"Input should be greater than or equal to {MIN_THINKING_BUDGET}")


def _shape_sampling(shape: _Shape, body: Mapping[str, Any]) -> None:
    for key in ("temperature", "top_p"):
        value = shape.field(body, key, float, _ROOT)
        if value is not None and value < 0:
            shape.add(_ROOT.at(key), "Input should be greater than or equal to 0")
        elif value is not None and value > 1:
            shape.add(_ROOT.at(key), "Input should be less than or equal to 1")
    top_k = shape.field(body, "top_k", int, _ROOT)
    if top_k is not None and top_k < 0:
        shape.add(_ROOT.at("top_k"), "Input should be greater than or equal to 0")
    sequences = shape.field(body, "stop_sequences", list, _ROOT)
    for index, sequence in enumerate(sequences or ()):
        if not isinstance(sequence, str):
            shape.add(_ROOT.at("stop_sequences").at(index), "Input should be a valid string")
    shape.field(body, "stream", bool, _ROOT)
    metadata = shape.field(body, "metadata", dict, _ROOT)
    if metadata is not None:
        shape.field(metadata, "user_id", str, _ROOT.at("metadata"))
