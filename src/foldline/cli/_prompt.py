"""The approval prompt: what a tool call would do, shown so it cannot disguise itself (R9.2, §9.5).

A command or file content can carry terminal control sequences: a carriage return or an ANSI
"erase line" lets a command overwrite its own `Allow Bash ...` line, bidi overrides reorder what is
shown, zero-width characters and fillers (Hangul fillers, the blank Braille pattern) hide
differences. So every character that is not visible text is shown escaped (`\\x1b`, `\\r`,
`\\u202e`, `\\u3164`), the command is shown whole, one gutter-prefixed line per line (a line of it
can never pass for a line of the prompt), with long runs of spaces and of blank lines, which would
push its tail off the screen, collapsed to one marker each. Whatever was escaped or collapsed is
said in a `⚠` line under it. Write/Edit show a diff; a Write too large to diff shows the sizes and
the head and tail of its new content, and says how much of the middle is not shown.

The answers (`answer_options`): yes (once); for Write/Edit, yes and allow every edit inside the
workspace for the rest of the session (acceptEdits, not saved); yes always (saves the exact allow
rule to the local settings file); for Bash, yes always for commands with the same prefix
(`Bash(git status:*)`); no. The rule-saving answers are offered only where the rule would really
allow this call, and no broader than what was shown: never for a line that sets a variable, which a
rule could not pin. A typo or a bare Enter asks again, listing the valid answers: an approval is
never guessed. "no" refuses the call and, like Claude Code, stops the turn: the model gets the
refusal and waits for the person (`make_asker(on_refuse=...)`).
"""

from __future__ import annotations

import asyncio
import difflib
import re
import unicodedata
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import click

from foldline._json import dumps
from foldline.config import ApprovalConfig
from foldline.settings import Settings, save_rule
from foldline.tools import Decision, PermissionRules, ToolContext, check_permission
from foldline.tools.permissions import EDIT_TOOLS, PermissionMode, Rule, suggest_rules
from foldline.tools.transaction import HELD_CHANGES

__all__ = [
    "Choice",
    "Option",
    "answer_options",
    "collapse_blank",
    "escape_controls",
    "make_asker",
    "parse_choice",
    "render_question",
]

Choice = Literal["yes", "session", "always", "prefix", "no"]
_GUTTER = "  │ "
_LIMITS = ApprovalConfig()
_NAMED = {"\t": "\\t", "\r": "\\r", "\x1b": "\\x1b", "\x07": "\\a", "\x08": "\\b", "\x00": "\\0"}
_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x2800, 0x2800),
    (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)  # fmt: skip
"""Unicode's default-ignorable code points (nothing drawn, or a blank cell: Hangul fillers,
variation selectors, the combining grapheme joiner), plus the blank Braille pattern, which looks
like a space but is a letter to every shell."""


def _hidden(ch: str) -> bool:
    """Whether a terminal would act on `ch`, or draw nothing (or a blank) for it."""
    if ch in "\n ":
        return False
    code = ord(ch)
    return unicodedata.category(ch)[0] in "CZ" or any(lo <= code <= hi for lo, hi in _IGNORABLE)


def escape_controls(text: str) -> str:
    """`text` with every control, format, separator, filler and non-ASCII space character escaped
    as `\\xNN` / `\\uNNNN` (newlines kept), so the terminal shows it and never interprets it."""
    out = []
    for ch in text:
        if not _hidden(ch):
            out.append(ch)
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return "".join(out)


def collapse_blank(text: str, limits: ApprovalConfig = _LIMITS) -> tuple[str, int]:
    """`text` with each run of `space_run` or more spaces shown as `␣×N`, and each run of
    `blank_run` or more blank lines as one `⟨N blank lines⟩` line; and how many runs were collapsed.

    Whitespace is how a long command hides its tail: below the screen, or far to the right."""
    spaces = re.compile(f" {{{limits.space_run},}}")
    text, runs = spaces.subn(lambda m: f" ␣×{len(m.group())} ", text)
    lines, out, blank = text.split("\n"), [], 0
    for i, line in enumerate([*lines, None]):
        if line is not None and not line.strip() and 0 < i < len(lines) - 1:
            blank += 1
            continue
        if blank >= limits.blank_run:
            out.append(f"⟨{blank} blank lines⟩")
            runs += 1
        else:
            out += [""] * blank
        blank = 0
        if line is not None:
            out.append(line)
    return "\n".join(out), runs


