"""The other side of fail-closed: everyday commands a coding agent runs are still allowed.

The rules are what a project would write (its test and lint commands allowed, secrets denied); the
read-only commands need no rule. `FALSE_POSITIVES` lists the everyday commands the checker still
asks about, each with the reason, so the count is visible and a fix shows up as a failing row.
"""

from __future__ import annotations

import subprocess

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
    "git log --stat -3", "git log --graph --oneline --all", "git show HEAD:src/a.py", "git diff --cached",
    "git diff --name-only", "git branch --show-current", "git tag -l", "git rev-parse --abbrev-ref HEAD",
    "git ls-files src", "git grep -n import", "git config --get user.name", "git describe --always",
    "git shortlog -sn", "git log -p -3 -- src", "git reflog", "ls -R src", "ls -lh", "cat -n src/a.py",
    "head -5 src/a.py", "wc -c src/a.py", "nl src/a.py", "sort -u names.txt", "sort -n -k2 data.txt",
    "uniq names.txt", "cut -d: -f1 data.txt", "tr a-z A-Z < src/a.py", "sed -n '/def/p' src/a.py",
    "sed 's/a/b/' src/a.py", "awk -F, '{print $2}' data.csv", "awk 'NR==1' src/a.py",
    "jq -r '.scripts' package.json", "jq '.dependencies | keys' package.json", "jq . package.json",
    "grep -c import src/a.py", "grep -rl TODO src", "grep -E 'a|b' src/a.py", "rg -i todo src", "rg --files",
    "rg -g '*.py' import", "find . -type d -name src", "find src -maxdepth 1", "diff -u a.txt b.txt",
    "stat -c %s src/a.py", "du -h src", "df -h", "date", "date +%F", "whoami", "uname -a", "hostname",
    "which git", "type git", "echo $PATH", "pwd && ls", "tree -L 2", "xxd src/a.py | head", "od -c src/a.py",
    "sha256sum src/a.py", "readlink -f src", "dirname src/a.py", "seq 1 5", "python -m pytest -q",
    "pytest tests/ -x", "make lint", "cargo test --lib", "go test ./pkg/...", "ruff check --fix src",
    "mypy --strict src", "uv run pytest tests", "tox -e py311", "git add . && git commit -m wip",
    "LC_ALL=C sort names.txt", "TZ=UTC date", "NO_COLOR=1 pytest -q", "git -P log -3",
    "git --no-pager diff --stat", "cd src && git log --oneline -5", "git status --porcelain | wc -l",
]  # fmt: skip

FALSE_POSITIVES = {
    # bash's `*` must be expanded to know what ls is given; listing a glob asks
    "ls src/*.py": "a glob is only known at run time",
    # `$(…)` output becomes arguments: only echo/printf take unknown words without asking
    "git log $(git merge-base HEAD main)..HEAD": "a substitution's output becomes an argument",
}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> ToolContext:
    """A real git repository with history (the checks run git to see what it tracks), the denied
    `.env` on disk but untracked, as a project keeps it. Built once: commands are only checked."""
    ws = tmp_path_factory.mktemp("everyday") / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("import os\n")
    (ws / "src" / "b.py").write_text("")
    (ws / ".env").write_text("KEY=1")
    (ws / ".gitignore").write_text(".env\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "init"]):
        subprocess.run([*git, *args], cwd=ws, check=True, capture_output=True)
    return ToolContext(workspace=ws)


@pytest.mark.parametrize("command", EVERYDAY)
def test_everyday_command_is_allowed(command: str, ctx: ToolContext) -> None:
    decision = check_permission("Bash", {"command": command}, ctx, PROJECT_RULES)
    assert decision.behavior == "allow", decision


@pytest.mark.parametrize("command", list(FALSE_POSITIVES))
def test_known_false_positive_still_asks(command: str, ctx: ToolContext) -> None:
    assert check_permission("Bash", {"command": command}, ctx, PROJECT_RULES).behavior == "ask"


_BUILDS = ("npm", "pytest", "python", "make", "cargo", "go ", "ruff", "mypy", "uv", "tox", "git add",
           "git commit", "git checkout", "NO_COLOR", "cd src && py")  # fmt: skip
READ_ONLY_EVERYDAY = [c for c in EVERYDAY if not c.startswith(_BUILDS)]


@pytest.mark.parametrize("command", READ_ONLY_EVERYDAY)
def test_everyday_reading_needs_no_rule(command: str, ctx: ToolContext) -> None:
    """Read-only commands are allowed in `default` mode with no allow rule at all (only the deny)."""
    rules = PermissionRules.from_lists(deny=["Read(**/.env)"])
    decision = check_permission("Bash", {"command": command}, ctx, rules)
    assert decision.behavior == "allow", decision


def test_the_table_is_large_enough() -> None:
    assert len(set(EVERYDAY)) == len(EVERYDAY) >= 100
    assert len(READ_ONLY_EVERYDAY) >= 80
    assert len(FALSE_POSITIVES) < len(EVERYDAY) // 10
