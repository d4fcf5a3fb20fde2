"""The other side of fail-closed: everyday commands a coding agent runs are still allowed.

The rules are what a project would write (its test and lint commands allowed, secrets denied); the
read-only commands need no rule. `FALSE_POSITIVES` lists the everyday commands the checker still
asks about, each with the reason, so the count is visible and a fix shows up as a failing row.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from foldline.tools import PermissionRules, ToolContext, check_permission

PROJECT_RULES = PermissionRules.from_lists(
    allow=[
        "Bash(npm test:*)", "Bash(npm run lint:*)", "Bash(npm run build)", "Bash(pytest:*)",
        "Bash(python -m pytest:*)", "Bash(make test)", "Bash(make lint)", "Bash(cargo test:*)",
        "Bash(cargo build:*)", "Bash(go test:*)", "Bash(ruff check:*)", "Bash(mypy:*)",
        "Bash(git add:*)", "Bash(git commit:*)", "Bash(git checkout -b:*)", "Bash(git switch:*)",
        "Bash(uv run pytest:*)", "Bash(tox -e:*)",
    ],
    deny=["Read(**/.env)", "Bash(curl:*)", "Bash(rm -rf:*)"],
)  # fmt: skip

EVERYDAY = [
    "git status", "git status --short", "git log", "git log --oneline -20", "git log -p -- src/a.py",
    "git diff", "git diff --stat", "git diff HEAD~1 -- src", "git show HEAD", "git show --stat HEAD~2",
    "git branch", "git branch -a", "git blame src/a.py", "git rev-parse HEAD", "git ls-files",
    "git stash list", "git remote -v", "git describe --tags", "git log --author=me --since=2.weeks",
    "ls", "ls -la", "ls -la src", "ls src/", "pwd", "cat README.md", "cat src/a.py src/b.py",
    "head -n 20 src/a.py", "tail -n 50 log.txt", "wc -l src/a.py", "rg TODO", "rg -n 'def main' src",
    "rg --type py import", "grep -rn TODO src", "grep -n main src/a.py", "find . -name '*.py'",
    "find src -type f -name '*.ts' -not -path '*/node_modules/*'", "tree src", "du -sh src",
    "echo hello", "echo \"$HOME\"", "which python3", "sed -n '1,20p' src/a.py", "diff a.txt b.txt",
    "sort names.txt | uniq -c", "awk '{print $1}' data.txt", "jq .name package.json",
    "npm test", "npm test -- --watch=false", "npm run lint", "npm run build", "pytest",
    "pytest -q tests/test_a.py", "pytest -x -k 'not slow'", "python -m pytest tests", "make test",
    "cargo test", "cargo build --release", "go test ./...", "ruff check src", "mypy src",
    "git add src/a.py", "git commit -m 'fix: a thing'", "git checkout -b feature/x",
    "git add -A && git commit -m 'wip'", "git status && git diff --stat", "ls src | wc -l",
    "cat src/a.py | grep import", "rg -l TODO | head", "cd src && ls", "cd src && pytest -q",
    "git log --oneline | head -5", "npm test 2>&1 | tail -20", "pytest > /dev/null 2>&1 && echo ok",
    "git commit -m \"$(cat <<'EOF'\nfix: a thing\n\nbody\nEOF\n)\"", "uv run pytest -q",
    "echo done; git status", "stat src/a.py", "file src/a.py", "realpath src", "basename src/a.py",
]  # fmt: skip

FALSE_POSITIVES = {
    # bash's `*` must be expanded to know what ls is given; listing a glob asks
    "ls src/*.py": "a glob is only known at run time",
    # `$(…)` output becomes arguments: only echo/printf take unknown words without asking
    "git log $(git merge-base HEAD main)..HEAD": "a substitution's output becomes an argument",
}


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("import os\n")
    (ws / "src" / "b.py").write_text("")
    (ws / ".env").write_text("KEY=1")
    return ToolContext(workspace=ws)


@pytest.mark.parametrize("command", EVERYDAY)
def test_everyday_command_is_allowed(command: str, ctx: ToolContext) -> None:
    decision = check_permission("Bash", {"command": command}, ctx, PROJECT_RULES)
    assert decision.behavior == "allow", decision


@pytest.mark.parametrize("command", list(FALSE_POSITIVES))
def test_known_false_positive_still_asks(command: str, ctx: ToolContext) -> None:
    assert check_permission("Bash", {"command": command}, ctx, PROJECT_RULES).behavior == "ask"


def test_the_table_is_large_enough() -> None:
    assert len(set(EVERYDAY)) == len(EVERYDAY) >= 60
    assert len(FALSE_POSITIVES) < len(EVERYDAY) // 10
