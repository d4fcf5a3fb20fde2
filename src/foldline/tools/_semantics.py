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
  `git --output`/`config`/`-c`, `rg --pre`, `tar --to-command`, interpreters' inline code,
  `xxd IN OUT`, `date`/`hostname` setters, `jq -L`, `curl -o`, `wget -r`, ...), so a rule that
  allows `sed` does not allow writing `.git/config` through it.
- What git prints from its object store (`REV:path` words, and whether a subcommand prints file
  contents at all), for the read-deny rules.

Options are read the way the tool reads them (`_getopt`): GNU long options by unambiguous
prefix (`sort --o=F` is `--output=F`, an ambiguous prefix counts as every option it could be),
short options bundled (`sort -mo F`), attached values (`-oF`), `--` ending options. Each table
lists the options that write, run or read, and those taking a value, never a list of safe
spellings: a spelling the table does not know cannot resolve to a dangerous option it lists.

Invariants:
- Path words are returned as written (relative to the command's directory); the caller resolves
  them with `realpath`, so a file that does not exist yet is still checked.
- When the semantics are uncertain the answer errs towards "writes" or "runs", never towards
  "read-only".
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from foldline.tools._shell import SimpleCommand

__all__ = ["NO_FILE_OPERANDS", "READ_ONLY", "Effects", "effects", "modeled"]


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
    tree_writes: tuple[str, ...] = ()
    """Directories under which it may create any name (`tar -x`): protected names included."""
    repo_reads: tuple[str, ...] = ()
    """Paths git prints from its object store (`HEAD:path`): repository-relative, or relative to
    the command's directory when they start with `./` or `../`."""
    repo_scope: tuple[str, ...] | None = None
    """When git prints file contents from any revision (`show`, `log -p`, `grep`, `cat-file`):
    the pathspecs after `--` that limit it, `()` for the whole repository; None when it prints
    no file contents."""


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


@dataclass(frozen=True)
class _Spec:
    """A getopt_long table: short letters taking a value (`short_arg`), short letters whose value
    is the rest of the word if any (`short_optional`, `sed -i.bak`), and long names mapped to
    (key, value kind: 0 none, 1 required, 2 optional `=value`). A short letter's key is itself."""

    short_arg: str
    short_optional: str
    long: Mapping[str, tuple[str, int]]


def _spec(short_arg: str = "", short_optional: str = "", long: str = "") -> _Spec:
    """`long` entries are `name`, `name=` (required value) or `name?` (optional), each with an
    optional `:key` naming the short letter it is the same as (`output=:o`)."""
    table: dict[str, tuple[str, int]] = {}
    for entry in long.split():
        entry, _, key = entry.partition(":")
        kind = {"=": 1, "?": 2}.get(entry[-1], 0)
        name = entry.rstrip("=?")
        table[name] = (key or name, kind)
    return _Spec(short_arg, short_optional, table)


@dataclass
class _Opts:
    """Options found (key -> their values, `""` for a flag), operands, unknown long options."""

    found: dict[str, list[str]]
    operands: list[str]
    unknown: list[str]

    def has(self, *keys: str) -> bool:
        return any(k in self.found for k in keys)

    def values(self, *keys: str) -> list[str]:
        return [v for k in keys for v in self.found.get(k, [])]


def _resolve_long(name: str, spec: _Spec) -> list[tuple[str, int]]:
    """getopt_long's matching: an exact name wins, else every name it is a prefix of (one key:
    that option; several: getopt refuses it as ambiguous, and counting them all errs safe)."""
    if name in spec.long:
        return [spec.long[name]]
    return list(dict.fromkeys(v for n, v in spec.long.items() if n.startswith(name)))


def _getopt(args: Iterable[str], spec: _Spec) -> _Opts:
    """Split `args` as GNU getopt_long does, operands permuted (options may follow them)."""
    items, found, operands, unknown = list(args), dict[str, list[str]](), list[str](), list[str]()
    i = 0
    while i < len(items):
        word = items[i]
        i += 1
        if word == "--":
            operands += items[i:]
            break
        if word.startswith("--"):
            name, eq, value = word[2:].partition("=")
            matches = _resolve_long(name, spec)
            if not matches:
                unknown.append(word)
                continue
            if not eq and len(matches) == 1 and matches[0][1] == 1 and i < len(items):
                value = items[i]
                i += 1
            for key, _kind in matches:
                found.setdefault(key, []).append(value)
        elif word.startswith("-") and word != "-":
            for j, letter in enumerate(word[1:], 1):
                rest = word[j + 1 :]
                if letter in spec.short_arg:
                    if not rest and i < len(items):
                        rest = items[i]
                        i += 1
                    found.setdefault(letter, []).append(rest)
                    break
                found.setdefault(letter, []).append(rest if letter in spec.short_optional else "")
                if letter in spec.short_optional:
                    break
        else:
            operands.append(word)
    return _Opts(found, operands, unknown)


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
    only_reads: tuple[str, ...] | None = None,
) -> Effects:
    """`base` plus these effects; `only_reads` replaces its guessed reads with a model's exact
    ones (a sed script or a grep pattern is not a file)."""
    out = replace(
        base,
        writes=(*base.writes, *writes),
        reads=(*(base.reads if only_reads is None else only_reads), *reads),
        recursive=(*base.recursive, *recursive),
        runs=(*base.runs, *runs),
    )
    listed = base.read_only if read_only is None else read_only
    return replace(out, read_only=listed and not out.writes and not out.runs)


