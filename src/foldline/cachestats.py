"""The prompt-cache statistics of a recorded session: what `foldline cache` and `/cache` show (R7.3–R7.5.1).

Owns `cache_stats`, one pure pass over a session's records (foldline or imported Claude Code) that
returns the hit share (cache reads over every input token), write and read totals, and each cache
break with its cause and what it cost. Breaks are found from the `usage` the API returned, with
R7.3's rule (`usage.is_cache_break`), and explained with what the transcript holds:

- a `cache_break` notice the engine recorded before that call (`cachebreak.CacheBreak`, with the
  client-side changes of R7.2, the diff path and the provider's own miss reason, R7.5.1);
- otherwise what a transcript alone can tell: a model change between the two calls, or the gap
  between them against the cache TTL (under it, likely server-side): an hour when the calls before
  wrote their cache entries with the 1h TTL only, else 5 minutes (`CacheConfig.ttl_seconds`).

Invariants:
- Expected drops are not breaks (R7.4): a call that reports `cache_deleted_input_tokens`, and the
  first call after a compaction event (snip, fold, compact boundary, or a system receipt whose
  subtype names one), restart the baseline instead.
- Only the main chain is a cache sequence: sidechain (subagent) calls are billed in the totals but
  neither break nor reset the main chain's baseline.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from foldline.cachebreak import CacheBreak
from foldline.config import CacheConfig
from foldline.pricing import prices_for
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    CollapseCommit,
    CompactBoundary,
    SnipBoundary,
    SystemEntry,
    Usage,
)
from foldline.usage import UsageTotals, is_cache_break

__all__ = [
    "COMPACTION_SUBTYPE_WORDS",
    "CacheStats",
    "SessionBreak",
    "break_cost",
    "cache_stats",
    "is_compaction_receipt",
    "parse_time",
]

COMPACTION_SUBTYPE_WORDS = ("compact", "collapse", "snip", "clear")
"""A `SystemEntry` whose subtype contains one of these is a compaction receipt (microcompact, autocompact,
collapse, snip, `/clear`): the levels each name their own receipts, so they are recognized by name."""

_FELL = re.compile(r"reads fell ([\d,]+) -> ([\d,]+)")

_CACHE = CacheConfig()


def is_compaction_receipt(entry: SystemEntry) -> bool:
    """Whether a system entry records a compaction (its drop in cache reads is expected, R7.4)."""
    subtype = entry.subtype.lower()
    return any(word in subtype for word in COMPACTION_SUBTYPE_WORDS)


def parse_time(stamp: str) -> float | None:
    """Seconds since the epoch of an ISO-8601 timestamp (`Z` accepted), None if it is not one."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def break_cost(before: int, usage: Usage, model: str = "") -> float:
    """Dollars a break added: the tokens no longer read were paid as cache writes (first) or uncached input.

    Each lost token would have cost the cache-read price; it cost the write price if the call wrote
    that many tokens (the 1-hour price for the part the usage says was written for an hour), and
    the base input price for the rest. Prices are `model`'s (`foldline.pricing`).
    """
    rates = prices_for(model).rates(usage.prompt_tokens)
    lost = max(0, before - usage.cache_read_input_tokens)
    written = min(lost, usage.cache_creation_input_tokens)
    hour = min(written, (usage.cache_creation or {}).get("ephemeral_1h_input_tokens", 0))
    uncached = min(lost - written, usage.input_tokens)
    extra = (written - hour) * (rates.write_5m - rates.read) + hour * (rates.write_1h - rates.read)
    extra += uncached * (rates.input - rates.read)
    return extra / 1e6


@dataclass(frozen=True)
class SessionBreak:
    """One cache break of a recorded session: which call, when, why, and what it cost."""

    call: int
    """1-based index of the call among the main chain's API replies."""
    timestamp: str
    detail: CacheBreak
    """Before/after reads, the client-side changes and the likely cause (`describe()` says it)."""
    cost: float
    """Extra dollars at list prices (`break_cost`)."""
    recorded: bool
    """True when the engine recorded this break as it happened (its cause is the detector's own)."""


@dataclass(frozen=True)
class CacheStats:
    """The cache statistics of a session (see `cache_stats`)."""

    totals: UsageTotals
    """Every real API call, subagent calls included (they are billed too)."""
    main_calls: int
    writes_5m: int
    writes_1h: int
    """Cache writes by TTL, where the usage splits them (`cache_creation`); 0 when it does not."""
    breaks: list[SessionBreak] = field(default_factory=list)
    expected_drops: int = 0
    """Sharp drops that followed a compaction or a cache_edits deletion (R7.4): not breaks."""
    diagnostics: list[tuple[int, str]] = field(default_factory=list)
    """(call, the provider's own cache-miss reason) wherever a record carries one (R7.5.1)."""

    @property
    def hit_share(self) -> float:
        """Cache reads over every input token (uncached + writes + reads)."""
        return self.totals.read_share

    @property
    def break_cost(self) -> float:
        """Dollars all breaks added."""
        return sum(b.cost for b in self.breaks)


