"""Cache-break detection: phase 1 attribution, phase 2 thresholds, expected drops (R7.2–R7.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from foldline.api.cache import prompt_state_hashes
from foldline.cachebreak import CacheBreak, CacheBreakDetector
from foldline.config import CacheConfig
from foldline.timeline import Usage

TTL = CacheConfig().ttl_seconds


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _body(system: str = "sys", tools: tuple[str, ...] = ("Read",)) -> dict[str, object]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": system,
        "tools": [{"name": n, "input_schema": {"type": "object"}} for n in tools],
        "messages": [{"role": "user", "content": "hi"}],
    }


def _call(
    detector: CacheBreakDetector, body: dict[str, object], read: int, **usage: int
) -> CacheBreak | None:
    detector.before_request(prompt_state_hashes(body), body)
    return detector.after_response(Usage(cache_read_input_tokens=read, **usage))


def test_a_client_side_change_explains_the_break_and_leaves_a_diff(tmp_path: Path) -> None:
    detector = CacheBreakDetector(diff_dir=tmp_path, clock=_Clock())
    assert _call(detector, _body(), 0) is None  # no baseline yet
    assert _call(detector, _body(), 50_000) is None  # reads grew
    report = _call(detector, _body(system="a new system prompt", tools=("Read", "Bash")), 1_000)
    assert report is not None
    assert report.changes == ("system_text", "tools", "tool_added:Bash")
    assert not report.likely_server_side
    diff = report.diff_path.read_text()
    assert '- "system": "sys"' in diff
    assert "a new system prompt" in diff
    assert "system_text" in report.describe()


def test_no_client_change_within_the_ttl_is_likely_server_side(tmp_path: Path) -> None:
    clock = _Clock()
    detector = CacheBreakDetector(diff_dir=tmp_path, clock=clock)
    _call(detector, _body(), 40_000)
    clock.now += 30
    report = _call(detector, _body(), 0)
    assert report is not None
    assert report.likely_server_side
    assert "likely server-side" in report.describe()
    _call(detector, _body(), 40_000)
    clock.now += TTL["5m"] + 1
    expired = _call(detector, _body(), 0)
    assert expired is not None
    assert not expired.likely_server_side


def test_small_drops_and_expected_drops_do_not_alarm(tmp_path: Path) -> None:
    detector = CacheBreakDetector(diff_dir=tmp_path, clock=_Clock())
    _call(detector, _body(), 100_000)
    assert _call(detector, _body(), 96_000) is None  # 4%: under the 5% threshold
    assert _call(detector, _body(), 95_000) is None  # 1,000 tokens: under the 2,000 threshold
    assert _call(detector, _body(), 10_000, cache_deleted_input_tokens=85_000) is None  # cache_edits
    _call(detector, _body(), 90_000)
    detector.reset_baseline()  # a compaction is about to shrink the prompt
    assert _call(detector, _body(), 5_000) is None
    assert list(tmp_path.iterdir()) == []


def _marked(*ttls: str) -> dict[str, object]:
    """`_body()` with a breakpoint per TTL: on the system prompt, then on the message's blocks."""
    body = _body()
    marks = [{"type": "ephemeral", "ttl": t} if t != "default" else {"type": "ephemeral"} for t in ttls]
    body["system"] = [{"type": "text", "text": "sys", "cache_control": marks[0]}]
    blocks = [{"type": "text", "text": f"part {n}", "cache_control": m} for n, m in enumerate(marks[1:])]
    body["messages"] = [{"role": "user", "content": blocks or "hi"}]
    return body


def test_a_pause_under_an_hour_is_server_side_when_every_breakpoint_lasts_an_hour(tmp_path: Path) -> None:
    clock = _Clock()
    detector = CacheBreakDetector(diff_dir=tmp_path, clock=clock)
    _call(detector, _marked("1h", "1h"), 40_000)
    clock.now += TTL["5m"] * 4  # 20 minutes: past 5m, well inside 1h
    report = _call(detector, _marked("1h", "1h"), 0)
    assert report is not None
    assert report.likely_server_side
    clock.now += TTL["1h"] + 1
    _call(detector, _marked("1h", "1h"), 40_000)
    clock.now += TTL["1h"] + 1
    expired = _call(detector, _marked("1h", "1h"), 0)
    assert expired is not None
    assert not expired.likely_server_side


@pytest.mark.parametrize("ttls", [("1h", "5m"), ("1h", "default"), ("5m", "5m")])
def test_the_shortest_breakpoint_ttl_decides(tmp_path: Path, ttls: tuple[str, ...]) -> None:
    clock = _Clock()
    detector = CacheBreakDetector(diff_dir=tmp_path, clock=clock)
    _call(detector, _marked(*ttls), 40_000)
    clock.now += TTL["5m"] * 4
    report = _call(detector, _marked(*ttls), 0)
    assert report is not None
    assert not report.likely_server_side  # a 5-minute entry had expired
    assert "TTL had passed" in report.describe()


def test_the_break_thresholds_are_the_configs(tmp_path: Path) -> None:
    loose = CacheBreakDetector(diff_dir=tmp_path, clock=_Clock())
    strict = CacheBreakDetector(
        diff_dir=tmp_path, clock=_Clock(), config=CacheConfig(break_min_fraction=0.01, break_min_tokens=500)
    )
    for detector in (loose, strict):
        _call(detector, _body(), 100_000)
    assert _call(loose, _body(), 96_000) is None
    assert _call(strict, _body(), 96_000) is not None  # 4,000 tokens and 4%: past both of its bars
