"""Permission rules and modes: may this tool call run, must the user be asked, or is it refused (R9.2).

Rules are `Tool` or `Tool(specifier)` strings in three lists. Every call is reduced to *checks*:
each simple command of a Bash line (after `foldline.tools._shell` splits it and unwraps `sh -c`,
`$(…)`, `xargs`, `find -exec`, wrappers), each file a redirection or `tee`/`dd` writes or reads, or the
one path a file tool touches. Each check is decided on its own, in this order, first match wins:

1. a **deny** rule matches -> deny (deny always wins; no mode overrides it);
2. `plan` mode and the check writes or runs something -> deny;
3. an **ask** rule matches, or the check writes a protected path (`.git`, `.foldline`, `.claude`,
   `.ssh`, shell rc files) or foldline's own package or interpreter inside the workspace, or the
   command cannot be verified, or it sets a variable outside a short allowlist (`LANG`, `LC_*`,
   `TZ`, `NO_COLOR`, ...), or git would use a repository other than the workspace's own, or a
   path goes through `/proc/self`, or it reads the home's keys and tokens (`HOME_SECRETS`) in a
   workspace that is the home or holds it -> ask;
4. an **allow** rule matches -> allow;
5. the mode decides: `bypassPermissions` allows; reads inside the workspace, and of output foldline
   saved for the model to read back (`ToolContext.own_output_dirs`), are allowed; in
   `acceptEdits` writes inside the workspace are allowed; everything else asks (fail closed).

A Bash call run in the OS sandbox (`ctx.sandbox`, `foldline.containment.sandbox`) whose every ask is one
the sandbox contains (`Decision.contained`: no rule asked, nothing outside the workspace or
protected is named) is allowed without asking; deny rules, ask rules, protected paths and paths
outside the workspace are decided as without it.

The call's decision is the strictest of its checks (any deny -> deny, else any ask -> ask). A Bash
line with more than `MAX_SUBCOMMANDS` commands is denied outright, so a long chain can never slip
past deny evaluation (the Claude Code 50-subcommand bypass); so is a line nested too deeply to
walk. A path the checker cannot inspect (`/proc/1/root`, a NUL byte) asks, never raises.

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
- Read-deny rules also cover what git prints from its object store: `REV:path` words are
  checked as the path they name, and a command that prints file contents from history
  (`show`, `log -p`, `grep`, `diff`, `stash show`, `format-patch`, ...) is checked against
  every path the repository tracks or ever tracked (listed with git itself, in the workspace's
  own repository only; if git cannot list them, it asks).
- Path specifiers are gitignore-ish: `//abs`, `~/home`, `/workspace-root`, `./workspace`, `a/b`
  (workspace-relative); a bare name such as `.env` matches at any depth (for allow rules only inside
  the workspace). A pattern that names a directory covers everything under it.
- Bash specifiers: `Bash(git log:*)` and `Bash(git log *)` match `git log` and `git log …` at a word
  boundary; `Bash(ls*)` is a plain prefix; any other `*` is a wildcard; otherwise the match is exact.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from foldline._glob import glob_escape, glob_regex, literal_prefix
from foldline.containment.checkpoints import store_root
from foldline.containment.paths import is_home_secret, is_protected_path, own_install
from foldline.containment.programs import find_program, git_environment, host_git
from foldline.errors import UserError
from foldline.tools._semantics import NO_FILE_OPERANDS, Effects, modeled
from foldline.tools._semantics import effects as command_effects
from foldline.tools._shell import SimpleCommand, parse_command
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
    "checker_reads",
    "is_protected_path",
    "permission_gate",
    "read_denied_filter",
    "rule_patterns",
    "suggest_rules",
]

PermissionMode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
Behavior = Literal["allow", "ask", "deny"]
MAX_SUBCOMMANDS = 50

READ_TOOLS = frozenset({"Read", "Grep", "Glob"})
EDIT_TOOLS = frozenset({"Write", "Edit"})
SESSION_TOOLS = frozenset({"Snip"})
"""Tools that act only on the conversation, never on files or processes."""
_BASH = frozenset({"Bash"})

_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_SAFE_VARIABLES = frozenset(
    {"LANG", "LANGUAGE", "TZ", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TERM", "COLUMNS",
     "LINES", "CI"}
)  # fmt: skip
"""Variables a command may be given without asking (and `LC_*`): they change formatting only.
Every other name may point a program at other config, code or directories (`GIT_*`, `HOME`,
`XDG_*`, `LD_*`, `PS4`, `BASH_FUNC_*`, `RIPGREP_CONFIG_PATH`, `TAR_OPTIONS`, `PYTHON*`,
`NODE_OPTIONS`, ...), so it asks: an allowlist, because no denylist of them is ever complete."""
_BYPASS_RISKY_VARIABLES = frozenset(
    {"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "BASH_ENV", "ENV", "IFS",
     "PROMPT_COMMAND", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF", "GIT_PAGER", "PAGER", "EDITOR", "SHELLOPTS"}
)  # fmt: skip
"""What still asks in `bypassPermissions`, where every other variable is allowed."""
_PROC_RE = re.compile(r"/proc/(self|thread-self|\d+)(/|$)")
"""`/proc/self/cwd`, `/proc/<pid>/root`, ...: their meaning depends on the process that opens
them, so resolving them in the checker's own process says nothing about the shell's."""
_GIT_SCAN_TIMEOUT_S = 5.0
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
    contained: bool = False
    """An ask the OS sandbox makes moot: not from a rule, about nothing outside the workspace's
    writable part (see `_contained`)."""


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
    joined = base / os.path.expanduser(raw)
    absolute = Path(os.path.normpath(joined))
    try:
        # `..` after a symlinked directory climbs from the link's target, not from where the link
        # sits: realpath of the path as written, never of its lexically normalised form
        resolved = os.path.realpath(joined)
    except (OSError, ValueError):
        # a link the checker may not follow (`/proc/1/root`): judged as written, and any rule
        # that needs the resolved path falls back to asking (`_via_proc`, outside the workspace)
        resolved = str(absolute)
    return _Access(write, Path(resolved), absolute)


def _safe_variable(name: str) -> bool:
    return name in _SAFE_VARIABLES or (name.startswith("LC_") and name[3:].isupper())


def _via_proc(access: _Access) -> bool:
    return any(_PROC_RE.match(str(p)) for p in (access.literal, access.path))


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
    return _pattern_matches(_rule_pattern(rule, ctx, for_allow=for_allow), access, for_allow=for_allow)


def _rule_pattern(rule: Rule, ctx: ToolContext, *, for_allow: bool) -> re.Pattern[str] | None:
    """The anchored path pattern of a rule's specifier; None (every path) when it has none."""
    if rule.specifier is None:
        return None
    return glob_regex(_anchor(rule.specifier, ctx, for_allow=for_allow))


