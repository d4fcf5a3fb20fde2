"""`foldline inspect` / `foldline cache`: the per-call data, the HTML page, and the commands.

The foldline session is recorded by the real engine (`tests/_inspect_session.py`); the Claude Code
sessions are the real transcripts under the shared data folder, checked against their raw lines.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from foldline.cachestats import break_cost, cache_stats
from foldline.cli import cli
from foldline.config import Config
from foldline.inspection import SessionView, render_html, session_view
from foldline.sessions import LoadedSession, load_session
from foldline.timeline import AssistantEntry, Usage
from foldline.usage import usage_of

from ._inspect_session import (
    BREAK_CALL,
    COMPACT_AFTER,
    INJECTION,
    RECEIPT_AFTER,
    SCRIPT_USAGE,
    SNIP_CALL,
    record_session,
)
from .conftest import claude_code_files, requires_claude_code_data


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The engine-recorded session, once for the module (the engine runs on asyncio)."""
    root = tmp_path_factory.mktemp("inspect")
    (root / "ws").mkdir()
    asyncio.run(record_session(root / "s.jsonl", root / "ws"))
    return root / "s.jsonl"


@pytest.fixture(scope="module")
def view(recorded: Path) -> SessionView:
    return session_view(load_session(recorded))


class _Tags(HTMLParser):
    """Counts start tags (with their class) and collects text and attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: Counter[str] = Counter()
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = dict(attrs).get("class")
        self.tags[tag] += 1
        if classes:
            self.tags[f"{tag}.{classes.replace(' ', '.')}"] += 1
        self.attrs += attrs

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser


# --- the data -------------------------------------------------------------------------------------


def test_one_point_per_call_with_the_usage_its_reply_recorded(view: SessionView) -> None:
    assert [c.call for c in view.calls] == list(range(1, len(SCRIPT_USAGE) + 1))
    for point, usage in zip(view.calls, SCRIPT_USAGE, strict=True):
        assert point.cache_read == usage["cache_read_input_tokens"]
        assert point.cache_write == usage["cache_creation_input_tokens"]
        assert point.uncached == usage["input_tokens"]
        assert point.context_tokens == sum(usage.values())
    assert view.peak_context == max(sum(u.values()) for u in SCRIPT_USAGE)


def test_cumulative_cost_grows_to_the_sessions_list_price(recorded: Path, view: SessionView) -> None:
    costs = [c.cumulative_cost for c in view.calls]
    assert costs == sorted(costs)
    assert costs[-1] == pytest.approx(usage_of(load_session(recorded).records).cost())
    assert view.calls[-1].cumulative_uncached_cost > costs[-1]


def test_compaction_events_are_marked_where_they_happened(view: SessionView) -> None:
    where = {
        m.kind: m.after_call
        for m in view.markers
        if m.kind not in ("prompt", "system") and not (m.kind == "receipt" and m.label.startswith("snip:"))
    }
    assert where == {
        "snip": SNIP_CALL,
        "receipt": RECEIPT_AFTER,
        "collapse": RECEIPT_AFTER,
        "compact": COMPACT_AFTER,
        "cache_break": BREAK_CALL - 1,
    }
    [receipt] = [m for m in view.markers if m.kind == "receipt" and m.label.startswith("microcompact:")]
    assert receipt.label.startswith("microcompact: Cleared 3 old tool results")
    # The Snip level posts its own receipt (R3.0.1) in the round after the call.
    [snipped] = [m for m in view.markers if m.kind == "receipt" and m.label.startswith("snip:")]
    assert snipped.after_call == SNIP_CALL
    assert view.turns == view.count("prompt") == 9


def test_the_break_is_the_one_the_engine_recorded(recorded: Path, view: SessionView) -> None:
    stats = view.stats
    [brk] = stats.breaks
    before = SCRIPT_USAGE[BREAK_CALL - 2]["cache_read_input_tokens"]
    assert brk.call == BREAK_CALL
    assert brk.recorded
    assert brk.detail.likely_server_side
    assert brk.detail.diff_path is not None
    assert brk.detail.diff_path.is_file()
    assert brk.cost == pytest.approx(break_cost(before, Usage(**SCRIPT_USAGE[BREAK_CALL - 1])))
    assert stats.expected_drops == 2  # the snip's and the compaction's
    assert stats.diagnostics == []


def test_thresholds_come_from_the_config(recorded: Path) -> None:
    config = Config(context_window=100_000)
    small = session_view(load_session(recorded), config)
    assert (small.thresholds.warning, small.thresholds.autocompact, small.thresholds.blocking) == (
        config.warning_threshold,
        config.autocompact_threshold,
        config.blocking_limit,
    )
    titles = [t for t in _parse(render_html(small)).text if t.endswith(" tokens") and ": " in t]
    assert f"blocking: {config.blocking_limit:,} tokens" in titles


def test_an_empty_session_renders() -> None:
    empty = session_view(LoadedSession(Path("empty.jsonl"), "claude-code", "e", [], []))
    tags = _parse(render_html(empty)).tags
    assert tags["svg"] == 3
    assert tags["circle"] == 0


# --- the page -------------------------------------------------------------------------------------


def test_the_page_has_three_charts_with_one_mark_per_call_and_value(view: SessionView) -> None:
    tags = _parse(render_html(view)).tags
    assert tags["svg"] == 3
    assert tags["circle"] == len(view.calls) + 1  # the context points, and the cost line's end
    nonzero = sum(bool(c.cache_read) + bool(c.cache_write) + bool(c.uncached) for c in view.calls)
    assert tags["rect"] == nonzero
    assert tags["rect.bar.read"] == sum(1 for c in view.calls if c.cache_read)
    assert tags["line.threshold"] == 3
    drawn = sum(
        1 for m in view.markers if m.kind in ("snip", "collapse", "compact", "receipt", "cache_break")
    )
    assert tags["line.marker.snip"] == 3  # across all three charts
    assert sum(n for tag, n in tags.items() if tag.startswith("line.marker.")) == 3 * drawn


def test_the_page_is_self_contained_and_escapes_session_text(view: SessionView) -> None:
    page = render_html(view)
    parsed = _parse(page)
    assert parsed.tags["script"] == 0
    assert parsed.tags["link"] == parsed.tags["img"] == 0
    urls = [v for k, v in parsed.attrs if k in ("src", "href") or (v or "").startswith("http")]
    assert urls == ["http://www.w3.org/2000/svg"] * 3  # the SVG namespace, never fetched
    assert INJECTION in "".join(parsed.text)  # shown as the text it was
    assert "<b>bold</b>" not in page


# --- the commands ---------------------------------------------------------------------------------


def test_inspect_prints_a_summary_and_writes_the_page_only_when_asked(
    recorded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    result = runner.invoke(cli, ["inspect", str(recorded)])
    assert result.exit_code == 0, result.output
    assert "1 snips, 1 collapses, 1 compact boundaries, 2 compaction receipts" in result.output
    assert "--html FILE" in result.output
    assert list(here.iterdir()) == []
    out = tmp_path / "page.html"
    result = runner.invoke(cli, ["inspect", str(recorded), "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert f"wrote {out}" in result.output.replace("\n", "")


def test_cache_prints_the_breaks_with_cause_and_cost(recorded: Path) -> None:
    result = CliRunner().invoke(cli, ["cache", str(recorded)])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    stats = cache_stats(load_session(recorded).records)
    assert f"{stats.hit_share:.1%} of input tokens read from the cache" in flat
    assert f"call {BREAK_CALL} (recorded, ${stats.breaks[0].cost:.4f})" in flat
    assert "likely server-side" in flat


def test_a_missing_session_is_a_usage_error(tmp_path: Path) -> None:
    for command in ("inspect", "cache"):
        result = CliRunner().invoke(cli, [command, str(tmp_path / "nope.jsonl")])
        assert result.exit_code == 1
        assert "no such session file" in result.output


# --- real Claude Code transcripts -----------------------------------------------------------------


def _raw_usage(path: Path) -> dict[str, dict[str, int]]:
    """message id -> the usage of its last line, from the raw file (the importer's rule, design.md §T)."""
    alone = path.name.startswith("agent-")  # a subagent file read by itself is its own main chain
    last: dict[str, dict[str, int]] = {}
    for line in path.read_bytes().splitlines():
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or obj.get("type") != "assistant" or obj.get("isApiErrorMessage"):
            continue
        message = obj.get("message")
        if obj.get("isSidechain") and not alone:
            continue
        if isinstance(message, dict) and isinstance(message.get("usage"), dict) and "id" in message:
            last[message["id"]] = message["usage"]
    return last


@requires_claude_code_data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name[:12])
def test_claude_code_calls_carry_the_usage_of_their_raw_lines(path: Path) -> None:
    loaded = load_session(path)
    view = session_view(loaded)
    raw = _raw_usage(path)
    main = [r for r in loaded.records if isinstance(r, AssistantEntry) and not r.is_sidechain]
    assert len(view.calls) == sum(1 for r in main if r.message.usage and not r.is_api_error_message)
    for point in view.calls:
        usage = raw[point.message_id]
        assert point.uncached == usage["input_tokens"]
        assert point.cache_write == usage["cache_creation_input_tokens"]
        assert point.cache_read == usage["cache_read_input_tokens"]
        assert point.output == usage["output_tokens"]
    tags = _parse(render_html(view)).tags
    assert tags["circle"] == len(view.calls) + bool(view.calls)


