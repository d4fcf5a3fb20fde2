"""A bash line -> every simple command it would run, parsed with tree-sitter-bash (R9.2).

Used by the permission checker, which must judge every command a line runs, not only the first.
The grammar is tree-sitter-bash; this module walks its tree with an allowlist of node kinds and
turns each `command` node into a `SimpleCommand`: literal words, redirections, assignments, the
execution environment it runs in, and the reasons it cannot be verified.

Invariants:
- Fail closed. A node kind not in the allowlist, a parse error, an expansion that is not a plain
  `$NAME`/`${NAME}`, arithmetic, `$'…'`/`$"…"`, an unquoted glob or brace expansion, `~-`/`~+`, a
  heredoc body with expansions, a backslash-newline glued to a word, a control character, an
  unknown option of a wrapper, or nesting deeper than `MAX_DEPTH` adds a *problem*. A problem
  never hides commands: everything found is still returned, so deny rules keep applying.
- Syntax nested deeper than `MAX_NESTING` (`$($($(…)))`, `((((…))))`) is a *refusal*: the walk
  stops there, so what lies deeper is unknown and the line is refused outright, never half-judged.
  A `RecursionError` anywhere in the walk is the same refusal, never an exception.
- Every name a line assigns is recorded, wherever bash assigns it: `X=1 cmd`, `X=1`, `env X=1`,
  `export`/`local`/`readonly`, and a `for`/`select` loop variable.
- Substitutions (`$(…)`, backticks, `<(…)`, `>(…)`) are walked and returned before the command
  that uses them, as bash runs them; the word that held one is `dynamic`.
- Wrappers (`sudo`, `env`, `nice`, `timeout`, `xargs`, `watch`, `busybox`, ...) and indirect
  execution (`sh -c`, `eval`, `trap`, `find -exec`) are unwrapped from exact option tables;
  an option not in the table stops unwrapping with a problem instead of guessing.
- `SimpleCommand.env` names the shell process a command runs in: `( )`, each element of a
  multi-command pipeline, a background job, a substitution and `sh -c` get a fresh child, so a
  `cd` there cannot move the directory of what follows outside it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

__all__ = [
    "MAX_DEPTH",
    "MAX_NESTING",
    "ParsedCommand",
    "Redirect",
    "ShellParseError",
    "SimpleCommand",
    "parse_command",
    "split_command",
]

MAX_DEPTH = 8
MAX_NESTING = 64
"""Syntax nesting (substitutions, subshells, groups, quotes) past which a line is refused."""
_WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
_SAFE_WORD_RE = re.compile(r"[\w@%+=:,./~*?\[\]{}^!#-]+")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACE_RE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


class _TooDeep(Exception):
    """Syntax nested past `MAX_NESTING`: the walk stops and the line is refused."""


class ShellParseError(ValueError):
    """The command uses shell syntax that is not verified; callers must ask, never allow."""


@dataclass(frozen=True)
class Redirect:
    """One redirection: `op` (`>`, `>>`, `<`, `&>`, `<<`, ...) and its target word."""

    op: str
    target: str
    dynamic: bool = False

    @property
    def writes(self) -> bool:
        """Whether it opens `target` for writing (fd duplications like `2>&1` do not)."""
        return self.op in _WRITE_OPS or (self.op == ">&" and not self.target.isdigit() and self.target != "-")

    @property
    def reads(self) -> bool:
        """Whether it opens `target` for reading (heredocs and herestrings carry data, not paths)."""
        return self.op in ("<", "<>") or (
            self.op == "<&" and not self.target.isdigit() and self.target != "-"
        )


@dataclass(frozen=True)
class SimpleCommand:
    """One command the line would execute: its words (unquoted), redirections and expansion flags."""

    words: tuple[str, ...]
    redirects: tuple[Redirect, ...] = ()
    dynamic: tuple[bool, ...] = ()
    """Per word: built from an expansion or a glob, so its run-time value is unknown."""
    assignments: tuple[str, ...] = ()
    """Names assigned before the command (`FOO=1 cmd`) or through `env`/`export`."""
    env: tuple[int, ...] = ()
    """The shell process it runs in: `()` is the top-level shell, each child appends an id."""
    problems: tuple[str, ...] = ()
    """Why this command cannot be verified (empty when it can)."""
    conditional: bool = False
    """Runs only on some paths (after `&&`/`||`, inside `if`/`while`/`for`)."""
    wrapper: bool = False
    """Only carries an inner command (`timeout 5 X`, `sh -c X`): deny and ask rules apply to it,
    but it needs no allow of its own; the inner command is judged as itself."""
    each_found: tuple[str, ...] = ()
    """Run by `find START… -exec` on the files it finds: the START paths (as written) that each
    `{}` word names a file under; empty for any other command. Its `{}` words stay dynamic: the
    checker decides whether a file found there is harmless to this command (a read-only one)."""

    def __post_init__(self) -> None:
        if len(self.dynamic) != len(self.words):
            object.__setattr__(
                self, "dynamic", (*self.dynamic, *[False] * (len(self.words) - len(self.dynamic)))
            )

    @property
    def text(self) -> str:
        """The canonical text rules match against: words re-quoted and joined by single spaces."""
        return " ".join(_quote(w) for w in self.words)

    @property
    def name(self) -> str:
        """The command's basename (`/bin/rm` -> `rm`), or `""` for a bare assignment or redirection."""
        return os.path.basename(self.words[0]) if self.words else ""


