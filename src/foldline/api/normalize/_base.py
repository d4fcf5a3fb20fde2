"""What the normalization pipeline passes around: messages, options, steps and the texts it writes.

Owns the wire shape (`MessageParam`), the options (`NormalizeOptions`, `MediaLimits`), the message in
the making (`_Msg`), a named step (`NormalizeStep`), and the texts the pipeline synthesizes
(`INTERRUPTED_RESULT_TEXT` and its siblings). Every step module builds on these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, TypeAlias, TypedDict

from foldline._types import Block
from foldline.timeline import Entry

INTERRUPTED_RESULT_TEXT = "[Tool call interrupted: no result was recorded]"
"""The `is_error` result synthesized for a `tool_use` whose result never reached the timeline."""
EMPTY_ASSISTANT_TEXT = "(no content)"
EMPTY_ERROR_TEXT = "[Tool error: no details were recorded]"
LEADING_USER_TEXT = "[Earlier conversation omitted]"


_THINKING = frozenset({"thinking", "redacted_thinking"})


_REMINDER_PREFIX = "<system-reminder>"


_BOTH_ROLES = frozenset({"user", "assistant"})


class MessageParam(TypedDict):
    """One Messages API message as sent: role and a list of content blocks."""

    role: Literal["user", "assistant"]
    content: list[Block]


@dataclass(frozen=True, kw_only=True)
class MediaLimits:
    """The API's image and document limits (A29-A33), checked by S7 before sending."""

    max_image_bytes: int = 5 * 1024 * 1024
    max_image_px: int = 8000
    many_images_threshold: int = 20
    """More images than this in one request lower the dimension limit to `many_images_px`."""
    many_images_px: int = 2000
    max_media_items: int = 100
    """Images plus PDF pages per request."""
    image_media_types: frozenset[str] = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True, kw_only=True)
class NormalizeOptions:
    """What a request needs from normalization besides the entries."""

    snip_enabled: bool = False
    """S5: tag each user message with `[id:<short>]` so the model can snip it (R3.1.1)."""
    thinking_enabled: bool = True
    """With thinking off, a kept final assistant prefill loses its thinking blocks (A23)."""
    allow_prefill: bool = False
    """Keep a trailing assistant message as a prefill instead of dropping it (A9)."""
    media: MediaLimits = field(default_factory=MediaLimits)


Role: TypeAlias = Literal["user", "assistant", "system", "error"]


class _Msg(NamedTuple):
    """A message in the making. `system` and `error` roles never leave the pipeline.

    A NamedTuple rather than a frozen dataclass: every step builds new messages, and a frozen
    dataclass's `__init__` (one `object.__setattr__` per field) cost several times more, which on a
    resumed session's first request (tens of thousands of messages) dominated the normalization.
    """

    role: Role
    content: list[Block]
    uuids: tuple[str, ...]
    msg_id: str = ""
    is_meta: bool = True
    """No typed user text in it (tool results, injected context, assistant output)."""
    entry: Entry | None = None
    """The single entry it was lifted from, until a merge makes it several."""
    attach_to: str | None = None
    """S1: the tool_use id an attachment belongs beside."""
    error_text: str = ""

    def with_content(self, content: list[Block]) -> _Msg:
        """The same message with other content (`_replace` is slow on a hot path)."""
        return _new_msg(
            _Msg,
            (
                self.role,
                content,
                self.uuids,
                self.msg_id,
                self.is_meta,
                self.entry,
                self.attach_to,
                self.error_text,
            ),
        )


_new_msg = tuple.__new__
"""`_new_msg(_Msg, (all eight fields))` builds a message at half the cost of `_Msg(...)`, whose
generated `__new__` is Python code: hot paths (a lift per entry, a copy per changed message) use it."""


Step: TypeAlias = Callable[[list[_Msg], NormalizeOptions], list[_Msg]]


@dataclass(frozen=True)
class NormalizeStep:
    """One named step of the pipeline; `name` is design.md's label (`"S6.h"`)."""

    name: str
    run: Step
