"""`collection_paused`: the collector is held off during a burst and left as it was after it."""

from __future__ import annotations

import gc
import warnings
import weakref
from collections.abc import Iterator

import pytest

from foldline._incremental import collection_paused


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def collector() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    gc.unfreeze()  # an in-process `foldline serve` earlier in this worker freezes what it leaves
    with warnings.catch_warnings():
        # What the freeze held is finalized now; a socket an earlier test left open warns here, and
        # the warning would fail this test, not the one that leaked it.
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    yield
    gc.unfreeze()
    if not was:
        gc.disable()


def test_what_the_burst_built_is_not_left_for_the_next_young_collection(collector: None) -> None:
    gc.collect()
    with collection_paused():
        assert not gc.isenabled()
        built = [{"n": [i]} for i in range(20_000)]
    assert gc.isenabled()
    # Promoted to the oldest generation on the way out: no young collection walks them again.
    young = gc.get_objects(0) + gc.get_objects(1)
    assert not any(o is built[0] or o is built[-1] for o in young)
    assert gc.get_freeze_count() == 0


def test_a_cycle_made_in_the_burst_is_still_collected(collector: None) -> None:
    with collection_paused():
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        probe = weakref.ref(a)
    del a, b
    gc.collect()
    assert probe() is None


def test_objects_the_caller_froze_stay_frozen(collector: None) -> None:
    # Judged by objects of its own, not by `gc.get_freeze_count()`: other frozen objects die by
    # refcount meanwhile (a thread an earlier test left finishing), and the count fell by 2 once.
    mine = [_Node() for _ in range(100)]
    gc.freeze()
    ids = {id(node) for node in mine}
    assert not any(id(o) in ids for o in gc.get_objects())  # frozen: in no generation
    with collection_paused():
        _ = [{"n": i} for i in range(1_000)]
    assert not any(id(o) in ids for o in gc.get_objects())


def test_a_disabled_collector_stays_disabled(collector: None) -> None:
    gc.disable()
    with collection_paused():
        pass
    assert not gc.isenabled()
