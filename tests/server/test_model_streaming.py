"""`foldline serve --backend transformers` behaves like a server: it streams token by token, a client
that leaves cancels its generation, other requests are answered meanwhile, SIGTERM stops it.

The model is the tiny random one (`server.model.tiny`): greedy decoding of "Hi" does not reach its
end-of-turn token (not in 4,000 tokens), so a generation runs as long as it is allowed, at 2 to 15
ms a token on 2 cores: one nobody stops would outlast the bounds asserted here several times over
(the in-process tests check that from the rate they measure; the signal test checks that its stream
was cut mid-generation). Real HTTP (uvicorn on a free port), the official SDK or httpx2; a real
subprocess for the signals.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("torch")
pytest.importorskip("transformers")

from foldline.server.app import create_app
from foldline.server.backend import BackendRequest, Reply
from foldline.server.caching import CACHE_EDITS_BETA
from foldline.server.config import ServerConfig
from foldline.server.model.backend import TransformersBackend, shown_text
from foldline.server.model.tiny import write_tiny_model
from foldline.server.model.toolcalls import parse_tool_calls
from foldline.server.testing import run_server

LONG = 8_000
"""max_tokens of a generation that must be stopped: many seconds of decoding if it is not."""

HI: Any = [{"role": "user", "content": "Hi"}]

_SHUTDOWN = "The server is shutting down; retry the request."
"""What a stream cut by the server stopping says, in its `overloaded_error` event."""


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def backend(model_dir: Path) -> TransformersBackend:
    return TransformersBackend.load(model_dir, min_cache_tokens=16)


@pytest.fixture
def steps(backend: TransformersBackend) -> list[float]:
    """When each forward pass of `backend` began (prefill chunks, then one per decoded token)."""
    began: list[float] = []
    forward = backend.forward

    def timed(*args: Any, **kwargs: Any) -> Any:
        began.append(time.monotonic())
        return forward(*args, **kwargs)

    backend.forward = timed  # type: ignore[method-assign]
    return began


def _left_seconds(steps: list[float]) -> float:
    """How long the running generation would still decode if nobody stopped it (from its rate)."""
    per_token = (steps[-1] - steps[-11]) / 10
    return (LONG - len(steps)) * per_token


@pytest.fixture
def url(backend: TransformersBackend) -> Iterator[str]:
    with run_server(create_app(ServerConfig(model_prefixes=("",)), backend=backend)) as base:
        yield base


def _body(max_tokens: int, *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    return {"model": "tiny", "max_tokens": max_tokens, "stream": stream, "messages": HI, **extra}


class _Stream:
    """A raw streamed `/v1/messages` request, read event by event, timed."""

    def __init__(self, client: httpx2.Client, body: dict[str, Any]) -> None:
        self.start = time.monotonic()
        self._context = client.stream("POST", "/v1/messages", json=body)
        self.response = self._context.__enter__()
        assert self.response.status_code == 200
        self._lines = self.response.iter_lines()

    def next_event(self) -> tuple[str, dict[str, Any]]:
        name = ""
        for line in self._lines:
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                return name, json.loads(line[6:])
        raise EOFError("the stream ended")

    def until_deltas(self, count: int) -> None:
        """Read until `count` text deltas came."""
        seen = 0
        while seen < count:
            name, _ = self.next_event()
            seen += name == "content_block_delta"

    def close(self) -> None:
        self._context.__exit__(None, None, None)


def _seconds_to_first_event(url: str, max_tokens: int = 4) -> float:
    """Seconds until a new streamed request's first event arrives (on a new connection)."""
    with httpx2.Client(base_url=url, timeout=30) as client:
        stream = _Stream(client, _body(max_tokens))
        try:
            stream.next_event()
            return time.monotonic() - stream.start
        finally:
            stream.close()


