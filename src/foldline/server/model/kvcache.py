"""The prefix K/V cache of the transformers backend: real attention state, reused across requests.

An entry is the per-layer keys and values of a prompt's first `length` tokens, stored when a request
with a `cache_control` breakpoint at that token position was served. It is keyed by a hash of those
token ids plus the hides (cache_edits masks) its rows were computed under: K/V computed with a span
hidden must never serve a request that shows that span again.

Rules, as the scripted server's prompt cache (docs/server.md, "Prompt caching"):

- TTL `5m` or `1h` per breakpoint, on an injectable clock; reading an entry refreshes its TTL.
- Lookup takes the longest live entry whose tokens are a prefix of the request's and whose every
  hide is of a span the request still deletes.
- LRU eviction under a byte budget (the tensors' own sizes); an entry larger than the whole budget
  is not stored.

Entries own their tensors (sliced and cloned at store time), so a forward pass over a hit, which
appends to a fresh cache object, never changes a stored entry.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

import torch

from foldline.server.caching import TTL_SECONDS
from foldline.server.model.masking import Hide

__all__ = ["KVEntry", "PrefixKVCache", "prefix_key"]

LayerKV = tuple[torch.Tensor, torch.Tensor]


def prefix_key(token_ids: Sequence[int], hides: Collection[Hide] = ()) -> str:
    """The key of a token prefix computed under `hides`."""
    digest = hashlib.sha256(b",".join(str(t).encode() for t in token_ids))
    for hide in sorted(hides):
        digest.update(f"|{hide.start}:{hide.end}:{hide.from_row}".encode())
    return digest.hexdigest()


@dataclass(slots=True)
class KVEntry:
    """The K/V of a token prefix: one (keys, values) pair per layer, each (batch, heads, length, dim)."""

    token_ids: tuple[int, ...]
    layers: list[LayerKV]
    hides: frozenset[Hide]
    ttl: str
    expires_at: float

    @property
    def length(self) -> int:
        return len(self.token_ids)

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.layers)


@dataclass
class PrefixKVCache:
    """Token-prefix hash -> K/V entry, LRU-ordered, under `budget_bytes`."""

    budget_bytes: int = 2 * 1024**3
    clock: Callable[[], float] = time.monotonic
    _entries: OrderedDict[str, KVEntry] = field(default_factory=OrderedDict)
    _bytes: int = 0

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes held by every entry's tensors."""
        return self._bytes

    def entries(self) -> list[KVEntry]:
        """Live and expired entries, least recently used first (for tests and stats)."""
        return list(self._entries.values())

    def _drop(self, key: str) -> None:
        self._bytes -= self._entries.pop(key).nbytes

    def lookup(self, token_ids: Sequence[int], deleted: Collection[tuple[int, int]] = ()) -> KVEntry | None:
        """The longest live entry that prefixes `token_ids` and hides only spans in `deleted`.

        A hit becomes the most recently used entry and its TTL restarts.
        """
        now = self.clock()
        for key in [k for k, e in self._entries.items() if e.expires_at <= now]:
            self._drop(key)
        best: tuple[str, KVEntry] | None = None
        prompt = tuple(token_ids)
        for key, entry in self._entries.items():
            if best is not None and entry.length <= best[1].length:
                continue
            if entry.length > len(prompt) or prompt[: entry.length] != entry.token_ids:
                continue
            if all((h.start, h.end) in deleted for h in entry.hides):
                best = (key, entry)
        if best is None:
            return None
        key, entry = best
        entry.expires_at = now + TTL_SECONDS[entry.ttl]
        self._entries.move_to_end(key)
        return entry

    def store(
        self, token_ids: Sequence[int], layers: Sequence[LayerKV], hides: Collection[Hide], ttl: str
    ) -> bool:
        """Store the K/V of `token_ids` (the tensors may be longer; they are cut and copied).

        Returns whether it was stored (an entry over the whole budget is not). Storing an existing
        key refreshes it, keeping the longer of the two TTLs.
        """
        n = len(token_ids)
        owned = [(k[..., :n, :].clone(), v[..., :n, :].clone()) for k, v in layers]
        key = prefix_key(token_ids, hides)
        entry = KVEntry(tuple(token_ids), owned, frozenset(hides), ttl, self.clock() + TTL_SECONDS[ttl])
        if key in self._entries:
            old = self._entries[key]
            if TTL_SECONDS[old.ttl] > TTL_SECONDS[ttl]:
                entry.ttl, entry.expires_at = old.ttl, self.clock() + TTL_SECONDS[old.ttl]
            self._drop(key)
        if entry.nbytes > self.budget_bytes:
            return False
        while self._entries and self._bytes + entry.nbytes > self.budget_bytes:
            self._drop(next(iter(self._entries)))
        self._entries[key] = entry
        self._bytes += entry.nbytes
        return True