# --- per-command handlers -----------------------------------------------------------------------


_COPY_COMMON = "target-directory=:t suffix=:S backup? update? context? no-target-directory:T "
_COPY: dict[str, _Spec] = {
    "cp": _spec("tS", long=_COPY_COMMON + "recursive:r archive:a sparse= reflink? preserve? no-preserve="),
    "mv": _spec("tS", long=_COPY_COMMON),
    "ln": _spec("tS", long=_COPY_COMMON + "symbolic:s"),
    "install": _spec(
        "tSmog", long=_COPY_COMMON + "mode=:m owner=:o group=:g strip-program= strip:s directory:d"
    ),
}


def _copy(cmd: SimpleCommand, base: Effects) -> Effects:
    """cp / mv / install / ln: the destination (last operand or `-t DIR`, `--targ=DIR`) is
    written, and so is DEST/NAME for each source NAME (a directory destination keeps the name:
    `cp -r x/.git .` writes `./.git`); mv also removes its sources. A recursive copy of `x/.`
    may create any name under the destination."""
    opts = _getopt(cmd.words[1:], _COPY[cmd.name])
    targets, operands = opts.values("t"), list(opts.operands)
    if not targets and operands:
        targets = [operands[-1] if len(operands) > 1 or cmd.name != "ln" else "."]
        operands = operands[:-1] if len(operands) > 1 else operands
    # `x/.` copies x's contents: no name of its own survives (normpath would make it `x`)
    names = [os.path.basename(w.rstrip("/")) or "/" for w in operands]
    writes = [*targets, *(f"{t}/{n}" for t in targets for n in names if n not in (".", "..", "/"))]
    writes += operands if cmd.name == "mv" else []
    recursive = opts.has("r", "R", "a") and cmd.name == "cp"
    tree = tuple(targets) if recursive and any(n in (".", "..", "/") for n in names) else ()
    runs = ("`install --strip-program` runs a program",) if opts.has("strip-program") else ()
    reads = tuple(operands) if cmd.name != "ln" else ()
    out = _with(
        base,
        writes=tuple(writes),
        recursive=tuple(operands) if recursive else (),
        runs=runs,
        only_reads=reads,
    )
    return replace(out, tree_writes=tree)


def _dd(cmd: SimpleCommand, base: Effects) -> Effects:
    writes = tuple(w[3:] for w in cmd.words[1:] if w.startswith("of="))
    return _with(base, writes=writes)


_SORT = _spec(
    "kotST",
    long="key=:k output=:o field-separator=:t buffer-size=:S temporary-directory=:T compress-program= "
    "files0-from= random-source= batch-size= parallel= sort= check?",
)


def _sort(cmd: SimpleCommand, base: Effects) -> Effects:
    opts = _getopt(cmd.words[1:], _SORT)
    runs = ("`sort --compress-program` runs a program",) if opts.has("compress-program") else ()
    # `-T DIR` creates its temporary files there
    writes = (*opts.values("o"), *opts.values("T"))
    reads = (*opts.values("files0-from", "random-source"), *opts.operands)
    return _with(base, writes=writes, runs=runs, only_reads=reads)


