"""Settings files: user, project and local scopes merged, deny never overridden, rules saved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foldline.containment.trust import trust
from foldline.errors import UserError
from foldline.settings import SettingsSource, load_settings, local_settings_path, save_rule
from foldline.tools import ToolContext, check_permission


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    ws.mkdir()
    return home, ws


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def perms(**lists: object) -> dict[str, object]:
    return {"permissions": lists}


def test_no_files_means_no_rules_and_no_mode(dirs: tuple[Path, Path]) -> None:
    home, ws = dirs
    settings = load_settings(ws, home=home)
    assert settings.rules.allow == settings.rules.deny == ()
    assert settings.mode is None
    assert settings.files == ()


def test_scopes_merge_and_remember_where_each_rule_came_from(dirs: tuple[Path, Path]) -> None:
    home, ws = dirs
    user = write(home / ".foldline/settings.json", perms(deny=["Bash(rm:*)"]))
    project = write(ws / ".foldline/settings.json", perms(allow=["Bash"], defaultMode="acceptEdits"))
    local = write(ws / ".foldline/settings.local.json", perms(ask=["Bash(git push:*)"]))
    claude = write(ws / ".claude/settings.json", perms(deny=["Read(**/.env)"]))
    trust(project, home)  # its allow rule and mode loosen: they count once the user confirmed it
    settings = load_settings(ws, home=home)
    assert [str(r) for r in settings.rules.deny] == ["Bash(rm:*)", "Read(**/.env)"]
    assert settings.rule_sources[("deny", "Bash(rm:*)")] == SettingsSource("user", user)
    assert settings.rule_sources[("allow", "Bash")] == SettingsSource("project", project)
    assert settings.rule_sources[("ask", "Bash(git push:*)")] == SettingsSource("local", local)
    assert settings.rule_sources[("deny", "Read(**/.env)")] == SettingsSource("project", claude)
    assert settings.mode == "acceptEdits"


def test_a_project_allow_cannot_override_a_user_deny(dirs: tuple[Path, Path]) -> None:
    home, ws = dirs
    write(home / ".foldline/settings.json", perms(deny=["Bash(rm:*)"]))
    write(ws / ".foldline/settings.json", perms(allow=["Bash", "Bash(rm:*)"]))
    write(ws / ".foldline/settings.local.json", perms(allow=["Bash(rm -rf x)"]))
    rules = load_settings(ws, home=home).rules
    ctx = ToolContext(workspace=ws)
    rm = check_permission("Bash", {"command": "rm -rf x"}, ctx, rules, "bypassPermissions")
    assert rm.behavior == "deny"
    assert check_permission("Bash", {"command": "ls"}, ctx, rules).behavior == "allow"


def test_the_most_specific_mode_wins(dirs: tuple[Path, Path]) -> None:
    home, ws = dirs
    write(home / ".foldline/settings.json", {"defaultMode": "plan"})
    assert load_settings(ws, home=home).mode == "plan"
    local = write(ws / ".foldline/settings.local.json", perms(defaultMode="acceptEdits"))
    trust(local, home)
    settings = load_settings(ws, home=home)
    assert (settings.mode, settings.mode_source) == ("acceptEdits", SettingsSource("local", local))


def test_the_sandbox_mode_remembers_the_file_that_set_it_and_not_one_whose_loosening_was_ignored(
    dirs: tuple[Path, Path],
) -> None:
    home, ws = dirs
    assert load_settings(ws, home=home).sandbox_source is None
    user = write(home / ".foldline/settings.json", {"sandbox": "off"})
    write(ws / ".foldline/settings.json", {"sandbox": {"mode": "off"}})  # checked in: ignored
    settings = load_settings(ws, home=home)
    assert (settings.sandbox.mode, settings.sandbox_source) == ("off", SettingsSource("user", user))
    local = write(ws / ".foldline/settings.local.json", {"sandbox": "required"})  # tightens: kept
    settings = load_settings(ws, home=home)
    assert (settings.sandbox.mode, settings.sandbox_source) == ("required", SettingsSource("local", local))


def test_a_checked_in_file_cannot_turn_prompts_off(dirs: tuple[Path, Path]) -> None:
    home, ws = dirs
    write(ws / ".foldline/settings.json", perms(defaultMode="bypassPermissions"))
    settings = load_settings(ws, home=home)
    assert settings.mode is None
    assert "bypassPermissions" in settings.warnings[0]
    trust(ws / ".foldline/settings.json", home)  # confirmed or not, checked in: never bypass
    assert load_settings(ws, home=home).mode is None
    local = write(ws / ".foldline/settings.local.json", perms(defaultMode="bypassPermissions"))
    unconfirmed = load_settings(ws, home=home)  # a cloned repository may hold a "local" file too
    assert unconfirmed.mode is None
    assert unconfirmed.untrusted == (local,)
    trust(local, home)
    assert load_settings(ws, home=home).mode == "bypassPermissions"


@pytest.mark.parametrize(
    ("content", "complaint"),
    [
        pytest.param("{not json", "not valid JSON", id="json"),
        pytest.param("[]", "JSON object", id="not-object"),
        pytest.param('{"permissions": []}', "`permissions` must be an object", id="permissions"),
        pytest.param('{"permissions": {"allow": "Bash"}}', "list of rule strings", id="list"),
        pytest.param('{"permissions": {"deny": ["Bash("]}}', "not a permission rule", id="rule"),
        pytest.param('{"defaultMode": "yolo"}', "defaultMode 'yolo'", id="mode"),
    ],
)
def test_a_bad_file_is_an_error_naming_it(dirs: tuple[Path, Path], content: str, complaint: str) -> None:
    home, ws = dirs
    path = ws / ".foldline/settings.json"
    path.parent.mkdir()
    path.write_text(content)
    with pytest.raises(UserError, match=complaint) as info:
        load_settings(ws, home=home)
    assert str(path) in str(info.value)


def test_save_rule_adds_once_and_keeps_the_rest(dirs: tuple[Path, Path]) -> None:
    home, ws = dirs
    path = write(local_settings_path(ws), {"env": {"A": "1"}, "permissions": {"deny": ["Bash(rm:*)"]}})
    trust(path, home)
    assert save_rule(ws, "Bash(npm test)", home=home) == path
    save_rule(ws, "Bash(npm test)", home=home)
    assert json.loads(path.read_text()) == {
        "env": {"A": "1"},
        "permissions": {"deny": ["Bash(rm:*)"], "allow": ["Bash(npm test)"]},
    }
    assert [str(r) for r in load_settings(ws, home=home).rules.allow] == ["Bash(npm test)"]


def test_save_rule_keeps_a_file_the_user_never_confirmed_unconfirmed(dirs: tuple[Path, Path]) -> None:
    # a planted local file gains the user's rule, but its own rules stay ignored: saving one
    # answer must not confirm what the user never saw
    home, ws = dirs
    path = write(local_settings_path(ws), perms(allow=["Bash"], defaultMode="bypassPermissions"))
    save_rule(ws, "Bash(npm test)", home=home)
    settings = load_settings(ws, home=home)
    assert settings.rules.allow == ()
    assert settings.mode is None
    assert settings.untrusted == (path,)


def test_save_rule_creates_the_file_and_refuses_non_rules(dirs: tuple[Path, Path]) -> None:
    home, ws = dirs
    save_rule(ws, "Edit(/src/a.py)", home=home)
    assert [str(r) for r in load_settings(ws, home=home).rules.allow] == [
        "Edit(/src/a.py)"
    ]  # foldline wrote it
    assert json.loads(local_settings_path(ws).read_text()) == {"permissions": {"allow": ["Edit(/src/a.py)"]}}
    with pytest.raises(UserError):
        save_rule(ws, "Bash(")


@pytest.mark.parametrize("name", [".foldline/settings.json", ".claude/settings.local.json"])
def test_an_unconfirmed_workspace_file_cannot_turn_on_accept_edits(
    dirs: tuple[Path, Path], name: str
) -> None:
    """acceptEdits lets every Write and Edit in the workspace through without asking: from a file
    the user never confirmed it is ignored like bypassPermissions, and said."""
    home, ws = dirs
    path = write(ws / name, perms(defaultMode="acceptEdits", deny=["Bash(curl:*)"]))
    settings = load_settings(ws, home=home)
    assert [str(r) for r in settings.rules.deny] == ["Bash(curl:*)"]  # the file was read
    assert settings.mode is None
    assert "ignored defaultMode acceptEdits" in settings.warnings[0]
    assert settings.untrusted == (path,)
    trust(path, home)
    assert load_settings(ws, home=home).mode == "acceptEdits"


def test_control_characters_from_a_workspace_file_reach_the_warnings_escaped(dirs: tuple[Path, Path]) -> None:
    home, ws = dirs
    write(ws / ".foldline/settings.json", perms(allow=["Bash(echo \x1b]0;owned\x07\x1b[2J\rok)"]))
    [warning] = load_settings(ws, home=home).warnings
    assert "\x1b" not in warning
    assert "\r" not in warning
    assert "Bash(echo \\x1b]0;owned\\x07\\x1b[2J\\rok)" in warning  # said, as text
