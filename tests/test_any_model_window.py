"""Any model, any window: limits from a flag or the server, and thresholds scaled to a small window.

An 8K model (SmolLM2-135M-Instruct's window) with design.md's absolute thresholds would compact at a
negative token count and ask for more output than its window holds; scaled to the window, every
threshold keeps its share and a request at the blocking limit still fits with its `max_tokens`.
"""

from __future__ import annotations

import pytest

from foldline.cli.chat import with_limits
from foldline.config import DESIGN_WINDOW, Config
from foldline.providers.limits import limits_from_entry, server_limits
from foldline.server.app import create_app
from foldline.server.config import ServerConfig
from foldline.server.testing import run_server


def _small(**overrides: object) -> Config:
    base: dict[str, object] = {
        "model": "smollm2-135m-instruct",
        "context_window": 8_192,
        "model_max_output": 1_024,
        "reference_window": DESIGN_WINDOW,
    }
    return Config(**{**base, **overrides})  # type: ignore[arg-type]


def test_an_8k_window_scales_every_threshold_and_keeps_them_ordered() -> None:
    config = _small()
    assert 0 < config.warning_threshold < config.autocompact_threshold < config.blocking_limit
    assert config.blocking_limit < config.effective_window < config.window
    # A prompt at the blocking limit plus the request's max_tokens fits the window: no 400.
    assert config.blocking_limit + config.output_tokens <= config.window
    assert config.escalated_output_tokens == config.output_tokens
    # Each absolute threshold keeps its 200K share.
    assert config.scaled(13_000) == 13_000 * 8_192 // 200_000
    assert config.summary_tokens == config.scaled(20_000)
    assert config.reserve == config.summary_tokens
    # ...and never exceeds the model's output limit.
    tiny_output = _small(model_max_output=100)
    assert tiny_output.summary_tokens == 100
    assert tiny_output.output_tokens == 100


def test_the_same_thresholds_unscaled_would_be_unusable() -> None:
    """What the scaling is for: without it the 8K model compacts below zero tokens."""
    assert _small(reference_window=None).autocompact_threshold < 0


def test_claudes_200k_numbers_are_unchanged_by_the_reference() -> None:
    scaled, plain = Config(reference_window=DESIGN_WINDOW), Config()
    for name in ("autocompact_threshold", "warning_threshold", "blocking_limit", "output_tokens", "reserve"):
        assert getattr(scaled, name) == getattr(plain, name)
    assert (plain.autocompact_threshold, plain.blocking_limit, plain.output_tokens) == (
        167_000,
        177_000,
        8_192,
    )
    assert Config(escalated_max_output_tokens=64_000).escalated_output_tokens == 64_000
    assert Config(model="claude-opus-4-1").escalated_output_tokens == 32_000  # the model's own limit


def test_limits_are_read_in_each_servers_form() -> None:
    assert limits_from_entry({"context_window": 8192, "max_output_tokens": 512}).context_window == 8192
    assert limits_from_entry({"max_input_tokens": 32768, "max_tokens": 4096}).max_output == 4096
    assert limits_from_entry({"id": "m", "max_model_len": 16384}).context_window == 16384  # vLLM, SGLang
    assert limits_from_entry({"id": "m", "meta": {"n_ctx_train": 8192}}).context_window == 8192  # llama.cpp
    assert limits_from_entry({"id": "m", "max_model_len": True}).context_window is None


def test_chat_takes_a_local_models_window_from_the_server_and_flags_win() -> None:
    app = create_app(ServerConfig(context_window=8_192, max_output_tokens=2_048, model_prefixes=("",)))
    with run_server(app) as base_url:
        assert server_limits(base_url, "smollm2-135m-instruct") is not None
        config = with_limits(
            Config(model="smollm2-135m-instruct"), base_url, None, context_window=None, max_output=None
        )
        assert (config.window, config.limits.max_output) == (8_192, 2_048)
        assert config.autocompact_threshold < 8_192
        flagged = with_limits(
            Config(model="smollm2-135m-instruct"), base_url, None, context_window=4_096, max_output=256
        )
        assert (flagged.window, flagged.limits.max_output) == (4_096, 256)
        # A Claude model keeps its table: the server is not asked.
        claude = with_limits(Config(), base_url, None, context_window=None, max_output=None)
        assert claude.window == 200_000


