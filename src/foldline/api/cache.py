"""Prompt-cache marking of a request (design.md §4.2) and cache-break detection, phase 1 (R7.2).

`add_cache_breakpoints` takes normalized messages plus the system blocks and tools, and returns
copies with `cache_control` breakpoints, `cache_reference` names on tool results, and every pinned
`cache_edits` block re-inserted where it was first injected. A session's `PreparedMessages` memo
lets the next request reuse the copies of the messages that came back as the same objects.
`cached_prefix_bytes` gives the canonical bytes a breakpoint caches. `prompt_state_hashes` /
`diff_states` hash the ten dimensions of a request that can break the cache and name the ones that
changed.

Invariants:
- Pure: the inputs are never mutated; every changed block or message is a copy.
- At most `max_breakpoints` (4) `cache_control` markers in all, in prompt order tools -> system ->
  messages, never a 1h TTL after a 5m one, never on thinking, empty text or `cache_edits` blocks.
- The same history gives the same bytes: reference names derive from the tool_use id alone, and
  pins are re-inserted in pin order at their recorded (message, block) positions.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from itertools import islice
from typing import Any, Literal, NamedTuple, TypeAlias

from foldline._json import dumps
from foldline._types import Block, JSONObject
from foldline.api.normalize import MessageParam
from foldline.config import CacheConfig
from foldline.timeline import CachePin, new_uuid, now_iso

__all__ = [
    "BlockPosition",
    "CacheMarked",
    "PreparedMessages",
    "PromptState",
    "StaticHashes",
    "add_cache_breakpoints",
    "cache_reference_for",
    "cached_prefix_bytes",
    "diff_states",
    "previous_turn_breakpoint",
    "prompt_state_hashes",
    "same_objects_prefix",
    "static_hashes",
]

BlockPosition: TypeAlias = tuple[int, int]
"""(message index, block index) in a request's `messages`."""

TTL: TypeAlias = Literal["5m", "1h"]
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking", "cache_edits"})


def cache_reference_for(tool_use_id: str) -> str:
    """The `cache_reference` name of a tool call's result: stable across turns and resumes (R3.2.3)."""
    return f"ref_{tool_use_id}"


@dataclass(frozen=True)
class CacheMarked:
    """A request's parts after cache marking."""

    messages: list[MessageParam]
    system: list[Block]
    tools: list[JSONObject]
    new_pins: tuple[CachePin, ...]
    """Pins for this round's new `cache_edits` blocks: the caller appends them to the timeline."""
    message_breakpoints: tuple[BlockPosition, ...]
    """Where the message breakpoints went, in prompt order (the last is the rolling one)."""


def _control(ttl: TTL) -> JSONObject:
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def _cacheable(block: Block) -> bool:
    if block.get("type") in _UNCACHEABLE:
        return False
    return block.get("type") != "text" or bool(block.get("text"))


def _last_cacheable(messages: Sequence[MessageParam], at_or_before: BlockPosition) -> BlockPosition | None:
    """The nearest block at or before a position that may carry `cache_control`."""
    m, b = at_or_before
    while m >= 0:
        content = messages[m]["content"]
        for j in range(min(b, len(content) - 1), -1, -1):
            if _cacheable(content[j]):
                return m, j
        m -= 1
        b = len(messages[m]["content"]) - 1 if m >= 0 else 0
    return None


def previous_turn_breakpoint(messages: Sequence[MessageParam]) -> BlockPosition | None:
    """Where the previous request of this session put its rolling message breakpoint.

    The previous request ended just before the latest assistant reply; its breakpoint was the last
    cacheable block of that request's last message.
    """
    for i in range(len(messages) - 1, 0, -1):
        if messages[i]["role"] == "assistant":
            return _last_cacheable(messages, (i - 1, len(messages[i - 1]["content"]) - 1))
    return None


