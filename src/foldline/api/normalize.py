"""`normalize_messages_for_api`: projected timeline in, valid Messages API messages out (design.md §4.1).

The input is `project_view(records)` (entries after snip, collapse and compact projection). The
output is a list of `{role, content}` messages the strict validator accepts. The work is a fixed
pipeline of small pure steps, one per step of design.md §4.1, composed in `STEPS` in the documented order:

```
lift entries -> S0 filter -> S1 attachments -> S2 media -> S3 merge ids -> S4 merge users
  -> S5 snip tags -> S6.a .. S6.g edge cleanup -> S6.h tool pairing -> S7 media limits -> final shape
```

`IncrementalNormalizer` gives the same messages for a timeline that grows by appending, redoing only
the open tail each turn (the engine's per-turn path); `run_steps` runs any subset of `STEPS`, so
tests can show the 400 each step prevents.

Invariants:
- `IncrementalNormalizer.messages(entries)` equals `normalize_messages_for_api(entries)`, errors
  included; whenever it cannot prove the frozen head unaffected it normalizes from scratch.
- Nothing is mutated: entries are frozen, and every block a step changes is copied first. Blocks a
  step does not change are passed through as the same objects, so thinking blocks and signatures
  reach the wire byte-exact (A21, A22).
- Text the user typed (non-meta user text) is never dropped; only whitespace-only text is.
- The result starts with a user message, alternates roles, has no empty content and no
  whitespace-only text, pairs every `tool_use` with a `tool_result` at the start of the next message,
  and never ends with an assistant message unless a prefill was asked for.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias, TypedDict

from foldline._incremental import GrowthCursor
from foldline._types import Block
from foldline.compact.snip import short_id
from foldline.errors import UserError
from foldline.media import decode_base64, image_size, pdf_pages
from foldline.timeline import (
    AssistantEntry,
    AttachmentEntry,
    Entry,
    ProgressEntry,
    SystemEntry,
    UserEntry,
    is_api_visible,
)

__all__ = [
    "INTERRUPTED_RESULT_TEXT",
    "STEPS",
    "IncrementalNormalizer",
    "MediaLimits",
    "MessageParam",
    "NormalizeOptions",
    "NormalizeStep",
    "normalize_messages_for_api",
    "run_steps",
]

INTERRUPTED_RESULT_TEXT = "[Tool call interrupted: no result was recorded]"
"""The `is_error` result synthesized for a `tool_use` whose result never reached the timeline."""
EMPTY_ASSISTANT_TEXT = "(no content)"
EMPTY_ERROR_TEXT = "[Tool error: no details were recorded]"
LEADING_USER_TEXT = "[Earlier conversation omitted]"

_THINKING = frozenset({"thinking", "redacted_thinking"})
_MEDIA = frozenset({"image", "document"})
_STRIP_KEYS = frozenset({"caller", "cache_control", "cache_reference"})
"""Fields that are ours or Claude Code's, not the API's: breakpoints are re-placed by `api.cache`."""
_REMINDER_PREFIX = "<system-reminder>"
_TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
_USERS = frozenset({"user"})
_BOTH_ROLES = frozenset({"user", "assistant"})


class MessageParam(TypedDict):
    """One Messages API message as sent: role and a list of content blocks."""

    role: Literal["user", "assistant"]
    content: list[Block]


@dataclass(frozen=True, kw_only=True)
class MediaLimits:
    """The API's image and document limits (A29-A33), checked by S7 before sending."""

    max_image_bytes: int = 5 * 1024 * 1024
    max_image_px: int = 8000
    many_images_threshold: int = 20
    """More images than this in one request lower the dimension limit to `many_images_px`."""
    many_images_px: int = 2000
    max_media_items: int = 100
    """Images plus PDF pages per request."""
    image_media_types: frozenset[str] = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


@dataclass(frozen=True, kw_only=True)
class NormalizeOptions:
    """What a request needs from normalization besides the entries."""

    snip_enabled: bool = False
    """S5: tag each user message with `[id:<short>]` so the model can snip it (R3.1.1)."""
    thinking_enabled: bool = True
    """With thinking off, a kept final assistant prefill loses its thinking blocks (A23)."""
    allow_prefill: bool = False
    """Keep a trailing assistant message as a prefill instead of dropping it (A9)."""
    media: MediaLimits = field(default_factory=MediaLimits)


