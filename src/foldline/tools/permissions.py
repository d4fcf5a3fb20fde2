"""Permission rules and modes: may this tool call run, must the user be asked, or is it refused (R9.2).

Rules are `Tool` or `Tool(specifier)` strings in three lists. Every call is reduced to *checks*:
each simple command of a Bash line (after `foldline.tools._shell` splits it and unwraps `sh -c`,
`$(…)`, `xargs`, `find -exec`, wrappers), each file a redirection or `tee`/`dd` writes or reads, or the
one path a file tool touches. Each check is decided on its own, in this order, first match wins:

1. a **deny** rule matches -> deny (deny always wins; no mode overrides it);
2. `plan` mode and the check writes or runs something -> deny;
3. an **ask** rule matches, or the check writes a protected path (`.git`, `.foldline`, `.claude`,
   `.ssh`, shell rc files), or the command cannot be verified -> ask;
4. an **allow** rule matches -> allow;
5. the mode decides: `bypassPermissions` allows; reads inside the workspace are allowed; in
   `acceptEdits` writes inside the workspace are allowed; everything else asks (fail closed).

The call's decision is the strictest of its checks (any deny -> deny, else any ask -> ask). A Bash
line with more than `MAX_SUBCOMMANDS` commands is denied outright, so a long chain can never slip
past deny evaluation (the Claude Code 50-subcommand bypass).

Invariants:
- Paths are compared after `os.path.realpath` (symlinks and `..` resolved) with
  `Path.is_relative_to`, never by string prefix, so `/home/me/app2` is not under `/home/me/app`.
  Deny and ask rules match the resolved path or the path as written; allow rules only the resolved
  path, so a symlink can neither dodge a deny nor borrow an allow.
- The workspace boundary is `ToolContext.workspace`, canonical and fixed at launch; a cwd the model
  moved (or passed in a tool input) only changes how relative paths resolve (CVE-2025-59532).
- Within a Bash line, `cd DIR` / `pushd DIR` move the directory later paths resolve against
  (CVE-2026-25722). After `cd "$X"`, `cd -` or `popd` it is known only at run time: relative paths
  then ask, and are still checked against the last known directory, so a deny rule keeps denying.
- Path specifiers are gitignore-ish: `//abs`, `~/home`, `/workspace-root`, `./workspace`, `a/b`
  (workspace-relative); a bare name such as `.env` matches at any depth (for allow rules only inside
  the workspace). A pattern that names a directory covers everything under it.
- Bash specifiers: `Bash(git log:*)` and `Bash(git log *)` match `git log` and `git log …` at a word
  boundary; `Bash(ls*)` is a plain prefix; any other `*` is a wildcard; otherwise the match is exact.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from foldline.errors import UserError
from foldline.tools._glob import glob_escape, glob_regex, literal_prefix
from foldline.tools._shell import ShellParseError, SimpleCommand, split_command
from foldline.tools.base import Tool, ToolContext

__all__ = [
    "MAX_SUBCOMMANDS",
    "AskCallback",
    "Behavior",
    "Decision",
    "PermissionMode",
    "PermissionRules",
    "Rule",
    "authorize",
    "check_permission",
    "is_protected_path",
    "permission_gate",
    "read_denied_filter",
]

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
Behavior = Literal["allow", "ask", "deny"]
MAX_SUBCOMMANDS = 50

READ_TOOLS = frozenset({"Read", "Grep", "Glob"})
EDIT_TOOLS = frozenset({"Write", "Edit"})
SESSION_TOOLS = frozenset({"Snip"})
"""Tools that act only on the conversation, never on files or processes."""
_BASH = frozenset({"Bash"})

_PROTECTED_DIRS = frozenset({".git", ".foldline", ".claude", ".ssh", ".gnupg"})
_SHELL_RC = frozenset(
    {".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
     ".zprofile", ".zlogin", ".zlogout", ".kshrc", ".cshrc", ".tcshrc", ".inputrc", "config.fish"}
)  # fmt: skip
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_RISKY_VARIABLES = frozenset(
    {"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "BASH_ENV", "ENV", "IFS",
     "PROMPT_COMMAND", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "PAGER", "EDITOR", "SHELLOPTS"}
)  # fmt: skip
_RULE_RE = re.compile(r"\s*([A-Za-z0-9_*-]+)\s*(?:\((.*)\))?\s*", re.DOTALL)


@dataclass(frozen=True)
class Rule:
    """One permission rule: a tool name (or `*`) and an optional specifier."""

    tool: str
    specifier: str | None = None

    @classmethod
    def parse(cls, text: str) -> Rule:
        """Parse `Tool` or `Tool(specifier)`.

        Raises:
            UserError: the text is not a rule.
        """
        match = _RULE_RE.fullmatch(text)
        if match is None or match.group(2) == "":
            raise UserError(f"not a permission rule: {text!r} (expected `Tool` or `Tool(specifier)`)")
        spec = match.group(2)
        return cls(match.group(1), None if spec is None or spec.strip() == "*" else spec.strip())

    def __str__(self) -> str:
        return self.tool if self.specifier is None else f"{self.tool}({self.specifier})"

    def names(self, tools: frozenset[str]) -> bool:
        """Whether the rule is about any of `tools`."""
        return self.tool == "*" or self.tool in tools


@dataclass(frozen=True)
class PermissionRules:
    """The allow, ask and deny lists (merged from every settings scope by the caller)."""

    allow: tuple[Rule, ...] = ()
    ask: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()

    @classmethod
    def from_lists(
        cls, *, allow: Iterable[str] = (), ask: Iterable[str] = (), deny: Iterable[str] = ()
    ) -> PermissionRules:
        """Rules from their text form: `from_lists(allow=["Bash(git log:*)"], deny=["Read(**/.env)"])`."""
        return cls(
            tuple(Rule.parse(r) for r in allow),
            tuple(Rule.parse(r) for r in ask),
            tuple(Rule.parse(r) for r in deny),
        )


@dataclass(frozen=True)
class Decision:
    """The verdict on one tool call, with the reason shown to the user (and, on deny, to the model)."""

    behavior: Behavior
    reason: str
    rule: str | None = None
    """The rule that decided, if one did."""


AskCallback = Callable[[str, Mapping[str, Any], Decision], Awaitable[bool]]
"""`await ask(tool_name, tool_input, decision)` -> True to allow this call once, False to refuse."""


# --- paths ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Access:
    write: bool
    path: Path
    """Resolved (`realpath`)."""
    literal: Path
    """As written, made absolute and normalised, symlinks not followed."""


def _access(raw: str, base: Path, *, write: bool) -> _Access:
    absolute = Path(os.path.normpath(base / os.path.expanduser(raw)))
    return _Access(write, Path(os.path.realpath(absolute)), absolute)


def is_protected_path(path: Path) -> bool:
    """Whether writing `path` always needs the user's say-so: VCS, agent config, keys, shell startup."""
    return bool(_PROTECTED_DIRS.intersection(path.parts)) or path.name in _SHELL_RC


