"""`foldline sessions` and `foldline show` on Claude Code and foldline transcripts (design.md §10)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result
from tests.conftest import CLAUDE_CODE_DATA, claude_code_files, requires_claude_code_data

from foldline.cli import cli
from foldline.sessions import list_sessions, load_session
from foldline.timeline import (
    AssistantEntry,
    AssistantMessage,
    AttachmentEntry,
    CompactBoundary,
    SystemEntry,
    UserEntry,
    UserMessage,
)
from foldline.transcript import TranscriptWriter

_WIDE = {"COLUMNS": "400"}
_REPLY_TEXT = "The tests live in tests/ and pass."
_LONG_OUTPUT = "x" * 5000


def _invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env={**_WIDE, **(env or {})})


def _foldline_session(path: Path, session_id: str = "fl-session-1") -> Path:
    """A small foldline transcript written with the real writer (and so the real codec)."""
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest"}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": _LONG_OUTPUT}
    records = [
        UserEntry(
            uuid="u1", timestamp="2026-03-01T10:00:00.000Z", message=UserMessage(content="run the tests")
        ),
        AssistantEntry(
            uuid="a1",
            parent_uuid="u1",
            timestamp="2026-03-01T10:00:01.000Z",
            message=AssistantMessage(id="msg_1", model="claude-test", content=[tool_use]),
        ),
        UserEntry(
            uuid="r1",
            parent_uuid="a1",
            timestamp="2026-03-01T10:00:02.000Z",
            message=UserMessage(content=[result]),
        ),
        CompactBoundary(
            uuid="cb", timestamp="2026-03-01T10:00:03.000Z", trigger="manual", pre_tokens=123_456
        ),
        UserEntry(
            uuid="s1",
            parent_uuid="cb",
            timestamp="2026-03-01T10:00:03.500Z",
            message=UserMessage(content="Summary: ran the tests."),
            is_compact_summary=True,
        ),
        SystemEntry(
            uuid="n1", parent_uuid="s1", timestamp="2026-03-01T10:00:04.000Z", content="cleared 3 results"
        ),
        UserEntry(
            uuid="u2",
            parent_uuid="n1",
            timestamp="2026-03-01T10:00:05.000Z",
            message=UserMessage(content="and?"),
        ),
        AssistantEntry(
            uuid="a2",
            parent_uuid="u2",
            timestamp="2026-03-01T10:00:06.000Z",
            message=AssistantMessage(
                id="msg_2", model="claude-test", content=[{"type": "text", "text": _REPLY_TEXT}]
            ),
        ),
    ]
    with TranscriptWriter.create(path, session_id=session_id, cwd="/tmp/project", fsync="never") as writer:
        for record in records:
            writer.append(record)
    return path


# --- Library level -------------------------------------------------------------------------------


def test_load_session_reads_a_foldline_transcript(tmp_path: Path) -> None:
    path = _foldline_session(tmp_path / "proj" / "fl-session-1.jsonl")
    session = load_session(path)
    assert (session.format, session.session_id, len(session.records)) == ("foldline", "fl-session-1", 8)
    assert session.warnings == []
    (info,) = list_sessions([tmp_path])
    assert (info.format, info.turns, info.last_activity) == ("foldline", 2, "2026-03-01T10:00:06.000Z")


def test_load_session_rejects_a_file_in_neither_format(tmp_path: Path) -> None:
    from foldline.errors import TranscriptFormatError

    path = tmp_path / "notes.jsonl"
    path.write_text('{"hello": "world"}\n', encoding="utf-8")
    with pytest.raises(TranscriptFormatError, match="neither a foldline transcript"):
        load_session(path)


def _cc_line(uuid: str, session_id: str, text: str, *, sidechain: bool = False) -> str:
    return (
        f'{{"type":"user","uuid":"{uuid}","parentUuid":null,"isSidechain":{str(sidechain).lower()},'
        f'"sessionId":"{session_id}","timestamp":"2026-02-01T00:00:00.000Z",'
        f'"message":{{"role":"user","content":"{text}"}}}}\n'
    )


def test_list_sessions_counts_subagent_files_with_their_session(tmp_path: Path) -> None:
    (tmp_path / "s1.jsonl").write_text(_cc_line("u1", "s1", "main prompt"), encoding="utf-8")
    (tmp_path / "agent-0badc0de.jsonl").write_text(
        _cc_line("a1", "s1", "task", sidechain=True), encoding="utf-8"
    )
    (tmp_path / "s1" / "subagents").mkdir(parents=True)
    (tmp_path / "s1" / "subagents" / "agent-a1.jsonl").write_text(_cc_line("a2", "s1", "t", sidechain=True))
    (tmp_path / "agent-12345678.jsonl").write_text(_cc_line("a3", "other", "lone", sidechain=True))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    infos = list_sessions([tmp_path])
    assert [(i.path.name, i.session_id, i.turns) for i in infos] == [
        ("agent-12345678.jsonl", "agent-12345678", 1),
        ("s1.jsonl", "s1", 1),
    ]
    assert len(load_session(tmp_path / "s1.jsonl").records) == 3


# --- foldline sessions ---------------------------------------------------------------------------


@requires_claude_code_data
def test_sessions_lists_every_real_claude_code_file() -> None:
    result = _invoke("sessions", str(CLAUDE_CODE_DATA))
    assert result.exit_code == 0, result.output
    for path in claude_code_files():
        assert str(path.relative_to(CLAUDE_CODE_DATA)) in result.output
    assert result.output.count("claude-code") >= len(claude_code_files())


def test_sessions_lists_both_formats_with_turns(tmp_path: Path) -> None:
    _foldline_session(tmp_path / "proj" / "fl-session-1.jsonl")
    cc = tmp_path / "cc" / "cc-session.jsonl"
    cc.parent.mkdir()
    cc.write_text(
        '{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"cc-session","timestamp":"2026-02-01T00:00:00.000Z",'
        '"message":{"role":"user","content":"hello"}}\n',
        encoding="utf-8",
    )
    result = _invoke("sessions", str(tmp_path))
    assert result.exit_code == 0, result.output
    # columns: last activity, turns, title, path, format, size
    cells = [
        [c.strip() for c in line.split("│")[1:-1]] for line in result.output.splitlines() if ".jsonl" in line
    ]
    rows = {row[3]: row for row in cells}
    assert set(rows) == {"proj/fl-session-1.jsonl", "cc/cc-session.jsonl"}
    fl, cc_row = rows["proj/fl-session-1.jsonl"], rows["cc/cc-session.jsonl"]
    assert (fl[1], fl[2], fl[4]) == ("2", "run the tests", "foldline")
    assert (cc_row[1], cc_row[2], cc_row[4]) == ("1", "hello", "claude-code")
    assert fl[0] == "2026-03-01 10:00"


def test_sessions_hide_the_empty_and_shorten_long_titles(tmp_path: Path) -> None:
    long_prompt = "please " * 40 + "\x1b[31mred"
    with TranscriptWriter.create(tmp_path / "a" / "long.jsonl", session_id="long") as writer:
        writer.append(
            UserEntry(
                uuid="u1", timestamp="2026-03-01T10:00:00.000Z", message=UserMessage(content=long_prompt)
            )
        )
    with TranscriptWriter.create(tmp_path / "a" / "empty.jsonl", session_id="empty") as writer:
        writer.append(SystemEntry(uuid="n1", timestamp="2026-03-01T10:00:00.000Z", content="only a notice"))
    listed = _invoke("sessions", str(tmp_path))
    assert listed.exit_code == 0, listed.output
    assert "long.jsonl" in listed.output
    assert "empty.jsonl" not in listed.output
    assert "1 session(s) without a prompt hidden" in listed.output
    assert "please please" in listed.output
    assert "…" in listed.output  # 287 characters shortened
    assert "\x1b" not in listed.output
    everything = _invoke("sessions", "--all", str(tmp_path))
    assert "empty.jsonl" in everything.output


def test_sessions_defaults_to_the_configured_directory(tmp_path: Path) -> None:
    _foldline_session(tmp_path / "projects" / "-tmp-project" / "fl-session-1.jsonl")
    result = _invoke("sessions", env={"FOLDLINE_HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert "-tmp-project/fl-session-1.jsonl" in result.output


def test_sessions_on_a_missing_directory_says_what_to_do(tmp_path: Path) -> None:
    result = _invoke("sessions", str(tmp_path / "nope"))
    assert result.exit_code == 1
    assert f"{tmp_path / 'nope'}: no such directory" in result.output


# --- foldline show -------------------------------------------------------------------------------


@requires_claude_code_data
def test_show_renders_a_real_claude_code_session() -> None:
    path = next(p for p in claude_code_files() if p.name.startswith("2b4ed4c0"))
    result = _invoke("show", str(path), "--max-chars", "60")
    assert result.exit_code == 0, result.output
    assert "user: Search if claude -p can make use of WebSearch and Task tool." in result.output
    assert "assistant (claude-opus-4-5-20251101)" in result.output
    assert "  → " in result.output
    assert "  ⎿ result " in result.output
    assert "(+" in result.output  # a tool result was clipped to 60 characters


@requires_claude_code_data
def test_show_hides_sidechains_unless_verbose() -> None:
    path = next(p for p in claude_code_files() if p.name.startswith("5c0375b4"))
    subagent_prompt = "user: Examine the package.json file(s)"  # the Task input quotes it too, unprefixed
    quiet, verbose = _invoke("show", str(path)), _invoke("show", str(path), "--verbose")
    assert quiet.exit_code == verbose.exit_code == 0
    assert subagent_prompt not in quiet.output
    assert subagent_prompt in verbose.output


def test_show_renders_a_foldline_session(tmp_path: Path) -> None:
    path = _foldline_session(tmp_path / "fl-session-1.jsonl")
    result = _invoke("show", str(path))
    assert result.exit_code == 0, result.output
    out = result.output
    assert "(foldline, session fl-session-1)" in out
    assert "user: run the tests" in out
    assert '  → Bash {"command":"pytest"}' in out
    assert "(+4700 chars)" in out  # 5,000-character result clipped to the default 300
    assert "── context compacted (manual, 123,456 tokens before) ──" in out
    assert "compact summary: Summary: ran the tests." in out
    assert "system/notice: cleared 3 results" in out
    assert _REPLY_TEXT in out
    assert out.index("user: run the tests") < out.index("context compacted") < out.index(_REPLY_TEXT)


_ESC = "\x1b]0;pwned\x07\x1b[31m"
"""An OSC title change and a colour change: what a hostile transcript would smuggle to the terminal."""


def test_show_strips_terminal_escapes_from_every_field(tmp_path: Path) -> None:
    # Text bodies were cleaned, but ids, names, types and subtypes were printed as they came.
    when = "2026-03-01T10:00:00.000Z"
    tool_use = {"type": "tool_use", "id": "t1", "name": f"Ba{_ESC}sh", "input": {}}
    result = {"type": "tool_result", "tool_use_id": f"t1{_ESC}", "content": "ok"}
    odd_block = {"type": f"odd{_ESC}"}
    records = [
        UserEntry(uuid="u1", timestamp=when, message=UserMessage(content=[odd_block])),
        AssistantEntry(
            uuid="a1",
            timestamp=when,
            message=AssistantMessage(id="m1", model=f"claude{_ESC}", content=[tool_use, odd_block]),
        ),
        UserEntry(uuid="r1", timestamp=when, message=UserMessage(content=[result])),
        SystemEntry(uuid="n1", timestamp=when, subtype=f"note{_ESC}", content="x"),
        AttachmentEntry(uuid="at1", timestamp=when, attachment_type=f"memo{_ESC}", content="y"),
    ]
    path = tmp_path / "s.jsonl"
    with TranscriptWriter.create(path, session_id=f"id{_ESC}", fsync="never") as writer:
        for record in records:
            writer.append(record)
    shown = _invoke("show", str(path), "--verbose")
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.output
    for cleaned in ("session id)", "assistant (claude)", "→ Bash {}", "user: [odd]", "  [odd]", "result t1:"):
        assert cleaned in shown.output
    assert "system/note: x" in shown.output
    assert "[memo] y" in shown.output


def test_show_strips_8_bit_control_characters(tmp_path: Path) -> None:
    # U+009B and U+009D are the one-character CSI and OSC: terminals that honour C1 controls
    # (xterm among them) act on them as they would on ESC [ and ESC ].
    when = "2026-03-01T10:00:00.000Z"
    path = tmp_path / "s.jsonl"
    with TranscriptWriter.create(path, session_id="s", fsync="never") as writer:
        writer.append(UserEntry(uuid="u1", timestamp=when, message=UserMessage(content="a\x9b2Jb\x9dc")))
    shown = _invoke("show", str(path))
    assert shown.exit_code == 0, shown.output
    assert "user: a2Jbc" in shown.output


def test_show_strips_terminal_escapes_from_warnings(tmp_path: Path) -> None:
    line = {
        "type": "user",
        "uuid": "u1",
        "parentUuid": f"gone{_ESC}",
        "timestamp": "2026-02-01T00:00:00.000Z",
        "message": {"role": "user", "content": "hello"},
    }
    path = tmp_path / "cc.jsonl"
    path.write_bytes(orjson.dumps(line) + b"\n")
    shown = _invoke("show", str(path))
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.output
    assert "warning: " in shown.output
    assert "parent gone not found" in shown.output


def test_sessions_strips_terminal_escapes_from_file_names(tmp_path: Path) -> None:
    _foldline_session(tmp_path / f"s{_ESC}.jsonl")
    listed = _invoke("sessions", str(tmp_path))
    assert listed.exit_code == 0, listed.output
    assert "\x1b" not in listed.output
    assert "s.jsonl" in listed.output


def test_show_finds_a_session_by_id(tmp_path: Path) -> None:
    _foldline_session(tmp_path / "projects" / "-tmp-project" / "fl-session-1.jsonl")
    result = _invoke("show", "fl-session-1", env={"FOLDLINE_HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert _REPLY_TEXT in result.output


def test_show_forced_format_is_used(tmp_path: Path) -> None:
    path = _foldline_session(tmp_path / "fl-session-1.jsonl")
    result = _invoke("show", str(path), "--format", "claude-code")
    # Read as Claude Code, a foldline file has no `type` lines: every line is skipped with a warning.
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output
    assert _REPLY_TEXT not in result.output


def test_show_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "gone.jsonl"
    result = _invoke("show", str(missing), env={"FOLDLINE_HOME": str(tmp_path)})
    assert result.exit_code == 1
    assert f"{missing}: no such session file" in result.output
    assert "foldline sessions" in result.output


def test_show_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"\x00\x01 not json\n")
    result = _invoke("show", str(garbage))
    assert result.exit_code == 1
    assert f"{garbage}: neither a foldline transcript" in result.output
