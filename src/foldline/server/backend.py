"""The scripted backend: deterministic replies for tests and demos (R8.5).

A scenario is an ordered list of replies. A reply with a `when` predicate answers any request the
predicate matches (first match wins, checked before the ordered ones); the others are chosen in order
by turn, where the turn is the number of assistant messages in the request (so a retried request gets
the same reply) or, with `select="sequence"`, by call count. Past the end of the script, or with no
script at all, the reply is a short deterministic echo of the last user message (or an error, with
`strict=True`). The scenario file format is documented in docs/server.md.

Invariants: the same request always renders to the same message (ids are hashes of the request), so a
streamed and a non-streamed call for the same step agree; tool_use ids are unique per conversation
position; every call is recorded in `ScriptedBackend.calls` as the backend saw it (after cache_edits).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from foldline._json import dumps, loads
from foldline._types import Block
from foldline.errors import UserError
from foldline.server.tokenizer import count_block, split_tokens

__all__ = [
    "Backend",
    "BackendRequest",
    "Generated",
    "GeneratingBackend",
    "Predicate",
    "Prefilled",
    "RenderedReply",
    "Reply",
    "ScriptedBackend",
    "TextDelta",
    "load_scenario",
    "message_id",
    "text_of",
]

StopReason = Literal["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"]
_STOP_REASONS: frozenset[str] = frozenset(StopReason.__args__)  # type: ignore[attr-defined]


@dataclass(frozen=True, kw_only=True)
class BackendRequest:
    """What the backend is asked: the validated request as the model would see it."""

    model: str
    messages: list[dict[str, Any]]
    """After cache_edits: deleted tool_results and cache_edits blocks are gone."""
    system: str | list[Block] | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 4096
    thinking: Mapping[str, Any] | None = None
    request_key: str = ""
    """The request's full prefix key; replies hash it into their ids."""
    deleted_references: frozenset[str] = frozenset()
    """The `cache_reference`s this request deletes through cache_edits (already gone from `messages`)."""
    unedited_messages: list[dict[str, Any]] | None = None
    """The messages with the deleted tool_results still in (cache_edits blocks dropped), for a backend
    that keeps K/V and masks deleted spans rather than re-reading the prompt without them; None when
    the server passed only the edited view."""

    @property
    def turn(self) -> int:
        """Assistant messages before the reply (a trailing prefill does not count)."""
        roles = [m.get("role") for m in self.messages]
        if roles and roles[-1] == "assistant":
            roles.pop()
        return roles.count("assistant")

    def last_user_text(self) -> str:
        """The text of the last user message's text blocks (empty when it has none)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return text_of(message.get("content"))
        return ""

    def system_text(self) -> str:
        """The system prompt as one string."""
        return text_of(self.system)


def text_of(content: object) -> str:
    """The text of a `content` value: a string as is, or its blocks' `text` fields joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and "text" in b)
    return ""


_WHEN_TYPES: dict[str, type] = {
    "last_user_contains": str,
    "system_contains": str,
    "model": str,
    "turn": int,
}
"""The keys a scenario reply's `when` may use, and the JSON type each value must have."""


@dataclass(frozen=True, kw_only=True)
class Predicate:
    """When a reply applies; every field given must match."""

    last_user_contains: str | None = None
    system_contains: str | None = None
    model: str | None = None
    turn: int | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Predicate:
        """Build from a scenario's `when` object; unknown keys are an error."""
        if not isinstance(obj, Mapping):
            raise UserError(f"scenario: `when` must be an object, not {type(obj).__name__}")
        unknown = set(obj) - set(_WHEN_TYPES)
        if unknown:
            raise UserError(
                f"scenario: unknown `when` keys {sorted(unknown)}; valid keys are {sorted(_WHEN_TYPES)}"
            )
        for key, value in obj.items():
            # A value of the wrong type never matches, so the reply would silently never be served.
            expected = _WHEN_TYPES[key]
            if isinstance(value, bool) or not isinstance(value, expected):
                raise UserError(f"scenario: `when.{key}` must be {expected.__name__}, not {value!r}")
        return cls(**dict(obj))

    def matches(self, request: BackendRequest) -> bool:
        """Whether `request` satisfies every condition."""
        return (
            (self.last_user_contains is None or self.last_user_contains in request.last_user_text())
            and (self.system_contains is None or self.system_contains in request.system_text())
            and (self.model is None or request.model == self.model)
            and (self.turn is None or request.turn == self.turn)
        )


def signature_for(thinking: str) -> str:
    """The deterministic signature the scripted backend gives a thinking block."""
    return base64.b64encode(hashlib.sha256(b"foldline:" + thinking.encode()).digest()).decode()


