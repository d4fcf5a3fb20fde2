"""What one simple command does to files and processes: which paths it writes, which it reads, and
whether it runs code the checker cannot see (R9.2).

The permission checker asks `effects(cmd)` about every command `_shell.parse_command` found. Two
kinds of knowledge live here:

- A short allowlist of read-only commands with vetted flags (`READ_ONLY`), as Codex does: a
  command is `read_only` only when its name is listed *and* every flag that could write or run
  something is absent. Anything not listed is not read-only; the checker then needs a rule or the
  user, so an unknown command can never be allowed by default.
- Write and execution semantics of common commands that allow rules may cover (`cp`, `mv`, `ln`,
  `touch`, `sed -i`, sed `w`/`e`, awk `system()`/`print >`, `sort -o`, `find -delete`/`-fprint`,
  `git --output`/`config`/`-c`, `rg --pre`, `tar --to-command`, interpreters' inline code, ...),
  so a rule that allows `sed` does not allow writing `.git/config` through it.

Invariants:
- Path words are returned as written (relative to the command's directory); the caller resolves
  them with `realpath`, so a file that does not exist yet is still checked.
- When the semantics are uncertain the answer errs towards "writes" or "runs", never towards
  "read-only".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from foldline.tools._shell import SimpleCommand

__all__ = ["NO_FILE_OPERANDS", "READ_ONLY", "Effects", "effects"]


@dataclass(frozen=True)
class Effects:
    """The file and process effects of one simple command."""

    writes: tuple[str, ...] = ()
    """Paths it creates, changes or removes (directories included)."""
    reads: tuple[str, ...] = ()
    """Words that may name files it reads (operands and `--opt=FILE` values)."""
    recursive: tuple[str, ...] = ()
    """Directories it reads everything under (`rg`, `grep -r`, `cp -r`)."""
    skips_hidden: bool = False
    """Its walk of `recursive` skips dot files and dot directories (`rg` without `--hidden`)."""
    runs: tuple[str, ...] = ()
    """Why it runs code the checker cannot see (a sed `e` command, `git -c`, `python -c`, ...)."""
    read_only: bool = False
    """On the vetted allowlist: it reads and prints, nothing else."""


READ_ONLY = frozenset(
    {"cat", "head", "tail", "wc", "nl", "pwd", "echo", "printf", "true", "false", "which", "whoami",
     "id", "uname", "date", "basename", "dirname", "realpath", "readlink", "stat", "file", "du", "df",
     "ls", "tree", "grep", "egrep", "fgrep", "rg", "cut", "tr", "uniq", "sort", "diff", "cmp", "comm",
     "printenv", "test", "[", "seq", "column", "type", "hostname", "find", "git", "sed", "awk", "jq",
     "cd", "pushd", "popd", "export", "unset", "local", "readonly", "command", "xxd", "od", "hexdump",
     "md5sum", "sha1sum", "sha256sum", "sleep", "tac", "rev", "fold", "paste", "join", "expand",
     "env", "exec", "set"}
)  # fmt: skip
"""Commands that only read and print, once the flags each handler vets are absent."""

_INTERPRETERS: dict[str, frozenset[str]] = {
    "python": frozenset({"-c"}), "python3": frozenset({"-c"}),
    "node": frozenset({"-e", "-p", "--eval", "--print"}),
    "perl": frozenset({"-e", "-E", "-i"}), "ruby": frozenset({"-e"}), "php": frozenset({"-r"}),
    "lua": frozenset({"-e"}), "deno": frozenset({"eval"}), "bun": frozenset({"-e", "--eval"}),
    "Rscript": frozenset({"-e"}), "osascript": frozenset({"-e"}),
}  # fmt: skip
_SHELL_ESCAPES = frozenset({"less", "more", "man", "vi", "vim", "nvim", "nano", "emacs", "ed", "ex", "view"})
_WRITE_ALL = frozenset(
    {"touch", "mkdir", "rm", "rmdir", "truncate", "shred", "unlink", "mkfifo", "mknod", "tee"}
)
_WRITE_AFTER_FIRST = frozenset({"chmod", "chown", "chgrp"})
NO_FILE_OPERANDS = frozenset(
    {"echo", "printf", "pwd", "true", "false", "which", "whoami", "id", "uname", "date", "basename",
     "dirname", "seq", "sleep", "type", "hostname", "export", "unset", "local", "readonly", "cd",
     "pushd", "popd", "command", "printenv", "set", "exec", "test", "["}
)  # fmt: skip
"""Their operands are strings, not files they read."""
_RECURSIVE_FLAGS = frozenset({"-r", "-R", "--recursive", "-a", "--archive"})


def _operands(words: Iterable[str]) -> list[str]:
    """Words that are not options (everything after `--` is an operand)."""
    out, ended = [], False
    for word in words:
        if ended or word == "-" or not word.startswith("-"):
            out.append(word)
        elif word == "--":
            ended = True
    return out


def _option_values(words: Iterable[str], names: Iterable[str]) -> list[str]:
    """Values of the given options, as `--opt=V`, `--opt V`, `-oV` or `-o V`."""
    names = tuple(names)
    values, items = [], list(words)
    for i, word in enumerate(items):
        for name in names:
            if word == name and i + 1 < len(items):
                values.append(items[i + 1])
            elif name.startswith("--") and word.startswith(name + "="):
                values.append(word[len(name) + 1 :])
            elif len(name) == 2 and not word.startswith("--") and word.startswith(name) and len(word) > 2:
                values.append(word[2:])
    return values


def _has_flag(words: Iterable[str], flags: Iterable[str]) -> bool:
    """Whether any flag is present, alone, as `--flag=…`, or inside a short cluster (`-rf`)."""
    flags = frozenset(flags)
    for word in words:
        if word == "--":
            return False
        if word in flags or word.split("=", 1)[0] in flags:
            return True
        if word.startswith("-") and not word.startswith("--"):
            if any(f"-{letter}" in flags for letter in word[1:]):
                return True
    return False


_VARIABLE_BUILTINS = frozenset(
    {"unset", "export", "readonly", "local", "declare", "typeset", "test", "[", "read", "wait", "mapfile",
     "readarray", "printf"}
)  # fmt: skip
"""Builtins that take variable names; `name[expr]` there evaluates `expr`, `$(…)` included."""


def _subscripted(cmd: SimpleCommand) -> bool:
    if cmd.name in ("test", "[", "printf", "wait") and not {"-v", "-p"}.intersection(cmd.words[1:]):
        return False
    return any("[" in w for w in cmd.words[1:])


def _reads(cmd: SimpleCommand) -> tuple[str, ...]:
    args = cmd.words[1:]
    values = [w.split("=", 1)[1] for w in args if w.startswith("-") and "=" in w]
    values += [w.split("=", 1)[1] for w in args if not w.startswith("-") and "=" in w]
    return tuple(w for w in (*_operands(args), *values) if w)


def effects(cmd: SimpleCommand) -> Effects:
    """The effects of `cmd` (see the module docstring); an unknown command has none known."""
    if not cmd.words:
        return Effects(read_only=True)
    name = cmd.name
    handler = _HANDLERS.get(name)
    # `/tmp/evil/git` is not git: only a bare name found on PATH is the listed command
    listed = name in READ_ONLY and "/" not in cmd.words[0]
    base = Effects(reads=() if name in NO_FILE_OPERANDS else _reads(cmd), read_only=listed)
    if name in _VARIABLE_BUILTINS and _subscripted(cmd):
        return _with(base, runs=("an array subscript in a variable name is evaluated as arithmetic",))
    if handler is not None:
        out = handler(cmd, base)
        return replace(out, read_only=out.read_only and listed)
    if name in _INTERPRETERS and _has_flag(cmd.words[1:], _INTERPRETERS[name]):
        return _with(base, runs=(f"`{name}` runs inline code",))
    if name in _INTERPRETERS and (len(cmd.words) == 1 or "-" in cmd.words[1:]):
        return _with(base, runs=(f"`{name}` runs code from stdin",))
    if name in _SHELL_ESCAPES:
        return _with(base, runs=(f"`{name}` can run shell commands",))
    if name in _WRITE_ALL:
        return _with(base, writes=tuple(_operands(cmd.words[1:])))
    if name in _WRITE_AFTER_FIRST:
        return _with(base, writes=tuple(_operands(cmd.words[1:])[1:]))
    if name in ("source", "."):
        return _with(base, runs=("it runs a script inside this shell",))
    return base


def _with(
    base: Effects,
    *,
    writes: tuple[str, ...] = (),
    reads: tuple[str, ...] = (),
    recursive: tuple[str, ...] = (),
    runs: tuple[str, ...] = (),
    read_only: bool | None = None,
) -> Effects:
    out = replace(
        base,
        writes=(*base.writes, *writes),
        reads=(*base.reads, *reads),
        recursive=(*base.recursive, *recursive),
        runs=(*base.runs, *runs),
    )
    listed = base.read_only if read_only is None else read_only
    return replace(out, read_only=listed and not out.writes and not out.runs)


# --- per-command handlers -----------------------------------------------------------------------


def _copy(cmd: SimpleCommand, base: Effects) -> Effects:
    """cp / mv / install / ln: the destination (last operand or `-t DIR`) is written; mv also
    removes its sources."""
    args = cmd.words[1:]
    targets = _option_values(args, ("-t", "--target-directory"))
    operands = [w for w in _operands(args) if w not in targets]
    if not targets and operands:
        targets = [operands[-1] if len(operands) > 1 or cmd.name != "ln" else "."]
        operands = operands[:-1] if len(operands) > 1 else operands
    writes = [*targets, *(operands if cmd.name == "mv" else [])]
    recursive = tuple(operands) if _has_flag(args, _RECURSIVE_FLAGS) and cmd.name == "cp" else ()
    return _with(base, writes=tuple(writes), recursive=recursive)


def _dd(cmd: SimpleCommand, base: Effects) -> Effects:
    writes = tuple(w[3:] for w in cmd.words[1:] if w.startswith("of="))
    return _with(base, writes=writes)


def _sort(cmd: SimpleCommand, base: Effects) -> Effects:
    args = cmd.words[1:]
    runs = ("`sort --compress-program` runs a program",) if _has_flag(args, ("--compress-program",)) else ()
    return _with(base, writes=tuple(_option_values(args, ("-o", "--output"))), runs=runs)


def _uniq(cmd: SimpleCommand, base: Effects) -> Effects:
    operands = _operands(cmd.words[1:])
    return _with(base, writes=tuple(operands[1:2]))


def _tree(cmd: SimpleCommand, base: Effects) -> Effects:
    return _with(base, writes=tuple(_option_values(cmd.words[1:], ("-o",))))


def _date(cmd: SimpleCommand, base: Effects) -> Effects:
    if _has_flag(cmd.words[1:], ("-s", "--set")):
        return _with(base, runs=("`date --set` changes the clock",))
    return base


def _printf(cmd: SimpleCommand, base: Effects) -> Effects:
    if "-v" in cmd.words[1:2]:
        return _with(base, runs=("`printf -v` assigns a variable and evaluates subscripts",))
    return base


def _set(cmd: SimpleCommand, base: Effects) -> Effects:
    safe = {"-e", "-u", "-x", "-o", "pipefail", "+e", "+x", "-eu", "-ex", "-eux", "-euo", "-eo", "+u"}
    if all(w in safe for w in cmd.words[1:]):
        return base
    return _with(base, runs=("`set` with these options changes how later commands run",))


_FIND_WRITES = ("-fprint", "-fprint0", "-fprintf", "-fls")


def _find(cmd: SimpleCommand, base: Effects) -> Effects:
    args = cmd.words[1:]
    writes = [args[i + 1] for i, w in enumerate(args[:-1]) if w in _FIND_WRITES]
    starts = [w for w in args if not w.startswith(("-", "(", ")", "!"))][:1] or ["."]
    if "-delete" in args:
        writes += starts
    return _with(base, writes=tuple(writes))


def _rg(cmd: SimpleCommand, base: Effects) -> Effects:
    args = cmd.words[1:]
    runs = []
    if _has_flag(args, ("--pre", "--hostname-bin", "-z", "--search-zip")):
        runs.append("`rg --pre`/`--search-zip`/`--hostname-bin` runs other programs")
    with_values = {"-e", "-f", "-g", "-t", "-T", "--glob", "--type", "--regexp", "-m", "-A", "-B", "-C", "-j"}
    operands, skip = [], False
    for word in args:
        if skip:
            skip = False
        elif word in with_values:
            skip = True
        elif not word.startswith("-"):
            operands.append(word)
    paths = operands[1:] if not ("-e" in args or "-f" in args or "--files" in args) else operands
    # rg skips dot entries unless told otherwise (`--hidden`, `-.`, `-uu` and more)
    unrestricted = sum(w.count("u") for w in args if re.fullmatch(r"-u+", w))
    hidden = _has_flag(args, ("--hidden", "-.")) or unrestricted >= 2
    out = _with(base, runs=tuple(runs), recursive=tuple(paths or ["."]))
    return replace(out, skips_hidden=not hidden)


def _grep(cmd: SimpleCommand, base: Effects) -> Effects:
    args = cmd.words[1:]
    if not _has_flag(args, ("-r", "-R", "--recursive", "--dereference-recursive")):
        return base
    operands = _operands(args)
    paths = operands[1:] if not _has_flag(args, ("-e", "-f", "--regexp", "--file")) else operands
    return _with(base, recursive=tuple(paths or ["."]))


_SED_ADDRESS = r"(?:\d+|\$|/(?:[^/\\]|\\.)*/)"
_SED_SIMPLE_RE = re.compile(rf"\s*(?:{_SED_ADDRESS}(?:\s*,\s*{_SED_ADDRESS})?)?\s*!?\s*[pdqQ=nNgGhHxl]?\s*")


def _sed_substitution(part: str) -> bool:
    """Whether `part` is `[addr]s<d>re<d>repl<d>flags` with only harmless flags (no `w`, no `e`)."""
    m = re.match(rf"\s*(?:{_SED_ADDRESS}(?:\s*,\s*{_SED_ADDRESS})?)?\s*s(.)", part)
    if m is None or m.group(1) in "\\\n ":
        return False
    delim, i, fields = m.group(1), m.end(), 0
    while i < len(part) and fields < 2:
        if part[i] == "\\":
            i += 2
            continue
        fields += part[i] == delim
        i += 1
    return fields == 2 and re.fullmatch(r"[gpiIM0-9]*\s*", part[i:]) is not None


def _sed_script_vetted(script: str) -> bool:
    # split on `;`/newlines outside an s command is ambiguous; each piece must be plainly harmless
    pieces = re.split(r"[;\n]", script)
    return _sed_substitution(script) or all(
        _SED_SIMPLE_RE.fullmatch(p) is not None or _sed_substitution(p) for p in pieces
    )


def _sed(cmd: SimpleCommand, base: Effects) -> Effects:
    args = cmd.words[1:]
    scripts = _option_values(args, ("-e", "--expression"))
    operands = [w for w in _operands(args) if w not in scripts]
    if not scripts and operands:
        scripts, operands = [operands[0]], operands[1:]
    runs: list[str] = []
    if _option_values(args, ("-f", "--file")):
        runs.append("`sed -f` runs a script file that is not verified")
    if not all(_sed_script_vetted(s) for s in scripts):
        runs.append("the sed script may write files or run commands (`w`, `e`, `r`, ...)")
    in_place = any(
        w.startswith(("-i", "--in-place")) or (w.startswith("-") and "i" in w[1:] and not w.startswith("--"))
        for w in args
        if w not in scripts
    )
    writes = tuple(operands) if in_place else ()
    return _with(base, writes=writes, runs=tuple(runs), reads=tuple(operands))


def _awk(cmd: SimpleCommand, base: Effects) -> Effects:
    args = cmd.words[1:]
    if _option_values(args, ("-f", "--file")) or "-E" in args:
        return _with(base, runs=("`awk -f` runs a program file that is not verified",))
    programs = [w for w in _operands(args) if not re.fullmatch(r"[A-Za-z_]\w*=.*", w)][:1]
    risky = re.compile(r"system|getline|\||>|@|print\w*\s*>|close|fflush|ENVIRON|PROCINFO")
    if not programs or any(risky.search(p) for p in programs):
        return _with(base, runs=("the awk program may write files or run commands",))
    return base


_GIT_READ_ONLY = frozenset(
    {"status", "log", "diff", "show", "rev-parse", "ls-files", "blame", "describe", "shortlog",
     "cat-file", "ls-tree", "merge-base", "rev-list", "grep", "reflog", "whatchanged", "diff-tree"}
)  # fmt: skip
_GIT_GLOBAL_WITH_ARG = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})


def _git(cmd: SimpleCommand, base: Effects) -> Effects:
    args = list(cmd.words[1:])
    runs: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        opt = args[i].split("=", 1)[0]
        if opt in ("-c", "--config-env", "--exec-path", "--git-dir", "--work-tree", "-C"):
            runs.append(f"`git {opt}` can point git at other config, hooks or programs")
        i += 2 if args[i] in _GIT_GLOBAL_WITH_ARG else 1
    sub, rest = (args[i], args[i + 1 :]) if i < len(args) else ("", [])
    writes = list(
        _option_values(rest, ("--output", "-o") if sub in ("diff", "log", "show", "format-patch") else ())
    )
    if sub in ("diff", "log", "show") and _has_flag(rest, ("--ext-diff", "--textconv")):
        runs.append("`--ext-diff`/`--textconv` run configured programs")
    if sub == "config" and not _git_config_reads(rest):
        writes.append(_git_config_file(rest))
    read_only = not runs and not writes and (sub in _GIT_READ_ONLY or _git_listing(sub, rest))
    return _with(base, writes=tuple(writes), runs=tuple(runs), read_only=read_only)


def _git_listing(sub: str, rest: list[str]) -> bool:
    """`git branch`, `git tag`, `git remote`, `git stash list`: only their listing forms are read-only."""
    listing = {"-a", "-r", "-v", "-vv", "--list", "-l", "--show-current", "--all", "--remotes", "--verbose"}
    if sub in ("branch", "tag", "remote"):
        return all(w in listing for w in rest)
    if sub == "stash":
        return rest[:1] in (["list"], ["show"])
    return sub in ("config",) and _git_config_reads(rest)


def _git_config_reads(rest: list[str]) -> bool:
    return any(w in ("--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list") for w in rest)


def _git_config_file(rest: list[str]) -> str:
    files = _option_values(rest, ("--file", "-f"))
    if files:
        return files[0]
    if "--global" in rest:
        return "~/.gitconfig"
    if "--system" in rest:
        return "/etc/gitconfig"
    return ".git/config"


_TAR_RUNS = ("--to-command", "--use-compress-program", "-I", "--checkpoint-action", "--rsh-command",
             "--info-script", "-F", "--new-volume-script", "--rmt-command")  # fmt: skip
_TAR_WITH_ARG = frozenset("fCbFIHKLNTVgX")
"""Short tar options that take an argument (`-f FILE`, `-C DIR`, `-T LIST`, ...)."""


def _tar_words(args: tuple[str, ...]) -> tuple[str, dict[str, list[str]], list[str]]:
    """tar's short letters, their arguments by letter, and its operands; the first word may be an
    old-style cluster without a dash (`tar cf a.tar .`), whose arguments follow in letter order."""
    letters, values, operands = "", dict[str, list[str]](), list[str]()
    rest = list(args)
    if rest and not rest[0].startswith("-"):
        cluster = rest.pop(0)
        letters += cluster
        for letter in cluster:
            if letter in _TAR_WITH_ARG and rest:
                values.setdefault(letter, []).append(rest.pop(0))
    while rest:
        word = rest.pop(0)
        if word.startswith("--") or word == "-":
            if word != "-":
                continue
        if word.startswith("-") and word != "-":
            for j, letter in enumerate(word[1:], 1):
                letters += letter
                if letter in _TAR_WITH_ARG:
                    attached = word[j + 1 :]
                    values.setdefault(letter, []).append(attached or (rest.pop(0) if rest else ""))
                    break
        else:
            operands.append(word)
    return letters, values, operands


def _tar(cmd: SimpleCommand, base: Effects) -> Effects:
    args = cmd.words[1:]
    runs = ("tar can run programs (`--to-command`, `-I`, ...)",) if _has_flag(args, _TAR_RUNS) else ()
    letters, values, operands = _tar_words(args)
    files = [*values.get("f", []), *_option_values(args, ("--file",))]
    writes: list[str] = []
    recursive: list[str] = []
    if "x" in letters or _has_flag(args, ("--extract", "--get")):
        # an archive can hold any path: everything under the target directory may change
        writes += [*values.get("C", []), *_option_values(args, ("--directory",))] or ["."]
    if any(m in letters for m in "cru") or _has_flag(args, ("--create", "--append", "--update")):
        writes += files or ["."]
        recursive += operands
    return _with(base, writes=tuple(writes), runs=runs, recursive=tuple(recursive), read_only=False)


def _fetch(cmd: SimpleCommand, base: Effects) -> Effects:
    """curl -o / wget -O: the download's file (or, without a name, the current directory)."""
    args = cmd.words[1:]
    names = (
        ("-o", "--output") if cmd.name == "curl" else ("-O", "--output-document", "-P", "--directory-prefix")
    )
    writes = _option_values(args, names)
    if (cmd.name == "curl" and _has_flag(args, ("-O", "--remote-name", "-J"))) or (
        cmd.name == "wget" and not writes
    ):
        writes.append(".")
    return _with(base, writes=tuple(writes))


def _shell_builtin_alias(cmd: SimpleCommand, base: Effects) -> Effects:
    return _with(base, runs=(f"`{cmd.name}` changes what later commands mean",))


_HANDLERS: dict[str, Callable[[SimpleCommand, Effects], Effects]] = {
    "cp": _copy, "mv": _copy, "install": _copy, "ln": _copy, "dd": _dd, "sort": _sort, "uniq": _uniq,
    "tree": _tree, "date": _date, "printf": _printf, "set": _set, "find": _find, "rg": _rg,
    "grep": _grep, "egrep": _grep, "fgrep": _grep, "sed": _sed, "gsed": _sed, "awk": _awk,
    "gawk": _awk, "mawk": _awk, "nawk": _awk, "git": _git, "tar": _tar, "curl": _fetch, "wget": _fetch,
    "alias": _shell_builtin_alias, "shopt": _shell_builtin_alias, "enable": _shell_builtin_alias,
    "hash": _shell_builtin_alias,
}  # fmt: skip