_UNIQ = _spec("fsw", long="skip-fields=:f skip-chars=:s check-chars=:w all-repeated?:D group?")


def _uniq(cmd: SimpleCommand, base: Effects) -> Effects:
    """`uniq [OPTS] IN OUT` writes OUT (`uniq -f 1 IN OUT`: the 1 is an option's value)."""
    operands = _getopt(cmd.words[1:], _UNIQ).operands
    return _with(base, writes=tuple(operands[1:2]), only_reads=tuple(operands[:1]))


_TREE_SAFE = frozenset(
    "-a -d -l -f -x -i -s -h -D -F -C -n -p -u -g -r -t -v -U -c -q -N -Q -J -X -A -S --noreport --du "
    "--dirsfirst --filesfirst --prune --gitignore --matchdirs --ignore-case --si --inodes --device "
    "--help --version".split()
)
_TREE_WITH_ARG = frozenset({"-L", "-P", "-I", "--filelimit", "--charset", "--sort", "--timefmt"})


def _tree(cmd: SimpleCommand, base: Effects) -> Effects:
    """tree's own parser: `-o FILE` writes, `-R` with `-H` writes an index per directory,
    `--fromfile` reads a listing; only a vetted set of options counts as read-only."""
    args, i, operands = cmd.words[1:], 0, list[str]()
    vetted = True
    while i < len(args):
        word = args[i]
        if word in _TREE_WITH_ARG:
            i += 2
            continue
        if word.startswith("-") and word != "-":
            name = word.split("=", 1)[0]
            vetted = vetted and (name in _TREE_SAFE or name in _TREE_WITH_ARG)
        else:
            operands.append(word)
        i += 1
    writes = tuple(_option_values(args, ("-o",)))
    runs = () if vetted else ("tree with these options may write files (`-o`, `-R -H`)",)
    return _with(base, writes=writes, runs=runs, reads=tuple(operands))


_DATE = _spec("dfrs", "I", long="date=:d file=:f reference=:r set=:s iso-8601?:I rfc-3339= resolution")


def _date(cmd: SimpleCommand, base: Effects) -> Effects:
    opts = _getopt(cmd.words[1:], _DATE)
    reads = tuple(opts.values("f", "r"))
    # `date MMDDhhmm` and `date -s` set the clock; only a `+FORMAT` operand prints
    if opts.has("s") or any(not w.startswith("+") for w in opts.operands):
        return _with(base, reads=reads, runs=("`date` with this operand sets the clock",))
    return _with(base, reads=reads)


_HOSTNAME_PRINTS = frozenset(
    "-s -f -i -I -a -A -d -y -n -v -h -V --short --fqdn --long --ip-address --all-ip-addresses "
    "--domain --alias --all-fqdns --nis --node --verbose --help --version".split()
)


def _hostname(cmd: SimpleCommand, base: Effects) -> Effects:
    """`hostname NAME`, `-F FILE`, `-b` set the name: only option-only print forms are read-only."""
    if all(w in _HOSTNAME_PRINTS for w in cmd.words[1:]):
        return base
    return _with(base, runs=("`hostname` with these words may set the host name",))


def _xxd(cmd: SimpleCommand, base: Effects) -> Effects:
    """xxd's own parser matches options by their first letters (`-r`, `-revert`, `-rfoo` all
    revert) and takes `xxd IN OUT`: the second operand is written, with or without `-r`."""
    args, i, operands, revert = cmd.words[1:], 0, list[str](), False
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            operands += args[i:]
            break
        if word.startswith("-") and word != "-":
            name = word.lstrip("-")
            revert = revert or name.startswith("r")
            if name[:1] in "cglnos" and (
                len(name) == 1 or name in ("cols", "groupsize", "len", "name", "offset", "seek")
            ):
                i += 1  # its value is the next word; `-c8` carries it attached
        else:
            operands.append(word)
    runs = ("`xxd -r` turns a dump back into bytes",) if revert else ()
    return _with(base, writes=tuple(operands[1:2]), runs=runs, reads=tuple(operands[:1]))


_FILE = _spec("mfFeP", long="magic-file=:m files-from=:f separator=:F exclude=:e compile:C parameter=:P")


