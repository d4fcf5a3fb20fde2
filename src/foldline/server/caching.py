"""Prompt caching and cache_edits as the local server implements them (R8.3, R8.4, R3.2.6).

The request is flattened into one ordered block sequence, tools -> system -> messages, and each block
gets a cumulative prefix key (a hash of the model, every earlier block and itself). The rules follow
the prompt-caching doc (design.md §P):

- Entries are written only at `cache_control` breakpoints whose prefix reaches the model's minimum
  cacheable length; a shorter prefix is processed without caching (no error).
- A lookup starts at each breakpoint and walks back over at most `lookback_blocks` earlier blocks; the
  longest live hit over all breakpoints is read, and reading refreshes that entry's TTL.
- Billing positions: A = the hit, B = the last 1h breakpoint written after A, C = the last breakpoint
  written. Read A; write 1h for B-A and 5m for C-B; `input_tokens` is what follows C (or A).
- `cache_control` is not part of any key (moving a breakpoint does not invalidate the prefix);
  `tool_choice`, `thinking` and the number of images in the messages are keyed in front of the
  messages, so changing them (or adding or removing an image anywhere) invalidates the messages but
  not tools or system, as the doc's invalidation table says.

cache_edits: a tool_result may carry `cache_reference`; the first time a name is seen its token span
is recorded. A user content block `{"type": "cache_edits", "edits": [{"type": "delete",
"cache_reference": ...}]}` (beta header `CACHE_EDITS_BETA` required) masks that block out of what the
backend sees for this request only. The cache_edits block is in no key and reaches no backend, so the
cached prefix stays valid. The deleted tokens are billed nowhere (not read, written or input) and are
reported as `cache_deleted_input_tokens`, so a client's context count drops as Microcompact intends.

Invariant: `input_tokens + cache_read_input_tokens + cache_creation_input_tokens +
cache_deleted_input_tokens` equals the request's total input tokens, and `cache_creation` splits the
creation exactly into 5m and 1h.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Container, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from foldline._json import dumps
from foldline._types import Block
from foldline.errors import RequestValidationError
from foldline.server.tokenizer import count_block, count_tool

__all__ = [
    "CACHE_EDITS_BETA",
    "TTL_SECONDS",
    "CacheUsage",
    "FlatBlock",
    "FlattenMemo",
    "NoveltyCount",
    "PromptCache",
    "ReferenceRegistry",
    "Span",
    "backend_messages",
    "cache_edits_deletions",
    "deleted_tokens",
    "flatten",
    "has_beta",
    "total_tokens",
]

CACHE_EDITS_BETA = "cache-edits-2025-06-01"
"""The `anthropic-beta` value that turns on `cache_edits` blocks and `cache_reference` spans."""

TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True, slots=True)
class FlatBlock:
    """One block of the flattened request."""

    path: str
    """Where the block sits in the request (`tools.0`, `system.1`, `messages.3.content.2`)."""
    start: int
    """Tokens before this block."""
    end: int
    """Tokens up to and including this block."""
    key: str
    """Cumulative prefix key through this block."""
    ttl: str | None
    """The breakpoint's TTL (`5m`/`1h`) when the block carries `cache_control`, else None."""
    reference: str | None = None
    """The tool_result's `cache_reference`, if any."""


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """The cache part of a response's `usage`."""

    input_tokens: int
    cache_read_input_tokens: int = 0
    ephemeral_5m_input_tokens: int = 0
    ephemeral_1h_input_tokens: int = 0
    cache_deleted_input_tokens: int = 0
    cache_miss_reason: str | None = None
    """Why this request read less than the previous one had cached (a foldline serve diagnostic,
    R7.5.1); None when nothing cached was missed."""

    @property
    def cache_creation_input_tokens(self) -> int:
        """Tokens written to the cache, both TTLs together."""
        return self.ephemeral_5m_input_tokens + self.ephemeral_1h_input_tokens

    def as_usage(self, output_tokens: int) -> dict[str, Any]:
        """The `usage` object of a Messages API response."""
        usage: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.ephemeral_5m_input_tokens,
                "ephemeral_1h_input_tokens": self.ephemeral_1h_input_tokens,
            },
            "output_tokens": output_tokens,
        }
        if self.cache_deleted_input_tokens:
            usage["cache_deleted_input_tokens"] = self.cache_deleted_input_tokens
        if self.cache_miss_reason:
            usage["cache_miss_reason"] = self.cache_miss_reason
        return usage


