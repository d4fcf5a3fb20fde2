"""Thinking as the server answers it: first block, signed per launch, checked when it comes back."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from typing import Any

import httpx2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from tests.server.conftest import MODEL, Served

from foldline.api.validate import ValidationLimits, find_errors
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.config import ServerConfig
from foldline.server.simulated import SimulatedBackend
from foldline.server.thinking import INTERLEAVED_THINKING_BETA, REDACTED_THINKING_TRIGGER, ThinkingSigner

ENABLED = {"type": "enabled", "budget_tokens": 2048}
OMITTED = {**ENABLED, "display": "omitted"}
READ = {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}


def _post(app: Starlette, body: Mapping[str, Any], betas: tuple[str, ...] = ()) -> httpx2.Response:
    async def go() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as client:
            headers = {"anthropic-beta": ",".join(betas)} if betas else {}
            return await client.post("/v1/messages", json=body, headers=headers)

    return asyncio.run(go())


def _body(
    messages: list[dict[str, Any]], thinking: Mapping[str, Any] = ENABLED, **extra: Any
) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 4096, "thinking": dict(thinking), "messages": messages, **extra}


def _tool_loop_app() -> Starlette:
    return create_app(
        backend=ScriptedBackend(replies=[{"tool_calls": [{"name": "Read", "input": {}}]}, {"text": "ok"}])
    )


def test_a_thinking_request_gets_a_signed_thinking_block_first() -> None:
    app = create_app(config=ServerConfig(thinking_key=b"k" * 32))
    reply = _post(app, _body([{"role": "user", "content": "hi"}])).json()
    first = reply["content"][0]
    assert first["type"] == "thinking"
    assert first["thinking"]  # shown by default
    assert first["signature"] == ThinkingSigner(b"k" * 32).signature(first["thinking"])
    assert reply["content"][-1]["type"] == "text"


def test_display_omitted_sends_an_empty_text_with_a_signature_that_round_trips() -> None:
    app = create_app()
    messages = [{"role": "user", "content": "hi"}]
    reply = _post(app, _body(messages, OMITTED)).json()
    assert reply["content"][0]["thinking"] == ""
    assert reply["content"][0]["signature"]
    messages += [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": "more"}]
    assert _post(app, _body(messages, OMITTED)).status_code == 200


def test_without_thinking_no_thinking_block() -> None:
    reply = _post(
        create_app(), {"model": MODEL, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    )
    assert [b["type"] for b in reply.json()["content"]] == ["text"]


def _loop(app: Starlette, betas: tuple[str, ...]) -> list[str]:
    """The block types of the reply that continues a tool loop."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look"}]
    first = _post(app, _body(messages, tools=[READ]), betas).json()
    assert first["content"][0]["type"] == "thinking"
    use = first["content"][-1]
    messages += [
        {"role": "assistant", "content": first["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "x"}]},
    ]
    second = _post(app, _body(messages, tools=[READ]), betas)
    assert second.status_code == 200, second.text
    return [b["type"] for b in second.json()["content"]]


def test_a_tool_loop_thinks_again_only_under_the_interleaved_beta() -> None:
    assert _loop(_tool_loop_app(), ()) == ["text"]
    assert _loop(_tool_loop_app(), (INTERLEAVED_THINKING_BETA,)) == ["thinking", "text"]


def _two_turns(app: Starlette) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    for prompt in ("two", "three"):
        reply = _post(app, _body(messages)).json()
        messages += [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": prompt}]
    return messages


def test_altered_thinking_in_the_latest_assistant_message_is_refused_with_the_api_text() -> None:
    app = create_app()
    messages = _two_turns(app)
    messages[3]["content"][0]["thinking"] += " (edited)"
    response = _post(app, _body(messages))
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "messages.3.content.0: `thinking` or `redacted_thinking` blocks in the latest assistant message "
        "cannot be modified. These blocks must remain as they were in the original response."
    )


def test_altered_thinking_in_an_earlier_message_has_an_invalid_signature() -> None:
    app = create_app()
    messages = _two_turns(app)
    messages[1]["content"][0]["thinking"] = messages[1]["content"][0]["thinking"].upper()
    response = _post(app, _body(messages))
    assert response.status_code == 400
    assert (
        response.json()["error"]["message"] == "messages.1.content.0: Invalid `signature` in `thinking` block"
    )


def test_a_signature_from_another_launch_is_refused() -> None:
    messages = _two_turns(create_app())
    assert _post(create_app(), _body(messages)).status_code == 400
    assert _post(create_app(), _body(messages, {"type": "disabled"})).status_code == 200  # ignored when off


def test_redacted_thinking_round_trips_and_refuses_edits() -> None:
    app = create_app()
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"hi {REDACTED_THINKING_TRIGGER}"}]
    reply = _post(app, _body(messages)).json()
    assert reply["content"][0]["type"] == "redacted_thinking"
    assert set(reply["content"][0]) == {"type", "data"}
    messages += [{"role": "assistant", "content": reply["content"]}, {"role": "user", "content": "go on"}]
    assert _post(app, _body(messages)).status_code == 200
    forged = copy.deepcopy(messages)
    forged[1]["content"][0]["data"] = "A" + forged[1]["content"][0]["data"][1:]
    assert _post(app, _body(forged)).status_code == 400


