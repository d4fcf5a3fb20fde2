"""Step S6 of design.md §4.1, edge cleanup: S6.a .. S6.g, then S6.h tool pairing.

After it, no assistant message ends with thinking or is empty, there is no whitespace-only text,
and every `tool_use` is paired with a `tool_result` at the start of the next message.
"""

from __future__ import annotations

import hashlib
import re

from foldline._types import Block
from foldline.api.normalize._base import (
    _BOTH_ROLES,
    _REMINDER_PREFIX,
    _THINKING,
    EMPTY_ASSISTANT_TEXT,
    EMPTY_ERROR_TEXT,
    INTERRUPTED_RESULT_TEXT,
    NormalizeOptions,
    _Msg,
)
from foldline.api.normalize._s0_s5 import _merge_adjacent

_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_GOOD_ID = _TOOL_ID.match
"""Callers test `type(raw) is str and _GOOD_ID(raw)` inline before calling `_safe_tool_id`: the call
cost more than the test, and nearly every id is good (each one is seen three times per cold build)."""
_TOOL_BLOCKS = ("tool_result", "tool_use")  # a tuple: a malformed (unhashable) type must not raise


def _is_thinking(b: Block) -> bool:
    return b.get("type") in _THINKING


def _is_blank_text(b: Block) -> bool:
    text = b.get("text")
    return b.get("type") == "text" and (not isinstance(text, str) or not text.strip())


