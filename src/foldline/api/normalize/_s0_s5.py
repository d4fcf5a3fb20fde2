"""Steps S0 .. S5 of design.md §4.1: filter, attachments, failed media, merge ids, merge users, snip tags.

```
S0 filter -> S1 attachments -> S2 media -> S3 merge ids -> S4 merge users -> S5 snip tags
```

Each step is a pure function of the messages and `NormalizeOptions`; text the user typed is never
dropped.
"""

from __future__ import annotations

import re

from foldline._types import Block
from foldline.api.normalize._base import (
    NormalizeOptions,
    _Msg,
    _new_msg,
)
from foldline.timeline import AssistantEntry, UserEntry, is_api_visible, short_id

_USERS = frozenset({"user"})


def s0_filter(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S0: drop virtual, progress, non-`local_command` system and sidechain entries (R1.5).

    Synthetic API-error entries are turned into `error` markers that S2 reads and removes.
    """
    out: list[_Msg] = []
    for m in msgs:
        e = m.entry
        # `is_api_visible` inline for the two kinds nearly every entry is (a call per entry cost more
        # than the test); any other kind, a subclass included, asks it.
        if type(e) is UserEntry:
            visible = not (e.is_virtual or e.is_sidechain)
        elif type(e) is AssistantEntry:
            visible = not (e.is_virtual or e.is_sidechain or e.is_api_error_message)
        else:
            visible = e is None or is_api_visible(e)
        if visible:
            out.append(m)
        elif isinstance(e, AssistantEntry) and e.is_api_error_message and not e.is_virtual:
            out.append(_Msg("error", [], m.uuids, entry=e, error_text=m.error_text))
    return out


def s1_reorder_attachments(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S1: move each hook attachment right after the message holding its tool call's result."""
    if not any(m.attach_to for m in msgs):
        return msgs  # nothing to move: skip indexing every result (the common case, and O(session))
    result_at: dict[str, int] = {}
    for i, m in enumerate(msgs):
        if m.role == "user":
            for b in m.content:
                if b.get("type") == "tool_result":
                    result_at.setdefault(str(b.get("tool_use_id")), i)
    moved: dict[int, list[_Msg]] = {}
    keep: list[tuple[int, _Msg]] = []
    for i, m in enumerate(msgs):
        target = result_at.get(m.attach_to) if m.attach_to else None
        if target is not None and target != i:
            moved.setdefault(target, []).append(m)
        else:
            keep.append((i, m))
    if not moved:
        return msgs
    out: list[_Msg] = []
    for i, m in keep:
        out.append(m)
        out.extend(moved.pop(i, ()))
    return out


_MEDIA_ERRORS: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"request[ _]too[ _]large|exceeds the maximum (allowed number of bytes|size)|\b413\b", re.I),
     frozenset({"document", "image"})),
    (re.compile(r"too (many images|much media)", re.I), frozenset({"document", "image"})),
    (re.compile(r"pdf", re.I), frozenset({"document"})),
    (re.compile(r"image", re.I), frozenset({"image"})),
)  # fmt: skip
"""API error texts (A29-A33, A41) -> the block types to strip; first match wins."""


def media_types_to_strip(error_text: str) -> frozenset[str]:
    """The block types an API error about media asks us to strip (empty when it is not about media)."""
    for pattern, kinds in _MEDIA_ERRORS:
        if pattern.search(error_text):
            return kinds
    return frozenset()


def _strip_media(blocks: list[Block], kinds: frozenset[str]) -> list[Block]:
    out: list[Block] = []
    for b in blocks:
        if b.get("type") in kinds:
            continue
        inner = b.get("content")
        if b.get("type") == "tool_result" and isinstance(inner, list):
            kept = _strip_media(inner, kinds)
            if len(kept) != len(inner):
                b = b | {"content": kept}
        out.append(b)
    return out