def _pattern_matches(pattern: re.Pattern[str] | None, access: _Access, *, for_allow: bool) -> bool:
    if pattern is None:
        return True
    candidates = (access.path,) if for_allow else (access.path, access.literal)
    return any(pattern.fullmatch(str(p)) for c in candidates for p in (c, *c.parents))


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
    if _in_undo_store(access.path, ctx.workspace):
        return Decision(
            "deny",
            f"{access.path} is in foldline's undo store: what tool calls replaced or deleted, kept "
            "for /undo (a file a deny rule covered at its old place is there too); `foldline undo` "
            "puts it back",
        )
    if _via_proc(access):
        return Decision(
            "ask", f"{access.literal} goes through /proc, which the checker cannot resolve for the shell"
        )
    for rule in rules.ask:
        if rule.names(names) and _path_matches(rule, access, ctx, for_allow=False):
            return Decision("ask", f"a rule asks before touching {access.path}", str(rule))
    if access.write and (is_protected_path(access.path) or is_protected_path(access.literal)):
        return Decision("ask", f"{access.path} is a protected path; writing it needs approval")
    if (
        not access.write
        and access.path.is_relative_to(ctx.workspace)
        and is_home_secret(access.path, Path.home())
    ):
        # the workspace is the home, or holds it: "reading inside the workspace" must not cover its keys
        return Decision("ask", f"{access.path} holds keys or tokens of your home folder")
    if access.write and any(access.path.is_relative_to(p) for p in own_install(ctx.workspace)):
        return Decision(
            "ask", f"{access.path} is foldline's own code or interpreter, which runs outside the sandbox"
        )
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
        if any(access.path.is_relative_to(d) for d in ctx.own_output_dirs):
            return Decision("allow", "reading output foldline saved for this session")
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


_GIT_GLOBAL_VALUED = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix", "--exec-path"}
)
"""git's global options that take a value, which may be the next word (`-C DIR`)."""


def _without_git_globals(words: tuple[str, ...]) -> tuple[str, ...]:
    """`git -C . --no-pager push x` -> `git push x`: git's own options before the subcommand do
    not change which subcommand runs, so a rule about `git push` must see through them."""
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] != "--":
        i += 2 if words[i] in _GIT_GLOBAL_VALUED and words[i] not in ("--exec-path",) else 1
    return (words[0], *words[i:])


def _first_bash_rule(rules: tuple[Rule, ...], cmd: SimpleCommand) -> Rule | None:
    texts = {cmd.text}
    if cmd.words and "/" in cmd.words[0]:
        # deny/ask `rm` must also catch `/bin/rm`
        texts.add(SimpleCommand((os.path.basename(cmd.words[0]), *cmd.words[1:])).text)
    if cmd.name == "git":
        texts.add(SimpleCommand(_without_git_globals((cmd.name, *cmd.words[1:]))).text)
    return next(
        (r for r in rules if r.names(_BASH) and any(bash_rule_matches(r.specifier, t) for t in texts)),
        None,
    )


