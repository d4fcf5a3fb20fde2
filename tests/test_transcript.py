"""The transcript format: round trips, tolerant loading of damaged files, headers, paths, fsync policy."""

from __future__ import annotations

import os
import typing
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import claude_code_files, requires_claude_code_data

from foldline._json import decode_record, encode_line
from foldline.errors import TranscriptError, TranscriptFormatError, UserError
from foldline.timeline import (
    AnyRecord,
    ApiErrorInfo,
    AssistantEntry,
    AssistantMessage,
    AttachmentEntry,
    CachePin,
    CollapseCommit,
    CompactBoundary,
    LatchedHeaders,
    ProgressEntry,
    Record,
    ResultsCleared,
    SnipBoundary,
    SystemEntry,
    UnknownRecord,
    Usage,
    UserEntry,
    UserMessage,
)
from foldline.transcript import (
    FORMAT_VERSION,
    LoadWarning,
    TranscriptHeader,
    TranscriptWriter,
    cwd_slug,
    list_session_files,
    load_transcript,
    open_session,
    session_path,
)

TS = "2026-01-01T00:00:00.000Z"


def user(uuid: str, text: str = "hello", parent: str | None = None) -> UserEntry:
    return UserEntry(uuid=uuid, parent_uuid=parent, timestamp=TS, message=UserMessage(content=text))