def s2_strip_failed_media(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S2: after the API rejected media, strip it from the nearest injected (`is_meta`) user message.

    The walk back from each error marker stops at an assistant message or at a user message with
    typed text: the user's own input is never touched. A message left with nothing is dropped.
    """
    markers = [i for i, m in enumerate(msgs) if m.role == "error"]
    if not markers:
        return msgs  # no API error in the session (the usual case): one scan, no copy
    out = list(msgs)
    emptied: set[int] = set()
    for i in markers:
        kinds = media_types_to_strip(msgs[i].error_text)
        if not kinds:
            continue
        for j in range(i - 1, -1, -1):
            prev = out[j]
            if prev.role == "error":
                continue
            if prev.role != "user" or not prev.is_meta:
                break
            stripped = _strip_media(prev.content, kinds)
            if stripped != prev.content:
                out[j] = prev.with_content(stripped)
                if not stripped:
                    emptied.add(j)
                break
    return [m for i, m in enumerate(out) if m.role != "error" and i not in emptied]


def _merge(a: _Msg, b: _Msg) -> _Msg:
    # Built directly: `dataclasses.replace` costs several times more and runs once per merged piece.
    return _new_msg(
        _Msg,
        (
            a.role,
            [*a.content, *b.content],
            a.uuids + b.uuids,
            a.msg_id,
            a.is_meta and b.is_meta,
            None,
            a.attach_to,
            a.error_text,
        ),
    )


_IDENTITY_KEY = {"tool_use": "id", "thinking": "signature", "redacted_thinking": "data"}


def _identity(block: Block) -> tuple[str, str] | None:
    """What makes a block the same block when a piece is written twice (tool id, signature)."""
    kind = block.get("type")
    key = _IDENTITY_KEY.get(str(kind))
    return (str(kind), str(block.get(key))) if key else None


def s3_merge_assistant_pieces(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S3: one streamed reply written as several entries (one per block) becomes one message.

    Pieces merge across interleaved user messages (streaming tool execution writes each tool_result
    between two tool_use pieces); those user messages then follow the merged reply, where S4 joins
    them. A piece already merged (a replayed line, same uuid or not) is not added twice.
    """
    out: list[_Msg] = []
    open_at: int | None = None
    # The open reply is kept as parts (content, uuids, block identities), made when the first piece
    # joins it, and built once when the next reply opens: merging piece by piece would copy the
    # reply so far for every piece.
    content: list[Block] = []
    uuids: list[str] = []
    known_uuids: set[str] = set()
    known: set[tuple[str, str] | None] = set()  # identities of the open reply's blocks, None left out
    merged, meta = False, True

    def close() -> None:
        if merged and open_at is not None:
            first = out[open_at]
            out[open_at] = _new_msg(_Msg, (
                first.role, content, tuple(uuids), first.msg_id, meta, None, first.attach_to,
                first.error_text,
            ))  # fmt: skip

    for m in msgs:
        if m.role != "assistant":
            out.append(m)
            continue
        if open_at is not None and m.msg_id and out[open_at].msg_id == m.msg_id:
            if not merged:  # the first piece to join the open reply: its parts are made now
                first = out[open_at]
                content, uuids, known_uuids = list(first.content), list(first.uuids), set(first.uuids)
                known = {_identity(b) for b in first.content}
                known.discard(None)
                meta = first.is_meta
            if not known_uuids.issuperset(m.uuids):
                if len(m.content) == 1 and len(m.uuids) == 1:
                    # The usual piece, one block from one entry (a reply streamed block by block):
                    # no lists or set unions built for it.
                    block = m.content[0]
                    kind = str(block.get("type"))
                    key = _IDENTITY_KEY.get(kind)  # `_identity`, inline: this runs for every piece
                    if key is None:
                        content.append(block)
                    elif (ident := (kind, str(block.get(key)))) not in known:
                        content.append(block)
                        known.add(ident)
                    uuids.append(m.uuids[0])
                    known_uuids.add(m.uuids[0])
                    merged, meta = True, meta and m.is_meta
                    continue
                ids = [_identity(b) for b in m.content]
                if known.isdisjoint(ids):
                    content.extend(m.content)  # the usual piece: nothing in it was merged before
                else:
                    content.extend(b for b, i in zip(m.content, ids, strict=True) if i not in known)
                known.update(ids)
                known.discard(None)  # blocks without an identity are never duplicates
                uuids.extend(m.uuids)
                known_uuids.update(m.uuids)
                merged, meta = True, meta and m.is_meta
            continue
        close()
        out.append(m)
        open_at = len(out) - 1
        merged = False  # its parts are made only if a piece joins it (a reply joined at lift has none)
    close()
    return out


def _merge_adjacent(msgs: list[_Msg], roles: frozenset[str]) -> list[_Msg]:
    out: list[_Msg] = []
    for m in msgs:
        if out and out[-1].role == m.role and m.role in roles:
            out[-1] = _merge(out[-1], m)
        else:
            out.append(m)
    return out


def s4_merge_users(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S4: join adjacent user messages (Bedrock rejects consecutive user turns, A3)."""
    return _merge_adjacent(msgs, _USERS)


def s5_snip_tags(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S5: append `[id:<short>]` for each entry of every user message, as one final text block (R3.1.1)."""
    if not opts.snip_enabled:
        return msgs
    out: list[_Msg] = []
    for m in msgs:
        if m.role == "user" and m.uuids:
            tag = "[id:" + "] [id:".join(map(short_id, m.uuids)) + "]"  # no comprehension per message
            m = m.with_content([*m.content, {"type": "text", "text": tag}])
        out.append(m)
    return out