@dataclass(frozen=True)
class ParsedCommand:
    """What a whole line would run, and why any of it is unverified."""

    commands: tuple[SimpleCommand, ...]
    problems: tuple[str, ...]
    """Every problem on the line, its commands' included."""
    refusal: str | None = None
    """Why the line cannot be walked at all (nesting too deep): the caller must refuse it."""


def _quote(word: str) -> str:
    if word and _SAFE_WORD_RE.fullmatch(word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_bash.language()))


@dataclass
class _Word:
    text: str = ""
    dynamic: bool = False
    problems: list[str] = field(default_factory=list)


_STATEMENTS = frozenset(
    {"command", "pipeline", "list", "subshell", "compound_statement", "redirected_statement",
     "negated_command", "variable_assignment", "variable_assignments", "declaration_command",
     "unset_command", "if_statement", "while_statement", "for_statement", "case_statement",
     "function_definition", "test_command", "c_style_for_statement", "comment"}
)  # fmt: skip
_SEQUENCES = frozenset({"program", "do_group", "else_clause", "elif_clause"})
_REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})


@dataclass
class _Walker:
    """One pass over a tree: collects commands in execution order and the line's problems."""

    src: bytes
    depth: int
    out: list[SimpleCommand] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    counter: list[int] = field(default_factory=lambda: [0])
    nesting: int = 0

    def deeper(self) -> None:
        """Enter one level of syntax nesting.

        Raises:
            _TooDeep: past `MAX_NESTING`; `parse_command` turns it into a refusal.
        """
        if self.nesting >= MAX_NESTING:
            raise _TooDeep(f"the command nests more than {MAX_NESTING} levels deep")
        self.nesting += 1

    def child(self, env: tuple[int, ...]) -> tuple[int, ...]:
        return _child_env(env, self.counter)

    def text(self, node: Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    # --- statements -------------------------------------------------------------------------

    def sequence(self, nodes: Iterable[Node], env: tuple[int, ...], cond: bool) -> None:
        """Statements in order; one followed by `&` runs in the background, in a child process."""
        items = list(nodes)
        for i, node in enumerate(items):
            if not node.is_named:
                continue
            background = i + 1 < len(items) and items[i + 1].type == "&"
            self.statement(node, self.child(env) if background else env, cond)

    def statement(self, node: Node, env: tuple[int, ...], cond: bool) -> None:
        self.deeper()
        try:
            self._statement(node, env, cond)
        finally:
            self.nesting -= 1

    def _statement(self, node: Node, env: tuple[int, ...], cond: bool) -> None:
        kind = node.type
        if kind in _SEQUENCES or kind == "negated_command":
            self.sequence(node.children, env, cond)
        elif kind == "list":
            first = True
            for part in node.named_children:
                self.statement(part, env, cond or not first)
                first = False
        elif kind == "pipeline":
            parts = list(node.named_children)
            for part in parts:
                self.statement(part, self.child(env) if len(parts) > 1 else env, cond)
        elif kind == "subshell":
            self.sequence(node.children, self.child(env), cond)
        elif kind == "compound_statement":
            if node.children and node.children[0].type != "{":
                self.problem("arithmetic `(( ))` is not verified")
                self.scan(node, env)
            else:
                self.sequence(node.children, env, cond)
        elif kind == "redirected_statement":
            self.redirected(node, env, cond)
        elif kind in ("command", "variable_assignment", "variable_assignments", "unset_command"):
            self.command(node, env, cond, ())
        elif kind == "declaration_command":
            self.declaration(node, env, cond)
        elif kind == "test_command":
            self.test(node, env, cond)
        elif kind in ("if_statement", "while_statement", "for_statement"):
            self.compound(node, env)
        elif kind == "comment":
            return
        else:
            self.problem(f"`{kind}` is not verified")
            self.scan(node, env)

    def compound(self, node: Node, env: tuple[int, ...]) -> None:
        """`if`/`while`/`for`: every part is walked; everything inside is conditional. A loop
        variable is an assignment (`for HOME in /tmp; do git log; done` changes git's HOME)."""
        for part in node.named_children:
            if part.type in _STATEMENTS or part.type in _SEQUENCES:
                self.statement(part, env, True)
            elif part.type == "variable_name":
                self.emit(SimpleCommand((), assignments=(self.text(part),), env=env, conditional=True))
            else:
                word = self.word(part, env)
                self.problems.extend(word.problems)

    def test(self, node: Node, env: tuple[int, ...], cond: bool) -> None:
        """`[ … ]` is the `test` command; `[[ … ]]` evaluates arithmetic in its operands, so it asks."""
        words: list[_Word] = []

        def collect(part: Node) -> None:
            for child in part.children:
                if child.type.endswith("_expression"):
                    collect(child)
                elif child.type in ("test_operator", "extglob_pattern", "regex") or not child.is_named:
                    words.append(_Word(self.text(child)))
                else:
                    words.append(self.word(child, env))

        collect(node)
        problems = [p for w in words for p in w.problems]
        if words and words[0].text == "[[":
            problems.append("`[[ ]]` evaluates arithmetic in its operands")
        if any(w.text == "-v" for w in words):
            problems.append("`test -v` evaluates array subscripts")
        self.emit(
            SimpleCommand(
                tuple(w.text for w in words),
                (),
                tuple(w.dynamic for w in words),
                env=env,
                problems=tuple(problems),
                conditional=cond,
            )
        )

    def emit(self, cmd: SimpleCommand) -> None:
        for found in unwrap(cmd, self.depth, self.counter):
            self.out.append(found)
            self.problems.extend(found.problems)

    def redirected(self, node: Node, env: tuple[int, ...], cond: bool) -> None:
        body = node.child_by_field_name("body")
        redirects = [c for c in node.named_children if c.type in _REDIRECTS]
        # tree-sitter hangs whatever follows a heredoc's start line (`cat <<EOF | sh`,
        # `cat <<EOF && rm x`) inside the heredoc node: those commands run too, so walk them
        tails = [
            (op, t) for r in redirects if r.type == "heredoc_redirect" for op, t in self.heredoc_tails(r)
        ]
        piped = any(op in ("|", "|&") for op, _ in tails)
        own_env = self.child(env) if piped else env
        if body is not None and body.type == "command":
            self.command(body, own_env, cond, redirects)
        else:
            if body is not None:
                self.statement(body, own_env, cond)
            # the redirections of a group or loop apply to all of it: check them as their own command
            self.command(None, own_env, cond, redirects)
        for op, tail in tails:
            if op in ("|", "|&"):
                self.pipe_tail(tail, env, cond)
            elif op in ("&&", "||"):
                self.statement(tail, env, True)
            else:
                self.problem(f"`{self.text(tail)[:40]}` after a heredoc is not verified")
                self.statement(tail, env, True)

    def heredoc_tails(self, node: Node) -> Iterator[tuple[str, Node]]:
        """The statements tree-sitter put inside a heredoc node, each with the operator before it."""
        op = ""
        for child in node.children:
            if not child.is_named:
                op = child.type if child.type != "<<" and child.type != "<<-" else op
            elif child.type == "pipeline" and child.children and child.children[0].type in ("|", "|&"):
                yield child.children[0].type, child
            elif child.type in _STATEMENTS:
                yield op, child
            elif child.type == "ERROR":
                self.problem("the command does not parse as bash")

    def pipe_tail(self, node: Node, env: tuple[int, ...], cond: bool) -> None:
        """`| a | b` after a heredoc: each element a pipeline stage, in a child process."""
        for part in node.named_children:
            if part.type == "pipeline":
                self.pipe_tail(part, env, cond)
            elif part.type == "list":
                # `cat <<EOF | a && b`: the grouping is not what the tree shows
                self.problem("a heredoc followed by a mixed chain is not verified")
                self.statement(part, env, True)
            else:
                self.statement(part, self.child(env), cond)

    def declaration(self, node: Node, env: tuple[int, ...], cond: bool) -> None:
        keyword = node.children[0].type if node.children else ""
        if keyword not in ("export", "readonly", "local"):
            # declare/typeset -i evaluate arithmetic in every later assignment
            self.problem(f"`{keyword}` declarations are not verified")
        self.command(node, env, cond, (), lead=keyword)

    # --- one command ------------------------------------------------------------------------

    def command(
        self,
        node: Node | None,
        env: tuple[int, ...],
        cond: bool,
        extra: Iterable[Node],
        *,
        lead: str | None = None,
    ) -> None:
        words: list[_Word] = [_Word(lead)] if lead else []
        assignments: list[str] = []
        problems: list[str] = []
        redirects: list[Redirect] = []
        children = ([node] if node.type == "variable_assignment" else node.children) if node else []
        for child in [*children, *extra]:
            if child.type in ("variable_assignment", "variable_assignments"):
                assignments.extend(self.assignment(child, env, problems))
            elif child.type in _REDIRECTS:
                redirects.extend(self.redirect(child, env, problems))
            elif child.type == "command_name":
                words.append(self.word(child.named_children[0], env))
            elif child.type == "variable_name" and lead:
                assignments.append(self.text(child))
                words.append(_Word(self.text(child)))
            elif child.type == "$":
                problems.append('`$"…"` locale strings are not verified')
            elif child.is_named:
                words.append(self.word(child, env))
            elif child.type in ("unset", "unsetenv"):
                words.append(_Word(child.type))
        for word in words:
            problems.extend(word.problems)
        cmd = SimpleCommand(
            tuple(w.text for w in words),
            tuple(redirects),
            tuple(w.dynamic for w in words),
            tuple(assignments),
            env,
            tuple(dict.fromkeys(problems)),
            cond,
        )
        self.emit(cmd)

    def assignment(self, node: Node, env: tuple[int, ...], problems: list[str]) -> Iterator[str]:
        parts = node.named_children if node.type == "variable_assignments" else [node]
        for part in parts:
            name, *value = part.named_children
            if name.type != "variable_name":
                problems.append("subscripted assignments evaluate arithmetic")
            if any(v.type == "array" for v in value):
                problems.append("array assignments are not verified")
            for v in value:
                problems.extend(self.word(v, env).problems)
            yield self.text(name).split("[", 1)[0]

    def redirect(self, node: Node, env: tuple[int, ...], problems: list[str]) -> Iterator[Redirect]:
        if node.type == "heredoc_redirect":
            yield from self.heredoc(node, env, problems)
            return
        op = next((c.type for c in node.children if not c.is_named), "")
        targets = [c for c in node.named_children if c.type != "file_descriptor"]
        if op == "<<<":
            for target in targets:
                problems.extend(self.word(target, env).problems)
            yield Redirect(op, "")
            return
        if op in (">&-", "<&-"):
            yield Redirect(op[:2], "-")
            return
        if len(targets) != 1:
            problems.append(f"redirection `{self.text(node)}` is not verified")
            return
        word = self.word(targets[0], env)
        problems.extend(word.problems)
        yield Redirect(op, word.text, word.dynamic)

    def heredoc(self, node: Node, env: tuple[int, ...], problems: list[str]) -> Iterator[Redirect]:
        start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
        delimiter = self.text(start) if start is not None else ""
        body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
        if not any(q in delimiter for q in "'\"\\") and body is not None:
            self.heredoc_body(self.text(body), env, problems)
        yield Redirect("<<", delimiter)
        for child in node.named_children:  # `cat <<EOF > out`: the redirections on the start line
            if child.type in _REDIRECTS:
                yield from self.redirect(child, env, problems)

    def heredoc_body(self, text: str, env: tuple[int, ...], problems: list[str]) -> None:
        """An unquoted heredoc body expands like a double-quoted string. tree-sitter misses
        substitutions there (backticks, lines after `<<-` tabs), so scan the text itself: plain
        `$NAME` is data; a substitution is walked and asks; any other expansion asks."""
        inner = _substitutions(text)
        if inner or "$((" in text or re.search(r"\$\{(?![A-Za-z_][A-Za-z0-9_]*\})", text):
            problems.append("a heredoc body with substitutions or expansions is not verified")
        for script in inner:
            parsed = _parse(script, self.depth + 1, self.counter)
            child = self.child(env)
            self.out.extend(replace(c, env=(*child, *c.env)) for c in parsed.commands)
            self.problems.extend(parsed.problems)

    # --- words ------------------------------------------------------------------------------

    def word(self, node: Node, env: tuple[int, ...]) -> _Word:
        self.deeper()
        try:
            return self._word(node, env)
        finally:
            self.nesting -= 1

    def _word(self, node: Node, env: tuple[int, ...]) -> _Word:
        kind, raw = node.type, self.text(node)
        if kind == "word":
            return _unquoted(raw, first=True)
        if kind in ("number", "variable_name"):
            return _Word(raw)
        if kind == "raw_string":
            return _Word(raw[1:-1])
        if kind == "string":
            return self.double_quoted(node, env)
        if kind == "concatenation":
            return self.concatenation(node, env)
        if kind == "simple_expansion":
            return _Word(raw, dynamic=True)
        if kind == "expansion":
            plain = [c.type for c in node.children] == ["${", "variable_name", "}"]
            self.scan(node, env)
            return _Word(raw, True, [] if plain else [f"parameter expansion `{raw}` is not verified"])
        if kind in ("command_substitution", "process_substitution"):
            self.sequence(node.children, self.child(env), False)
            return _Word("$(…)" if kind == "command_substitution" else "<(…)", dynamic=True)
        if kind == "arithmetic_expansion":
            self.scan(node, env)
            return _Word(raw, True, ["arithmetic expansion is not verified"])
        if kind == "brace_expression":
            return _Word(raw, True, [f"brace expansion in `{raw}` is not verified"])
        if kind in ("ansi_c_string", "translated_string"):
            return _Word(raw, True, [f"`{raw[:2]}…'` quoting is not verified"])
        self.scan(node, env)
        return _Word(raw, True, [f"`{kind}` is not verified"])

    def double_quoted(self, node: Node, env: tuple[int, ...]) -> _Word:
        out = _Word()
        pos = node.start_byte + 1
        for child in node.children:
            if child.start_byte > pos:  # text tree-sitter left between children
                out.text += _unescape_dq(self.src[pos : child.start_byte].decode("utf-8", "replace"))
            pos = max(pos, child.end_byte)
            if child.type == "string_content":
                out.text += _unescape_dq(self.text(child))
            elif child.is_named:
                piece = self.word(child, env)
                out.text += piece.text
                out.dynamic = out.dynamic or piece.dynamic
                out.problems.extend(piece.problems)
        return out

    def concatenation(self, node: Node, env: tuple[int, ...]) -> _Word:
        out = _Word()
        unquoted = ""
        if any(c.type == "$" for c in node.children):
            out.problems.append('`$"…"` locale strings are not verified')
        for i, child in enumerate(node.named_children):
            piece = (
                _unquoted(self.text(child), first=i == 0) if child.type == "word" else self.word(child, env)
            )
            if child.type == "word":
                unquoted += self.text(child)
            out.text += piece.text
            out.dynamic = out.dynamic or piece.dynamic
            out.problems.extend(piece.problems)
        if _BRACE_RE.search(unquoted) or (unquoted.count("{") and unquoted.count("}") and "," in unquoted):
            out.dynamic = True
            out.problems.append(f"brace expansion in `{self.text(node)}` is not verified")
        return out

    def scan(self, node: Node, env: tuple[int, ...]) -> None:
        """Walk the substitutions anywhere under `node`, so their commands are still checked."""
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                self.sequence(child.children, self.child(env), False)
            elif child.type in _STATEMENTS and child.type != "comment":
                self.statement(child, env, True)
            else:
                self.scan(child, env)

    def problem(self, reason: str) -> None:
        self.out.append(SimpleCommand((), problems=(reason,)))
        self.problems.append(reason)


def _unquoted(raw: str, *, first: bool) -> _Word:
    """An unquoted word: backslashes removed; globs, braces and odd tildes flagged."""
    out, problems, glob = [], [], False
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\":
            nxt = raw[i + 1 : i + 2]
            if nxt == "\n":  # a line continuation: bash removes both characters
                problems.append("a backslash-newline inside a word is not verified")
            out.append("" if nxt == "\n" else nxt)
            i += 2
            continue
        glob = glob or ch in "*?" or (ch == "[" and "]" in raw[i + 1 :])
        out.append(ch)
        i += 1
    text = "".join(out)
    if glob:
        problems.append(f"glob `{raw}` expands at run time")
    if _BRACE_RE.search(raw):
        problems.append(f"brace expansion in `{raw}` is not verified")
    if first and raw.startswith("~") and not re.match(r"~(/|$)", raw):
        problems.append(f"tilde form `{raw.split('/', 1)[0]}` is not verified")
    # bash also expands a tilde after `=` or `:` in a word that looks like an assignment
    # (`--file=~+/x` is `--file=$PWD/x`, `~1` a directory-stack entry)
    if re.search(r"[=:]~(?![/:]|$)", raw):
        problems.append(f"a tilde after `=` or `:` in `{raw}` is not verified")
    return _Word(text, bool(problems), problems)


def _substitutions(text: str) -> list[str]:
    """The scripts of the `$(…)` and backtick substitutions in double-quote-like text."""
    found, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "`":
            end = i + 1
            while end < len(text) and text[end] != "`":
                end += 2 if text[end] == "\\" else 1
            found.append(re.sub(r"\\([`$\\])", r"\1", text[i + 1 : end]))
            i = end + 1
        elif text.startswith("$(", i) and not text.startswith("$((", i):
            end = _closing_paren(text, i + 2)
            found.append(text[i + 2 : end])
            i = end + 1
        else:
            i += 1
    return found


def _closing_paren(text: str, i: int) -> int:
    """The index of the `)` that closes a `$(` whose script starts at `i` (quotes skipped)."""
    depth = 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 1
        elif ch in "'\"":
            close = text.find(ch, i + 1)
            i = close if close != -1 else len(text)
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


def _unescape_dq(raw: str) -> str:
    return re.sub(r"\\([$`\"\\\n])", lambda m: "" if m.group(1) == "\n" else m.group(1), raw)


# --- wrappers and indirect execution ------------------------------------------------------------


@dataclass(frozen=True)
class _Options:
    """A wrapper's option table: options taking an argument, and flags; anything else is unknown."""

    with_arg: frozenset[str] = frozenset()
    flags: frozenset[str] = frozenset()
    optional_arg: frozenset[str] = frozenset()
    """Short options whose argument, if any, is attached (`xargs -i{}`)."""
    number_flags: bool = False
    """`-5` style numeric options (`nice -5`)."""


def _opts(with_arg: str = "", flags: str = "", optional: str = "", *, numbers: bool = False) -> _Options:
    return _Options(
        frozenset(with_arg.split()), frozenset(flags.split()), frozenset(optional.split()), numbers
    )


_WRAPPERS: dict[str, _Options] = {
    "sudo": _opts("-u -g -h -p -C -D -r -t -U -T --user --group --host --prompt --chdir",
                  "-E -H -n -S -b -k -P -A --preserve-env --non-interactive --stdin --background"),
    "doas": _opts("-u -C", "-n"),
    "env": _opts("-u --unset", "-i -0 - --ignore-environment --null -v --debug"),
    "nice": _opts("-n --adjustment", "", numbers=True),
    "timeout": _opts("-s -k --signal --kill-after", "--foreground --preserve-status -v --verbose"),
    "nohup": _opts(),
    "time": _opts("-f -o --format --output", "-p -v --verbose --portability"),
    "setsid": _opts("", "-c -f -w --ctty --fork --wait"),
    "stdbuf": _opts("-i -o -e --input --output --error"),
    "ionice": _opts("-c -n --class --classdata", "-t --ignore"),
    "command": _opts("", "-p"),
    "builtin": _opts(),
    "exec": _opts("-a", "-c -l"),
    "xargs": _opts("-I -n -P -d -L -s -E -a --arg-file --delimiter --max-args --max-procs --replace "
                   "--max-lines --max-chars --eof",
                   "-0 -r -t -p -x --null --no-run-if-empty --verbose --interactive --exit",
                   "-i -l -e"),
    "watch": _opts("-n --interval -d --differences -q --equexit",
                   "-t -b -e -g -c -p -x -w --no-title --beep --errexit --chgexit --color --precise "
                   "--exec --no-wrap"),
}  # fmt: skip
_SAME_SHELL = frozenset({"command", "builtin"})
"""Wrappers that run a builtin in the current shell (`command cd x` moves it); the others exec."""
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "busybox-sh"})
_SHELL_OPTS = _opts("-o +o -O +O --rcfile --init-file",
                    "-e -x -u -v -n -f -h -a -b -m -p -t -C -H -B -P -E -T -l -i -r "
                    "+e +x +u +v +f +h +a +b +m +p +C +H +B +P +E +T "
                    "--norc --noprofile --login --posix --restricted --noediting --verbose")  # fmt: skip