def every_record_kind() -> list[Record]:
    """One record of every kind in `timeline.Record`, with optional fields filled in."""
    usage = Usage(input_tokens=3, output_tokens=5, cache_read_input_tokens=7, cache_creation={"e": 1})
    return [
        UserEntry(
            uuid="u1",
            timestamp=TS,
            session_id="s",
            message=UserMessage(content=[{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
            is_meta=True,
            is_compact_summary=True,
        ),
        AssistantEntry(
            uuid="a1",
            parent_uuid="u1",
            timestamp=TS,
            message=AssistantMessage(
                id="msg_1",
                model="claude-x",
                content=[
                    {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
                    {"type": "text", "text": "line\u2028sep\u2029para\x85nel"},
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}},
                ],
                stop_reason="tool_use",
                usage=usage,
            ),
            is_api_error_message=True,
            api_error=ApiErrorInfo(status=529, error_type="overloaded_error", message="busy"),
        ),
        ProgressEntry(uuid="p1", timestamp=TS, text="Running…", tool_use_id="t1", data={"n": 1}),
        SystemEntry(uuid="y1", timestamp=TS, subtype="local_command", content="out", level="warning"),
        AttachmentEntry(
            uuid="at1",
            timestamp=TS,
            attachment_type="memory",
            content="CLAUDE.md",
            path="/p",
            is_virtual=True,
        ),
        SnipBoundary(uuid="sn1", timestamp=TS, removed_uuids=("u1", "a1")),
        SnipBoundary(uuid="sn2", timestamp=TS, removed_uuids=("u1",), tool_use_id="toolu_1"),
        ResultsCleared(uuid="rc1", timestamp=TS, tool_use_ids=("toolu_1",), placeholder="[cleared]"),
        CollapseCommit(
            uuid="c1",
            timestamp=TS,
            collapse_id="k",
            first_uuid="u1",
            last_uuid="a1",
            summary="s",
            tokens_before=10,
            tokens_after=2,
        ),
        CompactBoundary(uuid="cb1", timestamp=TS, trigger="manual", logical_parent_uuid="a1", pre_tokens=9),
        CachePin(uuid="cp1", timestamp=TS, message_index=2, block_index=0, block={"type": "cache_edits"}),
        LatchedHeaders(uuid="lh1", timestamp=TS, betas=("context-management-2025-06-27",)),
    ]


def write_file(path: Path, body: bytes, *, header: bytes | None = None) -> Path:
    head = header if header is not None else encode_line(TranscriptHeader(session_id="s", created_at=TS))
    path.write_bytes(head + body)
    return path


def lines(*records: AnyRecord) -> bytes:
    return b"".join(encode_line(r.raw if isinstance(r, UnknownRecord) else r) for r in records)


# --- Round trips (test 6) ---------------------------------------------------------------------


def test_every_record_kind_is_covered() -> None:
    kinds = {type(r).__struct_config__.tag for r in every_record_kind()}
    assert kinds == {t.__struct_config__.tag for t in typing.get_args(Record)}


@pytest.mark.parametrize("record", every_record_kind(), ids=lambda r: type(r).__name__)
def test_record_round_trips_through_the_codec(record: Record) -> None:
    line = encode_line(record)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert decode_record(line) == record
    assert encode_line(decode_record(line)) == line


def test_every_record_kind_round_trips_through_a_file(tmp_path: Path) -> None:
    records = every_record_kind()
    path = tmp_path / "s.jsonl"
    with TranscriptWriter.create(path, session_id="s", cwd="/w", fsync="never") as writer:
        for record in records:
            writer.append(record)
    loaded = load_transcript(path)
    assert loaded.records == records
    assert loaded.clean
    assert loaded.header.session_id == "s"
    assert loaded.header.cwd == "/w"
    assert loaded.header.format_version == FORMAT_VERSION
    assert path.read_bytes().split(b"\n", 1)[1] == lines(*records)


def test_loaded_records_rebuild_the_timeline(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with TranscriptWriter.create(path, session_id="sess-9", fsync="never") as writer:
        for record in every_record_kind():
            writer.append(record)
    timeline = load_transcript(path).timeline()
    assert timeline.session_id == "sess-9"
    assert list(timeline) == every_record_kind()
    assert timeline.last_uuid == "at1"


def test_line_separators_are_escaped_on_disk_and_restored(tmp_path: Path) -> None:
    text = "a\u2028b\u2029c\x85d\re"
    path = tmp_path / "s.jsonl"
    with TranscriptWriter.create(path, session_id="s", fsync="never") as writer:
        writer.append(user("u1", text))
    raw = path.read_bytes()
    assert "\u2028".encode() not in raw
    assert "\u2029".encode() not in raw
    assert raw.count(b"\n") == 2
    [record] = load_transcript(path).records
    assert isinstance(record, UserEntry)
    assert record.message.content == text


# --- Damage inside the file (test 3) ----------------------------------------------------------


@dataclass(frozen=True)
class Damage:
    """A body written after the header, the uuids expected back, and the warnings expected."""

    name: str
    body: bytes
    uuids: list[str]
    warnings: list[tuple[int, str]]
    """(line, substring of the reason) for every warning, in order."""


A, B, C = user("a"), user("b", parent="a"), user("c", parent="b")
BIG = user("big", "x" * 200_000 + "\u2028é")
RAW_SEPARATORS = (
    b'{"kind":"user","uuid":"raw","timestamp":"t",'
    b'"message":{"content":"\xe2\x80\xa8|\xe2\x80\xa9|\xc2\x85"}}\n'
)

DAMAGE = [
    Damage("garbage line", lines(A) + b"this is not json\n" + lines(B), ["a", "b"], [(3, "not a record")]),
    Damage("NUL run line", lines(A) + b"\x00" * 500 + b"\n" + lines(B), ["a", "b"], [(3, "500 NUL bytes")]),
    Damage(
        "NUL run glued to the next record",
        lines(A) + b"\x00" * 300 + lines(B, C),
        ["a", "b", "c"],
        [(3, "300 NUL bytes")],
    ),
    Damage("invalid UTF-8", lines(A) + b"\xff\xfe\xc3(\n" + lines(B), ["a", "b"], [(3, "invalid UTF-8")]),
    Damage(
        "invalid UTF-8 inside a record",
        lines(A) + b'{"kind":"user","uuid":"x","timestamp":"t","message":{"content":"\xff"}}\n' + lines(B),
        ["a", "b"],
        [(3, "unreadable record")],
    ),
    Damage(
        "glued records",
        lines(A)[:-1] + lines(B)[:-1] + lines(C),
        ["a", "b", "c"],
        [(2, "3 records glued")],
    ),
    Damage(
        "truncated splice",
        lines(A) + lines(B)[:25] + lines(C),
        ["a", "c"],
        [(3, "25 bytes that are not a record")],
    ),
    Damage("record over 64 KB", lines(A, BIG, B), ["a", "big", "b"], []),
    Damage(
        "garbage next to a big record",
        lines(A) + b"@@@" + lines(BIG) + lines(B),
        ["a", "big", "b"],
        [(3, "3 bytes that are not a record")],
    ),
    Damage("raw line separators in strings", lines(A) + RAW_SEPARATORS + lines(B), ["a", "raw", "b"], []),
    Damage("blank line", lines(A) + b"\n" + lines(B), ["a", "b"], [(3, "blank line")]),
    Damage(
        "invalid known kind",
        lines(A) + b'{"kind":"user","uuid":7}\n' + lines(B),
        ["a", "b"],
        [(3, "invalid `user` record")],
    ),
    Damage("JSON without kind", lines(A) + b"[1,2]\n" + lines(B), ["a", "b"], [(3, "without a `kind`")]),
    Damage(
        "second header",
        lines(A) + encode_line(TranscriptHeader(session_id="t", created_at=TS)) + lines(B),
        ["a", "b"],
        [(3, "second header")],
    ),
]


def uuids(records: list[AnyRecord]) -> list[str]:
    return [r.kind if isinstance(r, UnknownRecord) else r.uuid for r in records]


@pytest.mark.parametrize("case", DAMAGE, ids=lambda c: c.name)
def test_damage_is_skipped_with_a_warning_naming_the_line(tmp_path: Path, case: Damage) -> None:
    path = write_file(tmp_path / "s.jsonl", case.body)
    before = path.read_bytes()
    loaded = load_transcript(path)
    assert uuids(loaded.records) == case.uuids
    assert len(loaded.warnings) == len(case.warnings), loaded.warnings
    for (line, fragment), warning in zip(case.warnings, loaded.warnings, strict=True):
        assert warning.line == line
        assert fragment in warning.reason
    assert loaded.torn_tail == b""
    assert loaded.good_size == len(before)
    assert path.read_bytes() == before


def test_hostile_nesting_is_garbage_not_a_crash(tmp_path: Path) -> None:
    # Both JSON decoders raise RecursionError on deep nesting; the raw-decode scan is bounded.
    path = write_file(tmp_path / "s.jsonl", lines(A) + b'{"kind":' * 50_000 + b"\n" + lines(B))
    loaded = load_transcript(path)
    assert uuids(loaded.records) == ["a", "b"]
    [warning] = loaded.warnings
    assert warning.line == 3
    assert "bytes that are not a record" in warning.reason


def test_hostile_nesting_in_the_header_is_a_format_error(tmp_path: Path) -> None:
    path = write_file(tmp_path / "s.jsonl", b"", header=b"[" * 100_000 + b"\n")
    with pytest.raises(TranscriptFormatError, match="line 1 is not JSON"):
        load_transcript(path)


def test_header_without_newline_is_terminated_on_resume(tmp_path: Path) -> None:
    header = encode_line(TranscriptHeader(session_id="s", created_at=TS))[:-1]
    path = write_file(tmp_path / "s.jsonl", b"", header=header)
    loaded = load_transcript(path)
    assert loaded.records == []
    assert loaded.unterminated
    writer, _ = TranscriptWriter.resume(path, fsync="never")
    with writer:
        writer.append(A)
    assert load_transcript(path).records == [A]
    assert load_transcript(path).clean


def test_raw_separators_decode_to_the_original_characters(tmp_path: Path) -> None:
    path = write_file(tmp_path / "s.jsonl", RAW_SEPARATORS)
    [record] = load_transcript(path).records
    assert isinstance(record, UserEntry)
    assert record.message.content == "\u2028|\u2029|\x85"


def test_warning_offsets_point_at_the_skipped_bytes(tmp_path: Path) -> None:
    # Multi-byte garbage first, so character and byte offsets differ.
    line = "ééé".encode() + lines(B)[:-1] + b"\x00" * 10 + lines(C)
    path = write_file(tmp_path / "s.jsonl", lines(A) + line)
    data = path.read_bytes()
    start = data.index(line)
    loaded = load_transcript(path)
    assert uuids(loaded.records) == ["a", "b", "c"]
    assert [(w.line, w.offset) for w in loaded.warnings] == [
        (3, start),
        (3, start + 6 + len(lines(B)) - 1),
        (3, start),
    ]
    assert data[loaded.warnings[1].offset :].startswith(b"\x00" * 10 + b"{")
    assert "6 bytes that are not a record" in loaded.warnings[0].reason
    assert "10 NUL bytes" in loaded.warnings[1].reason
    assert "2 records glued" in loaded.warnings[2].reason
    assert str(loaded.warnings[0]) == f"line 3 (byte {start}): {loaded.warnings[0].reason}"


def test_many_objects_on_a_non_ascii_line_are_mapped_to_the_right_bytes(tmp_path: Path) -> None:
    # Mapping each piece's character offset to a byte offset by re-encoding the line's prefix was
    # quadratic (100,000 pieces took ~10 s, now ~0.3 s); the speed itself is not asserted here
    # (timing belongs in benchmarks/), the offsets are.
    pieces = 100_000
    line = "é ".encode() + b"{}" * pieces + b"\n"
    path = write_file(tmp_path / "s.jsonl", lines(A) + line + lines(B))
    start = path.read_bytes().index(line)
    loaded = load_transcript(path)
    assert uuids(loaded.records) == ["a", "b"]
    assert len(loaded.warnings) == 1 + pieces
    assert loaded.warnings[0].offset == start
    assert "3 bytes that are not a record" in loaded.warnings[0].reason
    assert [w.offset for w in loaded.warnings[1:]] == [start + 3 + 2 * i for i in range(pieces)]


def test_unknown_kinds_are_kept_and_written_back_verbatim(tmp_path: Path) -> None:
    future = b'{"kind":"hologram","uuid":"h1","payload":{"z":[1,2.5,null,"\\u00e9"]}}\n'
    path = write_file(tmp_path / "s.jsonl", lines(A) + future + lines(B))
    writer, loaded = TranscriptWriter.resume(path, fsync="never")
    with writer:
        unknown = loaded.records[1]
        assert isinstance(unknown, UnknownRecord)
        assert unknown.kind == "hologram"
        assert unknown.raw == {"kind": "hologram", "uuid": "h1", "payload": {"z": [1, 2.5, None, "é"]}}
        assert loaded.clean
        writer.append(unknown)
    again = load_transcript(path)
    assert again.records == [A, unknown, B, unknown]


def test_a_garbage_last_line_is_a_torn_tail(tmp_path: Path) -> None:
    path = write_file(tmp_path / "s.jsonl", lines(A, B) + b"\x00" * 64 + b"\n")
    loaded = load_transcript(path)
    assert uuids(loaded.records) == ["a", "b"]
    assert loaded.warnings == []
    assert loaded.torn_tail == b"\x00" * 64 + b"\n"
    assert loaded.good_size == path.stat().st_size - 65
    assert "65 bytes of an interrupted append" in loaded.notices()[0]


def test_a_complete_last_record_without_newline_is_kept_and_terminated_on_resume(tmp_path: Path) -> None:
    path = write_file(tmp_path / "s.jsonl", lines(A, B)[:-1])
    loaded = load_transcript(path)
    assert uuids(loaded.records) == ["a", "b"]
    assert loaded.unterminated
    assert loaded.torn_tail == b""
    writer, _ = TranscriptWriter.resume(path, fsync="never")
    with writer:
        writer.append(C)
    assert load_transcript(path).records == [A, B, C]
    assert load_transcript(path).clean


# --- Headers ----------------------------------------------------------------------------------


def test_newer_format_version_is_refused_clearly(tmp_path: Path) -> None:
    header = b'{"kind":"header","format_version":%d,"session_id":"s","created_at":"t"}\n' % (
        FORMAT_VERSION + 1
    )
    path = write_file(tmp_path / "s.jsonl", lines(A), header=header)
    with pytest.raises(TranscriptFormatError, match=r"format 2.*upgrade foldline") as info:
        load_transcript(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"\n",
        b"garbage\n",
        b'{"kind":"header","format_version":1,"sess',
        b'{"kind":"header","format_version":"1","session_id":"s","created_at":"t"}\n',
        b'{"kind":"header","format_version":1,"created_at":"t"}\n',
        encode_line(A),
    ],
    ids=["empty", "blank", "garbage", "torn", "version-string", "no-session-id", "record-first"],
)
def test_missing_or_garbled_header_names_the_file_and_what_to_do(tmp_path: Path, header: bytes) -> None:
    path = write_file(tmp_path / "s.jsonl", lines(B) if header else b"", header=header)
    with pytest.raises(TranscriptFormatError) as info:
        load_transcript(path)
    message = str(info.value)
    assert str(path) in message
    assert any(hint in message for hint in ("restored from a backup", "delete it"))


def test_header_fields_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    TranscriptWriter.create(path, session_id="abc", cwd="/home/me", fsync="never").close()
    header = load_transcript(path).header
    assert (header.session_id, header.cwd, header.format_version) == ("abc", "/home/me", FORMAT_VERSION)
    assert header.created_at.endswith("Z")
    assert header.foldline_version
    assert path.read_bytes().startswith(b'{"kind":"header",')


def test_header_only_file_loads_empty(tmp_path: Path) -> None:
    path = write_file(tmp_path / "s.jsonl", b"")
    loaded = load_transcript(path)
    assert loaded.records == []
    assert loaded.clean


@requires_claude_code_data
def test_a_claude_code_transcript_is_not_mistaken_for_ours() -> None:
    sample = next(p for p in claude_code_files() if p.stat().st_size > 0)
    with pytest.raises(TranscriptFormatError, match="Claude Code session is imported"):
        load_transcript(sample)


# --- Writer basics ----------------------------------------------------------------------------


def test_create_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    TranscriptWriter.create(path, session_id="s", fsync="never").close()
    with pytest.raises(TranscriptError, match="already exists"):
        TranscriptWriter.create(path, session_id="s", fsync="never")


def test_resume_of_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TranscriptError, match="no such transcript"):
        TranscriptWriter.resume(tmp_path / "nope.jsonl")


def test_unknown_fsync_policy_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="fsync policy"):
        TranscriptWriter.create(tmp_path / "s.jsonl", session_id="s", fsync="sometimes")  # type: ignore[arg-type]
    assert not (tmp_path / "s.jsonl").exists()


