"""Five commands the permission checker misread (the first attacker probe, rerun): each is judged
now as bash would run it, in every mode a rule or a protected path must hold in."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from foldline.containment.sandbox import Sandbox, SandboxPolicy
from foldline.tools import PermissionRules, ToolContext, check_permission
from foldline.tools.permissions import PermissionMode

PUSH_DENIED = PermissionRules.from_lists(deny=["Bash(git push:*)"])


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "README.md").write_text("hello\n")
    return ws


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
@pytest.mark.parametrize(
    "command",
    [
        "git -C . push --force origin main",
        "git --no-pager push --force",
        "git -c color.ui=never push",
        "git --git-dir=.git --work-tree=. push",
        "git -C . --no-pager -P push origin HEAD",
    ],
)
def test_a_git_push_deny_rule_sees_through_gits_global_options(
    repo: Path, command: str, mode: PermissionMode
) -> None:
    decision = check_permission("Bash", {"command": command}, ToolContext(workspace=repo), PUSH_DENIED, mode)
    assert decision.behavior == "deny", decision
    assert decision.rule == "Bash(git push:*)"


@pytest.mark.parametrize("flag", ["-execdir", "-okdir"])
def test_find_execdir_makes_the_inner_commands_paths_unknown(repo: Path, flag: str) -> None:
    """`-execdir` runs its command in the folder of each file found: `config` there is
    `.git/config`, not the workspace's `config`, so allow rules for find and echo do not cover it."""
    rules = PermissionRules.from_lists(allow=["Bash(find:*)", "Bash(echo:*)", "Bash(sh:*)"])
    command = f"find .git -name hooks {flag} sh -c 'echo x > config' \\;"
    decision = check_permission(
        "Bash", {"command": command}, ToolContext(workspace=repo), rules, "acceptEdits"
    )
    assert decision.behavior == "ask", decision


def test_a_redirection_word_is_globbed_as_bash_globs_it(repo: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("# rc\n")
    monkeypatch.setenv("HOME", str(home))
    rules = PermissionRules.from_lists(allow=["Bash(echo:*)"])
    # a sandbox that lets contained asks through: a protected path is not one of them
    sandboxed = ToolContext(workspace=repo, sandbox=Sandbox(SandboxPolicy(), bwrap="/usr/bin/bwrap"))
    for command in ("echo x >> ~/.bash[r]c", "echo x >> ~/.bash?c", "echo x > .git/conf[i]g"):
        for ctx in (ToolContext(workspace=repo), sandboxed):
            decision = check_permission("Bash", {"command": command}, ctx, rules, "acceptEdits")
            assert decision.behavior == "ask", (command, decision)


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "bypassPermissions"])
@pytest.mark.parametrize("command", ["cat README.md", "head -n 1 README.md", "grep -r hello ."])
def test_a_bare_read_deny_rule_denies_every_read(repo: Path, command: str, mode: PermissionMode) -> None:
    rules = PermissionRules.from_lists(deny=["Read"])
    decision = check_permission("Bash", {"command": command}, ToolContext(workspace=repo), rules, mode)
    assert decision.behavior == "deny", (command, decision)