def _anchor(spec: str, ctx: ToolContext, *, for_allow: bool) -> str:
    """The absolute glob pattern a path specifier stands for."""
    spec = spec.rstrip("/") or "/"
    workspace = glob_escape(str(ctx.workspace))
    if spec.startswith("//"):
        pattern = spec[1:]
    elif spec.startswith("~/") or spec == "~":
        pattern = glob_escape(os.path.realpath(Path.home())) + spec[1:]
    elif spec.startswith("./"):
        pattern = f"{workspace}/{spec[2:]}"
    elif spec.startswith("/"):
        pattern = f"{workspace}{spec}"
    elif "/" in spec:
        pattern = f"{workspace}/{spec}"
    else:
        return f"{workspace}/**/{spec}" if for_allow else f"/**/{spec}"
    prefix, rest = literal_prefix(pattern)
    if not prefix.startswith("/") or "\\" in prefix:
        return pattern
    # the fixed part may itself run through a symlink (e.g. /tmp -> /private/tmp)
    return f"{glob_escape(os.path.realpath(prefix or '/')).rstrip('/')}/{rest}"


def _path_matches(rule: Rule, access: _Access, ctx: ToolContext, *, for_allow: bool) -> bool:
    if rule.specifier is None:
        return True
    regex = glob_regex(_anchor(rule.specifier, ctx, for_allow=for_allow))
    candidates = (access.path,) if for_allow else (access.path, access.literal)
    return any(regex.fullmatch(str(p)) for c in candidates for p in (c, *c.parents))


