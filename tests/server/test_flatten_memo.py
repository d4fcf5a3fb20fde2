"""The flatten memo and the window-only second validation pass give what the plain computation gives.

`flatten(body, memo)` must equal `flatten(body)` (paths, token spans, keys, TTLs, references) for
any body and any history of earlier bodies in the same memo, including edited earlier blocks,
values that are equal in Python but not in JSON (`1`, `1.0`, `True`; key order), moved
breakpoints, cache_edits blocks, and a memo too small to keep anything.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.server.conftest import MODEL, Served, words

from foldline.api.validate import ValidationLimits, validate_request, validate_window
from foldline.errors import RequestValidationError
from foldline.server.caching import CACHE_EDITS_BETA, FlattenMemo, flatten
from foldline.server.config import ServerConfig

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([0.0, 1.0, -0.0, 2.5])
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner, max_size=3),
    max_leaves=6,
)
TEXT = st.text(st.sampled_from("ab .\n\t{}é"), max_size=30)
CONTROL = st.sampled_from([None, {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}])


@st.composite
def blocks(draw: st.DrawFn, role: str) -> dict[str, Any]:
    kinds = (
        ["text", "tool_use", "thinking"]
        if role == "assistant"
        else ["text", "tool_result", "image", "cache_edits"]
    )
    kind = draw(st.sampled_from(kinds))
    block: dict[str, Any]
    if kind == "text":
        block = {"type": "text", "text": draw(TEXT)}
    elif kind == "thinking":
        block = {"type": "thinking", "thinking": draw(TEXT), "signature": "sig"}
    elif kind == "tool_use":
        block = {"type": "tool_use", "id": f"t{draw(st.integers(0, 3))}", "name": "Read", "input": draw(JSON)}
    elif kind == "tool_result":
        content = draw(TEXT | st.lists(st.builds(lambda t: {"type": "text", "text": t}, TEXT), max_size=2))
        block = {"type": "tool_result", "tool_use_id": f"t{draw(st.integers(0, 3))}", "content": content}
        if draw(st.booleans()):
            block["cache_reference"] = f"ref{draw(st.integers(0, 3))}"
    elif kind == "image":
        block = {"type": "image", "source": {"type": "url", "url": "https://x.example/a.png"}}
    else:
        return {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "ref0"}]}
    control = draw(CONTROL)
    if control is not None:
        block["cache_control"] = control
    return block


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    messages = []
    for i in range(draw(st.integers(0, 5))):
        role = "user" if i % 2 == 0 else "assistant"
        content: Any = (
            draw(TEXT) if draw(st.integers(0, 4)) == 0 else draw(st.lists(blocks(role), max_size=3))
        )
        messages.append({"role": role, "content": content})
    body: dict[str, Any] = {"model": draw(st.sampled_from([MODEL, "claude-opus-4-5"])), "messages": messages}
    tools = draw(
        st.lists(st.builds(lambda d: {"name": "T", "description": d, "input_schema": {}}, TEXT), max_size=2)
    )
    if tools:
        body["tools"] = tools
    system = draw(
        st.none() | TEXT | st.lists(st.builds(lambda t: {"type": "text", "text": t}, TEXT), max_size=2)
    )
    if system is not None:
        body["system"] = system
    for key, values in (("tool_choice", JSON), ("thinking", JSON), ("cache_control", CONTROL)):
        value = draw(values)
        if value is not None:
            body[key] = value
    return body


def _mutations(draw: st.DrawFn, body: dict[str, Any]) -> dict[str, Any]:
    """The next request: the same history grown, edited, re-typed, or re-marked."""
    body = copy.deepcopy(body)
    messages = body["messages"]
    op = draw(st.sampled_from(["append", "append", "edit", "retype", "reorder", "mark", "params"]))
    lists = [m["content"] for m in messages if isinstance(m["content"], list) and m["content"]]
    if op == "append" or not lists:
        role = "user" if len(messages) % 2 == 0 else "assistant"
        messages.append({"role": role, "content": draw(st.lists(blocks(role), min_size=1, max_size=3))})
        return body
    content = draw(st.sampled_from(lists))
    index = draw(st.integers(0, len(content) - 1))
    block = content[index]
    if op == "edit":
        content[index] = draw(
            blocks("assistant" if block.get("type") in ("tool_use", "thinking") else "user")
        )
    elif op == "retype":  # equal in Python, different in JSON
        field = "input" if "input" in block else "extra"
        current = block.get(field)
        block[field] = True if isinstance(current, float) else 1 if current is True else 1.0
    elif op == "reorder":
        content[index] = dict(reversed(list(block.items())))
    elif op == "mark":
        if "cache_control" in block:
            del block["cache_control"]
        else:
            block["cache_control"] = {"type": "ephemeral"}
    else:
        body["tool_choice"] = draw(JSON)
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_memo_flatten_equals_plain_over_a_growing_edited_history(data: st.DataObject) -> None:
    memo = FlattenMemo(max_bytes=data.draw(st.sampled_from([0, 3_000, 64 * 1024 * 1024])))
    body = data.draw(bodies())
    for _ in range(data.draw(st.integers(1, 8))):
        assert flatten(body, memo) == flatten(body)
        body = _mutations(data.draw, body)
    assert flatten(body, memo) == flatten(body)


@settings(max_examples=100, deadline=None)
@given(st.lists(bodies(), min_size=1, max_size=6))
def test_memo_flatten_equals_plain_for_unrelated_bodies(sequence: list[dict[str, Any]]) -> None:
    memo = FlattenMemo()
    for body in sequence:
        assert flatten(body, memo) == flatten(body)


def test_python_equal_values_get_their_own_keys_and_counts() -> None:
    """`1`, `1.0` and `True` are equal dict values but different JSON: no memo entry is shared."""
    memo = FlattenMemo()
    results = []
    for value in (1, 1.0, True, 1):
        body = {
            "model": MODEL,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_use", "id": "a", "name": "n", "input": {"x": value}}],
                }
            ],
        }
        got = flatten(body, memo)
        assert got == flatten(body)
        results.append(got[0])
    assert results[0] == results[3]
    assert len({r.key for r in results}) == 3
    assert results[0].end != results[1].end  # "1" and "1.0" are not the same number of tokens


def test_memo_stays_within_its_byte_budget() -> None:
    memo = FlattenMemo(max_bytes=20_000)
    messages: list[dict[str, Any]] = []
    for i in range(60):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": words(100, f"m{i}_")})
        body = {"model": MODEL, "messages": messages}
        assert flatten(body, memo) == flatten(body)
        assert memo.size <= 20_000
    assert 0 < len(memo) < 60


@settings(max_examples=100, deadline=None)
@given(
    max_tokens=st.integers(1, 400),
    window=st.integers(1, 400),
    prompt=st.integers(0, 400),
    thinking=st.booleans(),
)
def test_window_check_alone_raises_what_the_full_validation_raises(
    max_tokens: int, window: int, prompt: int, thinking: bool
) -> None:
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": "hi"}],
    }
    if thinking and max_tokens > 1024:
        body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    validate_request(body, ValidationLimits(context_window=window))
    limits = ValidationLimits(context_window=window, input_tokens=prompt)
    expected = _raised(lambda: validate_request(body, limits))
    got = _raised(lambda: validate_window(body, limits))
    assert (got and (got.message, got.path, got.status)) == (
        expected and (expected.message, expected.path, expected.status)
    )


def _raised(call: Any) -> RequestValidationError | None:
    try:
        call()
    except RequestValidationError as e:
        return e
    return None


def _session(serve: Any, memo_bytes: int) -> list[dict[str, Any]]:
    """Usage of each request of a session that grows, deletes a result through cache_edits, and
    then edits an early message, against a server whose memo holds `memo_bytes`."""
    served: Served = serve(config=ServerConfig(flatten_memo_bytes=memo_bytes))
    tools = [{"name": "Read", "description": words(300, "d"), "input_schema": {"type": "object"}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": words(50, "q")}]}]
    usages = []

    def send(extra: list[dict[str, Any]] | None = None) -> None:
        marked = copy.deepcopy(messages)
        marked[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        if extra:
            marked[-1]["content"] = [*marked[-1]["content"], *extra]
        reply = served.client.messages.create(
            model=MODEL,
            max_tokens=100,
            tools=tools,  # type: ignore[arg-type]
            messages=marked,  # type: ignore[arg-type]
            extra_headers={"anthropic-beta": CACHE_EDITS_BETA},
        )
        usages.append(reply.usage.model_dump())

    for turn in range(6):
        messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"t{turn}", "name": "Read", "input": {"n": turn}}],
            }
        )
        result = {"type": "tool_result", "tool_use_id": f"t{turn}", "content": words(400, f"r{turn}_")}
        messages.append({"role": "user", "content": [{**result, "cache_reference": f"ref{turn}"}]})
        send()
    send([{"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "ref1"}]}])
    messages[2]["content"][0]["content"] = words(10, "short")  # an early result cleared
    send()
    send()
    return usages


def test_server_usage_is_the_same_with_and_without_the_memo(serve: Any) -> None:
    with_memo, without = _session(serve, 64 * 1024 * 1024), _session(serve, 0)
    assert with_memo == without
    assert with_memo[-1]["cache_read_input_tokens"] > 0
    assert any(u.get("cache_deleted_input_tokens") for u in with_memo)
