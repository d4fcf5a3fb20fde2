"""Snip, level 1 of compaction: the model deletes messages by short id (design.md §3.1).

Owns `apply_snip_removals` (R3.1.4), which rebuilds the deletion
view from `snip_boundary` records and relinks `parent_uuid` so that every survivor's parent is a
survivor (or none). The disk is never touched (R3.1.3). The short-id tag (R3.1.1) is the
timeline's (`foldline.timeline.short_id`, re-exported here), so the request path reads it
without importing compaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from foldline.timeline import AnyRecord, Entry, SnipBoundary, short_id

__all__ = ["apply_snip_removals", "short_id", "snipped_uuids"]


def snipped_uuids(records: Iterable[AnyRecord]) -> set[str]:
    """Every uuid removed by any snip boundary in `records`."""
    removed: set[str] = set()
    for record in records:
        if isinstance(record, SnipBoundary):
            removed.update(record.removed_uuids)
    return removed


def apply_snip_removals(entries: Sequence[Entry], removed: set[str]) -> list[Entry]:
    """Drop `removed` entries and repoint each survivor's parent at its nearest surviving ancestor.

    Survivors keep their order. A parent chain that leaves the known entries, or loops, ends at
    `None` rather than hanging.
    """
    if not removed:
        return list(entries)
    parent_of = {e.uuid: e.parent_uuid for e in entries}
    result: list[Entry] = []
    for entry in entries:
        if entry.uuid in removed:
            continue
        parent = entry.parent_uuid
        seen: set[str] = set()
        while parent is not None and parent in removed and parent not in seen:
            seen.add(parent)
            parent = parent_of.get(parent)
        if parent is not None and parent in removed:
            parent = None
        if parent != entry.parent_uuid:
            entry = msgspec.structs.replace(entry, parent_uuid=parent)
        result.append(entry)
    return result