def _harmless_dynamic(cmd: SimpleCommand, index: int, effects: Effects) -> bool:
    """A word only known at run time that still cannot change what runs or what is written: any
    argument of `echo`/`printf` (not `printf -v`), a `git commit -m` message, the `{}` of a
    read-only command `find -exec` runs (a file under find's START paths: the recursive reads
    `effects` carries for it are checked like `grep -r`'s, and links out of them below)."""
    if cmd.each_found and cmd.words[index] == "{}":
        return effects.read_only
    if cmd.name in ("echo", "printf") and "/" not in cmd.words[0]:
        return cmd.words[1:2] != ("-v",)
    return cmd.name == "git" and cmd.words[index - 1] in ("-m", "--message")


def _check_simple(
    cmd: SimpleCommand, effects: Effects, rules: PermissionRules, mode: PermissionMode
) -> Decision:
    """The verdict on the command itself (its files are checked separately), deny > ask > allow."""
    label = cmd.text or "(assignment)"
    if (rule := _first_bash_rule(rules.deny, cmd)) is not None:
        return Decision("deny", f"`{label}` is denied by a permission rule", str(rule))
    if (rule := _first_bash_rule(rules.ask, cmd)) is not None:
        return Decision("ask", f"a rule asks before running `{label}`", str(rule))
    if cmd.problems:
        return Decision("ask", f"cannot verify `{label}`: {cmd.problems[0]}; it needs approval")
    risky = sorted(_BYPASS_RISKY_VARIABLES.intersection(cmd.assignments))
    if mode != "bypassPermissions":
        risky = sorted({a for a in cmd.assignments if not _safe_variable(a)})
    if risky:
        return Decision(
            "ask", f"`{label}` sets {', '.join(risky)}, which may change what runs or where it reads config"
        )
    if not cmd.words:
        return Decision("allow", "variable assignment or redirection only")
    if cmd.dynamic[0]:
        return Decision("ask", f"the command name in `{label}` is only known at run time")
    if mode == "bypassPermissions":
        return Decision("allow", "bypassPermissions mode")
    if effects.runs:
        # an allow rule for `sed` or `git` is not an allow for the program they would start
        return Decision("ask", f"`{label}`: {effects.runs[0]}; it needs approval")
    dynamic = [
        w for i, w in enumerate(cmd.words) if cmd.dynamic[i] and not _harmless_dynamic(cmd, i, effects)
    ]
    if dynamic:
        return Decision("ask", f"`{dynamic[0]}` in `{label}` is only known at run time")
    if cmd.wrapper:
        return Decision("allow", f"`{cmd.name}` only runs the command it wraps, checked on its own")
    # allow rules see the command exactly as written: `/tmp/x/git` is not `git`
    bash_allows = (r for r in rules.allow if r.names(_BASH))
    if (rule := next((r for r in bash_allows if bash_rule_matches(r.specifier, cmd.text)), None)) is not None:
        return Decision("allow", f"allowed by {rule}", str(rule))
    if effects.read_only:
        return Decision("allow", f"`{cmd.name}` only reads")
    return Decision("ask", f"no rule allows `{label}`")


@dataclass
class _Dirs:
    """Where each shell process of a line stands, as far as the checker can tell.

    A process starts where its parent stood when it was started; a `cd` moves only its own
    process. `candidates` holds every directory it may be in (a `cd` that may fail keeps the old
    one too); `known` turns False after `cd -`, `cd "$X"` or `popd`, where even that is lost.
    """

    start: Path
    state: dict[tuple[int, ...], tuple[tuple[Path, ...], bool]] = field(default_factory=dict)

    def get(self, env: tuple[int, ...]) -> tuple[tuple[Path, ...], bool]:
        if env not in self.state:
            parent = next((env[:k] for k in range(len(env) - 1, -1, -1) if env[:k] in self.state), None)
            self.state[env] = self.state[parent] if parent is not None else ((self.start,), True)
        return self.state[env]

    def change(self, cmd: SimpleCommand) -> None:
        cwds, known = self.get(cmd.env)
        args = [w for w in cmd.words[1:] if w == "-" or not w.startswith("-")]
        options = [w for w in cmd.words[1:] if w.startswith("-") and w != "-"]
        if (
            cmd.words[0] == "popd"
            or any(cmd.dynamic)
            or args[:1] == ["-"]
            or (cmd.words[0] == "pushd" and not args)
            # `pushd +N` / `-N` rotate the stack; `pushd -n` does not move; other options unknown
            or any(re.fullmatch(r"[+-]\d+", w) for w in cmd.words[1:])
            or any(o not in ("-L", "-P", "-e", "--") for o in options)
            # with CDPATH set, `cd name` may go to any directory on it
            or (os.environ.get("CDPATH") and args and not args[0].startswith(("/", "./", "../")))
        ):
            self.state[cmd.env] = (cwds, False)
            return
        if not args:
            targets: tuple[Path, ...] = (Path(os.path.realpath(Path.home())),)
        else:
            raw = os.path.expanduser(args[0])
            targets = tuple(Path(os.path.realpath(c / raw)) for c in cwds)
        # a cd that may not run, or may fail, leaves the shell where it was too
        uncertain = cmd.conditional or not all(t.is_dir() for t in targets)
        self.state[cmd.env] = (tuple(dict.fromkeys((*targets, *(cwds if uncertain else ())))), known)