def s6a_drop_orphan_thinking(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S6.a: drop thinking-only assistant messages whose reply has no other content anywhere.

    Two passes: first the ids that have any non-thinking content, then the drop. These are streams
    interrupted right after thinking (A24).
    """
    has_content: set[str] = set()
    orphans = False
    for m in msgs:
        if m.role == "assistant":
            for b in m.content:
                if b.get("type") not in _THINKING:
                    has_content.add(m.msg_id)
                    break
            else:
                orphans = orphans or bool(m.content)
    if not orphans:
        return msgs  # no thinking-only message at all (the usual case): nothing to drop
    return [
        m
        for m in msgs
        if not (
            m.role == "assistant"
            and m.content
            and all(_is_thinking(b) for b in m.content)
            and m.msg_id not in has_content
        )
    ]


def s6b_strip_trailing_thinking(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S6.b: an assistant message may not end with a thinking block (A24).

    The rule bites on the final assistant message; any other one ending in thinking is a fragment
    of the same kind (an interrupted stream), so it is treated alike.
    """
    out: list[_Msg] = []
    for m in msgs:
        if m.role == "assistant" and m.content and _is_thinking(m.content[-1]):
            content = list(m.content)
            while content and _is_thinking(content[-1]):
                content.pop()
            m = m.with_content(content)
        out.append(m)
    return out


def s6c_drop_whitespace(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S6.c: drop assistant messages made only of whitespace text, and whitespace-only text blocks.

    Runs after S6.b so "thinking + whitespace" is caught. Whitespace-only text is rejected anywhere
    (A6, A7); a user message left empty by it (or empty already) had nothing typed in it.
    """
    out: list[_Msg] = []
    for m in msgs:
        # The type test first spares a call per non-text block, and a plain loop a generator per
        # message (this runs over every block).
        for b in m.content:
            if b.get("type") == "text" and _is_blank_text(b):
                break
        else:
            if m.content or m.role == "assistant":
                out.append(m)
            continue
        content = [b for b in m.content if not _is_blank_text(b)]
        if m.role == "assistant":
            while content and _is_thinking(content[-1]):
                content.pop()  # the removed text may have hidden a trailing thinking block (S6.b)
            if not content:
                continue
        if content:
            out.append(m.with_content(content))
    return out


def s6d_fill_empty_assistant(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S6.d: give an empty non-final assistant message placeholder text (A5)."""
    last = len(msgs) - 1
    return [
        m.with_content([{"type": "text", "text": EMPTY_ASSISTANT_TEXT}])
        if m.role == "assistant" and not m.content and i != last
        else m
        for i, m in enumerate(msgs)
    ]


def s6e_merge_adjacent(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S6.e: merge adjacent same-role messages again; the filters above may have made them adjacent."""
    return _merge_adjacent(msgs, _BOTH_ROLES)


def _fold_into(result: Block, texts: list[Block]) -> Block:
    content = result.get("content")
    base: list[Block]
    if isinstance(content, list):
        base = list(content)
    else:
        base = [{"type": "text", "text": content}] if isinstance(content, str) and content.strip() else []
    return result | {"content": [*base, *texts]}


def _is_reminder(b: Block) -> bool:
    return b.get("type") == "text" and str(b.get("text", "")).lstrip().startswith(_REMINDER_PREFIX)


def s6f_fold_reminders(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S6.f: fold `<system-reminder>` text beside tool_results into the nearest preceding result.

    A reminder before the first result goes into the first one. Text among results would otherwise
    sit where the API wants only results (A11).
    """
    out: list[_Msg] = []
    for m in msgs:
        if m.role != "user":
            out.append(m)
            continue
        for b in m.content:  # a plain loop, not a generator per message
            if b.get("type") == "text" and _is_reminder(b):
                break
        else:
            out.append(m)  # checked first: most messages hold no reminder, so skip indexing results
            continue
        results = [i for i, b in enumerate(m.content) if b.get("type") == "tool_result"]
        if not results:
            out.append(m)
            continue
        folds: dict[int, list[Block]] = {}
        for i, b in enumerate(m.content):
            if _is_reminder(b):
                target = max((r for r in results if r < i), default=results[0])
                folds.setdefault(target, []).append(b)
        content = [
            _fold_into(b, folds[i]) if i in folds else b
            for i, b in enumerate(m.content)
            if not _is_reminder(b)
        ]
        out.append(m.with_content(content))
    return out


def _clean_result(block: Block) -> Block:
    content = block.get("content")
    is_error = block.get("is_error") is True
    if isinstance(content, list):
        kept = [b for b in content if b.get("text") != "" and (not is_error or b.get("type") == "text")]
        if len(kept) != len(content):
            block = block | {"content": kept}
            content = kept
    if is_error and not (content.strip() if isinstance(content, str) else content):
        block = block | {"content": EMPTY_ERROR_TEXT}
    return block


def s6g_text_only_errors(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S6.g: `is_error` results keep only text (A16) and are never empty (A17).

    Empty text inside any result's content goes too (A6; whitespace-only output is legal there).
    """
    out: list[_Msg] = []
    for m in msgs:
        if m.role == "user":
            changed: list[Block] | None = None
            for i, b in enumerate(m.content):
                if b.get("type") == "tool_result" and (c := _clean_result(b)) is not b:
                    if changed is None:
                        changed = list(m.content)  # copied only when a result changed: most are clean
                    changed[i] = c
            if changed is not None:
                m = m.with_content(changed)
        out.append(m)
    return out


EDGE_STEP_NAMES = ("S6.a", "S6.b", "S6.c", "S6.d", "S6.e", "S6.f", "S6.g")
"""The steps `edges_clean` vouches for, in pipeline order."""


def edges_clean(msgs: list[_Msg]) -> bool:
    """Whether S6.a-S6.g would each leave `msgs` as they are, proved in one pass (conservatively).

    Each of those steps scans the whole session; on a session foldline wrote itself none of them
    changes anything, so one combined scan that finds nothing for any of them lets the incremental
    path skip all seven (a cold build's first request scans tens of thousands of messages). A False
    only means "run the steps": it may be said of messages they would leave alone too.
    """
    last = len(msgs) - 1
    previous = ""
    for i, m in enumerate(msgs):
        if m.role == previous:
            return False  # S6.e would merge them
        previous = m.role
        if m.role == "assistant":
            if m.content and not _reply_clean(m.content):
                return False
            if not m.content and i != last:
                return False  # S6.d
        elif not m.content or not _user_clean(m.content):
            return False  # S6.c drops an empty user message
    return True


def _reply_clean(content: list[Block]) -> bool:
    if content[-1].get("type") in _THINKING:
        return False  # S6.b, and S6.a for a reply that is only thinking
    for b in content:
        if b.get("type") == "text":
            text = b.get("text")
            if not isinstance(text, str) or not text or text.isspace():
                return False  # S6.c (`isspace` tests what `strip` would, without copying the text)
    return True


def _user_clean(content: list[Block]) -> bool:
    for b in content:
        kind = b.get("type")
        if kind == "text":
            text = b.get("text")
            if not isinstance(text, str) or not text or text.isspace():
                return False  # S6.c
            if text.lstrip().startswith(_REMINDER_PREFIX):
                return False  # S6.f
        elif kind == "tool_result" and (b.get("is_error") is True or not isinstance(b.get("content"), str)):
            # `_clean_result` leaves a plain result with text content alone: asked only otherwise.
            if _clean_result(b) is not b:
                return False  # S6.g
    return True


def _thinking_first(content: list[Block]) -> list[Block]:
    """Move the first run of thinking blocks to the front, unchanged and in order (A20)."""
    # One scan for the first thinking block (this runs for every assistant message), as a plain loop:
    # a generator costs more to set up than the scan, which usually stops at the first block.
    start = 0
    for i, b in enumerate(content):
        if b.get("type") in _THINKING:
            start = i
            break
    if start == 0:
        return content  # empty, thinking already first, or no thinking at all
    end = start
    while end < len(content) and _is_thinking(content[end]):
        end += 1
    return [*content[start:end], *content[:start], *content[end:]]


def _safe_tool_id(raw: object) -> str:
    """A tool id the API accepts (A14); a bad one maps to a stable derived id."""
    text = raw if isinstance(raw, str) else ""
    if _TOOL_ID.match(text):
        return text
    return "toolu_fl" + hashlib.sha256(repr(raw).encode()).hexdigest()[:24]


def _unique_uses(source: list[Block], seen: set[str], ids: list[str]) -> list[Block] | None:
    """`source` without tool_results and repeated tool_use ids, bad ids mended; None if it needs no change.

    Adds the ids it keeps to `seen` and `ids`. The copy is made at the first block that changes or
    goes: most replies keep every block.
    """
    copy: list[Block] | None = None
    for k, b in enumerate(source):
        kind = b.get("type")
        if kind == "tool_result":
            if copy is None:
                copy = source[:k]
            continue
        if kind == "tool_use":
            raw = b.get("id")
            tid = raw if type(raw) is str and _GOOD_ID(raw) else _safe_tool_id(raw)
            if tid in seen:
                if copy is None:
                    copy = source[:k]
                continue
            seen.add(tid)
            ids.append(tid)
            if tid != raw:
                if copy is None:
                    copy = source[:k]
                b = b | {"id": tid}
        if copy is not None:
            copy.append(b)
    return copy


def _dedupe_tool_uses(msgs: list[_Msg]) -> tuple[list[_Msg], list[list[str]], dict[str, Block]]:
    """Assistant content with thinking first, unique well-formed tool_use ids; the ids per message;
    and the first result recorded after each tool_use, by id (orphans and duplicates not claimed).

    One pass for both: a result can only be claimed by a call before it, and the calls kept so far
    are exactly the ids `seen` holds when the pass reaches the result.
    """
    seen: set[str] = set()
    claimed: dict[str, Block] = {}
    out: list[_Msg] = []
    uses: list[list[str]] = []
    for m in msgs:
        if m.role != "assistant":
            if m.role == "user":
                _claim(m.content, seen, claimed)
            out.append(m)
            uses.append([])
            continue
        ids: list[str] = []
        source = _thinking_first(m.content)
        copy = _unique_uses(source, seen, ids)
        content = source if copy is None else copy
        if content and _is_thinking(content[-1]):
            content = list(content)
            while content and _is_thinking(content[-1]):
                content.pop()  # a dropped duplicate may have been all that followed the thinking
        if not content and m.content:
            continue  # only replayed tool calls: the originals are already sent
        if content is not m.content and content != m.content:
            m = m.with_content(content)
        out.append(m)
        uses.append(ids)
    return out, uses, claimed


def _claim(content: list[Block], declared: set[str], claimed: dict[str, Block]) -> None:
    """Claim each result in `content` whose call was declared before it and is not yet answered."""
    for b in content:
        if b.get("type") == "tool_result":
            raw = b.get("tool_use_id")
            tid = raw if type(raw) is str and _GOOD_ID(raw) else _safe_tool_id(raw)
            if tid in declared and tid not in claimed:
                claimed[tid] = b if tid == raw else b | {"tool_use_id": tid}


def _interrupted(tool_use_id: str) -> Block:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "is_error": True,
        "content": INTERRUPTED_RESULT_TEXT,
    }


def _answered_in_place(answers: list[Block], content: list[Block]) -> bool:
    """Whether `content` starts with exactly `answers` and holds no other tool block after them."""
    # Plain loops, not `all`/`any` over generators: this runs for every user message that answers.
    for a, b in zip(answers, content, strict=False):
        if a is not b:
            return False
    for b in content[len(answers) :]:
        if b.get("type") in _TOOL_BLOCKS:
            return False
    return True


def s6h_pair_tools(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S6.h: every tool_use is answered at the start of the next user message, in tool_use order.

    Missing results are synthesized as `is_error` "interrupted" results; results with no tool_use
    before them are dropped; tool_use ids are made unique; thinking comes first in its message
    (A10-A14, A20). A user message left empty by moving results away is dropped.
    """
    msgs, uses, claimed = _dedupe_tool_uses(msgs)
    out: list[_Msg] = []
    pending: list[str] = []
    for m, ids in zip(msgs, uses, strict=True):
        if m.role != "user":
            if pending:
                out.append(_Msg("user", [claimed.get(t) or _interrupted(t) for t in pending], ()))
            out.append(m)
            pending = ids
            continue
        content = m.content
        if pending:
            answers = [claimed.get(t) or _interrupted(t) for t in pending]
            n = len(answers)
            # The usual case, the answers already first and in order with no other tool block after
            # them, keeps the message as it is without building its content again.
            if len(content) >= n and _answered_in_place(answers, content):
                out.append(m)
            else:
                out.append(
                    m.with_content([*answers, *(b for b in content if b.get("type") not in _TOOL_BLOCKS)])
                )
            pending = ids
            continue
        rest = [b for b in content if b.get("type") not in _TOOL_BLOCKS]
        if len(rest) != len(content):
            m = m.with_content(rest)
        if m.content:
            out.append(m)
        pending = ids
    if pending:
        out.append(_Msg("user", [claimed.get(t) or _interrupted(t) for t in pending], ()))
    return out
