"""cache_edits over HTTP: deletes mask a tool_result for one request and keep the cached prefix."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anthropic
import pytest
from tests.server.conftest import MODEL, Served, words

from foldline.errors import RequestValidationError
from foldline.providers.anthropic import AnthropicProvider
from foldline.server.backend import ScriptedBackend
from foldline.server.caching import CACHE_EDITS_BETA, cache_edits_deletions, flatten
from foldline.server.config import ServerConfig
from foldline.server.tokenizer import count_text

BETA = {"anthropic-beta": f"other-beta-2025-01-01,{CACHE_EDITS_BETA}"}
FILE_TEXT = "def main():" + words(1200, "f")
DELETE = {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "read-1"}]}


def _conversation(last_user: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "read main.py please"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": FILE_TEXT,
                    "cache_reference": "read-1",
                },
                {"type": "text", "text": "here it is", "cache_control": {"type": "ephemeral"}},
            ],
        },
        {"role": "assistant", "content": "It defines main."},
        {"role": "user", "content": last_user},
    ]


def _create(served: Served, last_user: list[dict[str, Any]], headers: dict[str, str] | None = None) -> Any:
    return served.client.messages.create(
        model=MODEL, max_tokens=50, messages=_conversation(last_user), extra_headers=headers or {}
    )


def _backend_saw_file(backend: ScriptedBackend) -> bool:
    return any(FILE_TEXT in str(m["content"]) for m in backend.calls[-1].messages)


def test_delete_masks_the_span_and_keeps_the_prefix(serve: Callable[..., Served]) -> None:
    backend = ScriptedBackend()
    served = serve(backend=backend)
    question = [{"type": "text", "text": "what next?"}]
    first = _create(served, question)
    prefix = flatten({"model": MODEL, "messages": _conversation(question)})[3].end
    assert first.usage.cache_creation_input_tokens == prefix
    assert _backend_saw_file(backend)

    edited = _create(served, [DELETE, *question], BETA)
    deleted = count_text(FILE_TEXT)
    assert edited.usage.model_extra["cache_deleted_input_tokens"] == deleted
    # The prefix still reads (its key is unchanged); the deleted span is billed nowhere.
    assert edited.usage.cache_read_input_tokens == prefix - deleted
    total = flatten({"model": MODEL, "messages": _conversation([DELETE, *question])})[-1].end
    billed = edited.usage.input_tokens + edited.usage.cache_read_input_tokens
    assert billed + edited.usage.cache_creation_input_tokens == total - deleted
    assert not _backend_saw_file(backend)
    assert all("cache_edits" not in str(m["content"]) for m in backend.calls[-1].messages)
    assert served.state.references.spans["read-1"].end - served.state.references.spans[
        "read-1"
    ].start == count_text(FILE_TEXT)

    again = _create(served, question)
    assert _backend_saw_file(backend)
    assert again.usage.cache_read_input_tokens == prefix
    assert "cache_deleted_input_tokens" not in (again.usage.model_extra or {})


def test_edits_need_the_beta_header(serve: Callable[..., Served]) -> None:
    served = serve()
    with pytest.raises(anthropic.BadRequestError) as caught:
        _create(served, [DELETE, {"type": "text", "text": "next"}])
    assert CACHE_EDITS_BETA in caught.value.body["error"]["message"]  # type: ignore[index]
    assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (
            {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "nope"}]},
            "'nope' does not match any tool_result seen so far",
        ),
        ({"type": "cache_edits", "edits": []}, "non-empty"),
        ({"type": "cache_edits", "edits": [{"type": "insert", "cache_reference": "read-1"}]}, "'delete'"),
    ],
    ids=["unknown-reference", "no-edits", "bad-type"],
)
def test_bad_edits_are_400s(serve: Callable[..., Served], edit: dict[str, Any], fragment: str) -> None:
    served = serve()
    with pytest.raises(anthropic.BadRequestError) as caught:
        _create(served, [edit, {"type": "text", "text": "next"}], BETA)
    assert fragment in caught.value.body["error"]["message"]  # type: ignore[index]


def test_a_pinned_edit_whose_result_is_gone_deletes_nothing(serve: Callable[..., Served]) -> None:
    served = serve()
    question = [{"type": "text", "text": "what next?"}]
    _create(served, question)
    snipped = [
        {"role": "user", "content": "read main.py please"},
        {"role": "assistant", "content": "I will not."},
        {"role": "user", "content": [DELETE, *question]},
    ]
    message = served.client.messages.create(model=MODEL, max_tokens=50, messages=snipped, extra_headers=BETA)
    assert "cache_deleted_input_tokens" not in (message.usage.model_extra or {})


def test_deleted_tokens_do_not_count_against_the_window(serve: Callable[..., Served]) -> None:
    question = [{"type": "text", "text": "what next?"}]
    window = flatten({"model": MODEL, "messages": _conversation(question)})[-1].end - 100
    served = serve(config=ServerConfig(context_window=window + 50))
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        _create(served, question)
    assert served.state.references.spans == {}
    # The edit's reference is in this request, so it is valid even though never recorded before.
    assert _create(served, [DELETE, *question], BETA).usage.model_extra["cache_deleted_input_tokens"] > 0


def test_an_edit_outside_a_user_message_names_its_path() -> None:
    body = {
        "model": MODEL,
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [DELETE]}],
    }
    with pytest.raises(RequestValidationError, match="may only appear in user messages") as caught:
        cache_edits_deletions(body, flatten(body), beta_enabled=True)
    assert caught.value.path == "messages.1.content.0"


def test_count_tokens_leaves_out_what_the_edits_delete(serve: Callable[..., Served]) -> None:
    """The count foldline checks the blocking limit with is the window's count: deletions excluded."""
    served = serve()
    question = [{"type": "text", "text": "what next?"}]
    edited = {"model": MODEL, "max_tokens": 50, "messages": _conversation([DELETE, *question])}
    total = flatten(edited)[-1].end
    plain = {**edited, "messages": _conversation(question)}

    async def count() -> tuple[int | None, int | None]:
        provider = AnthropicProvider(base_url=served.url, api_key="k")
        try:
            return (
                await provider.count_tokens(edited, betas=[CACHE_EDITS_BETA]),
                await provider.count_tokens(plain),
            )
        finally:
            await provider.aclose()

    assert asyncio.run(count()) == (total - count_text(FILE_TEXT), flatten(plain)[-1].end)
    assert served.state.records == []  # counting runs no model: nothing was billed
