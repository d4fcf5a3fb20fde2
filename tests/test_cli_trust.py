"""`foldline trust` (and chat's start-up prompt): what the user is shown is what gets trusted (§9.4)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from foldline.cli import cli
from foldline.containment.trust import trust as record_trust
from foldline.errors import TrustStoreError
from foldline.settings import load_settings

_SETTINGS = (
    '{"permissions": {"allow": ["Bash(make)"],\n'
    ' "deny": ["Read(.env)", "Bash(echo \\u001b[2J\\u001b]0;x\\u0007\\r)"], "defaultMode": "acceptEdits"},\n'
    ' "sandbox": {"network": true}}\n'
)
"""JSON escapes decode to control characters: the parsed effect quotes them."""


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "ws"
    (root / ".foldline").mkdir(parents=True)
    (root / ".foldline" / "settings.local.json").write_text(_SETTINGS)
    return root


def test_the_prompt_shows_the_parsed_effect_before_the_question(ws: Path) -> None:
    result = CliRunner().invoke(cli, ["trust", "--workspace", str(ws)], input="n\n")
    assert result.exit_code == 0, result.output
    out = result.output
    effect = [
        "allows without asking: Bash(make)",
        "denies: Read(.env), Bash(echo \\x1b[2J\\x1b]0;x\\x07\\r)",
        "sets the permission mode to acceptEdits",
        "sets sandbox network to true",
    ]
    for line in effect:
        assert f"  - {line}" in out, out
        assert out.index(line) < out.index("Trust this settings file?")
    assert "Not trusted" in out
    assert load_settings(ws).mode is None  # the answer was no


def test_text_from_the_file_reaches_the_terminal_escaped(ws: Path) -> None:
    result = CliRunner().invoke(cli, ["trust", "--workspace", str(ws)], input="n\n")
    assert "\x1b" not in result.output
    assert "\x07" not in result.output
    assert "denies: Read(.env), Bash(echo \\x1b[2J\\x1b]0;x\\x07\\r)" in result.output  # as text


def test_exactly_the_bytes_shown_are_trusted(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command (or anyone) rewrites the file while the user reads it: the answer confirms what
    was shown, so the rewritten file stays unconfirmed."""
    path = ws / ".foldline" / "settings.local.json"
    shown = path.read_bytes()
    asked: list[str] = []

    def confirm(question: str, **_: object) -> bool:
        asked.append(question)
        path.write_text('{"permissions": {"defaultMode": "bypassPermissions"}}')
        return True

    monkeypatch.setattr(click, "confirm", confirm)
    result = CliRunner().invoke(cli, ["trust", "--workspace", str(ws)])
    assert result.exit_code == 0, result.output
    assert len(asked) == 1  # the question was asked, and answered yes
    assert "Trusted 1 file" in result.output
    assert load_settings(ws).mode is None  # what is there now was never shown
    path.write_bytes(shown)
    assert load_settings(ws).mode == "acceptEdits"  # what was shown is what the user trusted


def _foldline(args: list[str], home: Path, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The real command in a subprocess: a traceback, or click's "Aborted!", is what the user sees."""
    env = {**os.environ, "HOME": str(home)}
    code = "from foldline.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120, **kwargs
    )


def test_a_home_that_cannot_hold_the_store_is_a_clear_error_not_a_traceback(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".foldline").write_text("a file where the store's folder goes")  # fails even as root
    result = _foldline(["trust", "--workspace", str(ws), "--yes"], home, stdin=subprocess.DEVNULL)
    assert "Once trusted, it:" in result.stderr  # it got as far as recording
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    store = home / ".foldline" / "trusted-settings.json"
    assert f"cannot record the confirmation in {store}" in result.stderr
    assert "run `foldline trust` again" in result.stderr
    assert "Trusted" not in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_home_is_a_clear_error(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o555)
    try:
        result = _foldline(["trust", "--workspace", str(ws), "--yes"], home, stdin=subprocess.DEVNULL)
    finally:
        home.chmod(0o755)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert "cannot record the confirmation" in result.stderr


def test_the_store_that_cannot_be_written_raises_and_leaves_nothing_behind(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".foldline").mkdir(parents=True)
    store = home / ".foldline" / "trusted-settings.json"
    store.mkdir()  # a folder in the way: the temporary copy is written, the replace fails
    with pytest.raises(TrustStoreError, match="Nothing was trusted"):
        record_trust(ws / ".foldline" / "settings.local.json", home)
    assert sorted(p.name for p in (home / ".foldline").iterdir()) == ["trusted-settings.json"]


def test_trust_with_no_one_to_answer_says_to_pass_yes(ws: Path, tmp_path: Path) -> None:
    result = _foldline(["trust", "--workspace", str(ws)], tmp_path / "home", stdin=subprocess.DEVNULL)
    assert "Trust this settings file?" in result.stderr  # it asked
    assert result.returncode == 1, result.stderr
    assert "Aborted!" not in result.stderr
    assert "pass --yes" in result.stderr
    assert load_settings(ws).mode is None  # nothing was trusted