@pytest.mark.parametrize(
    ("policy", "expected"), [("always", 3 + 1), ("boundaries", 1 + 1), ("never", 0)], ids=str
)
def test_fsync_policy_decides_when_to_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str, expected: int
) -> None:
    path = tmp_path / "s.jsonl"
    writer = TranscriptWriter.create(path, session_id="s", fsync=policy)  # type: ignore[arg-type]
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    writer.append(A)
    writer.append(B, sync=True)
    writer.append(C)
    writer.close()  # the close counts as one more sync, except under "never"
    assert len(synced) == expected


def test_writer_refuses_appends_after_close(tmp_path: Path) -> None:
    writer = TranscriptWriter.create(tmp_path / "s.jsonl", session_id="s", fsync="never")
    writer.close()
    writer.close()
    assert writer.closed
    with pytest.raises(TranscriptError, match="closed"):
        writer.append(A)


def test_unencodable_record_writes_nothing_and_keeps_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with TranscriptWriter.create(path, session_id="s", fsync="never") as writer:
        with pytest.raises(UnicodeEncodeError):
            writer.append(user("bad", "\ud800"))
        with pytest.raises(TypeError):
            writer.append(UserEntry(uuid="o", timestamp=TS, message=UserMessage(content=[{"x": object()}])))
        writer.append(A)
        assert not writer.poisoned
    assert load_transcript(path).records == [A]