def _blocks_between(messages: Sequence[MessageParam], start: BlockPosition, end: BlockPosition) -> int:
    """Blocks after `start` up to and including `end`."""
    if start[0] == end[0]:
        return end[1] - start[1]
    count = len(messages[start[0]]["content"]) - start[1] - 1
    count += sum(len(messages[i]["content"]) for i in range(start[0] + 1, end[0]))
    return count + end[1] + 1


def same_objects_prefix(items: Sequence[object], previous: Sequence[object]) -> int:
    """How many leading items of `items` are the very objects (`is`) at the same place in `previous`.

    Incremental callers use it to find how much of the previous request's messages came back
    unchanged (a long session repeats thousands each turn, so the comparison runs at C speed).
    """
    n = min(len(items), len(previous))
    same = list(map(operator.is_, items[:n], previous[:n]))
    try:
        return same.index(False)
    except ValueError:
        return n


def _valid(messages: Sequence[MessageParam], pos: BlockPosition) -> bool:
    return 0 <= pos[0] < len(messages) and 0 <= pos[1] < len(messages[pos[0]]["content"])


_Static: TypeAlias = tuple[list[JSONObject], list[JSONObject], int]
"""Marked tools, marked system, breakpoints left for messages."""


class PreparedMessages:
    """A memo of what the previous request prepared: its messages (references named, pins re-inserted)
    and its marked tools and system.

    A session's next request repeats the previous one's messages as the same objects
    (`IncrementalNormalizer` hands back frozen messages unchanged), so the prepared copies of the
    longest identical prefix are reused and only the rest is prepared again. Tools and system are
    reused whole when they are the same objects with the same `CacheConfig`.
    """

    def __init__(self) -> None:
        self.sources: list[MessageParam] = []
        self.prepared: list[MessageParam] = []
        self.n_pins = 0
        self.refs_upto = -1
        self._static: tuple[object, object, CacheConfig, _Static] | None = None

    def reusable(self, messages: Sequence[MessageParam], pins: Sequence[CachePin], refs_upto: int) -> int:
        """How many leading messages can be taken from the previous request's prepared ones."""
        if not self.sources or len(pins) < self.n_pins:
            return 0
        k = min(same_objects_prefix(messages, self.sources), self.refs_upto + 1, refs_upto + 1)
        for pin in pins[self.n_pins :]:
            k = min(k, pin.message_index)
        return max(k, 0)

    def static(self, tools: object, system: object, cfg: CacheConfig) -> _Static | None:
        """The marked tools and system of the previous request, if made from these same objects."""
        hit = self._static
        return hit[3] if hit and hit[0] is tools and hit[1] is system and hit[2] is cfg else None

    def remember_static(self, tools: object, system: object, cfg: CacheConfig, marked: _Static) -> None:
        """Keep the marked tools and system (the same lists are then sent, and hashed, again)."""
        self._static = (tools, system, cfg, marked)

    def remember(
        self, messages: Sequence[MessageParam], prepared: list[MessageParam], n_pins: int, refs_upto: int
    ) -> None:
        """Keep this request's prepared messages for the next one."""
        self.sources, self.prepared = list(messages), list(prepared)
        self.n_pins, self.refs_upto = n_pins, refs_upto


def _prepare(message: MessageParam, pins: Sequence[CachePin], refs: bool) -> MessageParam:
    """The message with its tool_results named and its pinned cache_edits blocks back in place."""
    content = message["content"]
    if refs:
        named: list[Block] | None = None
        for i, b in enumerate(content):  # one pass, the copy made at the first result to name
            if b.get("type") == "tool_result" and "cache_reference" not in b:
                if named is None:
                    named = list(content)
                named[i] = b | {"cache_reference": cache_reference_for(str(b.get("tool_use_id")))}
        if named is not None:
            content = named
    if pins:
        content = list(content)
        for pin in pins:  # pin order: each position was recorded with the earlier pins in place
            if pin.block_index <= len(content):
                content.insert(pin.block_index, pin.block)
    return message if content is message["content"] else {"role": message["role"], "content": content}