def _check_access(
    access: _Access, tool: str, ctx: ToolContext, rules: PermissionRules, mode: PermissionMode
) -> Decision:
    # A Bash redirection or a Grep is still a file access: Edit/Write rules govern every write and
    # Read rules every read, whichever tool makes it.
    names = frozenset({tool, *(EDIT_TOOLS if access.write else {"Read"})})
    for rule in rules.deny:
        if rule.names(names) and _path_matches(rule, access, ctx, for_allow=False):
            return Decision("deny", f"{access.path} is denied by a permission rule", str(rule))
    if access.write and mode == "plan":
        return Decision("deny", f"plan mode is read-only; {tool} would write {access.path}")
    for rule in rules.ask:
        if rule.names(names) and _path_matches(rule, access, ctx, for_allow=False):
            return Decision("ask", f"a rule asks before touching {access.path}", str(rule))
    if access.write and (is_protected_path(access.path) or is_protected_path(access.literal)):
        return Decision("ask", f"{access.path} is a protected path; writing it needs approval")
    for rule in rules.allow:
        if rule.names(names) and _path_matches(rule, access, ctx, for_allow=True):
            return Decision("allow", f"allowed by {rule}", str(rule))
    return _mode_default(access, ctx, mode)


def _mode_default(access: _Access, ctx: ToolContext, mode: PermissionMode) -> Decision:
    inside = access.path.is_relative_to(ctx.workspace)
    if mode == "bypassPermissions":
        return Decision("allow", "bypassPermissions mode")
    if not access.write:
        if inside:
            return Decision("allow", "reading inside the workspace")
        return Decision("ask", f"{access.path} is outside the workspace {ctx.workspace}")
    if not inside:
        return Decision("ask", f"writing {access.path}, outside the workspace {ctx.workspace}")
    if mode == "acceptEdits":
        return Decision("allow", "acceptEdits mode allows edits inside the workspace")
    return Decision("ask", f"editing {access.path} needs approval in {mode} mode")


def _strictest(decisions: Iterable[Decision]) -> Decision:
    ranked = {"deny": 0, "ask": 1, "allow": 2}
    return min(decisions, key=lambda d: ranked[d.behavior], default=Decision("allow", "nothing to check"))


# --- Bash -------------------------------------------------------------------------------------


def _canonical(spec: str) -> str:
    try:
        return SimpleCommand(tuple(shlex.split(spec))).text
    except ValueError:
        return spec.strip()


def bash_rule_matches(specifier: str | None, command_text: str) -> bool:
    """Whether a `Bash(specifier)` rule covers one simple command (see the module docstring)."""
    if specifier is None:
        return True
    spec = specifier.strip()
    if spec.endswith(":*") or spec.endswith(" *"):
        prefix = _canonical(spec[:-2])
        if "*" not in prefix:
            return command_text == prefix or command_text.startswith(prefix + " ")
        spec = prefix + " *"
    if "*" not in spec:
        return command_text == _canonical(spec)
    pieces = [re.escape(p) for p in spec.split("*")]
    regex = ".*".join(pieces)
    if regex.endswith(r"\ .*"):
        regex = regex[: -len(r"\ .*")] + r"(?: .*)?"
    return re.fullmatch(regex, command_text, re.DOTALL) is not None


def _first_bash_rule(rules: tuple[Rule, ...], cmd: SimpleCommand) -> Rule | None:
    texts = {cmd.text}
    if cmd.words and "/" in cmd.words[0]:
        # deny/ask `rm` must also catch `/bin/rm`
        texts.add(SimpleCommand((os.path.basename(cmd.words[0]), *cmd.words[1:])).text)
    return next(
        (r for r in rules if r.names(_BASH) and any(bash_rule_matches(r.specifier, t) for t in texts)),
        None,
    )