def _file(cmd: SimpleCommand, base: Effects) -> Effects:
    opts = _getopt(cmd.words[1:], _FILE)
    writes = (".",) if opts.has("C") else ()  # `file -C` writes `NAME.mgc` in the current directory
    return _with(base, writes=writes, reads=tuple(opts.values("m", "f")))


_JQ_MODULES = re.compile(r"\b(import|include|modulemeta|get_search_list)\b")


def _jq(cmd: SimpleCommand, base: Effects) -> Effects:
    """jq loads modules (`import`, `include`) from `-L` directories, `~/.jq` and its own prefix,
    and `-f` reads a program that may do the same: files the checker does not follow."""
    args = cmd.words[1:]
    library = any(
        w.startswith("--lib") or (w.startswith("-") and not w.startswith("--") and "L" in w) for w in args
    )
    program_file = any(
        w.startswith("--from") or (w.startswith("-") and not w.startswith("--") and "f" in w) for w in args
    )
    if library or program_file or any(_JQ_MODULES.search(w) for w in args):
        return _with(base, runs=("jq loads modules or a program from files (`-L`, `import`, `-f`)",))
    return base


_DIFF = _spec(
    "CDFILSUWXx",
    long="recursive:r context?:C ifdef=:D show-function-line=:F ignore-matching-lines=:I label=:L "
    "starting-file=:S unified?:U width=:W exclude-from=:X exclude=:x from-file= to-file= "
    "new-file:N unidirectional-new-file:N",
)


def _diff(cmd: SimpleCommand, base: Effects) -> Effects:
    """GNU diff: `-r`, `--recu` and bundles (`-ru`) compare whole directory trees."""
    opts = _getopt(cmd.words[1:], _DIFF)
    reads = (*opts.values("X", "from-file", "to-file"), *opts.operands)
    recursive = tuple(opts.operands) if opts.has("r") else ()
    return _with(base, reads=reads, recursive=recursive)


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


_GREP = _spec(
    "efmABCdDX",
    long="regexp=:e file=:f max-count=:m after-context=:A before-context=:B context=:C "
    "directories=:d devices=:D recursive:r dereference-recursive:R exclude= include= exclude-from= "
    "exclude-dir= label= binary-files= group-separator= color? colour?",
)


def _grep(cmd: SimpleCommand, base: Effects) -> Effects:
    opts = _getopt(cmd.words[1:], _GREP)
    paths = opts.operands if opts.has("e", "f") else opts.operands[1:]
    reads = (*opts.values("f", "exclude-from"), *paths)
    # `-d recurse` (argmatch takes any unambiguous prefix: `-d rec`) is `-r`
    recurse = opts.has("r", "R") or any(v and "recurse".startswith(v) for v in opts.values("d"))
    if not recurse:
        return _with(base, only_reads=reads)
    return _with(base, only_reads=reads, recursive=tuple(paths or ["."]))


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


_SED = _spec("efl", "i", long="expression=:e file=:f in-place?:i line-length=:l")


def _sed(cmd: SimpleCommand, base: Effects) -> Effects:
    opts = _getopt(cmd.words[1:], _SED)
    scripts, operands = opts.values("e"), list(opts.operands)
    if not opts.has("e", "f") and operands:
        scripts, operands = [operands[0]], operands[1:]
    runs: list[str] = []
    if opts.has("f"):
        runs.append("`sed -f` runs a script file that is not verified")
    if not all(_sed_script_vetted(s) for s in scripts):
        runs.append("the sed script may write files or run commands (`w`, `e`, `r`, ...)")
    writes = tuple(operands) if opts.has("i") else ()
    return _with(base, writes=writes, runs=tuple(runs), only_reads=(*opts.values("f"), *operands))


_AWK = _spec(
    "fvFEilWe",
    "opdDL",
    long="file=:f assign=:v field-separator=:F exec=:E include=:i load=:l source=:e pretty-print?:o "
    "profile?:p dump-variables?:d debug?:D lint?:L",
)
_AWK_VETTED = frozenset("F v e b c C g h M n N O P r s S t V Y".split())
"""Options that neither load code (`-f`, `-i`, `-l`, `-E`, mawk's `-W`) nor write a file
(`--profile`, `--pretty-print`, `--dump-variables` write theirs)."""
_AWK_RISKY = re.compile(r"system|getline|\||>|@|print\w*\s*>|close|fflush|ENVIRON|PROCINFO|ARGV|ARGC")
"""`ARGV[1] = ".env"` makes awk read a file no operand names."""