@requires_claude_code_data
def test_claude_code_sessions_have_calls_and_the_breaks_their_usage_shows() -> None:
    views = [session_view(load_session(p)) for p in claude_code_files()]
    assert all(v.calls for v in views if v.format == "claude-code")
    for v in views:
        for brk in v.stats.breaks:
            before, after = v.calls[brk.call - 2], v.calls[brk.call - 1]
            assert (brk.detail.before, brk.detail.after) == (before.cache_read, after.cache_read)
            assert brk.cost > 0


def _entry(uuid: str, stamp: str, usage: Usage, *, sidechain: bool = False) -> AssistantEntry:
    from foldline.timeline import AssistantMessage

    message = AssistantMessage(
        id=f"m-{uuid}", model="claude-sonnet-4-5", content=[{"type": "text", "text": "x"}], usage=usage
    )
    return AssistantEntry(uuid=uuid, timestamp=stamp, message=message, is_sidechain=sidechain)


def test_the_cost_card_and_the_cost_chart_end_at_the_same_number() -> None:
    # As an imported Claude Code session lists them: the main chain, then a subagent's calls at the
    # end of the records although they ran between main calls 1 and 2.
    main = Usage(input_tokens=10_000, output_tokens=1_000)
    sub = Usage(input_tokens=100_000, output_tokens=20_000)
    records = [
        _entry("a1", "2026-01-01T00:00:01.000Z", main),
        _entry("a2", "2026-01-01T00:00:05.000Z", main),
        _entry("a3", "2026-01-01T00:00:09.000Z", main),
        _entry("s1", "2026-01-01T00:00:02.000Z", sub, sidechain=True),
        _entry("s2", "2026-01-01T00:00:03.000Z", sub, sidechain=True),
    ]
    view = session_view(LoadedSession(Path("s.jsonl"), "claude-code", "s", records, []))
    one_main, one_sub = usage_of(records[:1]).cost(), usage_of(records[3:4]).cost()
    costs = [c.cumulative_cost for c in view.calls]
    assert costs == pytest.approx([one_main, 2 * one_main + 2 * one_sub, 3 * one_main + 2 * one_sub])
    assert view.cost == pytest.approx(view.stats.totals.cost())  # one number: card, chart, summary
    page = render_html(view)
    assert page.count(f"${view.cost:.4f}") >= 2  # the card and the chart's last point
    assert f"${view.stats.totals.cost():.4f}" in page


