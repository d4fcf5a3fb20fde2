"""The default system prompt and the environment block a session records once (design.md R4.3.2).

The prompt has two parts, in this order:

1. `DEFAULT_SYSTEM_PROMPT`: static guidance, the same bytes for every session and workspace, so it
   belongs to the cached prefix every request shares (P7). A window under
   `Config.full_system_prompt_min_window` gets `COMPACT_SYSTEM_PROMPT` instead (`system_prompt_for`).
2. The environment block (`environment_block`): working directory, date, platform, shell, git
   branch and status. It is gathered once, when a session is created, recorded in the transcript as
   a `system` entry of subtype `environment` (never sent as a message: S0 drops system entries),
   and appended to the system prompt of every request of that session, forks included. A resume
   takes the recorded block back instead of asking git again, so the request after a resume is
   byte-identical to the one before it, and a block that changed (another day, new commits) never
   breaks a cached prefix mid-session. A session recorded without one gets none.

Invariants:
- Gathering the environment never fails a session: a missing or slow git (`Config.tools`'
  `environment_git_timeout_s`) leaves the git lines out.
- The block says it is a snapshot from the session's start, so the model checks before relying on
  a status that may have changed.
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from foldline.config import ToolsConfig
from foldline.containment.programs import find_program, git_environment, host_git
from foldline.timeline import AnyRecord, SystemEntry

__all__ = [
    "COMPACT_SYSTEM_PROMPT",
    "DEFAULT_SYSTEM_PROMPT",
    "ENVIRONMENT_SUBTYPE",
    "environment_block",
    "recorded_environment",
    "system_prompt_for",
    "transcript_note",
    "with_environment",
    "with_transcript",
]

DEFAULT_SYSTEM_PROMPT = """\
You are foldline, a coding agent. You work in the user's workspace through the tools you are given \
and nothing else: what you know about the code comes from reading it, and what you change, you \
change with a tool call the user can see and, where their settings say so, approve.