def has_beta(header: str | None, beta: str) -> bool:
    """Whether a comma-separated `anthropic-beta` header lists `beta`."""
    if not header:
        return False
    return beta in (part.strip() for part in header.split(","))


def _ttl_of(block: Mapping[str, Any]) -> str | None:
    """The breakpoint's TTL; an invalid one reads as 5m here (the validator rejects it first)."""
    control = block.get("cache_control")
    if not isinstance(control, Mapping):
        return None
    return "1h" if control.get("ttl") == "1h" else "5m"


def _as_blocks(content: object) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _sections(body: Mapping[str, Any]) -> Iterator[tuple[str, str, Block]]:
    """(path, marker, block) for every block, in cache order, cache_edits blocks left out."""
    for i, tool in enumerate(body.get("tools") or ()):
        if isinstance(tool, dict):
            yield f"tools.{i}", "tool", tool
    for i, block in enumerate(_as_blocks(body.get("system"))):
        yield f"system.{i}", "system", block
    for m, message in enumerate(body.get("messages") or ()):
        if not isinstance(message, Mapping):
            continue
        role = str(message.get("role"))
        for c, block in enumerate(_as_blocks(message.get("content"))):
            if block.get("type") != "cache_edits":
                yield f"messages.{m}.content.{c}", f"{role}:{m}", block


def _count(marker: str, keyed: Block) -> int:
    return count_tool(keyed) if marker == "tool" else count_block(keyed)


class _Chain(Protocol):
    """The running prefix key: each unit (params or block) extends it."""

    def params(self, params: list[Any]) -> None:
        """Extend the key with the parameters keyed in front of the messages."""
        ...

    def block(self, marker: str, keyed: Block) -> tuple[str, int]:
        """Extend the key with one block (`cache_control` removed); its key and tokens."""
        ...


class _PlainChain:
    """Hash and count everything: the definition the memo must agree with."""

    def __init__(self, model: object) -> None:
        self.digest = hashlib.sha256(dumps(["model", model]))

    def params(self, params: list[Any]) -> None:
        self.digest.update(dumps(params))

    def block(self, marker: str, keyed: Block) -> tuple[str, int]:
        self.digest.update(dumps([marker, keyed]))
        return self.digest.hexdigest(), _count(marker, keyed)


def flatten(body: Mapping[str, Any], memo: FlattenMemo | None = None) -> list[FlatBlock]:
    """The request as the ordered block sequence the cache is keyed on (tools -> system -> messages).

    With `memo`, blocks already seen after the same prefix take their key and token count from it
    instead of being hashed and counted again; the result is the same either way.
    """
    chain: _Chain = _PlainChain(body.get("model")) if memo is None else memo.chain(body.get("model"))
    blocks: list[FlatBlock] = []
    total = 0
    in_messages = False
    for path, marker, block in _sections(body):
        if not in_messages and path.startswith("messages."):
            in_messages = True
            chain.params(["params", body.get("tool_choice"), body.get("thinking"), _image_count(body)])
        keyed = (
            {k: v for k, v in block.items() if k != "cache_control"} if "cache_control" in block else block
        )
        key, tokens = chain.block(marker, keyed)
        ref = block.get("cache_reference") if block.get("type") == "tool_result" else None
        blocks.append(
            FlatBlock(
                path=path,
                start=total,
                end=total + tokens,
                key=key,
                ttl=_ttl_of(block),
                reference=ref if isinstance(ref, str) else None,
            )
        )
        total += tokens
    return _with_automatic_breakpoint(body, blocks)