def _uncertain(raw: str, known: bool) -> bool:
    """Whether `raw` is a relative path while the shell's directory is only known at run time."""
    return not known and not os.path.isabs(os.path.expanduser(raw))


def _changes_dir(cmd: SimpleCommand) -> bool:
    return bool(cmd.words) and cmd.words[0] in ("cd", "pushd", "popd") and not cmd.problems


def _check_bash(command: str, ctx: ToolContext, rules: PermissionRules, mode: PermissionMode) -> Decision:
    if mode == "plan":
        return Decision("deny", "plan mode is read-only; Bash is not available")
    if ctx.sandbox is not None and ctx.sandbox.refuses:  # refused before anyone is asked
        return Decision("deny", f"Bash is refused: {ctx.sandbox.notice()}")
    parsed = parse_command(command)
    if parsed.refusal is not None:
        return Decision("deny", f"{parsed.refusal}; split it into simpler commands")
    count = sum(1 for c in parsed.commands if c.words)
    if count > MAX_SUBCOMMANDS:
        return Decision(
            "deny",
            f"the command has {count} subcommands, over the limit of {MAX_SUBCOMMANDS}; split it up",
        )
    try:
        decisions = list(_bash_checks(parsed.commands, ctx, rules, mode))
    except (OSError, ValueError) as exc:
        # a path the checker may not inspect (`cd /proc/1/root`, a NUL byte): never allowed
        return Decision("ask", f"could not inspect a path the command uses ({exc})")
    verdict = _strictest(decisions)
    sandbox = ctx.sandbox
    if verdict.behavior == "ask" and sandbox is not None and sandbox.auto_allows:
        undoable = sandbox.layered and ctx.checkpoints is not None
        if not undoable and any(_deletes_or_overwrites(c, ctx) for c in parsed.commands):
            # the sandbox contains the command but cannot take its deletions back
            return Decision(
                "ask", f"{verdict.reason}; it deletes or overwrites files, and nothing can undo that here"
            )
        if all(d.contained for d in decisions if d.behavior == "ask"):
            return Decision("allow", f"runs in the OS sandbox, which contains it ({verdict.reason})")
    return verdict


def _deletes_or_overwrites(cmd: SimpleCommand, ctx: ToolContext) -> bool:
    """What the checker can tell of a command: it writes or removes a path that exists now (or
    one it cannot resolve), or it extracts a tree over existing files."""
    found = command_effects(cmd)
    targets = [*found.writes, *(r.target for r in cmd.redirects if r.writes and not r.dynamic)]
    if found.tree_writes or any(r.writes and r.dynamic for r in cmd.redirects):
        return True
    for raw in targets:
        try:
            path = ctx.current_dir / os.path.expanduser(raw)
        except (OSError, ValueError):
            return True
        if raw != "/dev/null" and os.path.lexists(path):
            return True
    return False


def _bash_checks(
    commands: Iterable[SimpleCommand], ctx: ToolContext, rules: PermissionRules, mode: PermissionMode
) -> Iterable[Decision]:
    dirs = _Dirs(ctx.current_dir)
    for cmd in commands:
        effects = command_effects(cmd)
        verdict = _contained(_check_simple(cmd, effects, rules, mode), None, ctx)
        yield verdict
        cwds, known = dirs.get(cmd.env)
        if cmd.name == "git" and "/" not in cmd.words[0]:
            yield from _git_checks(cmd, effects, cwds, known, ctx, rules, mode)
        for cwd in cwds:
            yield from _file_checks(cmd, effects, cwd, ctx, rules, mode, known=known)
            yield from _read_denials(cmd, effects, cwd, ctx, rules, known=known)
            if effects.read_only and verdict.rule is None and mode != "bypassPermissions" and not cmd.wrapper:
                # allowed for being read-only, not by a rule: what it reads must be readable
                yield from _read_checks(effects, cwd, ctx, rules, mode, known=known)
            if cmd.each_found and "{}" in cmd.words:
                yield from _found_files(cmd, cwd, ctx, rules, mode, known=known)
        if _changes_dir(cmd):
            dirs.change(cmd)


