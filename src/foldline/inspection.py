"""What `foldline inspect` shows: a session's per-call data (`session_view`) and its page (`render_html`).

Owns the extraction of a loaded session (foldline or Claude Code) into plain values: one
`CallPoint` per main-chain API call (context tokens, the cache read / write / uncached split, the
cumulative cost at list prices) and one `Marker` per event worth seeing on a timeline (snip
boundaries, collapse commits, compact boundaries, compaction receipts and other system entries, cache
breaks, typed prompts); and the rendering of those values into one self-contained HTML page.

Invariants:
- Pure: records in, values out, values in, a string out. Nothing here reads a file or a clock.
- The page needs no network: CSS is inline, the charts are inline SVG drawn here, and there is no
  script at all (tooltips are SVG `<title>`s). Every piece of session text goes through
  `html.escape` after its control characters are removed, so a transcript cannot inject markup.
- Context tokens of a call are what its request held plus what it produced (`prompt_tokens +
  output_tokens`), the same anchor `tokens.py` counts from; the thresholds come from `Config`.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from foldline.cachestats import CacheStats, cache_stats, is_compaction_receipt
from foldline.config import Config
from foldline.sessions import LoadedSession, count_turns, is_typed_prompt
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    CollapseCommit,
    CompactBoundary,
    SnipBoundary,
    SystemEntry,
    UserEntry,
)
from foldline.usage import UsageTotals

__all__ = [
    "CallPoint",
    "Marker",
    "MarkerKind",
    "SessionView",
    "Thresholds",
    "render_html",
    "session_view",
]

MarkerKind: TypeAlias = Literal["snip", "collapse", "compact", "receipt", "system", "cache_break", "prompt"]

CHART_KINDS: frozenset[MarkerKind] = frozenset({"snip", "collapse", "compact", "receipt", "cache_break"})
"""The marker kinds drawn across the charts; the others are listed in the event table only."""

QUIET_SUBTYPES = frozenset({"turn_duration", "stop_hook_summary"})
"""System entries left out of the event table: Claude Code writes one per turn; none is about context."""

_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LABEL_CHARS = 80
_DETAIL_CHARS = 400


@dataclass(frozen=True)
class CallPoint:
    """One main-chain API call, from the `usage` its reply recorded."""

    call: int
    """1-based index among the main chain's API replies (the charts' x axis)."""
    message_id: str
    timestamp: str
    model: str
    uncached: int
    cache_write: int
    cache_read: int
    output: int
    cost: float
    """This call at list prices."""
    cumulative_cost: float
    """Every call so far, subagent calls made before it (by timestamp) included; the last point
    includes every call of the session, so it is the session's cost (`SessionView.cost`)."""
    cumulative_uncached_cost: float
    """The same calls priced as if nothing had been cached."""

    @property
    def context_tokens(self) -> int:
        """What the context held after this call: its whole prompt plus its output."""
        return self.uncached + self.cache_write + self.cache_read + self.output


@dataclass(frozen=True)
class Marker:
    """An event on the timeline, placed between calls."""

    after_call: int
    """How many main-chain calls had been made when it happened (0: before the first)."""
    kind: MarkerKind
    label: str
    """One short line."""
    detail: str
    timestamp: str


@dataclass(frozen=True)
class Thresholds:
    """The context sizes the pipeline reacts at (`Config`'s derived properties)."""

    warning: int
    autocompact: int
    blocking: int
    window: int

    @classmethod
    def of(cls, config: Config) -> Thresholds:
        """The thresholds `config` implies."""
        return cls(
            config.warning_threshold,
            config.autocompact_threshold,
            config.blocking_limit,
            config.window,
        )


