"""Snip: short ids (R3.1.1) and `apply_snip_removals` parent relinking (R3.1.4)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from foldline.compact.snip import apply_snip_removals, short_id, snipped_uuids
from foldline.timeline import Entry, SnipBoundary, UserEntry, UserMessage


def _entry(uuid: str, parent: str | None) -> UserEntry:
    return UserEntry(uuid=uuid, parent_uuid=parent, timestamp="t", message=UserMessage(content=uuid))


def test_short_id_is_base36_of_first_ten_hex_digits() -> None:
    uuid = "0123456789-abcd-4000-8000-000000000000"
    assert short_id(uuid) == "28tfc09"  # int("0123456789", 16) == 4886718345, "28tfc09" in base 36
    assert int(short_id(uuid), 36) == 0x0123456789


def test_short_ids_are_short_and_distinct_for_distinct_prefixes() -> None:
    ids = {short_id(f"{i:010x}-0000-4000-8000-000000000000") for i in range(0, 2**40, 2**33)}
    assert len(ids) == 128
    assert max(len(s) for s in ids) <= 8


def test_relinks_survivor_to_nearest_surviving_ancestor() -> None:
    chain = [_entry("a", None), _entry("b", "a"), _entry("c", "b"), _entry("d", "c")]
    result = apply_snip_removals(chain, {"b", "c"})
    assert [(e.uuid, e.parent_uuid) for e in result] == [("a", None), ("d", "a")]


def test_removing_the_root_makes_the_next_survivor_a_root() -> None:
    chain = [_entry("a", None), _entry("b", "a"), _entry("c", "b")]
    assert [(e.uuid, e.parent_uuid) for e in apply_snip_removals(chain, {"a"})] == [
        ("b", None),
        ("c", "b"),
    ]


def test_cycle_among_removed_entries_terminates() -> None:
    entries = [_entry("x", "y"), _entry("y", "x"), _entry("z", "x")]
    assert [(e.uuid, e.parent_uuid) for e in apply_snip_removals(entries, {"x", "y"})] == [("z", None)]


def test_snipped_uuids_unions_all_boundaries() -> None:
    records = [
        SnipBoundary(uuid="s1", timestamp="t", removed_uuids=("a",)),
        _entry("b", None),
        SnipBoundary(uuid="s2", timestamp="t", removed_uuids=("c", "d")),
    ]
    assert snipped_uuids(records) == {"a", "c", "d"}


@st.composite
def _forest(draw: st.DrawFn) -> tuple[list[Entry], set[str]]:
    """Random parent forests (each parent earlier, or dangling, or None) and a random removal set."""
    n = draw(st.integers(min_value=0, max_value=40))
    entries: list[Entry] = []
    for i in range(n):
        choice = draw(st.integers(min_value=-2, max_value=max(i - 1, -1)))
        parent = None if choice == -1 or i == 0 else ("ghost" if choice == -2 else f"e{choice}")
        entries.append(_entry(f"e{i}", parent))
    removed = {e.uuid for e in entries if draw(st.booleans())}
    return entries, removed


@settings(max_examples=500)
@given(_forest())
def test_apply_snip_removals_properties(case: tuple[list[Entry], set[str]]) -> None:
    entries, removed = case
    result = apply_snip_removals(entries, removed)
    survivors = [e.uuid for e in entries if e.uuid not in removed]
    # No survivor skipped, survivor order kept.
    assert [e.uuid for e in result] == survivors
    by_uuid = {e.uuid: e for e in entries}
    for entry in result:
        # Every survivor's parent is a survivor or none (or, unchanged, a parent outside the set).
        assert entry.parent_uuid is None or entry.parent_uuid not in removed
        # ...and it is the nearest surviving ancestor of the original chain.
        expected = by_uuid[entry.uuid].parent_uuid
        while expected is not None and expected in removed:
            expected = by_uuid[expected].parent_uuid
        assert entry.parent_uuid == expected