Role: TypeAlias = Literal["user", "assistant", "system", "error"]


@dataclass(frozen=True, slots=True)
class _Msg:
    """A message in the making. `system` and `error` roles never leave the pipeline."""

    role: Role
    content: list[Block]
    uuids: tuple[str, ...]
    msg_id: str = ""
    is_meta: bool = True
    """No typed user text in it (tool results, injected context, assistant output)."""
    entry: Entry | None = None
    """The single entry it was lifted from, until a merge makes it several."""
    attach_to: str | None = None
    """S1: the tool_use id an attachment belongs beside."""
    error_text: str = ""

    def with_content(self, content: list[Block]) -> _Msg:
        """The same message with other content (`dataclasses.replace` is slow on a hot path)."""
        return _Msg(
            self.role,
            content,
            self.uuids,
            self.msg_id,
            self.is_meta,
            self.entry,
            self.attach_to,
            self.error_text,
        )


Step: TypeAlias = Callable[[list[_Msg], NormalizeOptions], list[_Msg]]


@dataclass(frozen=True)
class NormalizeStep:
    """One named step of the pipeline; `name` is design.md's label (`"S6.h"`)."""

    name: str
    run: Step


# --- lifting entries into messages ------------------------------------------------------------


def _clean_block(block: Block) -> Block:
    """The block without CC/foldline-only fields or, in a tool_result, non-block items (thinking: as is)."""
    kind = block.get("type")
    if kind in _THINKING:
        return block
    content = block.get("content")
    if kind == "tool_result" and isinstance(content, list):
        cleaned = [_clean_block(b) for b in content if isinstance(b, dict)]  # as `_blocks` does one level up
        changed = len(cleaned) != len(content) or any(
            c is not b for c, b in zip(cleaned, content, strict=True)
        )
        if changed or _STRIP_KEYS & block.keys():
            return {k: v for k, v in block.items() if k not in _STRIP_KEYS} | {"content": cleaned}
    if _STRIP_KEYS & block.keys():
        return {k: v for k, v in block.items() if k not in _STRIP_KEYS}
    return block


def _blocks(content: str | Sequence[Block]) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return [_clean_block(b) for b in content if isinstance(b, dict)]


def _reminder(content: str | Sequence[Block]) -> list[Block]:
    """Attachment text as the model sees it: wrapped in `<system-reminder>` like Claude Code does."""
    if isinstance(content, str):
        if not content.strip() or content.startswith(_REMINDER_PREFIX):
            return _blocks(content)
        return [{"type": "text", "text": f"{_REMINDER_PREFIX}\n{content}\n</system-reminder>"}]
    return _blocks(content)


def _error_text(entry: AssistantEntry) -> str:
    texts = [b.get("text", "") for b in entry.message.content if b.get("type") == "text"]
    if entry.api_error is not None:
        texts += [entry.api_error.message, entry.api_error.error_type, str(entry.api_error.status or "")]
    return "\n".join(t for t in texts if isinstance(t, str))


def _lift(entry: Entry) -> _Msg:
    """Every entry as a message, before any filtering (S0 decides what is sent)."""
    uuids = (entry.uuid,)
    if isinstance(entry, UserEntry):
        typed = not entry.is_meta and not entry.is_compact_summary
        return _Msg("user", _blocks(entry.message.content), uuids, is_meta=not typed, entry=entry)
    if isinstance(entry, AssistantEntry):
        content = _blocks(entry.message.content)
        error = _error_text(entry) if entry.is_api_error_message else ""
        return _Msg("assistant", content, uuids, msg_id=entry.message.id, entry=entry, error_text=error)
    if isinstance(entry, AttachmentEntry):
        return _Msg("user", _reminder(entry.content), uuids, entry=entry, attach_to=entry.tool_use_id)
    if isinstance(entry, SystemEntry):
        role: Role = "user" if entry.subtype == "local_command" else "system"
        return _Msg(role, _blocks(entry.content), uuids, entry=entry)
    if isinstance(entry, ProgressEntry):
        return _Msg("system", _blocks(entry.text), uuids, entry=entry)
    raise UserError(f"entry {getattr(entry, 'uuid', '?')}: not a timeline entry: {type(entry).__name__}")


# --- S0 .. S5 ---------------------------------------------------------------------------------