def _prepared_messages(
    messages: Sequence[MessageParam],
    pins: Sequence[CachePin],
    refs_upto: int,
    memo: PreparedMessages | None,
) -> list[MessageParam]:
    reuse = memo.reusable(messages, pins, refs_upto) if memo else 0
    out = memo.prepared[:reuse] if memo and reuse else []
    pins_at: dict[int, list[CachePin]] = {}
    for pin in pins:
        if pin.message_index >= reuse:
            pins_at.setdefault(pin.message_index, []).append(pin)
    for i in range(reuse, len(messages)):
        message, pinned = messages[i], pins_at.get(i, ())
        if pinned or message["role"] != "assistant":
            out.append(_prepare(message, pinned, i <= refs_upto))
        else:
            out.append(message)  # results ride only in user messages (S6.h): nothing to name or pin
    if memo:
        memo.remember(messages, out, len(pins), refs_upto)
    return out


def _inject_edits(messages: list[MessageParam], new_edits: Sequence[Block]) -> tuple[CachePin, ...]:
    """Append this round's cache_edits blocks to the last user message (a copy) and pin them there."""
    if not new_edits:
        return ()
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    if last is None:
        raise ValueError("cache_edits need a user message to ride in")
    content = list(messages[last]["content"])
    pins = []
    for block in new_edits:
        pins.append(
            CachePin(
                uuid=new_uuid(),
                timestamp=now_iso(),
                message_index=last,
                block_index=len(content),
                block=block,
            )
        )
        content.append(block)
    messages[last] = {"role": messages[last]["role"], "content": content}
    return tuple(pins)


def _mark(messages: list[MessageParam], pos: BlockPosition, ttl: TTL) -> None:
    m, b = pos
    content = list(messages[m]["content"])
    content[b] = content[b] | {"cache_control": _control(ttl)}
    messages[m] = {"role": messages[m]["role"], "content": content}


def _mark_last(items: list[Block], ttl: TTL, *, cacheable_only: bool = False) -> bool:
    """Mark the last item (the last cacheable one with `cacheable_only`); False when none qualifies."""
    for j in range(len(items) - 1, -1, -1):
        if not cacheable_only or _cacheable(items[j]):
            items[j] = items[j] | {"cache_control": _control(ttl)}
            return True
    return False


def _mark_static(tools: Sequence[Mapping[str, Any]], system: Sequence[Block], cfg: CacheConfig) -> _Static:
    marked_tools, marked_system = _strip_control(tools), _strip_control(system)
    budget = cfg.max_breakpoints
    if marked_tools and budget and _mark_last(marked_tools, cfg.static_ttl):
        budget -= 1
    if marked_system and budget and _mark_last(marked_system, cfg.static_ttl, cacheable_only=True):
        budget -= 1
    return marked_tools, marked_system, budget


def _strip_control(items: Sequence[Mapping[str, Any]]) -> list[JSONObject]:
    return [{k: v for k, v in item.items() if k != "cache_control"} for item in items]


