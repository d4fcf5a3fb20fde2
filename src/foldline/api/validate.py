"""The strict Messages API request validator (R8.2, R4.1.1).

Owns `ValidationLimits`, `find_errors()`, `validate_request()` and `request_too_large()`: given a
request body as JSON values, report every rule of design.md §A (A1-A45) that the body
breaks, each as a `RequestValidationError` carrying the API's own message text, status and error type.

Invariants:
- Pure: no I/O, no mutation of the body, same input -> same errors in the same order.
- Order is the order the API reports in: request bytes (413, answered before any parsing), then the
  schema ("shape": required fields, types, enums, patterns, extra inputs), then the semantic rules.
  A body with shape errors gets only those: the API's schema layer stops before its semantic checks,
  and the semantic checks may then assume a well-formed body. Within the semantic rules the order
  is `_SEMANTIC_CHECKS` (parameters, cache_control, list structure, text, tool pairing, thinking,
  media, context window): the API's own order between families is not public, except that
  cache_control errors are seen before the empty-text error a bad breakpoint also causes.
- `RequestValidationError.message` is the text the API sends, with the API's prefix (its pydantic
  location carries discriminator tags: `messages.1.content.1.tool_use.id`); `.path` is the plain JSON
  path of the offending element (`messages.1.content.1.id`), `""` when the whole body is at fault.
- Stricter than today's first-party API where another provider or an older API version rejects:
  consecutive same-role messages (rule A3) and an assistant-first list (rule A2) are errors; rule A24
  (no trailing thinking block) applies to every assistant message, not only the last; empty and
  whitespace-only system text blocks are rejected like message text blocks.
- `cache_edits` user blocks (R3.2.3) are accepted and invisible to the pairing and turn rules:
  the server strips them before the model sees the prompt.

Deliberate approximations (a body alone cannot tell more):
- Rule A21 (thinking blocks unmodified) and A22 (signature validity) reduce to "signature is a
  non-empty string".
- PDF pages are counted as the occurrences of `/Type /Page` (not `/Pages`) in the decoded bytes,
  at least 1 per document; PDFs whose page objects sit in compressed object streams count as 1.
  Non-PDF documents (text, content, URL or file sources) count as 1 page each.
- Image size (rule A29) is measured on the base64 text, which is what the 5 MB limit applies to.
- Rules A6/A7 (empty / whitespace-only text) apply to message-level text blocks; inside `tool_result`
  content only the empty-text rule applies (tool output that is just a newline is legal).
- Messages the API has no public text for (rule A16's prefix, `top_p` with thinking, wrong block type
  for a role) follow the neighbouring rules' wording and are marked where they are built.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from foldline._json import JSONEncodeError, dumps
from foldline.errors import RequestValidationError, UserError
from foldline.media import decode_base64, decode_image, pdf_pages

__all__ = [
    "ValidationLimits",
    "find_errors",
    "output_too_long_message",
    "prompt_too_long_message",
    "request_too_large",
    "validate_request",
]


@dataclass(frozen=True, kw_only=True)
class ValidationLimits:
    """The per-request limits that depend on the model, the caller's tokenizer, or the provider."""

    max_output_tokens: Mapping[str, int] | None = None
    """Model-name prefix -> largest allowed `max_tokens` (rule A40); the longest matching prefix wins.
    `None` skips the check."""
    context_window: int | None = None
    """The model's context window in tokens; with `input_tokens` it enables rules A38 and A39."""
    input_tokens: int | None = None
    """The prompt's size as counted by the caller's tokenizer."""
    max_request_bytes: int = 32 * 1024 * 1024
    """Rule A41: larger bodies get HTTP 413 `request_too_large`."""
    max_media: int = 100
    """Rule A32: images plus document pages per request (100 on 200K-context models)."""
    prefill_allowed: bool = True
    """`False` enforces rule A9: the request must end with a user message (newer models)."""
    allow_consecutive_roles: bool = False
    """`True` accepts consecutive same-role messages, as today's first-party API does (rule A3)."""
    interleaved_thinking: bool = False
    """`True` when the interleaved-thinking beta is on: `budget_tokens` may then exceed `max_tokens`."""
    max_image_bytes: int = 5 * 1024 * 1024
    """Rule A29, measured on the base64 text (other providers allow less: Bedrock 3.75 MB)."""
    max_image_pixels: int = 8000
    """Rule A30: the longer image side."""
    many_images_pixels: int = 2000
    """Rule A31: the longer image side once a request holds more than `many_images_threshold` images."""
    many_images_threshold: int = 20
    max_pdf_pages: int = 100
    """Rule A33."""
    max_cache_breakpoints: int = 4
    """Rule A42: blocks with `cache_control` across tools, system and messages."""