@dataclass(frozen=True, slots=True)
class _Link:
    """The prefix key after one more unit: its hex key, the hash state to extend, its tokens."""

    key: str
    state: Any  # a hashlib sha256 object, never updated once stored (extended through `.copy()`)
    tokens: int


_LINK_OVERHEAD = 512
"""Bytes one memo entry costs besides its block's JSON (key string, hash state, dict slots)."""


class FlattenMemo:
    """What `flatten` learnt from earlier requests: (prefix key, block JSON) -> the next prefix key.

    A session resends its history each turn, so almost every block of a request follows the same
    prefix as in the previous request: one `dumps` of the block and a dict lookup replace hashing
    and counting it. The lookup compares the block's exact JSON bytes, so an edited block (or one
    after it) is never served a stale key, and key order or `1` versus `1.0` count as different,
    as they do for the plain computation. Token counts are also kept per block JSON alone, so a
    block that moves (the messages after a compaction) is counted only once.

    Entries are dropped oldest first once they hold more than `max_bytes` (block JSON plus about
    `_LINK_OVERHEAD` bytes each); a dropped entry is only recomputed.
    """

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self._links: _Fifo[tuple[str, str, bytes], _Link] = _Fifo(max_bytes // 2, lambda k: len(k[2]))
        self._tokens: _Fifo[tuple[bool, bytes], int] = _Fifo(max_bytes // 2, lambda k: len(k[1]))

    def __len__(self) -> int:
        return len(self._links.items)

    @property
    def size(self) -> int:
        """Bytes the memo accounts for (block JSON plus a fixed overhead per entry)."""
        return self._links.size + self._tokens.size

    def chain(self, model: object) -> _MemoChain:
        """A chain for one request to `model`."""
        return _MemoChain(self, dumps(["model", model]))


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Fifo(Generic[K, V]):
    """A dict that drops its oldest entries once their accounted size passes `max_bytes`."""

    def __init__(self, max_bytes: int, weight: Callable[[K], int]) -> None:
        self.items: dict[K, V] = {}
        self.max_bytes = max_bytes
        self.weight = weight
        self.size = 0

    def get(self, key: K) -> V | None:
        return self.items.get(key)

    def put(self, key: K, value: V) -> None:
        if key not in self.items:
            self.size += self.weight(key) + _LINK_OVERHEAD
        self.items[key] = value
        while self.size > self.max_bytes and self.items:
            oldest = next(iter(self.items))
            del self.items[oldest]
            self.size -= self.weight(oldest) + _LINK_OVERHEAD


class _MemoChain:
    """`_PlainChain`'s keys and counts, looked up in a `FlattenMemo` where it already has them."""

    def __init__(self, memo: FlattenMemo, model: bytes) -> None:
        self.memo = memo
        self.model = model
        self.prev = "model:" + hashlib.sha256(model).hexdigest()
        self.link: _Link | None = None

    def _state(self) -> Any:
        """A fresh copy of the hash state after the units so far."""
        return self.link.state.copy() if self.link is not None else hashlib.sha256(self.model)

    def _extend(
        self, marker: str, data: bytes, full: Callable[[], bytes], tokens: Callable[[], int]
    ) -> _Link:
        where = (self.prev, marker, data)
        link = self.memo._links.get(where)
        if link is None:
            state = self._state()
            state.update(full())
            link = _Link(state.hexdigest(), state, tokens())
            # A copy: orjson's result keeps its whole write buffer (~19 KB for a small block).
            kept = bytes(memoryview(data))
            self.memo._links.put((self.prev, marker, kept), link)
            self.memo._tokens.put((marker == "tool", kept), link.tokens)
        self.prev, self.link = link.key, link
        return link

    def params(self, params: list[Any]) -> None:
        data = dumps(params)
        self._extend("", data, lambda: data, lambda: 0)

    def block(self, marker: str, keyed: Block) -> tuple[str, int]:
        data = dumps(keyed)
        tool = marker == "tool"

        def tokens() -> int:
            known = self.memo._tokens.get((tool, data))
            return known if known is not None else _count(marker, keyed)

        link = self._extend(marker, data, lambda: dumps([marker, keyed]), tokens)
        return link.key, link.tokens


def _image_count(body: Mapping[str, Any]) -> int:
    count = 0
    for message in body.get("messages") or ():
        for block in _as_blocks(message.get("content") if isinstance(message, Mapping) else None):
            kind = block.get("type")
            count += kind == "image"
            inner = block.get("content") if kind == "tool_result" else None
            if isinstance(inner, list):  # string content holds no image
                count += sum(1 for b in inner if isinstance(b, dict) and b.get("type") == "image")
    return count


def total_tokens(blocks: Sequence[FlatBlock]) -> int:
    """The request's input tokens (0 for an empty request)."""
    return blocks[-1].end if blocks else 0


def _with_automatic_breakpoint(body: Mapping[str, Any], blocks: list[FlatBlock]) -> list[FlatBlock]:
    """A top-level `cache_control` puts a breakpoint on the last block (automatic caching)."""
    if not blocks or not isinstance(body.get("cache_control"), Mapping):
        return blocks
    last = blocks[-1]
    blocks[-1] = replace(last, ttl=last.ttl or _ttl_of(body))
    return blocks


_PURGE_AT = 4096
"""Entries expire lazily when looked up; past this many, a write first drops every expired one."""


@dataclass(slots=True)
class _Entry:
    ttl: str
    expires_at: float


@dataclass
class PromptCache:
    """The server's prompt cache: prefix key -> entry with a TTL, on an injectable clock."""

    clock: Callable[[], float] = time.monotonic
    lookback_blocks: int = 20
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _previous: tuple[list[FlatBlock], int] | None = None
    """The previous request's blocks and the index of the deepest block it left cached."""
    _covered: dict[str, str] = field(default_factory=dict)
    """Block prefix key -> the key of the deepest entry written whose prefix contains that block:
    what a server-side context edit may read up to (`apply(anchor=...)`)."""

    def __len__(self) -> int:
        return len(self._entries)

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and entry.expires_at <= now:
            del self._entries[key]
            return None
        return entry

    def _find_hit(self, blocks: Sequence[FlatBlock], breakpoints: Sequence[int], now: float) -> int:
        hit = -1
        for bp in breakpoints:
            for j in range(bp, max(bp - self.lookback_blocks - 1, hit, -1), -1):
                if self._live(blocks[j].key, now) is not None:
                    hit = j
                    break
        return hit

    def _anchor_hit(self, blocks: Sequence[FlatBlock], anchor: int, now: float) -> int:
        """`anchor` when a live entry's prefix contains it (refreshing that entry), else -1."""
        if anchor < 0:
            return -1
        entry_key = self._covered.get(blocks[anchor].key)
        entry = self._live(entry_key, now) if entry_key is not None else None
        if entry is None:
            return -1
        entry.expires_at = now + TTL_SECONDS[entry.ttl]
        return anchor

    def apply(
        self,
        blocks: Sequence[FlatBlock],
        min_tokens: int,
        deleted: Container[str] = frozenset(),
        *,
        anchor: int = -1,
    ) -> CacheUsage:
        """Read the longest cached prefix, write entries at later breakpoints, and bill the request.

        Args:
            blocks: the flattened request (`flatten`).
            min_tokens: the model's minimum cacheable prefix length.
            deleted: `cache_reference`s this request deletes; their tokens are billed nowhere and
                reported as `cache_deleted_input_tokens` instead (the keys, and so the cached
                prefix, are unaffected).
            anchor: the last block before the first one a server-side context edit changed; the
                prefix through it is read when any live entry contains it, breakpoint or not
                (context editing invalidates the cache from the cleared point on, not before it).

        Returns:
            The usage split.
        """
        now = self.clock()
        breakpoints = [i for i, b in enumerate(blocks) if b.ttl is not None]
        hit = max(self._find_hit(blocks, breakpoints, now), self._anchor_hit(blocks, anchor, now))
        reason = self._miss_reason(blocks, hit, now)  # before this request's writes hide an expiry
        if hit >= 0 and blocks[hit].key in self._entries:
            entry = self._entries[blocks[hit].key]
            entry.expires_at = now + TTL_SECONDS[entry.ttl]
        writes = [bp for bp in breakpoints if bp > hit and blocks[bp].end >= min_tokens]
        if writes and len(self._entries) >= _PURGE_AT:
            self._entries = {k: e for k, e in self._entries.items() if e.expires_at > now}
            self._covered = {k: e for k, e in self._covered.items() if e in self._entries}
        for bp in writes:
            ttl = blocks[bp].ttl or "5m"
            self._entries[blocks[bp].key] = _Entry(ttl=ttl, expires_at=now + TTL_SECONDS[ttl])
        if writes:
            deepest = blocks[writes[-1]].key
            for block in blocks[: writes[-1] + 1]:
                self._covered[block.key] = deepest
        self._previous = (list(blocks), max([hit, *writes]))
        billed = _billed_positions(blocks, deleted)
        read = billed[hit] if hit >= 0 else 0
        one_hour = [bp for bp in writes if blocks[bp].ttl == "1h"]
        b_end = billed[one_hour[-1]] if one_hour else read
        c_end = billed[writes[-1]] if writes else read
        return CacheUsage(
            input_tokens=(billed[-1] if blocks else 0) - c_end,
            cache_read_input_tokens=read,
            ephemeral_1h_input_tokens=b_end - read,
            ephemeral_5m_input_tokens=c_end - b_end,
            cache_deleted_input_tokens=deleted_tokens(blocks, deleted),
            cache_miss_reason=reason,
        )

    def _miss_reason(self, blocks: Sequence[FlatBlock], hit: int, now: float) -> str | None:
        """Why `hit` stops short of what the previous request left cached, or None (R7.5.1).

        Three causes, in the order they are ruled out: the prompt changed before the cached end
        (the first differing block is named), the entry expired, or no breakpoint of this request
        was within the lookback window of it.
        """
        if self._previous is None:
            return None
        before, cached = self._previous
        if cached < 0:
            return None
        same = 0
        for old, new in zip(before, blocks, strict=False):
            if old.key != new.key:
                break
            same += 1
        reachable = min(cached, same - 1)
        if same <= cached and hit < cached:
            where = blocks[same].path if same < len(blocks) else "the end of the prompt"
            return f"the prompt changed at {where} (block {same}); the cache after it could not be read"
        if hit >= reachable or reachable < 0:
            return None
        path = blocks[reachable].path
        if self._live(blocks[reachable].key, now) is None:
            return f"the cached prefix through {path} expired (its TTL passed without a read)"
        return (
            f"no cache_control breakpoint within {self.lookback_blocks} blocks after the cached prefix "
            f"through {path}"
        )


def _is_deleted(block: FlatBlock, deleted: Container[str]) -> bool:
    return block.reference is not None and block.reference in deleted


def deleted_tokens(blocks: Sequence[FlatBlock], deleted: Container[str]) -> int:
    """How many of the request's tokens the deleted references cover."""
    return sum(b.end - b.start for b in blocks if _is_deleted(b, deleted))


def _billed_positions(blocks: Sequence[FlatBlock], deleted: Container[str]) -> list[int]:
    """Each block's end position counting only tokens that are not deleted."""
    ends: list[int] = []
    removed = 0
    for block in blocks:
        if _is_deleted(block, deleted):
            removed += block.end - block.start
        ends.append(block.end - removed)
    return ends


@dataclass
class NoveltyCount:
    """Prompt tokens this server had never been sent before, over every request it billed.

    A cache entry holds a prefix, so a block can be read only if the same prefix through it came in
    an earlier request; a block whose prefix key is new must be written or sent uncached, whatever
    the breakpoints and TTLs. `read_ceiling` is therefore the highest cache-read share any client
    could have reached with these prompts. Kept only where asked for (`create_app(novelty=...)`):
    it remembers one key per distinct block, which a long-running server should not.
    """

    prompt_tokens: int = 0
    new_tokens: int = 0
    _seen: set[str] = field(default_factory=set)

    def add(self, blocks: Sequence[FlatBlock], deleted: Container[str] = frozenset()) -> None:
        """Count one request's tokens (deleted ones, billed nowhere, count nowhere here either)."""
        for block in blocks:
            if _is_deleted(block, deleted):
                continue
            tokens = block.end - block.start
            self.prompt_tokens += tokens
            if block.key not in self._seen:
                self._seen.add(block.key)
                self.new_tokens += tokens

    @property
    def read_ceiling(self) -> float:
        """1 - new / all prompt tokens (0 before any request)."""
        return 1 - self.new_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True, slots=True)
class Span:
    """The token range a `cache_reference` was given when the server first saw it."""

    start: int
    end: int
    path: str


@dataclass
class ReferenceRegistry:
    """`cache_reference` name -> the span it was first given (R3.2.6)."""

    spans: dict[str, Span] = field(default_factory=dict)

    def record(self, blocks: Sequence[FlatBlock]) -> None:
        """Remember the span of every reference seen for the first time."""
        for block in blocks:
            if block.reference is not None and block.reference not in self.spans:
                self.spans[block.reference] = Span(block.start, block.end, block.path)


def _edits_of(block: Mapping[str, Any], path: str) -> list[str]:
    edits = block.get("edits")
    if not isinstance(edits, list) or not edits:
        raise RequestValidationError(f"{path}.edits: must be a non-empty list", path=f"{path}.edits")
    names: list[str] = []
    for e, edit in enumerate(edits):
        where = f"{path}.edits.{e}"
        if not isinstance(edit, Mapping) or edit.get("type") != "delete":
            raise RequestValidationError(f"{where}.type: Input should be 'delete'", path=f"{where}.type")
        name = edit.get("cache_reference")
        if not isinstance(name, str) or not name:
            raise RequestValidationError(
                f"{where}.cache_reference: Field required", path=f"{where}.cache_reference"
            )
        names.append(name)
    return names


def cache_edits_deletions(
    body: Mapping[str, Any],
    blocks: Sequence[FlatBlock],
    *,
    beta_enabled: bool,
    known: Container[str] = frozenset(),
) -> set[str]:
    """The references this request deletes; raises `RequestValidationError` on a bad edit.

    A reference must name a tool_result of this request, or one seen before (`known`): a pinned
    edit whose tool_result was since snipped away deletes nothing, but a name never seen is a typo.

    Args:
        body: the request body.
        blocks: its flattened form.
        beta_enabled: whether the request carries the `CACHE_EDITS_BETA` header.
        known: references recorded by earlier requests.
    """
    present = {b.reference for b in blocks if b.reference is not None}
    deleted: set[str] = set()
    for m, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, Mapping) else None
        for c, block in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(block, Mapping) or block.get("type") != "cache_edits":
                continue
            path = f"messages.{m}.content.{c}"
            if not beta_enabled:
                raise RequestValidationError(
                    f"{path}: cache_edits blocks require the `anthropic-beta: {CACHE_EDITS_BETA}` header",
                    path=path,
                )
            if message.get("role") != "user":
                raise RequestValidationError(
                    f"{path}: cache_edits blocks may only appear in user messages", path=path
                )
            for name in _edits_of(block, path):
                if name not in present and name not in known:
                    raise RequestValidationError(
                        f"{path}: cache_reference {name!r} does not match any tool_result seen so far",
                        path=path,
                    )
                deleted.add(name)
    return deleted


def backend_messages(body: Mapping[str, Any], deleted: set[str]) -> list[dict[str, Any]]:
    """The messages the backend sees: no cache_edits blocks, no deleted tool_results."""
    out: list[dict[str, Any]] = []
    for message in body.get("messages") or ():
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = [
                b
                for b in content
                if isinstance(b, Mapping)
                and b.get("type") != "cache_edits"
                and not (b.get("type") == "tool_result" and b.get("cache_reference") in deleted)
            ]
        out.append({**message, "content": content})
    return out