def test_a_server_that_reports_nothing_leaves_the_defaults() -> None:
    app = create_app(ServerConfig())  # claude- models only: GET /v1/models/other is a 404
    with run_server(app) as base_url:
        assert server_limits(base_url, "other-model") is None
        config = with_limits(
            Config(model="other-model"), base_url, None, context_window=None, max_output=None
        )
        assert config.window == 200_000
    assert server_limits("http://127.0.0.1:9", "m", timeout=0.5) is None  # nothing listening


@pytest.mark.parametrize("window", [4_096, 8_192, 32_768, 128_000])
def test_scaled_thresholds_hold_for_any_window(window: int) -> None:
    config = _small(context_window=window, model_max_output=window // 4)
    assert 0 < config.warning_threshold < config.autocompact_threshold < config.blocking_limit
    assert config.blocking_limit + config.output_tokens <= window


def test_a_free_summary_is_kept_whole_and_an_empty_one_never() -> None:
    from foldline.compact.prompts import SPAN_SECTIONS, SUMMARY_SECTIONS, read_summary

    # What SmolLM2-135M-Instruct answered the span prompt with (no sections at all).
    said = "I will change the tax rate in cart.py from 0.2 to 0.25."
    assert read_summary(said, SPAN_SECTIONS, free=False) is None
    assert read_summary(said, SPAN_SECTIONS, free=True) == {"Task": said, "Outcome": "", "Facts to Keep": ""}
    assert read_summary("  \n", SUMMARY_SECTIONS, free=True) is None
    sectioned = "\n".join(f"## {title}\nx" for title in SPAN_SECTIONS)
    assert read_summary(sectioned, SPAN_SECTIONS, free=True) == dict.fromkeys(SPAN_SECTIONS, "x")


def test_the_tool_result_budget_scales_with_the_window() -> None:
    assert _small().scaled(Config().tool_result_budget_chars) == 50_000 * 8_192 // 200_000
    assert Config().scaled(50_000) == 50_000


def _answering(routes: dict[str, object]) -> object:
    """A server that answers GET `path` with the JSON `routes[path]`, anything else with a 404."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def answer(request: Request) -> Response:
        found = routes.get(request.url.path)
        return JSONResponse(found) if found is not None else JSONResponse({"error": "nope"}, status_code=404)

    return Starlette(routes=[Route("/{path:path}", answer)])


def test_a_llama_server_reports_its_running_window_whatever_its_alias() -> None:
    """llama-server's `/props` (the `--ctx-size` it runs) wins over the trained window it lists."""
    app = _answering(
        {
            "/props": {"default_generation_settings": {"n_ctx": 4_096}},
            "/v1/models": {"data": [{"id": "/models/SmolLM2.gguf", "meta": {"n_ctx_train": 8_192}}]},
        }
    )
    with run_server(app) as base_url:  # type: ignore[arg-type]
        found = server_limits(base_url, "anything-at-all")
        assert found is not None
        assert found.context_window == 4_096


def test_a_llama_server_whose_template_drops_tools_gets_them_in_the_prompt() -> None:
    """`foldline chat` on llama.cpp serving SmolLM2: `/props` says the template has no tools (in the
    pinned build as a Python repr), so the chat writes them into the prompt (`Config.tools_in_prompt`)."""
    caps = "{'supports_system_role': True, 'supports_tool_calls': False, 'supports_tools': False}"
    props = {"default_generation_settings": {"n_ctx": 8_192}, "chat_template_caps": caps}
    for answered, expected in (
        (props, True),
        ({**props, "chat_template_caps": caps.replace("False}", "True}")}, False),
    ):
        with run_server(_answering({"/props": answered})) as base_url:  # type: ignore[arg-type]
            config = with_limits(
                Config(model="smollm2"), base_url, None, context_window=None, max_output=None
            )
        assert config.window == 8_192
        assert config.tools_in_prompt is expected


def test_a_vllm_server_serving_one_model_under_another_name_reports_its_window() -> None:
    app = _answering({"/v1/models": {"object": "list", "data": [{"id": "qwen", "max_model_len": 32_768}]}})
    with run_server(app) as base_url:  # type: ignore[arg-type]
        found = server_limits(f"{base_url}/v1", "my-alias")
        assert found is not None
        assert found.context_window == 32_768
    two = {"data": [{"id": "a", "max_model_len": 1_000}, {"id": "b", "max_model_len": 2_000}]}
    with run_server(_answering({"/v1/models": two})) as base_url:  # type: ignore[arg-type]
        assert server_limits(base_url, "c") is None  # which one? not guessed
        found = server_limits(base_url, "b")
        assert found is not None
        assert found.context_window == 2_000
