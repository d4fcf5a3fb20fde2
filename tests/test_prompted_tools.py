"""Tools written into the prompt and calls read back strictly from the reply (`providers.prompted_tools`).

The local model's chat template drops the `tools` parameter (docs/real-model.md); these tests hold
the rendering, the strict parser (a valid call, malformed ones, prose), the stream rewriting, and
`foldline chat`'s switch from llama.cpp's `/props`.
"""

from __future__ import annotations

from typing import Any

import pytest

from foldline.config import Config
from foldline.providers.limits import template_drops_tools
from foldline.providers.prompted_tools import EXAMPLES, PromptedTools, as_text, parse_call, render_tools
from foldline.stream import MessageAccumulator, TextDelta
from foldline.testing import ScriptedProvider
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

TOOLS: list[dict[str, Any]] = tool_specs([t for t in default_tools() if t.name != "Snip"])


def test_a_reply_that_is_one_valid_call_is_that_call() -> None:
    assert parse_call('{"tool": "Read", "input": {"file_path": "notes.txt"}}', TOOLS) == (
        "Read",
        {"file_path": "notes.txt"},
    )
    fenced = '```json\n{"tool": "Bash", "input": {"command": "ls -la"}}\n```'
    assert parse_call(fenced, TOOLS) == ("Bash", {"command": "ls -la"})
    # SmolLM2-135M's slip: one closing brace too many, nothing else can be meant
    assert parse_call('{"tool":"Read","input":{"file_path":"notes.txt"}}}', TOOLS) == (
        "Read",
        {"file_path": "notes.txt"},
    )


@pytest.mark.parametrize(
    "reply",
    [
        '{"tool": "Read", "input": {"file_path": "notes.txt"}',  # cut: not JSON
        '{"tool": "Read", "input": {}}',  # the required file_path missing
        '{"tool": "Read", "input": {"file_path": 3}}',  # mistyped
        '{"tool": "Read", "input": {"path": "notes.txt"}}',  # a parameter the schema does not have
        '{"tool": "Fetch", "input": {"url": "x"}}',  # not an offered tool
        '{"name": "Read", "arguments": {"file_path": "notes.txt"}}',  # another format
        '{"tool": "Read", "input": {"file_path": "a"}, "why": "x"}',  # extra keys
        '[{"tool": "Read", "input": {"file_path": "a"}}]',  # a list
        'Sure: {"tool": "Read", "input": {"file_path": "notes.txt"}}',  # prose around it
        '{"tool": "Read", "input": {"file_path": "notes.txt"}} and then',  # prose after it
        '{"tool": "Read", "input": {"file_path": "notes.txt"}}]',  # a bracket is no brace
    ],
)
def test_a_malformed_call_is_not_a_call(reply: str) -> None:
    assert parse_call(reply, TOOLS) is None


def test_prose_is_not_a_call() -> None:
    assert parse_call("The file notes.txt holds your notes.", TOOLS) is None
    assert parse_call("", TOOLS) is None


def test_the_tools_go_into_the_system_prompt_and_calls_and_results_into_text() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 64,
        "system": "You are a coding agent.",
        "tools": TOOLS,
        "tool_choice": {"type": "auto"},
        "messages": [
            {"role": "user", "content": "Read notes.txt"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "n"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\thello"}],
            },
        ],
    }
    sent = as_text(body)
    assert "tools" not in sent
    assert "tool_choice" not in sent
    system = "\n".join(block["text"] for block in sent["system"])
    assert system.startswith("You are a coding agent.")
    assert system.endswith(render_tools(TOOLS))
    for tool in TOOLS:  # one line per tool, in the form a call takes
        assert f'{{"tool":"{tool["name"]}","input":{{' in system
    examples, (asked, call, result) = sent["messages"][:-3], sent["messages"][-3:]
    assert asked == body["messages"][0]
    assert call["content"][0] == {"type": "text", "text": '{"tool":"Read","input":{"file_path":"n"}}'}
    assert result["content"][0]["type"] == "text"
    assert result["content"][0]["text"].endswith("1\thello")
    # example turns first: a call to each offered tool that has one, and one plain answer
    shown = [m["content"] for m in examples if m["role"] == "assistant"]
    assert [parse_call(text, TOOLS) for text in shown if text.startswith("{")] == [
        (name, answer) for name, _, answer in EXAMPLES if name
    ]
    assert any(not text.startswith("{") for text in shown)
    assert as_text({**body, "tools": []})["messages"] == body["messages"]  # no tools: as it was


