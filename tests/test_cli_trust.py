"""`foldline trust` (and chat's start-up prompt): what the user is shown is what gets trusted (§9.4)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from foldline.cli import cli
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