def _shortcut_content(obj: Mapping[str, Any]) -> list[Block]:
    content: list[Block] = []
    if "thinking" in obj:
        thinking = str(obj["thinking"])
        content.append({"type": "thinking", "thinking": thinking, "signature": signature_for(thinking)})
    if "text" in obj:
        content.append({"type": "text", "text": str(obj["text"])})
    for call in obj.get("tool_calls") or ():
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise UserError(f"scenario: a tool call needs a string `name`: {call!r}")
        block: Block = {"type": "tool_use", "name": call["name"], "input": dict(call.get("input") or {})}
        if "id" in call:
            block["id"] = str(call["id"])
        content.append(block)
    return content


@dataclass(frozen=True, kw_only=True)
class Reply:
    """One scripted assistant reply."""

    content: tuple[Block, ...]
    stop_reason: StopReason | None = None
    """None: `tool_use` when the content has a tool call, else `end_turn`."""
    when: Predicate | None = None
    usage: Mapping[str, Any] | None = None
    """Set by a backend that counts its own tokens (a real model): the response's `usage` as given,
    in place of the server's tokenizer and prompt-cache accounting, and the content is not cut again
    at `max_tokens` (the backend already stopped there)."""

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | Reply) -> Reply:
        """Parse one scenario reply (see docs/server.md); raises `UserError` on a bad one."""
        if isinstance(obj, Reply):
            return obj
        if not isinstance(obj, Mapping):
            raise UserError(f"scenario: a reply must be a JSON object, got {obj!r}")
        unknown = set(obj) - {"content", "text", "thinking", "tool_calls", "stop_reason", "when"}
        if unknown:
            raise UserError(f"scenario: unknown reply keys {sorted(unknown)}")
        if "content" in obj and {"text", "thinking", "tool_calls"} & set(obj):
            raise UserError("scenario: give either `content` or the text/thinking/tool_calls shortcuts")
        content = list(obj["content"]) if "content" in obj else _shortcut_content(obj)
        if not content:
            raise UserError(f"scenario: a reply needs some content: {dict(obj)!r}")
        stop = obj.get("stop_reason")
        if stop is not None and stop not in _STOP_REASONS:
            raise UserError(f"scenario: unknown stop_reason {stop!r}")
        when = Predicate.from_json(obj["when"]) if obj.get("when") is not None else None
        return cls(content=tuple(content), stop_reason=stop, when=when)

    def render(self, request: BackendRequest) -> RenderedReply:
        """The reply's final content for `request`: ids filled in, cut at `max_tokens`."""
        if self.usage is not None:
            stop = self.stop_reason or ("tool_use" if _has_tool_use(self.content) else "end_turn")
            return RenderedReply(list(self.content), stop, int(self.usage["output_tokens"]), self.usage)
        content: list[Block] = []
        budget = request.max_tokens
        for i, block in enumerate(self.content):
            block = dict(block)
            if block.get("type") == "tool_use" and "id" not in block:
                block["id"] = "toolu_" + _digest(request.request_key, request.turn, i)
            cost = count_block(block)
            if cost > budget:
                cut = _truncate(block, budget)
                if cut is not None:
                    content.append(cut)
                    budget -= count_block(cut)
                return RenderedReply(content, "max_tokens", request.max_tokens - budget)
            content.append(block)
            budget -= cost
        stop = self.stop_reason or ("tool_use" if _has_tool_use(content) else "end_turn")
        return RenderedReply(content, stop, request.max_tokens - budget)


def _has_tool_use(content: Sequence[Block]) -> bool:
    return any(b.get("type") == "tool_use" for b in content)


def _truncate(block: Block, budget: int) -> Block | None:
    """The block cut to `budget` tokens, or None when nothing of it fits (tool calls never split)."""
    field_name = {"text": "text", "thinking": "thinking"}.get(str(block.get("type")))
    if field_name is None or budget <= 0:
        return None
    return {**block, field_name: "".join(split_tokens(str(block[field_name]))[:budget])}


def _digest(*parts: object) -> str:
    return hashlib.sha256(dumps([str(p) for p in parts])).hexdigest()[:24]


def message_id(request: BackendRequest) -> str:
    """The reply's message id: a hash of the request, so a retried or streamed request gets the same."""
    return "msg_" + _digest(request.request_key, "message")


@dataclass(frozen=True, slots=True)
class RenderedReply:
    """A reply ready to send: content blocks, stop reason, output token count."""

    content: list[Block]
    stop_reason: str
    output_tokens: int
    usage: Mapping[str, Any] | None = None
    """The backend's own usage (`Reply.usage`); it wins over the server's accounting."""

    def message(self, request: BackendRequest, usage: Mapping[str, Any]) -> dict[str, Any]:
        """The complete non-streaming Messages API response body (the backend's usage when it has one)."""
        return {
            "id": message_id(request),
            "type": "message",
            "role": "assistant",
            "model": request.model,
            "content": self.content,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": dict(self.usage if self.usage is not None else usage),
        }