def test_a_compact_boundary_that_starts_the_file_is_not_damage(tmp_path: Path) -> None:
    from foldline._json import dumps

    def line(kind: str, uuid: str, parent: str | None, second: int, **extra: object) -> str:
        obj = {"type": kind, "uuid": uuid, "parentUuid": parent, "isSidechain": False, "sessionId": "s"}
        obj |= {"timestamp": f"2026-01-01T00:00:{second:02d}.000Z", **extra}
        return dumps(obj).decode()

    reply = {"id": "m2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5"}
    reply |= {"content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 5, "output_tokens": 1}}
    # A session continued after compaction: the boundary's pre-compaction parent is in another file.
    lines = [
        line("system", "cb", None, 1, subtype="compact_boundary", content="Conversation compacted",
             logicalParentUuid="in-the-previous-file", compactMetadata={"trigger": "auto", "preTokens": 1}),
        line("user", "sum", "cb", 2, isCompactSummary=True,
             message={"role": "user", "content": "This session is being continued from a previous one."}),
        line("user", "u2", "sum", 3, message={"role": "user", "content": "go on"}),
        line("assistant", "a2", "u2", 4, message=reply),
    ]  # fmt: skip
    path = tmp_path / "continued.jsonl"
    path.write_text("\n".join(lines) + "\n")
    loaded = load_session(path)
    assert loaded.warnings == []
    view = session_view(loaded)
    assert view.count("compact") == 1  # the boundary is an event on the chart
    assert "damaged" not in render_html(view)


@pytest.mark.parametrize(
    ("top", "money"),
    [(0.005, True), (0.05, True), (2_500, False), (7_500, False), (1.5e6, False), (5, False)],
)
def test_y_axis_labels_never_repeat(top: float, money: bool) -> None:
    from foldline.inspection import tick_labels

    labels = tick_labels(top, money)
    assert len(set(labels)) == len(labels) == 6
    assert float(labels[0].strip("$")) == 0