def _check_simple(cmd: SimpleCommand, rules: PermissionRules, mode: PermissionMode) -> Decision:
    label = cmd.text or "(assignment)"
    if (rule := _first_bash_rule(rules.deny, cmd)) is not None:
        return Decision("deny", f"`{label}` is denied by a permission rule", str(rule))
    if (rule := _first_bash_rule(rules.ask, cmd)) is not None:
        return Decision("ask", f"a rule asks before running `{label}`", str(rule))
    risky = _RISKY_VARIABLES.intersection(cmd.assignments)
    if risky:
        return Decision("ask", f"`{label}` sets {', '.join(sorted(risky))}, which changes what runs")
    if not cmd.words:
        return Decision("allow", "variable assignment")
    if cmd.dynamic[0]:
        return Decision("ask", f"the command name in `{label}` is only known at run time")
    # allow rules see the command exactly as written: `/tmp/x/git` is not `git`
    bash_allows = (r for r in rules.allow if r.names(_BASH))
    if (rule := next((r for r in bash_allows if bash_rule_matches(r.specifier, cmd.text)), None)) is not None:
        return Decision("allow", f"allowed by {rule}", str(rule))
    if mode == "bypassPermissions":
        return Decision("allow", "bypassPermissions mode")
    return Decision("ask", f"no rule allows `{label}`")


def _file_arguments(cmd: SimpleCommand) -> Iterable[tuple[str, bool]]:
    """(path, writes) for each file the command itself names as an output (`tee`, `dd of=`)."""
    name = os.path.basename(cmd.words[0]) if cmd.words else ""
    if name == "tee":
        yield from ((w, True) for w in cmd.words[1:] if not w.startswith("-"))
    elif name == "dd":
        yield from ((w[3:], True) for w in cmd.words[1:] if w.startswith("of="))


def _changes_dir(cmd: SimpleCommand) -> bool:
    return bool(cmd.words) and cmd.words[0] in ("cd", "pushd", "popd")


def _cd_target(cmd: SimpleCommand, cwd: Path, known: bool) -> tuple[Path, bool]:
    """Where `cd DIR` / `pushd DIR` (no expansions) leaves the shell, and whether that is certain:
    not after `cd -` ($OLDPWD), `pushd` alone (a stack swap), or a relative DIR from an uncertain cwd."""
    args = [w for w in cmd.words[1:] if w == "-" or not w.startswith("-")]
    if not args:
        return (Path.home(), True) if cmd.words[0] == "cd" else (cwd, False)
    if args[0] == "-":
        return cwd, False
    target = os.path.expanduser(args[0])
    return Path(os.path.realpath(cwd / target)), known or os.path.isabs(target)


def _uncertain(raw: str, known: bool) -> bool:
    """Whether `raw` is a relative path while the shell's directory is only known at run time."""
    return not known and not os.path.isabs(os.path.expanduser(raw))


def _check_bash(command: str, ctx: ToolContext, rules: PermissionRules, mode: PermissionMode) -> Decision:
    if mode == "plan":
        return Decision("deny", "plan mode is read-only; Bash is not available")
    try:
        commands = split_command(command)
    except ShellParseError as exc:
        bare = next((r for r in rules.deny if r.names(_BASH) and r.specifier is None), None)
        if bare is not None:
            return Decision("deny", "Bash is denied by a permission rule", str(bare))
        return Decision("ask", f"cannot verify this command ({exc}); it needs approval")
    if len(commands) > MAX_SUBCOMMANDS:
        return Decision(
            "deny",
            f"the command has {len(commands)} subcommands, over the limit of {MAX_SUBCOMMANDS}; split it up",
        )
    return _strictest(_bash_checks(commands, ctx, rules, mode))