_FIND_EXEC = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_RESERVED = frozenset(
    {"{", "}", "!", "(", ")", "then", "do", "done", "else", "elif", "fi", "esac", "in", "if", "while",
     "until", "for", "case", "select", "function", "]]"}
)  # fmt: skip
"""Words bash reads as syntax in command position; as a parsed command name they mean
tree-sitter misread the structure."""


def _take_options(cmd: SimpleCommand, start: int, table: _Options) -> tuple[int, list[str], list[str]]:
    """Skip `cmd`'s options from `start`: (index of the first operand, option values, problems)."""
    i, values, problems = start, list[str](), list[str]()
    words = cmd.words
    while i < len(words) and words[i].startswith(("-", "+")) and words[i] not in ("-", "+"):
        word = words[i]
        if cmd.dynamic[i]:
            return i, values, [*problems, f"option `{word}` of `{cmd.name}` is only known at run time"]
        if word == "--":
            return i + 1, values, problems
        if word.startswith("--") and "=" in word:
            opt, _, value = word.partition("=")
            if opt not in table.with_arg:
                problems.append(f"unknown option `{opt}` of `{cmd.name}`")
            values.append(value)
            i += 1
            continue
        if word in table.with_arg:
            values.append(words[i + 1] if i + 1 < len(words) else "")
            i += 2
            continue
        if word in table.flags or word in table.optional_arg or (table.number_flags and word[1:].isdigit()):
            i += 1
            continue
        consumed, problem = _short_cluster(word, words[i + 1 : i + 2], table, cmd.name, values)
        if problem:
            problems.append(problem)
            return i, values, problems
        i += consumed
    return i, values, problems


