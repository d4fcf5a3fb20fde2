"""Microcompact's cached path against `foldline serve`, measured at the server.

The session driver is benchmarks/microcompact.py, so the test and the benchmark measure the same thing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.anyio


def _bench() -> ModuleType:
    path = Path(__file__).parents[2] / "benchmarks" / "microcompact.py"
    spec = importlib.util.spec_from_file_location("bench_microcompact", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


async def _check(turns: int, tmp_path: Path, share: float) -> None:
    bench = _bench()
    m = await bench.measure(turns, tmp_path)
    assert set(m.statuses) == {200}
    assert len(m.usages) == turns
    assert m.usages[-1].cache_deleted_input_tokens > 0
    assert bench.worst_drop(m.usages) == 0  # reads never fall by more than the span just deleted
    assert m.cache_breaks == []  # the detector takes the deletions as expected drops (R7.4)
    assert bench.pins_stable(m.bodies)  # across turns and across the resume halfway
    assert any("cache_edits" in r for r in m.receipts)
    assert bench.read_share(m.usages) >= share


async def test_cached_path_keeps_the_cache_over_a_session_with_a_resume(tmp_path: Path) -> None:
    await _check(40, tmp_path, 0.93)  # shorter: the first turn's cache write weighs more


@pytest.mark.slow
async def test_cached_path_over_100_turns(tmp_path: Path) -> None:
    await _check(100, tmp_path, 0.95)
