"""The API projection of a timeline: what control records say the model should see (R1.4, R2.2).

Snip boundaries remove entries (R3.1.4), cleared results read as Microcompact's placeholder
(R3.2.2), committed collapses replace spans by their summaries (R3.3.3), and the latest compact
boundary starts the view (R3.4.4). The UI never sees any of this:
it reads the timeline itself. Everything here is a pure function of the records, so a resumed
session rebuilds exactly the projection it had (R2.2).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from foldline.compact.snip import apply_snip_removals
from foldline.timeline import (
    ENTRY_TYPES,
    AnyRecord,
    AssistantEntry,
    CachePin,
    CollapseCommit,
    CompactBoundary,
    Entry,
    LatchedHeaders,
    ResultsCleared,
    SnipBoundary,
    UserEntry,
    UserMessage,
    api_filter,
    is_api_visible,
)
from foldline.tokens import ContextCount, context_count, estimate_entry, padded

__all__ = [
    "REPROJECTING",
    "ProjectionState",
    "collapse_summary_text",
    "context_count_of",
    "context_tokens_of",
    "is_fold_summary",
    "is_fold_summary_text",
    "is_summary",
    "pins_in_view",
    "project_view",
    "rebuild_state",
]


@dataclass(frozen=True)
class ProjectionState:
    """Everything the control records of a session imply, rebuilt from the records alone."""

    removed: frozenset[str]
    """Entries snipped away (R3.1.2)."""
    collapses: tuple[CollapseCommit, ...]
    """Committed folds, in commit order (R3.3.3)."""
    boundary_index: int | None
    """Index in the records of the latest compact boundary (R3.4.4), if any."""
    pins: tuple[CachePin, ...]
    """Pinned cache_edits blocks, in pin order (R4.2.3)."""
    betas: tuple[str, ...]
    """Latched beta headers, first-sent order, no duplicates (R7.5)."""
    cleared: tuple[tuple[str, str], ...] = ()
    """(tool_use id, placeholder) of every result Microcompact cleared client-side (R3.2.2)."""


def rebuild_state(records: Sequence[AnyRecord]) -> ProjectionState:
    """Replay every control record of `records` into one `ProjectionState`."""
    removed: set[str] = set()
    collapses: list[CollapseCommit] = []
    pins: list[CachePin] = []
    betas: dict[str, None] = {}
    cleared: dict[str, str] = {}
    boundary_index: int | None = None
    for i, record in enumerate(records):
        if isinstance(record, ENTRY_TYPES):
            continue  # most records: skip them with one check, not one per control type
        if isinstance(record, SnipBoundary):
            removed.update(record.removed_uuids)
        elif isinstance(record, ResultsCleared):
            cleared.update(dict.fromkeys(record.tool_use_ids, record.placeholder))
        elif isinstance(record, CollapseCommit):
            collapses.append(record)
        elif isinstance(record, CompactBoundary):
            boundary_index = i
        elif isinstance(record, CachePin):
            pins.append(record)
        elif isinstance(record, LatchedHeaders):
            betas.update(dict.fromkeys(record.betas))
    return ProjectionState(
        frozenset(removed),
        tuple(collapses),
        boundary_index,
        tuple(pins),
        tuple(betas),
        tuple(cleared.items()),
    )


_MOVES_BLOCKS = (SnipBoundary, CollapseCommit, CompactBoundary)
"""Control records that change which messages the view holds, so message positions recorded before
them no longer point where they did."""


def pins_in_view(records: Sequence[AnyRecord]) -> list[CachePin]:
    """The pins whose (message, block) positions still hold: those after the latest snip, fold or compaction.

    A pin records where its `cache_edits` block was first injected. Removing or folding messages
    before it moves that place, and re-injecting it there could land it in another message; such a
    change rewrites the request's bytes anyway, so Microcompact clears the results those older pins
    deleted client-side instead (R3.2.4).
    """
    pins: list[CachePin] = []
    for record in reversed(records):
        if isinstance(record, _MOVES_BLOCKS):
            break
        if isinstance(record, CachePin):
            pins.append(record)
    pins.reverse()
    return pins


def _apply_cleared(entries: list[Entry], cleared: Sequence[tuple[str, str]]) -> list[Entry]:
    """Each cleared tool_result reads as its placeholder; every other block is the same object."""
    if not cleared:
        return entries
    placeholder = dict(cleared)
    out: list[Entry] = []
    for entry in entries:
        content = entry.message.content if isinstance(entry, UserEntry) else None
        if isinstance(content, list) and any(
            b.get("type") == "tool_result" and b.get("tool_use_id") in placeholder for b in content
        ):
            blocks = [
                b | {"content": placeholder[b["tool_use_id"]]}
                if b.get("type") == "tool_result" and b.get("tool_use_id") in placeholder
                else b
                for b in content
            ]
            assert isinstance(entry, UserEntry)
            entry = msgspec.structs.replace(entry, message=UserMessage(content=blocks))
        out.append(entry)
    return out


_FOLD_SUMMARY_OPENING = "<collapsed-context id="
"""How the text that stands in for a folded span begins (`collapse_summary_text`)."""


_FOLD_CLOSING = re.compile(r"<(\s*/\s*collapsed-context)", re.IGNORECASE)
"""A closing tag of the fold's wrapper, however a model might still read it as one."""