def _short_cluster(
    word: str, following: tuple[str, ...], table: _Options, name: str, values: list[str]
) -> tuple[int, str | None]:
    """`-kn` / `-oL` / `-i{}`: each letter a flag until one takes an argument (the rest or the next word)."""
    if word.startswith("--"):
        return 1, f"unknown option `{word}` of `{name}`"
    sign = word[0]
    for j, letter in enumerate(word[1:], 1):
        opt = sign + letter
        rest = word[j + 1 :]
        if opt in table.with_arg:
            if rest:
                values.append(rest)
                return 1, None
            values.append(following[0] if following else "")
            return 2, None
        if opt in table.optional_arg:
            return 1, None
        if opt not in table.flags:
            return 1, f"unknown option `{opt}` of `{name}`"
    return 1, None


def unwrap(cmd: SimpleCommand, depth: int, counter: list[int] | None = None) -> list[SimpleCommand]:
    """`cmd` with wrappers stripped and indirect execution expanded, recursively.

    Each wrapper also stays in the result as a command of its own (`sudo`, `xargs`, …), so a rule
    about the wrapper itself still applies; its redirections stay with it.
    """
    counter = counter if counter is not None else [0]
    if depth > MAX_DEPTH:
        return [replace(cmd, problems=(*cmd.problems, f"commands nested more than {MAX_DEPTH} deep"))]
    if not cmd.words or cmd.dynamic[0]:
        return [cmd]
    name = cmd.name
    if cmd.words[0] in _RESERVED:
        return _unwrap_reserved(cmd, depth, counter)
    if name == "coproc":
        return _unwrap_coproc(cmd, depth, counter)
    if name in _WRAPPERS and not (name == "command" and any(w in ("-v", "-V") for w in cmd.words[1:])):
        return _unwrap_wrapper(cmd, depth, counter)
    if name in ("eval", "trap") or name in _SHELLS or name == "busybox":
        return _unwrap_indirect(cmd, depth, counter)
    if name == "find" and _FIND_EXEC.intersection(cmd.words):
        return _unwrap_find(cmd, depth, counter)
    return [cmd]