How to work:
- Understand before you change. Find the relevant code with Grep (contents) and Glob (file \
names), then Read it. Read a file before you Edit or Write it; Edit and Write refuse a file you \
have not read, or one that changed since you read it.
- Prefer Edit for changes to existing files: old_string must match the file exactly (copy it from \
Read's output without the line-number prefix) and appear once, or set replace_all. Use Write for \
new files or complete rewrites.
- Use Bash to run builds, tests, linters, git and other commands. Quote paths with spaces. Do not \
use it to read, search or edit files when a dedicated tool does that. Never run commands that \
delete data, rewrite history or reach outside the workspace unless the user asked for exactly that.
- Calls that do not depend on each other (several Reads or searches) can go in one reply; they \
run in parallel.
- Large outputs are saved to a file and shown as a preview; Read the file with offset and limit if \
you need more. If you have a Snip tool, remove old tool output you no longer need with it, naming \
the [id:...] tags of the messages that hold it.
- Follow the project's own conventions: its style, its test commands, the instruction files it \
provides. Keep changes as small as the task allows, and do not add features nobody asked for.
- After a change, check it (run the tests or the code) when you can, and say plainly if you could not.

How to answer:
- Be brief and concrete. Lead with the result; name the files and lines you changed.
- If a request is ambiguous or a step is risky, ask one clear question instead of guessing.
- Report errors and failed commands as they are; never claim something works without having seen it \
work.\
"""
"""Static guidance, foldline's own words: the cached part of every session's system prompt."""

COMPACT_SYSTEM_PROMPT = (
    "You are a coding agent working in the user's workspace through the tools provided. "
    "Read before you edit, keep changes small, and say what you did."
)
"""The prompt of a small window (`Config.full_system_prompt_min_window`): a model with a 4K or 8K
window has no room for 500 tokens of guidance, and a small one follows a short prompt better
(SmolLM2-135M stops calling tools under the full one: tests/server/test_real_model.py)."""


def system_prompt_for(window: int, full_from: int) -> str:
    """The static prompt for a `window`-token model: the full guidance from `full_from` tokens up."""
    return DEFAULT_SYSTEM_PROMPT if window >= full_from else COMPACT_SYSTEM_PROMPT


ENVIRONMENT_SUBTYPE = "environment"
"""The `system` entry subtype a session's environment block is recorded under."""


def _git(workspace: Path, args: Sequence[str], timeout_s: float) -> str | None:
    # on the host, in a workspace a sandboxed command may have written: git found outside it and
    # run with nothing the repository names switched on (docs/design.md §9.4)
    git = find_program("git", workspace)
    if git is None:
        return None
    try:
        done = subprocess.run(
            host_git(git, workspace, *args),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=git_environment(),  # no optional locks either: a status must not take the index lock
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def environment_block(
    workspace: Path,
    *,
    today: date | None = None,
    limits: ToolsConfig | None = None,
    host: tuple[str, str] | None = None,
    git: bool = True,
) -> str:
    """The environment a coding model needs, as text: directory, date, platform, shell, git state.

    Args:
        workspace: The session's workspace.
        today: The date to state (default: today, local time).
        limits: `environment_git_timeout_s` and `environment_status_lines` (default `ToolsConfig()`).
        host: The (platform, shell) to state (default: this machine's); a simulated session states
            fixed ones, so its requests are the same bytes on every machine.
        git: Ask git about the workspace; False states it is no repository without asking (a
            generated workspace, which has none, whatever repository the folder it sits in is in).
    """
    limits = limits or ToolsConfig()
    timeout = limits.environment_git_timeout_s
    system, shell = host or (
        f"{platform.system().lower()} {platform.release()}".rstrip(),
        os.environ.get("SHELL") or "unknown",
    )
    lines = [
        "<environment>",
        f"Working directory: {workspace}",
        f"Date: {(today or date.today()).isoformat()}",
        f"Platform: {system}",
        f"Shell: {shell}",
    ]
    inside = _git(workspace, ["rev-parse", "--is-inside-work-tree"], timeout) if git else None
    if inside is None or inside.strip() != "true":
        lines.append("Git repository: no")
    else:
        branch = (_git(workspace, ["branch", "--show-current"], timeout) or "").strip()
        lines.append(f"Git branch: {branch or '(detached HEAD)'}")
        status = _git(workspace, ["status", "--porcelain=v1", "--untracked-files=normal"], timeout)
        changed = [line for line in (status or "").splitlines() if line.strip()]
        if status is None:
            lines.append("Git status: unavailable")
        elif not changed:
            lines.append("Git status at session start: clean")
        else:
            most = limits.environment_status_lines
            lines.append(f"Git status at session start ({len(changed)} changed paths; it may differ now):")
            lines += changed[:most]
            if len(changed) > most:
                lines.append(f"... and {len(changed) - most} more (run `git status`)")
        log = _git(workspace, ["log", "--oneline", "-n", "3"], timeout)
        if log and log.strip():
            lines.append("Recent commits:")
            lines += log.strip().splitlines()
    lines.append("</environment>")
    return "\n".join(lines)


def recorded_environment(records: Sequence[AnyRecord]) -> str | None:
    """The environment block a session recorded when it was created, or None (none recorded)."""
    return next(
        (r.content for r in records if isinstance(r, SystemEntry) and r.subtype == ENVIRONMENT_SUBTYPE),
        None,
    )


def transcript_note(path: Path) -> str:
    """The system prompt's line naming the session's transcript (`TranscriptConfig.named_to_model`).

    Summaries lose things; the transcript never does (it is append-only, every message and tool
    result word for word). Naming it lets the model look a lost detail up at the price of one search,
    where a summary that dropped it would leave the model to guess or to ask the user again.
    """
    return (
        f"This session's full transcript, every message and tool result word for word, including the "
        f"parts later folded or summarized out of this conversation, is at {path} (JSON lines). When "
        "you need a detail that is no longer in view (a value the user gave, a command's output, a "
        "decision), search that file for it with Grep before guessing or asking the user again."
    )


def with_transcript(system: str, transcript: Path, named: bool) -> str:
    """`system` with `transcript_note` last when `named` (`TranscriptConfig.named_to_model`): the path
    is the session's own, so it goes after everything sessions share as a cached prefix."""
    return f"{system}\n\n{transcript_note(transcript.resolve())}" if named else system


def with_environment(system: str, environment: str | None) -> str:
    """`system` with the environment block after it (the static part stays a shared prefix)."""
    return system if not environment else f"{system}\n\n{environment}"