_DEFAULT_LIMITS = ValidationLimits()

# A schema fact, not a limit: the API's pydantic model declares `ge=1024`.
MIN_THINKING_BUDGET = 1024

_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
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


def find_errors(
    body: Mapping[str, Any],
    limits: ValidationLimits = _DEFAULT_LIMITS,
    *,
    body_bytes: int | None = None,
) -> list[RequestValidationError]:
    """Every rule the request body breaks, in the order the API would report them.

    Args:
        body: The decoded JSON request body of `POST /v1/messages`.
        limits: Model- and provider-dependent limits (output maximum, context window, ...).
        body_bytes: The encoded body's size; computed by re-encoding `body` when omitted.

    Returns:
        The errors, first-reported first; empty when the API would accept the body.

    Raises:
        UserError: `body` cannot be encoded as JSON (so its size cannot be known).
    """
    if not isinstance(body, Mapping):
        return [_error(_ROOT, "Input should be a valid dictionary")]
    too_large = _check_request_bytes(body, limits, body_bytes)
    if too_large:
        return too_large
    shape = _check_shape(body)
    if shape:
        return shape
    request = _Request.of(body, limits)
    return [error for check in _SEMANTIC_CHECKS for error in check(request)]


def validate_request(
    body: Mapping[str, Any],
    limits: ValidationLimits = _DEFAULT_LIMITS,
    *,
    body_bytes: int | None = None,
) -> None:
    """Raise the first error the API would report for `body`; return quietly if it would accept it.

    Args:
        body: The decoded JSON request body of `POST /v1/messages`.
        limits: Model- and provider-dependent limits.
        body_bytes: The encoded body's size; computed when omitted.

    Raises:
        RequestValidationError: The first broken rule, with the API's status, type and message.
        UserError: `body` cannot be encoded as JSON.
    """
    errors = find_errors(body, limits, body_bytes=body_bytes)
    if errors:
        raise errors[0]


# --- locations and error construction ---------------------------------------------------------


