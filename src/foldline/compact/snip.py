"""Snip, level 1 of compaction: the model deletes messages by short id (design.md §3.1).

Owns the short-id tag (R3.1.1) and `apply_snip_removals` (R3.1.4), which rebuilds the deletion
view from `snip_boundary` records and relinks `parent_uuid` so that every survivor's parent is a
survivor (or none). The disk is never touched (R3.1.3).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

import msgspec

from foldline.timeline import AnyRecord, Entry, SnipBoundary

__all__ = ["apply_snip_removals", "short_id", "snipped_uuids"]

_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_BASE36_PAIRS = [a + b for a in _BASE36 for b in _BASE36]
"""Every number below 36**2 as exactly two base-36 digits."""
_HEX_HEAD = re.compile(r"[0-9a-fA-F]{10}")


def short_id(uuid: str) -> str:
    """The first 10 hex digits of a uuid read as an integer, written in base 36 (R3.1.1).

    Any other string (imported ids such as `request_<hex>`, or an empty one) is tagged by the first
    10 hex digits of its SHA-256 instead, so the tag is total and stable; real uuids keep their tags,
    which snip requests already in transcripts refer to.
    """
    head = uuid.replace("-", "")[:10]
    if not _HEX_HEAD.fullmatch(head):
        head = hashlib.sha256(uuid.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    value = int(head, 16)
    # Two base-36 digits per step from a table: half the divisions (every user message is tagged
    # on each request, every one of them on a resumed session's first).
    pairs: list[str] = []
    while value >= 36 * 36:
        value, rem = divmod(value, 36 * 36)
        pairs.append(_BASE36_PAIRS[rem])
    pairs.append(_BASE36[value] if value < 36 else _BASE36_PAIRS[value])
    return "".join(reversed(pairs))


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
