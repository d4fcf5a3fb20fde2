"""API rounds: where a conversation can be cut without separating a tool call from its result.

An API round is one assistant reply (every streamed piece sharing its message id) plus the user turn
that follows it: the reply's tool results, and any prompt typed after them. Entries before the first
reply form round 0. A tool result always follows its call inside one round, so any cut between rounds
keeps every pair whole (design.md F9).

Three cuts are made here, all pure functions of the entries:
- `drop_oldest_rounds`: the prompt-too-long retry of a summary request (R3.4.5) drops the oldest
  rounds covering the gap the API named, else a share of them (at least one, never all). Earlier
  summaries in the dropped rounds are kept: they hold what older compactions saved.
- `shrink_oversized`: the same retry first cuts any single tool result or text block too large to
  summarize to its head, so an oversized newest round (which no round drop removes) still fits.
- `recent_tail_start`: the session-memory compaction (R3.4.10) keeps the latest rounds verbatim,
  between a minimum and a maximum of tokens and with at least a few text messages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from foldline._types import Block
from foldline.projection import is_summary
from foldline.timeline import AssistantEntry, Entry, UserEntry, UserMessage, new_uuid, now_iso
from foldline.tokens import estimate_entry

__all__ = [
    "PTL_MARKER",
    "api_rounds",
    "drop_oldest_rounds",
    "recent_tail_start",
    "round_starts",
    "rounds_to_drop",
    "shrink_oversized",
]

PTL_MARKER = "[Earlier messages were left out so that this summary request fits the context window]"
"""The user message that opens a summary request whose oldest rounds were dropped (the API wants a
user message first)."""


def round_starts(entries: Sequence[Entry]) -> list[int]:
    """Indices where a round starts: 0, and each assistant entry with a new message id."""
    starts = [0] if entries else []
    previous: str | None = None
    for i, entry in enumerate(entries):
        if isinstance(entry, AssistantEntry):
            if entry.message.id != previous and i > 0:
                starts.append(i)
            previous = entry.message.id
    return starts


def api_rounds(entries: Sequence[Entry]) -> list[list[Entry]]:
    """The entries split into API rounds, oldest first."""
    starts = round_starts(entries)
    ends = [*starts[1:], len(entries)]
    return [list(entries[a:b]) for a, b in zip(starts, ends, strict=True)]


def rounds_to_drop(sizes: Sequence[int], gap: int | None, fraction: float) -> int:
    """How many of the oldest rounds to drop: enough to cover `gap`, else `fraction` of them (>= 1).

    Never all of them: at most `len(sizes) - 1`, so 0 when there is a single round (nothing to drop).
    """
    if len(sizes) < 2:
        return 0
    if gap is None or gap <= 0:
        count = max(1, math.floor(fraction * len(sizes)))
    else:
        covered, count = 0, 0
        for size in sizes:
            covered += size
            count += 1
            if covered >= gap:
                break
    return min(count, len(sizes) - 1)


def drop_oldest_rounds(entries: Sequence[Entry], gap: int | None, fraction: float) -> tuple[list[Entry], int]:
    """`entries` without their oldest rounds (R3.4.5), and how many rounds went (0: nothing to drop).

    Round sizes are the entries' token estimates. When the first kept entry is a reply, a short user
    message (`PTL_MARKER`) opens the result, as the API requires. Summaries in the dropped rounds
    (`projection.is_summary`) are kept in front: they are not counted toward the gap.
    """
    rounds = api_rounds(entries)
    # Summaries are the older conversation already condensed: dropping one loses facts that exist
    # nowhere else, so they stay (and their size is not counted as droppable).
    count = rounds_to_drop(
        [sum(estimate_entry(e) for e in r if not is_summary(e)) for r in rounds], gap, fraction
    )
    if count == 0:
        return list(entries), 0
    summaries = [e for r in rounds[:count] for e in r if is_summary(e)]
    kept = [e for r in rounds[count:] for e in r]
    if kept and isinstance(kept[0], AssistantEntry):
        marker = UserEntry(
            uuid=new_uuid(),
            timestamp=now_iso(),
            session_id=kept[0].session_id,
            is_meta=True,
            message=UserMessage(content=PTL_MARKER),
        )
        kept.insert(0, marker)
    return [*summaries, *kept], count


def _cut(text: str, max_chars: int) -> str:
    return (
        f"{text[:max_chars]}\n… [{len(text) - max_chars:,} more characters left out of this summary request]"
    )


def _shrunk_block(block: Block, max_chars: int, text_max_chars: int | None = None) -> Block | None:
    """`block` with its oversized text cut to `max_chars` (a text block of the conversation itself to
    `text_max_chars`, when given), or None when nothing in it is oversized."""
    text_cap = max_chars if text_max_chars is None else text_max_chars
    if block.get("type") == "text" and len(str(block.get("text", ""))) > text_cap:
        return {**block, "text": _cut(str(block["text"]), text_cap)}
    if block.get("type") != "tool_result":
        return None
    content = block.get("content")
    if isinstance(content, str):
        return {**block, "content": _cut(content, max_chars)} if len(content) > max_chars else None
    if not isinstance(content, list):
        return None
    inner = [_shrunk_block(b, max_chars) if isinstance(b, dict) else None for b in content]
    if all(b is None for b in inner):
        return None
    return {**block, "content": [new or old for new, old in zip(inner, content, strict=True)]}


def shrink_oversized(
    entries: Sequence[Entry], max_chars: int, *, text_max_chars: int | None = None
) -> tuple[list[Entry], int]:
    """`entries` with every text block and tool result over `max_chars` cut to its head (R3.4.5).

    `text_max_chars` (default `max_chars`) is the cut for the conversation's own text (prompts,
    replies), so tool results can be held to a window's room while a prompt keeps its own cap.
    Returns the entries and how many blocks were cut (0: the entries are returned unchanged). Only
    the summary request sees the cut copies; the timeline keeps every byte.
    """
    out: list[Entry] = []
    cut = 0
    for entry in entries:
        if isinstance(entry, UserEntry | AssistantEntry) and isinstance(entry.message.content, list):
            blocks = [_shrunk_block(b, max_chars, text_max_chars) for b in entry.message.content]
            if any(b is not None for b in blocks):
                cut += sum(b is not None for b in blocks)
                content = [new or old for new, old in zip(blocks, entry.message.content, strict=True)]
                message = msgspec.structs.replace(entry.message, content=content)
                entry = msgspec.structs.replace(entry, message=message)
        elif isinstance(entry, UserEntry) and isinstance(entry.message.content, str):
            text_cap = max_chars if text_max_chars is None else text_max_chars
            if len(entry.message.content) > text_cap:
                cut += 1
                message = msgspec.structs.replace(
                    entry.message, content=_cut(entry.message.content, text_cap)
                )
                entry = msgspec.structs.replace(entry, message=message)
        out.append(entry)
    return out, cut


def _is_text_message(entry: Entry) -> bool:
    if not isinstance(entry, UserEntry | AssistantEntry):
        return False
    content = entry.message.content
    if isinstance(content, str):
        return bool(content.strip())
    return any(b.get("type") == "text" and str(b.get("text", "")).strip() for b in content)


def recent_tail_start(
    entries: Sequence[Entry],
    first_unsummarized: int,
    *,
    min_tokens: int,
    max_tokens: int,
    min_text_messages: int,
) -> int | None:
    """Where the verbatim tail kept after a session-memory summary starts (R3.4.10), or None.

    The tail starts at a round boundary at or before `first_unsummarized` (so what the memory does
    not cover is always kept), then grows by whole older rounds until it holds `min_tokens` and
    `min_text_messages`, without passing `max_tokens`. None when the uncovered part alone is over
    `max_tokens` (the memory is too far behind) or the tail would be the whole conversation.
    """
    starts = [s for s in round_starts(entries) if s <= first_unsummarized]
    if not starts:
        return None
    start = starts.pop()
    tokens = sum(estimate_entry(e) for e in entries[start:])
    texts = sum(1 for e in entries[start:] if _is_text_message(e))
    if tokens > max_tokens:
        return None
    while starts and (tokens < min_tokens or texts < min_text_messages):
        earlier = starts[-1]
        more = sum(estimate_entry(e) for e in entries[earlier:start])
        if tokens + more > max_tokens:
            break
        texts += sum(1 for e in entries[earlier:start] if _is_text_message(e))
        start, tokens = starts.pop(), tokens + more
    return start if start > 0 else None
