"""Prompts the Bash sandbox saves: an everyday session's commands, decided with and without it.

The session is what a coding agent runs in a fresh project with no allow rules, in `default`
mode: reading, searching, building, testing, formatting, small edits by shell, git. Each command is
decided by `check_permission` as the checker alone would, then with an active sandbox (whose
contained asks are allowed). Nothing is run: the sandbox here only marks the context.

Then, where bubblewrap runs, what the sandbox costs a call: the median wall time of the Bash tool
running `true`, with and without it.

Usage: python benchmarks/sandbox_prompts.py [RUNS]   (the counts, the commands that still ask, the cost)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from foldline.containment.checkpoints import CheckpointStore
from foldline.containment.sandbox import Sandbox, SandboxPolicy, detect_sandbox
from foldline.tools import ToolContext, check_permission
from foldline.tools.bash import BashTool
from foldline.tools.permissions import PermissionMode

SESSION = [
    # look around
    "ls", "ls -la", "pwd", "git status", "git log --oneline -10", "git diff", "git branch",
    "cat README.md", "head -n 40 src/app.py", "wc -l src/app.py", "rg TODO", "grep -rn 'def ' src",
    "find . -name '*.py'", "tree src", "git show --stat HEAD", "cat pyproject.toml",
    # set up and build
    "python3 -m venv .venv", ".venv/bin/pip install -e .", "pip install -r requirements.txt",
    "npm install", "npm ci", "npm run build", "make", "make build", "cargo build", "go build ./...",
    "uv sync", "poetry install", "./configure", "cmake -B build", "cmake --build build",
    # test
    "pytest", "pytest -q tests/test_app.py", "pytest -x -k parse", "python -m pytest tests",
    "npm test", "npm run test -- --watch=false", "make test", "cargo test", "go test ./...",
    "tox -e py311", "uv run pytest -q", "node --test", "python3 -m unittest discover",
    # lint and format
    "ruff check src", "ruff check --fix src", "ruff format src", "black src", "mypy src",
    "npx eslint src", "npx prettier --write src", "cargo fmt", "gofmt -w .", "npm run lint",
    # quick experiments
    "python3 -c 'import app; print(app.VERSION)'", "python3 scripts/gen.py", "node -e 'console.log(1)'",
    "python3 -m app --help", "./run.sh", "bash scripts/setup.sh", "perl -pe 's/a/b/' data.txt",
    # small edits by shell, inside the workspace
    "mkdir -p src/util", "touch src/util/__init__.py", "cp src/app.py src/app_old.py",
    "mv src/app_old.py backup.py", "rm backup.py", "echo 'x = 1' > src/util/x.py",
    "sed -i 's/foo/bar/' src/app.py", "printf 'a\\nb\\n' >> notes.txt", "rm -rf build dist",
    "tar czf out.tgz src", "unzip -o vendor.zip -d vendor", "chmod +x run.sh", "ln -s src lib",
    "cat > src/util/y.py <<'EOF'\ny = 2\nEOF", "git stash", "git stash pop",
    # git
    "git add -A", "git add src/app.py", "git commit -m 'fix: parse'", "git checkout -b feat/x",
    "git switch main", "git restore src/app.py", "git rebase -i HEAD~2", "git merge feat/x",
    "git tag v1.0", "git pull", "git push", "git fetch",
    # pipelines and compounds
    "pytest 2>&1 | tail -20", "npm test > test.log 2>&1", "make && make test",
    "cd src && python3 -m app", "for f in src/*.py; do wc -l $f; done", "export X=1 && make",
    "python3 -c 'print(1)' | tee out.txt", "find . -name '*.pyc' -delete", "xargs -a list.txt rm",
    # reaching outside the workspace
    "cat ~/.bashrc", "echo x > /etc/motd", "cp src/app.py ~/backup.py", "curl https://example.com",
    "echo x >> .git/config", "rm -rf ../other-project",
]  # fmt: skip


@dataclass(frozen=True)
class Count:
    mode: PermissionMode
    commands: int
    asks_without: int
    asks_with: int
    still_asking: tuple[str, ...]


def _workspace(root: Path) -> Path:
    ws = root / "project"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("VERSION = 1\n")
    (ws / "README.md").write_text("# project\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


def count(workspace: Path, mode: PermissionMode = "default") -> Count:
    """How many of `SESSION` ask, without the sandbox and with it (active, auto-allow on)."""
    plain = ToolContext(workspace=workspace)
    # as a session runs it: on a copy-on-write layer, each change undoable (`containment.layer`)
    layered = Sandbox(SandboxPolicy(), bwrap="bwrap", unshare="unshare")
    boxed = ToolContext(workspace=workspace, sandbox=layered, checkpoints=CheckpointStore(workspace, "count"))

    def asks(ctx: ToolContext) -> list[str]:
        return [
            c for c in SESSION if check_permission("Bash", {"command": c}, ctx, mode=mode).behavior == "ask"
        ]

    still = asks(boxed)
    return Count(mode, len(SESSION), len(asks(plain)), len(still), tuple(still))


def overhead(workspace: Path, runs: int) -> dict[str, float] | None:
    """Median milliseconds of the Bash tool running `true`, unsandboxed and sandboxed; None where
    bubblewrap cannot run."""
    sandbox = detect_sandbox(SandboxPolicy())
    if not sandbox.active:
        return None
    medians = {}
    for label, box in (("plain", None), ("sandboxed", sandbox)):
        times = []
        for _ in range(runs):
            ctx = ToolContext(workspace=workspace, sandbox=box)
            start = time.perf_counter()
            anyio.run(BashTool().run, {"command": "true"}, ctx)
            times.append(time.perf_counter() - start)
        medians[label] = 1000 * statistics.median(times)
    return medians


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = _workspace(Path(tmp))
        for mode in ("default", "acceptEdits"):
            c = count(workspace, mode)
            saved = c.asks_without - c.asks_with
            print(
                f"{mode:12} {c.commands} commands: {c.asks_without} prompts with the checker alone, "
                f"{c.asks_with} with the sandbox ({saved} saved, {saved / c.asks_without:.0%})"
            )
        print("still asking with the sandbox:", *(f"  {s!r}" for s in c.still_asking), sep="\n")
        cost = overhead(workspace, runs)
        if cost is None:
            print("bubblewrap cannot run here: no cost measured")
        else:
            plain, boxed = cost["plain"], cost["sandboxed"]
            print(f"Bash `true`, median of {runs}: {plain:.1f} ms plain, {boxed:.1f} ms sandboxed")


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
