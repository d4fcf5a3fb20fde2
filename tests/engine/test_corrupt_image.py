"""A damaged image never wedges a session, and a session already holding one is told a way out.

Read used to accept a PNG whose header was valid and whose body was not; from then on every request
carried it and every prompt was refused, with a hint ("snip it, or /compact") a user cannot act on:
users cannot Snip, and /compact's summary request carries the same image.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from foldline.config import Config
from foldline.engine import QueryEngine
from foldline.errors import UserError
from foldline.testing import FunctionProvider
from foldline.timeline import (
    AssistantEntry,
    AssistantMessage,
    Timeline,
    UserEntry,
    UserMessage,
    new_uuid,
    now_iso,
)
from foldline.tools import default_tools

pytestmark = pytest.mark.anyio


def _png(body_ok: bool = True) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    pixels = zlib.compress(b"\0\0\0\0")
    idat = chunk(b"IDAT", pixels)
    if not body_ok:  # the header stays valid; one byte of the image data is damaged
        idat = idat[:10] + bytes([idat[10] ^ 0xFF]) + idat[11:]
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + header + idat + chunk(b"IEND", b"")


def _model(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
    last = body["messages"][-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return {"text": "I could not use that image."}
    text = last if isinstance(last, str) else " ".join(str(b.get("text", "")) for b in last)
    if "look at shot.png" in text:
        return {"tool_calls": [{"name": "Read", "input": {"file_path": "shot.png"}}]}
    return {"text": "ok"}


async def test_a_damaged_png_is_refused_by_read_and_the_session_goes_on(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(_png(body_ok=False))
    provider = FunctionProvider(_model)
    engine = QueryEngine(
        provider=provider,
        config=Config(),
        tools=default_tools(),
        workspace=tmp_path,
        timeline=Timeline(session_id="s"),
        permission_mode="bypassPermissions",
    )
    assert (await engine.submit_message("look at shot.png")).text == "I could not use that image."
    result = provider.calls[-1].body["messages"][-1]["content"][0]
    assert result["is_error"]
    assert "cannot be decoded" in str(result["content"])
    assert "image/png" not in str(provider.calls[-1].body["messages"])  # nothing undecodable was sent
    assert (await engine.submit_message("and now?")).text == "ok"  # not wedged
    await engine.aclose()


async def test_a_session_already_holding_one_is_told_to_rewind_not_to_snip(tmp_path: Path) -> None:
    """An older session (or an import) recorded a result with an image the API would refuse."""
    timeline = Timeline(session_id="s")
    parent: str | None = None

    def add(entry: UserEntry | AssistantEntry) -> None:
        nonlocal parent
        timeline.append(entry)
        parent = entry.uuid

    def common() -> dict[str, Any]:
        return {"uuid": new_uuid(), "parent_uuid": parent, "timestamp": now_iso(), "session_id": "s"}

    add(UserEntry(**common(), message=UserMessage(content="look at shot.png")))
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "shot.png"}}
    add(
        AssistantEntry(
            **common(), message=AssistantMessage(id="msg_1", content=[call], stop_reason="tool_use")
        )
    )
    unreadable = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    add(
        UserEntry(
            **common(),
            message=UserMessage(
                content=[{"type": "tool_result", "tool_use_id": "toolu_1", "content": [unreadable]}]
            ),
        )
    )
    engine = QueryEngine(
        provider=FunctionProvider(_model), config=Config(), workspace=tmp_path, timeline=timeline
    )
    with pytest.raises(UserError) as raised:
        await engine.submit_message("hello")
    text = str(raised.value)
    assert "a tool's result" in text
    assert "/rewind" in text
    assert "snip it" not in text
    engine.rewind()  # the prompt that just failed
    engine.rewind()  # the turn that added the image
    assert (await engine.submit_message("hello again")).text == "ok"
    await engine.aclose()
