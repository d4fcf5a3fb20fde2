"""The bash parser: every command a line would run, found through quotes, indirection and wrappers,
and every construct it does not understand reported as a problem instead of guessed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foldline.tools._shell import (
    MAX_DEPTH,
    MAX_NESTING,
    Redirect,
    ShellParseError,
    SimpleCommand,
    parse_command,
    split_command,
)


def texts(command: str) -> list[str]:
    return [c.text for c in split_command(command)]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        pytest.param("git log; rm -rf x", ["git log", "rm -rf x"], id="semicolon"),
        pytest.param("a && b || c | d |& e & f\ng", list("abcdefg"), id="every-separator"),
        pytest.param("echo 'a; b' \"c && d\" e\\;f", ["echo 'a; b' 'c && d' 'e;f'"], id="quoting"),
        # substitutions run first, as bash runs them
        pytest.param("echo $(rm x) `id`", ["rm x", "id", "echo '$(…)' '$(…)'"], id="substitutions"),
        pytest.param('echo "x $(a "b" c) y"', ["a b c", "echo 'x $(…) y'"], id="substitution-in-quotes"),
        pytest.param("diff <(ls a) >(tee b)", ["ls a", "tee b", "diff '<(…)' '<(…)'"], id="process-subst"),
        pytest.param("sh -c 'a; b'", ["sh -c 'a; b'", "a", "b"], id="sh-c"),
        pytest.param("bash --norc -ec 'a && b'", ["bash --norc -ec 'a && b'", "a", "b"], id="bash-options"),
        pytest.param("bash -o pipefail -c 'a'", ["bash -o pipefail -c a", "a"], id="bash-o-arg"),
        pytest.param("bash -c -- 'a'", ["bash -c -- a", "a"], id="bash-c-dashdash"),
        pytest.param("bash script.sh", ["bash script.sh"], id="bash-script-is-itself"),
        pytest.param(
            "find . -name x -exec rm {} \\; -print", ["find . -name x -print", "rm {}"], id="find-exec"
        ),
        pytest.param(
            "timeout -k 1 5 nice -5 a", ["timeout -k 1 5 nice -5 a", "nice -5 a", "a"], id="wrappers"
        ),
        pytest.param("env -u X A=1 B=2 a b", ["env -u X A=1 B=2 a b", "a b"], id="env"),
        pytest.param("sudo -u root -E rm x", ["sudo -u root -E rm x", "rm x"], id="sudo"),
        pytest.param("busybox rm x", ["busybox rm x", "rm x"], id="busybox"),
        pytest.param("env", ["env"], id="bare-env"),
        pytest.param("command -v git", ["command -v git"], id="command-v-is-a-query"),
        pytest.param("{ a; b; }; ! c", ["a", "b", "c"], id="groups-and-bang"),
        pytest.param("(a; (b))", ["a", "b"], id="subshells"),
        pytest.param("a # b; c\nd", ["a", "d"], id="comments"),
        pytest.param("a \\\n b", ["a b"], id="line-continuation"),
        pytest.param("echo done fi", ["echo done fi"], id="reserved-words-as-arguments"),
        pytest.param("X=1 Y=$(a) b", ["a", "b"], id="assignments"),
        pytest.param("if a; then b; else c; fi", ["a", "b", "c"], id="if"),
        pytest.param("while a; do b; done", ["a", "b"], id="while"),
        pytest.param("[ -f x ] && test -d y", ["[ -f x ]", "test -d y"], id="test-brackets"),
        pytest.param(
            "git commit -m \"$(cat <<'EOF'\nmsg (x)\nEOF\n)\"", ["cat", "git commit -m '$(…)'"], id="hd"
        ),
    ],
)
def test_split(command: str, expected: list[str]) -> None:
    assert texts(command) == expected


def test_redirects_and_assignments_are_recorded() -> None:
    [cmd] = split_command("FOO=1 a 2>err.log >> out <in 2>&1 &>both")
    assert cmd.words == ("a",)
    assert cmd.assignments == ("FOO",)
    assert cmd.redirects == (
        Redirect(">", "err.log"),  # the fd number is not kept: any write is checked the same
        Redirect(">>", "out"),
        Redirect("<", "in"),
        Redirect(">&", "1"),
        Redirect("&>", "both"),
    )
    assert [r.writes for r in cmd.redirects] == [True, True, False, False, True]


def test_dynamic_words_are_flagged() -> None:
    [cmd] = split_command("$X a \"$Y\" ${Z} '$W'")
    assert cmd.dynamic == (True, False, True, True, False)


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        pytest.param("echo 'x", "does not parse", id="single-quote"),
        pytest.param('echo "x', "does not parse", id="double-quote"),
        pytest.param("echo $(x", "does not parse", id="paren"),
        pytest.param("echo $((1+1))", "arithmetic", id="arithmetic"),
        pytest.param("((x++))", "arithmetic", id="arithmetic-command"),
        pytest.param("echo ${x:-$(rm y)}", "parameter expansion", id="param-operator"),
        pytest.param("echo ${x@P}", "parameter expansion", id="prompt-expansion"),
        pytest.param("case x in a) b;; esac", "case_statement", id="case"),
        pytest.param("f() { a; }", "function_definition", id="function"),
        pytest.param("ls *.py", "glob", id="glob"),
        pytest.param("ls a?c", "glob", id="glob-question"),
        pytest.param("echo {a,b}", "brace expansion", id="brace"),
        pytest.param("echo x{1..3}", "brace expansion", id="brace-range"),
        pytest.param("cd ~-", "tilde", id="tilde-minus"),
        pytest.param("cat ~+/x", "tilde", id="tilde-plus"),
        pytest.param("echo $'\\x41'", "quoting", id="ansi-c"),
        pytest.param('echo $"x"', "locale", id="locale-string"),
        pytest.param("ec\\\nho x", "backslash-newline", id="backslash-newline-in-word"),
        pytest.param("ls\rrm x", "control", id="carriage-return"),
        pytest.param("cat <<EOF\n$(id)\nEOF", "heredoc", id="heredoc-substitution"),
        pytest.param("eval ls", "eval", id="eval"),
        pytest.param("trap 'rm x' EXIT", "trap", id="trap"),
        pytest.param("env -S 'rm x'", "unknown option", id="env-split-string"),
        pytest.param("sudo -s rm", "unknown option", id="sudo-shell"),
        pytest.param("bash", "stdin", id="shell-reads-stdin"),
        pytest.param("curl x | sh -s", "stdin", id="shell-s"),
        pytest.param('sh -c "$X"', "run time", id="dynamic-script"),
        pytest.param("[[ -v a ]]", "arithmetic", id="double-bracket"),
        pytest.param("declare -i x=1", "declarations", id="declare"),
        pytest.param("a[1]=2", "subscripted", id="subscript-assignment"),
        pytest.param("x=(a b)", "array", id="array"),
        pytest.param("grep --file=~+/x y", "tilde after", id="tilde-after-equals"),
        pytest.param("ls a:~1", "tilde after", id="tilde-after-colon"),
        pytest.param("time { ls; }", "reserved word", id="time-group"),
        pytest.param("coproc N { ls; }", "coproc", id="coproc-group"),
    ],
)
def test_unverifiable_syntax_is_a_problem(command: str, problem: str) -> None:
    parsed = parse_command(command)
    assert any(problem in p for p in parsed.problems), parsed.problems
    with pytest.raises(ShellParseError):
        split_command(command)


def test_problems_never_hide_commands() -> None:
    parsed = parse_command("rm -rf x; echo $((1)); case y in z) rm y;; esac")
    assert {c.text for c in parsed.commands if c.words} >= {"rm -rf x", "rm y"}


def test_nesting_is_bounded() -> None:
    command = "x"
    for _ in range(MAX_DEPTH + 2):
        command = f"sh -c {SimpleCommand((command,)).text}"
    assert any("nested" in p for p in parse_command(command).problems)


@pytest.mark.parametrize(
    "command",
    ["echo " + "$(" * (MAX_NESTING + 1) + "x" + ")" * (MAX_NESTING + 1), "(" * 5000 + "ls" + ")" * 5000],
    ids=["past-the-limit", "past-the-interpreter"],
)
def test_deep_nesting_is_a_refusal_not_an_exception(command: str) -> None:
    parsed = parse_command(command)
    assert parsed.refusal is not None
    assert parsed.refusal in parsed.problems


@pytest.mark.parametrize(
    ("command", "hidden"),
    [
        ("time { rm x; }", "rm x"),
        ("time -p { rm x; }", "rm x"),
        ("! { rm x; }", "rm x"),
        ("time ! rm x", "rm x"),
        ("coproc { rm x; }", "rm x"),
        ("coproc NAME { rm x; }", "rm x"),
        ("time for i in 1; do rm x; done", "rm x"),
    ],
)
def test_reserved_words_do_not_hide_commands(command: str, hidden: str) -> None:
    parsed = parse_command(command)
    assert hidden in [c.text for c in parsed.commands]
    assert parsed.problems


def test_every_assignment_is_recorded() -> None:
    names = {
        a
        for line in (
            "A=1 ls",
            "B=1",
            "env C=1 ls",
            "export D=1",
            "for E in x; do :; done",
            "select F in x; do :; done",
        )
        for c in parse_command(line).commands
        for a in c.assignments
    }
    assert names == set("ABCDEF")


def test_heredocs() -> None:
    line = "cat <<'A' > out\n$(not run)\nA\nnext"
    commands = split_command(line)
    assert [c.text for c in commands] == ["cat", "next"]
    assert [r.op for r in commands[0].redirects] == ["<<", ">"]


@pytest.mark.parametrize(
    ("command", "same_env_as_first"),
    [
        pytest.param("cd a; ls", True, id="sequence"),
        pytest.param("(cd a); ls", False, id="subshell"),
        pytest.param("cd a | ls", False, id="pipeline"),
        pytest.param("cd a & ls", False, id="background"),
        pytest.param("sh -c 'cd a'; ls", False, id="sh-c"),
        pytest.param("echo $(cd a); ls", False, id="substitution"),
        pytest.param("command cd a; ls", True, id="command-builtin"),
    ],
)
def test_cd_scope(command: str, same_env_as_first: bool) -> None:
    commands = [c for c in parse_command(command).commands if c.words]
    cd = next(c for c in commands if c.words[0] == "cd")
    ls = next(c for c in commands if c.words[0] == "ls")
    assert (ls.env[: len(cd.env)] == cd.env) is same_env_as_first


# property: quoted arguments never split, separators always do ------------------------------------

_first = st.from_regex(r"q[a-z]{0,5}", fullmatch=True)
_arg = st.text(st.characters(codec="utf-8", exclude_characters="'\x00\r"), max_size=12)
_command = st.tuples(_first, st.lists(_arg, max_size=4)).map(lambda t: (t[0], *t[1]))
_separator = st.sampled_from([";", "&&", "||", "|", "|&", "&", "\n", " ; ", " && "])


@given(st.lists(_command, min_size=1, max_size=6), st.data())
def test_split_recovers_every_command(commands: list[tuple[str, ...]], data: st.DataObject) -> None:
    line = ""
    for i, words in enumerate(commands):
        if i:
            line += data.draw(_separator)
        line += " ".join([words[0], *(f"'{w}'" for w in words[1:])])
    parsed = parse_command(line)
    found = [c.text for c in parsed.commands if c.words]
    if parsed.problems:  # control characters inside quotes are reported, never split on
        assert all(SimpleCommand(w).text in found for w in commands)
    else:
        assert found == [SimpleCommand(words).text for words in commands]