def add_cache_breakpoints(
    messages: Sequence[MessageParam],
    *,
    system: Sequence[Block] = (),
    tools: Sequence[Mapping[str, Any]] = (),
    pins: Sequence[CachePin] = (),
    new_edits: Sequence[Block] = (),
    supports_cache_edits: bool = False,
    previous_breakpoint: BlockPosition | Literal["auto"] | None = "auto",
    volatile_last: bool = False,
    config: CacheConfig | None = None,
    memo: PreparedMessages | None = None,
    pause_share: float | None = None,
    long_pause_share: float | None = None,
    change_rate: float = 0.0,
    stable_end: BlockPosition | None = None,
) -> CacheMarked:
    """Place the request's `cache_control` breakpoints and cache_edits blocks (design.md §4.2).

    Args:
        messages: normalized messages (`normalize_messages_for_api` output); not mutated.
        system: system prompt blocks; the last non-empty one gets a breakpoint.
        tools: tool definitions; the last one gets a breakpoint.
        pins: this session's pinned `cache_edits` blocks (since the latest compact boundary), pin order.
        new_edits: this round's new `cache_edits` blocks from Microcompact; injected at the end of
            the last user message and pinned there.
        supports_cache_edits: the provider takes `cache_reference` and `cache_edits` (R3.2.5); when
            false, pins and new edits are ignored and no references are added.
        previous_breakpoint: where the previous request's rolling breakpoint was (`"auto"`: derived
            with `previous_turn_breakpoint`); when more than `lookback_blocks` blocks were added
            since, it gets a breakpoint of its own so that prefix is still found (the API looks
            back only 20 blocks from a breakpoint).
        volatile_last: the last message will not be sent again as is: the rolling breakpoint
            goes on the message before it.
        config: TTLs and limits.
        memo: reuse messages prepared by earlier calls of the same session (see `PreparedMessages`).
        pause_share: the expected share of pauses before a prompt that outlast the 5-minute TTL
            (`pause_shares` of the session's records); None: `config.pause_share_prior`.
        long_pause_share: the share that outlast the 1-hour TTL too; None:
            `config.long_pause_share_prior`.
        change_rate: how often a turn changes bytes already sent (folds, snips, cleared results
            per turn, as `RequestAssembler` counts them in the session's records); a 1h turn entry
            is read after a pause only when nothing before it changed in between.
        stable_end: the last block of what stands for folded history (the summaries Context
            Collapse put in place of older turns). The next fold appends its summary after it and
            rewrites from there, so when a breakpoint is left over it goes here too, keeping that
            entry written and refreshed for the fold's request to read (design.md §4.2).

    Returns:
        Marked copies and the new pins to append to the timeline.
    """
    cfg = config or CacheConfig()
    target = len(messages) - (2 if volatile_last and len(messages) > 1 else 1)
    edits = supports_cache_edits
    out = _prepared_messages(messages, pins if edits else (), target if edits else -1, memo)
    new_pins = _inject_edits(out, new_edits) if edits else ()
    marked_tools, marked_system, budget = _marked_static(tools, system, cfg, memo)
    # A44: a 1h breakpoint may not follow a 5m one (tools -> system -> messages).
    message_ttl: TTL = "5m" if cfg.static_ttl == "5m" and (marked_tools or marked_system) else cfg.message_ttl
    previous = previous_turn_breakpoint(out) if previous_breakpoint == "auto" else previous_breakpoint
    points = _message_breakpoints(out, target, previous, budget, cfg)
    share = cfg.pause_share_prior if pause_share is None else pause_share
    long_share = cfg.long_pause_share_prior if long_pause_share is None else long_pause_share
    # A44 again: 1h turn breakpoints only where no 5m static one precedes them
    may_1h = cfg.static_ttl == "1h" or not (marked_tools or marked_system)
    head = _last_cacheable(out, stable_end) if stable_end is not None and _valid(out, stable_end) else None
    held_from = head[0] + 1 if head else 0
    outlook = _Outlook(share, min(long_share, share), min(max(change_rate, 0.0), 1.0), held_from)
    turn = _turn_points(out, target, budget, cfg, outlook) if may_1h else ()
    if turn:
        points = turn
        for point in points:
            _mark(out, point, "1h")
    else:
        for point in points:
            _mark(out, point, message_ttl)
    if head is not None and points and head < points[0] and len(points) < budget:
        # before 1h points it must be 1h too (A44); before 5m ones, 1h when the pauses pay for it
        hour = bool(turn) or message_ttl == "1h" or (may_1h and _fold_entry_pays(out, head, cfg, outlook))
        _mark(out, head, "1h" if hour else message_ttl)
        points = (head, *points)
    return CacheMarked(out, marked_system, marked_tools, new_pins, points)


def _opens_turn(messages: Sequence[MessageParam], i: int) -> bool:
    """Whether message `i` is a prompt that opens a turn: a user message not answering tool calls."""
    if messages[i]["role"] != "user":
        return False
    return i == 0 or not any(b.get("type") == "tool_use" for b in messages[i - 1]["content"])


