"""Streaming and non-streaming answers agree, through the official SDK, sync and async."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
from tests.server.conftest import MODEL, Served

from foldline._json import loads
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend, signature_for
from foldline.server.testing import run_server
from foldline.server.tokenizer import count_text

SCRIPT: list[dict[str, Any]] = [
    {"thinking": "The user wants a file read. " * 5, "text": "Let me read it for you, shall I?"},
    {"tool_calls": [{"name": "Read", "input": {"path": "/tmp/a.py", "limit": 40, "nested": {"k": [1, 2]}}}]},
    {"text": "Done. " * 30, "stop_reason": "end_turn"},
]
TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}]


def _history(turn: int) -> list[dict[str, Any]]:
    """The conversation up to `turn` assistant replies (replies as the script renders them)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "please read /tmp/a.py"}]
    if turn >= 1:
        thinking = SCRIPT[0]["thinking"]
        messages += [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": thinking, "signature": signature_for(thinking)},
                    {"type": "text", "text": SCRIPT[0]["text"]},
                ],
            },
            {"role": "user", "content": "go on"},
        ]
    return messages


def _request(turn: int) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 500, "tools": TOOLS, "messages": _history(turn)}


@pytest.mark.parametrize("turn", [0, 1], ids=["thinking+text", "tool_use"])
def test_stream_accumulates_to_the_plain_response(serve: Callable[..., Served], turn: int) -> None:
    served = serve(backend=ScriptedBackend(replies=SCRIPT))
    plain = served.client.messages.create(**_request(turn))
    with served.client.messages.stream(**_request(turn)) as stream:
        final = stream.get_final_message()
    assert final.model_dump() == plain.model_dump()
    assert plain.stop_reason == ("end_turn" if turn == 0 else "tool_use")
    assert plain.usage.input_tokens > 0
    assert plain.usage.output_tokens > 0


def test_tool_use_input_round_trips(serve: Callable[..., Served]) -> None:
    served = serve(backend=ScriptedBackend(replies=SCRIPT))
    with served.client.messages.stream(**_request(1)) as stream:
        final = stream.get_final_message()
    block = final.content[0]
    assert block.type == "tool_use"
    assert block.input == SCRIPT[1]["tool_calls"][0]["input"]
    assert block.id.startswith("toolu_")


def test_event_sequence_is_the_apis(serve: Callable[..., Served]) -> None:
    served = serve(backend=ScriptedBackend(replies=SCRIPT))
    body = {**_request(0), "stream": True}
    with httpx2.Client() as http:
        response = http.post(f"{served.url}/v1/messages", json=body, headers={"x-api-key": "k"})
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line[7:] for line in response.text.splitlines() if line.startswith("event: ")]
    datas = [loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[:3] == ["message_start", "content_block_start", "ping"]
    assert events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == events.count("content_block_stop") == 2
    delta_types = [d["delta"]["type"] for d in datas if d["type"] == "content_block_delta"]
    first_text = delta_types.index("text_delta")
    assert set(delta_types[: first_text - 1]) == {"thinking_delta"}
    assert delta_types[first_text - 1] == "signature_delta"
    assert set(delta_types[first_text:]) == {"text_delta"}
    assert [d["type"] for d in datas] == events
    assert datas[-2]["delta"]["stop_reason"] == "end_turn"


def test_max_tokens_cuts_the_reply(serve: Callable[..., Served]) -> None:
    served = serve(backend=ScriptedBackend(replies=[{"text": "word " * 100}]))
    message = served.client.messages.create(
        model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "talk"}]
    )
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 10
    assert count_text(message.content[0].text) == 10  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_async_client_streams_and_agrees() -> None:
    with run_server(create_app(backend=ScriptedBackend(replies=SCRIPT))) as url:
        client = anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0)
        try:
            plain = await client.messages.create(**_request(1))
            async with client.messages.stream(**_request(1)) as stream:
                final = await stream.get_final_message()
        finally:
            await client.close()
    assert final.model_dump() == plain.model_dump()
    assert plain.content[0].type == "tool_use"
