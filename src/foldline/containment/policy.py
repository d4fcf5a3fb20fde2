"""One policy over a tool call's final change: what is applied, what needs the user's yes (§9.6).

Owns `review`: given a `Diff` (from a Bash command's layer, or the one file an Edit or Write makes)
it names the changed paths that a program outside the sandbox will later run or trust, each with
the reason, and `describe`, the text the user is shown before saying yes (a diff of each held
text file).

The class held, wherever it is in the workspace:
- the configuration and executable parts of any git directory (`config`, `config.worktree`,
  `commondir`, `gitdir`, `hooks/`, `info/`, `modules/`, `worktrees/`, alternates), a `.git`
  pointer file or a new nested repository, `.gitmodules`; index flags that hide a change from
  `git status` and `git diff` (skip-worktree, assume-unchanged) and new gitlinks; replace refs
  (loose or packed); a rebase or sequencer todo list with `exec` lines;
- the files a git config the host trusts names (`core.hooksPath`, includes, filter and alias
  scripts: `git_state.executed_files`), existing or not yet;
- the interpreter and package running foldline, its `site-packages` and `.pth` files, when they
  live in the workspace;
- settings, trust and instruction files (`.foldline/`, `.claude/`, `FOLDLINE.md`, `CLAUDE.md`,
  `AGENTS.md`), `.envrc`, `.vscode/`, and what `paths.is_protected_path` names (keys, shell rc).

Everything else is applied without asking: objects, ordinary refs and index entries included, so
everyday git, package installs and builds stay silent. Deleting a path is never held: it runs
nothing, and the checkpoint takes it back.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

from foldline.containment import git_state
from foldline.containment.layer import Change, Diff
from foldline.containment.paths import is_protected_path
from foldline.containment.safe_read import escape_controls, read_regular_file

__all__ = ["Held", "describe", "review"]

_GIT_HELD = frozenset(
    {"config", "config.worktree", "commondir", "gitdir", "hooks", "info", "modules", "worktrees"}
)
_ALTERNATES = frozenset({"alternates", "http-alternates"})
_TODO_LISTS = frozenset({"rebase-merge/git-rebase-todo", "sequencer/todo", "rebase-merge/done"})
_INSTRUCTIONS = frozenset({"foldline.md", "claude.md", "agents.md", "claude.local.md"})
_TRUSTED_DIRS = frozenset({".vscode", ".idea", ".devcontainer"})
_TRUSTED_FILES = frozenset({".envrc", ".gitmodules"})


@dataclass(frozen=True)
class Held:
    """A changed path the user must approve, and why."""

    path: str
    """The path that changed, relative to the workspace."""
    change: str
    """The `Change.path` it belongs to (a folder created whole holds it): what is refused."""
    reason: str


def review(
    diff: Diff,
    workspace: Path,
    upper: Path,
    *,
    gitdirs: list[Path],
    executed: list[Path],
    own: tuple[Path, ...] = (),
    max_entries: int = 200_000,
    max_bytes: int = 16 * 1024 * 1024,
) -> list[Held]:
    """The paths of `diff` that need the user's yes. `upper` holds the new versions (the layer's
    upper folder); `gitdirs` the git directories in use inside the workspace; `executed` the files
    a trusted git config names; `own` what `paths.own_install` found."""
    held: list[Held] = []
    rel_gitdirs = [g.relative_to(workspace).as_posix() for g in gitdirs if g.is_relative_to(workspace)]
    rel_exec = [p.relative_to(workspace).as_posix() for p in executed if p.is_relative_to(workspace)]
    rel_own = [
        p.relative_to(workspace).as_posix() for p in own if p.is_relative_to(workspace) and p != workspace
    ]
    seen = 0
    for change in diff.changes:
        if change.kind == "deleted":
            continue
        paths = [change.path]
        if change.entry == "dir" and change.kind in ("created", "replaced"):
            paths += _inside(upper, change.path, max_entries - seen)
        seen += len(paths)
        for rel in paths:
            reason = _why(rel, change, workspace, upper, rel_gitdirs, rel_exec, rel_own, max_bytes)
            if reason is not None:
                held.append(Held(rel, change.path, reason))
    return held


def describe(held: list[Held], workspace: Path, upper: Path, *, max_lines: int = 40) -> str:
    """What the user reads before approving: each held path, why, and a diff of its text."""
    lines: list[str] = []
    for item in held:
        lines.append(f"{item.path}: {item.reason}")
        old, new = _text(workspace / item.path), _text(upper / item.path)
        if new is None:
            continue
        diff = difflib.unified_diff(
            (old or "").splitlines(), new.splitlines(), f"a/{item.path}", f"b/{item.path}", lineterm="", n=1
        )
        body = list(diff)[:max_lines]
        lines += [f"    {escape_controls(line)}" for line in body]
    return "\n".join(lines)


def _why(
    rel: str,
    change: Change,
    workspace: Path,
    upper: Path,
    gitdirs: list[str],
    executed: list[str],
    own: list[str],
    max_bytes: int,
) -> str | None:
    parts = rel.split("/")
    folded = [p.casefold() for p in parts]
    if ".git" in folded:
        at = folded.index(".git")
        inner = parts[at + 1 :]
        if not inner:
            if change.kind == "modified" or change.path != rel or change.kind in ("created", "replaced"):
                return "a git repository or `.git` pointer: git run here would use its config and hooks"
            return None  # a `.git` that was there, deleted or kept as it was
        reason = _git_inner(inner, rel, workspace, upper, max_bytes)
        if reason is not None:
            return reason
    for gitdir in gitdirs:
        if rel.startswith(f"{gitdir}/") and ".git" not in folded:
            reason = _git_inner(rel[len(gitdir) + 1 :].split("/"), rel, workspace, upper, max_bytes)
            if reason is not None:
                return reason
    if _overlaps(rel, executed):
        return "git on the host runs it or reads it as config (a git config names it)"
    if _overlaps(rel, own):
        return "the Python installation running foldline (what it imports at its next start)"
    if ".git" in folded:
        return None  # git's own rules above, not the names below (`.git` is no settings folder)
    name = folded[-1]
    if folded[0] in (".foldline", ".claude") or name in _INSTRUCTIONS:
        return "settings or instructions foldline and Claude Code follow"
    if name in _TRUSTED_FILES or any(p in _TRUSTED_DIRS for p in folded):
        return "read as configuration by git or your editor and shell (it can name programs to run)"
    if is_protected_path(Path(rel)):
        return "keys, credentials or shell start-up files"
    return None


def _overlaps(rel: str, paths: list[str]) -> bool:
    """Whether `rel` is one of `paths`, lies under one, or holds one."""
    return any(rel == p or rel.startswith(f"{p}/") or p.startswith(f"{rel}/") for p in paths)


def _git_inner(inner: list[str], rel: str, workspace: Path, upper: Path, max_bytes: int) -> str | None:
    """Why a path inside a git directory (`inner`: its parts below it) is held, if it is."""
    head = inner[0]
    joined = "/".join(inner)
    if head in _GIT_HELD:
        return f"git's `{head}`: configuration or hooks git on the host runs"
    if inner[:2] == ["objects", "info"] and len(inner) > 2 and inner[2] in _ALTERNATES:
        return "another object store git would read from"
    if inner[:2] == ["refs", "replace"]:
        return "a replace ref: git would show other content than the commits hold"
    if head == "packed-refs":
        packed = _read(upper / rel, max_bytes)
        if packed is None:  # fail closed: refs that cannot be read could replace anything
            return "packed refs too large (or too odd) to check for replace refs"
        if _replace_refs(packed) - _replace_refs(_read(workspace / rel, max_bytes) or b""):
            return "packed replace refs: git would show other content than the commits hold"
    if head == "index":
        index = _read(upper / rel, max_bytes)
        if index is None:  # fail closed: flags that cannot be read could hide anything
            return "an index too large (or too odd) to check for flags that hide changes"
        return _index_reason(_read(workspace / rel, max_bytes), index)
    if joined in _TODO_LISTS:
        text = (_read(upper / rel, max_bytes) or b"").decode("utf-8", "replace")
        if any(line.split(" ", 1)[0] in ("exec", "x") for line in text.splitlines()):
            return "a rebase todo list with `exec` lines: `git rebase --continue` runs them"
    return None


def _index_reason(old: bytes | None, new: bytes | None) -> str | None:
    before = git_state.index_entries(old or b"")
    after = git_state.index_entries(new or b"")
    hidden = sorted(n for n, (_mode, flags) in after.items() if flags and not before.get(n, (0, 0))[1])
    links = sorted(n for n, (mode, _f) in after.items() if mode >> 12 == 0o16 and n not in before)
    if hidden:
        return f"index flags hide {', '.join(hidden[:5])} from `git status` and `git diff`"
    if links:
        return f"new submodule gitlink(s) {', '.join(links[:5])}: `git status` would run git inside them"
    return None


def _replace_refs(packed: bytes) -> set[str]:
    return {line.split(" ", 1)[1] for line in packed.decode("utf-8", "replace").splitlines()
            if " refs/replace/" in line}  # fmt: skip


def _inside(upper: Path, rel: str, budget: int) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(upper / rel):
        base = Path(folder).relative_to(upper).as_posix()
        found += [f"{base}/{n}" for n in (*dirs, *files)]
        if len(found) > budget:
            break
    return found


def _read(path: Path, max_bytes: int) -> bytes | None:
    return read_regular_file(path, limit_bytes=max_bytes)


def _text(path: Path) -> str | None:
    data = _read(path, 256 * 1024)
    if data is None or b"\0" in data:
        return None
    return data.decode("utf-8", "replace")