async def _reply(text: str) -> tuple[MessageAccumulator, ScriptedProvider, list[object]]:
    inner = ScriptedProvider([{"text": text}], chunk_tokens=2)
    body = {"model": "m", "max_tokens": 64, "tools": TOOLS, "messages": [{"role": "user", "content": "hi"}]}
    accumulator = MessageAccumulator()
    events: list[object] = []
    async for event in PromptedTools(inner).stream(body):
        events.append(event)
        accumulator.feed(event)
    return accumulator, inner, events


@pytest.mark.anyio
async def test_a_valid_call_in_the_reply_becomes_a_tool_use_block() -> None:
    accumulator, inner, _ = await _reply('{"tool": "Bash", "input": {"command": "ls -la"}}')
    message = accumulator.message()
    assert [b["type"] for b in message.content] == ["tool_use"]
    assert message.content[0]["name"] == "Bash"
    assert message.content[0]["input"] == {"command": "ls -la"}
    assert message.content[0]["id"].startswith("toolu_")
    assert message.stop_reason == "tool_use"
    assert "tools" not in inner.calls[0].body  # the server saw them only as text


@pytest.mark.anyio
@pytest.mark.parametrize(
    "text",
    ['{"tool": "Read", "input": {"file_path": 7}}', "I can read it: notes.txt is a text file."],
)
async def test_a_malformed_call_or_prose_stays_the_text_it_was(text: str) -> None:
    accumulator, _, events = await _reply(text)
    message = accumulator.message()
    assert [b["type"] for b in message.content] == ["text"]
    assert message.content[0]["text"] == text
    assert message.stop_reason == "end_turn"
    if not text.startswith("{"):  # prose streams: more than one delta, not one held block
        assert sum(isinstance(e, TextDelta) for e in events) > 1


def test_llama_cpps_props_say_whether_the_template_renders_tools() -> None:
    pinned = "{'supports_system_role': True, 'supports_tool_calls': False, 'supports_tools': False}"
    assert template_drops_tools({"chat_template_caps": pinned})
    assert template_drops_tools({"chat_template_caps": {"supports_tools": False}})
    assert not template_drops_tools({"chat_template_caps": {"supports_tools": True}})
    assert not template_drops_tools({"chat_template_caps": pinned.replace("'supports_tools': False", "")})
    assert not template_drops_tools({"n_ctx": 8192})
    assert not Config().tools_in_prompt  # off unless a server says so


@pytest.mark.anyio
async def test_a_call_on_the_first_line_ends_the_reply_there() -> None:
    accumulator, _, _ = await _reply(
        '{"tool": "Read", "input": {"file_path": "a.txt"}}\n\nThis reads the file.'
    )
    message = accumulator.message()
    assert [b["type"] for b in message.content] == ["tool_use"]
    assert message.content[0]["input"] == {"file_path": "a.txt"}
    assert message.stop_reason == "tool_use"
    accumulator, _, _ = await _reply('{"tool": "Read", "input": {}}\nno call')  # not a call: text
    assert accumulator.message().content[0]["text"] == '{"tool": "Read", "input": {}}\nno call'


@pytest.mark.anyio
async def test_a_request_with_tools_goes_greedy_unless_it_says_otherwise() -> None:
    inner = ScriptedProvider([{"text": "a"}, {"text": "b"}, {"text": "c"}])
    body = {"model": "m", "max_tokens": 8, "tools": TOOLS, "messages": [{"role": "user", "content": "hi"}]}
    provider = PromptedTools(inner, temperature=Config().tools_in_prompt_temperature)
    for sent in (body, {**body, "temperature": 0.5}, {**body, "tools": []}):
        async for _ in provider.stream(sent):
            pass
    assert [call.body.get("temperature") for call in inner.calls] == [0.0, 0.5, None]