def collapse_summary_text(commit: CollapseCommit) -> str:
    """The text that stands in for a folded span in the API view."""
    # A fold quotes tool output and model text, which an attacker may have written: a closing tag
    # among them would end the fold early and pass what follows off as the user's own words.
    body = _FOLD_CLOSING.sub(r"&lt;\1", commit.summary)
    return f"{_FOLD_SUMMARY_OPENING}{commit.collapse_id}>\n{body}\n</collapsed-context>"


def is_summary(entry: Entry) -> bool:
    """A compaction's summary or a fold's stand-in: what carries the conversation's older facts."""
    return isinstance(entry, UserEntry) and (entry.is_compact_summary or is_fold_summary(entry))


def is_fold_summary(entry: Entry) -> bool:
    """A committed Collapse fold's stand-in (not a compaction's summary)."""
    if not isinstance(entry, UserEntry):
        return False
    content = entry.message.content
    return isinstance(content, str) and is_fold_summary_text(content)


def is_fold_summary_text(text: str) -> bool:
    """Text that stands in for a folded span (`collapse_summary_text`), as an entry or a sent block."""
    return text.startswith(_FOLD_SUMMARY_OPENING)


def _apply_collapses(entries: list[Entry], collapses: Sequence[CollapseCommit]) -> list[Entry]:
    for commit in collapses:
        index = {e.uuid: i for i, e in enumerate(entries)}
        first, last = index.get(commit.first_uuid), index.get(commit.last_uuid)
        if first is None or last is None or last < first:
            continue  # the span is gone (snipped, or before a compact boundary): nothing to fold
        summary = UserEntry(
            uuid=commit.uuid,
            parent_uuid=entries[first].parent_uuid,
            timestamp=commit.timestamp,
            is_meta=True,
            message=UserMessage(content=collapse_summary_text(commit)),
        )
        entries = [*entries[:first], summary, *entries[last + 1 :]]
    return entries


def project_view(records: Sequence[AnyRecord], state: ProjectionState | None = None) -> list[Entry]:
    """The entries the API layer starts from, before `normalize_messages_for_api`.

    Order of application: cut at the latest compact boundary, remove snipped entries (relinking
    parents), put placeholders in cleared results, then replace committed collapse spans by their
    summaries.
    """
    state = state or rebuild_state(records)
    start = 0 if state.boundary_index is None else state.boundary_index + 1
    entries = [r for r in records[start:] if isinstance(r, ENTRY_TYPES)]
    if state.boundary_index is not None:
        entries = _with_preserved(records, state.boundary_index, entries)
    entries = apply_snip_removals(entries, set(state.removed))
    entries = _apply_cleared(entries, state.cleared)
    return _apply_collapses(entries, state.collapses)


def _with_preserved(records: Sequence[AnyRecord], index: int, after: list[Entry]) -> list[Entry]:
    """The entries after a boundary with the ones it preserved placed right after its summary.

    The preserved entries are taken from the view as it stood before the boundary, so earlier
    boundaries, snips and folds hold for them too.
    """
    boundary = records[index]
    assert isinstance(boundary, CompactBoundary)
    if not boundary.preserved_uuids:
        return after
    wanted = set(boundary.preserved_uuids)
    kept = [e for e in project_view(records[:index]) if e.uuid in wanted]
    cut = next((i + 1 for i, e in enumerate(after) if isinstance(e, UserEntry) and e.is_compact_summary), 0)
    return [*after[:cut], *kept, *after[cut:]]


REPROJECTING = (SnipBoundary, CollapseCommit, CompactBoundary, ResultsCleared)
"""Control records that change the projection of entries already seen: rebuild it from scratch."""


def context_tokens_of(records: Sequence[AnyRecord]) -> int:
    """`context_count_of(records).total`."""
    return context_count_of(records).total


def context_count_of(records: Sequence[AnyRecord], *, unanchored_base: int = 0) -> ContextCount:
    """`context_count` of the API projection of `records`, without projecting the whole session.

    The count anchors on the newest API-visible reply with usage and estimates what follows it, so
    only that tail needs reading. A snip, fold or compaction after the anchor changes what the
    anchor covered: then the full projection is counted instead. Same result either way.
    `unanchored_base` is added when nothing anchors (see `context_count`).
    """
    tail: list[Entry] = []
    for record in reversed(records):
        if isinstance(record, REPROJECTING):
            state = rebuild_state(records)
            stale: set[str] = set()
            if state.boundary_index is not None:
                boundary = records[state.boundary_index]
                assert isinstance(boundary, CompactBoundary)
                stale = set(boundary.preserved_uuids)
            view = api_filter(project_view(records, state))
            return context_count(view, stale=stale, unanchored_base=unanchored_base)
        if not isinstance(record, ENTRY_TYPES) or not is_api_visible(record):
            continue
        if isinstance(record, AssistantEntry) and record.message.usage is not None:
            usage = record.message.usage
            rest = padded(sum(estimate_entry(e) for e in tail))
            return ContextCount(usage.prompt_tokens + usage.output_tokens, rest)
        tail.append(record)
    return ContextCount(0, unanchored_base + padded(sum(estimate_entry(e) for e in tail)))
