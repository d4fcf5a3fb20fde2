"""llama.cpp's `/v1/messages` stream shapes, written out by hand from what its server sends.

SmolLM2-135M never calls a tool or thinks, so the shapes llama-server gives those are replayed
here (docs/deploy.md records them): ids `chatcmpl-…`; `message_start` usage without
`cache_creation_input_tokens`; no `ping`; a `tool_use` block started without `input`, while the
text block before it is still open; a thinking block closed by an empty `signature_delta`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.types import Receive, Scope, Send

from foldline._json import dumps, loads
from foldline.config import Config
from foldline.engine import QueryEngine
from foldline.providers.anthropic import AnthropicProvider
from foldline.server.testing import run_server
from foldline.tools import default_tools
from foldline.transcript import open_session


def _sse(data: dict[str, Any]) -> bytes:
    return b"event: " + str(data["type"]).encode() + b"\ndata: " + dumps(data) + b"\n\n"


def _start(message_id: str) -> dict[str, Any]:
    usage = {"cache_read_input_tokens": 0, "input_tokens": 120, "output_tokens": 0}
    message = {"id": message_id, "type": "message", "role": "assistant", "content": [], "model": "m"}
    return {"type": "message_start", "message": {**message, "stop_reason": None, "usage": usage}}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def thinking_then_tool_call(path: str) -> bytes:
    """Thinking, a sentence, and a `Read` of `path`, as llama-server streams them."""
    events = [
        _start("chatcmpl-replayedtoolcall"),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        _delta(0, {"type": "thinking_delta", "thinking": "The user wants the file."}),
        _delta(0, {"type": "signature_delta", "signature": ""}),
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        _delta(1, {"type": "text_delta", "text": "Let me read it."}),
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "call_replayed0", "name": "Read"},
        },
        _delta(2, {"type": "input_json_delta", "partial_json": '{"file_path": "'}),
        _delta(2, {"type": "input_json_delta", "partial_json": path + '"}'}),
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_stop", "index": 2},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 31},
        },
        {"type": "message_stop"},
    ]
    return b"".join(_sse(e) for e in events)


def text(words: str) -> bytes:
    """A plain answer, one word per delta."""
    events: list[dict[str, Any]] = [
        _start("chatcmpl-replayedanswer"),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    events += [_delta(0, {"type": "text_delta", "text": w + " "}) for w in words.split()]
    events += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 9},
        },
        {"type": "message_stop"},
    ]
    return b"".join(_sse(e) for e in events)


class Replay:
    """A server that answers each `/v1/messages` with the next stream, keeping the request bodies."""

    def __init__(self, streams: list[bytes]) -> None:
        self.streams = streams
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] != "/v1/messages":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})
            return
        self.bodies.append(loads(raw))
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.streams[len(self.bodies) - 1]})


async def replay_tool_call(folder: Path) -> tuple[str, list[dict[str, Any]], Path]:
    """One turn of foldline's engine (real tools, real transcript) against the replayed shapes: the
    model thinks, reads `calc.py`, then answers. Returns the answer, the request bodies foldline
    sent, and the file's path."""
    workspace = folder / "ws"
    workspace.mkdir()
    path = workspace / "calc.py"
    path.write_text("def add(a, b):\n    return a + b\n")
    replay = Replay([thinking_then_tool_call(str(path)), text("It adds two numbers.")])
    writer, timeline = open_session(folder / "s.jsonl", session_id="s", fsync="never")
    with run_server(replay) as url:  # type: ignore[arg-type]
        engine = QueryEngine(
            provider=AnthropicProvider(base_url=url, api_key="k"),
            config=Config(model="m"),
            tools=default_tools(),
            workspace=workspace,
            timeline=timeline,
            transcript=writer,
            permission_mode="bypassPermissions",
        )
        try:
            result = await engine.submit_message("What does calc.py do?")
        finally:
            await engine.aclose()
            writer.close()
    return result.text, replay.bodies, path