def _unwrap_reserved(cmd: SimpleCommand, depth: int, counter: list[int]) -> list[SimpleCommand]:
    """A reserved word where a command name should be: tree-sitter took a group or keyword after
    `time`, `!` or `coproc` for plain words (`time { rm x; }` -> `time`, `{ rm x`, `}`). The
    words after it are still a command bash runs: judge them as one, and ask."""
    own = replace(cmd, problems=(*cmd.problems, f"the reserved word `{cmd.words[0]}` is not verified here"))
    if len(cmd.words) == 1:
        return [own]
    inner = replace(cmd, words=cmd.words[1:], dynamic=cmd.dynamic[1:], redirects=())
    return [replace(own, wrapper=True), *unwrap(inner, depth + 1, counter)]


def _unwrap_coproc(cmd: SimpleCommand, depth: int, counter: list[int]) -> list[SimpleCommand]:
    """`coproc [NAME] CMD`: tree-sitter does not know coproc, so `coproc X { rm; }` arrives as
    the words `coproc X { rm` (and a stray `}`). The NAME and the group's opening word are
    dropped so the body's command is judged as itself; a body that is a group asks."""
    words, dynamic = list(cmd.words[1:]), list(cmd.dynamic[1:])
    problems: list[str] = []
    if len(words) > 1 and _NAME_RE.fullmatch(words[0]) and words[1] in ("{", "("):
        del words[0], dynamic[0]
    if words and words[0] in ("{", "("):
        del words[0], dynamic[0]
        problems.append("a `coproc` with a compound body is not verified")
    own = replace(cmd, problems=(*cmd.problems, *problems), wrapper=True)
    if not words:
        return [own]
    inner = replace(
        cmd, words=tuple(words), dynamic=tuple(dynamic), env=_child_env(cmd.env, counter), redirects=()
    )
    return [own, *unwrap(inner, depth + 1, counter)]