class _Outlook(NamedTuple):
    """What the turn breakpoints' TTL rule expects of the session's next turns."""

    pause_share: float
    """Share of pauses before a prompt that outlast the 5-minute TTL."""
    long_pause_share: float
    """Share that outlast the 1-hour TTL too (part of `pause_share`)."""
    change_rate: float
    """Changes to bytes already sent per turn (folds, snips, cleared results), at most 1."""
    held_from: int
    """The first message no other 1h entry holds (the one after the fold summaries)."""


def _turn_points(
    messages: Sequence[MessageParam], target: int, budget: int, cfg: CacheConfig, outlook: _Outlook
) -> tuple[BlockPosition, ...]:
    """On a turn's first request, when a 1h entry pays: a 1h breakpoint on this prompt (the entry
    the next turn will find) and, when the previous turn's first request wrote one on its prompt
    too, a 1h breakpoint there (so a pause past 5 minutes still finds it: the API looks back only
    20 blocks). Empty when the rolling breakpoint stands.

    Whether the previous turn wrote one is the same rule applied to it, on the messages as they
    are now: stateless, so a resumed session and `foldline request` mark as the engine did. Where
    it did not, marking its prompt would find nothing and write the whole prefix at the 1h rate;
    the caller's spare breakpoint goes on the fold summaries instead (`_one_hour_pays`)."""
    if cfg.turn_ttl == "5m" or budget < 1 or not messages or target != len(messages) - 1:
        return ()
    if not _opens_turn(messages, target):
        return ()
    # the two latest openings only: the walk back stops there, not at the session's first prompt
    openings = list(islice((i for i in range(target - 1, -1, -1) if _opens_turn(messages, i)), 2))
    if not openings:
        return ()
    earlier = openings[0]
    before_too = True
    if cfg.turn_ttl == "auto":
        sizes = [len(dumps(m)) for m in messages[: target + 1]]
        if not _one_hour_pays(sizes, target, earlier, cfg, outlook):
            return ()
        before_too = len(openings) > 1 and _one_hour_pays(sizes, earlier, openings[1], cfg, outlook)
    now = _last_cacheable(messages, (target, len(messages[target]["content"]) - 1))
    if now is None:
        return ()
    before = _last_cacheable(messages, (earlier, len(messages[earlier]["content"]) - 1))
    if before_too and budget >= 2 and before is not None and before < now:
        return before, now
    return (now,)


def _one_hour_pays(
    sizes: Sequence[int], target: int, earlier: int, cfg: CacheConfig, outlook: _Outlook
) -> bool:
    """The price rule of the turn breakpoints' TTL (`CacheConfig.turn_ttl`) for the turn opened by
    message `target`, the previous one opened by `earlier`; `sizes` are the messages' JSON lengths
    (only their ratio counts).

    With `p` the share of pauses past 5 minutes, `q` the share past an hour too and `c` the changes
    per turn: a pause between the two TTLs is what a 1h entry bridges. It saves rewriting the
    messages up to the previous prompt that no other 1h entry holds (the fold summaries have their
    own), and only when nothing before it changed in between: `(p - q) x (1 - c) x write_5m x
    prefix`. It costs `write_1h - write_5m` more on what is written at the 1h rate: without a pause
    only the last reply and this prompt (the previous request's 5m entry still holds the rest),
    after a pause the whole last turn, and after one past the hour the prefix too: `(write_1h -
    write_5m) x ((1 - p) x tail + p x new + q x prefix)`."""
    p, q = outlook.pause_share, outlook.long_pause_share
    prefix = sum(sizes[outlook.held_from : earlier + 1])
    new, tail = sum(sizes[earlier + 1 : target + 1]), sum(sizes[max(target - 1, 0) : target + 1])
    extra = (cfg.write_1h_price - cfg.write_5m_price) * ((1 - p) * tail + p * new + q * prefix)
    return (p - q) * (1 - outlook.change_rate) * cfg.write_5m_price * prefix > extra


