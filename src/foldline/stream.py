"""Stream events and the accumulator that turns them into a complete assistant message (R5.1).

Providers translate their wire events into these types; the engine feeds them to a
`MessageAccumulator`, which raises on an out-of-order event (a block delta before its start, a
second `message_start`) instead of building a corrupt message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias, assert_never

import msgspec

from foldline._json import decode_json
from foldline._types import Block
from foldline.errors import UnexpectedModelBehavior
from foldline.timeline import AssistantMessage, Usage

__all__ = [
    "BlockStart",
    "BlockStop",
    "InputJSONDelta",
    "MessageAccumulator",
    "MessageDelta",
    "MessageStart",
    "MessageStop",
    "SignatureDelta",
    "StreamEvent",
    "TextDelta",
    "ThinkingDelta",
]


@dataclass(frozen=True)
class MessageStart:
    """A reply began: its id, model and the input-side usage."""

    id: str
    model: str
    usage: Usage


@dataclass(frozen=True)
class BlockStart:
    """Content block `index` began (text, thinking, tool_use, ...)."""

    index: int
    block: Block


@dataclass(frozen=True)
class TextDelta:
    """More text for block `index`."""

    index: int
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """More thinking text for block `index`."""

    index: int
    thinking: str


@dataclass(frozen=True)
class SignatureDelta:
    """The signature that seals thinking block `index`."""

    index: int
    signature: str


@dataclass(frozen=True)
class InputJSONDelta:
    """A piece of tool_use block `index`'s input JSON."""

    index: int
    partial_json: str


@dataclass(frozen=True)
class BlockStop:
    """Content block `index` is complete."""

    index: int


@dataclass(frozen=True)
class MessageDelta:
    """The reply's stop reason and final output usage."""

    stop_reason: str | None
    stop_sequence: str | None
    usage: Usage


@dataclass(frozen=True)
class MessageStop:
    """The reply is complete."""


StreamEvent: TypeAlias = (
    MessageStart
    | BlockStart
    | TextDelta
    | ThinkingDelta
    | SignatureDelta
    | InputJSONDelta
    | BlockStop
    | MessageDelta
    | MessageStop
)


@dataclass
class MessageAccumulator:
    """Builds one assistant message from its stream events, strictly in order."""

    id: str = ""
    model: str = ""
    blocks: list[Block] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    stop_sequence: str | None = None
    started: bool = False
    stopped: bool = False
    _open: dict[int, list[str]] = field(default_factory=dict)
    completed: list[int] = field(default_factory=list)
    """Indexes of blocks whose `content_block_stop` has arrived, in arrival order."""
    incomplete: set[int] = field(default_factory=set)
    """tool_use blocks whose input JSON never completed (output cut by `max_tokens`): never sent."""

    def feed(self, event: StreamEvent) -> None:
        """Apply one event; raises `UnexpectedModelBehavior` on an out-of-order event."""
        if isinstance(event, MessageStart):
            self._expect(not self.started, "second message_start")
            self.started, self.id, self.model, self.usage = True, event.id, event.model, event.usage
            return
        self._expect(self.started and not self.stopped, f"{type(event).__name__} outside a message")
        match event:
            case BlockStart():
                self._expect(event.index == len(self.blocks), f"block {event.index} started out of order")
                self.blocks.append(dict(event.block))
                self._open[event.index] = []
            case TextDelta():
                self._block(event.index, "text")["text"] += event.text
            case ThinkingDelta():
                self._block(event.index, "thinking")["thinking"] += event.thinking
            case SignatureDelta():
                self._block(event.index, "thinking")["signature"] = event.signature
            case InputJSONDelta():
                self._block(event.index, "tool_use")
                self._open[event.index].append(event.partial_json)
            case BlockStop():
                self._close(event.index)
            case MessageDelta():
                self.stop_reason, self.stop_sequence = event.stop_reason, event.stop_sequence
                self.usage = msgspec.structs.replace(self.usage, output_tokens=event.usage.output_tokens)
            case MessageStop():
                self.stopped = True
            case _:
                assert_never(event)

    def message(self, *, complete_only: bool = False) -> AssistantMessage:
        """The message so far.

        With `complete_only` (for aborts): blocks whose stop arrived, plus text cut mid-stream (the
        user saw it, so the model should know it said it); half-streamed thinking and tool input
        are dropped, since neither can be sent back incomplete.
        """
        blocks = [
            block
            for i, block in enumerate(self.blocks)
            if i not in self.incomplete
            and (
                not complete_only
                or i in self.completed
                or (block.get("type") == "text" and block["text"].strip())
            )
        ]
        return AssistantMessage(
            id=self.id,
            model=self.model,
            content=blocks,
            stop_reason=self.stop_reason,
            stop_sequence=self.stop_sequence,
            usage=self.usage,
        )

    def _block(self, index: int, kind: str) -> Block:
        self._expect(index in self._open, f"delta for block {index}, which is not open")
        block = self.blocks[index]
        self._expect(block.get("type") == kind, f"{kind} delta for a {block.get('type')} block")
        return block

    def _close(self, index: int) -> None:
        self._expect(index in self._open, f"stop for block {index}, which is not open")
        parts = self._open.pop(index)
        block = self.blocks[index]
        if block.get("type") == "tool_use" and parts:
            raw = "".join(parts)
            try:
                block["input"] = decode_json(raw)
            except msgspec.DecodeError:
                # Cut short by max_tokens; the engine decides whether that is an error.
                self.incomplete.add(index)
                return
        self.completed.append(index)

    @staticmethod
    def _expect(condition: bool, what: str) -> None:
        if not condition:
            raise UnexpectedModelBehavior(f"stream event out of order: {what}")