def _awk(cmd: SimpleCommand, base: Effects) -> Effects:
    opts = _getopt(cmd.words[1:], _AWK)
    unvetted = [k for k in opts.found if k not in _AWK_VETTED] + opts.unknown
    if unvetted:
        return _with(base, runs=(f"awk option `{unvetted[0]}` loads code or writes files",))
    programs, files = opts.values("e"), list(opts.operands)
    if not programs:
        programs, files = files[:1], files[1:]
    if not programs or any(_AWK_RISKY.search(p) for p in programs):
        return _with(base, runs=("the awk program may write files or run commands",))
    return _with(base, only_reads=tuple(w for w in files if not re.fullmatch(r"[A-Za-z_]\w*=.*", w)))


_GIT_READ_ONLY = frozenset(
    {"status", "log", "diff", "show", "rev-parse", "ls-files", "blame", "describe", "shortlog",
     "cat-file", "ls-tree", "merge-base", "rev-list", "grep", "whatchanged", "diff-tree"}
)  # fmt: skip
_GIT_SAFE_GLOBAL = frozenset(
    {"--no-pager", "-P", "-p", "--paginate", "--no-optional-locks", "--literal-pathspecs",
     "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-replace-objects",
     "--no-advice", "--no-lazy-fetch"}
)  # fmt: skip
"""Global options that change neither the repository, its config nor the programs git runs;
any other (`-c`, `--config-env`, `-C`, `--git-dir`, `--work-tree`, `--exec-path`, `--bare`,
...) asks."""
_GIT_GLOBAL_WITH_ARG = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env", "--attr-source",
     "--super-prefix", "--list-cmds"}
)  # fmt: skip
_GIT_DANGEROUS_LONG = {
    "output": "writes", "ext-diff": "runs", "textconv": "runs", "open-files-in-pager": "runs",
}  # fmt: skip
"""Long options of any subcommand that write a file or run a program; git's parse-options takes
unambiguous prefixes (`--outp=F`), so every prefix of these counts, except a real option's exact
name (`--text`)."""
_GIT_EXACT = frozenset({"text"})
_GIT_CONTENT = frozenset(
    {"show", "cat-file", "grep", "diff", "diff-tree", "diff-index", "diff-files", "log", "whatchanged",
     "reflog", "stash", "range-diff", "format-patch", "archive", "fast-export", "bundle", "blame",
     "annotate", "difftool"}
)  # fmt: skip
_GIT_ALWAYS_CONTENT = frozenset({"format-patch", "archive", "fast-export", "bundle"})
_GIT_TYPES = frozenset({"blob", "tree", "commit", "tag"})
_GIT_NO_PATCH = frozenset(
    {"-s", "--no-patch", "--stat", "--numstat", "--shortstat", "--name-only", "--name-status",
     "--summary", "--dirstat", "--raw", "--compact-summary", "--quiet", "--exit-code"}
)  # fmt: skip
_GIT_PATCH_RE = re.compile(
    r"-p|-u|--patch.*|-U\d*|--unified.*|--cc|-c|--word-diff.*|--color-words.*|-L.*|--dd"
)


