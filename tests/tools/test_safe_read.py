"""Host-side reads of workspace files (`foldline.containment.safe_read`, docs/design.md §9.4): what a
sandboxed command may plant where foldline reads (a link out, a FIFO, `/dev/zero`, a huge file)
is refused, quickly, and everything ordinary is read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from foldline.containment.safe_read import escape_controls, read_regular_file, read_workspace_file
from foldline.containment.trust import is_trusted, trust
from foldline.errors import UserError
from foldline.settings import load_settings
from foldline.tools import load_instruction_files


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "own.txt").write_text("ours\n")
    return root


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "home" / ".aws" / "credentials"
    path.parent.mkdir(parents=True)
    path.write_text("aws_secret_access_key = AKIASECRET\n")
    return path


def test_a_regular_file_inside_is_read_whole(ws: Path) -> None:
    assert read_workspace_file(ws / "sub" / "own.txt", ws) == b"ours\n"


@pytest.mark.timeout(20)
def test_a_fifo_is_refused_without_blocking(ws: Path) -> None:
    os.mkfifo(ws / "pipe")  # nobody writes it: a blocking open or read would never return
    assert read_workspace_file(ws / "pipe", ws) is None
    assert read_regular_file(ws / "pipe") is None
    assert read_workspace_file(ws / "sub" / "own.txt", ws) == b"ours\n"  # the same call reads files


@pytest.mark.timeout(20)
def test_a_device_is_refused_even_through_a_followed_link(ws: Path) -> None:
    (ws / "zero").symlink_to("/dev/zero")
    assert read_workspace_file(ws / "zero", ws) is None
    assert read_workspace_file(ws / "zero", ws, follow_links=True) is None  # leads out, and no file
    assert read_regular_file(Path("/dev/zero"), follow_links=True) is None
    assert read_regular_file(ws / "sub" / "own.txt", follow_links=True) == b"ours\n"


def test_links_out_of_the_workspace_are_not_followed(ws: Path, secret: Path) -> None:
    (ws / "notes.txt").symlink_to(secret)
    (ws / "linked").symlink_to(secret.parent, target_is_directory=True)
    for path in (ws / "notes.txt", ws / "linked" / "credentials", secret):
        assert read_workspace_file(path, ws) is None, path
        assert read_workspace_file(path, ws, follow_links=True) is None, path
    assert read_regular_file(ws / "notes.txt") is None  # the file itself may not be a link
    assert read_regular_file(secret) == secret.read_bytes()


def test_a_link_inside_the_workspace_is_followed_only_when_asked(ws: Path) -> None:
    (ws / "alias.txt").symlink_to("sub/own.txt")
    (ws / "folder").symlink_to("sub", target_is_directory=True)
    assert read_workspace_file(ws / "alias.txt", ws) is None
    assert read_workspace_file(ws / "folder" / "own.txt", ws) is None  # a link on the way, too
    assert read_workspace_file(ws / "alias.txt", ws, follow_links=True) == b"ours\n"
    assert read_workspace_file(ws / "folder" / "own.txt", ws, follow_links=True) == b"ours\n"


def test_a_workspace_given_through_a_link_is_still_read(ws: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(ws, target_is_directory=True)
    assert read_workspace_file(alias / "sub" / "own.txt", alias) == b"ours\n"
    assert read_workspace_file(ws / "sub" / "own.txt", alias) == b"ours\n"


def test_a_file_past_the_cap_counts_as_unreadable(ws: Path) -> None:
    (ws / "big").write_bytes(b"x" * 1001)
    assert read_workspace_file(ws / "big", ws, limit_bytes=1000) is None  # never a prefix
    assert read_workspace_file(ws / "big", ws, limit_bytes=1001) == b"x" * 1001


def test_a_read_past_its_time_counts_as_unreadable(ws: Path) -> None:
    (ws / "big").write_bytes(b"x" * (3 * 1024 * 1024))  # more than one chunk: the clock is checked
    assert read_workspace_file(ws / "big", ws, timeout_s=0) is None
    assert read_workspace_file(ws / "big", ws) == b"x" * (3 * 1024 * 1024)


def test_control_characters_are_escaped_and_text_kept() -> None:
    said = escape_controls("allow\x1b[2J\x1b]0;pwned\x07 Bash\rhidden\ttab\nline\u202e")
    assert not set(said) & {"\x1b", "\r", "\x07", "\u202e"}
    assert said == "allow\\x1b[2J\\x1b]0;pwned\\x07 Bash\\rhidden\ttab\nline\\u202e"


# --- the readers that use it ------------------------------------------------------------------


@pytest.mark.timeout(20)
def test_instruction_files_skip_a_fifo_and_a_device(ws: Path) -> None:
    os.mkfifo(ws / "CLAUDE.md")
    (ws / ".claude").mkdir()
    (ws / ".claude" / "CLAUDE.md").symlink_to("/dev/zero")
    (ws / "FOLDLINE.md").write_text("rules\n")
    assert [e.content for e in load_instruction_files(ws)] == ["rules\n"]


@pytest.mark.timeout(20)
def test_a_settings_file_that_is_a_fifo_or_a_link_out_is_an_error_naming_it(
    ws: Path, tmp_path: Path, secret: Path
) -> None:
    home = tmp_path / "home"
    (ws / ".foldline").mkdir()
    os.mkfifo(ws / ".foldline" / "settings.json")
    with pytest.raises(UserError, match=r"settings\.json: not a regular settings file inside the workspace"):
        load_settings(ws, home=home)
    (ws / ".foldline" / "settings.json").unlink()
    (ws / ".foldline" / "settings.json").symlink_to(secret)
    with pytest.raises(UserError, match="not a regular settings file"):
        load_settings(ws, home=home)
    (ws / ".foldline" / "settings.json").unlink()
    (ws / ".foldline" / "settings.json").write_text('{"permissions": {"deny": ["Bash(curl:*)"]}}')
    assert [str(r) for r in load_settings(ws, home=home).rules.deny] == ["Bash(curl:*)"]


def test_trust_records_the_bytes_given_not_a_re_read(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = ws / ".foldline" / "settings.json"
    path.parent.mkdir()
    shown = b'{"permissions": {"allow": ["Read"]}}'
    path.write_bytes(b'{"permissions": {"allow": ["Bash"]}}')  # swapped in while the user read
    trust(path, home, shown)
    assert not is_trusted(path, home)
    assert is_trusted(path, home, shown)
    path.write_bytes(shown)
    assert is_trusted(path, home)
