"""The approval prompt: what a tool call would do, shown so it cannot disguise itself (R9.2).

A command or file content can carry terminal control sequences: a carriage return or an ANSI
"erase line" lets a command overwrite its own `Allow Bash ...` line, bidi overrides reorder what is
shown, zero-width characters hide differences. So every character that is not printable text is
shown escaped (`\\x1b`, `\\r`, `\\u202e`), the command is shown whole, one gutter-prefixed line per
line (a line of it can never pass for a line of the prompt), and Write/Edit show a diff.

The answers are yes (once), yes always (saves an allow rule to the local settings file, offered
only when such a rule would really allow this call) and no. Anything else is no.
"""

from __future__ import annotations

import asyncio
import difflib
import unicodedata
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import click

from foldline._json import dumps
from foldline.settings import Settings, save_rule
from foldline.tools import Decision, PermissionRules, ToolContext, check_permission
from foldline.tools.permissions import PermissionMode, Rule, suggest_rules

__all__ = ["Choice", "escape_controls", "make_asker", "parse_choice", "render_question"]

Choice = Literal["yes", "always", "no"]
_GUTTER = "  │ "
_DIFF_LIMIT = 200_000
"""Bytes of an existing file read to show a diff; a larger file is described, not diffed."""
_NAMED = {"\t": "\\t", "\r": "\\r", "\x1b": "\\x1b", "\x07": "\\a", "\x08": "\\b", "\x00": "\\0"}


def escape_controls(text: str) -> str:
    """`text` with every control, format, separator and non-ASCII space character escaped as
    `\\xNN` / `\\uNNNN` (newlines kept), so the terminal shows it and never interprets it."""
    out = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch == "\n" or (ch == " ") or category[0] not in "CZ":
            out.append(ch)
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return "".join(out)


def _gutter(text: str) -> str:
    return "\n".join(_GUTTER + line for line in escape_controls(text).split("\n"))


def _current_text(path: Path) -> str | None:
    try:
        if path.stat().st_size > _DIFF_LIMIT:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _diff(path: Path, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), str(path), str(path)
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines).rstrip("\n")


def _file_change(tool_name: str, tool_input: Mapping[str, Any], workspace: Path) -> str:
    path = workspace / str(tool_input.get("file_path", ""))
    before = _current_text(path)
    if before is None:
        return f"{path} (too large to diff)"
    if tool_name == "Write":
        after = str(tool_input.get("content", ""))
    else:
        old, new = str(tool_input.get("old_string", "")), str(tool_input.get("new_string", ""))
        if old and old in before:
            after = before.replace(old, new) if tool_input.get("replace_all") else before.replace(old, new, 1)
        else:  # the edit will fail or create the file: show what it asks for
            before, after = old, new
    return _diff(path, before, after) or f"{path} (no change)"


def describe(tool_name: str, tool_input: Mapping[str, Any], workspace: Path) -> str:
    """The full body of the question: the command, the diff, or the input as JSON; escaped."""
    if tool_name == "Bash" and isinstance(tool_input.get("command"), str):
        return _gutter(str(tool_input["command"]))
    if tool_name in ("Write", "Edit"):
        return _gutter(_file_change(tool_name, tool_input, workspace))
    return _gutter(dumps(dict(tool_input), indent=True, default=str).decode())


def render_question(
    tool_name: str,
    tool_input: Mapping[str, Any],
    decision: Decision,
    workspace: Path,
    always: tuple[str, ...] = (),
) -> str:
    """The whole prompt text, ready to print as plain text (no markup is interpreted)."""
    lines = [
        f"{tool_name} wants to run:" if tool_name == "Bash" else f"{tool_name}:",
        describe(tool_name, tool_input, workspace),
        f"Why this asks: {escape_controls(decision.reason)}",
        "  1. yes",
    ]
    if always:
        rules = ", ".join(escape_controls(r) for r in always)
        lines.append(f"  2. yes, always (saves {rules} to .foldline/settings.local.json)")
    lines.append(f"  {3 if always else 2}. no")
    return "\n".join(lines)


def parse_choice(answer: str, *, always_offered: bool) -> Choice:
    """The answer typed at the prompt; anything not clearly yes is no."""
    text = answer.strip().casefold()
    if text in ("1", "y", "yes"):
        return "yes"
    if always_offered and text in ("2", "a", "always"):
        return "always"
    return "no"


def make_asker(
    settings: Settings,
    workspace: Path,
    mode: PermissionMode,
    *,
    echo: Callable[[str], None] = click.echo,
    read: Callable[[str], str] = input,
    aread: Callable[[str], Awaitable[str]] | None = None,
) -> Callable[[str, Mapping[str, Any], Decision], Awaitable[bool]]:
    """The engine's `ask` callback for a terminal: prints `render_question`, reads the answer.

    Rules saved with "yes, always" also apply for the rest of the session: a later call that they
    (with the settings' rules) would allow is approved without asking again. `aread`, when given,
    reads the answer instead of `read` (the chat's line editor, which must own the terminal).
    """
    approved: list[Rule] = []
    ctx = ToolContext(workspace=workspace)

    def rules() -> PermissionRules:
        base = settings.rules
        return PermissionRules((*base.allow, *approved), base.ask, base.deny)

    async def ask(tool_name: str, tool_input: Mapping[str, Any], decision: Decision) -> bool:
        if approved and check_permission(tool_name, tool_input, ctx, rules(), mode).behavior == "allow":
            return True
        always = suggest_rules(tool_name, tool_input, ctx, rules(), mode)
        echo("\n" + render_question(tool_name, tool_input, decision, workspace, always))
        answer = await aread("› ") if aread is not None else await asyncio.to_thread(read, "› ")
        choice = parse_choice(answer, always_offered=bool(always))
        if choice == "always":
            for rule in always:
                save_rule(workspace, rule)
                approved.append(Rule.parse(rule))
        return choice != "no"

    return ask