def _git(cmd: SimpleCommand, base: Effects) -> Effects:
    args = list(cmd.words[1:])
    runs: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        word = args[i]
        if word not in _GIT_SAFE_GLOBAL:
            runs.append(f"`git {word.split('=', 1)[0]}` can point git at other config, hooks or programs")
        i += 2 if word in _GIT_GLOBAL_WITH_ARG else 1
    sub, rest = (args[i], args[i + 1 :]) if i < len(args) else ("", [])
    writes: list[str] = []
    reads: list[str] = []
    for k, word in enumerate(rest):
        if word == "--":
            break
        if word.startswith("--") and len(word) > 2:
            name, eq, value = word[2:].partition("=")
            if name in _GIT_EXACT:
                continue
            for option, effect in _GIT_DANGEROUS_LONG.items():
                if not option.startswith(name):
                    continue
                if effect == "writes":
                    writes.append(value if eq else (rest[k + 1] if k + 1 < len(rest) else "."))
                else:
                    runs.append(f"`git {sub} --{option}` runs a program")
        elif sub in ("diff", "log", "show", "format-patch") and word == "-o" and k + 1 < len(rest):
            writes.append(rest[k + 1])
        elif sub == "grep" and word.startswith("-") and not word.startswith("--") and "O" in word:
            runs.append("`git grep -O` runs a pager program")
    if sub == "blame":
        reads += _option_values(rest, ("--contents",))
    if sub == "config" and not _git_config_reads(rest):
        writes.append(_git_config_file(rest))
    recursive: tuple[str, ...] = ()
    if "--no-index" in rest or (sub == "grep" and "--untracked" in rest):
        # outside git's index: plain files, anywhere
        recursive = tuple(w for w in _operands(rest) if w != "-") or (".",)
    read_only = not runs and not writes and (sub in _GIT_READ_ONLY or _git_listing(sub, rest))
    out = _with(
        base,
        writes=tuple(writes),
        runs=tuple(runs),
        reads=tuple(reads),
        recursive=recursive,
        read_only=read_only,
    )
    return replace(out, repo_reads=_git_object_paths(sub, rest), repo_scope=_git_scope(sub, rest))


def _git_object_paths(sub: str, rest: list[str]) -> tuple[str, ...]:
    """The `REV:path` / `:path` / `:N:path` words of a subcommand that reads objects."""
    if sub not in _GIT_CONTENT:
        return ()
    out = []
    for word in rest:
        if word == "--":
            break
        m = re.fullmatch(r"(?:[^-:][^:]*|):(?:[0-3]:)?(.*)", word)
        if m is not None:
            out.append(m.group(1))
    return tuple(out)


def _git_scope(sub: str, rest: list[str]) -> tuple[str, ...] | None:
    """The pathspecs limiting the file contents a subcommand prints (see `Effects.repo_scope`).

    Only words after `--` narrow it: before `--` a word may be a revision or an option's value,
    and guessing wrong would narrow what is checked below what git prints.
    """
    if sub not in _GIT_CONTENT:
        return None
    before = rest[: rest.index("--")] if "--" in rest else rest
    patch = any(_GIT_PATCH_RE.fullmatch(w) for w in before) or sub in _GIT_ALWAYS_CONTENT
    if sub in ("blame", "annotate"):
        return None  # the file it names is checked as a read
    if sub in ("log", "whatchanged", "reflog") and not patch:
        return None
    if sub == "stash" and before[:1] != ["show"]:
        return None
    if sub == "cat-file" and {"-t", "-s", "-e", "--batch-check"}.intersection(before):
        return None
    if sub in ("show", "diff", "diff-tree", "diff-index", "diff-files") and not patch:
        if _GIT_NO_PATCH.intersection(before) or any(w.startswith("--stat=") for w in before):
            return None
    operands = [w for w in before if not w.startswith("-")]
    if sub in ("show", "cat-file") and operands and all(":" in w for w in operands if w not in _GIT_TYPES):
        return None  # only `REV:path` objects, each checked as the path it names
    after = rest[rest.index("--") + 1 :] if "--" in rest else []
    if not after or any(w.startswith(":") or any(c in w for c in "*?[") for w in after):
        return ()
    return tuple(after)


def _git_listing(sub: str, rest: list[str]) -> bool:
    """`git branch`, `git tag`, `git remote`, `git stash list`, `git reflog [show]`: only their
    listing forms are read-only (`git reflog delete`, `git branch -D` write)."""
    listing = {"-a", "-r", "-v", "-vv", "--list", "-l", "--show-current", "--all", "--remotes", "--verbose"}
    if sub in ("branch", "tag", "remote"):
        return all(w in listing for w in rest)
    if sub == "stash":
        return rest[:1] in (["list"], ["show"])
    if sub == "reflog":
        return not rest or rest[0] == "show" or rest[0].startswith("-")
    return sub in ("config",) and _git_config_reads(rest)