def _shown(text: str) -> tuple[str, list[str]]:
    """The gutter-prefixed body for `text`, and the warnings about what it had to change."""
    escaped = escape_controls(text)
    body, runs = collapse_blank(escaped)
    warnings = []
    if (hidden := sum(1 for ch in text if _hidden(ch) and ch not in "\t")) > 0:
        warnings.append(f"{hidden} invisible or control character(s), shown escaped")
    if runs:
        warnings.append(f"{runs} run(s) of spaces or blank lines collapsed for display; it runs as written")
    return "\n".join(_GUTTER + line for line in body.split("\n")), warnings


def _current_text(path: Path, limits: ApprovalConfig) -> str | None:
    try:
        if path.stat().st_size > limits.diff_limit_bytes:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _diff(path: Path, before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), str(path), str(path)
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines).rstrip("\n")


def _head_tail(path: Path, content: str, limits: ApprovalConfig) -> tuple[str, list[str]]:
    """A Write too large to diff: the sizes, then the new content's first and last lines."""
    try:
        old = f"a {path.stat().st_size:,}-byte file"
    except OSError:
        old = "nothing (a new file)"
    lines = content.split("\n")
    keep = limits.head_tail_lines
    head = f"{path}: replaces {old} with {len(content.encode()):,} bytes, {len(lines):,} lines; new content:"
    if len(lines) <= 2 * keep:
        return "\n".join([head, *lines]), []
    middle = len(lines) - 2 * keep
    shown = [head, *lines[:keep], f"⟨… {middle:,} lines not shown …⟩", *lines[-keep:]]
    return "\n".join(shown), [
        f"too large to diff: {middle:,} lines in the middle of the new content are not shown"
    ]


def _file_change(
    tool_name: str, tool_input: Mapping[str, Any], workspace: Path, limits: ApprovalConfig = _LIMITS
) -> tuple[str, list[str]]:
    """What a Write or Edit would change, and the warnings about what is not shown."""
    path = workspace / str(tool_input.get("file_path", ""))
    before = _current_text(path, limits)
    if tool_name == "Write":
        after = str(tool_input.get("content", ""))
        if before is None or len(after.encode()) > limits.diff_limit_bytes:
            return _head_tail(path, after, limits)
        return _diff(path, before, after) or f"{path} (no change)", []
    old, new = str(tool_input.get("old_string", "")), str(tool_input.get("new_string", ""))
    if before is None:  # too large to read for context: the replacement itself
        return f"{path} (too large to show in context)\n{_diff(path, old, new)}", []
    if old and old in before:
        after = before.replace(old, new) if tool_input.get("replace_all") else before.replace(old, new, 1)
    else:  # the edit will fail or create the file: show what it asks for
        before, after = old, new
    return _diff(path, before, after) or f"{path} (no change)", []


def describe(tool_name: str, tool_input: Mapping[str, Any], workspace: Path) -> str:
    """The full body of the question: the command, the diff, or the input as JSON; escaped."""
    return _describe(tool_name, tool_input, workspace)[0]


def _describe(tool_name: str, tool_input: Mapping[str, Any], workspace: Path) -> tuple[str, list[str]]:
    """`describe`, with the warnings about what the body had to escape, collapse or leave out."""
    if tool_name == "Bash" and isinstance(tool_input.get("command"), str):
        return _shown(str(tool_input["command"]))
    if tool_name == HELD_CHANGES and isinstance(tool_input.get("changes"), str):
        return _shown(str(tool_input["changes"]))  # the policy's diff (its file text already escaped)
    if tool_name in ("Write", "Edit"):
        text, omitted = _file_change(tool_name, tool_input, workspace)
        body, warnings = _shown(text)
        return body, [*omitted, *warnings]
    return _shown(dumps(dict(tool_input), indent=True, default=str).decode())


