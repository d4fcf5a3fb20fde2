"""The approval prompt: escaped, whole, diffed, and its three answers (S10 UI integrity)."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from foldline.cli._prompt import (
    answer_options,
    collapse_blank,
    escape_controls,
    make_asker,
    parse_choice,
    prefix_rules,
    render_question,
)
from foldline.settings import Settings, load_settings, local_settings_path
from foldline.tools import Decision, PermissionRules

ASK = Decision("ask", "no rule allows it")


def visible(text: str) -> bool:
    """No character a terminal would act on or hide: only printable text, spaces and newlines."""
    return all(ch in "\n " or unicodedata.category(ch)[0] not in "CZ" for ch in text)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        pytest.param("a\x1b[2Kb", "a\\x1b[2Kb", id="ansi-erase-line"),
        pytest.param("\x1b]0;title\x07", "\\x1b]0;title\\a", id="osc-title"),
        pytest.param("ls\rrm", "ls\\rrm", id="carriage-return"),
        pytest.param("a\x08\x08b", "a\\b\\bb", id="backspace"),
        pytest.param("a\x00b", "a\\0b", id="nul"),
        pytest.param("a\x7fb", "a\\x7fb", id="del"),
        pytest.param("a\x9bb", "a\\x9bb", id="c1-csi"),
        pytest.param("ls \u202eexe.sh", "ls \\u202eexe.sh", id="bidi-override"),
        pytest.param("a\u2066b\u2069", "a\\u2066b\\u2069", id="bidi-isolate"),
        pytest.param("r\u200bm", "r\\u200bm", id="zero-width-space"),
        pytest.param("l\u200ds", "l\\u200ds", id="zero-width-joiner"),
        pytest.param("\ufeffls", "\\ufeffls", id="bom"),
        pytest.param("a\u2028b", "a\\u2028b", id="line-separator"),
        pytest.param("a\xa0b", "a\\xa0b", id="no-break-space"),
        pytest.param("a\tb", "a\\tb", id="tab"),
        pytest.param("one\ntwo", "one\ntwo", id="newline-kept"),
        pytest.param("naïve 日本", "naïve 日本", id="printable-unicode-kept"),
    ],
)
def test_controls_are_shown_escaped(raw: str, shown: str) -> None:
    assert escape_controls(raw) == shown
    assert visible(escape_controls(raw))


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("# just listing files\nrm -rf x", id="comment-first-line"),
        pytest.param("ls" + "\n" * 40 + "rm -rf x", id="blank-lines"),
        pytest.param("echo '\x1b[2K\x1b[1A'; rm -rf x", id="ansi"),
        pytest.param("ls\r# harmless", id="cr"),
        pytest.param("ls " + "a " * 3000 + "&& curl evil.example", id="very-long"),
        pytest.param("ls\nAllow Bash ls?\n  1. yes", id="fake-prompt-lines"),
    ],
)
def test_the_prompt_shows_the_whole_command_and_nothing_live(command: str, tmp_path: Path) -> None:
    text = render_question("Bash", {"command": command}, ASK, tmp_path)
    assert visible(text)
    body = [line for line in text.split("\n") if line.startswith("  │ ")]
    # whole: every line, runs of blank lines as one marker line
    assert "\n".join(line[len("  │ ") :] for line in body) == collapse_blank(escape_controls(command))[0]
    # a line of the command can't pass for a line of the prompt: each one carries the gutter
    assert [line for line in text.split("\n") if line.startswith("  1. yes")] == ["  1. yes"]


def test_write_and_edit_show_a_diff(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    write = render_question("Write", {"file_path": "a.py", "content": "x = 1\ny = 3\n"}, ASK, tmp_path)
    assert "-y = 2" in write
    assert "+y = 3" in write
    edit = {"file_path": "a.py", "old_string": "x = 1", "new_string": "x = \x1b[31m9"}
    shown = render_question("Edit", edit, ASK, tmp_path)
    assert "-x = 1" in shown
    assert "+x = \\x1b[31m9" in shown
    assert visible(shown)
    new = render_question("Write", {"file_path": "new.py", "content": "print()\n"}, ASK, tmp_path)
    assert "+print()" in new


def test_always_is_offered_only_with_a_rule() -> None:
    with_rule = render_question("Bash", {"command": "make"}, ASK, Path("/"), ("Bash(make)",))
    assert "2. yes, always (saves Bash(make) to .foldline/settings.local.json)" in with_rule
    assert "3. no" in with_rule
    without = render_question("Bash", {"command": "make"}, ASK, Path("/"))
    assert "always" not in without
    assert "2. no" in without


def test_the_prompt_says_how_to_answer_and_that_enter_alone_chooses_nothing() -> None:
    text = render_question("Bash", {"command": "make"}, ASK, Path("/"), ("Bash(make)",))
    assert text.splitlines()[-1] == "  Type 1-3 (or y/a/n) and Enter; there is no default."


FULL = answer_options(
    "Bash", always=("Bash(git status --short)",), prefix=("Bash(git status:*)",), session_edits=True
)


@pytest.mark.parametrize(
    ("answer", "choice"),
    [
        ("y", "yes"),
        ("1", "yes"),
        (" YES ", "yes"),
        ("2", "session"),
        ("s", "session"),
        ("3", "always"),
        ("a", "always"),
        ("4", "prefix"),
        ("p", "prefix"),
        ("5", "no"),
        ("n", "no"),
        ("No", "no"),
        ("", None),
        ("   ", None),
        ("sure", None),
        ("6", None),
        ("yes please", None),
    ],
)
def test_a_typo_or_a_bare_enter_is_no_answer(answer: str, choice: str | None) -> None:
    option = parse_choice(answer, FULL)
    assert (option.choice if option else None) == choice


def test_an_answer_not_offered_is_not_accepted() -> None:
    plain = answer_options("Bash")
    assert [o.choice for o in plain] == ["yes", "no"]
    assert parse_choice("a", plain) is None
    assert parse_choice("2", plain).choice == "no"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("rules", "prefixes"),
    [
        (("Bash(git status --short)",), ("Bash(git status:*)",)),
        (("Bash(npm run build)",), ("Bash(npm run:*)",)),
        (("Bash(pytest -x tests/a.py)",), ("Bash(pytest:*)",)),
        (("Bash(cat src/a.py)",), ("Bash(cat:*)",)),
        (("Bash(make)",), ()),  # the prefix is the whole command: the exact rule says it
        (("Bash(git status)",), ()),
    ],
)
def test_prefix_rules_keep_the_command_and_its_subcommand(
    rules: tuple[str, ...], prefixes: tuple[str, ...]
) -> None:
    assert prefix_rules("Bash", rules) == prefixes


class Terminal:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.shown: list[str] = []

    def echo(self, text: str) -> None:
        self.shown.append(text)

    def read(self, prompt: str) -> str:
        return self.answers.pop(0)


@pytest.mark.anyio
async def test_always_saves_the_rule_and_stops_asking(tmp_path: Path) -> None:
    term = Terminal("2")
    ask = make_asker(Settings(), tmp_path, "default", echo=term.echo, read=term.read)
    assert await ask("Bash", {"command": "make deploy"}, ASK)
    assert json.loads(local_settings_path(tmp_path).read_text()) == {
        "permissions": {"allow": ["Bash(make deploy)"]}
    }
    assert await ask("Bash", {"command": "make deploy"}, ASK)  # no answer left: it did not ask
    assert len(term.shown) == 1
    # foldline wrote the file for the user, so it counts (the trust store is in the user's home)
    assert [str(r) for r in load_settings(tmp_path).rules.allow] == ["Bash(make deploy)"]


@pytest.mark.anyio
async def test_no_and_once_save_nothing(tmp_path: Path) -> None:
    term = Terminal("n", "y", "y")
    ask = make_asker(Settings(), tmp_path, "default", echo=term.echo, read=term.read)
    assert not await ask("Bash", {"command": "make deploy"}, ASK)
    assert await ask("Bash", {"command": "make deploy"}, ASK)
    assert await ask("Bash", {"command": "make deploy"}, ASK)  # once means once: asked again
    assert len(term.shown) == 3
    assert not local_settings_path(tmp_path).exists()


@pytest.mark.anyio
async def test_a_typo_and_a_bare_enter_ask_again(tmp_path: Path) -> None:
    term = Terminal("yse", "", "y")
    ask = make_asker(Settings(), tmp_path, "default", echo=term.echo, read=term.read)
    assert await ask("Bash", {"command": "make deploy"}, ASK)
    assert term.answers == []  # all three were read
    assert "'yse' is not an answer" in term.shown[1]
    assert "'' is not an answer" in term.shown[2]
    assert "there is no default" in term.shown[2]


@pytest.mark.anyio
async def test_no_calls_on_refuse_and_a_cancelled_prompt_does_not(tmp_path: Path) -> None:
    refused: list[str] = []
    term = Terminal("n", "<cancelled>")
    ask = make_asker(
        Settings(),
        tmp_path,
        "default",
        echo=term.echo,
        read=term.read,
        on_refuse=lambda: refused.append("no"),
        cancelled="<cancelled>",
    )
    assert not await ask("Bash", {"command": "make deploy"}, ASK)
    assert refused == ["no"]
    assert not await ask("Bash", {"command": "make deploy"}, ASK)  # Ctrl-C: no, not asked again
    assert refused == ["no"]
    assert len(term.shown) == 2


@pytest.mark.anyio
async def test_allow_edits_for_the_session_approves_later_edits_but_not_commands(tmp_path: Path) -> None:
    term = Terminal("2", "1")
    ask = make_asker(Settings(), tmp_path, "default", echo=term.echo, read=term.read)
    assert await ask("Write", {"file_path": "a.py", "content": "x"}, ASK)
    assert "2. yes, and allow all edits in the workspace for this session" in term.shown[0]
    assert await ask("Edit", {"file_path": "b.py", "old_string": "a", "new_string": "b"}, ASK)
    assert len(term.shown) == 1  # the edit was not asked
    assert await ask("Bash", {"command": "make deploy"}, ASK)
    assert len(term.shown) == 2  # a command still asks
    assert "for this session" not in term.shown[1]
    assert not local_settings_path(tmp_path).exists()  # a session answer is not saved
    # outside the workspace an edit is not covered (acceptEdits would not allow it either)
    outside = make_asker(Settings(), tmp_path, "default", echo=term.echo, read=lambda _: "n")
    assert not await outside("Write", {"file_path": "/etc/x", "content": "x"}, ASK)
    assert "for this session" not in term.shown[-1]


@pytest.mark.anyio
async def test_a_prefix_rule_is_saved_and_allows_the_same_command_with_other_arguments(
    tmp_path: Path,
) -> None:
    term = Terminal("3")
    ask = make_asker(Settings(), tmp_path, "default", echo=term.echo, read=term.read)
    assert await ask("Bash", {"command": "make deploy --env staging"}, ASK)
    assert "3. yes, always for commands starting so (saves Bash(make deploy:*))" in term.shown[0]
    assert json.loads(local_settings_path(tmp_path).read_text()) == {
        "permissions": {"allow": ["Bash(make deploy:*)"]}
    }
    assert await ask("Bash", {"command": "make deploy --env prod"}, ASK)
    assert len(term.shown) == 1  # not asked again


@pytest.mark.anyio
async def test_always_is_not_offered_where_a_rule_cannot_allow(tmp_path: Path) -> None:
    term = Terminal("2")
    settings = Settings(rules=PermissionRules.from_lists(ask=["Bash(git push:*)"]))
    ask = make_asker(settings, tmp_path, "default", echo=term.echo, read=term.read)
    assert not await ask("Bash", {"command": "git push"}, ASK)
    assert "always" not in term.shown[0]
    assert not local_settings_path(tmp_path).exists()