def _bash_checks(
    commands: list[SimpleCommand], ctx: ToolContext, rules: PermissionRules, mode: PermissionMode
) -> Iterable[Decision]:
    # `known` turns False once a `cd "$X"`, `cd -` or `popd` moves the shell somewhere only the run
    # time knows; relative paths then ask, and are still checked against the last known cwd
    cwd, known = ctx.current_dir, True
    for cmd in commands:
        if _changes_dir(cmd) and cmd.words[0] != "popd" and not any(cmd.dynamic):
            # later paths resolve there, as the shell would (CVE-2026-25722)
            cwd, known = _cd_target(cmd, cwd, known)
            continue
        yield _check_simple(cmd, rules, mode)
        yield from _file_checks(cmd, cwd, ctx, rules, mode, known=known)
        yield from _read_denials(cmd, cwd, ctx, rules, known=known)
        if _changes_dir(cmd):
            known = False


def _file_checks(
    cmd: SimpleCommand,
    cwd: Path,
    ctx: ToolContext,
    rules: PermissionRules,
    mode: PermissionMode,
    *,
    known: bool,
) -> Iterable[Decision]:
    """The files `cmd` opens through redirections and `tee`/`dd` arguments."""
    # heredoc and herestring targets are data, and `2>&1`-style duplications name descriptors;
    # only `>&file` (which `writes`) among them touches a file
    files = [
        (r.target, r.writes, r.dynamic)
        for r in cmd.redirects
        if r.op not in ("<<", "<<<", ">&", "<&") or r.writes
    ]
    files += [(path, writes, False) for path, writes in _file_arguments(cmd)]
    for raw, writes, dynamic in files:
        if dynamic:
            yield Decision("ask", f"redirection target `{raw}` is only known at run time")
        elif raw not in _HARMLESS_TARGETS:
            if _uncertain(raw, known):
                yield Decision("ask", f"`{raw}` is relative to a directory only known at run time")
            yield _check_access(_access(raw, cwd, write=writes), "Bash", ctx, rules, mode)


def _read_denials(
    cmd: SimpleCommand, cwd: Path, ctx: ToolContext, rules: PermissionRules, *, known: bool
) -> Iterable[Decision]:
    """Read deny rules also cover files a command names (`cat .env` under `Read(**/.env)`)."""
    read_denies = [r for r in rules.deny if r.tool == "Read" and r.specifier is not None]
    if not read_denies:
        return
    for word, dynamic in zip(cmd.words[1:], cmd.dynamic[1:], strict=True):
        if dynamic or word.startswith("-") or not word:
            continue
        raw = word.split("=", 1)[-1]
        if _uncertain(raw, known):
            yield Decision("ask", f"`{cmd.text}` names {raw} in a directory only known at run time")
        access = _access(raw, cwd, write=False)
        for rule in read_denies:
            if _path_matches(rule, access, ctx, for_allow=False):
                yield Decision("deny", f"`{cmd.text}` reads {access.path}, denied by a rule", str(rule))


# --- entry points -----------------------------------------------------------------------------


def read_denied_filter(rules: PermissionRules, workspace: Path) -> Callable[[Path], bool]:
    """The predicate for `ToolContext.read_denied`: is `path` covered by a deny rule about reading?

    Grep and Glob use it to skip such files, so a `Read(**/.env)` deny cannot be sidestepped by
    searching the directory that holds `.env`.
    """
    denies = [r for r in rules.deny if r.names(READ_TOOLS) and r.specifier is not None]
    anchor_ctx = ToolContext(workspace=workspace)

    def denied(path: Path) -> bool:
        access = _access(str(path), anchor_ctx.workspace, write=False)
        return any(_path_matches(rule, access, anchor_ctx, for_allow=False) for rule in denies)

    return denied


def _file_access(tool_name: str, tool_input: Mapping[str, Any], ctx: ToolContext) -> _Access:
    if tool_name in ("Read", "Write", "Edit"):
        raw = tool_input.get("file_path")
        if not isinstance(raw, str) or not raw:
            raise UserError(f"{tool_name} needs a `file_path` string")
        return _access(raw, ctx.current_dir, write=tool_name != "Read")
    base = str(tool_input.get("path") or ".")
    if tool_name == "Glob":
        prefix, _ = literal_prefix(str(tool_input.get("pattern", "")))
        base = os.path.join(base, prefix or ".")
    return _access(base, ctx.current_dir, write=False)