def render_question(
    tool_name: str,
    tool_input: Mapping[str, Any],
    decision: Decision,
    workspace: Path,
    always: tuple[str, ...] = (),
    options: tuple[Option, ...] | None = None,
) -> str:
    """The whole prompt text, ready to print as plain text (no markup is interpreted).

    `options` defaults to yes, yes always (with `always`'s rules, when given) and no.
    """
    if options is None:
        options = answer_options(tool_name, always=always)
    body, warnings = _describe(tool_name, tool_input, workspace)
    lines = [
        f"{tool_name} wants to run:" if tool_name == "Bash" else f"{tool_name}:",
        body,
        *(f"⚠ {warning}" for warning in warnings),
        f"Why this asks: {escape_controls(decision.reason)}",
        *option_lines(options),
    ]
    return "\n".join(lines)


# --- the answers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One numbered answer of the approval prompt."""

    choice: Choice
    label: str
    rules: tuple[str, ...] = ()
    """The allow rules "always" and "prefix" save."""


_WORDS: Mapping[Choice, tuple[str, ...]] = {
    "yes": ("y", "yes"),
    "session": ("s", "session"),
    "always": ("a", "always"),
    "prefix": ("p", "prefix"),
    "no": ("n", "no"),
}
"""Letters and words accepted besides an option's number."""


def prefix_rules(tool_name: str, always: tuple[str, ...]) -> tuple[str, ...]:
    """`Bash(git status:*)` for each exact `Bash(git status --short)` rule: the command's first word,
    and its second when that is a subcommand (`git status`, `npm test`), not a flag or a path.

    () when the prefix is the whole command (the exact rule already says it) or for other tools.
    """
    if tool_name != "Bash" or not always:
        return ()
    prefixes = []
    for rule in always:
        words = rule.removeprefix("Bash(").removesuffix(")").split()
        second = words[1] if len(words) > 1 else "-"
        keep = 2 if not second.startswith("-") and second.replace("-", "").replace("_", "").isalnum() else 1
        if len(words) <= keep:
            return ()
        prefixes.append(f"Bash({' '.join(words[:keep])}:*)")
    return tuple(dict.fromkeys(prefixes))


def answer_options(
    tool_name: str,
    *,
    always: tuple[str, ...] = (),
    prefix: tuple[str, ...] = (),
    session_edits: bool = False,
) -> tuple[Option, ...]:
    """The answers this call gets, in the order they are numbered."""
    if tool_name == HELD_CHANGES:  # each held change is its own question: nothing to save a rule for
        return (
            Option("yes", "yes, apply them too"),
            Option("no", "no, leave them out (the rest is applied)"),
        )
    options = [Option("yes", "yes")]
    if session_edits:
        options.append(Option("session", "yes, and allow all edits in the workspace for this session"))
    if always:
        rules = ", ".join(escape_controls(r) for r in always)
        options.append(
            Option("always", f"yes, always (saves {rules} to .foldline/settings.local.json)", always)
        )
    if prefix:
        rules = ", ".join(escape_controls(r) for r in prefix)
        options.append(Option("prefix", f"yes, always for commands starting so (saves {rules})", prefix))
    options.append(Option("no", "no, and stop: tell the model what to do instead"))
    return tuple(options)


def option_lines(options: tuple[Option, ...]) -> list[str]:
    """The numbered answers, then how to answer (a bare Enter chooses nothing)."""
    lines = [f"  {n}. {option.label}" for n, option in enumerate(options, 1)]
    keys = "/".join(_WORDS[o.choice][0] for o in options)
    lines.append(f"  Type 1-{len(options)} (or {keys}) and Enter; there is no default.")
    return lines


def parse_choice(answer: str, options: tuple[Option, ...]) -> Option | None:
    """The option an answer names (its number, letter or word), None for anything else: asked again."""
    text = answer.strip().casefold()
    for number, option in enumerate(options, 1):
        if text == str(number) or text in _WORDS[option.choice]:
            return option
    return None


