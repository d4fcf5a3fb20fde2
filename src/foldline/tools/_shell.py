"""A shell-aware splitter: a bash command line -> the simple commands it would run.

Used by the permission checker (R9.2), which must approve every command a line runs, not only the
first. The lexer honours single and double quotes, backslashes, comments and line continuations,
and splits on `;` `&&` `||` `|` `|&` `&` newlines and `( )`. Command substitutions (`$(…)`,
backticks) and process substitutions (`<(…)`, `>(…)`) are parsed recursively and their commands
returned too. `unwrap` then sees through wrappers (`timeout`, `nice`, `nohup`, `env`, `time`, ...)
and indirect execution (`sh -c`, `bash -lc`, `eval`, `xargs`, `watch`, `find -exec`).

Invariants:
- Heredoc bodies are data; the substitutions inside an unquoted-delimiter body are still parsed.
- Fail closed: anything this module does not fully understand (arithmetic expansion,
  `${…}` operators, `for`/`case`/function definitions, unbalanced quotes, nesting deeper than
  `MAX_DEPTH`) raises `ShellParseError`; it never guesses.
- A word built from an expansion (`$X`, `$(…)`) is flagged `dynamic`: its run-time value is
  unknown, so it can never be the literal a rule matched.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["MAX_DEPTH", "Redirect", "ShellParseError", "SimpleCommand", "split_command", "unwrap"]

MAX_DEPTH = 8
_SEPARATORS = frozenset({";", "&&", "||", "|", "|&", "&", "\n", "(", ")"})
_OPERATORS = ("&&", "||", "|&", ";;", ";", "|", "&", "(", ")")
_REDIRECT_RE = re.compile(r"(\d*)(<<<|<<|>>|>&|>\||<&|<>|&>>|&>|>|<)")
_WORD_END = frozenset(" \t\n;&|()<>")
_UNSUPPORTED_FIRST = frozenset({"for", "case", "select", "function", "coproc", "until", "while", "if"})
_RESERVED_LEAD = frozenset({"!", "{", "}", "then", "do", "else", "elif", "fi", "done", "esac"})
_PARAMETER = r"[A-Za-z_][A-Za-z0-9_]*|[0-9#?@*$!-]"
"""A variable name or a special parameter: what `$NAME` and a plain `${NAME}` may hold."""
_BRACED_PARAMETER_RE = re.compile(_PARAMETER)
_PARAMETER_RE = re.compile(rf"\$(?:{_PARAMETER})")
_ASSIGNMENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=.*", re.DOTALL)
_SAFE_WORD_RE = re.compile(r"[\w@%+=:,./~*?\[\]{}^!#-]+")
_SHELL_C_FLAG_RE = re.compile(r"-[a-zA-Z]*c[a-zA-Z]*")


class ShellParseError(ValueError):
    """The command uses shell syntax the splitter does not verify; callers must ask, never allow."""


@dataclass(frozen=True)
class Redirect:
    """One redirection: `op` (`>`, `>>`, `<`, `&>`, ...) and its target word."""

    op: str
    target: str
    dynamic: bool = False

    @property
    def writes(self) -> bool:
        """Whether it opens `target` for writing (fd duplications like `2>&1` do not)."""
        return self.op in (">", ">>", ">|", "&>", "&>>", "<>") or (
            self.op == ">&" and not self.target.isdigit()
        )


@dataclass(frozen=True)
class SimpleCommand:
    """One command the line would execute: its words (unquoted), redirections and expansion flags."""

    words: tuple[str, ...]
    redirects: tuple[Redirect, ...] = ()
    dynamic: tuple[bool, ...] = ()
    """Per word: built from an expansion, so its run-time value is unknown."""
    assignments: tuple[str, ...] = ()
    """Names assigned before the command (`FOO=1 cmd`) or through `env`."""

    @property
    def text(self) -> str:
        """The canonical text rules match against: words re-quoted and joined by single spaces."""
        return " ".join(_quote(w) for w in self.words)


def _quote(word: str) -> str:
    if word and _SAFE_WORD_RE.fullmatch(word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


@dataclass
class _Word:
    text: str = ""
    dynamic: bool = False
    quoted: bool = False


@dataclass
class _Lexer:
    """Turns a command line into words and operators; collects substitution bodies in `subs`."""

    src: str
    pos: int = 0
    subs: list[str] = field(default_factory=list)
    heredocs: list[tuple[str, bool, bool]] = field(default_factory=list)
    """Heredocs opened on the current line: (delimiter, delimiter was quoted, `<<-` strips tabs)."""

    def tokens(self) -> Iterator[tuple[str, _Word | str]]:
        while self.pos < len(self.src):
            ch = self.src[self.pos]
            if ch in " \t\r" or self.src.startswith("\\\n", self.pos):
                self.pos += 1 if ch != "\\" else 2
            elif ch == "#":
                end = self.src.find("\n", self.pos)
                self.pos = len(self.src) if end == -1 else end
            elif ch == "\n":
                self.pos += 1
                for body in self._skip_heredocs():
                    self._scan_expansions(body)
                yield "op", "\n"
            elif (m := _REDIRECT_RE.match(self.src, self.pos)) and (m.group(1) or ch in "<>&"):
                if self.src.startswith(("<(", ">("), self.pos) and not m.group(1):
                    yield "word", self._word()
                    continue
                self.pos = m.end()
                yield "redirect", m.group(2)
                if m.group(2) == "<<":
                    yield "word", self._heredoc_delimiter()
            elif (op := next((o for o in _OPERATORS if self.src.startswith(o, self.pos)), None)) is not None:
                if op == ";;":
                    raise ShellParseError("`case` blocks are not verified")
                self.pos += len(op)
                yield "op", op
            else:
                yield "word", self._word()
        if self.heredocs:
            raise ShellParseError(f"heredoc {self.heredocs[0][0]!r} is never closed")

    def _heredoc_delimiter(self) -> _Word:
        strip_tabs = self.src.startswith("-", self.pos)
        self.pos += strip_tabs
        while self.src.startswith((" ", "\t"), self.pos):
            self.pos += 1
        word = self._word()
        if not word.text or word.dynamic:
            raise ShellParseError("heredoc delimiter missing or not literal")
        self.heredocs.append((word.text, word.quoted, strip_tabs))
        return word

    def _skip_heredocs(self) -> list[str]:
        """Move past the bodies of the heredocs opened on the line just ended; return the bodies that
        undergo expansion (unquoted delimiter)."""
        expanded = []
        for delimiter, quoted, strip_tabs in self.heredocs:
            lines = []
            while True:
                if self.pos >= len(self.src):
                    raise ShellParseError(f"heredoc {delimiter!r} is never closed")
                end = self.src.find("\n", self.pos)
                end = len(self.src) if end == -1 else end
                line = self.src[self.pos : end]
                self.pos = end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            if not quoted:
                expanded.append("\n".join(lines))
        self.heredocs.clear()
        return expanded

    def _scan_expansions(self, text: str) -> None:
        """Collect the substitutions inside `text` (an unquoted-delimiter heredoc body)."""
        inner = _Lexer(text)
        while inner.pos < len(text):
            if text[inner.pos] == "\\":
                inner.pos += 2
            elif text[inner.pos] in "$`":
                inner._expansion(_Word())
            else:
                inner.pos += 1
        self.subs.extend(inner.subs)

    def _word(self) -> _Word:
        word = _Word()
        while self.pos < len(self.src) and self.src[self.pos] not in _WORD_END:
            self._word_piece(word)
        if self.src.startswith(("<(", ">("), self.pos):
            self.pos += 1
            word.text += "<(…)"
            word.dynamic = True
            self.subs.append(self._balanced())
            if self.pos < len(self.src) and self.src[self.pos] not in _WORD_END:
                self._word_piece(word)
        return word

    def _word_piece(self, word: _Word) -> None:
        ch = self.src[self.pos]
        if ch == "'":
            end = self.src.find("'", self.pos + 1)
            if end == -1:
                raise ShellParseError("unterminated single quote")
            word.text += self.src[self.pos + 1 : end]
            word.quoted = True
            self.pos = end + 1
        elif ch == '"':
            self._double_quoted(word)
        elif ch == "\\":
            word.text += self.src[self.pos + 1 : self.pos + 2]
            self.pos += 2
        elif ch in "$`":
            self._expansion(word)
        else:
            word.text += ch
            self.pos += 1

    def _double_quoted(self, word: _Word) -> None:
        self.pos += 1
        word.quoted = True
        while True:
            if self.pos >= len(self.src):
                raise ShellParseError("unterminated double quote")
            ch = self.src[self.pos]
            if ch == '"':
                self.pos += 1
                return
            if ch == "\\" and self.src[self.pos + 1 : self.pos + 2] in ('"', "\\", "$", "`", "\n"):
                word.text += self.src[self.pos + 1]
                self.pos += 2
            elif ch in "$`":
                self._expansion(word)
            else:
                word.text += ch
                self.pos += 1

    def _expansion(self, word: _Word) -> None:
        src, pos = self.src, self.pos
        if src.startswith("$((", pos):
            raise ShellParseError("arithmetic expansion is not verified")
        if src.startswith("$(", pos):
            self.pos += 1
            self.subs.append(self._balanced())
            word.text += "$(…)"
        elif src[pos] == "`":
            end = src.find("`", pos + 1)
            if end == -1:
                raise ShellParseError("unterminated backtick")
            self.subs.append(src[pos + 1 : end].replace("\\`", "`"))
            self.pos = end + 1
            word.text += "$(…)"
        elif src.startswith("${", pos):
            end = src.find("}", pos)
            body = src[pos + 2 : end]
            if end == -1 or not _BRACED_PARAMETER_RE.fullmatch(body):
                raise ShellParseError("parameter expansion operators are not verified")
            word.text += src[pos : end + 1]
            self.pos = end + 1
        elif m := _PARAMETER_RE.match(src, pos):
            word.text += m.group(0)
            self.pos = m.end()
        else:  # a lone `$` is literal
            word.text += "$"
            self.pos += 1
            return
        word.dynamic = True

    def _balanced(self) -> str:
        """The body of the `( … )` starting at `pos` (quotes and nesting honoured); moves past it."""
        start, depth, i, src = self.pos + 1, 0, self.pos, self.src
        while i < len(src):
            ch = src[i]
            if ch == "\\":
                i += 2
                continue
            if src.startswith("<<", i) and not src.startswith("<<<", i):
                # heredoc bodies may hold any quotes and parens: step over them whole
                self.pos = i + 2
                self._heredoc_delimiter()
                i = self.pos
                continue
            if ch == "\n" and self.heredocs:
                self.pos = i + 1
                self._skip_heredocs()
                i = self.pos
                continue
            if ch in "'\"":
                close = src.find(ch, i + 1)
                while ch == '"' and close != -1 and src[close - 1] == "\\":
                    close = src.find(ch, close + 1)
                if close == -1:
                    raise ShellParseError("unterminated quote inside a substitution")
                i = close
            elif ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    self.pos = i + 1
                    return src[start:i]
            i += 1
        raise ShellParseError("unbalanced parentheses in a substitution")


def _commands(src: str, depth: int) -> list[SimpleCommand]:
    if depth > MAX_DEPTH:
        raise ShellParseError(f"commands nested more than {MAX_DEPTH} deep")
    lexer = _Lexer(src)
    out: list[SimpleCommand] = []
    words: list[_Word] = []
    redirects: list[Redirect] = []
    tokens = lexer.tokens()
    for kind, value in tokens:
        if kind == "word":
            assert isinstance(value, _Word)
            words.append(value)
        elif kind == "redirect":
            assert isinstance(value, str)
            target = next(tokens, None)
            if target is None or target[0] != "word":
                raise ShellParseError(f"redirection {value!r} has no target")
            assert isinstance(target[1], _Word)
            redirects.append(Redirect(value, target[1].text, target[1].dynamic))
        else:
            out.extend(_finish(words, redirects))
            words, redirects = [], []
    out.extend(_finish(words, redirects))
    for body in lexer.subs:
        out.extend(_commands(body, depth + 1))
    return out


def _finish(words: list[_Word], redirects: list[Redirect]) -> list[SimpleCommand]:
    while words and not words[0].quoted and words[0].text in _RESERVED_LEAD:
        words = words[1:]
    if words and not words[0].quoted and words[0].text in _UNSUPPORTED_FIRST:
        raise ShellParseError(f"`{words[0].text}` blocks are not verified")
    assignments = []
    while words and _ASSIGNMENT_RE.fullmatch(words[0].text):
        assignments.append(words[0].text.split("=", 1)[0].rstrip("+"))
        words = words[1:]
    if not words and not redirects and not assignments:
        return []
    return [
        SimpleCommand(
            tuple(w.text for w in words),
            tuple(redirects),
            tuple(w.dynamic for w in words),
            tuple(assignments),
        )
    ]


def split_command(command: str) -> list[SimpleCommand]:
    """Every simple command `command` would run, wrappers and indirect execution unwrapped.

    Raises:
        ShellParseError: the line uses syntax that cannot be verified (the caller must ask).
    """
    result: list[SimpleCommand] = []
    for simple in _commands(command, 0):
        result.extend(unwrap(simple, 0))
    return result


# --- wrappers and indirect execution ----------------------------------------------------------

# wrapper -> options that take a separate argument
_WRAPPERS: dict[str, frozenset[str]] = {
    "nohup": frozenset(),
    "time": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "command": frozenset(),
    "setsid": frozenset(),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "xargs": frozenset({"-I", "-i", "-n", "-P", "-d", "-L", "-l", "-s", "-E", "-e", "-a", "--arg-file"}),
}
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "fish"})


def _skip_options(words: tuple[str, ...], with_arg: frozenset[str]) -> int:
    i = 1
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return i + 1
        i += 2 if words[i] in with_arg else 1
    return i


def _strip_wrapper(cmd: SimpleCommand) -> SimpleCommand | None:
    """`cmd` without its leading wrapper (and its options), or `None` if it has none."""
    name = os.path.basename(cmd.words[0])
    if name not in _WRAPPERS or (name == "command" and any(w in ("-v", "-V") for w in cmd.words[1:2])):
        return None
    i = _skip_options(cmd.words, _WRAPPERS[name])
    assignments = list(cmd.assignments)
    if name == "env":
        while i < len(cmd.words) and "=" in cmd.words[i]:
            assignments.append(cmd.words[i].split("=", 1)[0])
            i += 1
    if name == "timeout" and i < len(cmd.words):
        i += 1  # the duration
    if name == "xargs" and i >= len(cmd.words):
        return SimpleCommand(("echo",), cmd.redirects, (False,), tuple(assignments))
    if i >= len(cmd.words):
        return None
    return SimpleCommand(cmd.words[i:], cmd.redirects, cmd.dynamic[i:], tuple(assignments))


def _inner_script(cmd: SimpleCommand) -> str | None:
    """The shell text `cmd` executes indirectly (`sh -c TEXT`, `eval ARGS`, `watch ARGS`), if any."""
    name = os.path.basename(cmd.words[0])
    if name == "eval":
        return " ".join(cmd.words[1:])
    if name == "watch":
        i = _skip_options(cmd.words, frozenset({"-n", "-d", "--interval", "-x"}))
        return " ".join(cmd.words[i:])
    if name in _SHELLS:
        for i, word in enumerate(cmd.words[1:], 1):
            if _SHELL_C_FLAG_RE.fullmatch(word):
                return cmd.words[i + 1] if i + 1 < len(cmd.words) else ""
            if not word.startswith(("-", "+")):
                return None
    return None


def _find_exec(cmd: SimpleCommand) -> list[SimpleCommand] | None:
    """For `find … -exec CMD … ;`: the find itself (minus the -exec parts) and each CMD."""
    if os.path.basename(cmd.words[0]) != "find":
        return None
    keep: list[int] = []
    inner: list[SimpleCommand] = []
    i = 0
    while i < len(cmd.words):
        if cmd.words[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(cmd.words) and cmd.words[end] not in (";", "+"):
                end += 1
            inner.append(SimpleCommand(cmd.words[i + 1 : end], (), cmd.dynamic[i + 1 : end]))
            i = end + 1
        else:
            keep.append(i)
            i += 1
    if not inner:
        return None
    own = SimpleCommand(
        tuple(cmd.words[k] for k in keep), cmd.redirects, tuple(cmd.dynamic[k] for k in keep), cmd.assignments
    )
    return [own, *inner]


def unwrap(cmd: SimpleCommand, depth: int) -> list[SimpleCommand]:
    """`cmd` with wrappers stripped and indirect execution expanded, recursively."""
    if depth > MAX_DEPTH:
        raise ShellParseError(f"commands nested more than {MAX_DEPTH} deep")
    if not cmd.words:
        return [cmd]
    if any(cmd.dynamic[:1]):
        return [cmd]
    stripped = _strip_wrapper(cmd)
    if stripped is not None:
        return unwrap(stripped, depth + 1)
    script = _inner_script(cmd)
    if script is not None:
        inner = [c for simple in _commands(script, depth + 1) for c in unwrap(simple, depth + 1)]
        # the wrapper's own redirections still apply
        return [*inner, SimpleCommand((), cmd.redirects, (), cmd.assignments)] if cmd.redirects else inner
    found = _find_exec(cmd)
    if found is not None:
        return [found[0], *(c for inner_cmd in found[1:] for c in unwrap(inner_cmd, depth + 1))]
    return [cmd]
