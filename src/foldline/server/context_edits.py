"""Server-side context editing: the request's `context_management.edits`, applied before the model sees it.

Anthropic's context-editing beta (`context-management-2025-06-27`) has the server, not the client,
drop old content from the prompt: the client keeps and resends its full history, and the response
reports what was dropped in `context_management.applied_edits`. Two edits:

- `clear_tool_uses_20250919`: once the prompt passes `trigger` (`input_tokens`, default 100,000, or
  `tool_uses`), the oldest tool results are replaced by `CLEARED_TOOL_RESULT`, all but the newest
  `keep` tool uses (default 3). `exclude_tools` are never cleared; `clear_tool_inputs` (true, or a list
  of tool names) also empties the cleared calls' `input`; `clear_at_least` applies the edit only when
  it frees at least that many input tokens.
- `clear_thinking_20251015`: drops the thinking blocks of all but the last `keep` assistant turns
  that have thinking (`{"type": "thinking_turns", "value": N}`, default 1; `"all"` keeps every one).

The edits run in the order given, each on what the previous one left; `clear_thinking_20251015` must
come first when both are given. Choices where Anthropic's documentation is silent are listed in
docs/server.md ("context_management"). Pure: bodies in, a new body out; the caller bills the cache
from the first block an edit changed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never

from foldline.errors import RequestValidationError
from foldline.server.tokenizer import count_block

__all__ = [
    "CLEARED_TOOL_RESULT",
    "CONTEXT_MANAGEMENT_BETA",
    "ClearThinking",
    "ClearToolUses",
    "EditOutcome",
    "apply_context_edits",
    "parse_context_management",
]

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
"""The `anthropic-beta` value a request with `context_management` must carry."""

CLEARED_TOOL_RESULT = "[Tool result cleared by context management to save context]"
"""What a cleared tool result's content becomes."""

_TOOL_USES = "clear_tool_uses_20250919"
_THINKING = "clear_thinking_20251015"
_EDIT_TYPES = (_TOOL_USES, _THINKING)


@dataclass(frozen=True, kw_only=True)
class ClearToolUses:
    """A parsed `clear_tool_uses_20250919` edit."""

    trigger_kind: str = "input_tokens"
    """`input_tokens` or `tool_uses`."""
    trigger: int = 100_000
    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: frozenset[str] = frozenset()
    clear_inputs: bool | frozenset[str] = False
    """True: every cleared call's input; a set: only calls of those tools."""


@dataclass(frozen=True, kw_only=True)
class ClearThinking:
    """A parsed `clear_thinking_20251015` edit; `keep=None` keeps every turn's thinking."""

    keep: int | None = 1


Edit = ClearToolUses | ClearThinking


def _bad(path: str, text: str) -> RequestValidationError:
    return RequestValidationError(f"{path}: {text}", path=path)


def _int_param(edit: Mapping[str, Any], key: str, kinds: Sequence[str], path: str) -> tuple[str, int] | None:
    """A `{"type": KIND, "value": N}` parameter, or None when absent."""
    value = edit.get(key)
    if value is None:
        return None
    where = f"{path}.{key}"
    if not isinstance(value, Mapping) or value.get("type") not in kinds:
        listed = " or ".join(f"'{k}'" for k in kinds)
        raise _bad(where, f"Input should be an object with type {listed}")
    number = value.get("value")
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise _bad(f"{where}.value", "Input should be a non-negative integer")
    return str(value["type"]), number