@pytest.fixture
def client(url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as sdk:
        yield sdk


def test_the_first_token_streams_long_before_the_reply_ends(client: anthropic.Anthropic) -> None:
    start = time.monotonic()
    arrivals: list[float] = []
    texts: list[str] = []
    with client.messages.stream(model="tiny", max_tokens=120, messages=HI) as stream:
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                arrivals.append(time.monotonic() - start)
                texts.append(event.delta.text)
        final = stream.get_final_message()
    total = time.monotonic() - start
    assert len(arrivals) > 30  # token by token (one delta per completed character), not one block
    # Streamed, the deltas spread over the generation; sent as one block they would all arrive
    # together at its end. (A fixed share of the total fails on an idle machine, where the tiny
    # model generates 120 tokens in a fifth of a second and the prefill is a third of that.)
    assert arrivals[0] < arrivals[-1] / 2, (arrivals[0], arrivals[-1], total)
    assert final.stop_reason == "max_tokens"
    assert final.usage.output_tokens == 120
    assert final.usage.input_tokens > 0
    assert final.content[0].type == "text"
    assert final.content[0].text == "".join(texts)


def test_a_streamed_reply_is_the_plain_reply(client: anthropic.Anthropic) -> None:
    plain = client.messages.create(model="tiny", max_tokens=40, messages=HI)
    with client.messages.stream(model="tiny", max_tokens=40, messages=HI) as stream:
        streamed = stream.get_final_message()
    assert streamed.model_dump() == plain.model_dump()


def test_a_tool_call_streams_its_text_then_the_call(
    backend: TransformersBackend, client: anthropic.Anthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = 'Checking it.  <tool_call>{"name": "Read", "arguments": {"path": "b.py"}}</tool_call>'
    ids = backend.tokenizer(said, add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(backend, "_tokens", lambda prefill, max_tokens, cancelled: iter(ids))
    tools: Any = [{"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}}]
    deltas: list[str] = []
    with client.messages.stream(model="tiny", max_tokens=200, messages=HI, tools=tools) as stream:
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                deltas.append(event.delta.text)
        streamed = stream.get_final_message()
    plain = client.messages.create(model="tiny", max_tokens=200, messages=HI, tools=tools)
    assert len(deltas) > 1  # the text came as it was decoded...
    assert "".join(deltas) == "Checking it."  # ...and nothing of the call, nor the space before it
    assert streamed.stop_reason == "tool_use"
    assert [b.type for b in streamed.content] == ["text", "tool_use"]
    assert streamed.content[1].input == {"path": "b.py"}  # type: ignore[union-attr]
    assert streamed.usage.output_tokens == len(ids)
    assert streamed.model_dump() == plain.model_dump()


def test_cache_edits_and_the_prompt_cache_answer_the_same_streamed(client: anthropic.Anthropic) -> None:
    """The backend's prefix K/V cache and a cache_edits delete, through the streaming path: a
    streamed request bills and answers exactly as the same request answered plain."""
    beta = {"anthropic-beta": CACHE_EDITS_BETA}
    delete = {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "read-1"}]}

    def conversation(last: list[dict[str, Any]]) -> Any:
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "def main(): pass\n" * 8}
        return [
            {"role": "user", "content": "read main.py please"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {**result, "cache_reference": "read-1"},
                    {"type": "text", "text": "here it is", "cache_control": {"type": "ephemeral"}},
                ],
            },
            {"role": "assistant", "content": "It defines main."},
            {"role": "user", "content": last},
        ]

    question = [{"type": "text", "text": "what next?", "cache_control": {"type": "ephemeral"}}]
    first = client.messages.create(model="tiny", max_tokens=6, messages=conversation(question))
    assert first.usage.cache_creation_input_tokens > 0
    edited = conversation([delete, *question])
    client.messages.create(model="tiny", max_tokens=6, messages=edited, extra_headers=beta)
    plain = client.messages.create(model="tiny", max_tokens=6, messages=edited, extra_headers=beta)
    with client.messages.stream(model="tiny", max_tokens=6, messages=edited, extra_headers=beta) as stream:
        streamed = stream.get_final_message()
    assert plain.usage.cache_read_input_tokens > 0  # the K/V the request before stored
    assert streamed.model_dump() == plain.model_dump()


def test_a_client_that_disconnects_frees_the_model(
    backend: TransformersBackend, url: str, steps: list[float]
) -> None:
    # how fast (under a second on a quiet machine) is benchmarks/transformers_serving.py's figure;
    # here, a bound no load breaks: the next request does not wait out the abandoned generation
    with httpx2.Client(base_url=url, timeout=30) as client:
        stream = _Stream(client, _body(LONG))
        stream.until_deltas(20)  # it is generating
        left = _left_seconds(steps)
        assert left > 3  # unstopped, it would hold the model this long
        stream.close()  # the client goes away mid-generation
    freed = _seconds_to_first_event(url)
    assert freed < left / 3, f"the next request waited {freed:.2f} s of the {left:.1f} s left to decode"
    assert len(backend.calls) == 2
    assert len(steps) < LONG / 2  # the abandoned generation stopped (and the second was short)


def test_a_plain_request_whose_client_gives_up_is_cancelled(url: str, steps: list[float]) -> None:
    """The client that times out and retries: its abandoned generation must not run on."""
    with httpx2.Client(base_url=url, timeout=1.0) as client, pytest.raises(httpx2.ReadTimeout):
        client.post("/v1/messages", json=_body(LONG, stream=False))
    left = _left_seconds(steps)
    assert left > 3
    freed = _seconds_to_first_event(url)
    assert freed < left / 3, f"the next request waited {freed:.2f} s of the {left:.1f} s left to decode"
    assert len(steps) < LONG / 2


def test_other_requests_are_answered_while_a_generation_runs(url: str, steps: list[float]) -> None:
    count_body = {"model": "tiny", "messages": HI}
    with httpx2.Client(base_url=url, timeout=30) as client, httpx2.Client(base_url=url, timeout=5) as other:
        stream = _Stream(client, _body(LONG))
        stream.until_deltas(20)
        assert _left_seconds(steps) > 3
        for _ in range(3):
            asked = time.monotonic()
            assert other.get("/v1/models").status_code == 200
            counted = other.post("/v1/messages/count_tokens", json=count_body)
            assert counted.status_code == 200
            assert counted.json()["input_tokens"] > 0
            answered = time.monotonic() - asked
            assert answered < 0.5, f"/v1/models and count_tokens took {answered:.2f} s during a generation"
            stream.until_deltas(5)  # and the generation goes on meanwhile
        stream.close()


def test_a_queued_generation_whose_client_leaves_leaves_the_queue(backend: TransformersBackend) -> None:
    request = BackendRequest(model="tiny", messages=HI, max_tokens=LONG)
    running = backend.generate(request)
    next(running)  # prefilled: this generation holds the model
    gone = threading.Event()
    pieces: list[object] = []

    def queued() -> None:
        pieces.extend(backend.generate(request, gone.is_set))

    waiter = threading.Thread(target=queued)
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive()  # waiting for the model
    gone.set()
    waiter.join(timeout=1.0)
    assert not waiter.is_alive()
    assert pieces == []  # it never ran
    running.close()  # the first one stops too, and the model is free
    assert isinstance(
        list(backend.generate(BackendRequest(model="tiny", messages=HI, max_tokens=2)))[-1], Reply
    )


def test_a_prefill_in_chunks_is_the_prefill_in_one_pass(model_dir: Path) -> None:
    import torch

    whole = TransformersBackend.load(model_dir, prefill_chunk_tokens=10_000)
    chunked = TransformersBackend.load(model_dir, prefill_chunk_tokens=7)
    request = BackendRequest(
        model="tiny", messages=[{"role": "user", "content": "Explain " * 20}], max_tokens=8
    )
    prompt = whole.render(request)
    one = whole.prefill(prompt, keep_all=True)
    many = chunked.prefill(prompt, keep_all=True)
    assert one.logits.shape == many.logits.shape == (len(prompt.token_ids), whole.model.config.vocab_size)
    torch.testing.assert_close(many.logits, one.logits, atol=1e-4, rtol=0)
    assert whole.reply(request).content == chunked.reply(request).content


def test_a_cancelled_prefill_stops_between_chunks(model_dir: Path) -> None:
    chunked = TransformersBackend.load(model_dir, prefill_chunk_tokens=4)
    calls = 0
    forward = chunked.forward

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return forward(*args, **kwargs)

    chunked.forward = counted  # type: ignore[method-assign]
    request = BackendRequest(
        model="tiny", messages=[{"role": "user", "content": "Explain " * 20}], max_tokens=8
    )
    assert list(chunked.generate(request, lambda: calls >= 3)) == []
    assert calls == 3  # of the prompt's 40-odd chunks
    assert len(chunked.cache) == 0


_PIECES = st.sampled_from(
    [
        "Hi",
        " ",
        "\n",
        "<",
        "<tool",
        "_call>",
        "<tool_call>",
        "</tool_call>",
        "{",
        "[",
        "`",
        "x",
        '"name"',
        "}",
    ]
)


@given(st.lists(_PIECES, max_size=12), st.booleans())
def test_what_is_shown_only_grows_and_is_the_start_of_the_final_text(pieces: list[str], tools: bool) -> None:
    text, shown = "", ""
    for piece in pieces:
        text += piece
        now = shown_text(text, tools=tools)
        assert now.startswith(shown)
        shown = now
    final = parse_tool_calls(text, {"Read"})[0] if tools else text
    assert final.startswith(shown)


def test_shown_text_holds_back_what_may_be_a_call() -> None:
    assert shown_text("Sure. <tool_c", tools=True) == "Sure."
    assert shown_text("Sure. <tool_call>{", tools=True) == "Sure."
    assert shown_text("  Sure. <b> ", tools=True) == "Sure. <b>"
    assert shown_text('{"name": "Read"', tools=True) == ""
    assert shown_text("  <tool_c", tools=False) == "  <tool_c"


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _serve(model_dir: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    command = [sys.executable, "-c", "from foldline.cli import main; main()", "serve", "--port", "0"]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*command, "--backend", "transformers", "--model", str(model_dir)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            # Ctrl-C as a terminal sends it: a suite started as a shell's background job ignores
            # SIGINT, the server would inherit that, and uvicorn's re-raise on the way out would be
            # ignored too (exit 0 instead of click's Abort)
            preexec_fn=_default_sigint,
        )
    deadline = time.monotonic() + 120
    while True:
        found = re.search(r"foldline serve \(transformers\) on (http://127\.0\.0\.1:\d+)", log.read_text())
        if found:
            return process, found.group(1)
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_foldline_serve_mid_generation(
    model_dir: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    """How fast (under a second on a quiet machine) is benchmarks/transformers_serving.py's
    figure; here, that the generation stopped mid-way: far fewer tokens than it would decode."""
    process, base = _serve(model_dir, tmp_path / "serve.log")
    try:
        with httpx2.Client(base_url=base, timeout=120) as client:
            stream = _Stream(client, _body(LONG))
            stream.until_deltas(20)
            process.send_signal(sig)
            code = process.wait(timeout=120)  # a hang, not a slow machine, reaches this
            events = []
            try:
                while True:
                    events.append(stream.next_event())
            except (EOFError, httpx2.HTTPError):
                pass
            stream.close()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    log = (tmp_path / "serve.log").read_text()
    deltas = 20 + [name for name, _ in events].count("content_block_delta")
    assert deltas < LONG / 10, f"{sig.name} let {deltas} of {LONG} tokens through\n{log}"
    assert code in (-sig, 1), log  # killed by its own signal re-raised (SIGTERM), or click's Abort (Ctrl-C)
    assert "Traceback" not in log
    # The stream was mid-generation (no message_stop) and ended saying why, not cut off silently.
    assert ("error", {"type": "error", "error": {"type": "overloaded_error", "message": _SHUTDOWN}}) in events
    assert "message_stop" not in [name for name, _ in events]
    with pytest.raises(httpx2.TransportError):  # and the server went with it
        httpx2.get(f"{base}/v1/models", timeout=2)
