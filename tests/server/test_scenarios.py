"""The scripted backend: scenario files, turn order, predicates, the default reply."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.server.conftest import MODEL, Served

from foldline._json import dumps
from foldline.errors import UserError
from foldline.server.backend import BackendRequest, Reply, ScriptedBackend, load_scenario

SCENARIO: dict[str, Any] = {
    "replies": [
        {"when": {"last_user_contains": "summary"}, "text": "SUMMARY: all done"},
        {"text": "first"},
        {"tool_calls": [{"name": "Bash", "input": {"command": "ls"}}]},
        {"text": "partial", "stop_reason": "max_tokens"},
    ]
}


def _request(messages: list[dict[str, Any]], **extra: Any) -> BackendRequest:
    return BackendRequest(model=MODEL, messages=messages, **extra)


def _texts(reply: Reply) -> list[str]:
    return [str(b.get("text", b.get("name"))) for b in reply.content]


def test_turn_order_follows_assistant_messages() -> None:
    backend = ScriptedBackend(replies=SCENARIO["replies"])
    one = [{"role": "user", "content": "go"}]
    three = [*one, {"role": "assistant", "content": "first"}, {"role": "user", "content": "again"}]
    assert _texts(backend.reply(_request(one))) == ["first"]
    assert _texts(backend.reply(_request(one))) == ["first"]  # a retry gets the same reply
    assert _texts(backend.reply(_request(three))) == ["Bash"]
    assert len(backend.calls) == 3


def test_predicates_win_and_sequence_mode_counts_calls() -> None:
    backend = ScriptedBackend(replies=SCENARIO["replies"], select="sequence")
    user = [{"role": "user", "content": "go"}]
    assert _texts(backend.reply(_request(user))) == ["first"]
    assert _texts(backend.reply(_request([{"role": "user", "content": "write a summary"}]))) == [
        "SUMMARY: all done"
    ]
    assert _texts(backend.reply(_request(user))) == ["Bash"]


def test_default_reply_echoes_the_last_user_message() -> None:
    backend = ScriptedBackend()
    reply = backend.reply(
        _request([{"role": "user", "content": [{"type": "text", "text": "hello   there"}]}])
    )
    assert _texts(reply) == ["You said: hello there"]
    results = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]
    assert _texts(backend.reply(_request(results))) == ["Received 1 tool result(s)."]


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_scenario_files_drive_the_server(serve: Callable[..., Served], tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"scenario{suffix}"
    if suffix == ".json":
        path.write_bytes(dumps(SCENARIO))
    else:
        path.write_bytes(b"\n".join(dumps(r) for r in SCENARIO["replies"]) + b"\n")
    served = serve(backend=load_scenario(path))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    first = served.client.messages.create(model=MODEL, max_tokens=100, messages=messages)
    assert first.content[0].text == "first"  # type: ignore[union-attr]
    messages += [{"role": "assistant", "content": "first"}, {"role": "user", "content": "next"}]
    second = served.client.messages.create(model=MODEL, max_tokens=100, messages=messages)
    assert second.stop_reason == "tool_use"
    summary = served.client.messages.create(
        model=MODEL, max_tokens=100, messages=[*messages[:-1], {"role": "user", "content": "summary now"}]
    )
    assert summary.content[0].text == "SUMMARY: all done"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{", "not valid JSON"),
        ('{"replies": [{"txt": "x"}]}', "unknown reply keys"),
        ('{"replies": [{"text": "x", "stop_reason": "done"}]}', "unknown stop_reason"),
        ('{"replies": [{"when": {"user": "x"}, "text": "y"}]}', "unknown `when` keys"),
        ('{"replies": [{"tool_calls": [{"input": {}}]}]}', "string `name`"),
        ('{"replies": {}}', "expected a list"),
    ],
)
def test_bad_scenarios_name_the_file_and_problem(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UserError, match=fragment) as caught:
        load_scenario(path)
    assert str(path) in str(caught.value)


def test_missing_scenario_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"missing\.json"):
        load_scenario(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("scenario", "complaint"),
    [
        ({"strict": "false", "replies": [{"text": "a"}]}, "`strict` must be true or false, not 'false'"),
        ({"replies": [{"when": {"turn": "2"}, "text": "a"}]}, "`when.turn` must be int, not '2'"),
        ({"replies": [{"when": {"turn": True}, "text": "a"}]}, "`when.turn` must be int, not True"),
        ({"replies": [{"when": False, "text": "a"}]}, "`when` must be an object"),
        ({"replies": [{"when": {"user": "x"}, "text": "a"}]}, "valid keys are ['last_user_contains'"),
    ],
)
def test_loose_scenario_values_are_refused_with_file_and_key(
    tmp_path: Path, scenario: dict[str, object], complaint: str
) -> None:
    path = tmp_path / "loose.json"
    path.write_text(json.dumps(scenario))
    with pytest.raises(UserError) as info:
        load_scenario(path)
    assert str(path) in str(info.value)
    assert complaint in str(info.value)
