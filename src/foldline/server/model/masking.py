"""The 4D additive attention mask that implements cache_edits deletions (R3.2.6).

A deleted span stays in the K/V cache at its original positions (nothing after it is shifted or
recomputed); it is hidden from every query at or after the hide's `from_row` by adding the dtype's
most negative value to those columns, at every layer, because the same mask goes to every layer.
Queries before `from_row` are the ones computed before the edit (their K/V are reused as cached).

Invariant: no row is ever fully masked. Every query keeps its own position (a query is never inside
a span hidden from it, since `from_row` is at or after the span's end), so softmax never sees only
`-inf`, which is where SDPA produces NaN; `additive_mask` enforces it rather than trusting callers.
Using `finfo.min` rather than `-inf` also keeps the eager path's weights exactly 0, not NaN.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

__all__ = ["Hide", "additive_mask"]


@dataclass(frozen=True, slots=True, order=True)
class Hide:
    """Columns [start, end) are invisible to every query at absolute position >= from_row."""

    start: int
    end: int
    from_row: int


def additive_mask(
    query_start: int, query_len: int, kv_len: int, hides: Iterable[Hide], dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The (1, 1, query_len, kv_len) mask for queries at positions query_start.. over keys 0..kv_len.

    0 where a query may attend, `finfo(dtype).min` where it may not: causal, plus every hide.
    """
    rows = torch.arange(query_start, query_start + query_len).unsqueeze(1)
    cols = torch.arange(kv_len).unsqueeze(0)
    blocked = cols > rows
    for hide in hides:
        in_span = (cols >= hide.start) & (cols < hide.end)
        blocked |= in_span & (rows >= hide.from_row)
    # The guard: a query always sees itself, so no softmax row is all masked.
    own = cols == rows
    blocked &= ~own
    mask = torch.zeros((query_len, kv_len), dtype=dtype)
    mask.masked_fill_(blocked, torch.finfo(dtype).min)
    return mask[None, None]
