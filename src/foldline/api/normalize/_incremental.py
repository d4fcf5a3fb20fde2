"""Incremental normalization: `IncrementalNormalizer`, the engine's per-turn path.

Gives the same messages as `normalize_messages_for_api` for a timeline that grows by appending,
redoing only the open tail each turn. `IncrementalNormalizer.messages(entries)` equals
`normalize_messages_for_api(entries)`, errors included; whenever it cannot prove the frozen head
unaffected it normalizes from scratch.

The frozen head can leave the process (`frozen`) and come back into a fresh normalizer (`restore`),
so a resumed session need not normalize its whole history again. It is taken back only for entries
that start with the very uuids it was frozen from; anything else is normalized from scratch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter

from foldline._incremental import GrowthCursor
from foldline.api.normalize._base import (
    MessageParam,
    NormalizeOptions,
    _Msg,
)
from foldline.api.normalize._final import (
    STEPS,
    _finish,
    _wire,
)
from foldline.api.normalize._lift import _lift, lift_all
from foldline.api.normalize._s6_edges import _GOOD_ID, EDGE_STEP_NAMES, _safe_tool_id, edges_clean
from foldline.api.normalize._s7_media import (
    _as_sent,
    _check_media,
    _MediaTotals,
)
from foldline.errors import UserError
from foldline.timeline import (
    AssistantEntry,
    AttachmentEntry,
    Entry,
    UserEntry,
)

_PRE_FINAL = tuple(step for step in STEPS if step.name not in ("S7", "final"))
_EDGES = tuple(step for step in _PRE_FINAL if step.name in EDGE_STEP_NAMES)
_BEFORE_EDGES = _PRE_FINAL[: _PRE_FINAL.index(_EDGES[0])]
_AFTER_EDGES = _PRE_FINAL[_PRE_FINAL.index(_EDGES[-1]) + 1 :]
assert _BEFORE_EDGES + _EDGES + _AFTER_EDGES == _PRE_FINAL, "S6.a-S6.g must be consecutive"


_UUIDS = attrgetter("uuids")


class _Dependent(Exception):
    """The open tail reaches back into the frozen head: normalize from scratch instead."""


@dataclass
class _Head:
    """The frozen messages of a growing session, and what the tail must not refer back to."""

    wire: list[MessageParam] = field(default_factory=list)
    uuids: list[str] = field(default_factory=list)
    """The entries the head was normalized from (`entries[:tail_start]`), by uuid."""
    tool_ids: set[str] = field(default_factory=set)
    """tool_use and tool_result ids (as S6.h maps them) in the head."""
    msg_ids: set[str] = field(default_factory=set)
    media: _MediaTotals = field(default_factory=_MediaTotals)


@dataclass(frozen=True)
class FrozenHead:
    """A normalizer's frozen head, to keep across processes (`IncrementalNormalizer.frozen`)."""

    uuids: tuple[str, ...]
    """The entries it was normalized from, in order: it holds for entries that start with these."""
    wire: list[MessageParam]
    tool_ids: frozenset[str]
    msg_ids: frozenset[str]
    media: tuple[int, int, int]
    """Images, document pages and the largest image side in the head (S7 counts on from these)."""


def _refs(entries: Sequence[Entry]) -> tuple[set[str], set[str], set[str]]:
    """(tool ids, assistant message ids, attachment targets) that entries mention."""
    tool_ids: set[str] = set()
    msg_ids: set[str] = set()
    targets: set[str] = set()
    for e in entries:
        # Cheapest checks first (no `X | Y` union isinstance, which is slower): this runs per entry.
        if isinstance(e, AssistantEntry):
            msg_ids.add(e.message.id)
        elif not isinstance(e, UserEntry):
            if isinstance(e, AttachmentEntry) and e.tool_use_id:
                targets.add(e.tool_use_id)
            continue
        content = e.message.content
        for b in content if isinstance(content, list) else ():
            kind = b.get("type")
            if kind == "tool_use":
                raw = b.get("id")
            elif kind == "tool_result":
                raw = b.get("tool_use_id")
            else:
                continue
            if type(raw) is str and (raw in tool_ids or _GOOD_ID(raw)):
                tool_ids.add(raw)  # seen already (a result after its call) needs no second match
            else:
                tool_ids.add(_safe_tool_id(raw))
    return tool_ids, msg_ids, targets


