"""Claude Code transcripts imported as foldline records (R2.5): real files and crafted graphs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from tests.conftest import claude_code_files, requires_claude_code_data

from foldline._json import decode_record, encode_line
from foldline.api.validate import find_errors
from foldline.cli import cli
from foldline.importers.claude_code import ImportedSession, import_claude_code
from foldline.sessions import count_turns
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AttachmentEntry,
    CompactBoundary,
    ProgressEntry,
    SystemEntry,
    UserEntry,
    api_filter,
    ui_view,
)

# --- Helpers -------------------------------------------------------------------------------------


def _write(path: Path, lines: Sequence[dict[str, Any] | str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = [line if isinstance(line, str) else orjson.dumps(line).decode() for line in lines]
    path.write_text("\n".join(raw) + "\n", encoding="utf-8")
    return path


def _env(kind: str, uuid: str, parent: str | None, ts: int, **extra: Any) -> dict[str, Any]:
    line = {
        "type": kind,
        "uuid": uuid,
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": "sess-1",
        "timestamp": f"2026-01-01T00:00:{ts:02d}.000Z",
    }
    line.update(extra)
    return line


def _user(uuid: str, parent: str | None, ts: int, content: Any, **extra: Any) -> dict[str, Any]:
    return _env("user", uuid, parent, ts, message={"role": "user", "content": content}, **extra)


def _result(uuid: str, parent: str | None, ts: int, tool_use_id: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": f"out {tool_use_id}"}
    return _user(uuid, parent, ts, [block])


def _asst(
    uuid: str, parent: str | None, ts: int, msg_id: str, block: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": extra.pop("model", "claude-sonnet-4-6"),
        "content": [block],
        "stop_reason": extra.pop("stop_reason", None),
        "stop_sequence": None,
        "usage": extra.pop("usage", {"input_tokens": 1, "output_tokens": 1}),
    }
    return _env("assistant", uuid, parent, ts, message=message, **extra)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tool(tool_id: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": tool_id,
        "name": "Bash",
        "input": {"command": "ls"},
        "caller": {"type": "direct"},
    }


def _uuids(session: ImportedSession) -> list[str]:
    return [r.uuid for r in session.records if not isinstance(r, CompactBoundary)]


def _tool_pairs(records: Sequence[AnyRecord]) -> int:
    uses = {
        b["id"]
        for r in records
        if isinstance(r, AssistantEntry)
        for b in r.message.content
        if b.get("type") == "tool_use"
    }
    results = {
        b["tool_use_id"]
        for r in records
        if isinstance(r, UserEntry) and isinstance(r.message.content, list)
        for b in r.message.content
        if b.get("type") == "tool_result"
    }
    return len(uses & results)


# --- Real transcripts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    prompts: int
    replies: int
    pairs: int


# Counted by hand with a throwaway script over the raw JSON (json.loads per line, no foldline code):
# - prompts: `user` lines, not isMeta/isCompactSummary/isSidechain, whose content is a string or text
#   blocks (no tool_result) and does not start with <local-command-stdout>, <bash-stdout>, a caveat or
#   an interrupt marker (slash-command lines count: the user typed them).
# - replies: distinct `message.id` of `assistant` lines whose model is not `<synthetic>`, sidechain
#   lines included (the 5c0375b4 file has 10 main + 10 inline sidechain replies).
# - pairs: tool_use ids that have a tool_result with that id anywhere in the file (13 main + 8
#   sidechain in 5c0375b4).
# The only fork that is a real rewind is in 03eb5929: the user line 38 re-parents onto line 16 and
# abandons lines 18-35 (3 prompts, 3 replies, no tools), so the live timeline holds 8-3 = 5 prompts
# and 9-3 = 6 replies. The agent-ea02459f file is a subagent transcript imported on its own: its root
# (the Task prompt, line 1) is its one prompt.
EXPECTED = {
    "fe869ecb-c176-478f-9734-7e4b8ef12cff.jsonl": Expected(prompts=3, replies=34, pairs=32),
    "agent-ea02459f.jsonl": Expected(prompts=1, replies=5, pairs=14),
    "4379d1bf-ccb1-414e-a856-9791b73f3af2.jsonl": Expected(prompts=3, replies=3, pairs=2),
    "03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl": Expected(prompts=5, replies=6, pairs=2),
    "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl": Expected(prompts=3, replies=17, pairs=40),
    "2b4ed4c0-b905-41de-9238-273db3ec737a.jsonl": Expected(prompts=1, replies=10, pairs=9),
    "5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": Expected(prompts=1, replies=20, pairs=21),
}


def _real(name: str) -> Path:
    return next(p for p in claude_code_files() if p.name == name)


@requires_claude_code_data
def test_every_real_file_has_hand_counted_expectations() -> None:
    assert sorted(p.name for p in claude_code_files()) == sorted(EXPECTED)


@requires_claude_code_data
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_file_counts_match_hand_counts(name: str) -> None:
    session = import_claude_code(_real(name))
    replies = [r for r in session.records if isinstance(r, AssistantEntry) and not r.is_api_error_message]
    assert session.warnings == []
    assert count_turns(session.records) == EXPECTED[name].prompts
    assert len(replies) == EXPECTED[name].replies
    assert _tool_pairs(session.records) == EXPECTED[name].pairs


@requires_claude_code_data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name[:13])
def test_real_file_records_round_trip_and_results_follow_their_calls(path: Path) -> None:
    session = import_claude_code(path)
    assert session.records
    assert [decode_record(encode_line(r)) for r in session.records] == session.records
    called: set[str] = set()
    for record in session.records:
        if isinstance(record, AssistantEntry):
            called.update(b["id"] for b in record.message.content if b.get("type") == "tool_use")
            assert all("caller" not in b for b in record.message.content)
        elif isinstance(record, UserEntry) and isinstance(record.message.content, list):
            for block in record.message.content:
                if block.get("type") == "tool_result":
                    assert block["tool_use_id"] in called


@requires_claude_code_data
def test_real_rewind_drops_the_abandoned_branch() -> None:
    session = import_claude_code(_real("03eb5929-52b3-4b13-ada3-b93ae35806b8.jsonl"))
    texts = [r.message.content for r in session.records if isinstance(r, UserEntry)]
    assert session.files[0].off_chain == 16  # lines 18-35 minus the two file-history-snapshot lines
    assert session.files[0].ignored == {"file-history-snapshot": 9}
    assert not any(isinstance(t, str) and t.startswith("I very much like this idea") for t in texts)
    assert any(isinstance(t, str) and t.startswith("I actually don't like much this idea") for t in texts)


@requires_claude_code_data
def test_real_split_message_keeps_thinking_bytes_and_last_usage() -> None:
    path = _real("ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl")
    raw = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    pieces = [d for d in raw if d["type"] == "assistant" and d["message"]["id"].endswith("GNTxQta6")]
    session = import_claude_code(path)
    (entry,) = [
        r for r in session.records if isinstance(r, AssistantEntry) and r.message.id.endswith("GNTxQta6")
    ]
    assert len(pieces) == 7  # file lines 44, 45, 48, 51, 54, 55, 56
    assert entry.message.content[0] == pieces[0]["message"]["content"][0]  # the thinking block, verbatim
    assert [b.get("id") for b in entry.message.content[1:]] == [
        p["message"]["content"][0]["id"] for p in pieces[1:]
    ]
    assert entry.message.usage is not None
    assert entry.message.usage.output_tokens == pieces[-1]["message"]["usage"]["output_tokens"]


@requires_claude_code_data
def test_real_inline_sidechain_is_kept_but_not_sent() -> None:
    session = import_claude_code(_real("5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"))
    entries = ui_view(session.records)
    side = [e for e in entries if e.is_sidechain]
    assert len(side) == 20  # 10 merged replies + 10 user lines, counted in the raw file
    assert not any(e.is_sidechain for e in api_filter(entries))


# --- Chain following -----------------------------------------------------------------------------


def test_rewind_fork_picks_the_newest_leaf(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "s.jsonl",
        [
            _user("u1", None, 1, "first"),
            _asst("a1", "u1", 2, "m1", _text("one")),
            _user("u2", "a1", 3, "abandoned"),
            _asst("a2", "u2", 4, "m2", _text("two")),
            _user("u3", "a1", 9, "rewound"),
            _asst("a3", "u3", 10, "m3", _text("three")),
        ],
    )
    session = import_claude_code(path)
    assert _uuids(session) == ["u1", "a1", "u3", "a3"]
    assert session.files[0].off_chain == 2
    assert [r.parent_uuid for r in ui_view(session.records)] == [None, "u1", "a1", "u3"]


def test_equal_timestamps_prefer_the_later_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "s.jsonl",
        [_user("u1", None, 1, "root"), _user("x", "u1", 5, "older line"), _user("y", "u1", 5, "newer line")],
    )
    assert _uuids(import_claude_code(path)) == ["u1", "y"]


def test_chain_that_skips_split_pieces_keeps_every_call_and_result(tmp_path: Path) -> None:
    # 2.1.x streaming: three pieces of one reply; each result hangs off its own piece, and the
    # continuation hangs off the FIRST result, so the leaf's chain sees only piece 1 and result 1.
    path = _write(
        tmp_path / "s.jsonl",
        [
            _user("u1", None, 1, "go"),
            _asst("p1", "u1", 2, "m1", _tool("t1")),
            _asst("p2", "p1", 3, "m1", _tool("t2")),
            _asst("p3", "p2", 4, "m1", _tool("t3"), stop_reason="tool_use", usage={"output_tokens": 42}),
            _result("r3", "p3", 5, "t3"),
            _result("r2", "p2", 6, "t2"),
            _result("r1", "p1", 7, "t1"),
            _asst("b", "r1", 8, "m2", _text("done")),
        ],
    )
    session = import_claude_code(path)
    first = session.records[1]
    assert _uuids(session) == ["u1", "p1", "r3", "r2", "r1", "b"]
    assert isinstance(first, AssistantEntry)
    assert [b["id"] for b in first.message.content] == ["t1", "t2", "t3"]
    assert all("caller" not in b for b in first.message.content)
    assert first.message.usage is not None
    assert first.message.usage.output_tokens == 42
    assert first.message.stop_reason == "tool_use"
    assert session.files[0].off_chain == 0


def test_parallel_results_out_of_order_and_lagging_are_kept(tmp_path: Path) -> None:
    # 2.0.x: results written in another order than the calls; one result lags behind the next reply.
    path = _write(
        tmp_path / "s.jsonl",
        [
            _user("u1", None, 1, "go"),
            _asst("p1", "u1", 2, "m1", _tool("t1")),
            _asst("p2", "p1", 3, "m1", _tool("t2")),
            _asst("p3", "p2", 4, "m1", _tool("t3")),
            _result("r2", "p3", 5, "t2"),
            _result("r3", "r2", 6, "t3"),
            _asst("b", "r3", 7, "m2", _text("partial")),
            _result("r1", "r3", 8, "t1"),
        ],
    )
    session = import_claude_code(path)
    assert _uuids(session) == ["u1", "p1", "r2", "r3", "b", "r1"]
    assert _tool_pairs(session.records) == 3


def test_side_branch_progress_and_attachments_stay_but_rewinds_do_not(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "s.jsonl",
        [
            _user("u1", None, 1, "go"),
            _env("progress", "g1", "u1", 2, data={"type": "hook_progress", "hookName": "PreToolUse:Bash"}),
            _env(
                "attachment",
                "h1",
                "g1",
                2,
                attachment={"type": "hook_success", "content": "ok", "toolUseID": "t9"},
            ),
            _asst("a1", "u1", 3, "m1", _text("hi")),
            _user("dead", "u1", 4, "abandoned"),
            _env("progress", "g2", "dead", 4, data={"type": "hook_progress"}),
            _user("u2", "a1", 9, "live"),
        ],
    )
    session = import_claude_code(path)
    assert _uuids(session) == ["u1", "g1", "h1", "a1", "u2"]
    progress, attachment = session.records[1], session.records[2]
    assert isinstance(progress, ProgressEntry)
    assert progress.text == "PreToolUse:Bash"
    assert isinstance(attachment, AttachmentEntry)
    assert (attachment.attachment_type, attachment.content, attachment.tool_use_id) == (
        "hook_success",
        "ok",
        "t9",
    )


def test_compaction_keeps_history_through_the_logical_parent(tmp_path: Path) -> None:
    boundary = _env(
        "system",
        "cb",
        None,
        5,
        subtype="compact_boundary",
        content="Conversation compacted",
        logicalParentUuid="a1",
        compactMetadata={"trigger": "manual", "preTokens": 150_000},
    )
    path = _write(
        tmp_path / "s.jsonl",
        [
            _user("u1", None, 1, "before"),
            _asst("a1", "u1", 2, "m1", _text("old answer")),
            boundary,
            _user("sum", "cb", 6, "This session is being continued...", isCompactSummary=True),
            _user("u2", "sum", 7, "after"),
        ],
    )
    session = import_claude_code(path)
    record = session.records[2]
    assert _uuids(session) == ["u1", "a1", "sum", "u2"]
    assert isinstance(record, CompactBoundary)
    assert (record.uuid, record.logical_parent_uuid, record.trigger, record.pre_tokens) == (
        "cb",
        "a1",
        "manual",
        150_000,
    )
    summary = session.records[3]
    assert isinstance(summary, UserEntry)
    assert summary.is_compact_summary
    assert summary.parent_uuid == "cb"
    assert count_turns(session.records) == 2


@pytest.mark.timeout(10)
def test_parent_cycle_terminates_with_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", [_user("x", "y", 1, "one"), _user("y", "x", 2, "two")])
    session = import_claude_code(path)
    assert sorted(_uuids(session)) == ["x", "y"]
    assert any("cycle" in w.reason for w in session.warnings)


@pytest.mark.timeout(10)
def test_self_reference_terminates_with_a_warning(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", [_user("x", "x", 1, "me")])
    session = import_claude_code(path)
    assert _uuids(session) == ["x"]
    assert [w.line for w in session.warnings]
    assert "cycle" in session.warnings[-1].reason


def test_dangling_request_parent_terminates_with_a_warning(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "s.jsonl", [_user("u0", None, 1, "unreachable"), _user("u1", "request_abc", 2, "orphan")]
    )
    session = import_claude_code(path)
    assert _uuids(session) == ["u1"]
    (warning,) = session.warnings
    assert (warning.line, "request_abc" in warning.reason) == (2, True)


# --- Malformed lines -----------------------------------------------------------------------------


def test_spread_sse_message_and_garbage_are_skipped_with_line_numbers(tmp_path: Path) -> None:
    spread = {str(i): ch for i, ch in enumerate("event: message_start\ndata: {}")}
    path = _write(
        tmp_path / "s.jsonl",
        [
            _user("u1", None, 1, "hi"),
            _env("assistant", "bad", "request_0f", 2, message=spread),
            "{not json",
            "[1, 2]",
            _asst("a1", "u1", 3, "m1", _text("fine")),
        ],
    )
    session = import_claude_code(path)
    assert _uuids(session) == ["u1", "a1"]
    assert [w.line for w in session.warnings] == [2, 3, 4]
    assert "spread" in session.warnings[0].reason
    assert session.files[0].malformed == 3


@pytest.mark.parametrize(
    "block",
    [
        {"type": {"nested": "dict"}, "text": "x"},  # used to crash normalization (unhashable type)
        {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": "ls"},
        {"type": "thinking", "signature": "sig"},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "out", "is_error": "yes"},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": 3}]},
        {"type": "made_up", "text": "x"},
        {"type": "tool_result", "tool_use_id": {"x": 1}, "content": "out"},  # crashed chat --resume
    ],
    ids=["type-not-a-string", "input-not-an-object", "no-thinking-text", "is_error-not-bool",
         "bad-result-item", "unknown-type", "result-id-not-a-string"],
)  # fmt: skip
def test_a_block_the_api_cannot_take_skips_its_line(tmp_path: Path, block: dict[str, Any]) -> None:
    role = "user" if block["type"] == "tool_result" else "assistant"
    bad = _user("bad", "u1", 2, [block]) if role == "user" else _asst("bad", "u1", 2, "m0", block)
    path = _write(
        tmp_path / "s.jsonl", [_user("u1", None, 1, "hi"), bad, _asst("a1", "u1", 3, "m1", _text("ok"))]
    )
    session = import_claude_code(path)
    assert _uuids(session) == ["u1", "a1"]
    assert [(w.line, "content block 0" in w.reason) for w in session.warnings] == [(2, True)]
    result = CliRunner().invoke(cli, ["request", str(path), "--body-only"])
    assert result.exit_code == 0, result.output
    assert find_errors(orjson.loads(result.stdout)) == []


def test_metadata_lines_are_counted_not_imported(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "s.jsonl",
        [
            {"type": "summary", "summary": "title", "leafUuid": "zzz"},
            {"type": "file-history-snapshot", "messageId": "u1", "snapshot": {}},
            {"type": "some-future-type", "x": 1},
            _user("u1", None, 1, "hi"),
        ],
    )
    stats = import_claude_code(path).files[0]
    assert stats.ignored == {"summary": 1, "file-history-snapshot": 1, "some-future-type": 1}
    assert stats.records == 1


def test_unknown_node_type_in_the_chain_is_walked_through(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "s.jsonl",
        [
            _user("u1", None, 1, "hi"),
            _env("future-node", "f1", "u1", 2, payload={"x": 1}),
            _asst("a1", "f1", 3, "m1", _text("still here")),
        ],
    )
    session = import_claude_code(path)
    assert _uuids(session) == ["u1", "a1"]
    assert session.warnings == []
    assert session.files[0].ignored == {"future-node": 1}


# --- Mapping -------------------------------------------------------------------------------------


def test_api_error_and_synthetic_replies_are_marked_and_filtered(tmp_path: Path) -> None:
    details = '400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}'
    path = _write(
        tmp_path / "s.jsonl",
        [
            _user("u1", None, 1, "hi"),
            _asst(
                "e1", "u1", 2, "uuid-like", _text("Prompt is too long"), model="<synthetic>",
                isApiErrorMessage=True, error="invalid_request", errorDetails=details,
            ),
            _user("u2", "e1", 3, "again"),
            _asst("n1", "u2", 4, "uuid-2", _text("No response requested."), model="<synthetic>"),
        ],
    )  # fmt: skip
    session = import_claude_code(path)
    err, placeholder = session.records[1], session.records[3]
    assert isinstance(err, AssistantEntry)
    assert err.is_api_error_message
    assert err.api_error is not None
    assert (err.api_error.status, err.api_error.error_type, err.api_error.message) == (
        400,
        "invalid_request",
        details,
    )
    assert isinstance(placeholder, AssistantEntry)
    assert placeholder.is_api_error_message
    assert [e.uuid for e in api_filter(ui_view(session.records))] == ["u1", "u2"]


def test_user_flags_system_subtypes_and_thinking_bytes(tmp_path: Path) -> None:
    thinking = {"type": "thinking", "thinking": "", "signature": "EqQBCkYIBxgCKkB+sig=="}
    path = _write(
        tmp_path / "s.jsonl",
        [
            _user("u1", None, 1, "<local-command-caveat>Caveat: ...</local-command-caveat>", isMeta=True),
            _env(
                "system",
                "s1",
                "u1",
                2,
                subtype="local_command",
                content="<command-name>/model</command-name>",
            ),
            _env("system", "s2", "s1", 3, subtype="turn_duration", durationMs=1200, level="suggestion"),
            _user("u2", "s2", 4, "typed"),
            _asst("a1", "u2", 5, "m1", thinking),
            _asst("a2", "a1", 6, "m1", _text("answer")),
        ],
    )
    records = import_claude_code(path).records
    meta, local, timing, typed, reply = records
    assert isinstance(meta, UserEntry)
    assert meta.is_meta
    assert isinstance(local, SystemEntry)
    assert local.subtype == "local_command"
    assert isinstance(timing, SystemEntry)
    assert (timing.subtype, timing.level) == ("turn_duration", "info")
    assert timing.data == {"durationMs": 1200}
    assert count_turns(records) == 1
    assert typed.uuid == "u2"
    assert isinstance(reply, AssistantEntry)
    assert reply.message.content[0] == thinking
    assert orjson.dumps(thinking) in encode_line(reply)


# --- Subagent layouts ----------------------------------------------------------------------------


def _subagent_lines(prefix: str, session_id: str) -> list[dict[str, Any]]:
    root = _user(f"{prefix}-u", None, 3, "Task prompt", isSidechain=True, sessionId=session_id)
    reply = _asst(f"{prefix}-a", f"{prefix}-u", 4, f"{prefix}-m", _text("found it"), isSidechain=True)
    reply["sessionId"] = session_id
    return [root, reply]


def test_subagent_files_of_both_layouts_are_appended_as_sidechain(tmp_path: Path) -> None:
    main = _write(
        tmp_path / "sess-1.jsonl", [_user("u1", None, 1, "go"), _asst("a1", "u1", 2, "m1", _text("ok"))]
    )
    _write(
        tmp_path / "sess-1" / "subagents" / "agent-a0123456789abcdef.jsonl", _subagent_lines("new", "sess-1")
    )
    _write(tmp_path / "agent-0badc0de.jsonl", _subagent_lines("old", "sess-1"))
    _write(tmp_path / "agent-12345678.jsonl", _subagent_lines("other", "another-session"))
    session = import_claude_code(main)
    assert _uuids(session) == ["u1", "a1", "new-u", "new-a", "old-u", "old-a"]
    assert [e.is_sidechain for e in ui_view(session.records)] == [False, False, True, True, True, True]
    assert [f.path.name for f in session.files] == [
        "sess-1.jsonl",
        "agent-a0123456789abcdef.jsonl",
        "agent-0badc0de.jsonl",
    ]
    assert [e.uuid for e in api_filter(ui_view(session.records))] == ["u1", "a1"]
    assert import_claude_code(main, include_subagents=False).records == session.records[:2]


def test_subagent_file_alone_is_its_own_timeline(tmp_path: Path) -> None:
    path = _write(tmp_path / "agent-0badc0de.jsonl", _subagent_lines("old", "parent-session"))
    session = import_claude_code(path)
    assert session.is_subagent
    assert session.session_id == "agent-0badc0de"
    assert [e.is_sidechain for e in ui_view(session.records)] == [False, False]
    assert count_turns(session.records) == 1


def test_sidechain_compact_boundary_does_not_restart_the_main_view(tmp_path: Path) -> None:
    main = _write(tmp_path / "sess-1.jsonl", [_user("u1", None, 1, "go")])
    sub = _subagent_lines("s", "sess-1")
    sub.append(
        _env("system", "s-cb", None, 5, subtype="compact_boundary", logicalParentUuid="s-a", isSidechain=True)
    )
    sub.append(_user("s-sum", "s-cb", 6, "summary", isCompactSummary=True, isSidechain=True))
    _write(tmp_path / "sess-1" / "subagents" / "agent-a1.jsonl", sub)
    session = import_claude_code(main)
    assert not any(isinstance(r, CompactBoundary) for r in session.records)
    assert any(
        isinstance(r, SystemEntry) and r.subtype == "compact_boundary" and r.is_sidechain
        for r in session.records
    )


def test_unreadable_file_raises_a_transcript_error(tmp_path: Path) -> None:
    from foldline.errors import TranscriptError

    with pytest.raises(TranscriptError, match="cannot read"):
        import_claude_code(tmp_path / "missing.jsonl")
