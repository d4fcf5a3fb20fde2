"""The semantic rules' shared view of a shape-checked body (`_Request`), and the general rules.

Owns the parameter rules (A40, A26-A28 and the sampling limits that come with thinking), the
message list as a whole (A1, A2, A3, A5, A9) and text (A6, A7, A8). The rule
families with sections of their own (pairing, thinking, media, cache_control, context window) live
beside this module and build on `_Request`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from foldline.api.validate._errors import _ROOT, _bare, _Loc
from foldline.api.validate._limits import ValidationLimits
from foldline.errors import RequestValidationError

_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


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
        at_messages = _ROOT.at("messages")
        for index, message in enumerate(self.messages):
            loc = at_messages.at(index).at("content")
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