def _recorded(entry: SystemEntry) -> CacheBreak | None:
    """The `CacheBreak` a `cache_break` notice recorded: from its data, else from its text."""
    data = entry.data or {}
    before, after = data.get("before"), data.get("after")
    if not isinstance(before, int) or not isinstance(after, int):
        found = _FELL.search(entry.content)
        if found is None:
            return None
        before, after = (int(g.replace(",", "")) for g in found.groups())
    changes = data.get("changes")
    reason = data.get("server_reason")
    diff = data.get("diff_path")
    return CacheBreak(
        before=before,
        after=after,
        changes=tuple(str(c) for c in changes) if isinstance(changes, list) else (),
        likely_server_side=bool(data.get("likely_server_side", "likely server-side" in entry.content)),
        diff_path=Path(diff) if isinstance(diff, str) else None,
        server_reason=reason if isinstance(reason, str) else None,
    )


def _inferred(
    before: int, usage: Usage, model_change: str | None, gap: float | None, ttl: float
) -> CacheBreak:
    """A break explained from the transcript alone: a model change, else the gap against the TTL."""
    changes = (model_change,) if model_change else ()
    server_side = not changes and gap is not None and gap < ttl
    return CacheBreak(before, usage.cache_read_input_tokens, changes, server_side, None)


def _written_ttl(five: int, hour: int, ttl: float) -> float:
    """The TTL of what a call wrote: an hour if all 1h, 5 minutes if any 5m, else unchanged (`ttl`)."""
    if five:
        return _CACHE.ttl_seconds["5m"]
    return _CACHE.ttl_seconds["1h"] if hour else ttl


def _writes_by_ttl(usage: Usage) -> tuple[int, int]:
    split = usage.cache_creation or {}
    return split.get("ephemeral_5m_input_tokens", 0), split.get("ephemeral_1h_input_tokens", 0)


def cache_stats(records: Iterable[AnyRecord]) -> CacheStats:
    """The cache statistics of a session's records, in one pass (pure: reads nothing else).

    Args:
        records: a session's records in file order (`LoadedSession.records`, a timeline snapshot);
            each call is priced at its own model's list prices (`foldline.pricing`).
    """
    totals = UsageTotals()
    writes_5m = writes_1h = main_calls = expected = 0
    breaks: list[SessionBreak] = []
    diagnostics: list[tuple[int, str]] = []
    previous: AssistantEntry | None = None
    reset = False  # a compaction happened since the previous main-chain call
    notice: CacheBreak | None = None  # a break the engine recorded for the next call
    ttl = _CACHE.ttl_seconds["5m"]  # how long the entries the main chain last wrote live
    for record in records:
        if isinstance(record, SnipBoundary | CollapseCommit | CompactBoundary):
            reset = True
        elif isinstance(record, SystemEntry) and not record.is_sidechain:
            if record.subtype == "cache_break":
                notice = _recorded(record)
            elif is_compaction_receipt(record):
                reset = True
        if not isinstance(record, AssistantEntry) or record.is_api_error_message or record.is_virtual:
            continue
        usage = record.message.usage
        if usage is None:
            continue
        totals.add(usage, record.message.model)
        five, hour = _writes_by_ttl(usage)
        writes_5m, writes_1h = writes_5m + five, writes_1h + hour
        if record.is_sidechain:
            continue
        main_calls += 1
        if notice is not None and notice.server_reason:
            diagnostics.append((main_calls, notice.server_reason))
        if previous is not None and previous.message.usage is not None:
            before = previous.message.usage.cache_read_input_tokens
            read = usage.cache_read_input_tokens
            recorded = notice is not None and notice.after == read
            if is_cache_break(before, read) and (reset or usage.cache_deleted_input_tokens) and not recorded:
                expected += 1
            elif is_cache_break(before, read):
                # The engine's own notice wins: it saw the requests, a transcript only their usage.
                detail = notice if notice is not None and recorded else None
                if detail is None:
                    change, gap = _model_change(previous, record), _gap(previous, record)
                    detail = _inferred(before, usage, change, gap, ttl)
                cost = break_cost(before, usage, record.message.model)
                breaks.append(SessionBreak(main_calls, record.timestamp, detail, cost, recorded))
        previous, reset, notice = record, False, None
        ttl = _written_ttl(five, hour, ttl)
    return CacheStats(totals, main_calls, writes_5m, writes_1h, breaks, expected, diagnostics)


def _model_change(previous: AssistantEntry, current: AssistantEntry) -> str | None:
    before, after = previous.message.model, current.message.model
    return f"model ({before} -> {after})" if before and after and before != after else None


def _gap(previous: AssistantEntry, current: AssistantEntry) -> float | None:
    start, end = parse_time(previous.timestamp), parse_time(current.timestamp)
    return end - start if start is not None and end is not None else None
