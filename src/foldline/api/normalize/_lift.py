"""Lifting entries into messages: every entry as a `_Msg`, before any filtering (S0 decides what is sent).

Blocks lose CC/foldline-only fields here; blocks that need no change are passed through as the same
objects, so thinking blocks and signatures reach the wire byte-exact (A21, A22).
"""

from __future__ import annotations

from collections.abc import Sequence

from foldline._types import Block
from foldline.api.normalize._base import (
    _REMINDER_PREFIX,
    _THINKING,
    Role,
    _Msg,
    _new_msg,
)
from foldline.api.normalize._s0_s5 import _IDENTITY_KEY
from foldline.errors import UserError
from foldline.timeline import (
    AssistantEntry,
    AttachmentEntry,
    Entry,
    ProgressEntry,
    SystemEntry,
    UserEntry,
)

_STRIP_KEYS = frozenset({"caller", "cache_control", "cache_reference"})
"""Fields that are ours or Claude Code's, not the API's: breakpoints are re-placed by `api.cache`."""


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
        if changed or not _STRIP_KEYS.isdisjoint(block):
            return {k: v for k, v in block.items() if k not in _STRIP_KEYS} | {"content": cleaned}
    if not _STRIP_KEYS.isdisjoint(block):  # no intersection set built: this runs for every block
        return {k: v for k, v in block.items() if k not in _STRIP_KEYS}
    return block


def _blocks(content: str | Sequence[Block]) -> list[Block]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    # `_clean_block` only for a block it could change (ours or CC's fields, or a result's list of
    # items): most blocks pass as they are, and a call per block cost more than this test.
    return [
        b
        if _STRIP_KEYS.isdisjoint(b)
        and (b.get("type") != "tool_result" or not isinstance(b.get("content"), list))
        else _clean_block(b)
        for b in content
        if isinstance(b, dict)
    ]


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
    # User and assistant entries (nearly all of them) are built positionally: keywords cost more per
    # call, and this runs for every entry of a resumed session. Order: role, content, uuids, msg_id,
    # is_meta, entry, attach_to, error_text.
    if isinstance(entry, UserEntry):
        typed = not entry.is_meta and not entry.is_compact_summary
        return _new_msg(_Msg, ("user", _blocks(entry.message.content), uuids, "", not typed, entry, None, ""))
    if isinstance(entry, AssistantEntry):
        content = _blocks(entry.message.content)
        error = _error_text(entry) if entry.is_api_error_message else ""
        return _new_msg(_Msg, ("assistant", content, uuids, entry.message.id, True, entry, None, error))
    if isinstance(entry, AttachmentEntry):
        return _Msg("user", _reminder(entry.content), uuids, entry=entry, attach_to=entry.tool_use_id)
    if isinstance(entry, SystemEntry):
        role: Role = "user" if entry.subtype == "local_command" else "system"
        return _Msg(role, _blocks(entry.content), uuids, entry=entry)
    if isinstance(entry, ProgressEntry):
        return _Msg("system", _blocks(entry.text), uuids, entry=entry)
    raise UserError(f"entry {getattr(entry, 'uuid', '?')}: not a timeline entry: {type(entry).__name__}")


def lift_all(entries: Sequence[Entry]) -> list[_Msg]:
    """Every entry lifted, each run of adjacent pieces of one streamed reply already joined as S3 joins them.

    A cold build lifts every entry of a session (tens of thousands, most of them one block of a
    reply written block by block): joining a run here builds one message instead of one per piece,
    and every step up to S3 then walks a third as many. S3's output is the same as for
    `[_lift(e) for e in entries]` (`tests/api/test_cold_build_shortcuts.py`): only adjacent plain
    pieces (sent, not an API error, one message id) are joined, only when no two of them carry the
    same block, and not at all in a timeline where a piece is replayed under its own uuid.
    """
    out: list[_Msg] = []
    run: list[AssistantEntry] = []
    uuids: set[str] = set()
    for e in entries:
        if (
            type(e) is AssistantEntry
            and e.message.id
            and not (e.is_api_error_message or e.is_virtual or e.is_sidechain)
        ):
            if e.uuid in uuids:
                return [_lift(entry) for entry in entries]  # S3 skips a replayed piece: lift one by one
            uuids.add(e.uuid)
            if run and run[0].message.id != e.message.id:
                _join(run, out)
                run = []
            run.append(e)
            continue
        if run:
            _join(run, out)
            run = []
        if type(e) is UserEntry:  # the common kind built inline: a call per entry cost more
            meta = e.is_meta or e.is_compact_summary
            out.append(_new_msg(_Msg, ("user", _blocks(e.message.content), (e.uuid,), "", meta, e, None, "")))
        else:
            out.append(_lift(e))
    if run:
        _join(run, out)
    return out


def _join(run: list[AssistantEntry], out: list[_Msg]) -> None:
    """Append the run's pieces as one message (what S3 makes of them), or one by one if a block repeats."""
    first = run[0]
    if len(run) == 1:
        out.append(_lift(first))
        return
    content = [b for e in run for b in _blocks(e.message.content)]
    identities = [(key, str(b.get(key))) for b in content if (key := _IDENTITY_KEY.get(str(b.get("type"))))]
    if len(set(identities)) != len(identities):
        out.extend(_lift(e) for e in run)  # S3 drops a repeated block: leave the dropping to it
        return
    uuids = tuple(e.uuid for e in run)
    out.append(_new_msg(_Msg, ("assistant", content, uuids, first.message.id, True, None, None, "")))
