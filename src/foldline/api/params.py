"""Request parameters (design.md §4.3), beta-header latching (R7.5), and the whole assembly in one call.

`RequestAssembler.build` is the one path from a session's records to the body of its next request:
projection -> normalization (`IncrementalNormalizer`) -> `add_cache_breakpoints` ->
`params_from_context`. The engine keeps one assembler per session; `build_request` (what
`foldline request` calls) runs a fresh one, so what the CLI prints is what the engine sends.

Invariants:
- `build_request` is pure apart from the new records it returns: the caller appends those (cache
  pins, latched headers) to the timeline, so a resumed session rebuilds the same pins and betas
  (R2.2). An assembler's memos only save work: its plans equal `build_request`'s.
- Betas are sorted and latched: once sent in a session, a beta is sent on every later request
  (R7.5). The features behind them are still decided per request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from foldline._incremental import GrowthCursor, collection_paused
from foldline._types import Block, JSONObject
from foldline.api.cache import (
    BlockPosition,
    CacheMarked,
    PreparedMessages,
    PromptState,
    StaticHashes,
    add_cache_breakpoints,
    prompt_state_hashes,
    same_objects_prefix,
    static_hashes,
)
from foldline.api.normalize import FrozenHead, IncrementalNormalizer, MessageParam, NormalizeOptions
from foldline.api.validate import MIN_THINKING_BUDGET
from foldline.config import CacheConfig, Config
from foldline.errors import UserError
from foldline.projection import REPROJECTING, is_fold_summary_text, pins_in_view, project_view, rebuild_state
from foldline.providers.base import Capabilities
from foldline.timeline import (
    ENTRY_TYPES,
    AnyRecord,
    CachePin,
    ControlRecord,
    Entry,
    LatchedHeaders,
    UserEntry,
    new_uuid,
    now_iso,
)

__all__ = [
    "MIN_THINKING_BUDGET",
    "PauseShares",
    "RequestAssembler",
    "RequestPlan",
    "build_request",
    "latch_betas",
    "params_from_context",
    "pause_shares",
    "system_blocks",
]

_THINKING = frozenset({"thinking", "redacted_thinking"})


def latch_betas(
    state_betas: Sequence[str], requested: Iterable[str]
) -> tuple[tuple[str, ...], LatchedHeaders | None]:
    """The betas to send (sorted) and a record for the ones sent for the first time, if any (R7.5).

    Args:
        state_betas: betas already latched in this session (`ProjectionState.betas`).
        requested: betas this request's features ask for.
    """
    latched = set(state_betas)
    new = sorted({b for b in requested if b and b not in latched})
    record = LatchedHeaders(uuid=new_uuid(), timestamp=now_iso(), betas=tuple(new)) if new else None
    return tuple(sorted(latched.union(new))), record


def system_blocks(system: str | Sequence[str | Block]) -> list[Block]:
    """The system prompt as text blocks, one per part, empty parts left out.

    Split the prompt into a stable part and a changing part (a list of two strings) so that the
    cache breakpoint on the last block still covers the stable part when only that one is changed.
    """
    parts: Sequence[str | Block] = [system] if isinstance(system, str) else system
    blocks: list[Block] = []
    for part in parts:
        block = {"type": "text", "text": part} if isinstance(part, str) else dict(part)
        if block.get("type") != "text":
            raise UserError(f"system prompt blocks must be text blocks, not {block.get('type')!r}")
        if str(block.get("text", "")).strip():
            blocks.append(block)
    return blocks


def _has_text(message: MessageParam) -> bool:
    # Plain loops, no list of kinds per message: a cold build scans every message back to the first
    # user message without results (often the session's opening prompt).
    if message["role"] != "user":
        return False
    for b in message["content"]:
        if b.get("type") != "tool_result":
            return True
    return False


def _has_no_results(message: MessageParam) -> bool:
    if message["role"] != "user":
        return False
    for b in message["content"]:
        if b.get("type") == "tool_result":
            return False
    return True


_TURN_ENDS: tuple[Callable[[MessageParam], bool], ...] = (_has_text, _has_no_results)
"""The two readings of "the last user message before the final tool loop" (see below)."""


def _last_index(messages: Sequence[MessageParam], test: Callable[[MessageParam], bool], stop: int = 0) -> int:
    return next((i for i in range(len(messages) - 1, stop - 1, -1) if test(messages[i])), -1)


def _opens_with_thinking(messages: Sequence[MessageParam], boundary: int) -> bool:
    """Whether the first assistant message after `boundary` starts with thinking (True if none)."""
    for m in messages[boundary + 1 :]:
        if m["role"] == "assistant":
            return bool(m["content"]) and m["content"][0].get("type") in _THINKING
    return True


class _TurnBoundaries:
    """Whether the final assistant turn opens with thinking, or there is no such turn (A19).

    The final turn is the tool loop after the last user message that is not just tool results;
    with thinking on, its first assistant message must start with a thinking block. Whether a user
    message holding results and text (a snip tag, a reminder) ends the loop, the API's wording does
    not settle, so both readings must hold. Kept per session: each call rescans only what changed.
    """

    def __init__(self) -> None:
        self._seen: list[MessageParam] = []
        self._last = [-1 for _ in _TURN_ENDS]

    def opens_with_thinking(self, messages: Sequence[MessageParam]) -> bool:
        kept = same_objects_prefix(messages, self._seen)
        for k, test in enumerate(_TURN_ENDS):
            found = _last_index(messages, test, stop=kept)
            if found < 0:
                found = self._last[k] if self._last[k] < kept else _last_index(messages[:kept], test)
            self._last[k] = found
        self._seen = list(messages)
        return all(_opens_with_thinking(messages, b) for b in self._last)


class _FoldSummaries:
    """Where the fold summaries end (`fold_summaries_end`), kept per session: each call rescans only
    the messages that are not the very objects the previous call saw."""

    def __init__(self) -> None:
        self._seen: list[MessageParam] = []
        self._end: BlockPosition | None = None

    def end(self, messages: Sequence[MessageParam]) -> BlockPosition | None:
        kept = same_objects_prefix(messages, self._seen)
        found = fold_summaries_end(messages[kept:])
        if found is not None:
            end: BlockPosition | None = (found[0] + kept, found[1])
        elif self._end is not None and self._end[0] < kept:
            end = self._end
        else:
            end = fold_summaries_end(messages[:kept])
        self._seen, self._end = list(messages), end
        return end


def params_from_context(
    *,
    model: str,
    messages: Sequence[MessageParam],
    max_tokens: int,
    system: Sequence[Block] = (),
    tools: Sequence[Mapping[str, Any]] = (),
    thinking_budget: int | None = None,
    stream: bool = True,
) -> JSONObject:
    """The Messages API request body (R4.3.1).

    Args:
        model: model name.
        messages: normalized, cache-marked messages.
        max_tokens: output limit; must exceed the thinking budget.
        system: system blocks (already cache-marked).
        tools: the full tool list (already cache-marked).
        thinking_budget: extended thinking budget, or None for no thinking.
        stream: ask for a streamed reply.

    Raises:
        UserError: the thinking budget is below 1,024 or not below `max_tokens` (A25, A26).
    """
    if not model:
        raise UserError("a request needs a model name")
    if max_tokens < 1:
        raise UserError(f"max_tokens must be at least 1, not {max_tokens}")
    body: JSONObject = {"model": model, "max_tokens": max_tokens}
    if system:
        body["system"] = list(system)
    if tools:
        body["tools"] = list(tools)
    if thinking_budget is not None:
        if not MIN_THINKING_BUDGET <= thinking_budget < max_tokens:
            raise UserError(
                f"thinking budget {thinking_budget} must be at least {MIN_THINKING_BUDGET} and below "
                f"max_tokens ({max_tokens})"
            )
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    body["messages"] = list(messages)
    if stream:
        body["stream"] = True
    return body


Thaw = Callable[[Sequence[AnyRecord], Sequence[Entry]], FrozenHead | None]
"""Turns a saved head back into a `FrozenHead` for these records and projected entries, or None."""


@dataclass(frozen=True)
class RequestPlan:
    """Everything the next request needs, and what it adds to the timeline."""

    body: JSONObject
    """The JSON body, exactly as it will be sent. Read-only: plans of one session share structure."""
    betas: tuple[str, ...]
    """The `anthropic-beta` values to send with it, sorted."""
    new_records: tuple[ControlRecord, ...]
    """Records the caller appends (and persists) once the request is sent: pins, latched headers."""
    prompt_state: PromptState
    """Phase-1 cache-break hashes of this request (R7.2); diff against the previous one."""
    message_breakpoints: tuple[BlockPosition, ...] = ()
    """Where the message `cache_control` breakpoints went, in prompt order (the last is the rolling one)."""


def carries_snip_tags(config: Config, tools: Sequence[Mapping[str, Any]]) -> bool:
    """Whether requests tag user messages `[id:…]`: only for a model that can act on the tags, with
    a Snip tool offered and a window Snip is for (`Config.snip_min_window`); a small model shown
    them echoes them."""
    big_enough = config.snip_enabled and config.window >= config.snip_min_window
    return big_enough and any(tool.get("name") == "Snip" for tool in tools)


class RequestAssembler:
    """Builds each next request of one session, doing per turn only the work the new records need.

    `build(records)` gives exactly `build_request(records, ...)`. When `records` extends the ones of
    the previous call by appended entries, pins and latched headers, the projection is extended in
    place, normalization redoes only the open tail (`IncrementalNormalizer`) and cache preparation
    reuses the messages it already prepared (`PreparedMessages`). Anything else (a snip, a fold, a
    compaction, a different history) rebuilds from the records.
    """

    def __init__(
        self,
        config: Config,
        system: str | Sequence[str | Block],
        tools: Sequence[Mapping[str, Any]],
        provider_caps: Capabilities,
    ) -> None:
        self.config = config
        self.provider_caps = provider_caps
        self._system = system_blocks(system)
        self._tools = [dict(t) for t in tools]
        self._budget = config.thinking_budget_tokens if provider_caps.supports_thinking else None
        options = NormalizeOptions(
            snip_enabled=carries_snip_tags(config, self._tools), thinking_enabled=self._budget is not None
        )
        self._normalizer = IncrementalNormalizer(options)
        self._memo = PreparedMessages()
        self._turns = _TurnBoundaries()
        self._folds = _FoldSummaries()
        self._static: tuple[object, object, StaticHashes] | None = None
        self._cursor: GrowthCursor[AnyRecord] = GrowthCursor()
        self._entries: list[Entry] = []
        self._pins: list[CachePin] = []
        self._betas: dict[str, None] = {}
        self._removed: frozenset[str] = frozenset()
        self._endpoints: frozenset[str] = frozenset()
        self._thaw: Thaw | None = None
        self._changes, self._prompts = 0, 0
        self._pauses = _PauseTally()

    def _reproject(self, records: Sequence[AnyRecord]) -> None:
        state = rebuild_state(records)
        self._entries = project_view(records, state)
        # No pin anywhere (the state lists them all): skip the scan back through the whole session.
        self._pins = pins_in_view(records) if state.pins else []
        self._betas = dict.fromkeys(state.betas)
        self._removed = state.removed
        self._endpoints = frozenset(u for c in state.collapses for u in (c.first_uuid, c.last_uuid))
        self._normalizer.reset()
        self._memo = PreparedMessages()
        self._changes = sum(isinstance(r, REPROJECTING) for r in records)
        self._prompts = sum(isinstance(r, UserEntry) and _typed(r) for r in records)
        self._pauses = _PauseTally()
        for r in records:
            self._pauses.add(r)

    @property
    def normalize_options(self) -> NormalizeOptions:
        """What normalization is told besides the entries (part of what a frozen head depends on)."""
        return self._normalizer.options

    def frozen_head(self) -> tuple[FrozenHead, Sequence[Entry]] | None:
        """The normalized messages before the latest reply, as the last build froze them, and the
        projected entries they were normalized from (`entries[:len(head.uuids)]`)."""
        head = self._normalizer.frozen()
        return None if head is None else (head, self._entries[: len(head.uuids)])

    def restore_head(self, thaw: Thaw) -> None:
        """Let the next build start from a saved head: after projecting, it calls `thaw(records,
        entries)`, and a head it returns is handed to the normalizer (`IncrementalNormalizer.restore`,
        which still checks the uuids). None: that build normalizes from scratch."""
        self._thaw = thaw

    def _sync(self, records: Sequence[AnyRecord]) -> None:
        """Bring the projection up to `records`, incrementally when they only grew."""
        new = self._cursor.advance(records)
        if new is None or any(
            isinstance(r, REPROJECTING) or (isinstance(r, ENTRY_TYPES) and r.uuid in self._endpoints)
            for r in new
        ):
            self._reproject(records)
        else:
            for r in new:
                self._pauses.add(r)
                if isinstance(r, ENTRY_TYPES) and r.uuid not in self._removed:
                    self._entries.append(r)
                    self._prompts += isinstance(r, UserEntry) and _typed(r)
                elif isinstance(r, CachePin):
                    self._pins.append(r)
                elif isinstance(r, LatchedHeaders):
                    self._betas.update(dict.fromkeys(r.betas))

    def build(
        self,
        records: Sequence[AnyRecord],
        *,
        new_edits: Sequence[Block] = (),
        requested_betas: Iterable[str] = (),
        volatile_last: bool = False,
        stream: bool = True,
        max_tokens: int | None = None,
    ) -> RequestPlan:
        """The next request for `records` (see `build_request` for the arguments)."""
        with collection_paused():
            return self._build(records, new_edits, requested_betas, volatile_last, stream, max_tokens)

    def _build(
        self,
        records: Sequence[AnyRecord],
        new_edits: Sequence[Block],
        requested_betas: Iterable[str],
        volatile_last: bool,
        stream: bool,
        max_tokens: int | None,
    ) -> RequestPlan:
        self._sync(records)
        if self._thaw is not None:
            thaw, self._thaw = self._thaw, None
            head = thaw(records, self._entries)
            if head is not None:
                self._normalizer.restore(head)
        messages = self._normalizer.messages(self._entries)
        budget = self._budget
        if budget is not None and not self._turns.opens_with_thinking(messages):
            budget = None  # the open turn was recorded without thinking: this request goes without (A19)
        caps = self.provider_caps
        pauses = self._pauses.shares(self.config.cache)
        marked = add_cache_breakpoints(
            messages,
            system=self._system,
            tools=self._tools,
            pins=self._pins,
            new_edits=new_edits,
            supports_cache_edits=caps.supports_cache_edits,
            volatile_last=volatile_last,
            config=self.config.cache,
            memo=self._memo,
            pause_share=pauses.past_5m,
            long_pause_share=pauses.past_1h,
            change_rate=self._changes / max(self._prompts - 1, 1),  # changes per turn gone by
            stable_end=self._folds.end(messages),
        )
        wanted = list(requested_betas)
        if self.config.long_context:
            wanted.append(self.config.long_context_beta)  # R3.4.1: the 1M window needs its beta
        if caps.supports_cache_edits and caps.cache_edits_beta:
            wanted.append(caps.cache_edits_beta)
        betas, latched = latch_betas(tuple(self._betas), wanted)
        body = params_from_context(
            model=self.config.model,
            messages=marked.messages,
            max_tokens=max_tokens or self.config.output_tokens,
            system=marked.system,
            tools=marked.tools,
            thinking_budget=budget,
            stream=stream,
        )
        new_records: tuple[ControlRecord, ...] = (*marked.new_pins, *((latched,) if latched else ()))
        state = prompt_state_hashes(body, betas=betas, static=self._static_hashes(marked))
        return RequestPlan(body, betas, new_records, state, marked.message_breakpoints)

    def _static_hashes(self, marked: CacheMarked) -> StaticHashes:
        """Hashes of the marked tools and system, recomputed only when the cache memo marked new lists."""
        if (
            self._static is None
            or self._static[0] is not marked.tools
            or self._static[1] is not marked.system
        ):
            self._static = (marked.tools, marked.system, static_hashes(marked.system, marked.tools))
        return self._static[2]


def build_request(
    records: Sequence[AnyRecord],
    config: Config,
    system: str | Sequence[str | Block],
    tools: Sequence[Mapping[str, Any]],
    provider_caps: Capabilities,
    *,
    new_edits: Sequence[Block] = (),
    requested_betas: Iterable[str] = (),
    volatile_last: bool = False,
    stream: bool = True,
    max_tokens: int | None = None,
) -> RequestPlan:
    """Assemble the next request of a session: projection -> normalize -> breakpoints -> params.

    A fresh `RequestAssembler` per call; a long-lived caller (the engine) keeps one assembler per
    session instead, which gives the same plans with per-turn work proportional to what changed.

    Args:
        records: the session's records (a timeline snapshot), control records included.
        config: model, limits, thinking budget, snip and cache settings.
        system: the system prompt, as one string or as parts (see `system_blocks`).
        tools: the tool definitions to send.
        provider_caps: what the provider supports (cache_edits, thinking).
        new_edits: this round's new `cache_edits` blocks from Microcompact (ignored without support).
        requested_betas: betas this request's features ask for; latched ones are added.
        volatile_last: the last message will not be sent again as is (see `add_cache_breakpoints`).
        stream: ask for a streamed reply.
        max_tokens: this request's output limit (an escalated retry, R5.5); the config's otherwise.

    Raises:
        UserError: nothing to send, media over the API limits, or a bad thinking budget.
    """
    assembler = RequestAssembler(config, system, tools, provider_caps)
    return assembler.build(
        records,
        new_edits=new_edits,
        requested_betas=requested_betas,
        volatile_last=volatile_last,
        stream=stream,
        max_tokens=max_tokens,
    )


class PauseShares(NamedTuple):
    """The expected shares of pauses before a typed prompt that outlast each cache TTL."""

    past_5m: float
    past_1h: float


def pause_shares(entries: Iterable[AnyRecord], cfg: CacheConfig) -> PauseShares:
    """The session's own pauses (a prompt's time minus the entry before it), with the priors
    (`cfg.pause_share_prior`, `cfg.long_pause_share_prior`) counted as `cfg.pause_prior_weight`
    pauses. Read from the records, so a resumed session and `foldline request` choose as the
    engine did; from all of them, folded and compacted turns too: the pauses of turns a fold
    replaced still say how this user pauses."""
    tally = _PauseTally()
    for entry in entries:
        tally.add(entry)
    return tally.shares(cfg)


@dataclass
class _PauseTally:
    """The pauses before typed prompts so far (`pause_shares`), kept up to date as records are
    appended."""

    pauses: list[float] = field(default_factory=list)
    previous: datetime | None = None

    def add(self, record: AnyRecord) -> None:
        if not isinstance(record, ENTRY_TYPES):
            return
        try:
            at = datetime.fromisoformat(record.timestamp)
        except ValueError:
            self.previous = None
            return
        if isinstance(record, UserEntry) and _typed(record) and self.previous is not None:
            self.pauses.append((at - self.previous).total_seconds())
        self.previous = at

    def shares(self, cfg: CacheConfig) -> PauseShares:
        short, long = cfg.ttl_seconds["5m"], cfg.ttl_seconds["1h"]
        weight, seen = cfg.pause_prior_weight, len(self.pauses)
        return PauseShares(
            (cfg.pause_share_prior * weight + sum(p > short for p in self.pauses)) / (weight + seen),
            (cfg.long_pause_share_prior * weight + sum(p > long for p in self.pauses)) / (weight + seen),
        )


def _typed(entry: UserEntry) -> bool:
    """A prompt a person (or a script) gave: not injected, not tool results."""
    if entry.is_meta or entry.is_compact_summary:
        return False
    content = entry.message.content
    return isinstance(content, str) or not any(b.get("type") == "tool_result" for b in content)


def fold_summaries_end(messages: Sequence[MessageParam]) -> BlockPosition | None:
    """The last block of the messages that stands for folded turns (a Collapse summary), or None."""
    end: BlockPosition | None = None
    for i, message in enumerate(messages):
        if message["role"] != "user":
            continue
        for j, block in enumerate(message["content"]):
            if block.get("type") == "text" and is_fold_summary_text(str(block.get("text", ""))):
                end = (i, j)
    return end