def _names(value: object, path: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(path, "Input should be a valid list of tool names")
    return frozenset(value)


def _inputs(value: object, path: str) -> bool | frozenset[str]:
    return bool(value) if value is None or isinstance(value, bool) else _names(value, path)


def _tool_uses_edit(edit: Mapping[str, Any], path: str) -> ClearToolUses:
    trigger = _int_param(edit, "trigger", ("input_tokens", "tool_uses"), path) or ("input_tokens", 100_000)
    keep = _int_param(edit, "keep", ("tool_uses",), path)
    least = _int_param(edit, "clear_at_least", ("input_tokens",), path)
    exclude = edit.get("exclude_tools")
    inputs = edit.get("clear_tool_inputs")
    return ClearToolUses(
        trigger_kind=trigger[0],
        trigger=trigger[1],
        keep=keep[1] if keep else 3,
        clear_at_least=least[1] if least else 0,
        exclude_tools=_names(exclude, f"{path}.exclude_tools") if exclude is not None else frozenset(),
        clear_inputs=_inputs(inputs, f"{path}.clear_tool_inputs"),
    )


def _thinking_edit(edit: Mapping[str, Any], path: str) -> ClearThinking:
    keep = edit.get("keep")
    if keep is None:
        return ClearThinking()
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return ClearThinking(keep=None)
    turns = _int_param(edit, "keep", ("thinking_turns",), path)
    assert turns is not None
    return ClearThinking(keep=turns[1])


def parse_context_management(value: object, *, beta: bool) -> list[Edit]:
    """The edits of a request's `context_management`; raises `RequestValidationError` on a bad one.

    Args:
        value: the body's `context_management` (None when absent).
        beta: whether the request carries `CONTEXT_MANAGEMENT_BETA`.
    """
    if value is None:
        return []
    if not beta:
        raise _bad(
            "context_management",
            f"context management requires the `anthropic-beta: {CONTEXT_MANAGEMENT_BETA}` header",
        )
    if not isinstance(value, Mapping):
        raise _bad("context_management", "Input should be a valid dictionary")
    raw = value.get("edits") or []
    if not isinstance(raw, list):
        raise _bad("context_management.edits", "Input should be a valid list")
    edits: list[Edit] = []
    for index, edit in enumerate(raw):
        path = f"context_management.edits.{index}"
        kind = edit.get("type") if isinstance(edit, Mapping) else None
        if kind not in _EDIT_TYPES:
            expected = ", ".join(f"'{t}'" for t in _EDIT_TYPES)
            found = f"Input tag '{kind}' found using 'type'"
            raise _bad(path, f"{found} does not match any of the expected tags: {expected}")
        assert isinstance(edit, Mapping)
        edits.append(_tool_uses_edit(edit, path) if kind == _TOOL_USES else _thinking_edit(edit, path))
    kinds = [type(e) for e in edits]
    both = ClearThinking in kinds and ClearToolUses in kinds
    if both and kinds.index(ClearThinking) > kinds.index(ClearToolUses):
        raise _bad(
            "context_management.edits",
            f"`{_THINKING}` must be listed before `{_TOOL_USES}` when both are given",
        )
    return edits


@dataclass
class EditOutcome:
    """What the edits did: the body the model sees and the response's `applied_edits`."""

    body: dict[str, Any]
    applied: list[dict[str, Any]] = field(default_factory=list)

    @property
    def cleared_tokens(self) -> int:
        """Input tokens the applied edits removed."""
        return sum(int(a["cleared_input_tokens"]) for a in self.applied)

    def response_field(self) -> dict[str, Any]:
        """The response's `context_management` object."""
        return {"applied_edits": list(self.applied)}


def _copy_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Messages whose content lists may be edited in place without touching `body`."""
    out = []
    for message in body.get("messages") or ():
        content = message.get("content")
        out.append({**message, "content": list(content) if isinstance(content, list) else content})
    return out


def _is_thinking(block: object) -> bool:
    return isinstance(block, Mapping) and block.get("type") in ("thinking", "redacted_thinking")


def _clear_thinking(messages: list[dict[str, Any]], edit: ClearThinking) -> dict[str, Any] | None:
    turns = [m for m in messages if m.get("role") == "assistant" and any(map(_is_thinking, m["content"]))]
    if edit.keep is None or len(turns) <= edit.keep:
        return None
    cleared = turns[: len(turns) - edit.keep]
    tokens = 0
    for message in cleared:
        kept = []
        for block in message["content"]:
            if _is_thinking(block):
                tokens += count_block(block)
            else:
                kept.append(block)
        message["content"] = kept
    return {"type": _THINKING, "cleared_thinking_turns": len(cleared), "cleared_input_tokens": tokens}


@dataclass
class _Use:
    message: int
    index: int
    block: Mapping[str, Any]
    result: tuple[int, int] | None = None


def _tool_uses(messages: list[dict[str, Any]]) -> list[_Use]:
    uses: list[_Use] = []
    by_id: dict[str, _Use] = {}
    for m, message in enumerate(messages):
        content = message["content"]
        if not isinstance(content, list):
            continue
        for c, block in enumerate(content):
            if not isinstance(block, Mapping):
                continue
            if message.get("role") == "assistant" and block.get("type") == "tool_use":
                use = _Use(m, c, block)
                uses.append(use)
                by_id[str(block.get("id"))] = use
            elif block.get("type") == "tool_result" and str(block.get("tool_use_id")) in by_id:
                by_id[str(block.get("tool_use_id"))].result = (m, c)
    return uses


def _clears_input(edit: ClearToolUses, name: str) -> bool:
    if isinstance(edit.clear_inputs, bool):
        return edit.clear_inputs
    return name in edit.clear_inputs


def _clear_tool_uses(
    messages: list[dict[str, Any]], edit: ClearToolUses, prompt: int
) -> dict[str, Any] | None:
    uses = _tool_uses(messages)
    reached = len(uses) if edit.trigger_kind == "tool_uses" else prompt
    if reached <= edit.trigger:
        return None
    clearable = [
        u for u in uses if str(u.block.get("name")) not in edit.exclude_tools and u.result is not None
    ]
    targets = clearable[: max(0, len(clearable) - edit.keep)]
    changes: list[tuple[int, int, dict[str, Any]]] = []
    freed = 0
    for use in targets:
        assert use.result is not None
        m, c = use.result
        old = messages[m]["content"][c]
        if old.get("content") != CLEARED_TOOL_RESULT:
            new = {**old, "content": CLEARED_TOOL_RESULT}
            freed += count_block(old) - count_block(new)
            changes.append((m, c, new))
        if _clears_input(edit, str(use.block.get("name"))) and use.block.get("input"):
            new_use = {**use.block, "input": {}}
            freed += count_block(use.block) - count_block(new_use)
            changes.append((use.message, use.index, new_use))
    cleared = sum(1 for m, _, block in changes if block.get("type") == "tool_result")
    if not changes or freed < edit.clear_at_least:
        return None
    for m, c, block in changes:
        messages[m]["content"][c] = block
    return {"type": _TOOL_USES, "cleared_tool_uses": cleared, "cleared_input_tokens": freed}


def apply_context_edits(body: Mapping[str, Any], edits: Sequence[Edit], prompt_tokens: int) -> EditOutcome:
    """Apply `edits` in order to a validated body whose prompt is `prompt_tokens` long.

    Returns the edited body (the original is not modified) and one `applied_edits` entry per edit
    that changed something.
    """
    if not edits:
        return EditOutcome(dict(body))
    messages = _copy_messages(body)
    outcome = EditOutcome({**body, "messages": messages})
    for edit in edits:
        if isinstance(edit, ClearThinking):
            applied = _clear_thinking(messages, edit)
        elif isinstance(edit, ClearToolUses):
            applied = _clear_tool_uses(messages, edit, prompt_tokens - outcome.cleared_tokens)
        else:
            assert_never(edit)
        if applied is not None:
            outcome.applied.append(applied)
    return outcome
