"""FOLDLINE.md / CLAUDE.md become `instructions` attachment entries (R9.3)."""

from __future__ import annotations

from pathlib import Path

from foldline._json import decode_record, encode_line
from foldline.timeline import AttachmentEntry
from foldline.tools import load_instruction_files


def test_finds_files_in_order(workspace: Path) -> None:
    (workspace / "CLAUDE.md").write_text("claude rules\n")
    (workspace / "FOLDLINE.md").write_text("foldline rules\n")
    (workspace / ".foldline").mkdir()
    (workspace / ".foldline" / "FOLDLINE.md").write_text("local rules\n")
    entries = load_instruction_files(workspace, session_id="s1")
    assert [(e.path, e.content) for e in entries] == [
        (str(workspace / "FOLDLINE.md"), "foldline rules\n"),
        (str(workspace / "CLAUDE.md"), "claude rules\n"),
        (str(workspace / ".foldline" / "FOLDLINE.md"), "local rules\n"),
    ]
    assert {e.attachment_type for e in entries} == {"instructions"}
    assert {e.session_id for e in entries} == {"s1"}
    assert len({e.uuid for e in entries}) == 3


def test_none_present_or_empty(workspace: Path) -> None:
    assert load_instruction_files(workspace) == []
    (workspace / "FOLDLINE.md").write_text("  \n")
    assert load_instruction_files(workspace) == []


def test_symlinked_duplicate_injected_once(workspace: Path) -> None:
    (workspace / "FOLDLINE.md").write_text("rules\n")
    (workspace / "CLAUDE.md").symlink_to("FOLDLINE.md")
    assert len(load_instruction_files(workspace)) == 1


def test_symlink_out_of_the_workspace_is_not_read(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not inject\n")
    (workspace / "CLAUDE.md").symlink_to(secret)
    assert load_instruction_files(workspace) == []


def test_entries_round_trip_through_the_codec(workspace: Path) -> None:
    (workspace / "FOLDLINE.md").write_text("rules ✓\n")
    [entry] = load_instruction_files(workspace)
    decoded = decode_record(encode_line(entry))
    assert isinstance(decoded, AttachmentEntry)
    assert decoded == entry