def make_asker(
    settings: Settings,
    workspace: Path,
    mode: PermissionMode,
    *,
    echo: Callable[[str], None] = click.echo,
    read: Callable[[str], str] = input,
    aread: Callable[[str], Awaitable[str]] | None = None,
    on_refuse: Callable[[], None] | None = None,
    cancelled: str | None = None,
) -> Callable[[str, Mapping[str, Any], Decision], Awaitable[bool]]:
    """The engine's `ask` callback for a terminal: prints `render_question`, reads the answer.

    Rules saved with "yes, always" also apply for the rest of the session: a later call that they
    (with the settings' rules) would allow is approved without asking again; so do edits after
    "allow all edits for this session". `aread`, when given, reads the answer instead of `read`
    (the chat's line editor, which must own the terminal); an answer equal to `cancelled` (Ctrl-C
    there, already cancelling the turn) is a plain no. A typed "no" calls `on_refuse`, which stops
    the turn once the refusal is recorded.
    """
    approved: list[Rule] = []
    edits_allowed = False
    ctx = ToolContext(workspace=workspace)

    def rules() -> PermissionRules:
        base = settings.rules
        return PermissionRules((*base.allow, *approved), base.ask, base.deny)

    def settled(tool_name: str, tool_input: Mapping[str, Any]) -> bool:
        """An earlier answer of this session already allows the call."""
        if approved and check_permission(tool_name, tool_input, ctx, rules(), mode).behavior == "allow":
            return True
        return edits_allowed and _edit_allowed(tool_name, tool_input, ctx, rules())

    async def answer() -> str:
        return await aread("› ") if aread is not None else await asyncio.to_thread(read, "› ")

    async def ask(tool_name: str, tool_input: Mapping[str, Any], decision: Decision) -> bool:
        nonlocal edits_allowed
        if tool_name != HELD_CHANGES and settled(tool_name, tool_input):
            return True
        always = suggest_rules(tool_name, tool_input, ctx, rules(), mode)
        options = answer_options(
            tool_name,
            always=always,
            prefix=_working_prefixes(tool_name, tool_input, ctx, rules(), mode, always),
            session_edits=mode != "acceptEdits" and _edit_allowed(tool_name, tool_input, ctx, rules()),
        )
        echo("\n" + render_question(tool_name, tool_input, decision, workspace, options=options))
        while (option := parse_choice(text := await answer(), options)) is None:
            if cancelled is not None and text == cancelled:
                return False
            echo(f"{escape_controls(text.strip())!r} is not an answer. " + option_lines(options)[-1].strip())
        if option.choice in ("always", "prefix"):
            for rule in option.rules:
                save_rule(workspace, rule)
                approved.append(Rule.parse(rule))
        elif option.choice == "session":
            edits_allowed = True
        elif option.choice == "no" and on_refuse is not None and tool_name != HELD_CHANGES:
            on_refuse()
        return option.choice != "no"

    return ask


def _edit_allowed(
    tool_name: str, tool_input: Mapping[str, Any], ctx: ToolContext, rules: PermissionRules
) -> bool:
    """Whether acceptEdits would allow this call: an edit inside the workspace, no rule against it."""
    if tool_name not in EDIT_TOOLS:
        return False
    return check_permission(tool_name, tool_input, ctx, rules, "acceptEdits").behavior == "allow"


def _working_prefixes(
    tool_name: str,
    tool_input: Mapping[str, Any],
    ctx: ToolContext,
    rules: PermissionRules,
    mode: PermissionMode,
    always: tuple[str, ...],
) -> tuple[str, ...]:
    """`prefix_rules`, offered only when they really allow this call (as "always" is checked)."""
    prefixes = prefix_rules(tool_name, always)
    if not prefixes:
        return ()
    extended = PermissionRules((*rules.allow, *(Rule.parse(r) for r in prefixes)), rules.ask, rules.deny)
    return (
        prefixes if check_permission(tool_name, tool_input, ctx, extended, mode).behavior == "allow" else ()
    )
