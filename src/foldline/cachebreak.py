"""Prompt-cache break detection across the calls of a session (R7.2–R7.4, R7.5.1).

Phase 1, before each request: the request's ten cache-relevant dimensions are hashed
(`api.cache.prompt_state_hashes`) and compared with the previous request's; what changed is kept as
`pending_changes`. Phase 2, after each response: a break is declared only when
`cache_read_input_tokens` fell by more than 5% AND by more than 2,000 tokens. It is explained by
the pending changes; with none, and a gap under the cache TTL (the shortest `cache_control.ttl`
the previous request set: 5 minutes, or an hour when every breakpoint asked for `1h`), it is
reported as a likely server-side cause (routing or eviction). Each confirmed break writes a diff
of the previous and current request into a temp directory, named in the report.

Expected drops reset the baseline instead of alarming (R7.4): after cache_edits deletions, a
compaction or snip, `/clear` and resume (a new detector starts without a baseline).
"""

from __future__ import annotations

import difflib
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foldline._json import dumps_readable
from foldline.api.cache import PromptState, diff_states
from foldline.config import CacheConfig
from foldline.timeline import Usage
from foldline.usage import is_cache_break

__all__ = ["CacheBreak", "CacheBreakDetector"]

_CACHE = CacheConfig()


@dataclass(frozen=True)
class CacheBreak:
    """One confirmed cache break and its most likely cause."""

    before: int
    """`cache_read_input_tokens` of the previous call."""
    after: int
    changes: tuple[str, ...]
    """Client-side dimensions that changed since the previous request (empty: none did)."""
    likely_server_side: bool
    diff_path: Path | None
    server_reason: str | None = None
    """The provider's own cache-miss diagnostic, when it sent one (R7.5.1)."""

    def describe(self) -> str:
        """One line for the user."""
        lost = self.before - self.after
        if self.changes:
            cause = "caused by a change to " + ", ".join(self.changes)
        elif self.likely_server_side:
            cause = "no client-side change within the cache TTL: likely server-side (routing or eviction)"
        else:
            cause = "no client-side change, but the cache TTL had passed since the previous call"
        if self.server_reason:
            cause += f"; the server says: {self.server_reason}"
        where = f" (diff: {self.diff_path})" if self.diff_path else ""
        fell = f"{self.before:,} -> {self.after:,} ({lost:,} tokens)"
        return f"prompt cache break: reads fell {fell}, {cause}{where}"


class CacheBreakDetector:
    """Watches one session's requests and responses for cache breaks."""

    def __init__(
        self,
        *,
        diff_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
        config: CacheConfig = _CACHE,
    ) -> None:
        self._diff_dir = diff_dir
        self._clock = clock
        self._config = config
        self._ttl = config.ttl_seconds["5m"]
        """Seconds the previous request's shortest-lived cache entry lasts (its `cache_control` TTLs)."""
        self._next_ttl = self._ttl
        self._state: PromptState | None = None
        self._body: Mapping[str, Any] | None = None
        self._previous_body: Mapping[str, Any] | None = None
        self._pending: tuple[str, ...] = ()
        self._last_read: int | None = None
        self._last_at: float | None = None

    def before_request(self, state: PromptState, body: Mapping[str, Any]) -> None:
        """Phase 1: remember what changed since the previous request."""
        self._pending = diff_states(self._state, state)
        self._state = state
        self._previous_body, self._body = self._body, body
        self._ttl, self._next_ttl = self._next_ttl, self._shortest_ttl(body)

    def reset_baseline(self) -> None:
        """An expected drop is coming (cache_edits deletion, compaction, snip): don't alarm on it."""
        self._last_read = None

    def after_response(self, usage: Usage, *, server_reason: str | None = None) -> CacheBreak | None:
        """Phase 2: a confirmed break, explained, or None."""
        now, read = self._clock(), usage.cache_read_input_tokens
        previous, gap = self._last_read, (now - self._last_at) if self._last_at is not None else None
        self._last_read, self._last_at = read, now
        if usage.cache_deleted_input_tokens or previous is None:
            return None  # deletions are an expected drop (R7.4); no baseline yet
        if not is_cache_break(previous, read, self._config):
            return None
        server_side = not self._pending and gap is not None and gap < self._ttl
        return CacheBreak(previous, read, self._pending, server_side, self._write_diff(), server_reason)

    def _shortest_ttl(self, body: Mapping[str, Any]) -> float:
        """Seconds the shortest-lived breakpoint of `body` keeps its entry (5m when none says)."""
        ttls, found = self._config.ttl_seconds, []
        for block in _blocks_newest_last(body):
            mark = block.get("cache_control") if isinstance(block, dict) else None
            if isinstance(mark, dict):
                found.append(ttls.get(str(mark.get("ttl", "5m")), ttls["5m"]))
                if len(found) == self._config.max_breakpoints:
                    break  # the API allows no more: the rest of a long history need not be read
        return min(found, default=ttls["5m"])

    def _write_diff(self) -> Path | None:
        if self._previous_body is None or self._body is None:
            return None
        directory = self._diff_dir or Path(tempfile.gettempdir()) / "foldline-cache-breaks"
        directory.mkdir(parents=True, exist_ok=True)
        before = dumps_readable(self._previous_body).splitlines()
        after = dumps_readable(self._body).splitlines()
        diff = difflib.unified_diff(before, after, "previous request", "current request", lineterm="")
        fd, name = tempfile.mkstemp(
            dir=directory, prefix=time.strftime("break-%Y%m%d-%H%M%S-"), suffix=".diff"
        )
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("\n".join(diff) + "\n")
        return Path(name)


def _blocks_newest_last(body: Mapping[str, Any]) -> Iterator[Any]:
    """Tools, system blocks, then message content blocks from the newest message back: the order in
    which a request's few breakpoints are found soonest (messages' sit near the end)."""
    system = body.get("system")
    yield from body.get("tools") or ()
    yield from system if isinstance(system, list) else ()
    for message in reversed(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) else None
        yield from reversed(content) if isinstance(content, list) else ()
