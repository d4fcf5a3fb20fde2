"""Server-side `context_management`: what each edit clears, what it reports, and how the cache bills it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette
from tests.server.conftest import MODEL, Served, words

from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.caching import flatten
from foldline.server.config import ServerConfig
from foldline.server.context_edits import CLEARED_TOOL_RESULT, CONTEXT_MANAGEMENT_BETA
from foldline.server.thinking import ThinkingSigner
from foldline.server.tokenizer import count_block

BETA = (CONTEXT_MANAGEMENT_BETA,)
KEY = b"c" * 32
TOOLS = [
    {"name": name, "description": f"{name} tool", "input_schema": {"type": "object"}}
    for name in ("Read", "Bash", "Memory")
]


def _call(
    app: Starlette, path: str, body: Mapping[str, Any], betas: tuple[str, ...] = BETA
) -> httpx2.Response:
    async def go() -> httpx2.Response:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://localhost") as client:
            headers = {"anthropic-beta": ",".join(betas)} if betas else {}
            return await client.post(path, json=body, headers=headers)

    return asyncio.run(go())


def _history(
    uses: int, *, names: tuple[str, ...] = ("Read",), result_tokens: int = 300
) -> list[dict[str, Any]]:
    """A user prompt, then `uses` tool rounds whose results are `result_tokens` long, then a prompt."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for i in range(uses):
        name = names[i % len(names)]
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": {"path": f"f{i}.py"}}
                ],
            }
        )
        result = {
            "type": "tool_result",
            "tool_use_id": f"toolu_{i}",
            "content": words(result_tokens, f"r{i}_"),
        }
        messages.append({"role": "user", "content": [result]})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "done"}]})
    messages.append(
        {
            "role": "user",
            "content": [{"type": "text", "text": "next", "cache_control": {"type": "ephemeral"}}],
        }
    )
    return messages


def _body(messages: list[dict[str, Any]], *edits: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 100,
        "tools": TOOLS,
        "messages": messages,
        "context_management": {"edits": list(edits)},
        **extra,
    }


def _served(app: Starlette) -> list[dict[str, Any]]:
    """The messages the backend last saw."""
    backend = app.state.foldline.backend
    assert isinstance(backend, ScriptedBackend)
    return backend.calls[-1].messages


