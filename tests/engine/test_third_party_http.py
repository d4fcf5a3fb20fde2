"""The engine over real HTTP against servers that word their errors as llama.cpp, vLLM and SGLang do.

The server is `foldline serve` (it enforces its window and injects faults) behind an ASGI layer that
rewrites its error answers into the third-party server's body, exactly as docs/deploy.md records
them: the edge that cannot be reached here (vLLM and SGLang need a GPU; a llama-server that fails
on cue does not exist). tests/interop/test_llama_server.py runs the real llama-server.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from tests.llama_shapes import replay_tool_call

from foldline._json import dumps, loads
from foldline.compact.autocompact import install_autocompact
from foldline.compact.prompts import SUMMARY_SECTIONS
from foldline.config import AutoCompactConfig, Config, RetryConfig
from foldline.events import RetryEvent
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.config import ServerConfig
from foldline.server.faults import parse_faults
from foldline.server.testing import run_server

from .conftest import Harness

pytestmark = pytest.mark.anyio

_TOO_LONG = re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum")


def _llama_cpp(prompt: int, limit: int) -> tuple[int, dict[str, Any]]:
    message = (
        f"request ({prompt} tokens) exceeds the available context size ({limit} tokens), try increasing it"
    )
    return 400, {
        "error": {
            "code": 400,
            "message": message,
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": limit,
        }
    }


def _vllm(prompt: int, limit: int) -> tuple[int, dict[str, Any]]:
    message = (
        f"You passed {prompt} input tokens and requested 500 output tokens. However, the model's context "
        f"length is only {limit} tokens, resulting in a maximum input length of {limit - 500} tokens. "
        f"Please reduce the length of the input prompt. (parameter=input_tokens, value={prompt})"
    )
    return 400, {"type": "error", "error": {"type": "BadRequestError", "message": message}}


def _sglang(prompt: int, limit: int) -> tuple[int, dict[str, Any]]:
    message = f"The input ({prompt} tokens) is longer than the model's context length ({limit} tokens)."
    return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


DIALECTS = {"llama.cpp": _llama_cpp, "vllm": _vllm, "sglang": _sglang}


class Dialect:
    """ASGI middleware: the wrapped server's error answers, reworded as a third-party server's.

    A prompt-too-long 400 becomes `overflow(prompt, limit)`; an injected 500 becomes llama.cpp's
    peg-native 500; an injected 529 becomes llama.cpp's 503 `unavailable_error`. Every request's
    headers are kept (`headers`).
    """

    def __init__(self, app: ASGIApp, overflow: Callable[[int, int], tuple[int, dict[str, Any]]]) -> None:
        self.app = app
        self.overflow = overflow
        self.headers: list[dict[str, str]] = []
        self.statuses: list[int] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        held: list[Message] = []

        async def reword(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400:
                held.append(message)
                return
            if not held:
                await send(message)
                return
            held.append(message)
            if message.get("more_body"):
                return
            body = b"".join(m.get("body", b"") for m in held[1:])
            status, rewritten = self._rewritten(held[0]["status"], loads(body))
            self.statuses.append(status)
            data = dumps(rewritten)
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": data})

        await self.app(scope, receive, reword)

    def _rewritten(self, status: int, body: Any) -> tuple[int, Any]:
        message = str(body.get("error", {}).get("message", "")) if isinstance(body, dict) else ""
        if found := _TOO_LONG.search(message):
            return self.overflow(int(found[1]), int(found[2]))
        if status == 500:
            text = "The model produced output that does not match the expected peg-native format"
            return 500, {"error": {"code": 500, "message": text, "type": "server_error"}}
        if status == 529:
            return 503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
        return status, body


def _summary() -> str:
    return "\n\n".join(f"## {title}\nthe port is 6543 ({title.lower()})" for title in SUMMARY_SECTIONS)


def _config() -> Config:
    return Config(
        model="claude-sonnet-4-5",
        context_window=20_000,
        output_reserve=2_000,
        max_output_tokens=500,
        snip_enabled=False,
        retry=RetryConfig(base_backoff_s=0.01, max_backoff_s=0.05),
        autocompact=AutoCompactConfig(
            buffer_tokens=1_000, warning_below_threshold=2_000, summary_max_tokens=1_000
        ),
    )


@pytest.fixture
async def third_party(tmp_path: Path) -> AsyncIterator[Callable[..., tuple[Harness, Dialect]]]:
    started: list[Harness] = []
    with ExitStack() as stack:

        def start(
            replies: list[dict[str, Any]], dialect: str, *, window: int | None = None, faults: str = ""
        ) -> tuple[Harness, Dialect]:
            backend = ScriptedBackend(replies=replies, select="sequence", strict=True)
            server = ServerConfig(context_window=window) if window else None
            plan = parse_faults(faults) if faults else None
            app = Dialect(create_app(server, backend=backend, faults=plan), DIALECTS[dialect])
            url = stack.enter_context(run_server(app))
            workspace = tmp_path / "ws"
            workspace.mkdir(exist_ok=True)
            h = Harness(workspace, tmp_path / "s1.jsonl", _config(), url=url, backend=backend)
            started.append(h)
            return h, app

        yield start
        for h in started:
            await h.close()


@pytest.mark.parametrize("dialect", list(DIALECTS))
async def test_a_third_party_overflow_compacts_reactively_and_the_turn_completes(
    third_party: Callable[..., tuple[Harness, Dialect]], dialect: str
) -> None:
    summary = {"text": _summary(), "when": {"last_user_contains": "Your task is to write a detailed summary"}}
    h, app = third_party([summary, *({"text": f"reply {i}"} for i in range(4))], dialect, window=5_000)
    engine = await h.engine()
    stage = install_autocompact(engine)
    await engine.submit_message("hello")
    words = lambda n, tag: " ".join(f"{tag}{i}" for i in range(n))  # noqa: E731
    for turn, n in ((1, 600), (2, 600), (3, 1_000)):
        result = await engine.submit_message(f"p{turn} " + words(n, f"p{turn}w"))
    assert result.text == "reply 3"
    assert 400 in app.statuses  # the server refused in its own words...
    assert stage.receipts[-1].data is not None
    assert stage.receipts[-1].data["trigger"] == "reactive"  # ...and foldline compacted on it


async def test_the_botched_tool_call_500_and_a_loading_503_are_retried(
    third_party: Callable[..., tuple[Harness, Dialect]],
) -> None:
    h, app = third_party([{"text": "one"}, {"text": "two"}], "llama.cpp", faults="1:500,3:529")
    engine = await h.engine()
    events: list[Any] = []
    engine.events.subscribers.append(events.append)
    assert (await engine.submit_message("hi")).text == "one"
    assert (await engine.submit_message("again")).text == "two"
    assert app.statuses == [500, 503]
    reasons = [e.reason for e in events if isinstance(e, RetryEvent)]
    assert "peg-native" in reasons[0]
    assert "Loading model" in reasons[1]


async def test_the_key_goes_as_x_api_key_and_as_a_bearer_token(
    third_party: Callable[..., tuple[Harness, Dialect]],
) -> None:
    h, app = third_party([{"text": "ok"}], "llama.cpp")
    engine = await h.engine()
    await engine.submit_message("hi")
    sent = app.headers[-1]
    assert sent["x-api-key"] == "k"  # Harness's provider key
    assert sent["authorization"] == "Bearer k"


async def test_llama_servers_tool_call_and_thinking_shapes_run_the_tool_and_finish_the_turn(
    tmp_path: Path,
) -> None:
    text, bodies, path = await replay_tool_call(tmp_path)
    assert text.strip() == "It adds two numbers."
    follow_up = bodies[1]["messages"]
    said = follow_up[-2]
    assert said["role"] == "assistant"
    assert [block["type"] for block in said["content"]] == ["thinking", "text", "tool_use"]
    assert said["content"][0]["signature"] == ""  # as the server gave it: it checks none
    call = said["content"][-1]
    assert call["input"] == {"file_path": str(path)}
    [answered] = [b for b in follow_up[-1]["content"] if b["type"] == "tool_result"]
    assert answered["tool_use_id"] == "call_replayed0"
    assert "def add" in str(answered["content"])
