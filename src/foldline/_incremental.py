"""`GrowthCursor`: tells an append-only caller's next input from a different one, by identity.

Incremental stages (request assembly, normalization) redo only what was appended since their last
call. Whether the new input extends the old one is decided here, once: same length or longer, and
the element last seen is the very same object at the same place. Anything else starts over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

__all__ = ["GrowthCursor"]

T = TypeVar("T")


class GrowthCursor(Generic[T]):
    """Remembers how much of a sequence was seen and its last element."""

    def __init__(self) -> None:
        self._seen = 0
        self._last: T | None = None

    def advance(self, items: Sequence[T]) -> Sequence[T] | None:
        """The items appended since the previous call, or None when `items` does not extend it."""
        extends = 0 < self._seen <= len(items) and items[self._seen - 1] is self._last
        appended = items[self._seen :] if extends else None
        self._seen, self._last = len(items), (items[-1] if items else None)
        return appended