def test_decoder_failures_are_msgspec_errors() -> None:
    # The loader's hot path relies on every decode failure being a MsgspecError.
    for bad in (b"{", b"\x00", b'{"kind":"user"}', b'{"kind":"zzz"}', b"[]"):
        with pytest.raises(msgspec.MsgspecError):
            decode_record(bad)


# --- Paths ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cwd", "slug"),
    [
        ("/home/vwestberg/Claude", "-home-vwestberg-Claude"),
        ("C:\\Users\\loganf\\Documents\\IDAHO-VAULT", "C--Users-loganf-Documents-IDAHO-VAULT"),
        ("/w/.claude/worktrees/x", "-w--claude-worktrees-x"),
    ],
)
def test_cwd_slug_matches_claude_code(cwd: str, slug: str) -> None:
    assert cwd_slug(cwd) == slug


def test_session_path_layout(tmp_path: Path) -> None:
    assert session_path(tmp_path, "/a/b.c", "s1") == tmp_path / "-a-b-c" / "s1.jsonl"


@pytest.mark.parametrize(("cwd", "sid"), [("", "s"), ("/a", ""), ("/a", "../x"), ("/a", "a/b"), ("/a", "..")])
def test_session_path_rejects_bad_input(tmp_path: Path, cwd: str, sid: str) -> None:
    with pytest.raises(UserError):
        session_path(tmp_path, cwd, sid)


