"""Error answers of the servers people run (llama.cpp, vLLM, SGLang) typed as the API's own are.

Each body is the server's documented form (docs/deploy.md): llama.cpp's as a running llama-server
answered it, vLLM's and SGLang's as their sources word them. The recovery each type gets is decided
by `turn.decide`, so a test of the type plus one of the decision covers what a turn does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from foldline.config import DESIGN_WINDOW, Config
from foldline.errors import (
    BadOutputError,
    ModelHTTPError,
    OutputRoomError,
    OverloadedError,
    PromptTooLongAPIError,
    UserError,
)
from foldline.providers.base import http_error
from foldline.providers.limits import fit_thinking, running_window
from foldline.turn import Failure, Recover, TurnState, decide

LLAMA_OVERFLOW = {
    "error": {
        "code": 400,
        "message": (
            "request (10033 tokens) exceeds the available context size (8192 tokens), try increasing it"
        ),
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 10033,
        "n_ctx": 8192,
    }
}


def _typed(status: int, body: dict[str, Any]) -> ModelHTTPError:
    """What `AnthropicProvider` makes of the answer: the SDK reads `error.message` and `error.type`."""
    error = body.get("error", {})
    return http_error("m", status, body, str(error.get("message", "")), error_type=str(error.get("type", "")))


def _vllm(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "BadRequestError", "message": message}}


def _sglang(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def test_llama_cpp_overflow_is_prompt_too_long_with_its_numbers() -> None:
    error = _typed(400, LLAMA_OVERFLOW)
    assert isinstance(error, PromptTooLongAPIError)
    assert (error.prompt_tokens, error.limit, error.gap) == (10033, 8192, 1841)
    assert not error.transient
    assert decide(TurnState(max_tokens=819), Failure(error), Config()) == Recover("compact", gap=1841)


def test_llama_cpp_overflow_is_read_from_its_text_or_its_type_alone() -> None:
    text_only = {"error": {"code": 400, "message": LLAMA_OVERFLOW["error"]["message"], "type": "x"}}
    error = _typed(400, text_only)
    assert isinstance(error, PromptTooLongAPIError)
    assert error.gap == 1841
    bare = _typed(400, {"error": {"code": 400, "message": "too big", "type": "exceed_context_size_error"}})
    assert isinstance(bare, PromptTooLongAPIError)
    assert bare.gap is None  # recovery compacts with an unknown gap


@pytest.mark.parametrize(
    ("body", "prompt", "limit"),
    [
        (
            _vllm(
                "You passed 20001 input tokens and requested 1000 output tokens. However, the model's "
                "context length is only 16384 tokens, resulting in a maximum input length of 15384 "
                "tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=20001)"
            ),
            20001,
            16384,
        ),
        (
            _vllm(
                "This model's maximum context length is 16384 tokens. However, you requested 1000 output "
                "tokens and your prompt contains at least 16385 input tokens, for a total of at least "
                "17385 tokens. Please reduce the length of the input prompt or the number of requested "
                "output tokens. (parameter=input_tokens, value=16385)"
            ),
            16385,
            16384,
        ),
        (
            _vllm(
                "This model's maximum context length is 16384 tokens. However, you requested 122946 tokens "
                "(112946 in the messages, 10000 in the completion). Please reduce the length of the "
                "messages or completion."
            ),
            112946,
            16384,
        ),
        (
            _vllm(
                "This model's maximum context length is 4096 tokens. However, your messages resulted in "
                "6,988 tokens. Please reduce the length of the messages."
            ),
            6988,
            4096,
        ),
        (
            _sglang("The input (131123 tokens) is longer than the model's context length (131072 tokens)."),
            131123,
            131072,
        ),
    ],
    ids=["vllm-current", "vllm-0.10", "vllm-old", "openai-style", "sglang"],
)
def test_vllm_and_sglang_overflows_are_prompt_too_long(body: dict[str, Any], prompt: int, limit: int) -> None:
    error = _typed(400, body)
    assert isinstance(error, PromptTooLongAPIError)
    assert (error.prompt_tokens, error.limit) == (prompt, limit)
    assert decide(TurnState(max_tokens=1000), Failure(error), Config()) == Recover(
        "compact", gap=prompt - limit
    )


@pytest.mark.parametrize(
    "body",
    [
        _vllm(
            "You passed 12000 input tokens and requested 8000 output tokens. However, the model's context "
            "length is only 16384 tokens, resulting in a maximum input length of 8384 tokens."
        ),
        _sglang(
            "Requested token count exceeds the model's maximum context length of 16384 tokens. You "
            "requested a total of 20000 tokens: 12000 tokens from the input messages and 8000 tokens for "
            "the completion. Please reduce the number of tokens in the input messages or the completion "
            "to fit within the limit."
        ),
    ],
    ids=["vllm", "sglang"],
)
def test_a_prompt_that_fits_without_its_output_shrinks_the_reply(body: dict[str, Any]) -> None:
    error = _typed(400, body)
    assert isinstance(error, OutputRoomError)
    assert (error.prompt_tokens, error.max_tokens, error.limit, error.room) == (12000, 8000, 16384, 4384)
    assert decide(TurnState(max_tokens=8000), Failure(error), Config()) == Recover(
        "shrink_output", max_tokens=4384
    )


def test_the_peg_native_500_is_bad_output_and_retried() -> None:
    body = {
        "error": {
            "code": 500,
            "message": "The model produced output that does not match the expected peg-native format",
            "type": "server_error",
        }
    }
    error = _typed(500, body)
    assert isinstance(error, BadOutputError)
    assert error.transient


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (
            503,
            {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
            OverloadedError,
        ),
        (
            503,
            {"object": "error", "message": "Service Unavailable", "type": "ServiceUnavailableError"},
            OverloadedError,
        ),
        (
            429,
            {"error": {"code": 429, "message": "rate limited", "type": "rate_limit_error"}},
            ModelHTTPError,
        ),
    ],
    ids=["llama-cpp-loading", "vllm-503", "429"],
)
def test_busy_servers_are_retried(status: int, body: dict[str, Any], kind: type[ModelHTTPError]) -> None:
    error = _typed(status, body)
    assert type(error) is kind
    assert error.transient


def test_an_in_stream_unavailable_error_is_retried_and_a_plain_400_is_not() -> None:
    body = {"error": {"type": "unavailable_error", "message": "busy"}}
    assert http_error("m", 200, body, "busy", in_stream=True).transient
    other = _typed(400, {"error": {"code": 400, "message": "'messages' is required", "type": "x"}})
    assert type(other) is ModelHTTPError
    assert not other.transient


def test_llama_server_props_give_the_running_window() -> None:
    assert running_window({"default_generation_settings": {"n_ctx": 4096}, "n_ctx": 8192}) == 4096
    assert running_window({"n_ctx": 2048}) == 2048
    assert running_window({"default_generation_settings": {}}) is None
    assert running_window(["not", "props"]) is None


def _window(window: int, budget: int) -> Config:
    return Config(
        model="smollm2-135m-instruct",
        context_window=window,
        reference_window=DESIGN_WINDOW,
        thinking_budget_tokens=budget,
    )


def test_thinking_on_an_8k_window_is_scaled_to_fit_every_request() -> None:
    config = _window(8_192, 8_000)
    assert config.output_tokens <= 8_000  # as it was: no request could carry the budget
    fitted = fit_thinking(config)
    budget = fitted.thinking_budget_tokens
    assert budget == 1_024  # the API's least budget: 8,000 scaled to 8K is below it
    assert budget < fitted.output_tokens  # the main loop's requests
    assert budget < fitted.summary_tokens  # compaction's
    assert fitted.blocking_limit + fitted.output_tokens <= fitted.window
    assert 0 < fitted.autocompact_threshold < fitted.blocking_limit
    assert fitted.window - fitted.reserve >= fitted.window // 2


def test_thinking_on_a_window_too_small_for_it_is_refused_with_the_reason() -> None:
    with pytest.raises(UserError, match=r"does not fit a 2,048-token window.*--no-thinking"):
        fit_thinking(_window(2_048, 8_000))


def test_thinking_that_already_fits_is_left_alone() -> None:
    config = Config(thinking_budget_tokens=8_000, reference_window=DESIGN_WINDOW)
    assert fit_thinking(config) is config
    big = _window(128_000, 2_000)
    assert fit_thinking(big) is big


def test_chat_fits_thinking_to_a_small_window_or_refuses_it_at_start(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from foldline.cli import cli
    from foldline.server.app import create_app
    from foldline.server.backend import ScriptedBackend
    from foldline.server.config import ServerConfig
    from foldline.server.testing import run_server

    backend = ScriptedBackend()  # echoes
    app = create_app(
        ServerConfig(context_window=8_192, max_output_tokens=4_096, model_prefixes=("",)), backend=backend
    )
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with run_server(app) as url:
        argv = [
            "chat",
            "--base-url",
            url,
            "--workspace",
            str(workspace),
            "--sessions-dir",
            str(tmp_path / "s"),
        ]
        argv += ["--model", "smollm2-135m-instruct", "--thinking", "-p", "hi"]
        done = CliRunner().invoke(cli, argv)
        assert done.exit_code == 0, done.output
        sent = backend.calls[-1]
        assert sent.thinking == {"type": "enabled", "budget_tokens": 1_024}  # the window came from the server
        assert 1_024 < sent.max_tokens <= 4_096
        refused = CliRunner().invoke(cli, [*argv, "--context-window", "2048"])
        assert refused.exit_code == 1
        assert "--thinking does not fit a 2,048-token window" in refused.output
        assert len(backend.calls) == 1  # refused before any request