class _Tag(str):
    """A discriminator tag in a location: part of the API's wording, not of the JSON path."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class _Loc:
    """Where an element sits, as path segments; both renderings are built only for an error.

    `json` is the plain JSON path (`messages.1.content.0.id`); `api` is the API's location, which
    also names each discriminated-union member (`messages.1.content.0.tool_use.id`).
    """

    parts: tuple[str | int, ...] = ()

    def at(self, key: str | int) -> _Loc:
        return _Loc((*self.parts, key))

    def tag(self, name: str) -> _Loc:
        return _Loc((*self.parts, _Tag(name)))

    @property
    def json(self) -> str:
        return ".".join(str(part) for part in self.parts if not isinstance(part, _Tag))

    @property
    def api(self) -> str:
        return ".".join(str(part) for part in self.parts)


_ROOT = _Loc()


def _error(loc: _Loc, text: str) -> RequestValidationError:
    """An error prefixed with the API's location, as the API's schema layer words it."""
    return RequestValidationError(f"{loc.api}: {text}" if loc.api else text, path=loc.json)


def _bare(text: str, loc: _Loc) -> RequestValidationError:
    """An error whose API text carries its own (or no) prefix; `loc` only sets the path."""
    return RequestValidationError(text, path=loc.json)


# --- rule A41: request bytes -------------------------------------------------------------------


def _check_request_bytes(
    body: Mapping[str, Any], limits: ValidationLimits, body_bytes: int | None
) -> list[RequestValidationError]:
    if body_bytes is None:
        try:
            body_bytes = len(dumps(body))
        except JSONEncodeError as exc:
            raise UserError(f"request body is not JSON-encodable: {exc}") from exc
    if body_bytes <= limits.max_request_bytes:
        return []
    return [request_too_large(limits.max_request_bytes)]


def request_too_large(max_request_bytes: int) -> RequestValidationError:
    """The API's 413 `request_too_large` error for a body over `max_request_bytes`.

    Public because the server answers it before parsing the body, where `find_errors` cannot run.
    """
    megabytes = max_request_bytes // (1024 * 1024)
    return RequestValidationError(
        "Request exceeds the maximum allowed number of bytes. "
        f"The maximum request size is {megabytes} MB for standard API endpoints.",
        status=413,
        error_type="request_too_large",
    )


# --- shape: the API's schema layer -------------------------------------------------------------

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
        here = loc.at(key)
        value = obj.get(key)
        if value is None:
            if required:
                self.add(
                    here,
                    "Field required" if key not in obj else f"Input should be a valid {_KIND_NAMES[kind]}",
                )
            return None
        if not _is_kind(value, kind):
            self.add(here, f"Input should be a valid {_KIND_NAMES[kind]}")
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
    for index, message in enumerate(messages or ()):
        _shape_message(shape, message, _ROOT.at("messages").at(index))
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
    for index, block in enumerate(shape.blocks(message["content"], loc.at("content"))):
        _shape_block(shape, block, allowed, loc.at("content").at(index))


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
    for index, item in enumerate(shape.blocks(content, loc.at("content"))):
        _shape_block(shape, item, _TOOL_RESULT_BLOCKS, loc.at("content").at(index))


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


# --- the semantic rules ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Request:
    """A shape-checked body, with the views the semantic checks share."""

    body: Mapping[str, Any]
    limits: ValidationLimits
    messages: Sequence[Mapping[str, Any]]
    thinking: str
    """`enabled`, `adaptive`, `disabled`, or `off` when the body has no `thinking`."""

    @classmethod
    def of(cls, body: Mapping[str, Any], limits: ValidationLimits) -> _Request:
        thinking = body.get("thinking")
        mode = thinking["type"] if isinstance(thinking, Mapping) else "off"
        return cls(body, limits, body["messages"], mode)

    @property
    def thinking_on(self) -> bool:
        return self.thinking in ("enabled", "adaptive")

    def blocks(self, index: int) -> list[tuple[_Loc, Mapping[str, Any]]]:
        """Message `index`'s content blocks with their locations; a string is one text block."""
        return self._contents[index]

    @cached_property
    def _contents(self) -> list[list[tuple[_Loc, Mapping[str, Any]]]]:
        # Built once: every check walks the same blocks.
        contents: list[list[tuple[_Loc, Mapping[str, Any]]]] = []
        for index, message in enumerate(self.messages):
            loc = _ROOT.at("messages").at(index).at("content")
            content = message["content"]
            if isinstance(content, str):
                contents.append([(loc, {"type": "text", "text": content})])
            else:
                contents.append([(loc.at(j).tag(block["type"]), block) for j, block in enumerate(content)])
        return contents

    def all_blocks(self) -> Iterator[tuple[_Loc, Mapping[str, Any]]]:
        """Every message's content blocks with their locations, in body order (not those nested in
        a `tool_result`: `_tool_result_items` gives those)."""
        for blocks in self._contents:
            yield from blocks

    @property
    def prefill(self) -> int | None:
        """The final message's index when it is an assistant message (a prefill), else `None`."""
        last = len(self.messages) - 1
        return last if last >= 0 and self.messages[last]["role"] == "assistant" else None

    def block_types(self, index: int) -> list[str]:
        """The types of message `index`'s blocks that reach the model.

        `cache_edits` blocks are instructions to the server, stripped before the model sees the
        prompt, so they neither open a turn nor break tool pairing.
        """
        return [block["type"] for _, block in self.blocks(index) if block["type"] != "cache_edits"]


def _message_loc(index: int) -> _Loc:
    return _ROOT.at("messages").at(index)


_Check = Callable[[_Request], Iterator[RequestValidationError]]


