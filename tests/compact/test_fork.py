"""A fork asks about the conversation with the main request's prefix and adds nothing to it."""

from __future__ import annotations

import msgspec
import pytest

from foldline.compact.fork import ask_forked, fork_body
from foldline.config import Config
from foldline.errors import PromptTooLongAPIError
from foldline.testing import ScriptedProvider, overloaded
from foldline.timeline import AssistantEntry, AssistantMessage, UserEntry, UserMessage

pytestmark = pytest.mark.anyio


def _records() -> list[UserEntry | AssistantEntry]:
    first = UserEntry(
        uuid="11111111-0000-4000-8000-000000000001",
        parent_uuid=None,
        timestamp="2026-01-01T00:00:00Z",
        session_id="s",
        message=UserMessage(content="the staging port is 6543"),
    )
    reply = AssistantEntry(
        uuid="11111111-0000-4000-8000-000000000002",
        parent_uuid=first.uuid,
        timestamp="2026-01-01T00:00:01Z",
        session_id="s",
        message=AssistantMessage(id="msg_1", model="m", content=[{"type": "text", "text": "noted"}]),
    )
    return [first, reply]


async def test_the_fork_keeps_the_prefix_and_ends_with_the_instruction() -> None:
    provider = ScriptedProvider([overloaded(), {"text": "## Task\nport 6543"}])
    records = _records()
    tools = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]
    body, _ = fork_body(
        provider, records, "Summarize.", config=Config(), system="sys", tools=tools, max_tokens=500
    )
    reply = await ask_forked(
        provider, records, "Summarize.", config=Config(), system="sys", tools=tools, max_tokens=500
    )
    assert reply.text == "## Task\nport 6543"
    sent = provider.calls[-1].body
    assert len(provider.calls) == 2  # the overload was retried
    assert sent["messages"][:2] == body["messages"][:2]
    assert sent["messages"][0]["content"][0]["text"] == "the staging port is 6543"
    last = sent["messages"][-1]
    assert last["role"] == "user"
    assert last["content"][0]["text"] == "Summarize."
    assert sent["tools"][0]["name"] == "Read"
    assert sent["max_tokens"] == 500
    assert len(records) == 2


async def test_a_fork_over_the_limit_is_refused_before_it_is_sent() -> None:
    provider = ScriptedProvider([])
    records = _records()
    records[0] = msgspec.structs.replace(records[0], message=UserMessage(content="7." * 2_000))
    with pytest.raises(PromptTooLongAPIError) as refused:
        await ask_forked(
            provider,
            records,
            "Summarize.",
            config=Config(),
            system="sys",
            tools=[],
            max_tokens=500,
            limit=3_000,
        )
    assert provider.calls == []  # nothing reached the model
    assert provider.counted == 1  # the estimate (~1.4K) was too close to call: counted exactly
    assert refused.value.prompt_tokens is not None
    assert refused.value.prompt_tokens > 4_000
    assert refused.value.gap == refused.value.prompt_tokens - 3_000  # what a retry must drop


async def test_a_fork_that_fits_is_sent_without_a_count_when_far_from_the_limit() -> None:
    provider = ScriptedProvider([{"text": "ok"}])
    reply = await ask_forked(
        provider,
        _records(),
        "Summarize.",
        config=Config(),
        system="sys",
        tools=[],
        max_tokens=500,
        limit=177_000,
    )
    assert reply.text == "ok"
    assert provider.counted == 0
    assert len(provider.calls) == 1