def test_list_session_files_newest_first_without_sidecars(tmp_path: Path) -> None:
    old = session_path(tmp_path, "/p[1]", "old")
    new = session_path(tmp_path, "/p[1]", "new")
    other = session_path(tmp_path, "/q", "other")
    for i, path in enumerate((old, new, other)):
        TranscriptWriter.create(path, session_id=path.stem, fsync="never").close()
        os.utime(path, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))
    (old.parent / "old.jsonl.corrupt-20260101T000000Z").write_bytes(b"x")
    assert (old.parent / "old.jsonl.lock").exists()
    assert list_session_files(tmp_path) == [other, new, old]
    assert list_session_files(tmp_path, cwd="/p[1]") == [new, old]
    assert list_session_files(tmp_path / "missing") == []


def test_load_warning_str() -> None:
    assert str(LoadWarning(3, 120, "blank line")) == "line 3 (byte 120): blank line"


# --- Property: loading is total after the header ------------------------------------------------

SAMPLE = lines(A, every_record_kind()[1], BIG, B, UnknownRecord(kind="future", raw={"kind": "future"}), C)


@given(
    edits=st.lists(
        st.tuples(
            st.sampled_from(["insert", "delete", "nul", "newline"]),
            st.integers(min_value=0, max_value=len(SAMPLE)),
            st.binary(min_size=1, max_size=40),
        ),
        min_size=1,
        max_size=6,
    )
)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_load_never_fails_after_the_header_and_resume_appends_cleanly(
    tmp_path: Path, edits: list[tuple[str, int, bytes]]
) -> None:
    body = bytearray(SAMPLE)
    for op, at, data in edits:
        at = min(at, len(body))
        if op == "insert":
            body[at:at] = data
        elif op == "delete":
            del body[at : at + len(data)]
        elif op == "nul":
            body[at : at + len(data)] = b"\x00" * len(data)
        else:
            body[at:at] = b"\n"
    path = write_file(tmp_path / "fuzz.jsonl", bytes(body))
    for sidecar in tmp_path.glob("fuzz.jsonl.corrupt-*"):
        sidecar.unlink()
    loaded = load_transcript(path)
    originals = [*every_record_kind(), A, B, C, BIG]
    intact = [r for r in loaded.records if r in originals]
    assert intact == sorted(intact, key=[A, every_record_kind()[1], BIG, B, C].index)
    writer, _ = TranscriptWriter.resume(path, fsync="never")
    with writer:
        writer.append(user("new"))
    after = load_transcript(path)
    assert after.records[-1] == user("new")
    assert after.torn_tail == b""
    assert len(after.warnings) <= len(loaded.warnings), "resume added no new damage"


def test_open_session_creates_then_resumes(tmp_path: Path) -> None:
    path = tmp_path / "proj" / "s.jsonl"
    writer, timeline = open_session(path, session_id="s", cwd="/w", fsync="never")
    assert (timeline.session_id, len(timeline)) == ("s", 0)
    with writer:
        writer.append(A)
    writer, timeline = open_session(path, session_id="ignored", fsync="never")
    with writer:
        assert (timeline.session_id, uuids(list(timeline))) == ("s", ["a"])


def test_open_session_reports_skipped_lines_instead_of_dropping_them(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    writer, _ = open_session(path, session_id="s", fsync="never")
    with writer:
        writer.append(A)
    with path.open("ab") as f:
        f.write(b"{not json}\n" + encode_line(B))
    notices: list[str] = []
    writer, timeline = open_session(path, session_id="s", fsync="never", on_notice=notices.append)
    with writer:
        assert uuids(list(timeline)) == ["a", "b"]
    assert len(notices) == 1
    assert str(path) in notices[0]
    assert "line 3" in notices[0]