_GIT_CONFIG_READ_ACTIONS = frozenset(
    {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color",
     "--get-colorbool"}
)  # fmt: skip
_GIT_CONFIG_READ_OPTIONS = frozenset(
    {"--show-origin", "--show-scope", "--null", "-z", "--name-only", "--includes", "--no-includes",
     "--local", "--global", "--system", "--worktree", "--bool", "--int", "--bool-or-int", "--path",
     "--expiry-date", "--fixed-value", "--all", "--regexp"}
)  # fmt: skip
_GIT_CONFIG_WITH_ARG = frozenset({"--file", "-f", "--blob", "--type", "--default", "--url"})


def _git_config_reads(rest: list[str]) -> bool:
    """Whether `git config …` only reads: `get`/`list` (the new form), or exactly one read action
    (`--get NAME [VALUE-PATTERN]`, `--list`) with vetted options. `git config NAME VALUE get`
    sets NAME for values matching the pattern `get`: a word `get` anywhere proves nothing."""
    i, actions, operands = 0, list[str](), list[str]()
    while i < len(rest):
        word = rest[i]
        name = word.split("=", 1)[0]
        if name in _GIT_CONFIG_WITH_ARG:
            i += 1 if "=" in word or (name == "-f" and word != "-f") else 2
            continue
        if word in _GIT_CONFIG_READ_ACTIONS:
            actions.append(word)
        elif word.startswith("-"):
            if word not in _GIT_CONFIG_READ_OPTIONS:
                return False
        else:
            operands.append(word)
        i += 1
    if not actions:
        return operands[:1] in (["get"], ["list"]) and len(operands) <= 3
    limit = 0 if actions[0] in ("--list", "-l") else 2
    return len(actions) == 1 and len(operands) <= limit


def _git_config_file(rest: list[str]) -> str:
    files = _option_values(rest, ("--file", "-f"))
    if files:
        return files[0]
    if "--global" in rest:
        return "~/.gitconfig"
    if "--system" in rest:
        return "/etc/gitconfig"
    return ".git/config"


_TAR = _spec(
    "fCbFIHKLNTVgX",
    long="file=:f directory=:C blocking-factor=:b info-script=:F new-volume-script=:F "
    "use-compress-program=:I format=:H starting-file=:K tape-length=:L newer=:N after-date=:N "
    "files-from=:T label=:V listed-incremental=:g exclude-from=:X extract:x get:x create:c "
    "append:r update:u catenate:A concatenate:A delete absolute-names:P to-command= "
    "checkpoint-action= rsh-command= rmt-command= checkpoint? remove-files exclude= transform= xform= owner= "
    "group= mode= mtime= suffix= backup? strip-components= record-size= volno-file= index-file=",
)
_TAR_RUNS = ("I", "F", "to-command", "checkpoint-action", "rsh-command", "rmt-command")


def _tar_args(args: tuple[str, ...]) -> list[str]:
    """tar's words with an old-style first cluster (`tar cfC a.tar dir`, no dash) rewritten in
    the dashed form, each letter's value taken from the following words in letter order."""
    rest = list(args)
    if not rest or rest[0].startswith("-"):
        return rest
    cluster, out = rest.pop(0), []
    for letter in cluster:
        out.append(f"-{letter}")
        if letter in _TAR.short_arg and rest:
            out.append(rest.pop(0))
    return [*out, *rest]


def _tar(cmd: SimpleCommand, base: Effects) -> Effects:
    opts = _getopt(_tar_args(cmd.words[1:]), _TAR)
    runs = ("tar can run programs (`--to-command`, `-I`, ...)",) if opts.has(*_TAR_RUNS) else ()
    files = opts.values("f")
    writes: list[str] = []
    tree: list[str] = []
    recursive: list[str] = []
    if opts.has("x"):
        # an archive can hold any name (`.git/hooks/x` included); `-P` keeps absolute ones
        tree += ["/"] if opts.has("P") else (opts.values("C") or ["."])
    if opts.has("c", "r", "u", "A", "delete"):
        writes += files or ["."]
        recursive += opts.operands
        if opts.has("remove-files"):
            writes += opts.operands
        if opts.has("T"):
            runs = (*runs, "tar archives the files a list names, which the checker does not read")
    reads = (*opts.values("T", "X"), *(files if opts.has("x", "t") else ()))
    out = _with(
        base, writes=tuple(writes), runs=runs, recursive=tuple(recursive), reads=reads, read_only=False
    )
    return replace(out, tree_writes=tuple(tree))