def _child_env(env: tuple[int, ...], counter: list[int]) -> tuple[int, ...]:
    """A new child process of `env`; `counter` is shared by a whole parse, so every id is fresh."""
    counter[0] += 1
    return (*env, counter[0])


def _unwrap_wrapper(cmd: SimpleCommand, depth: int, counter: list[int]) -> list[SimpleCommand]:
    name = cmd.name
    i, _values, problems = _take_options(cmd, 1, _WRAPPERS[name])
    assignments = list(cmd.assignments)
    if name == "env":
        while i < len(cmd.words) and "=" in cmd.words[i] and not cmd.words[i].startswith("="):
            assignments.append(cmd.words[i].split("=", 1)[0])
            i += 1
    if name == "timeout" and i < len(cmd.words):
        i += 1  # the duration
    # sudo and doas change who runs it: they need an allow of their own; the rest only carry
    own = replace(cmd, problems=(*cmd.problems, *problems), wrapper=name not in ("sudo", "doas"))
    if problems:
        return [own]
    if i >= len(cmd.words):
        if name == "xargs":  # bare xargs runs echo
            return [own, replace(cmd, words=("echo", "…"), dynamic=(False, True), redirects=())]
        return [own]
    env = cmd.env if name in _SAME_SHELL else _child_env(cmd.env, counter)
    if name == "watch" and "-x" not in cmd.words[1:i] and "--exec" not in cmd.words[1:i]:
        return [own, *_script(" ".join(cmd.words[i:]), cmd, env, depth, counter, any(cmd.dynamic[i:]))]
    inner = replace(
        cmd,
        words=cmd.words[i:],
        dynamic=cmd.dynamic[i:],
        assignments=tuple(assignments),
        env=env,
        redirects=(),
    )
    if name == "xargs":  # it appends what it reads from stdin
        inner = replace(inner, words=(*inner.words, "…"), dynamic=(*inner.dynamic, True))
    return [own, *unwrap(inner, depth + 1, counter)]


