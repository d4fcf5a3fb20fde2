"""Hypothesis generators of messy timelines for the request-assembly property tests.

`messy_timelines()` draws a session the way real transcripts look (design.md §T): streamed replies
split one block per entry, tool results interleaved between the pieces of one reply or written in a
different order from the tool calls, streams cut right after thinking, `"\\n\\n"` text before
thinking, orphan tool_use and tool_result, replayed pieces and duplicate tool ids, `is_error`
results carrying images, `<system-reminder>` text beside tool results, synthetic API-error entries
for each media error after an injected image or PDF, attachments and meta messages making users
consecutive, progress/system/virtual/sidechain noise.

Alongside the entries it records what the properties need: every text the user typed (never to be
dropped) and every thinking block the model produced (to be sent byte-identical or not at all).
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import strategies as st

from foldline._types import Block
from foldline.timeline import (
    ApiErrorInfo,
    AssistantEntry,
    AssistantMessage,
    AttachmentEntry,
    Entry,
    ProgressEntry,
    SystemEntry,
    UserEntry,
    UserMessage,
)

MEDIA_ERRORS = (
    "messages.3.content.1.image.source.base64: image exceeds 5 MB maximum: 6500712 bytes > 5242880 bytes",
    "messages.7.content.3.image.source.base64.data: At least one of the image dimensions exceed max "
    "allowed size: 8000 pixels",
    "too many images and documents: 120 + 0 > 100",
    "A maximum of 100 PDF pages may be provided.",
    "Request exceeds the maximum allowed number of bytes. The maximum request size is 32 MB",
    "413 request_too_large",
    "The PDF specified was not valid.",
)
"""API error texts that S2 maps to block types to strip (A29-A33, A41)."""


def png_bytes(width: int = 1, height: int = 1) -> bytes:
    """A PNG header the validator can size (signature + IHDR), padded with an IEND chunk."""
    ihdr = struct.pack(">II", width, height) + b"\x08\x06\x00\x00\x00"
    chunk = b"IHDR" + ihdr
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", len(ihdr))
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
        + b"\x00\x00\x00\x00IEND\xaeB`\x82"
    )


def image_block(width: int = 1, height: int = 1) -> Block:
    """A base64 PNG image block of the given size."""
    data = base64.b64encode(png_bytes(width, height)).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def pdf_block(pages: int = 1) -> Block:
    """A base64 PDF document block with `pages` page objects."""
    raw = b"%PDF-1.4\n" + b"".join(b"<< /Type /Page >>\n" for _ in range(pages)) + b"%%EOF"
    data = base64.b64encode(raw).decode()
    return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}


@dataclass
class Generated:
    """A drawn timeline and the facts the properties check against."""

    entries: list[Entry] = field(default_factory=list)
    typed_texts: list[str] = field(default_factory=list)
    """Non-whitespace texts in non-meta, visible user entries (what the user typed)."""
    thinking_blocks: list[Block] = field(default_factory=list)
    """Every thinking block generated, as produced by the model."""
    cases: set[str] = field(default_factory=set)
    """Which oddities this timeline contains (for `hypothesis.event` coverage reports)."""


class _Builder:
    """Appends entries with sequential uuids and timestamps; remembers recent tool ids."""

    def __init__(self, draw: Callable[..., object]) -> None:
        self.draw = draw
        self.out = Generated()
        self.n = 0
        self.tool_ids: list[str] = []
        self.pieces: list[AssistantEntry] = []

    def uid(self) -> str:
        self.n += 1
        return f"{self.n:08x}-0000-4000-8000-{self.n:012x}"

    def env(self) -> dict[str, object]:
        return {"uuid": self.uid(), "timestamp": f"2026-01-01T00:00:{self.n % 60:02d}.000Z"}

    def text(self, prefix: str) -> str:
        body = self.draw(st.text(alphabet="abcdefghij XYZ.,!", min_size=1, max_size=12))
        return f"{prefix}{self.n} {body}"

    def user(self, content: str | list[Block], *, meta: bool = False, **flags: bool) -> None:
        self.out.entries.append(
            UserEntry(**self.env(), message=UserMessage(content=content), is_meta=meta, **flags)
        )  # type: ignore[arg-type]

    def assistant(self, msg_id: str, blocks: list[Block], **flags: object) -> AssistantEntry:
        entry = AssistantEntry(**self.env(), message=AssistantMessage(id=msg_id, content=blocks), **flags)  # type: ignore[arg-type]
        self.out.entries.append(entry)
        self.pieces.append(entry)
        return entry


def _typed(b: _Builder) -> None:
    text = b.text("typed-")
    b.out.typed_texts.append(text)
    if b.draw(st.booleans()):
        text += "  \n"
        b.out.cases.add("trailing whitespace")
    blocks: list[Block] = [{"type": "text", "text": text}]
    if b.draw(st.booleans()):
        ide = b.text("<ide_opened_file>")
        blocks.insert(0, {"type": "text", "text": ide})
        b.out.typed_texts.append(ide)
    if b.draw(st.booleans()):
        blocks.append(image_block())
        b.out.cases.add("typed image")
    b.user(blocks if len(blocks) > 1 or b.draw(st.booleans()) else text)


def _thinking(b: _Builder) -> Block:
    text = b.draw(st.sampled_from(["", " ", "Let me think.\n\n", "plan: read then edit  "]))
    block: Block = {"type": "thinking", "thinking": text, "signature": f"sig-{b.uid()}"}
    b.out.thinking_blocks.append(block)
    return block


def _result_content(b: _Builder, is_error: bool) -> str | list[Block]:
    kind = b.draw(st.sampled_from(["text", "list", "image", "empty", "newline"]))
    if kind == "image":
        b.out.cases.add("is_error result with image" if is_error else "result with image")
        return [{"type": "text", "text": "screenshot"}, image_block()]
    if kind == "list":
        return [{"type": "text", "text": b.text("out-")}, {"type": "text", "text": ""}]
    return {"text": b.text("out-"), "empty": "", "newline": "\n"}[kind]


def _result(b: _Builder, tool_id: str) -> Block:
    is_error = b.draw(st.booleans())
    block: Block = {"type": "tool_result", "tool_use_id": tool_id, "content": _result_content(b, is_error)}
    if is_error or b.draw(st.booleans()):
        block["is_error"] = is_error
    return block


def _reply(b: _Builder) -> None:
    """One model reply: maybe thinking, text and tool calls; split or whole; results in any order."""
    msg_id = f"msg_{b.uid().replace('-', '')[:20]}"
    blocks: list[Block] = []
    if b.draw(st.booleans()):
        if b.draw(st.integers(0, 5)) == 0:
            blocks.append({"type": "text", "text": "\n\n"})
            b.out.cases.add("whitespace before thinking")
        blocks.append(_thinking(b))
    if b.draw(st.booleans()):
        blocks.append({"type": "text", "text": b.text("says-")})
    n_tools = b.draw(st.integers(0, 3))
    ids = [f"toolu_{b.uid().replace('-', '')[:16]}" for _ in range(n_tools)]
    b.tool_ids += ids
    for tid in ids:
        use: Block = {"type": "tool_use", "id": tid, "name": "Read", "input": {"path": "a.py"}}
        if b.draw(st.booleans()):
            use["caller"] = {"type": "direct"}
        blocks.append(use)
    if not blocks:
        blocks.append({"type": "text", "text": b.text("says-")})
    results = [(tid, _result(b, tid)) for tid in ids if b.draw(st.integers(0, 4)) > 0]
    if len(results) < len(ids):
        b.out.cases.add("tool_use without result")
    style = b.draw(st.sampled_from(["whole", "split", "interleaved"]))
    b.out.cases.add(f"reply {style}")
    if style == "whole":
        b.assistant(msg_id, blocks)
        _emit_results(b, results)
        return
    pending = list(results)
    for block in blocks:
        b.assistant(msg_id, [block])
        if (
            style == "interleaved"
            and block["type"] == "tool_use"
            and pending
            and pending[0][0] == block["id"]
        ):
            _emit_results(b, [pending.pop(0)])
            if b.draw(st.booleans()):
                _attachment(b, block["id"])
    _emit_results(b, pending)


def _emit_results(b: _Builder, results: list[tuple[str, Block]]) -> None:
    order = b.draw(st.permutations(results)) if len(results) > 1 else results
    if list(order) != results:
        b.out.cases.add("results out of order")
    for _, block in order:
        content: list[Block] = [block]
        if b.draw(st.integers(0, 4)) == 0:
            content.append(
                {"type": "text", "text": f"<system-reminder>{b.text('remind-')}</system-reminder>"}
            )
            b.out.cases.add("system-reminder beside result")
        b.user(content)


def _attachment(b: _Builder, tool_id: str | None = None) -> None:
    b.out.cases.add("attachment")
    target = tool_id or (
        b.draw(st.sampled_from(b.tool_ids)) if b.tool_ids and b.draw(st.booleans()) else None
    )
    b.out.entries.append(
        AttachmentEntry(
            **b.env(), attachment_type="hook_success", content=b.text("hook-"), tool_use_id=target
        )  # type: ignore[arg-type]
    )


def _cut_after_thinking(b: _Builder) -> None:
    b.out.cases.add("stream cut after thinking")
    b.assistant(f"msg_cut{b.uid()[:8]}", [_thinking(b)])


def _orphan_result(b: _Builder) -> None:
    b.out.cases.add("orphan tool_result")
    b.user([{"type": "tool_result", "tool_use_id": f"toolu_orphan{b.n}", "content": "late"}])


def _replay(b: _Builder) -> None:
    """A piece written twice: same uuid (resume replay) or a new uuid (duplicate tool_use ids)."""
    if not b.pieces:
        return
    piece = b.draw(st.sampled_from(b.pieces))
    same_uuid = b.draw(st.booleans())
    b.out.cases.add("replayed piece" if same_uuid else "duplicate ids")
    uuid = piece.uuid if same_uuid else b.uid()
    b.out.entries.append(AssistantEntry(uuid=uuid, timestamp=piece.timestamp, message=piece.message))


def _media_error(b: _Builder) -> None:
    """An injected image or PDF, then the API error that rejected it (S2)."""
    error = b.draw(st.sampled_from(MEDIA_ERRORS))
    b.out.cases.add("media error")
    media = pdf_block() if "PDF" in error else image_block()
    b.user([{"type": "text", "text": "[Image: source: /tmp/x.png]"}, media], meta=True)
    b.assistant(
        f"{b.uid()}",
        [{"type": "text", "text": "API Error"}],
        is_api_error_message=True,
        api_error=ApiErrorInfo(status=400, error_type="invalid_request_error", message=error),
    )


def _meta(b: _Builder) -> None:
    b.out.cases.add("meta user")
    b.user(
        b.draw(
            st.sampled_from(
                [
                    "<local-command-caveat>Caveat</local-command-caveat>",
                    "Continue from where you left off.",
                    "   ",
                ]
            )
        ),
        meta=True,
    )


def _noise(b: _Builder) -> None:
    kind = b.draw(st.sampled_from(["progress", "notice", "local_command", "virtual", "sidechain"]))
    b.out.cases.add(f"noise {kind}")
    if kind == "progress":
        b.out.entries.append(ProgressEntry(**b.env(), text="Running bash…"))  # type: ignore[arg-type]
    elif kind in ("notice", "local_command"):
        sub = "notice" if kind == "notice" else "local_command"
        b.out.entries.append(
            SystemEntry(**b.env(), subtype=sub, content="<local-command-stdout>ok</local-command-stdout>")
        )  # type: ignore[arg-type]
    else:
        flags = {"is_virtual": True} if kind == "virtual" else {"is_sidechain": True}
        tid = f"toolu_v{b.n}"
        b.assistant(f"msg_v{b.n}", [{"type": "tool_use", "id": tid, "name": "Bash", "input": {}}], **flags)
        b.user([{"type": "tool_result", "tool_use_id": tid, "content": "x"}], **flags)


def _empty_reply(b: _Builder) -> None:
    b.out.cases.add("empty or whitespace reply")
    b.assistant(
        f"msg_e{b.n}",
        b.draw(st.sampled_from([[], [{"type": "text", "text": " \n"}], [{"type": "text", "text": ""}]])),
    )


_ACTIONS: tuple[Callable[[_Builder], None], ...] = (
    _typed,
    _reply,
    _reply,
    _reply,
    _attachment,
    _cut_after_thinking,
    _orphan_result,
    _replay,
    _media_error,
    _meta,
    _noise,
    _empty_reply,
)


@st.composite
def messy_timelines(draw: st.DrawFn, max_actions: int = 14) -> Generated:
    """A timeline of 1 typed prompt plus up to `max_actions` drawn events (see module docstring)."""
    b = _Builder(draw)
    if draw(st.booleans()):
        _meta(b)
    _typed(b)
    for action in draw(st.lists(st.sampled_from(_ACTIONS), max_size=max_actions)):
        action(b)
    return b.out