class IncrementalNormalizer:
    """`normalize_messages_for_api` for a timeline that grows by appending, redoing only the open tail.

    The messages before the latest assistant reply are frozen once normalized (their wire dicts are
    reused, same objects, on every later call); each call normalizes only the entries from that
    reply on. The result is always equal to `normalize_messages_for_api(entries, ...)`: whenever the
    tail could change the frozen part (it answers, repeats or attaches to something in it, or a media
    limit depends on the total) or `entries` is not an extension of the previous call's, it starts
    over from scratch.
    """

    def __init__(self, options: NormalizeOptions | None = None) -> None:
        self.options = options or NormalizeOptions()
        self._cursor: GrowthCursor[Entry] = GrowthCursor()
        self._restored: FrozenHead | None = None
        self.reset()

    def reset(self) -> None:
        """Forget the frozen head: the next call normalizes from scratch (after a snip or compaction)."""
        self._lifted: tuple[int, Sequence[Entry], list[_Msg]] = (0, (), [])
        """(index of the first entry, the entries, their lifts) from the previous call."""
        self._head = _Head()
        self._tail_start = 0

    def messages(self, entries: Sequence[Entry]) -> list[MessageParam]:
        """The normalized messages for `entries` (the whole projected timeline, oldest first).

        Raises:
            UserError: as `normalize_messages_for_api`.
        """
        if self._cursor.advance(entries) is None:
            self.reset()
        if self._restored is not None:
            self._thaw(self._restored, entries)
            self._restored = None
        if self._tail_start:
            try:
                return self._assemble(entries)
            except _Dependent:
                self._head, self._tail_start = _Head(), 0
        return self._assemble(entries)

    def frozen(self) -> FrozenHead | None:
        """The frozen head as of the last call (None while nothing is frozen)."""
        head = self._head
        if not self._tail_start:
            return None
        media = (head.media.images, head.media.pages, head.media.max_px)
        return FrozenHead(
            tuple(head.uuids), head.wire, frozenset(head.tool_ids), frozenset(head.msg_ids), media
        )

    def restore(self, head: FrozenHead) -> None:
        """Start the next call from `head` (from `frozen`, maybe of another process) if that call's
        entries start with the head's uuids; otherwise that call normalizes from scratch as usual.

        The caller vouches that those uuids name the same entries as when the head was frozen, with
        the same options and code (`api.frozen_head` checks the transcript and a code fingerprint).
        """
        self._restored = head

    def _thaw(self, frozen: FrozenHead, entries: Sequence[Entry]) -> None:
        n = len(frozen.uuids)
        if self._tail_start or not 0 < n <= len(entries):
            return
        if any(e.uuid != u for e, u in zip(entries, frozen.uuids, strict=False)):
            return
        images, pages, max_px = frozen.media
        self._head = _Head(
            wire=list(frozen.wire),
            uuids=list(frozen.uuids),
            tool_ids=set(frozen.tool_ids),
            msg_ids=set(frozen.msg_ids),
            media=_MediaTotals(images, pages, max_px),
        )
        self._tail_start = n

    def _assemble(self, entries: Sequence[Entry]) -> list[MessageParam]:
        tail = entries[self._tail_start :]
        head = self._head
        at_start = not head.wire
        if not at_start:
            tool_ids, msg_ids, targets = _refs(tail)
            if tool_ids & head.tool_ids or msg_ids & head.msg_ids or targets & head.tool_ids:
                raise _Dependent
        # Reuse the previous call's lifts by position (the entry there must be the very same object):
        # a dict by id over the whole tail cost a tuple per entry, a lot on a resumed session's first call.
        start, seen, lifted = self._lifted
        if seen:
            msgs = [
                lifted[j] if 0 <= (j := i - start) < len(seen) and seen[j] is e else _lift(e)
                for i, e in enumerate(tail, self._tail_start)
            ]
            self._lifted = (self._tail_start, tail, msgs)
        else:
            # Nothing to reuse (a cold build): no per-entry test, and a reply's pieces joined as they
            # are lifted. Those lifts no longer line up with the entries, so the next call lifts anew
            # (its tail, from the latest reply on, is short).
            msgs = lift_all(tail)
            self._lifted = (self._tail_start, tail, msgs) if len(msgs) == len(tail) else (0, (), [])
        for step in _BEFORE_EDGES:
            msgs = step.run(msgs, self.options)
        if not edges_clean(msgs):  # one scan instead of seven when none of them would change anything
            for step in _EDGES:
                msgs = step.run(msgs, self.options)
        for step in _AFTER_EDGES:
            msgs = step.run(msgs, self.options)
        if not at_start and (not msgs or msgs[0].role != "assistant"):
            raise _Dependent
        try:
            totals = _check_media(_as_sent(msgs) if at_start else msgs, self.options.media, head.media)
        except UserError:
            if at_start:
                raise
            raise _Dependent from None
        final = _finish(msgs, self.options, at_start=at_start)
        wire = _wire(final)
        out = head.wire + wire
        # Every image counts one and every document at least one page: equal counts mean the tail holds
        # no media at all, so the head's totals need no second pass over it (a whole-session pass cold).
        no_media = totals.images == head.media.images and totals.pages == head.media.pages
        self._advance(tail, final, wire, no_media=no_media)
        return out

    def _advance(
        self, tail: Sequence[Entry], final: list[_Msg], wire: list[MessageParam], *, no_media: bool
    ) -> None:
        """Freeze the messages before the latest assistant reply, if they map onto a prefix of `tail`."""
        cut = next((j for j in range(len(final) - 1, 0, -1) if final[j].role == "assistant"), 0)
        if cut == 0 or not final[cut].uuids:
            return
        # The entry carrying the reply's first uuid, found from the end (the reply is near it): on a
        # cold build the tail is the whole session. Were that uuid also earlier (a replay), the
        # check below finds it there and nothing is frozen.
        first = final[cut].uuids[0]
        split = next((i for i in range(len(tail) - 1, -1, -1) if tail[i].uuid == first), None)
        if split is None:
            return
        frozen = [e.uuid for e in tail[:split]]
        later = {u for m in final[cut:] for u in m.uuids}
        after = {e.uuid for e in tail[split:]}
        # Set tests over C iterators, not generators: both sides of the cut can be the whole session.
        if not later.isdisjoint(frozen) or not after.isdisjoint(
            chain.from_iterable(map(_UUIDS, final[:cut]))
        ):
            return  # S1 moved an attachment across the cut: keep the tail whole
        tool_ids, msg_ids, _ = _refs(tail[:split])
        head = self._head
        if not no_media:
            head.media = _check_media(final[:cut], self.options.media, head.media)
        head.wire = head.wire + wire[:cut]
        head.uuids = head.uuids + frozen
        head.tool_ids |= tool_ids
        head.msg_ids |= msg_ids
        self._tail_start += split