def _unwrap_indirect(cmd: SimpleCommand, depth: int, counter: list[int]) -> list[SimpleCommand]:
    name, args = cmd.name, cmd.words[1:]
    if name == "busybox":
        if not args:
            return [cmd]
        inner = replace(
            cmd, words=args, dynamic=cmd.dynamic[1:], env=_child_env(cmd.env, counter), redirects=()
        )
        return [replace(cmd, wrapper=True), *unwrap(inner, depth + 1, counter)]
    if name == "eval":
        return [
            replace(cmd, problems=(*cmd.problems, "eval runs text as a command")),
            *_script(" ".join(args), cmd, cmd.env, depth, counter, any(cmd.dynamic[1:])),
        ]
    if name == "trap":
        if not args or args[0] in ("-p", "-l", "-", "--") or args[0].startswith("-"):
            return [cmd]
        own = replace(cmd, problems=(*cmd.problems, "trap runs its text later"))
        return [own, *_script(args[0], cmd, cmd.env, depth, counter, cmd.dynamic[1])]
    return _unwrap_shell(cmd, depth, counter)


def _shell_options(cmd: SimpleCommand) -> tuple[int, str, list[str]]:
    """Skip a shell's options: (index of the first operand, `c` for `-c` / `s` for `-s` / "",
    problems)."""
    words, i, script, problems = cmd.words, 1, "", list[str]()
    while i < len(words) and words[i][:1] in "-+" and words[i] not in ("-", "+"):
        word = words[i]
        if cmd.dynamic[i]:
            return i, script, [f"option `{word}` of `{cmd.name}` is only known at run time"]
        if word == "--":
            return i + 1, script, problems
        if word in _SHELL_OPTS.with_arg:
            i += 2
            continue
        if word.startswith("--") and word not in _SHELL_OPTS.flags:
            return i, script, [f"unknown option `{word}` of `{cmd.name}`"]
        letters = word[1:] if not word.startswith("--") else ""
        for k, letter in enumerate(letters):
            opt = word[0] + letter
            if opt in ("-c", "-s"):
                script = script or opt[1]
            elif opt in _SHELL_OPTS.with_arg and k == len(letters) - 1:
                i += 1  # `-eo pipefail`: the option's argument is the next word
            elif opt not in _SHELL_OPTS.flags:
                problems.append(f"unknown option `{opt}` of `{cmd.name}`")
        i += 1
    return i, script, problems


def _unwrap_shell(cmd: SimpleCommand, depth: int, counter: list[int]) -> list[SimpleCommand]:
    """`bash [opts] -c SCRIPT`, `bash -lc`, `sh -o x -c`, `bash -c -- S`; a shell reading stdin asks."""
    i, script, problems = _shell_options(cmd)
    own = replace(cmd, problems=(*cmd.problems, *problems), wrapper=True)
    if problems:
        return [own]
    if script != "c":
        if i >= len(cmd.words) or script == "s":
            return [replace(own, problems=(*own.problems, f"`{cmd.name}` reads its script from stdin"))]
        return [replace(own, wrapper=False)]  # `bash script.sh`: the script file is the command
    if i >= len(cmd.words):
        return [replace(own, problems=(*own.problems, f"`{cmd.name} -c` has no script"))]
    return [own, *_script(cmd.words[i], cmd, _child_env(cmd.env, counter), depth, counter, cmd.dynamic[i])]