@dataclass(frozen=True)
class SessionView:
    """Everything the inspect page and summary show of one session."""

    path: str
    format: str
    session_id: str
    turns: int
    """Prompts the user typed."""
    calls: list[CallPoint]
    markers: list[Marker]
    thresholds: Thresholds
    stats: CacheStats
    warnings: int
    """Damaged lines skipped while loading."""

    @property
    def cost(self) -> float:
        """The session's cost at list prices: the cost chart's last point (one source for both)."""
        return self.calls[-1].cumulative_cost if self.calls else self.stats.totals.cost()

    @property
    def uncached_cost(self) -> float:
        """The same calls priced as if nothing had been cached."""
        return self.calls[-1].cumulative_uncached_cost if self.calls else self.stats.totals.cost(cached=False)

    @property
    def peak_context(self) -> int:
        """The largest context of any call (0 without calls)."""
        return max((c.context_tokens for c in self.calls), default=0)

    def count(self, kind: MarkerKind) -> int:
        """How many markers of `kind` there are."""
        return sum(1 for m in self.markers if m.kind == kind)


def _clean(text: str) -> str:
    return _CONTROL.sub("", text)


def _clip(text: str, limit: int) -> str:
    text = " ".join(_clean(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _user_text(entry: UserEntry) -> str:
    content = entry.message.content
    if isinstance(content, str):
        return content
    return " ".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


def _marker(record: AnyRecord, after: int) -> Marker | None:
    """The marker a record makes, if any (subagent entries and quiet system entries make none)."""
    if isinstance(record, SnipBoundary):
        n = len(record.removed_uuids)
        return Marker(after, "snip", f"snip: {n} entries removed", "", record.timestamp)
    if isinstance(record, CollapseCommit):
        label = f"collapse: {record.tokens_before:,} -> {record.tokens_after:,} tokens"
        return Marker(after, "collapse", label, _clip(record.summary, _DETAIL_CHARS), record.timestamp)
    if isinstance(record, CompactBoundary):
        post = f" -> {record.post_tokens:,}" if record.post_tokens is not None else ""
        label = f"compact ({record.trigger}): {record.pre_tokens:,}{post} tokens"
        return Marker(after, "compact", label, "", record.timestamp)
    if isinstance(record, SystemEntry) and not record.is_sidechain:
        if record.subtype in QUIET_SUBTYPES or record.subtype == "cache_break":
            return None  # cache breaks are marked from `cache_stats`, recorded or not
        kind: MarkerKind = "receipt" if is_compaction_receipt(record) else "system"
        # A round's receipt names its level in `data` (subtype "compaction" for every level).
        level = record.data.get("level") if isinstance(record.data, dict) else None
        name = str(level) if kind == "receipt" and level else record.subtype
        label = _clip(f"{name}: {record.content}" if record.content else name, _LABEL_CHARS)
        return Marker(after, kind, label, _clip(record.content, _DETAIL_CHARS), record.timestamp)
    if isinstance(record, UserEntry) and is_typed_prompt(record):
        text = _user_text(record)
        return Marker(
            after, "prompt", _clip(text, _LABEL_CHARS), _clip(text, _DETAIL_CHARS), record.timestamp
        )
    return None


def _call_points(mains: Sequence[AssistantEntry], side: Sequence[tuple[str, UsageTotals]]) -> list[CallPoint]:
    """The chart's points: each main-chain call with the cumulative cost of every call made by then.

    A subagent's calls count at the first main call after them (by timestamp: an imported Claude
    Code session lists subagent files after the main chain), and any left over at the last point,
    so the line ends at the session's whole cost.
    """
    points: list[CallPoint] = []
    spent = UsageTotals()
    waiting = list(side)
    for n, record in enumerate(mains, 1):
        usage = record.message.usage
        assert usage is not None
        one = UsageTotals()
        one.add(usage, record.message.model)
        last = n == len(mains)
        while waiting and (last or waiting[0][0] <= record.timestamp):
            spent += waiting.pop(0)[1]
        spent += one
        points.append(
            CallPoint(
                call=n,
                message_id=record.message.id,
                timestamp=record.timestamp,
                model=record.message.model,
                uncached=usage.input_tokens,
                cache_write=usage.cache_creation_input_tokens,
                cache_read=usage.cache_read_input_tokens,
                output=usage.output_tokens,
                cost=one.cost(),
                cumulative_cost=spent.cost(),
                cumulative_uncached_cost=spent.cost(cached=False),
            )
        )
    return points


def session_view(session: LoadedSession, config: Config | None = None) -> SessionView:
    """The calls and events of a loaded session, ready to chart.

    Args:
        session: a session of either format (`foldline.sessions.load_session`).
        config: where the thresholds come from (default `Config()`: a 200K window).
    """
    records = session.records
    stats = cache_stats(records)
    mains: list[AssistantEntry] = []
    side: list[tuple[str, UsageTotals]] = []  # (timestamp, the call) of each subagent call
    markers: list[Marker] = []
    for record in records:
        found = _marker(record, len(mains))
        if found is not None:
            markers.append(found)
        if not isinstance(record, AssistantEntry) or record.is_api_error_message or record.is_virtual:
            continue
        usage = record.message.usage
        if usage is None:
            continue
        if record.is_sidechain:
            one = UsageTotals()
            one.add(usage, record.message.model)
            side.append((record.timestamp, one))
        else:
            mains.append(record)
    calls = _call_points(mains, sorted(side, key=lambda pair: pair[0]))
    for brk in stats.breaks:
        lost = brk.detail.before - brk.detail.after
        label = f"cache break: {lost:,} tokens no longer read (${brk.cost:.4f})"
        markers.append(Marker(brk.call - 1, "cache_break", label, brk.detail.describe(), brk.timestamp))
    markers.sort(key=lambda m: m.after_call)  # stable: file order within one gap
    return SessionView(
        path=str(session.path),
        format=session.format,
        session_id=session.session_id,
        turns=count_turns(records),
        calls=calls,
        markers=markers,
        thresholds=Thresholds.of(config or Config()),
        stats=stats,
        warnings=len(session.warnings),
    )


# --- HTML ----------------------------------------------------------------------------------------

_COLORS: Mapping[str, str] = {
    "read": "#2e9e5b",
    "write": "#3b7dd8",
    "uncached": "#9aa3ad",
    "context": "#1864ab",
    "cost": "#c2410c",
    "nocache": "#9aa3ad",
    "warning": "#d4a017",
    "autocompact": "#e8710a",
    "blocking": "#d93025",
    "snip": "#0b7285",
    "collapse": "#7048e8",
    "compact": "#a61e4d",
    "receipt": "#e64980",
    "cache_break": "#fd7e14",
    "system": "#7f8c8d",
    "prompt": "#34495e",
}

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1040px;
color:#1f2328;background:#fff;padding:0 16px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.sub{color:#59636e;margin:0 0 16px;word-break:break-all}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:8px}
.card{border:1px solid #d1d9e0;border-radius:6px;padding:8px 10px}
.card b{display:block;font-size:18px}.card span{color:#59636e;font-size:12px}
svg{display:block;max-width:100%;height:auto;border:1px solid #d1d9e0;border-radius:6px;background:#fff}
svg text{font:11px system-ui,sans-serif;fill:#59636e}
.legend{display:flex;flex-wrap:wrap;gap:14px;margin:6px 0;font-size:12px;color:#59636e}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #d1d9e0;padding:4px 6px;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.kind{font-weight:600;white-space:nowrap}.empty{color:#59636e}
"""

_W, _H = 1000, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 14, 28
_TICKS = 5
_MARKER_SPACING = 4


def _nice_top(value: float) -> float:
    """The smallest round step (1, 1.5, 2, ... 8 times a power of ten) times `_TICKS` that reaches `value`."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value / _TICKS))
    step: float = next(m * power for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10) if m * power * _TICKS >= value)
    return step * _TICKS


def _e(text: object) -> str:
    return html.escape(_clean(str(text)), quote=True)


def _short(n: float) -> str:
    """147000 -> '147K', 1.2e6 -> '1.2M'."""
    if abs(n) >= 1e6:
        return f"{n / 1e6:.1f}M"
    if abs(n) >= 1e3:
        return f"{n / 1e3:.0f}K"
    return f"{n:.0f}"


@dataclass(frozen=True)
class _Frame:
    """The plot area of one chart: maps call numbers and values to SVG coordinates."""

    calls: int
    top_value: float

    def x(self, position: float) -> float:
        """`position` in calls: call k is centred on k - 0.5; the gap after call k is at k."""
        width = _W - _LEFT - _RIGHT
        return _LEFT + width * position / max(self.calls, 1)

    def y(self, value: float) -> float:
        height = _H - _TOP - _BOTTOM
        return _TOP + height * (1 - value / self.top_value) if self.top_value else _H - _BOTTOM

    @property
    def step(self) -> float:
        return (_W - _LEFT - _RIGHT) / max(self.calls, 1)


def _tick_label(value: float, digits: int, money: bool) -> str:
    if money:
        return f"${value:.{max(digits, 2)}f}"
    for scale, unit in ((1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.{digits}f}{unit}"
    return f"{value:.{digits}f}"


def tick_labels(top: float, money: bool) -> list[str]:
    """The y axis's labels from 0 to `top`: as short as they can be while no two are the same (a
    small session's axis would otherwise read $0.00 five times, or 2K, 2K, 2K)."""
    values = [top * i / _TICKS for i in range(_TICKS + 1)]
    for digits in range(7):
        labels = [_tick_label(v, digits, money) for v in values]
        if len(set(labels)) == len(labels):
            return labels
    return labels


def _axes(frame: _Frame, money: bool) -> list[str]:
    parts = []
    labels = tick_labels(frame.top_value, money)
    for i in range(_TICKS + 1):
        value = frame.top_value * i / _TICKS
        y = frame.y(value)
        text = labels[i]
        parts.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}" stroke="#eef1f4"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{text}</text>')
    every = max(1, frame.calls // 10)
    for call in range(1, frame.calls + 1):
        if call == 1 or call % every == 0:
            parts.append(
                f'<text x="{frame.x(call - 0.5):.1f}" y="{_H - 10}" text-anchor="middle">{call}</text>'
            )
    return parts


def _markers_svg(frame: _Frame, markers: Sequence[Marker]) -> list[str]:
    parts = []
    seen: dict[float, int] = {}
    for m in markers:
        if m.kind not in CHART_KINDS:
            continue
        # A break belongs to its call; other events sit in the gap between two calls. Events in
        # one gap stand side by side instead of on top of each other.
        position = m.after_call + 0.5 if m.kind == "cache_break" else m.after_call
        nth = seen[position] = seen.get(position, -1) + 1
        x = frame.x(position) + nth * _MARKER_SPACING
        dash = ' stroke-dasharray="3 3"' if m.kind == "cache_break" else ""
        title = _e(m.label + (f"\n{m.detail}" if m.detail else ""))
        parts.append(
            f'<line class="marker {m.kind}" x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_H - _BOTTOM}" '
            f'stroke="{_COLORS[m.kind]}" stroke-width="2"{dash}><title>{title}</title></line>'
        )
    return parts


def _svg(chart_id: str, label: str, parts: Sequence[str]) -> str:
    body = "".join(parts)
    return (
        f'<svg id="{chart_id}" role="img" aria-label="{_e(label)}" viewBox="0 0 {_W} {_H}" '
        f'width="{_W}" height="{_H}" xmlns="http://www.w3.org/2000/svg">{body}</svg>'
    )


def _polyline(frame: _Frame, values: Sequence[float], color: str, dash: str = "") -> str:
    points = " ".join(f"{frame.x(i + 0.5):.1f},{frame.y(v):.1f}" for i, v in enumerate(values))
    extra = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="2"{extra}/>'


def _context_chart(view: SessionView) -> str:
    t = view.thresholds
    frame = _Frame(len(view.calls), _nice_top(max(view.peak_context, t.blocking)))
    parts = _axes(frame, money=False)
    # The limit's label above its line, the two lower thresholds' below theirs: close lines, apart labels.
    lines = (("warning", t.warning, 12), ("autocompact", t.autocompact, 12), ("blocking", t.blocking, -4))
    for name, value, label_dy in lines:
        y = frame.y(value)
        parts.append(
            f'<line class="threshold" x1="{_LEFT}" y1="{y:.1f}" x2="{_W - _RIGHT}" y2="{y:.1f}" '
            f'stroke="{_COLORS[name]}" stroke-dasharray="6 4"><title>{name}: {value:,} tokens</title></line>'
        )
        x = _W - _RIGHT - 4
        parts.append(f'<text x="{x}" y="{y + label_dy:.1f}" text-anchor="end">{name} {_short(value)}</text>')
    parts += _markers_svg(frame, view.markers)
    parts.append(_polyline(frame, [c.context_tokens for c in view.calls], _COLORS["context"]))
    for c in view.calls:
        parts.append(
            f'<circle cx="{frame.x(c.call - 0.5):.1f}" cy="{frame.y(c.context_tokens):.1f}" r="2.5" '
            f'fill="{_COLORS["context"]}"><title>call {c.call}: {c.context_tokens:,} context tokens'
            f"</title></circle>"
        )
    return _svg("context-chart", "context tokens per call against the thresholds", parts)


def _cache_chart(view: SessionView) -> str:
    top = max((c.uncached + c.cache_write + c.cache_read for c in view.calls), default=0)
    frame = _Frame(len(view.calls), _nice_top(top))
    parts = _axes(frame, money=False)
    width = max(frame.step * 0.8, 0.5)
    for c in view.calls:
        x = frame.x(c.call - 0.5) - width / 2
        base = 0
        title = f"call {c.call}: {c.cache_read:,} read, {c.cache_write:,} written, {c.uncached:,} uncached"
        for key, value in (("read", c.cache_read), ("write", c.cache_write), ("uncached", c.uncached)):
            if value:
                y0, y1 = frame.y(base), frame.y(base + value)
                parts.append(
                    f'<rect class="bar {key}" x="{x:.2f}" y="{y1:.1f}" width="{width:.2f}" '
                    f'height="{max(y0 - y1, 0):.1f}" fill="{_COLORS[key]}"><title>{title}</title></rect>'
                )
            base += value
    parts += _markers_svg(frame, view.markers)
    return _svg("cache-chart", "cache read, cache write and uncached input tokens per call", parts)


def _cost_chart(view: SessionView) -> str:
    # cache writes cost more than plain input: with many writes the cached line is the higher one
    top = max((max(c.cumulative_uncached_cost, c.cumulative_cost) for c in view.calls), default=0.0)
    frame = _Frame(len(view.calls), _nice_top(top))
    parts = _axes(frame, money=True)
    parts += _markers_svg(frame, view.markers)
    parts.append(
        _polyline(frame, [c.cumulative_uncached_cost for c in view.calls], _COLORS["nocache"], "5 4")
    )
    parts.append(_polyline(frame, [c.cumulative_cost for c in view.calls], _COLORS["cost"]))
    if view.calls:
        last = view.calls[-1]
        parts.append(
            f'<circle cx="{frame.x(last.call - 0.5):.1f}" cy="{frame.y(last.cumulative_cost):.1f}" r="3" '
            f'fill="{_COLORS["cost"]}"><title>${last.cumulative_cost:.4f} after {last.call} calls'
            f"</title></circle>"
        )
    return _svg("cost-chart", "cumulative cost at list prices", parts)


def _legend(items: Sequence[tuple[str, str]]) -> str:
    spans = "".join(
        f'<span><i class="sw" style="background:{_COLORS[k]}"></i>{_e(t)}</span>' for k, t in items
    )
    return f'<div class="legend">{spans}</div>'


_EVENT_LEGEND = [
    ("snip", "snip"),
    ("collapse", "collapse"),
    ("compact", "compact boundary"),
    ("receipt", "compaction receipt"),
    ("cache_break", "cache break"),
]


def _cards(view: SessionView) -> str:
    s = view.stats
    totals = s.totals
    cards = [
        (f"{len(view.calls):,}", "API calls (main chain)"),
        (f"{view.turns:,}", "prompts typed"),
        (f"{_short(view.peak_context)}", "peak context tokens"),
        (totals.read_share_text(), "of input read from cache"),
        (f"{_short(totals.cache_read)} / {_short(totals.cache_write)}", "cache reads / writes"),
    ]
    if totals.unpriced:  # as `/cost` and `foldline cache` say it: no made-up dollars
        cards += [
            ("no dollars", totals.dollars_text().removeprefix("no dollars: ")),
            (f"{len(s.breaks)}", "cache breaks"),
        ]
    else:
        cards += [
            (f"${view.cost:.4f}", "cost at list prices"),
            (f"${view.uncached_cost:.4f}", "the same without caching"),
            (f"{len(s.breaks)} (${s.break_cost:.4f})", "cache breaks (extra cost)"),
        ]
    cards += [
        (
            str(sum(view.count(k) for k in ("snip", "collapse", "compact", "receipt"))),
            "compaction events",
        ),
    ]
    if totals.requests != len(view.calls):
        cards.append((f"{totals.requests - len(view.calls):,}", "subagent calls (in the cost)"))
    inner = "".join(f'<div class="card"><b>{_e(v)}</b><span>{_e(t)}</span></div>' for v, t in cards)
    return f'<div class="cards">{inner}</div>'


def _breaks_table(view: SessionView) -> str:
    if not view.stats.breaks:
        return '<p class="empty">No cache breaks.</p>'
    rows = "".join(
        f'<tr><td class="n">{b.call}</td><td>{_e(b.timestamp)}</td>'
        f'<td class="n">{b.detail.before:,} → {b.detail.after:,}</td>'
        f'<td>{_e(b.detail.describe())}</td><td class="n">${b.cost:.4f}</td></tr>'
        for b in view.stats.breaks
    )
    head = "<tr><th>call</th><th>time</th><th>cache reads</th><th>cause</th><th>extra cost</th></tr>"
    return f'<table id="breaks">{head}{rows}</table>'


def _detail(m: Marker) -> str:
    return f"<br><small>{_e(m.detail)}</small>" if m.detail and m.detail != m.label else ""


def _events_table(view: SessionView) -> str:
    if not view.markers:
        return '<p class="empty">No events.</p>'
    rows = "".join(
        f'<tr class="{m.kind}"><td class="n">{m.after_call}</td><td>{_e(m.timestamp)}</td>'
        f'<td class="kind" style="color:{_COLORS[m.kind]}">{m.kind.replace("_", " ")}</td>'
        f"<td>{_e(m.label)}{_detail(m)}</td></tr>"
        for m in view.markers
    )
    head = "<tr><th>after call</th><th>time</th><th>kind</th><th>what</th></tr>"
    return f'<table id="events">{head}{rows}</table>'


def render_html(view: SessionView) -> str:
    """The inspect page for `view`: one self-contained HTML document (no network, no script)."""
    t = view.thresholds
    title = f"foldline inspect: {view.session_id}"
    warn = f" · {view.warnings} damaged line(s) skipped" if view.warnings else ""
    diagnostics = "".join(f"<li>call {call}: {_e(reason)}</li>" for call, reason in view.stats.diagnostics)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>{_e(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{_e(title)}</h1>
<p class="sub">{_e(view.path)} · {_e(view.format)} transcript{warn}</p>
{_cards(view)}
<h2>Context tokens per call</h2>
{
        _legend(
            [
                ("context", "context tokens"),
                ("warning", f"warning {_short(t.warning)}"),
                ("autocompact", f"autocompact {_short(t.autocompact)}"),
                ("blocking", f"blocking {_short(t.blocking)}"),
                *_EVENT_LEGEND,
            ]
        )
    }
{_context_chart(view)}
<h2>Input tokens per call</h2>
{_legend([("read", "cache read"), ("write", "cache write"), ("uncached", "uncached input")])}
{_cache_chart(view)}
<h2>Cumulative cost (each call at its model's list prices)</h2>
{_legend([("cost", "with prompt caching"), ("nocache", "without caching")])}
{_cost_chart(view)}
<h2>Cache breaks</h2>
{_breaks_table(view)}
{f"<h2>Provider cache diagnostics</h2><ul>{diagnostics}</ul>" if diagnostics else ""}
<h2>Events</h2>
{_events_table(view)}
</body></html>
"""