def _git_dir(start: Path, *, bare: bool) -> tuple[Path, Path | None] | None:
    """The repository git would use from `start`, found the way git looks for it: at each level
    a `.git` directory or `gitdir:` file, else (when `bare`) the directory itself when it is a
    repository. Returns (its git directory, resolved; its work tree, or None for a bare one)."""
    for d in (start, *start.parents):
        entry = d / ".git"
        if entry.is_dir():
            return Path(os.path.realpath(entry)), d
        if entry.is_file():
            try:
                m = re.match(r"gitdir:\s*(.+?)\s*$", entry.read_text(errors="replace"))
            except OSError:
                m = None
            return Path(os.path.realpath(d / m.group(1) if m else entry)), d
        if bare and (d / "HEAD").is_file() and (d / "objects").is_dir() and (d / "refs").is_dir():
            return Path(os.path.realpath(d)), None
    return None


def _git_checks(
    cmd: SimpleCommand,
    effects: Effects,
    cwds: tuple[Path, ...],
    known: bool,
    ctx: ToolContext,
    rules: PermissionRules,
    mode: PermissionMode,
) -> Iterable[Decision]:
    """git trusts the repository it finds: its config can run programs (`core.fsmonitor`,
    `core.pager`, aliases, filters). Only the workspace's own repository (or one whose git
    directory lives inside it, a submodule's) is trusted: a `.git` file or a bare repository the
    agent wrote elsewhere asks. And what git prints from its object store (`git show HEAD:.env`,
    `log -p`, `grep`) is checked against the read-deny rules like a file read, in every mode."""
    own = _git_dir(ctx.workspace, bare=False)
    own_dir = own[0] if own else None
    trusting = mode != "bypassPermissions"  # there any code may run; deny rules still hold
    if not known and trusting:
        yield Decision("ask", f"`{cmd.text}` runs in a directory only known at run time")
    denies = _read_deny_rules(rules)
    for cwd in cwds:
        found = _git_dir(cwd, bare=True)
        if found is None:
            continue
        gitdir, top = found
        foreign = gitdir != own_dir and not (own_dir is not None and gitdir.is_relative_to(own_dir))
        if foreign:
            # never run git there to see what it holds: its config is the attacker's
            if trusting or (denies and (effects.repo_reads or effects.repo_scope is not None)):
                yield Decision(
                    "ask", f"`{cmd.text}` would use the repository at {gitdir}, not the workspace's own"
                )
            continue
        if denies:
            yield from _git_content_denials(cmd, effects, cwd, top or cwd, ctx, denies)


def _git_content_denials(
    cmd: SimpleCommand, effects: Effects, cwd: Path, top: Path, ctx: ToolContext, denies: list[Rule]
) -> Iterable[Decision]:
    scope = effects.repo_scope
    if "--batch-all-objects" in cmd.words or "--unreachable" in cmd.words:
        yield Decision(
            "ask", f"`{cmd.text}` may print objects no commit reaches, unchecked against the rules"
        )
    for raw in effects.repo_reads:
        if not raw:
            scope = ()  # `HEAD:` is the whole tree
            continue
        access = _access(raw, cwd if raw.startswith(("./", "../")) else top, write=False)
        for rule in denies:
            if _path_matches(rule, access, ctx, for_allow=False):
                yield Decision(
                    "deny", f"`{cmd.text}` prints {access.path} from git, denied by a rule", str(rule)
                )
    if scope is None:
        return
    tracked = _git_tracked(top, ctx.workspace)
    if tracked is None:
        yield Decision("ask", f"could not list what git tracks, so `{cmd.text}` may print a denied file")
        return
    limits = [Path(os.path.normpath(cwd / spec)) for spec in scope]
    patterns = [(rule, _rule_pattern(rule, ctx, for_allow=False)) for rule in denies]
    for name in sorted(tracked):
        path = top / name
        if limits and not any(path == lim or path.is_relative_to(lim) for lim in limits):
            continue
        access = _Access(False, Path(os.path.realpath(path)), path)
        for rule, pattern in patterns:
            if _pattern_matches(pattern, access, for_allow=False):
                yield Decision(
                    "deny", f"`{cmd.text}` may print {name}, which git tracks and a rule denies", str(rule)
                )
                return