def _results(messages: list[dict[str, Any]]) -> list[Any]:
    return [
        b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


def _clear(**params: Any) -> dict[str, Any]:
    return {"type": "clear_tool_uses_20250919", **params}


TRIGGER_LOW = {"type": "input_tokens", "value": 500}


def test_clear_tool_uses_clears_all_but_the_newest_keep_and_reports_it() -> None:
    app = create_app(backend=ScriptedBackend())
    messages = _history(5)
    reply = _call(
        app,
        "/v1/messages",
        _body(messages, _clear(trigger=TRIGGER_LOW, keep={"type": "tool_uses", "value": 2})),
    )
    assert reply.status_code == 200, reply.text
    seen = _results(_served(app))
    assert seen[:3] == [CLEARED_TOOL_RESULT] * 3
    assert seen[3:] == _results(messages)[3:]
    freed = sum(
        count_block(b) - count_block({**b, "content": CLEARED_TOOL_RESULT})
        for m in messages[2:8:2]
        for b in m["content"]
    )
    assert reply.json()["context_management"] == {
        "applied_edits": [
            {"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": freed}
        ]
    }
    original = sum(b.end - b.start for b in flatten(_body(messages)))
    usage = reply.json()["usage"]
    billed = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert billed == original - freed
    assert _results(messages)[0] != CLEARED_TOOL_RESULT  # the client's history is untouched


def test_defaults_keep_three_and_trigger_at_100k() -> None:
    app = create_app(backend=ScriptedBackend())
    reply = _call(app, "/v1/messages", _body(_history(5), _clear()))
    assert reply.json()["context_management"] == {"applied_edits": []}
    assert CLEARED_TOOL_RESULT not in _results(_served(app))
    app = create_app(backend=ScriptedBackend(), config=ServerConfig(context_window=1_000_000))
    big = _history(6, result_tokens=20_000)
    reply = _call(app, "/v1/messages", _body(big, _clear()))
    assert reply.json()["context_management"]["applied_edits"][0]["cleared_tool_uses"] == 3


def test_a_tool_uses_trigger_counts_calls() -> None:
    app = create_app(backend=ScriptedBackend())
    edit = _clear(trigger={"type": "tool_uses", "value": 4}, keep={"type": "tool_uses", "value": 1})
    assert (
        _call(app, "/v1/messages", _body(_history(4), edit)).json()["context_management"]["applied_edits"]
        == []
    )
    applied = _call(app, "/v1/messages", _body(_history(5), edit)).json()["context_management"][
        "applied_edits"
    ]
    assert applied[0]["cleared_tool_uses"] == 4


def test_excluded_tools_are_never_cleared() -> None:
    app = create_app(backend=ScriptedBackend())
    messages = _history(6, names=("Read", "Memory"))
    edit = _clear(trigger=TRIGGER_LOW, keep={"type": "tool_uses", "value": 1}, exclude_tools=["Memory"])
    reply = _call(app, "/v1/messages", _body(messages, edit))
    seen = _results(_served(app))
    # Read uses are 0, 2, 4 (4 kept as the newest clearable); Memory uses 1, 3, 5 stay.
    assert [s == CLEARED_TOOL_RESULT for s in seen] == [True, False, True, False, False, False]
    assert reply.json()["context_management"]["applied_edits"][0]["cleared_tool_uses"] == 2


@pytest.mark.parametrize(("inputs", "cleared"), [(True, ["Read", "Bash"]), (["Bash"], ["Bash"]), (False, [])])
def test_clear_tool_inputs_empties_the_inputs_of_cleared_calls(inputs: Any, cleared: list[str]) -> None:
    app = create_app(backend=ScriptedBackend())
    messages = _history(4, names=("Read", "Bash"))
    edit = _clear(trigger=TRIGGER_LOW, keep={"type": "tool_uses", "value": 2}, clear_tool_inputs=inputs)
    _call(app, "/v1/messages", _body(messages, edit))
    uses = [
        b for m in _served(app) if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"
    ]
    assert [u["name"] for u in uses[:2] if u["input"] == {}] == cleared
    assert all(u["input"] for u in uses[2:])  # kept calls keep their inputs


def test_clear_at_least_applies_only_when_enough_is_freed() -> None:
    app = create_app(backend=ScriptedBackend())
    messages = _history(4)
    keep = {"type": "tool_uses", "value": 2}
    much = _clear(trigger=TRIGGER_LOW, keep=keep, clear_at_least={"type": "input_tokens", "value": 5_000})
    assert (
        _call(app, "/v1/messages", _body(messages, much)).json()["context_management"]["applied_edits"] == []
    )
    assert CLEARED_TOOL_RESULT not in _results(_served(app))
    little = _clear(trigger=TRIGGER_LOW, keep=keep, clear_at_least={"type": "input_tokens", "value": 500})
    applied = _call(app, "/v1/messages", _body(messages, little)).json()["context_management"][
        "applied_edits"
    ]
    assert applied[0]["cleared_tool_uses"] == 2


def _thinking_history(turns: int) -> list[dict[str, Any]]:
    signer = ThinkingSigner(KEY)
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        text = f"thought {i}" + words(200, f"t{i}_")
        messages.append({"role": "user", "content": words(400, f"u{i}_")})
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": text, "signature": signer.signature(text)},
                    {"type": "text", "text": f"answer {i}"},
                ],
            }
        )
    messages.append(
        {"role": "user", "content": [{"type": "text", "text": "go", "cache_control": {"type": "ephemeral"}}]}
    )
    return messages


def _thinking_body(messages: list[dict[str, Any]], keep: Any) -> dict[str, Any]:
    edit: dict[str, Any] = {"type": "clear_thinking_20251015"}
    if keep is not None:
        edit["keep"] = keep
    return {
        **_body(messages, edit),
        "max_tokens": 4096,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }


@pytest.mark.parametrize(
    ("keep", "kept"),
    [(None, 1), ({"type": "thinking_turns", "value": 2}, 2), ("all", 4), ({"type": "all"}, 4)],
)
def test_clear_thinking_keeps_the_last_turns(keep: Any, kept: int) -> None:
    app = create_app(backend=ScriptedBackend(), config=ServerConfig(thinking_key=KEY))
    messages = _thinking_history(4)
    reply = _call(app, "/v1/messages", _thinking_body(messages, keep))
    assert reply.status_code == 200, reply.text
    thinks = [
        any(b["type"] == "thinking" for b in m["content"]) for m in _served(app) if m["role"] == "assistant"
    ]
    assert thinks == [False] * (4 - kept) + [True] * kept
    applied = reply.json()["context_management"]["applied_edits"]
    if kept == 4:
        assert applied == []
    else:
        tokens = sum(count_block(m["content"][0]) for m in messages[1 : 2 * (4 - kept) : 2])
        assert applied == [
            {
                "type": "clear_thinking_20251015",
                "cleared_thinking_turns": 4 - kept,
                "cleared_input_tokens": tokens,
            }
        ]


def _read_through(body: dict[str, Any], index: int) -> int:
    return flatten(body)[index].end


