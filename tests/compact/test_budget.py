"""Level 0, the tool-result budget (R3.0): oversized results go to a file once, with a preview."""

from __future__ import annotations

from pathlib import Path

from foldline.compact.budget import apply_result_budget
from foldline.config import Config

PREVIEW = Config().tool_result_preview_chars


def _result(tool_use_id: str, content: object) -> dict[str, object]:
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}


def test_oversized_text_goes_to_a_file_with_a_preview(tmp_path: Path) -> None:
    big = "line\n" * 20_000  # 100,000 characters
    kept, moved = apply_result_budget(
        [_result("t1", "small"), _result("t2", big)],
        {"t1": "Bash", "t2": "Bash"},
        limit=50_000,
        directory=tmp_path,
        preview=PREVIEW,
    )
    assert kept[0] == _result("t1", "small")
    assert [m.tool_use_id for m in moved] == ["t2"]
    assert moved[0].path.read_text() == big  # nothing lost
    preview = str(kept[1]["content"])
    assert str(moved[0].path) in preview
    assert "100,000 characters" in preview
    assert len(preview) < PREVIEW + 400
    assert kept[1]["tool_use_id"] == "t2"


def test_text_blocks_count_but_media_and_read_results_are_left_alone(tmp_path: Path) -> None:
    blocks = [{"type": "text", "text": "x" * 30_000}, {"type": "text", "text": "y" * 30_000}]
    image = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "z" * 90_000}}]
    results = [_result("a", blocks), _result("b", image), _result("c", "r" * 90_000)]
    kept, moved = apply_result_budget(
        results, {"a": "Grep", "b": "Read", "c": "Read"}, limit=50_000, directory=tmp_path, preview=PREVIEW
    )
    assert [m.tool_use_id for m in moved] == ["a"]
    assert kept[1:] == results[1:]


def test_the_same_result_maps_to_the_same_file(tmp_path: Path) -> None:
    big = "q" * 60_000
    options = {"limit": 50_000, "directory": tmp_path, "preview": PREVIEW}
    _, first = apply_result_budget([_result("t", big)], {}, **options)
    _, second = apply_result_budget([_result("t", big)], {}, **options)
    assert first[0].path == second[0].path
    assert list(tmp_path.iterdir()) == [first[0].path]  # no temp file left behind


def test_a_read_result_past_reads_own_cap_is_moved_too(tmp_path: Path) -> None:
    """Read is exempt only up to its own cap: no tool's result reaches the context uncapped."""
    results = [_result("r1", "r" * 90_000), _result("r2", "s" * 100_001)]
    kept, moved = apply_result_budget(
        results,
        {"r1": "Read", "r2": "Read"},
        limit=50_000,
        directory=tmp_path,
        preview=2_000,
        exempt_limit=100_000,
    )
    assert kept[0] == results[0]
    assert [m.tool_use_id for m in moved] == ["r2"]
    assert moved[0].path.read_text() == "s" * 100_001


def test_the_preview_is_as_long_as_configured(tmp_path: Path) -> None:
    text = "".join(f"{n:06d}\n" for n in range(20_000))
    for preview in (100, 5_000):
        kept, _ = apply_result_budget(
            [_result("t", text)], {}, limit=50_000, directory=tmp_path, preview=preview
        )
        shown = str(kept[0]["content"]).split("\n\n", 1)[1]
        assert shown == text[:preview] + "\n…"
