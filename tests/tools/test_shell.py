"""The shell-aware splitter: every command a line would run, found through quotes and indirection."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foldline.tools._shell import MAX_DEPTH, Redirect, ShellParseError, SimpleCommand, split_command


def texts(command: str) -> list[str]:
    return [c.text for c in split_command(command)]


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        pytest.param("git log; rm -rf x", ["git log", "rm -rf x"], id="semicolon"),
        pytest.param("a && b || c | d |& e & f\ng", list("abcdefg"), id="every-separator"),
        pytest.param("echo 'a; b' \"c && d\" e\\;f", ["echo 'a; b' 'c && d' 'e;f'"], id="quoting"),
        pytest.param("echo $(rm x) `id`", ["echo '$(…)' '$(…)'", "rm x", "id"], id="substitutions"),
        pytest.param('echo "x $(a "b" c) y"', ["echo 'x $(…) y'", "a b c"], id="substitution-in-quotes"),
        pytest.param(
            "diff <(ls a) >(tee b)", ["diff '<(…)' '<(…)'", "ls a", "tee b"], id="process-substitution"
        ),
        pytest.param("sh -c 'a; b'", ["a", "b"], id="sh-c"),
        pytest.param("bash --norc -ec 'a && b'", ["a", "b"], id="bash-options"),
        pytest.param("bash script.sh", ["bash script.sh"], id="bash-script-is-itself"),
        pytest.param("eval 'a;' b", ["a", "b"], id="eval"),
        pytest.param(
            "find . -name x -exec rm {} \\; -print", ["find . -name x -print", "rm {}"], id="find-exec"
        ),
        pytest.param("ls | xargs -n 1 -I{} rm {}", ["ls", "rm {}"], id="xargs"),
        pytest.param("xargs", ["echo"], id="bare-xargs-echoes"),
        pytest.param("timeout -k 1 5 nice -5 nohup stdbuf -oL a", ["a"], id="wrappers"),
        pytest.param("env -u X A=1 B=2 a b", ["a b"], id="env"),
        pytest.param("env", ["env"], id="bare-env"),
        pytest.param("command -v git", ["command -v git"], id="command-v-is-a-query"),
        pytest.param("{ a; b; }; ! c", ["a", "b", "c"], id="groups-and-bang"),
        pytest.param("(a; (b))", ["a", "b"], id="subshells"),
        pytest.param("a # b; c\nd", ["a", "d"], id="comments"),
        pytest.param("a \\\n b", ["a b"], id="line-continuation"),
        pytest.param("echo done fi", ["echo done fi"], id="reserved-words-as-arguments"),
        pytest.param("X=1 Y=$(a) b", ["b", "a"], id="assignments"),
        pytest.param("price=$5", [""], id="lone-assignment"),
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
    ("command", "message"),
    [
        pytest.param("echo 'x", "unterminated single quote", id="single-quote"),
        pytest.param('echo "x', "unterminated double quote", id="double-quote"),
        pytest.param("echo `x", "unterminated backtick", id="backtick"),
        pytest.param("echo $(x", "unbalanced parentheses", id="paren"),
        pytest.param("echo $((1+1))", "arithmetic", id="arithmetic"),
        pytest.param("echo ${x:-$(rm y)}", "parameter expansion", id="param-operator"),
        pytest.param("for f in *; do rm $f; done", "`for` blocks", id="for"),
        pytest.param("case x in a) b;; esac", "`case` blocks", id="case"),
        pytest.param("a >", "has no target", id="dangling-redirect"),
        pytest.param("cat <<EOF\nx", "never closed", id="open-heredoc"),
        pytest.param("cat << $X\nx\n$X", "not literal", id="dynamic-heredoc-delimiter"),
    ],
)
def test_unverifiable_syntax_raises(command: str, message: str) -> None:
    with pytest.raises(ShellParseError, match=message):
        split_command(command)


def test_nesting_is_bounded() -> None:
    command = "x"
    for _ in range(MAX_DEPTH + 2):
        command = f"echo $({command})"
    with pytest.raises(ShellParseError, match="nested"):
        split_command(command)


def test_heredocs() -> None:
    line = "cat <<'A' <<-B > out\n$(not run)\nA\n\t$(run me)\n\tB\nnext"
    commands = split_command(line)
    assert [c.text for c in commands] == ["cat", "next", "run me"]
    assert [r.op for r in commands[0].redirects] == ["<<", "<<", ">"]


# property: quoted arguments never split, separators always do ------------------------------------

_first = st.from_regex(r"q[a-z]{0,5}", fullmatch=True)
_arg = st.text(st.characters(codec="utf-8", exclude_characters="'\x00"), max_size=12)
_command = st.tuples(_first, st.lists(_arg, max_size=4)).map(lambda t: (t[0], *t[1]))
_separator = st.sampled_from([";", "&&", "||", "|", "|&", "&", "\n", " ; ", " && "])


@given(st.lists(_command, min_size=1, max_size=6), st.data())
def test_split_recovers_every_command(commands: list[tuple[str, ...]], data: st.DataObject) -> None:
    line = ""
    for i, words in enumerate(commands):
        if i:
            line += data.draw(_separator)
        line += " ".join([words[0], *(f"'{w}'" for w in words[1:])])
    assert texts(line) == [SimpleCommand(words).text for words in commands]
