"""`foldline.testing`: the strict in-process fakes, their failures, and that they stream like the server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from foldline.config import Config, RetryConfig
from foldline.engine import QueryEngine
from foldline.errors import ModelConnectionError, ModelHTTPError
from foldline.providers.anthropic import AnthropicProvider
from foldline.providers.base import Capabilities
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.testing import run_server
from foldline.stream import (
    BlockStart,
    MessageAccumulator,
    MessageDelta,
    MessageStart,
    SignatureDelta,
    StreamEvent,
    TextDelta,
)
from foldline.testing import (
    Call,
    FunctionProvider,
    InvalidRequestSentError,
    ScriptedProvider,
    ScriptNotCompleteError,
    UnexpectedCallError,
    connection_error,
    http_error,
    in_stream_error,
    overloaded,
    prompt_too_long,
    rate_limited,
    stall,
)

MODEL = "claude-sonnet-4-5"


def _body(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 200, "messages": [{"role": "user", "content": text}], **extra}


async def _events(
    stream: AsyncIterator[StreamEvent], seen: list[StreamEvent] | None = None
) -> list[StreamEvent]:
    seen = [] if seen is None else seen
    async for event in stream:
        seen.append(event)
    return seen


async def _message(provider: ScriptedProvider | FunctionProvider, body: dict[str, Any]) -> Any:
    accumulator = MessageAccumulator()
    for event in await _events(provider.stream(body)):
        accumulator.feed(event)
    return accumulator.message()


@pytest.mark.anyio
async def test_a_reply_streams_the_events_the_anthropic_adapter_yields_from_the_server() -> None:
    reply = {"thinking": "let me see", "text": "Hello there, friend.", "tool_calls": [{"name": "Read"}]}
    body = _body(thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=2000)
    fake = await _events(ScriptedProvider([reply]).stream(body))
    with run_server(create_app(backend=ScriptedBackend(replies=[reply]))) as url:
        provider = AnthropicProvider(base_url=url, api_key="k")
        served = await _events(provider.stream(body))
        await provider.aclose()

    def comparable(events: list[StreamEvent]) -> list[object]:  # message and tool ids hash different keys
        # The server signs thinking under a key drawn per launch, so only the signature's presence compares.
        return [
            (e.model, e.usage)
            if isinstance(e, MessageStart)
            else {k: v for k, v in e.block.items() if k != "id"}
            if isinstance(e, BlockStart)
            else ("signature", bool(e.signature))
            if isinstance(e, SignatureDelta)
            else e
            for e in events
        ]

    assert comparable(fake) == comparable(served)
    assert len(fake) == 13


@pytest.mark.anyio
async def test_a_call_past_the_script_fails_and_is_remembered() -> None:
    provider = ScriptedProvider([{"text": "one"}])
    assert (await _message(provider, _body())).content == [{"type": "text", "text": "one"}]
    provider.assert_complete()
    with pytest.raises(UnexpectedCallError, match=r"1 item\(s\), all used; call #2 was not expected"):
        await _events(provider.stream(_body("again")))
    with pytest.raises(ScriptNotCompleteError, match="call #2 was not expected"):
        provider.assert_complete()  # even when the engine swallowed the first error


def test_assert_complete_names_what_was_never_used() -> None:
    provider = ScriptedProvider([{"text": "one"}, overloaded()])
    with pytest.raises(ScriptNotCompleteError, match=r"used 0 of 2 item\(s\); never used: .*'one'"):
        provider.assert_complete()


@pytest.mark.anyio
async def test_every_call_is_recorded_with_its_body_betas_and_status() -> None:
    provider = ScriptedProvider([overloaded(), {"text": "ok"}])
    body = _body()
    with pytest.raises(ModelHTTPError):
        await _events(provider.stream(body, betas=["b1"]))
    await _events(provider.stream(body))
    body["messages"].clear()  # a copy was recorded, not the caller's dict
    assert [(c.messages[0]["content"], c.betas, c.status) for c in provider.calls] == [
        ("hi", ("b1",), 529),
        ("hi", (), 200),
    ]
    assert provider.calls[1].message is not None
    assert provider.calls[1].message["content"] == [{"type": "text", "text": "ok"}]


@pytest.mark.anyio
async def test_http_errors_look_like_the_adapters() -> None:
    provider = ScriptedProvider([overloaded(), rate_limited(2.5), http_error(401, "invalid x-api-key")])
    with pytest.raises(ModelHTTPError) as first:
        await _events(provider.stream(_body()))
    error = first.value
    assert (error.status, error.error_type, error.message, error.transient) == (
        529,
        "overloaded_error",
        "Overloaded",
        True,
    )
    assert isinstance(error.body, dict)
    assert error.body["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    with pytest.raises(ModelHTTPError) as second:
        await _events(provider.stream(_body()))
    assert (second.value.status, second.value.retry_after) == (429, 2.5)
    with pytest.raises(ModelHTTPError) as third:
        await _events(provider.stream(_body()))
    assert (third.value.error_type, third.value.transient) == ("authentication_error", False)


@pytest.mark.anyio
async def test_prompt_too_long_carries_the_apis_exact_message() -> None:
    provider = ScriptedProvider([prompt_too_long(210_000, 200_000)])
    with pytest.raises(ModelHTTPError) as caught:
        await _events(provider.stream(_body()))
    assert caught.value.message == "prompt is too long: 210000 tokens > 200000 maximum"
    assert (caught.value.status, caught.value.prompt_too_long) == (400, True)


@pytest.mark.anyio
async def test_connection_errors_refused_and_cut_mid_stream() -> None:
    provider = ScriptedProvider(
        [connection_error(refused=True), connection_error(reply={"text": "a b c d e f"}, after_events=4)]
    )
    with pytest.raises(ModelConnectionError) as refused:
        await _events(provider.stream(_body()))
    assert refused.value.refused
    seen: list[StreamEvent] = []
    with pytest.raises(ModelConnectionError, match="dropped mid-stream") as cut:
        await _events(provider.stream(_body()), seen)
    assert not cut.value.refused
    # message_start, block start, ping (not a StreamEvent), one delta: 4 wire events.
    assert [type(e).__name__ for e in seen] == ["MessageStart", "BlockStart", "TextDelta"]


@pytest.mark.anyio
async def test_an_error_event_inside_a_200_stream() -> None:
    provider = ScriptedProvider([in_stream_error({"text": "partial answer"}, after_events=4)])
    seen: list[StreamEvent] = []
    with pytest.raises(ModelHTTPError) as caught:
        await _events(provider.stream(_body()), seen)
    assert (caught.value.status, caught.value.in_stream, caught.value.transient) == (200, True, True)
    assert any(isinstance(e, TextDelta) for e in seen)
    assert provider.calls[0].status == 200


@pytest.mark.anyio
async def test_an_exception_instance_is_raised_as_the_call_starts() -> None:
    provider = ScriptedProvider([RuntimeError("boom")])
    with pytest.raises(RuntimeError, match="boom"):
        await _events(provider.stream(_body()))


@pytest.mark.anyio
async def test_a_stall_is_silent_until_cancelled() -> None:
    provider = ScriptedProvider([stall({"text": "slow"}, after_events=1)])
    stream = provider.stream(_body())
    assert isinstance(await anext(stream), MessageStart)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await anext(stream)


@pytest.mark.anyio
async def test_usage_is_estimated_from_the_body_unless_given() -> None:
    provider = ScriptedProvider(
        [{"text": "one two three"}, {"text": "x", "usage": {"input_tokens": 7, "cache_read_input_tokens": 5}}]
    )
    small = (await _message(provider, _body("hi"))).usage
    big = (await _message(provider, _body("hi " * 300))).usage
    assert 0 < small.input_tokens
    assert small.output_tokens == 3
    assert (big.input_tokens, big.cache_read_input_tokens) == (7, 5)


@pytest.mark.anyio
async def test_an_invalid_body_fails_the_test_loudly() -> None:
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "assistant", "content": "hi"}]}
    body["messages"].insert(0, {"role": "user", "content": []})
    with pytest.raises(InvalidRequestSentError, match="call #1 sent a body the API rejects"):
        await _events(ScriptedProvider([{"text": "x"}]).stream(body))
    lax = ScriptedProvider([{"text": "x"}], validate=False)
    await _events(lax.stream(body))
    lax.assert_complete()


@pytest.mark.anyio
async def test_cache_edits_need_the_capability_and_its_beta() -> None:
    edit = {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "r1"}]}
    body = _body()
    body["messages"][0]["content"] = [edit, {"type": "text", "text": "hi"}]
    with pytest.raises(InvalidRequestSentError, match="without them"):
        await _events(ScriptedProvider([{"text": "x"}]).stream(body))
    caps = Capabilities(name="local", supports_cache_edits=True, cache_edits_beta="edits-1")
    with pytest.raises(InvalidRequestSentError, match="without the edits-1 beta"):
        await _events(ScriptedProvider([{"text": "x"}], capabilities=caps).stream(body))
    provider = ScriptedProvider([{"text": "x"}], capabilities=caps)
    await _events(provider.stream(body, betas=["edits-1"]))
    assert provider.capabilities.supports_cache_edits


@pytest.mark.anyio
async def test_a_context_window_answers_like_the_server_without_using_the_script() -> None:
    provider = ScriptedProvider([{"text": "fits"}], context_window=100)
    with pytest.raises(ModelHTTPError, match=r"prompt is too long: \d+ tokens > 100 maximum"):
        await _events(provider.stream(_body("word " * 200)))
    with pytest.raises(ModelHTTPError, match=r"exceed context limit: \d+ \+ 200 > 100"):
        await _events(provider.stream(_body("hi")))
    await _events(provider.stream(_body("hi", max_tokens=50)))
    assert [c.status for c in provider.calls] == [400, 400, 200]
    provider.assert_complete()


@pytest.mark.anyio
async def test_function_provider_sees_each_body_and_its_betas() -> None:
    seen: list[tuple[str, tuple[str, ...]]] = []

    async def answer(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        seen.append((body["messages"][-1]["content"], betas))
        return {"text": f"echo {len(seen)}"}

    provider = FunctionProvider(answer)
    assert (await _message(provider, _body("ping"))).content[0]["text"] == "echo 1"
    await _events(provider.stream(_body("pong"), betas=["b"]))
    assert seen == [("ping", ()), ("pong", ("b",))]
    assert [c.status for c in provider.calls] == [200, 200]


@pytest.mark.anyio
async def test_function_provider_can_fail_a_call() -> None:
    def answer(body: dict[str, Any], betas: Sequence[str]) -> Any:
        return overloaded() if len(provider.calls) == 1 else {"text": "second time lucky"}

    provider = FunctionProvider(answer)
    engine = QueryEngine(
        provider=provider,
        config=Config(model=MODEL, retry=RetryConfig(base_backoff_s=0.0, max_backoff_s=0.0)),
        instructions=False,
    )
    result = await engine.submit_message("hi")
    assert (result.text, result.attempts, [c.status for c in provider.calls]) == (
        "second time lucky",
        2,
        [529, 200],
    )
    await engine.aclose()


@pytest.mark.anyio
async def test_the_engine_retries_an_overload_then_runs_a_tool_in_process(tmp_path: Any) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    provider = ScriptedProvider(
        [overloaded(), {"tool_calls": [{"name": "Read", "input": {"file_path": "a.txt"}}]}, {"text": "done"}]
    )
    from foldline.tools import default_tools

    engine = QueryEngine(
        provider=provider,
        config=Config(model=MODEL, retry=RetryConfig(base_backoff_s=0.0, max_backoff_s=0.0)),
        tools=default_tools(),
        workspace=tmp_path,
        permission_mode="bypassPermissions",
        instructions=False,
    )
    assert (await engine.submit_message("read a")).text == "done"
    provider.assert_complete()
    assert "alpha" in repr(provider.calls[-1].messages[-1])
    assert isinstance(provider.calls[-1], Call)
    await engine.aclose()


def test_bad_script_items_fail_when_the_script_is_written() -> None:
    with pytest.raises(Exception, match="unknown reply keys"):
        ScriptedProvider([{"txt": "typo"}])
    with pytest.raises(Exception, match="answers in order"):
        ScriptedProvider([{"text": "x", "when": {"turn": 1}}])
    with pytest.raises(Exception, match="not a reply, a Failure or an exception"):
        ScriptedProvider([42])  # type: ignore[list-item]


def test_importable_without_the_server_extra() -> None:
    code = (
        "import sys; sys.modules['starlette'] = None; sys.modules['uvicorn'] = None\n"
        "import foldline.testing\n"
        "print(sorted({'starlette', 'uvicorn'} & {m for m, v in sys.modules.items() if v}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    _ = MessageDelta  # the event types the fakes yield are the stream module's own