class Backend(Protocol):
    """What answers a validated request."""

    def reply(self, request: BackendRequest) -> Reply:
        """The reply to `request`."""
        ...


@dataclass(frozen=True, slots=True)
class Prefilled:
    """A generation read its prompt: the input side of the reply's usage is known (`output_tokens` 0)."""

    usage: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Text the reply's first (text) block will hold, in order: what a client may be shown already."""

    text: str


Generated = Prefilled | TextDelta | Reply
"""What a generation yields: one `Prefilled`, `TextDelta`s, then the complete `Reply` last. The
deltas joined are a prefix of the reply's text block (the rest comes with the `Reply`); tool calls
and thinking come only with the `Reply`."""


@runtime_checkable
class GeneratingBackend(Backend, Protocol):
    """A backend that produces its reply over time (a real model): the server streams the text as
    it comes, runs the generation off the event loop, and stops it when nobody waits any more."""

    def generate(
        self, request: BackendRequest, cancelled: Callable[[], bool]
    ) -> Generator[Generated, None, None]:
        """The reply to `request`, piece by piece (see `Generated`); runs in a worker thread.

        `cancelled` is polled between steps (tokens, prefill chunks, waiting for the model); once
        it is true the generator returns without its `Reply`.
        """
        ...


def default_reply(request: BackendRequest) -> Reply:
    """The short deterministic reply given when no scripted reply applies."""
    text = " ".join(request.last_user_text().split())
    if text:
        said = text if len(text) <= 200 else text[:200] + "…"
        return Reply(content=({"type": "text", "text": f"You said: {said}"},))
    last = request.messages[-1].get("content") if request.messages else None
    blocks = last if isinstance(last, list) else []
    results = len([b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"])
    return Reply(content=({"type": "text", "text": f"Received {results} tool result(s)."},))


class ScenarioExhaustedError(UserError):
    """A strict scripted backend was asked for more replies than its scenario has."""


@dataclass
class ScriptedBackend:
    """Replies from a script; records every request it was asked (`calls`).

    Args:
        replies: `Reply` objects or scenario JSON objects, in order.
        select: `turn` (index by assistant messages in the request) or `sequence` (by call count).
        strict: past the end of the script raise `ScenarioExhaustedError` (a 500 over HTTP) instead
            of the default echo reply.
    """

    replies: Sequence[Reply | Mapping[str, Any]] = ()
    select: Literal["turn", "sequence"] = "turn"
    strict: bool = False
    calls: list[BackendRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.select not in ("turn", "sequence"):
            raise UserError(f"scenario: select must be 'turn' or 'sequence', not {self.select!r}")
        parsed = [Reply.from_json(r) for r in self.replies]
        self._conditional = [r for r in parsed if r.when is not None]
        self._ordered = [r for r in parsed if r.when is None]
        self._served = 0

    def reply(self, request: BackendRequest) -> Reply:
        """The first matching conditional reply, else the next ordered one, else the default."""
        self.calls.append(request)
        for candidate in self._conditional:
            assert candidate.when is not None
            if candidate.when.matches(request):
                return candidate
        index = request.turn if self.select == "turn" else self._served
        self._served += 1
        if index < len(self._ordered):
            return self._ordered[index]
        if self.strict:
            raise ScenarioExhaustedError(f"scenario has {len(self._ordered)} replies; asked for #{index + 1}")
        return default_reply(request)


def load_scenario(path: str | Path) -> ScriptedBackend:
    """Read a scenario file: a JSON array of replies, a JSON object `{"replies": [...], ...}`, or JSONL.

    Raises:
        UserError: the file is missing or malformed (the message names the file and the problem).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UserError(f"scenario {path}: {e.strerror or e}") from e
    try:
        if path.suffix == ".jsonl":
            data: Any = [loads(line) for line in text.splitlines() if line.strip()]
        else:
            data = loads(text)
    except ValueError as e:
        raise UserError(f"scenario {path}: not valid JSON: {e}") from e
    if isinstance(data, list):
        data = {"replies": data}
    if not isinstance(data, dict) or not isinstance(data.get("replies"), list):
        raise UserError(f"scenario {path}: expected a list of replies or an object with `replies`")
    unknown = set(data) - {"replies", "select", "strict"}
    if unknown:
        raise UserError(f"scenario {path}: unknown keys {sorted(unknown)}")
    strict = data.get("strict", False)
    if not isinstance(strict, bool):
        raise UserError(f"scenario {path}: `strict` must be true or false, not {strict!r}")
    try:
        return ScriptedBackend(replies=data["replies"], select=data.get("select", "turn"), strict=strict)
    except UserError as e:
        raise UserError(f"scenario {path}: {e}") from e