def _check_other(tool_name: str, rules: PermissionRules, mode: PermissionMode) -> Decision:
    names = frozenset({tool_name})
    if (rule := next((r for r in rules.deny if r.names(names)), None)) is not None:
        return Decision("deny", f"{tool_name} is denied by a permission rule", str(rule))
    if tool_name in SESSION_TOOLS:
        return Decision("allow", f"{tool_name} only changes the conversation context")
    if mode == "plan":
        return Decision("deny", f"plan mode is read-only; {tool_name} is not available")
    if (rule := next((r for r in rules.ask if r.names(names)), None)) is not None:
        return Decision("ask", f"a rule asks before {tool_name}", str(rule))
    if (rule := next((r for r in rules.allow if r.names(names) and r.specifier is None), None)) is not None:
        return Decision("allow", f"allowed by {rule}", str(rule))
    if mode == "bypassPermissions":
        return Decision("allow", "bypassPermissions mode")
    return Decision("ask", f"no rule allows {tool_name}")


def check_permission(
    tool_name: str,
    tool_input: Mapping[str, Any],
    ctx: ToolContext,
    rules: PermissionRules | None = None,
    mode: PermissionMode = "default",
) -> Decision:
    """Decide whether a tool call may run: `allow`, `ask` the user, or `deny` (see the module docstring).

    Args:
        tool_name: The tool the model called.
        tool_input: Its input as the model sent it (any `cwd` key in it is ignored).
        ctx: The call's context; `ctx.workspace` is the boundary, `ctx.cwd` resolves relative paths.
        rules: Merged allow / ask / deny rules; none means only the mode decides.
        mode: The session's permission mode.
    """
    rules = rules or PermissionRules()
    if tool_name == "Bash":
        command = tool_input.get("command")
        if not isinstance(command, str):
            return Decision("deny", "Bash needs a `command` string")
        return _check_bash(command, ctx, rules, mode)
    if tool_name in READ_TOOLS or tool_name in EDIT_TOOLS:
        try:
            access = _file_access(tool_name, tool_input, ctx)
        except UserError as exc:
            return Decision("deny", str(exc))
        return _check_access(access, tool_name, ctx, rules, mode)
    return _check_other(tool_name, rules, mode)


async def authorize(
    tool_name: str,
    tool_input: Mapping[str, Any],
    ctx: ToolContext,
    rules: PermissionRules | None,
    mode: PermissionMode,
    ask: AskCallback | None,
) -> Decision:
    """`check_permission`, then settle an `ask` through the `ask` callback.

    With no callback (non-interactive runs) an `ask` becomes a deny: nobody can approve, and
    approving silently would turn every prompt into an allow.
    """
    decision = check_permission(tool_name, tool_input, ctx, rules, mode)
    if decision.behavior != "ask":
        return decision
    if ask is None:
        return Decision("deny", f"{decision.reason} (no one to approve it in this session)", decision.rule)
    if await ask(tool_name, tool_input, decision):
        return Decision("allow", "approved by the user", decision.rule)
    return Decision("deny", "the user declined this tool call", decision.rule)


def permission_gate(
    rules: PermissionRules | None, mode: PermissionMode, ask: AskCallback | None
) -> Callable[[Tool, Mapping[str, Any], ToolContext], Awaitable[str | None]]:
    """`authorize` shaped as the engine's gate: `await gate(tool, input, ctx)` is `None` to run the
    call, or the reason it may not (sent back to the model as an `is_error` result)."""

    async def gate(tool: Tool, tool_input: Mapping[str, Any], ctx: ToolContext) -> str | None:
        decision = await authorize(tool.name, tool_input, ctx, rules, mode, ask)
        # the executor adds the "Permission denied: " prefix, once, for every gate
        return None if decision.behavior == "allow" else decision.reason

    return gate