def _check_parameters(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A40, A26, A27, A28 and the sampling limits that come with thinking."""
    body, limits = request.body, request.limits
    maximum = _output_maximum(body["model"], limits.max_output_tokens)
    if maximum is not None and body["max_tokens"] > maximum:
        yield _bare(
            f"max_tokens: {body['max_tokens']} > {maximum}, which is the maximum allowed number of "
            f"output tokens for {body['model']}",
            _ROOT.at("max_tokens"),
        )
    if request.thinking == "enabled" and not limits.interleaved_thinking:
        if body["max_tokens"] <= body["thinking"]["budget_tokens"]:
            yield _bare(
                "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
                f"documentation at {_DOCS}#max-tokens-and-context-window-size",
                _ROOT.at("max_tokens"),
            )
    if request.thinking_on:
        yield from _thinking_sampling(body)


def _output_maximum(model: str, table: Mapping[str, int] | None) -> int | None:
    matches = [prefix for prefix in table or () if model.startswith(prefix)]
    return table[max(matches, key=len)] if table and matches else None


def _thinking_sampling(body: Mapping[str, Any]) -> Iterator[RequestValidationError]:
    considerations = f"{_DOCS}#important-considerations-when-using-extended-thinking"
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        yield _bare(
            "temperature may only be set to 1 when thinking is enabled or in adaptive mode",
            _ROOT.at("temperature"),
        )
    if body.get("top_k") is not None:
        yield _bare(
            "`top_k` must be unset when thinking is enabled. "
            f"Please consult our documentation at {considerations}",
            _ROOT.at("top_k"),
        )
    top_p = body.get("top_p")
    if top_p is not None and top_p < 0.95:
        # No public text for this one: worded like the top_k rule, with the documented 0.95 floor.
        yield _bare(
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. "
            f"Please consult our documentation at {considerations}",
            _ROOT.at("top_p"),
        )
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice["type"] in ("any", "tool"):
        yield _bare("Thinking may not be enabled when tool_choice forces tool use.", _ROOT.at("tool_choice"))


def _check_structure(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A1, A2, A3, A5, A9: the message list as a whole."""
    messages = request.messages
    if not messages:
        yield _bare("messages: at least one message is required", _ROOT.at("messages"))
        return
    if messages[0]["role"] != "user":
        yield _bare('messages: first message must use the "user" role', _message_loc(0))
    if not request.limits.allow_consecutive_roles:
        yield from _alternation(messages)
    for index, message in enumerate(messages):
        if not message["content"] and index != request.prefill:
            yield _bare(
                f"messages.{index}: all messages must have non-empty content except for the "
                "optional final assistant message",
                _message_loc(index),
            )
    if request.prefill is not None and not request.limits.prefill_allowed:
        yield _bare(
            "This model does not support assistant message prefill. "
            "The conversation must end with a user message.",
            _message_loc(request.prefill),
        )


def _alternation(messages: Sequence[Mapping[str, Any]]) -> Iterator[RequestValidationError]:
    for index in range(1, len(messages)):
        role = messages[index]["role"]
        if role == messages[index - 1]["role"]:
            yield _bare(
                f'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row',
                _message_loc(index),
            )


def _check_text(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A6, A7, A8: empty, whitespace-only, and trailing-whitespace text."""
    system = request.body.get("system")
    for index, block in enumerate(system if isinstance(system, list) else ()):
        # The API's text for system blocks is inferred: the messages wording with a `system` scope.
        loc = _ROOT.at("system").at(index)
        yield from _text_rules(block, loc, allow_empty=False, allow_blank=False, scope="system")
    for index, message in enumerate(request.messages):
        # An empty string content is rule A5's business, not an empty text block.
        in_string = isinstance(message["content"], str)
        for loc, block in request.blocks(index):
            yield from _text_rules(block, loc, allow_empty=in_string, allow_blank=False)
            for inner_loc, inner in _tool_result_items(block, loc):
                yield from _text_rules(inner, inner_loc, allow_empty=False, allow_blank=True)
    if request.prefill is not None:
        blocks = request.blocks(request.prefill)
        if blocks and blocks[-1][1]["type"] == "text":
            text = blocks[-1][1]["text"]
            if text and text != text.rstrip():
                yield _bare(
                    "messages: final assistant content cannot end with trailing whitespace", blocks[-1][0]
                )


def _text_rules(
    block: Mapping[str, Any], loc: _Loc, *, allow_empty: bool, allow_blank: bool, scope: str = "messages"
) -> Iterator[RequestValidationError]:
    if block["type"] != "text":
        return
    text = block["text"]
    if text == "" and not allow_empty:
        yield _bare(f"{scope}: text content blocks must be non-empty", loc)
    elif text and not text.strip() and not allow_blank:
        yield _bare(f"{scope}: text content blocks must contain non-whitespace text", loc)


def _tool_result_items(block: Mapping[str, Any], loc: _Loc) -> list[tuple[_Loc, Mapping[str, Any]]]:
    """The content blocks nested in a `tool_result` (none for other blocks or string content)."""
    content = block.get("content") if block["type"] == "tool_result" else None
    if not isinstance(content, list):
        return []
    return [(loc.at("content").at(k).tag(item["type"]), item) for k, item in enumerate(content)]


# --- tool use / tool result pairing (rules A10-A17) ---


def _check_tool_pairing(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A13, A10, A11, A12, duplicate results, A16, A17."""
    yield from _unique_tool_use_ids(request)
    for index, message in enumerate(request.messages):
        if message["role"] == "assistant":
            yield from _results_follow(request, index)
        else:
            yield from _results_match(request, index)
    for loc, block in request.all_blocks():
        if block["type"] == "tool_result" and block.get("is_error"):
            yield from _error_result_rules(block, loc)


def _tool_use_ids(request: _Request, index: int) -> list[str]:
    if index < 0 or request.messages[index]["role"] != "assistant":
        return []
    return [block["id"] for _, block in request.blocks(index) if block["type"] == "tool_use"]


def _unique_tool_use_ids(request: _Request) -> Iterator[RequestValidationError]:
    seen: set[str] = set()
    for loc, block in request.all_blocks():
        if block["type"] != "tool_use":
            continue
        if block["id"] in seen:
            yield _bare(f"{loc.json}: `tool_use` ids must be unique", loc)
        seen.add(block["id"])


def _results_follow(request: _Request, index: int) -> Iterator[RequestValidationError]:
    """Rules A10 and A11: the next message starts with one tool_result per tool_use."""
    wanted = _tool_use_ids(request, index)
    if not wanted:
        return
    nxt = index + 1
    results: list[str] = []
    if nxt < len(request.messages) and request.messages[nxt]["role"] == "user":
        results = [b["tool_use_id"] for _, b in request.blocks(nxt) if b["type"] == "tool_result"]
    missing = [tool_id for tool_id in wanted if tool_id not in results]
    if missing:
        yield _bare(
            f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
            f"{', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result` block "
            "in the next message.",
            _message_loc(index),
        )
        return
    types = request.block_types(nxt)
    leading = next((i for i, t in enumerate(types) if t != "tool_result"), len(types))
    if leading < len(wanted):
        yield _bare(
            f"messages.{nxt}: Did not find {len(wanted)} `tool_result` block(s) at the beginning of this "
            "message. Messages following `tool_use` blocks must begin with a matching number of "
            "`tool_result` blocks.",
            _message_loc(nxt),
        )


def _results_match(request: _Request, index: int) -> Iterator[RequestValidationError]:
    """Rule A12 and the duplicate-result rule: each result answers one tool_use just before it."""
    known = set(_tool_use_ids(request, index - 1))
    seen: set[str] = set()
    orphans: list[tuple[_Loc, str]] = []
    for loc, block in request.blocks(index):
        if block["type"] != "tool_result":
            continue
        tool_id = block["tool_use_id"]
        if tool_id not in known:
            orphans.append((loc, tool_id))
        elif tool_id in seen:
            yield _bare(
                f"{loc.json}: each tool_use must have a single result. "
                f"Found multiple `tool_result` blocks with id: {tool_id}",
                loc,
            )
        seen.add(tool_id)
    if orphans:
        first = orphans[0][0]
        yield _bare(
            f"{first.json}: unexpected `tool_use_id` found in `tool_result` blocks: "
            f"{', '.join(tool_id for _, tool_id in orphans)}. Each `tool_result` block must have a "
            "corresponding `tool_use` block in the previous message.",
            first,
        )


def _error_result_rules(block: Mapping[str, Any], loc: _Loc) -> Iterator[RequestValidationError]:
    content = block.get("content")
    if not content:
        yield _bare(f"{loc.api}: content cannot be empty if `is_error` is true", loc)
    elif isinstance(content, list) and any(item["type"] != "text" for item in content):
        # The API quotes this rule without a location; the prefix follows rule A17's.
        yield _bare(f"{loc.api}: all content must be type 'text' if 'is_error' is true", loc)


# --- extended thinking (rules A19-A24) ---


def _check_thinking(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A20, A24, A22, A23, A19."""
    for index, message in enumerate(request.messages):
        if message["role"] != "assistant":
            continue
        blocks = request.blocks(index)
        types = [block["type"] for _, block in blocks]
        if types and types[0] not in _THINKING and any(t in _THINKING for t in types):
            yield _bare(
                f"messages.{index}.content.0: If an assistant message contains any thinking blocks, "
                f"the first block must be thinking or redacted_thinking. Found {types[0]}.",
                blocks[0][0],
            )
        if types and types[-1] in _THINKING:
            yield _bare(
                f"messages.{index}: The final block in an assistant message cannot be `thinking`.",
                _message_loc(index),
            )
        for loc, block in blocks:
            if block["type"] == "thinking" and not block["signature"]:
                yield _bare(f"{loc.json}: Invalid `signature` in `thinking` block", loc)
    yield from _final_thinking(request)


def _final_thinking(request: _Request) -> Iterator[RequestValidationError]:
    if not request.thinking_on:
        if request.prefill is not None:
            for loc, block in request.blocks(request.prefill):
                if block["type"] in _THINKING:
                    yield _bare(
                        f"{loc.json}: When thinking is disabled, an `assistant` message in the final "
                        "position cannot contain `thinking`. To use thinking blocks, enable `thinking` in "
                        "your request.",
                        loc,
                    )
                    break
        return
    turn = _final_turn_start(request)
    if turn is None:
        return
    blocks = request.blocks(turn)
    found = blocks[0][1]["type"] if blocks else "text"
    if found not in _THINKING:
        loc = blocks[0][0] if blocks else _message_loc(turn).at("content")
        yield _bare(
            f"messages.{turn}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
            f"`{found}`. When `thinking` is enabled, a final `assistant` message must start with a thinking "
            "block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you "
            "include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. "
            f"Please consult our documentation at {_DOCS}",
            loc,
        )


def _final_turn_start(request: _Request) -> int | None:
    """The first assistant message after the last user message that is more than tool results.

    That message opens the final assistant turn (its tool loop, or a prefill), which the API
    requires to start with thinking when thinking is on (rule A19).
    """
    boundary = -1
    for index, message in enumerate(request.messages):
        if message["role"] == "user" and any(t != "tool_result" for t in request.block_types(index)):
            boundary = index
    for index in range(boundary + 1, len(request.messages)):
        if request.messages[index]["role"] == "assistant":
            return index
    return None


# --- media (rules A29-A37) ---


@dataclass(frozen=True)
class _Media:
    loc: _Loc
    block: Mapping[str, Any]


def _media(request: _Request) -> list[_Media]:
    """Every image and document block, including those nested in tool results, in body order."""
    found: list[_Media] = []
    for loc, block in request.all_blocks():
        for item_loc, item in [(loc, block), *_tool_result_items(block, loc)]:
            if item["type"] in ("image", "document"):
                found.append(_Media(item_loc, item))
    return found


def _check_media(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A36, A29, A37, A35, A30, A31 per image; then A33 and A32 over the whole request."""
    media = _media(request)
    images = [item for item in media if item.block["type"] == "image"]
    limits = request.limits
    many = len(images) > limits.many_images_threshold
    for image in images:
        yield from _image_rules(image, limits, many=many)
    documents = [
        (item.block, _document_pages(item.block)) for item in media if item.block["type"] == "document"
    ]
    pages = sum(count for _, count in documents)
    pdf_pages = sum(count for block, count in documents if _is_pdf(block))
    if pdf_pages > limits.max_pdf_pages:
        yield _bare(f"A maximum of {limits.max_pdf_pages} PDF pages may be provided.", _ROOT.at("messages"))
    if len(images) + pages > limits.max_media:
        yield _bare(
            f"too many images and documents: {len(images)} + {pages} > {limits.max_media}",
            _ROOT.at("messages"),
        )


def _image_rules(image: _Media, limits: ValidationLimits, *, many: bool) -> Iterator[RequestValidationError]:
    source = image.block["source"]
    if source["type"] != "base64":
        return
    here = image.loc.at("source").tag("base64")
    data: str = source["data"]
    if not data:
        yield _bare(f"{here.api}: image cannot be empty", here)
        return
    if len(data) > limits.max_image_bytes:
        yield _bare(
            f"{here.api}: image exceeds {limits.max_image_bytes / 1048576:g} MB maximum: "
            f"{len(data)} bytes > {limits.max_image_bytes} bytes",
            here,
        )
        return
    header = decode_image(data)
    if header is None:
        yield _bare("Could not process image", here.at("data"))
        return
    actual, (width, height) = header
    if actual != source["media_type"]:
        yield _bare(
            f"{here.api}: The image was specified using the {source['media_type']} media type, "
            f"but the image appears to be a {actual} image",
            here,
        )
        return
    limit = limits.many_images_pixels if many else limits.max_image_pixels
    if max(width, height) > limit:
        qualifier = " for many-image requests" if many else ""
        yield _bare(
            f"{here.at('data').api}: At least one of the image dimensions exceed max allowed "
            f"size{qualifier}: {limit} pixels",
            here.at("data"),
        )


def _is_pdf(block: Mapping[str, Any]) -> bool:
    source = block.get("source")
    return (
        isinstance(source, Mapping)
        and source.get("type") == "base64"
        and source.get("media_type") == "application/pdf"
    )


def _document_pages(block: Mapping[str, Any]) -> int:
    """Pages of one document block: `/Type /Page` objects in a base64 PDF, else 1 (module docstring)."""
    if not _is_pdf(block):
        return 1
    raw = decode_base64(str(block["source"].get("data", "")))
    return pdf_pages(raw) if raw is not None else 1


# --- cache_control (rules A42-A44) ---


def _cache_points(request: _Request) -> Iterator[tuple[_Loc, Mapping[str, Any]]]:
    """Everything that may carry `cache_control`, in prompt order: tools, system, messages.

    The request's own top-level `cache_control` (automatic caching) comes last: it lands on the
    last cacheable block.
    """
    for index, tool in enumerate(request.body.get("tools") or ()):
        yield _ROOT.at("tools").at(index), tool
    system = request.body.get("system")
    for index, block in enumerate(system if isinstance(system, list) else ()):
        yield _ROOT.at("system").at(index), block
    for loc, block in request.all_blocks():
        yield from _tool_result_items(block, loc)
        yield loc, block
    yield _ROOT, request.body


def _check_cache_control(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A43, A44, then A42 (breakpoint count across tools, system, messages)."""
    count = 0
    seen_short = False
    for loc, block in _cache_points(request):
        control = block.get("cache_control")
        if not isinstance(control, Mapping):
            continue
        count += 1
        if block.get("type") == "text" and block.get("text") == "":
            yield _bare(f"{loc.api}: cache_control cannot be set for empty text blocks", loc)
        ttl = control.get("ttl") or "5m"
        if ttl == "1h" and seen_short:
            where = loc.at("cache_control").at("ttl")
            yield _bare(
                f"{where.json}: a ttl='1h' cache_control block must not come after a ttl='5m' "
                "cache_control block. Note that blocks are processed in the following order: "
                "`tools`, `system`, `messages`.",
                where,
            )
        seen_short = seen_short or ttl == "5m"
    maximum = request.limits.max_cache_breakpoints
    if count > maximum:
        yield _bare(
            f"A maximum of {maximum} blocks with cache_control may be provided. Found {count}.",
            _ROOT,
        )


# --- context window (rules A38, A39) ---


def _check_context(request: _Request) -> Iterator[RequestValidationError]:
    window, prompt = request.limits.context_window, request.limits.input_tokens
    if window is None or prompt is None:
        return
    max_tokens = request.body["max_tokens"]
    if prompt > window:
        yield _bare(prompt_too_long_message(prompt, window), _ROOT.at("messages"))
    elif prompt + max_tokens > window:
        yield _bare(output_too_long_message(prompt, max_tokens, window), _ROOT.at("max_tokens"))


def prompt_too_long_message(prompt: int, window: int) -> str:
    """The API's exact 400 message (rule 38) for a prompt of `prompt` tokens in a `window`-token context."""
    return f"prompt is too long: {prompt} tokens > {window} maximum"


def output_too_long_message(prompt: int, max_tokens: int, window: int) -> str:
    """The API's exact 400 message (rule 39) when the prompt fits but prompt + `max_tokens` does not."""
    return (
        f"input length and `max_tokens` exceed context limit: {prompt} + {max_tokens} > {window}, "
        "decrease input length or `max_tokens` and try again"
    )


_SEMANTIC_CHECKS: tuple[_Check, ...] = (
    _check_parameters,
    _check_cache_control,
    _check_structure,
    _check_text,
    _check_tool_pairing,
    _check_thinking,
    _check_media,
    _check_context,
)