def s0_filter(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S0: drop virtual, progress, non-`local_command` system and sidechain entries (R1.5).

    Synthetic API-error entries are turned into `error` markers that S2 reads and removes.
    """
    out: list[_Msg] = []
    for m in msgs:
        if m.entry is None or is_api_visible(m.entry):
            out.append(m)
        elif isinstance(m.entry, AssistantEntry) and m.entry.is_api_error_message and not m.entry.is_virtual:
            out.append(_Msg("error", [], m.uuids, entry=m.entry, error_text=m.error_text))
    return out


def s1_reorder_attachments(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S1: move each hook attachment right after the message holding its tool call's result."""
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
    out = list(msgs)
    emptied: set[int] = set()
    for i, m in enumerate(msgs):
        kinds = media_types_to_strip(m.error_text) if m.role == "error" else frozenset()
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
    return replace(
        a,
        content=[*a.content, *b.content],
        uuids=a.uuids + b.uuids,
        is_meta=a.is_meta and b.is_meta,
        entry=None,
    )


def _identity(block: Block) -> tuple[str, str] | None:
    """What makes a block the same block when a piece is written twice (tool id, signature)."""
    kind = block.get("type")
    key = {"tool_use": "id", "thinking": "signature", "redacted_thinking": "data"}.get(str(kind))
    return (str(kind), str(block.get(key))) if key else None


def _without_known_blocks(piece: _Msg, merged: list[Block]) -> _Msg:
    known = {_identity(b) for b in merged} - {None}
    kept = [b for b in piece.content if _identity(b) not in known]
    return piece if len(kept) == len(piece.content) else piece.with_content(kept)


def s3_merge_assistant_pieces(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S3: one streamed reply written as several entries (one per block) becomes one message.

    Pieces merge across interleaved user messages (streaming tool execution writes each tool_result
    between two tool_use pieces); those user messages then follow the merged reply, where S4 joins
    them. A piece already merged (a replayed line, same uuid or not) is not added twice.
    """
    out: list[_Msg] = []
    open_at: int | None = None
    for m in msgs:
        if m.role != "assistant":
            out.append(m)
            continue
        if open_at is not None and m.msg_id and out[open_at].msg_id == m.msg_id:
            if not set(m.uuids) <= set(out[open_at].uuids):
                out[open_at] = _merge(out[open_at], _without_known_blocks(m, out[open_at].content))
            continue
        out.append(m)
        open_at = len(out) - 1
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
            tag = " ".join(f"[id:{short_id(u)}]" for u in m.uuids)
            m = m.with_content([*m.content, {"type": "text", "text": tag}])
        out.append(m)
    return out


# --- S6: edge cleanup -------------------------------------------------------------------------


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
    has_content = {
        m.msg_id for m in msgs if m.role == "assistant" and any(not _is_thinking(b) for b in m.content)
    }
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
        blank = [b for b in m.content if _is_blank_text(b)]
        if not blank:
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
        results = [i for i, b in enumerate(m.content) if b.get("type") == "tool_result"]
        if m.role != "user" or not results or not any(_is_reminder(b) for b in m.content):
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
        if m.role == "user" and any(b.get("type") == "tool_result" for b in m.content):
            m = m.with_content([_clean_result(b) if b.get("type") == "tool_result" else b for b in m.content])
        out.append(m)
    return out


def _thinking_first(content: list[Block]) -> list[Block]:
    """Move the first run of thinking blocks to the front, unchanged and in order (A20)."""
    if not content or _is_thinking(content[0]) or not any(_is_thinking(b) for b in content):
        return content
    start = next(i for i, b in enumerate(content) if _is_thinking(b))
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


def _dedupe_tool_uses(msgs: list[_Msg]) -> tuple[list[_Msg], list[list[str]]]:
    """Assistant content with thinking first, unique well-formed tool_use ids; the ids per message."""
    seen: set[str] = set()
    out: list[_Msg] = []
    uses: list[list[str]] = []
    for m in msgs:
        ids: list[str] = []
        if m.role == "assistant":
            content: list[Block] = []
            for b in _thinking_first(m.content):
                kind = b.get("type")
                if kind == "tool_result":
                    continue
                if kind == "tool_use":
                    tid = _safe_tool_id(b.get("id"))
                    if tid in seen:
                        continue
                    seen.add(tid)
                    ids.append(tid)
                    b = b if tid == b.get("id") else b | {"id": tid}
                content.append(b)
            while content and _is_thinking(content[-1]):
                content.pop()  # a dropped duplicate may have been all that followed the thinking
            if not content and m.content:
                continue  # only replayed tool calls: the originals are already sent
            if content != m.content:
                m = m.with_content(content)
        out.append(m)
        uses.append(ids)
    return out, uses


def _claim_results(msgs: list[_Msg], uses: list[list[str]]) -> dict[str, Block]:
    """The first result recorded after each tool_use, by id; orphans and duplicates are not claimed."""
    declared: set[str] = set()
    claimed: dict[str, Block] = {}
    for m, ids in zip(msgs, uses, strict=True):
        declared.update(ids)
        if m.role != "user":
            continue
        for b in m.content:
            if b.get("type") == "tool_result":
                tid = _safe_tool_id(b.get("tool_use_id"))
                if tid in declared and tid not in claimed:
                    claimed[tid] = b if tid == b.get("tool_use_id") else b | {"tool_use_id": tid}
    return claimed


def _interrupted(tool_use_id: str) -> Block:
    return {
        "type": "tool_result",
        "tool_use_id": tool_use_id,
        "is_error": True,
        "content": INTERRUPTED_RESULT_TEXT,
    }


def s6h_pair_tools(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S6.h: every tool_use is answered at the start of the next user message, in tool_use order.

    Missing results are synthesized as `is_error` "interrupted" results; results with no tool_use
    before them are dropped; tool_use ids are made unique; thinking comes first in its message
    (A10-A14, A20). A user message left empty by moving results away is dropped.
    """
    msgs, uses = _dedupe_tool_uses(msgs)
    claimed = _claim_results(msgs, uses)
    out: list[_Msg] = []
    pending: list[str] = []
    for m, ids in zip(msgs, uses, strict=True):
        rest = (
            [b for b in m.content if b.get("type") not in ("tool_result", "tool_use")]
            if m.role == "user"
            else None
        )
        if pending:
            answers = [claimed.get(t) or _interrupted(t) for t in pending]
            if m.role == "user":
                out.append(m.with_content([*answers, *(rest or [])]))
                pending = ids
                continue
            out.append(_Msg("user", answers, ()))
        if rest is not None and len(rest) != len(m.content):
            m = m.with_content(rest)
        if m.content or m.role != "user":
            out.append(m)
        pending = ids
    if pending:
        out.append(_Msg("user", [claimed.get(t) or _interrupted(t) for t in pending], ()))
    return out


# --- S7: media limits -------------------------------------------------------------------------


def _iter_media(msgs: list[_Msg]) -> Iterable[tuple[str, _Msg, Block]]:
    for i, m in enumerate(msgs):
        for j, b in enumerate(m.content):
            if b.get("type") in _MEDIA:
                yield f"messages.{i}.content.{j}", m, b
            inner = b.get("content")
            if b.get("type") == "tool_result" and isinstance(inner, list):
                for k, c in enumerate(inner):
                    if c.get("type") in _MEDIA:
                        yield f"messages.{i}.content.{j}.content.{k}", m, c


@functools.lru_cache(maxsize=4096)
def _image_facts(data: str) -> tuple[str, tuple[int, int]] | str:
    """(media type, size) of base64 image data, or what is wrong with it; cached because the
    incremental normalizer sees the same images every turn (results are small, unlike the bytes)."""
    raw = decode_base64(data)
    if not raw:
        return "image data is empty or not valid base64"
    return image_size(raw) or "image data is not a recognisable jpeg, png, gif or webp"


def _media_error(path: str, m: _Msg, problem: str) -> UserError:
    source = ", ".join(m.uuids) or "a synthesized message"
    return UserError(
        f"{path} (entry {source}): {problem}. The API would reject the request (HTTP 400); "
        "remove the media from the session (snip it, or /compact) before sending"
    )


def _check_image(path: str, m: _Msg, block: Block, px_limit: int, limits: MediaLimits) -> int:
    """The image's longer side, after checking it against the limits."""
    source = block.get("source") or {}
    if source.get("type") != "base64":
        return 0  # url / file sources are fetched and checked by the API itself
    media_type, data = source.get("media_type"), str(source.get("data", ""))
    if media_type not in limits.image_media_types:
        raise _media_error(path, m, f"image media type {media_type!r} is not one of jpeg, png, gif, webp")
    if len(data) > limits.max_image_bytes:  # the API measures the base64 text
        raise _media_error(
            path, m, f"image is {len(data)} bytes, over the {limits.max_image_bytes} byte limit"
        )
    facts = _image_facts(data)
    if isinstance(facts, str):
        raise _media_error(path, m, facts)
    actual, (width, height) = facts
    if actual != media_type:
        raise _media_error(path, m, f"image is declared {media_type} but its bytes are {actual}")
    if max(width, height) > px_limit:
        raise _media_error(path, m, f"image is {width}x{height} px, over the {px_limit} px limit")
    return max(width, height)


@dataclass(frozen=True)
class _MediaTotals:
    images: int = 0
    pages: int = 0
    max_px: int = 0


def _check_media(msgs: list[_Msg], limits: MediaLimits, before: _MediaTotals | None = None) -> _MediaTotals:
    """Check every image in `msgs`; `before` counts media in messages ahead of them (already checked)."""
    before = before or _MediaTotals()
    media = list(_iter_media(msgs))
    images = before.images + sum(1 for x in media if x[2].get("type") == "image")
    px_limit = limits.many_images_px if images > limits.many_images_threshold else limits.max_image_px
    if before.max_px > px_limit:
        raise UserError(f"an earlier image is over the {px_limit} px limit for requests with {images} images")
    pages, max_px = before.pages, before.max_px
    for path, m, block in media:
        if block.get("type") == "image":
            max_px = max(max_px, _check_image(path, m, block, px_limit, limits))
            continue
        source = block.get("source") or {}
        raw = decode_base64(str(source.get("data", ""))) if source.get("type") == "base64" else None
        pages += pdf_pages(raw) if raw else 1
    if images + pages > limits.max_media_items:
        path, m, _ = media[-1] if media else ("messages", _Msg("user", [], ()), {})
        raise _media_error(
            path, m, f"the request holds {images} images + {pages} document pages > {limits.max_media_items}"
        )
    return _MediaTotals(images, pages, max_px)


def s7_check_media(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S7: check image bytes, type, dimensions and the media count here, not by a 400 (A29-A35).

    Raises:
        UserError: naming the message path and the entries it came from.
    """
    _check_media(_as_sent(msgs), opts.media)
    return msgs


def _as_sent(msgs: list[_Msg]) -> list[_Msg]:
    """The messages as `final_shape` will index them, so that S7's error paths name the right one.

    S6.h can leave two replies adjacent (they merge), and a history that starts with a reply gets a
    leading user message. Dropping a trailing reply moves no earlier message, so it is left to `final`.
    """
    msgs = _merge_adjacent(msgs, _BOTH_ROLES)
    return [_leading_user(), *msgs] if msgs and msgs[0].role != "user" else msgs


def _leading_user() -> _Msg:
    return _Msg("user", [{"type": "text", "text": LEADING_USER_TEXT}], ())


# --- final shape ------------------------------------------------------------------------------


def _rstrip_last_text(content: list[Block]) -> list[Block]:
    for i in range(len(content) - 1, -1, -1):
        b = content[i]
        if b.get("type") == "text":
            return [*content[:i], b | {"text": str(b.get("text", "")).rstrip()}, *content[i + 1 :]]
        if not _is_thinking(b):
            break
    return content


def _finish(msgs: list[_Msg], opts: NormalizeOptions, *, at_start: bool) -> list[_Msg]:
    msgs = _merge_adjacent(msgs, _BOTH_ROLES)
    if msgs and msgs[-1].role == "assistant":
        last = msgs[-1]
        if not opts.allow_prefill:
            msgs = msgs[:-1]
        else:
            content = (
                last.content if opts.thinking_enabled else [b for b in last.content if not _is_thinking(b)]
            )
            msgs = [*msgs[:-1], last.with_content(_rstrip_last_text(content))]
            if not msgs[-1].content or all(_is_blank_text(b) for b in msgs[-1].content):
                msgs = msgs[:-1]
    if not at_start:
        return msgs
    if not msgs:
        raise UserError("nothing to send: the session has no user or assistant content after normalization")
    if msgs[0].role != "user":
        msgs = [_leading_user(), *msgs]
    return msgs


def final_shape(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """Start with a user message, alternate roles, and end with a user message (A1-A3, A8, A9).

    A trailing assistant message is dropped unless a prefill was asked for; a kept prefill loses
    trailing whitespace, and its thinking when thinking is off (A23).

    Raises:
        UserError: when nothing is left to send.
    """
    return _finish(msgs, opts, at_start=True)


STEPS: tuple[NormalizeStep, ...] = (
    NormalizeStep("S0", s0_filter),
    NormalizeStep("S1", s1_reorder_attachments),
    NormalizeStep("S2", s2_strip_failed_media),
    NormalizeStep("S3", s3_merge_assistant_pieces),
    NormalizeStep("S4", s4_merge_users),
    NormalizeStep("S5", s5_snip_tags),
    NormalizeStep("S6.a", s6a_drop_orphan_thinking),
    NormalizeStep("S6.b", s6b_strip_trailing_thinking),
    NormalizeStep("S6.c", s6c_drop_whitespace),
    NormalizeStep("S6.d", s6d_fill_empty_assistant),
    NormalizeStep("S6.e", s6e_merge_adjacent),
    NormalizeStep("S6.f", s6f_fold_reminders),
    NormalizeStep("S6.g", s6g_text_only_errors),
    NormalizeStep("S6.h", s6h_pair_tools),
    NormalizeStep("S7", s7_check_media),
    NormalizeStep("final", final_shape),
)
"""The pipeline, in design.md §4.1 order. Tests leave one step out to show the 400 that step prevents."""


def _wire(msgs: list[_Msg]) -> list[MessageParam]:
    """The messages as sent; `error` markers (only left when S2 did not run) are never sent."""
    return [{"role": m.role, "content": m.content} for m in msgs if m.role != "error"]  # type: ignore[typeddict-item]


def run_steps(
    entries: Sequence[Entry], steps: Sequence[NormalizeStep] = STEPS, options: NormalizeOptions | None = None
) -> list[MessageParam]:
    """Lift `entries` into messages and run `steps` over them in order.

    Messages whose role is not user/assistant (what S0 would have filtered) come out as
    `{"role": "system", ...}`, which is what sending them unfiltered would look like.
    """
    opts = options or NormalizeOptions()
    msgs = [_lift(e) for e in entries]
    for step in steps:
        msgs = step.run(msgs, opts)
    return _wire(msgs)


def normalize_messages_for_api(
    entries: Sequence[Entry],
    *,
    snip_enabled: bool = False,
    thinking_enabled: bool = True,
    allow_prefill: bool = False,
    media: MediaLimits | None = None,
) -> list[MessageParam]:
    """The Messages API `messages` for the API projection `entries` (design.md §4.1, steps S0-S7).

    Args:
        entries: `project_view(records)`: the projected timeline, oldest first.
        snip_enabled: append `[id:<short>]` tags to user messages (S5).
        thinking_enabled: whether the request enables extended thinking.
        allow_prefill: keep a trailing assistant message as a prefill instead of dropping it.
        media: image/document limits for S7 (the API's by default).

    Returns:
        Messages that start with a user turn, alternate, and pass the strict validator.

    Raises:
        UserError: media over the API's limits (S7), or nothing left to send.
    """
    options = NormalizeOptions(
        snip_enabled=snip_enabled,
        thinking_enabled=thinking_enabled,
        allow_prefill=allow_prefill,
        media=media or MediaLimits(),
    )
    return run_steps(entries, STEPS, options)


# --- incremental normalization ----------------------------------------------------------------

_PRE_FINAL = tuple(step for step in STEPS if step.name not in ("S7", "final"))


class _Dependent(Exception):
    """The open tail reaches back into the frozen head: normalize from scratch instead."""


@dataclass
class _Head:
    """The frozen messages of a growing session, and what the tail must not refer back to."""

    wire: list[MessageParam] = field(default_factory=list)
    tool_ids: set[str] = field(default_factory=set)
    """tool_use and tool_result ids (as S6.h maps them) in the head."""
    msg_ids: set[str] = field(default_factory=set)
    media: _MediaTotals = field(default_factory=_MediaTotals)


def _refs(entries: Sequence[Entry]) -> tuple[set[str], set[str], set[str]]:
    """(tool ids, assistant message ids, attachment targets) that entries mention."""
    tool_ids: set[str] = set()
    msg_ids: set[str] = set()
    targets: set[str] = set()
    for e in entries:
        if isinstance(e, AttachmentEntry) and e.tool_use_id:
            targets.add(e.tool_use_id)
        if not isinstance(e, UserEntry | AssistantEntry):
            continue
        if isinstance(e, AssistantEntry):
            msg_ids.add(e.message.id)
        for b in e.message.content if isinstance(e.message.content, list) else ():
            kind = b.get("type")
            if kind in ("tool_use", "tool_result"):
                tool_ids.add(_safe_tool_id(b.get("id") if kind == "tool_use" else b.get("tool_use_id")))
    return tool_ids, msg_ids, targets


class IncrementalNormalizer:
    """`normalize_messages_for_api` for a timeline that grows by appending, redoing only the open tail.

    The messages before the latest assistant reply are frozen once normalized (their wire dicts are
    reused, same objects, on every later call); each call normalizes only the entries from that
    reply on. The result is always equal to `normalize_messages_for_api(entries, ...)`: whenever the
    tail could change the frozen part (it answers, repeats or attaches to something in it, or a media
    limit depends on the total) or `entries` is not an extension of the previous call's, it starts
    over from scratch.
    """

    def __init__(self, options: NormalizeOptions | None = None) -> None:
        self.options = options or NormalizeOptions()
        self.reset()

    def reset(self) -> None:
        """Forget the frozen head: the next call normalizes from scratch (after a snip or compaction)."""
        self._lifted: dict[int, tuple[Entry, _Msg]] = {}
        self._head = _Head()
        self._tail_start = 0
        self._cursor: GrowthCursor[Entry] = GrowthCursor()

    def messages(self, entries: Sequence[Entry]) -> list[MessageParam]:
        """The normalized messages for `entries` (the whole projected timeline, oldest first).

        Raises:
            UserError: as `normalize_messages_for_api`.
        """
        if self._cursor.advance(entries) is None:
            self.reset()
            self._cursor.advance(entries)
        if self._tail_start:
            try:
                return self._assemble(entries)
            except _Dependent:
                self._head, self._tail_start = _Head(), 0
        return self._assemble(entries)

    def _assemble(self, entries: Sequence[Entry]) -> list[MessageParam]:
        tail = entries[self._tail_start :]
        head = self._head
        at_start = not head.wire
        if not at_start:
            tool_ids, msg_ids, targets = _refs(tail)
            if tool_ids & head.tool_ids or msg_ids & head.msg_ids or targets & head.tool_ids:
                raise _Dependent
        lifted = self._lifted
        msgs = [hit[1] if (hit := lifted.get(id(e))) and hit[0] is e else _lift(e) for e in tail]
        self._lifted = {id(e): (e, m) for e, m in zip(tail, msgs, strict=True)}
        for step in _PRE_FINAL:
            msgs = step.run(msgs, self.options)
        if not at_start and (not msgs or msgs[0].role != "assistant"):
            raise _Dependent
        try:
            _check_media(_as_sent(msgs) if at_start else msgs, self.options.media, head.media)
        except UserError:
            if at_start:
                raise
            raise _Dependent from None
        final = _finish(msgs, self.options, at_start=at_start)
        wire = _wire(final)
        out = head.wire + wire
        self._advance(tail, final, wire)
        return out

    def _advance(self, tail: Sequence[Entry], final: list[_Msg], wire: list[MessageParam]) -> None:
        """Freeze the messages before the latest assistant reply, if they map onto a prefix of `tail`."""
        cut = next((j for j in range(len(final) - 1, 0, -1) if final[j].role == "assistant"), 0)
        if cut == 0 or not final[cut].uuids:
            return
        position = {e.uuid: i for i, e in reversed(list(enumerate(tail)))}
        split = position.get(final[cut].uuids[0])
        if split is None:
            return
        before = {e.uuid for e in tail[:split]}
        after = {e.uuid for e in tail[split:]}
        if any(u in before for m in final[cut:] for u in m.uuids) or any(
            u in after for m in final[:cut] for u in m.uuids
        ):
            return  # S1 moved an attachment across the cut: keep the tail whole
        tool_ids, msg_ids, _ = _refs(tail[:split])
        head = self._head
        head.media = _check_media(final[:cut], self.options.media, head.media)
        head.wire = head.wire + wire[:cut]
        head.tool_ids |= tool_ids
        head.msg_ids |= msg_ids
        self._tail_start += split
