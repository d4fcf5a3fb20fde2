"""The chat's prompt history file: private, only prompts the session kept, never fatal.

It used to be 0644 under umask 022, to keep a 5 MB paste the chat had refused ("not saved"), and a
full disk turned its write into prompt_toolkit's "Unhandled exception in event loop".
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from foldline.cli._input import PromptHistory


@pytest.fixture
def umask_022() -> object:
    old = os.umask(0o022)
    yield None
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_kept_prompt_is_written_privately_and_read_back(tmp_path: Path, umask_022: object) -> None:
    path = tmp_path / "sessions" / "prompt-history"
    history = PromptHistory(path)
    history.append_string("fix the login bug\nand add a test")  # what the line editor calls on Enter
    history.settle(kept=True)
    assert _mode(path) == 0o600
    assert list(PromptHistory(path).load_history_strings()) == ["fix the login bug\nand add a test"]


def test_a_refused_prompt_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "prompt-history"
    history = PromptHistory(path)
    history.append_string("x" * 5_000_000)
    history.settle(kept=False)  # the session refused it before recording it
    history.append_string("a short one")
    history.settle(kept=True)
    assert list(PromptHistory(path).load_history_strings()) == ["a short one"]


def test_an_old_world_readable_file_is_made_private(tmp_path: Path) -> None:
    path = tmp_path / "prompt-history"
    path.write_text("\n# old\n+hello\n")
    path.chmod(0o644)
    history = PromptHistory(path)
    history.append_string("next")
    history.settle(kept=True)
    assert _mode(path) == 0o600
    assert list(PromptHistory(path).load_history_strings()) == ["next", "hello"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device that is always full)")
def test_a_full_disk_costs_the_history_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "prompt-history"
    path.symlink_to("/dev/full")  # every write fails with ENOSPC, as on a full disk
    warnings: list[str] = []
    history = PromptHistory(path, warnings.append)
    for line in ("one", "two"):
        history.append_string(line)
        history.settle(kept=True)  # raises nothing
    assert len(warnings) == 1
    assert "No space left on device" in warnings[0]
    assert "prompt history" in warnings[0]