def test_cleared_tool_results_bill_the_cache_from_the_cleared_point() -> None:
    app = create_app(backend=ScriptedBackend())
    messages = _history(6)
    keep = {"type": "tool_uses", "value": 3}
    # Turn 1: below the trigger, nothing cleared; the whole prompt is written at its breakpoint.
    first = _call(
        app, "/v1/messages", _body(messages, _clear(trigger={"type": "input_tokens", "value": 50_000}))
    )
    assert first.json()["usage"]["cache_creation_input_tokens"] == sum(
        b.end - b.start for b in flatten(_body(messages))
    )
    # Turn 2: the trigger is passed; results 0-2 are cleared. Everything before the first cleared
    # block (tools, the prompt, the first tool_use) still reads; the rest is written again.
    edit = _clear(trigger=TRIGGER_LOW, keep=keep)
    second = _call(app, "/v1/messages", _body(messages, edit)).json()
    first_cleared = next(
        i for i, b in enumerate(flatten(_body(messages))) if b.path == "messages.2.content.0"
    )
    assert second["usage"]["cache_read_input_tokens"] == _read_through(_body(messages), first_cleared - 1)
    total = sum(b.end - b.start for b in flatten(_body(messages)))
    freed = second["context_management"]["applied_edits"][0]["cleared_input_tokens"]
    assert (
        second["usage"]["cache_creation_input_tokens"]
        == total - freed - second["usage"]["cache_read_input_tokens"]
    )
    # Turn 3: the same clearing again reads everything turn 2 wrote.
    third = _call(app, "/v1/messages", _body(messages, edit)).json()
    assert third["usage"]["cache_read_input_tokens"] == total - freed
    assert third["usage"]["cache_creation_input_tokens"] == 0


def test_cleared_thinking_bills_the_cache_from_the_cleared_point_and_kept_thinking_reads() -> None:
    app = create_app(backend=ScriptedBackend(), config=ServerConfig(thinking_key=KEY))
    messages = _thinking_history(3)
    full = sum(b.end - b.start for b in flatten(_thinking_body(messages, "all")))
    first = _call(app, "/v1/messages", _thinking_body(messages, "all")).json()
    assert first["usage"]["cache_creation_input_tokens"] == full
    kept = _call(app, "/v1/messages", _thinking_body(messages, "all")).json()
    assert kept["usage"]["cache_read_input_tokens"] == full
    cleared = _call(
        app, "/v1/messages", _thinking_body(messages, {"type": "thinking_turns", "value": 1})
    ).json()
    body = _thinking_body(messages, "all")
    first_thinking = next(i for i, b in enumerate(flatten(body)) if b.path == "messages.1.content.0")
    assert cleared["usage"]["cache_read_input_tokens"] == _read_through(body, first_thinking - 1)


def test_streaming_reports_applied_edits_like_the_plain_answer(serve: Callable[..., Served]) -> None:
    served = serve(backend=ScriptedBackend())
    kwargs: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 100,
        "tools": TOOLS,
        "messages": _history(5),
        "betas": list(BETA),
        "context_management": {"edits": [_clear(trigger=TRIGGER_LOW)]},
    }
    plain = served.client.beta.messages.create(**kwargs)
    with served.client.beta.messages.stream(**kwargs) as stream:
        streamed = stream.get_final_message()
    assert plain.context_management is not None
    assert plain.context_management.applied_edits[0].cleared_tool_uses == 2
    assert streamed.context_management == plain.context_management


def test_count_tokens_counts_after_the_edits_and_reports_the_original() -> None:
    app = create_app(backend=ScriptedBackend())
    messages = _history(5)
    body = _body(messages, _clear(trigger=TRIGGER_LOW))
    del body["max_tokens"]
    counted = _call(app, "/v1/messages/count_tokens", body).json()
    original = sum(b.end - b.start for b in flatten(_body(messages)))
    sent = _call(app, "/v1/messages", _body(messages, _clear(trigger=TRIGGER_LOW))).json()
    freed = sent["context_management"]["applied_edits"][0]["cleared_input_tokens"]
    assert counted == {
        "input_tokens": original - freed,
        "context_management": {"original_input_tokens": original},
    }


@pytest.mark.parametrize(
    ("edits", "betas", "fragment"),
    [
        ([_clear()], (), "requires the `anthropic-beta: context-management-2025-06-27` header"),
        ([{"type": "clear_everything"}], BETA, "Input tag 'clear_everything' found using 'type'"),
        ([_clear(), {"type": "clear_thinking_20251015"}], BETA, "must be listed before"),
        (
            [_clear(keep={"type": "tool_uses", "value": -1})],
            BETA,
            "keep.value: Input should be a non-negative",
        ),
        ([_clear(exclude_tools="Read")], BETA, "exclude_tools: Input should be a valid list"),
    ],
)
def test_bad_context_management_is_a_400(
    edits: list[dict[str, Any]], betas: tuple[str, ...], fragment: str
) -> None:
    response = _call(create_app(), "/v1/messages", _body(_history(1), *edits), betas)
    assert response.status_code == 400
    assert fragment in response.json()["error"]["message"]
