"""foldline's own Anthropic provider against the local server: usage, including cache_edits, arrives."""

from __future__ import annotations

import pytest
from tests.server.conftest import MODEL, words

from foldline.providers.anthropic import AnthropicProvider
from foldline.server.app import create_app
from foldline.server.caching import CACHE_EDITS_BETA
from foldline.server.testing import run_server
from foldline.server.tokenizer import count_text
from foldline.stream import MessageDelta, MessageStart, MessageStop, StreamEvent


def _body(edit: bool) -> dict[str, object]:
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": words(1500),
        "cache_reference": "r1",
    }
    last: list[dict[str, object]] = [{"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}]
    if edit:
        last.insert(0, {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "r1"}]})
    return {
        "model": MODEL,
        "max_tokens": 50,
        "messages": [
            {"role": "user", "content": "run ls"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
            },
            {"role": "user", "content": [result, {"type": "text", "text": "done"}]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": last},
        ],
    }


@pytest.mark.anyio
async def test_provider_sees_cache_and_deleted_usage() -> None:
    with run_server(create_app()) as url:
        provider = AnthropicProvider(base_url=url)
        try:
            first = [e async for e in provider.stream(_body(edit=False))]
            second: list[StreamEvent] = [
                e async for e in provider.stream(_body(edit=True), betas=[CACHE_EDITS_BETA])
            ]
        finally:
            await provider.aclose()
    assert isinstance(first[-1], MessageStop)
    start = next(e for e in second if isinstance(e, MessageStart))
    delta = next(e for e in second if isinstance(e, MessageDelta))
    assert (
        start.usage.cache_deleted_input_tokens
        == delta.usage.cache_deleted_input_tokens
        == count_text(words(1500))
    )
    assert start.usage.cache_read_input_tokens > 0


@pytest.mark.anyio
async def test_provider_sends_body_fields_the_sdk_does_not_name() -> None:
    # `context_management` (a beta) is not a parameter of this SDK's `messages.create`: passed as a
    # keyword it raised TypeError client-side; it must reach the server as part of the body.
    body = {**_body(edit=False), "context_management": {"edits": [{"type": "clear_thinking_20251015"}]}}
    with run_server(create_app()) as url:
        provider = AnthropicProvider(base_url=url)
        try:
            events = [e async for e in provider.stream(body, betas=["context-management-2025-06-27"])]
        finally:
            await provider.aclose()
    assert isinstance(events[-1], MessageStop)