_CURL = _spec(
    "AbCcDdEeFHhKmoPQrTtUuwXxYyz",
    long="output=:o remote-name:O remote-name-all remote-header-name:J output-dir= dump-header=:D "
    "cookie-jar=:c config=:K upload-file=:T trace= trace-ascii= stderr= etag-save= hsts= alt-svc= libcurl= "
    "data=:d data-binary= data-raw= data-urlencode= data-ascii= json= form=:F form-string= variable= "
    "netrc-file= cookie=:b header=:H",
)
_CURL_WRITES = ("o", "D", "c", "trace", "trace-ascii", "stderr", "etag-save", "hsts", "alt-svc", "libcurl")
_WGET = _spec(
    "oaeiOPTtwQUBYDRAlIX",
    long="output-file=:o append-output=:a execute=:e input-file=:i output-document=:O directory-prefix=:P "
    "config= post-file= body-file= save-cookies= load-cookies= warc-file= recursive:r mirror:m",
)


def _fetch(cmd: SimpleCommand, base: Effects) -> Effects:
    """curl and wget, whose long options also go by prefix (`curl --outp=F`): every file they
    write (`-o`, `-D`, `-c`, `--trace`, wget's `-o` log), every file they send (`-T`, `-d @F`,
    `-F x=<F`), and a config (`-K`, wget `-e`) that could say anything. wget without `-O`
    names its files after the URL, and with `-r` after its paths: any name under the directory."""
    if cmd.name == "curl":
        opts = _getopt(cmd.words[1:], _CURL)
        writes = opts.values(*_CURL_WRITES)
        writes += ["."] if opts.has("O", "J", "remote-name-all") else []
        tree = tuple(opts.values("output-dir"))
        runs = ("`curl -K` reads options from a file",) if opts.has("K") else ()
        sent = opts.values("d", "data-binary", "data-urlencode", "data-ascii", "json", "F", "variable")
        reads = [
            *opts.values("T", "netrc-file"),
            *(re.split(r"[@<]", v, maxsplit=1)[1] for v in sent if re.search(r"[@<]", v)),
        ]
    else:
        opts = _getopt(cmd.words[1:], _WGET)
        writes = opts.values("o", "a", "O", "save-cookies", "warc-file")
        tree = tuple(opts.values("P")) or (() if opts.has("O") else (".",))
        runs = ("`wget -e`/`--config` run settings from text or a file",) if opts.has("e", "config") else ()
        reads = opts.values("i", "post-file", "body-file", "load-cookies")
    out = _with(base, writes=tuple(writes), runs=runs, reads=tuple(reads))
    return replace(out, tree_writes=tree)


def _shell_builtin_alias(cmd: SimpleCommand, base: Effects) -> Effects:
    return _with(base, runs=(f"`{cmd.name}` changes what later commands mean",))


_HANDLERS: dict[str, Callable[[SimpleCommand, Effects], Effects]] = {
    "cp": _copy, "mv": _copy, "install": _copy, "ln": _copy, "dd": _dd, "sort": _sort, "uniq": _uniq,
    "tree": _tree, "date": _date, "printf": _printf, "hostname": _hostname, "xxd": _xxd, "file": _file,
    "jq": _jq, "diff": _diff, "set": _set, "find": _find, "rg": _rg,
    "grep": _grep, "egrep": _grep, "fgrep": _grep, "sed": _sed, "gsed": _sed, "awk": _awk,
    "gawk": _awk, "mawk": _awk, "nawk": _awk, "git": _git, "tar": _tar, "curl": _fetch, "wget": _fetch,
    "alias": _shell_builtin_alias, "shopt": _shell_builtin_alias, "enable": _shell_builtin_alias,
    "hash": _shell_builtin_alias,
}  # fmt: skip


def modeled(cmd: SimpleCommand) -> bool:
    """Whether the checker knows everything `cmd` does: a bare name on the vetted lists (read-only,
    or with its file effects modeled) that runs no code the checker cannot see."""
    if not cmd.words:
        return True
    if "/" in cmd.words[0] or cmd.problems or cmd.dynamic[0]:
        return False
    name = cmd.name
    known = name in READ_ONLY or name in _HANDLERS or name in _WRITE_ALL or name in _WRITE_AFTER_FIRST
    return (known or cmd.wrapper) and not effects(cmd).runs