def test_the_streamed_reply_is_the_plain_one(serve: Callable[..., Served]) -> None:
    served = serve(config=ServerConfig(thinking_key=b"s" * 32))
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 4096,
        "thinking": OMITTED,
        "messages": [{"role": "user", "content": "hi"}],
    }
    plain = served.client.messages.create(**kwargs)
    with served.client.messages.stream(**kwargs) as stream:
        streamed = stream.get_final_message()
    assert [b.model_dump(exclude={"parsed_output"}) for b in streamed.content] == [
        b.model_dump() for b in plain.content
    ]
    assert streamed.content[0].type == "thinking"
    assert streamed.content[0].signature


# --- the property: whatever the session, a reply sent back is never refused -------------------

_PROMPTS = st.sampled_from(
    [
        "Read calc.py and explain it",
        "Run `python3 -m unittest` and fix what fails",
        "What is the staging port?",
        "Add a docstring to calc.py",
        "thanks",
        f"quick one {REDACTED_THINKING_TRIGGER}",
        "Note for later: the staging port is 6543.",
    ]
)
_TOOLS = [
    {"name": name, "description": name, "input_schema": {"type": "object"}}
    for name in ("Read", "Bash", "Glob", "Grep", "Edit", "Write")
]


def _answer_calls(content: list[dict[str, Any]], draw: st.DrawFn) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    for block in content:
        if block["type"] == "tool_use":
            text = draw(
                st.sampled_from(["ok", "calc.py\ntests/test_calc.py", "def add(a, b):\n    return a + b"])
            )
            results.append({"type": "tool_result", "tool_use_id": block["id"], "content": text})
    if results and draw(st.booleans()):  # Claude Code appends reminders beside tool results
        results.append({"type": "text", "text": "<system-reminder>keep going</system-reminder>"})
    return results


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_reply_sent_back_is_accepted(data: st.DataObject) -> None:
    draw = data.draw
    thinking: dict[str, Any] = draw(st.sampled_from([ENABLED, OMITTED, {"type": "adaptive"}]))
    betas = tuple(
        draw(st.sets(st.sampled_from([INTERLEAVED_THINKING_BETA, "context-management-2025-06-27"])))
    )
    extra: dict[str, Any] = {"tools": _TOOLS}
    if "context-management-2025-06-27" in betas:
        keep = draw(st.sampled_from(["all", {"type": "thinking_turns", "value": 1}]))
        extra["context_management"] = {"edits": [{"type": "clear_thinking_20251015", "keep": keep}]}
    app = create_app(backend=SimulatedBackend(seed=draw(st.integers(0, 5))))
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(_PROMPTS)}]
    for _ in range(draw(st.integers(3, 10))):
        body = _body(copy.deepcopy(messages), thinking, **extra)
        response = _post(app, body, betas)
        assert response.status_code == 200, response.text
        content = response.json()["content"]
        messages.append({"role": "assistant", "content": content})
        results = _answer_calls(content, draw)
        messages.append({"role": "user", "content": results or draw(_PROMPTS)})
    # The client side's validator agrees with the server on the history the server produced.
    final = _body(messages, thinking, **extra)
    limits = ValidationLimits(interleaved_thinking=INTERLEAVED_THINKING_BETA in betas)
    assert find_errors(final, limits) == []
    assert _post(app, final, betas).status_code == 200


def test_a_tool_loop_whose_thinking_was_dropped_is_refused() -> None:
    app = _tool_loop_app()
    messages: list[dict[str, Any]] = [{"role": "user", "content": "look"}]
    first = _post(app, _body(messages, tools=[READ])).json()
    use = first["content"][-1]
    messages += [
        {"role": "assistant", "content": first["content"][1:]},  # what the old server made clients send
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "x"}]},
    ]
    response = _post(app, _body(messages, tools=[READ]))
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`."
    )
