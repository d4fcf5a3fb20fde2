"""What keeps a rebuild cheap: `GrowthCursor` and `collection_paused`.

Incremental stages (request assembly, normalization) redo only what was appended since their last
call. Whether the new input extends the old one is decided here, once: same length or longer, and
the element last seen is the very same object at the same place. Anything else starts over.

A full rebuild (a resumed session's first request) cannot be incremental; `collection_paused`
keeps the garbage collector from walking the whole session while it runs.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Generic, TypeVar

__all__ = ["GrowthCursor", "collection_paused"]

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


@contextmanager
def collection_paused() -> Iterator[None]:
    """The cyclic garbage collector held off for one burst of acyclic allocation: building a request,
    loading a transcript or a saved request head.

    Building a request allocates a few hundred thousand short-lived dicts and lists. Each time the
    allocation count passes CPython's threshold it collects, and the full collections walk every
    live object, the session's records included: at 20K messages, three of them were about a third
    of a cold build. Nothing built here forms a cycle, so nothing is left for later; collection
    resumes as it was on exit (left off if the caller had turned it off).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            # Promote what the burst built straight to the oldest generation (freeze, then unfreeze
            # into it): the first young collection after it would otherwise walk all of it, some
            # 50 ms after a cold 20K-message build, to find no cycle. Refcounting still frees it;
            # a full collection still looks at it. Skipped when the caller froze objects itself,
            # which unfreezing would undo.
            gc.freeze()
            gc.unfreeze()
        gc.enable()