def _find_starts(cmd: SimpleCommand) -> tuple[str, ...]:
    """The START paths of `find [-H|-L|-P|-D X|-ON] START… EXPRESSION` (`.` when none is given),
    or `()` when one is only known at run time."""
    words, i = cmd.words, 1
    while i < len(words) and (words[i] in ("-H", "-L", "-P", "-D") or re.fullmatch(r"-O\d*", words[i])):
        i += 2 if words[i] == "-D" else 1
    starts = []
    while i < len(words) and not words[i].startswith(("-", "(", ")", "!", ",")):
        if cmd.dynamic[i]:
            return ()
        starts.append(words[i])
        i += 1
    return tuple(starts) or (".",)


def _unwrap_find(cmd: SimpleCommand, depth: int, counter: list[int]) -> list[SimpleCommand]:
    """For `find … -exec CMD … ;`: the find itself (minus the -exec parts) and each CMD; a CMD run
    by `-exec`/`-ok` knows the START paths its `{}` names files under (`each_found`)."""
    keep: list[int] = []
    inner: list[SimpleCommand] = []
    starts = _find_starts(cmd)
    words, i = cmd.words, 0
    while i < len(words):
        if words[i] in _FIND_EXEC and not cmd.dynamic[i]:
            end = i + 1
            while end < len(words) and words[end] not in (";", "+"):
                end += 1
            argv = words[i + 1 : end]
            # `{}` becomes each file found: a path only known at run time
            dyn = tuple(cmd.dynamic[k] or "{}" in words[k] for k in range(i + 1, end))
            env = _child_env(cmd.env, counter)
            found: tuple[str, ...] = starts
            if words[i] in ("-execdir", "-okdir"):
                # CMD runs in the folder of each file found: relative paths are only known then
                inner.append(SimpleCommand(("cd", "{}/.."), (), (False, True), (), env))
                found = ()
            command = SimpleCommand(argv, (), dyn, (), env, each_found=found)
            inner.extend(unwrap(command, depth + 1, counter))
            i = end + 1
        else:
            keep.append(i)
            i += 1
    own = replace(cmd, words=tuple(words[k] for k in keep), dynamic=tuple(cmd.dynamic[k] for k in keep))
    return [own, *inner]


def _script(
    text: str, cmd: SimpleCommand, env: tuple[int, ...], depth: int, counter: list[int], dynamic: bool
) -> list[SimpleCommand]:
    """The commands of a shell script given as text (`sh -c TEXT`), in environment `env`."""
    if dynamic:
        return [
            SimpleCommand((), env=env, problems=(f"the script `{cmd.name}` runs is only known at run time",))
        ]
    parsed = _parse(text, depth + 1, counter)
    return [
        replace(c, env=(*env, *c.env), conditional=c.conditional or cmd.conditional) for c in parsed.commands
    ]


def _parse(command: str, depth: int, counter: list[int]) -> ParsedCommand:
    if depth > MAX_DEPTH:
        reason = f"commands nested more than {MAX_DEPTH} deep"
        return ParsedCommand((SimpleCommand((), problems=(reason,)),), (reason,))
    src = command.encode("utf-8", "surrogateescape")
    walker = _Walker(src, depth, counter=counter)
    tree = _parser().parse(src)
    if _CONTROL_RE.search(command):
        walker.problem("control or invisible characters in the command")
    glued = re.search(r"[^\s\\]\\\n|\\\n[^\s]", _outside_single_quotes(command)) is not None
    if glued:
        walker.problem("a backslash-newline joins words in a way that is not verified")
    if tree.root_node.has_error:
        walker.problem("the command does not parse as bash")
    walker.sequence([tree.root_node], (), False)
    if glued:
        # tree-sitter splits `r\<newline>m` in two where bash joins it: also judge the joined
        # line, so a deny rule for `rm` still sees it (the problem above keeps it from allow)
        joined = _parse(command.replace("\\\n", ""), depth, counter)
        walker.out.extend(joined.commands)
        walker.problems.extend(joined.problems)
    return ParsedCommand(tuple(walker.out), tuple(dict.fromkeys(walker.problems)))


def _outside_single_quotes(command: str) -> str:
    return re.sub(r"'[^']*'", "''", command)


def parse_command(command: str) -> ParsedCommand:
    """Every simple command `command` would run, wrappers and indirect execution unwrapped.

    Never raises: what cannot be verified is listed in `problems` (and on the commands it
    concerns), and every command found is still returned so deny rules apply to all of them.
    A line too deeply nested to walk comes back with a `refusal`.
    """
    try:
        return _parse(command, 0, [0])
    except (_TooDeep, RecursionError) as exc:
        # nothing deeper was seen, so nothing about the line can be vouched for: refuse it
        reason = str(exc) if isinstance(exc, _TooDeep) else "the command nests too deeply to be checked"
        return ParsedCommand((SimpleCommand((), problems=(reason,)),), (reason,), reason)


def split_command(command: str) -> list[SimpleCommand]:
    """The commands of `parse_command`, for callers that cannot handle unverified syntax.

    Raises:
        ShellParseError: the line uses syntax that cannot be verified (the caller must ask).
    """
    parsed = parse_command(command)
    if parsed.problems:
        raise ShellParseError("; ".join(parsed.problems))
    return [c for c in parsed.commands if c.words or c.redirects or c.assignments]
