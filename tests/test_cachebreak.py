"""Cache-break detection: phase 1 attribution, phase 2 thresholds, expected drops (R7.2–R7.4)."""

from __future__ import annotations

from pathlib import Path

from foldline.api.cache import prompt_state_hashes
from foldline.cachebreak import CACHE_TTL_S, CacheBreak, CacheBreakDetector
from foldline.timeline import Usage


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
    clock.now += CACHE_TTL_S + 1
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
