"""Timeline entries, the append-only container, and the per-consumer views (R1.2–R1.7)."""

from __future__ import annotations

import msgspec
import pytest

from foldline._json import decode_record, encode_line
from foldline.timeline import (
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
    SnipBoundary,
    SystemEntry,
    Timeline,
    Usage,
    UserEntry,
    UserMessage,
    api_filter,
    ui_view,
)


def _user(uuid: str, text: str = "hi", **kw: object) -> UserEntry:
    return UserEntry(uuid=uuid, timestamp="t", message=UserMessage(content=text), **kw)  # type: ignore[arg-type]


def _assistant(uuid: str, **kw: object) -> AssistantEntry:
    message = AssistantMessage(id=f"msg_{uuid}", content=[{"type": "text", "text": "ok"}])
    return AssistantEntry(uuid=uuid, timestamp="t", message=message, **kw)  # type: ignore[arg-type]


EVERY_KIND: list[Record] = [
    _user("u1", "typed"),
    _user("u2", "caveat", is_meta=True),
    _user("u3", "summary", is_compact_summary=True, parent_uuid="cb"),
    AssistantEntry(
        uuid="a1",
        parent_uuid="u1",
        timestamp="t",
        message=AssistantMessage(
            id="msg_1",
            model="claude-sonnet-4-5",
            content=[
                {"type": "thinking", "thinking": "", "signature": "sig=="},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"path": "a"}},
            ],
            stop_reason="tool_use",
            usage=Usage(
                input_tokens=3, cache_read_input_tokens=100, cache_creation={"ephemeral_5m_input_tokens": 0}
            ),
        ),
    ),
    _assistant(
        "a2", is_api_error_message=True, api_error=ApiErrorInfo(status=400, message="prompt is too long")
    ),
    ProgressEntry(uuid="p1", timestamp="t", text="Running bash…", tool_use_id="toolu_1"),
    SystemEntry(uuid="s1", timestamp="t", content="context compacted"),
    SystemEntry(uuid="s2", timestamp="t", subtype="local_command", content="<local-command-stdout>x"),
    AttachmentEntry(
        uuid="at1", timestamp="t", attachment_type="instructions", content="# rules", path="FOLDLINE.md"
    ),
    _user("v1", is_virtual=True),
    SnipBoundary(uuid="sb", timestamp="t", removed_uuids=("u2",)),
    CollapseCommit(
        uuid="cc", timestamp="t", collapse_id="c1", first_uuid="u1", last_uuid="a1", summary="did x"
    ),
    CompactBoundary(uuid="cb", timestamp="t", trigger="manual", logical_parent_uuid="a2", pre_tokens=1000),
    CachePin(
        uuid="cp", timestamp="t", message_index=3, block_index=1, block={"type": "cache_edits", "edits": []}
    ),
    LatchedHeaders(uuid="lh", timestamp="t", betas=("cache-edits-2025-06-01",)),
]


@pytest.mark.parametrize("record", EVERY_KIND, ids=lambda r: f"{type(r).__name__}-{r.uuid}")
def test_every_record_kind_round_trips_through_jsonl(record: Record) -> None:
    line = encode_line(record)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert decode_record(line) == record
    assert msgspec.json.decode(line)["kind"] == type(record).__struct_config__.tag


def test_optional_keys_are_left_out_rather_than_null() -> None:
    line = encode_line(_user("u"))
    assert b"null" not in line
    assert b"is_meta" not in line


def test_line_separators_are_escaped_so_jsonl_stays_one_line() -> None:
    line = encode_line(_user("u", "a\u2028b\u2029c\x85d\ne"))
    assert b"\xe2\x80\xa8" not in line
    assert b"\xe2\x80\xa9" not in line
    assert decode_record(line) == _user("u", "a\u2028b\u2029c\x85d\ne")


def test_entries_are_frozen() -> None:
    entry = _user("u")
    with pytest.raises(AttributeError):
        entry.uuid = "other"  # type: ignore[misc]


def test_timeline_appends_and_indexes() -> None:
    timeline = Timeline(EVERY_KIND[:3])
    timeline.append(_assistant("a9"))
    assert len(timeline) == 4
    assert timeline.last_uuid == "a9"
    assert timeline.get("u2") == EVERY_KIND[1]
    snapshot = timeline.snapshot()
    timeline.append(_user("later"))
    assert len(snapshot) == 4  # a snapshot never sees later appends


def test_ui_view_shows_every_entry_kind_and_no_control_records() -> None:
    view = ui_view(EVERY_KIND)
    assert [e.uuid for e in view] == ["u1", "u2", "u3", "a1", "a2", "p1", "s1", "s2", "at1", "v1"]


def test_api_filter_keeps_user_assistant_attachment_and_local_command_only() -> None:
    view = api_filter(ui_view(EVERY_KIND))
    assert [e.uuid for e in view] == ["u1", "u2", "u3", "a1", "s2", "at1"]