def _fold_entry_pays(
    messages: Sequence[MessageParam], head: BlockPosition, cfg: CacheConfig, outlook: _Outlook
) -> bool:
    """The price rule of the fold summaries' entry (`head`, their last block): whether writing it at
    the 1h rate pays, before breakpoints that are 5m.

    With `p` the share of pauses past 5 minutes, `q` the share past an hour too and `c` the changes
    per turn: each turn, a 5m entry is written again after a pause past 5 minutes (`write_5m x p`)
    and a 1h one after a pause past the hour (`write_1h x q`), both over everything the entry holds;
    a fold (`c` per turn) appends its summary under the entry, written at the entry's rate, so the
    1h rate costs `(write_1h - write_5m) x c` on that summary, for which the newest one stands in.
    A session that never pauses (a script, the benchmarks) writes it for five minutes; the priors
    (`CacheConfig.pause_share_prior`) choose the hour until its own pauses say otherwise."""
    p, q, c = outlook.pause_share, outlook.long_pause_share, outlook.change_rate
    held = sum(len(dumps(m)) for m in messages[: head[0]]) + len(
        dumps(messages[head[0]]["content"][: head[1] + 1])
    )
    newest = len(dumps(messages[head[0]]["content"][head[1]]))
    saved = (cfg.write_5m_price * p - cfg.write_1h_price * q) * held
    return saved > (cfg.write_1h_price - cfg.write_5m_price) * c * newest


def _marked_static(
    tools: Sequence[Mapping[str, Any]],
    system: Sequence[Block],
    cfg: CacheConfig,
    memo: PreparedMessages | None,
) -> _Static:
    """`_mark_static`, or the memo's copy when the previous request marked these same lists."""
    static = memo.static(tools, system, cfg) if memo else None
    if static is None:
        static = _mark_static(tools, system, cfg)
        if memo:
            memo.remember_static(tools, system, cfg, static)
    return static


def _message_breakpoints(
    messages: Sequence[MessageParam],
    target: int,
    previous: BlockPosition | None,
    budget: int,
    cfg: CacheConfig,
) -> tuple[BlockPosition, ...]:
    """The rolling breakpoint at or before message `target`, after an extra one at `previous` when the
    blocks added since are more than the API looks back over and the budget has room for both."""
    rolling = _last_cacheable(messages, (target, len(messages[target]["content"]) - 1)) if messages else None
    if rolling is None or not budget:
        return ()
    if (
        previous is not None
        and budget >= 2
        and _valid(messages, previous)
        and previous < rolling
        and _blocks_between(messages, previous, rolling) > cfg.lookback_blocks
    ):
        earlier = _last_cacheable(messages, previous)
        if earlier is not None:
            return earlier, rolling
    return (rolling,)


# --- canonical prefix bytes ------------------------------------------------------------------


def _canonical(value: object) -> bytes:
    return dumps(value, sort_keys=True)


def _last_marked(messages: Sequence[MessageParam]) -> BlockPosition | None:
    for i in range(len(messages) - 1, -1, -1):
        for j in range(len(messages[i]["content"]) - 1, -1, -1):
            if "cache_control" in messages[i]["content"][j]:
                return i, j
    return None


def cached_prefix_bytes(body: Mapping[str, Any], upto: BlockPosition | None = None) -> bytes:
    """The bytes a cache lookup hashes: tools, system and message blocks up to a breakpoint.

    Canonical (sorted keys, one block per line) and without `cache_control` markers, which are not
    part of the cached content. `upto` defaults to the last message block carrying `cache_control`;
    with no such block only tools and system count.
    """
    messages: Sequence[MessageParam] = body.get("messages") or []
    end = upto if upto is not None else _last_marked(messages)
    parts = [_canonical(_strip_control(body.get("tools") or [])), _canonical(_system_blocks(body))]
    if end is not None:
        for i, m in enumerate(messages[: end[0] + 1]):
            content = m["content"] if i < end[0] else m["content"][: end[1] + 1]
            parts += [_canonical([m["role"], b]) for b in _strip_control(content)]
    return b"\n".join(parts)


