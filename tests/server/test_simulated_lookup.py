"""The simulated model looks a lost statement up in a file the request names as the transcript."""

from __future__ import annotations

import json
from typing import Any

import pytest

from foldline.server.backend import BackendRequest
from foldline.server.simulated import SimulatedBackend
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

TOOLS = tool_specs(default_tools())
TRANSCRIPT = "/home/me/.foldline/projects/ws/3f2a.jsonl"
POINTERS = {
    # Claude Code 2.1's message after a compaction, then foldline's system prompt line
    "claude-code": "If you need specific details from before compaction (like exact code snippets, error "
    f"messages, or content you generated), read the full transcript at: {TRANSCRIPT}",
    "foldline": "This session's full transcript, every message and tool result word for word, is at "
    f"{TRANSCRIPT} (JSON lines).",
}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _request(
    messages: list[dict[str, Any]], system: str = "", tools: list[dict[str, Any]] | None = None
) -> Any:
    return BackendRequest(
        model="claude-sonnet-4-5",
        messages=messages,
        tools=TOOLS if tools is None else tools,
        request_key="k",
        max_tokens=8192,
        system=system or None,
    )


def _reply(request: BackendRequest) -> tuple[str, list[dict[str, Any]]]:
    content = SimulatedBackend(seed=3).reply(request).content
    text = "".join(str(b.get("text", "")) for b in content)
    return text, [dict(b) for b in content if b.get("type") == "tool_use"]


def _asked(pointer_in_summary: str | None, system: str = "") -> list[dict[str, Any]]:
    summary = "This session continues an earlier conversation.\n## Work\nThe parser was fixed."
    if pointer_in_summary is not None:
        summary += "\n\n" + pointer_in_summary
    return [
        _user(summary),
        {"role": "assistant", "content": [{"type": "text", "text": "Ok."}]},
        _user("What is the staging port?"),
    ]


@pytest.mark.parametrize("where", ["summary", "system"])
@pytest.mark.parametrize("client", sorted(POINTERS))
def test_a_statement_no_longer_in_view_is_searched_for_in_the_named_transcript(
    client: str, where: str
) -> None:
    pointer = POINTERS[client]
    messages = _asked(pointer if where == "summary" else None)
    text, calls = _reply(_request(messages, system=pointer if where == "system" else ""))
    assert [c["name"] for c in calls] == ["Grep"], text
    assert calls[0]["input"]["path"] == TRANSCRIPT
    assert "staging port" in calls[0]["input"]["pattern"]
    # the search's result, as rg prints a JSON line of the transcript: the value is read back
    line = json.dumps({"type": "user", "message": {"content": "Note for later: the staging port is 6543."}})
    answered = [
        *messages,
        {"role": "assistant", "content": [{"type": "text", "text": text}, {**calls[0], "id": "g1"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "g1", "content": f"{TRANSCRIPT}:4:{line}"}],
        },
    ]
    text, calls = _reply(_request(answered, system=pointer if where == "system" else ""))
    assert calls == []
    assert "The staging port is 6543." in text


def test_without_a_named_transcript_or_after_one_search_the_model_says_it_does_not_know() -> None:
    text, calls = _reply(_request(_asked(None)))
    assert calls == []
    assert text.startswith("I don't know the staging port")
    messages = _asked(POINTERS["foldline"])
    _, calls = _reply(_request(messages))
    assert calls, "the search is made first"
    searched = [
        *messages,
        {"role": "assistant", "content": [{"type": "text", "text": "Searching."}, {**calls[0], "id": "g1"}]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "g1", "content": "No matches found"}],
        },
    ]
    text, calls = _reply(_request(searched))
    assert calls == []  # one search a turn: a miss is not a loop
    assert text.startswith("I don't know the staging port")


def test_the_search_uses_whatever_the_search_tool_is_called() -> None:
    renamed = [{**spec, "name": "content_search"} if spec["name"] == "Grep" else spec for spec in TOOLS]
    _, calls = _reply(_request(_asked(POINTERS["claude-code"]), tools=renamed))
    assert [c["name"] for c in calls] == ["content_search"]
    assert calls[0]["input"]["path"] == TRANSCRIPT


def _played(messages: list[dict[str, Any]], answers: dict[str, str], steps: int = 5) -> list[dict[str, Any]]:
    """The model's calls over a few rounds, each answered by the first `answers` entry its tool name
    and input mention (a stand-in for the tools)."""
    made: list[dict[str, Any]] = []
    for n in range(steps):
        text, calls = _reply(_request(messages))
        if not calls:
            break
        made += calls
        results = []
        for k, call in enumerate(calls):
            said = json.dumps(call)
            output = next((out for key, out in answers.items() if key in said), "ok")
            results.append({"type": "tool_result", "tool_use_id": f"c{n}{k}", "content": output})
        sent = [{**c, "id": f"c{n}{k}"} for k, c in enumerate(calls)]
        messages = [
            *messages,
            {"role": "assistant", "content": [{"type": "text", "text": text}, *sent]},
            {"role": "user", "content": results},
        ]
    return made


def test_a_decision_no_longer_in_view_is_searched_for_in_the_named_transcript() -> None:
    """Earlier work the user decided (`profiles.references_for`): with a transcript named, the model
    searches it before applying "no decision found", and applies what the search found."""
    prompt = "Apply the decision on the cache key to the orders module."
    line = json.dumps(
        {"message": {"content": "Let's keep the cache key as a (path, mtime) tuple, not a hash."}}
    )
    answers = {
        "Grep": f"{TRANSCRIPT}:7:{line}",
        "find": "./src/app/orders.py",
        "Read": '     1\t"""Orders."""\n     2\t\n     3\tORDERS_VERSION = 2\n',
    }
    named = _played([*_asked(POINTERS["claude-code"])[:-1], _user(prompt)], answers)
    assert named[0]["name"] == "Grep"
    assert named[0]["input"]["path"] == TRANSCRIPT
    edits = [c["input"].get("new_string", "") for c in named if c["name"] == "Edit"]
    assert any("(path, mtime) tuple" in e for e in edits), named
    # no transcript named: nothing to search, and the decision is applied as not found
    unnamed = _played([*_asked(None)[:-1], _user(prompt)], answers)
    assert "Grep" not in [c["name"] for c in unnamed]
    assert any("no decision found" in c["input"].get("new_string", "") for c in unnamed), unnamed


def test_with_only_a_shell_the_transcript_is_searched_with_grep_in_it() -> None:
    """Claude Code 2.1 offers no Grep tool: the same search goes through its shell."""
    shell_only = [spec for spec in TOOLS if spec["name"] not in ("Grep", "Glob")]
    messages = _asked(POINTERS["claude-code"])
    text, calls = _reply(_request(messages, tools=shell_only))
    assert [c["name"] for c in calls] == ["Bash"], text
    command = calls[0]["input"]["command"]
    assert command.startswith("grep -i -- 'the staging port is'")
    assert TRANSCRIPT in command
    line = json.dumps({"message": {"content": "Note for later: the staging port is 6543."}})
    ran = [
        *messages,
        {"role": "assistant", "content": [{"type": "text", "text": text}, {**calls[0], "id": "b1"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b1", "content": line}]},
    ]
    text, calls = _reply(_request(ran, tools=shell_only))
    assert calls == []
    assert "The staging port is 6543." in text
    # searched once: a miss is said, not searched again
    missed = [
        *ran[:-1],
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b1", "content": ""}]},
    ]
    text, calls = _reply(_request(missed, tools=shell_only))
    assert calls == []
    assert text.startswith("I don't know the staging port")