def _git_tracked(top: Path, workspace: Path) -> frozenset[str] | None:
    """Every path the repository at `top` holds in its index or any commit it can reach (refs,
    stash and reflog included); None when git cannot say (fail closed: the caller asks)."""
    # the workspace's own repository (checked before this is called), which a sandboxed command
    # may have written: git found outside the workspace, run with every program the repository
    # could name switched off and no transport (a partial clone's lazy fetch fails, not runs)
    git = find_program("git", workspace)
    if git is None:
        return None
    env = git_environment()
    base = host_git(git, top)
    names: set[str] = set()
    for args in (
        ["ls-files", "-z"],
        ["log", "--all", "--reflog", "--format=", "--name-only", "--no-renames", "-z"],
    ):
        try:
            proc = subprocess.run(
                [*base, *args], capture_output=True, timeout=_GIT_SCAN_TIMEOUT_S, env=env, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if proc.returncode != 0:
            return None
        names.update(n.strip("\n") for n in proc.stdout.decode("utf-8", "surrogateescape").split("\0"))
    names.discard("")
    return frozenset(names)


def _file_checks(
    cmd: SimpleCommand,
    effects: Effects,
    cwd: Path,
    ctx: ToolContext,
    rules: PermissionRules,
    mode: PermissionMode,
    *,
    known: bool,
) -> Iterable[Decision]:
    """The files `cmd` opens through redirections and writes by its own semantics (`cp`, `sed -i`, ...)."""
    files = [(r.target, r.writes, r.dynamic) for r in cmd.redirects if r.writes or r.reads]
    # bash globs a redirection's word too (`> ~/.bash[r]c` opens ~/.bashrc): check what it matches
    files += [
        (match, r.writes, False)
        for r in cmd.redirects
        if (r.writes or r.reads)
        and any(ch in r.target for ch in "*?[")
        and not any(c in r.target for c in "$`")
        for match in _expand_known(r.target, cwd)[1:]
    ]
    files += [(path, True, False) for path in effects.writes]
    for raw in effects.tree_writes:
        if _uncertain(raw, known):
            yield Decision("ask", f"`{raw}` is relative to a directory only known at run time")
        root = _access(raw, cwd, write=True)
        yield _check_access(root, "Bash", ctx, rules, mode)
        # any name may appear under it, `.git/hooks/…` and `.foldline/…` included
        yield Decision("ask", f"`{cmd.text}` may create any file under {root.path}, protected paths included")
    for raw, writes, dynamic in files:
        if dynamic:
            yield Decision("ask", f"redirection target `{raw}` is only known at run time", contained=True)
        elif raw not in _HARMLESS_TARGETS:
            if _uncertain(raw, known):
                yield Decision(
                    "ask", f"`{raw}` is relative to a directory only known at run time", contained=True
                )
            access = _access(raw, cwd, write=writes)
            yield _contained(_check_access(access, "Bash", ctx, rules, mode), access, ctx)


def _contained(decision: Decision, access: _Access | None, ctx: ToolContext) -> Decision:
    """`decision`, marked `contained` when it is an ask the OS sandbox makes moot: no rule asked,
    and it is about the command itself (what it runs, syntax the checker cannot verify; the sandbox
    bounds whatever that does) or about a file inside the workspace that is not protected. Writes
    outside the workspace or to a protected path, and reads outside it, still ask."""
    if decision.behavior != "ask" or decision.rule is not None:
        return decision
    if access is not None:
        paths = (access.path, access.literal)
        if not all(p.is_relative_to(ctx.workspace) and not is_protected_path(p) for p in paths):
            return decision
        if any(access.path.is_relative_to(p) for p in own_install(ctx.workspace)):
            return decision
    return Decision(decision.behavior, decision.reason, decision.rule, contained=True)


def _read_checks(
    effects: Effects,
    cwd: Path,
    ctx: ToolContext,
    rules: PermissionRules,
    mode: PermissionMode,
    *,
    known: bool,
) -> Iterable[Decision]:
    for raw in (*effects.reads, *effects.recursive):
        if _uncertain(raw, known):
            yield Decision("ask", f"`{raw}` is relative to a directory only known at run time")
        yield _check_access(_access(raw, cwd, write=False), "Bash", ctx, rules, mode)


def _expand_known(raw: str, cwd: Path) -> list[str]:
    """`raw` with `$HOME`/`$PWD` (and `~`) filled in and globs expanded, for the Read-deny scan only."""
    home = str(Path.home())
    text = re.sub(r"\$\{?HOME\}?", lambda _: home, raw)
    text = re.sub(r"\$\{?PWD\}?", lambda _: str(cwd), text)
    # the shell's own directory, wherever the checker runs
    text = re.sub(r"^/proc/(self|thread-self)/cwd(?=/|$)", lambda _: str(cwd), text)
    if any(ch in text for ch in "*?["):
        pattern = os.path.join(cwd, os.path.expanduser(text))
        return [text, *sorted(glob.glob(pattern, include_hidden=False))[:200]]
    return [text]


def _read_deny_rules(rules: PermissionRules) -> list[Rule]:
    """The deny rules about reading particular paths: what Bash readers, Grep and Glob must avoid."""
    return [r for r in rules.deny if r.names(READ_TOOLS)]


def _read_denials(
    cmd: SimpleCommand, effects: Effects, cwd: Path, ctx: ToolContext, rules: PermissionRules, *, known: bool
) -> Iterable[Decision]:
    """Read deny rules also cover files a command names (`cat .env` under `Read(**/.env)`), through
    `$HOME`, globs, `--opt=FILE` and directories read recursively (`grep -r`, `rg`)."""
    read_denies = _read_deny_rules(rules)
    if not read_denies:
        return
    # any word of a command not known to take only strings may name a file it reads
    takes_files = bool(cmd.words) and (cmd.name not in NO_FILE_OPERANDS or "/" in cmd.words[0])
    words = [*(w for w in cmd.words[1:] if w and not w.startswith("-") and takes_files), *effects.reads]
    words += [r.target for r in cmd.redirects if r.reads]
    if takes_files:
        # a value attached to a short option (`xargs -a.env`, `jq -Lsecrets`, `-xa.env`): every
        # tail of the word may be a file, since which letters take a value is per command
        words += [w[k:] for w in cmd.words[1:] if w[:1] == "-" and w[1:2] != "-" for k in range(2, len(w))]
    for word in dict.fromkeys(words):
        if _PROC_RE.search(word):
            yield Decision(
                "ask", f"`{cmd.text}` names {word}, which the checker cannot resolve for the shell"
            )
        for raw in _expand_known(word, cwd):
            if _uncertain(raw, known):
                yield Decision("ask", f"`{cmd.text}` names {raw} in a directory only known at run time")
            access = _access(raw, cwd, write=False)
            for rule in read_denies:
                if _path_matches(rule, access, ctx, for_allow=False):
                    yield Decision("deny", f"`{cmd.text}` reads {access.path}, denied by a rule", str(rule))
    for raw in effects.recursive:
        found = _denied_under(_access(raw, cwd, write=False).path, read_denies, ctx, effects.skips_hidden)
        if found is not None:
            yield Decision(
                "deny", f"`{cmd.text}` reads everything under {raw}, {found} included, denied by a rule"
            )


_SCAN_LIMIT = 5000


def _found_files(
    cmd: SimpleCommand,
    cwd: Path,
    ctx: ToolContext,
    rules: PermissionRules,
    mode: PermissionMode,
    *,
    known: bool,
) -> Iterable[Decision]:
    """`find START -exec CMD {}` hands CMD files from anywhere under START (find's own tests, such
    as `-name`, are not modelled): a file there that a read-deny rule covers may be among them, so
    it asks; a link is read where it points, so its target is checked as a read (one outside the
    workspace asks). START itself is checked as find's own read."""
    denies = _read_deny_rules(rules)
    seen = 0
    for raw in cmd.each_found:
        if _uncertain(raw, known):
            yield Decision("ask", f"`{raw}` is relative to a directory only known at run time")
        root = _access(raw, cwd, write=False).path
        if denies and (denied := _denied_under(root, denies, ctx, skip_hidden=False)) is not None:
            yield Decision("ask", f"`{cmd.text}` may be given {denied}, which a rule denies reading")
        visited: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            real = os.path.realpath(dirpath)
            if real in visited:
                dirnames[:] = []
                continue
            visited.add(real)
            for name in (*dirnames, *filenames):
                seen += 1
                if seen > _SCAN_LIMIT:  # too large to look through: fail closed
                    yield Decision("ask", f"too many files under {raw} to check what `{cmd.text}` reads")
                    return
                path = Path(dirpath, name)
                if not path.is_symlink():
                    continue
                verdict = _check_access(_access(str(path), cwd, write=False), "Bash", ctx, rules, mode)
                if verdict.behavior == "deny":  # find's tests may pass it by: ask, as for a file
                    reason = f"`{cmd.text}` may be given {path}, which leads to a file a rule denies reading"
                    verdict = Decision("ask", reason, verdict.rule)
                yield verdict


def _denied_under(root: Path, denies: list[Rule], ctx: ToolContext, skip_hidden: bool) -> Path | None:
    """The first file under directory `root` a deny rule covers (or `root` itself when the tree is
    too large to scan: fail closed)."""
    if not root.is_dir():
        return None
    # anchored once per walk, not once per file: anchoring resolves the pattern's fixed prefix
    patterns = [_rule_pattern(rule, ctx, for_allow=False) for rule in denies]
    seen = 0
    visited: set[str] = set()
    # symlinked directories are followed (`grep -R` does, and a link's target is what is read);
    # each real directory once, so a link cycle ends
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in visited:
            dirnames[:] = []
            continue
        visited.add(real)
        if skip_hidden:
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            filenames = [f for f in filenames if not f.startswith(".")]
        for name in (*dirnames, *filenames):
            seen += 1
            if seen > _SCAN_LIMIT:
                return root
            path = Path(dirpath, name)
            access = _Access(False, Path(os.path.realpath(path)), path)
            if any(_pattern_matches(pattern, access, for_allow=False) for pattern in patterns):
                return path
    return None


# --- entry points -----------------------------------------------------------------------------


def checker_reads(command: str) -> bool:
    """Whether the checker understood everything `command` runs (`_semantics.modeled`, each
    simple command). When it did not, the code it runs is opaque: the sandbox alone holds the Read
    deny rules for it, git's object store included (`Sandbox.wrap(opaque=...)`)."""
    parsed = parse_command(command)
    return parsed.refusal is None and all(modeled(cmd) for cmd in parsed.commands)


def rule_patterns(rules: PermissionRules, workspace: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`(read_only, hidden)`: the absolute path patterns the Bash sandbox binds read-only (those of
    the Edit/Write deny and ask rules) and hides (those of the Read deny rules; a bare `Read` deny
    hides the whole workspace). A bare name (`.env`) means anywhere in the workspace, as for an
    allow rule: a walk of the whole filesystem per call would cost too much, and outside the
    workspace the filesystem is read-only anyway."""
    ctx = ToolContext(workspace=workspace)
    edits, reads = frozenset({"Edit", "Write"}), frozenset({"Read"})
    read_only = tuple(
        _anchor(r.specifier, ctx, for_allow=True)
        for r in (*rules.deny, *rules.ask)
        if r.specifier is not None and r.names(edits)
    )
    hidden = tuple(
        glob_escape(str(ctx.workspace)) if r.specifier is None else _anchor(r.specifier, ctx, for_allow=True)
        for r in rules.deny
        if r.names(reads)
    )
    return read_only, hidden


def read_denied_filter(rules: PermissionRules, workspace: Path) -> Callable[[Path], bool]:
    """The predicate for `ToolContext.read_denied`: is `path` covered by a deny rule about reading?

    Grep and Glob use it to skip such files, so a `Read(**/.env)` deny cannot be sidestepped by
    searching the directory that holds `.env`.
    """
    denies = _read_deny_rules(rules)
    anchor_ctx = ToolContext(workspace=workspace)

    def denied(path: Path) -> bool:
        access = _access(str(path), anchor_ctx.workspace, write=False)
        if _in_undo_store(access.path, anchor_ctx.workspace):
            return True  # as Read is refused there (`_check_access`)
        return any(_path_matches(rule, access, anchor_ctx, for_allow=False) for rule in denies)

    return denied


def _in_undo_store(path: Path, workspace: Path) -> bool:
    """Whether `path` lies in the workspace's undo store (`containment.checkpoints`): the files
    there left their old names, and with them the rules that named them."""
    return path.is_relative_to(store_root(workspace))


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
            return _check_access(access, tool_name, ctx, rules, mode)
        except UserError as exc:
            return Decision("deny", str(exc))
        except (OSError, ValueError) as exc:
            return Decision("ask", f"could not inspect the path ({exc})")
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


def _candidate_rules(tool_name: str, tool_input: Mapping[str, Any], ctx: ToolContext, rules: PermissionRules,
                     mode: PermissionMode) -> list[str]:  # fmt: skip
    if tool_name == "Bash":
        command = tool_input.get("command")
        if not isinstance(command, str):
            return []
        commands = [c for c in parse_command(command).commands if c.words and not c.wrapper]
        asking = [c for c in commands if _check_simple(c, command_effects(c), rules, mode).behavior == "ask"]
        texts = list(dict.fromkeys(c.text for c in asking))
        # a `*` in a saved rule would be a wildcard, allowing more than was approved; and a rule
        # matches a command's words only, so `X=1 make` (or `export X=1; make`) would save
        # `Bash(make)`, which also allows `make` under any other environment the user never saw
        if any("*" in t for t in texts) or any(c.assignments for c in parse_command(command).commands):
            return []
        return [f"Bash({t})" for t in texts]
    if tool_name in READ_TOOLS or tool_name in EDIT_TOOLS:
        try:
            path = _file_access(tool_name, tool_input, ctx).path
        except UserError:
            return []
        kind = "Edit" if tool_name in EDIT_TOOLS else "Read"
        inside = path.is_relative_to(ctx.workspace)
        spec = f"/{path.relative_to(ctx.workspace)}" if inside else f"/{path}"
        return [f"{kind}({glob_escape(spec)})"]
    return [tool_name]


def suggest_rules(
    tool_name: str,
    tool_input: Mapping[str, Any],
    ctx: ToolContext,
    rules: PermissionRules | None = None,
    mode: PermissionMode = "default",
) -> tuple[str, ...]:
    """The allow rules that would let this exact call run without asking, or `()` when no rule can.

    For the "yes, always" answer. Every suggestion is checked: the call is decided again with the
    rules added, and only an `allow` counts. So nothing is offered where an ask or deny rule, a
    protected path or syntax that cannot be verified is the reason for asking.
    """
    rules = rules or PermissionRules()
    candidates = _candidate_rules(tool_name, tool_input, ctx, rules, mode)
    if not candidates:
        return ()
    extended = PermissionRules((*rules.allow, *(Rule.parse(c) for c in candidates)), rules.ask, rules.deny)
    if check_permission(tool_name, tool_input, ctx, extended, mode).behavior != "allow":
        return ()
    return tuple(candidates)