def _system_blocks(body: Mapping[str, Any]) -> list[JSONObject]:
    system = body.get("system")
    if isinstance(system, str):
        return [{"type": "text", "text": system}]
    return _strip_control(system or [])


# --- cache-break detection, phase 1 (R7.2) ----------------------------------------------------

_STANDARD_KEYS = frozenset(
    {"model", "messages", "system", "tools", "max_tokens", "thinking", "stream", "metadata", "tool_choice"}
)


def _digest(value: object) -> str:
    return hashlib.sha256(_canonical(value)).hexdigest()[:16]


@dataclass(frozen=True)
class PromptState:
    """Hashes of the ten request dimensions that can break the prompt cache (R7.2)."""

    system_text: str
    system_cache_layout: str
    tools: str
    per_tool: tuple[tuple[str, str], ...]
    model: str
    fast_mode: str
    betas: str
    effort: str
    cache_strategy: str
    extra_body: str


StaticHashes: TypeAlias = tuple[str, str, str, tuple[tuple[str, str], ...]]
"""Hashes of system text, system cache layout, the tool list, and each tool (R7.2)."""


def static_hashes(system: object, tools: object) -> StaticHashes:
    """The system and tool dimensions of `prompt_state_hashes`, for a caller that reuses them."""
    system_list: list[Mapping[str, Any]] = system if isinstance(system, list) else []
    tool_list: list[Mapping[str, Any]] = tools if isinstance(tools, list) else []
    texts = [system] if isinstance(system, str) else [b.get("text") for b in system_list]
    return (
        _digest(texts),
        _digest([b.get("cache_control") for b in system_list]),
        _digest(_strip_control(tool_list)),
        tuple((str(t.get("name")), _digest(_strip_control([t]))) for t in tool_list),
    )


def prompt_state_hashes(
    body: Mapping[str, Any],
    *,
    betas: Sequence[str] = (),
    fast_mode: bool = False,
    cache_strategy: str = "",
    static: StaticHashes | None = None,
) -> PromptState:
    """Hash each cache-relevant dimension of a request body separately (R7.2).

    Args:
        body: the request body as it will be sent.
        betas: the beta headers it goes with.
        fast_mode: whether the request asks for the fast output mode.
        cache_strategy: the caller's global caching strategy name (for example the TTL layout).
        static: `static_hashes(body["system"], body["tools"])` if the caller already has it.
    """
    system_text, system_layout, tools_hash, per_tool = static or static_hashes(
        body.get("system"), body.get("tools")
    )
    return PromptState(
        system_text=system_text,
        system_cache_layout=system_layout,
        tools=tools_hash,
        per_tool=per_tool,
        model=_digest(body.get("model")),
        fast_mode=_digest(fast_mode),
        betas=_digest(sorted(betas)),
        effort=_digest([body.get("thinking"), body.get("output_config")]),
        cache_strategy=_digest(cache_strategy),
        extra_body=_digest({k: v for k, v in body.items() if k not in _STANDARD_KEYS | {"output_config"}}),
    )


def diff_states(prev: PromptState | None, cur: PromptState) -> tuple[str, ...]:
    """The dimensions that changed between two requests: phase 1's `pending_changes` (R7.2).

    Per-tool changes are named `tool_added:<name>`, `tool_removed:<name>`, `tool_changed:<name>`.
    """
    if prev is None:
        return ()
    changes = [
        f.name
        for f in fields(PromptState)
        if f.name != "per_tool" and getattr(prev, f.name) != getattr(cur, f.name)
    ]
    before, after = dict(prev.per_tool), dict(cur.per_tool)
    changes += [f"tool_removed:{n}" for n in before if n not in after]
    changes += [f"tool_added:{n}" for n in after if n not in before]
    changes += [f"tool_changed:{n}" for n in after if n in before and before[n] != after[n]]
    return tuple(changes)
