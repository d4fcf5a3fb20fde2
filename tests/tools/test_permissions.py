"""The permission suite: rules x modes x bypass attempts, each denied or asked, counterparts allowed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.tools.conftest import fill

from foldline.errors import UserError
from foldline.tools import (
    BashTool,
    Decision,
    PermissionMode,
    PermissionRules,
    Rule,
    ToolContext,
    authorize,
    check_permission,
)
from foldline.tools.permissions import MAX_SUBCOMMANDS, bash_rule_matches, is_protected_path, permission_gate


@dataclass(frozen=True)
class Case:
    id: str
    tool: str
    tool_input: dict[str, Any]
    expected: str
    mode: PermissionMode = "default"
    allow: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, str]:
    """tmp/app (the workspace), tmp/app2 (a sibling with a shared prefix), tmp/outside, and links."""
    app, app2, outside = tmp_path / "app", tmp_path / "app2", tmp_path / "outside"
    for d in (app / "docs", app / "src", app / ".git", app2, outside):
        d.mkdir(parents=True)
    (outside / "target.txt").write_text("not yours")
    (app / "secret.txt").write_text("s3cret")
    (app / "link_out").symlink_to(outside)
    (app / "docs" / "evil").symlink_to(outside / "target.txt")
    (app / "alias.txt").symlink_to(app / "secret.txt")
    return {"ws": str(app), "ws2": str(app2), "out": str(outside), "tmp": str(tmp_path)}


def _decide(case: Case, layout: Mapping[str, str]) -> Decision:
    rules = PermissionRules.from_lists(
        allow=fill(case.allow, layout), ask=fill(case.ask, layout), deny=fill(case.deny, layout)
    )
    cwd = case.extra.get("cwd")
    ctx = ToolContext(workspace=Path(layout["ws"]), cwd=Path(fill(cwd, layout)) if cwd else None)
    return check_permission(case.tool, fill(case.tool_input, layout), ctx, rules, case.mode)


def bash(id: str, command: str, expected: str, **kw: Any) -> Case:
    return Case(id, "Bash", {"command": command}, expected, **kw)


GIT_LOG = ("Bash(git log:*)",)
CHAINS = [
    bash("allowed-exact", "git log", "allow", allow=GIT_LOG),
    bash("allowed-args", "git log --oneline -5", "allow", allow=GIT_LOG),
    bash("space-star-form", "git log -p", "allow", allow=("Bash(git log *)",)),
    bash("word-boundary", "git logx", "ask", allow=GIT_LOG),
    bash("semicolon", "git log; rm -rf x", "ask", allow=GIT_LOG),
    bash("and", "git log && rm -rf x", "ask", allow=GIT_LOG),
    bash("or", "git log || rm -rf x", "ask", allow=GIT_LOG),
    bash("pipe", "git log | sh", "ask", allow=GIT_LOG),
    bash("pipe-stderr", "git log |& rm x", "ask", allow=GIT_LOG),
    bash("background", "git log & rm x", "ask", allow=GIT_LOG),
    bash("newline", "git log\nrm -rf x", "ask", allow=GIT_LOG),
    bash("subshell", "(git log) ; { rm x; }", "ask", allow=GIT_LOG),
    bash("all-parts-allowed", "git log | grep fix && git log -1", "allow", allow=(*GIT_LOG, "Bash(grep:*)")),
    bash("quoted-separator-is-data", "git log --grep 'a; rm -rf x'", "allow", allow=GIT_LOG),
    bash("escaped-separator-is-data", "git log a\\;rm", "allow", allow=GIT_LOG),
    bash("comment-is-ignored", "git log # ; rm -rf x", "allow", allow=GIT_LOG),
]
SUBSTITUTIONS = [
    bash("dollar-paren", "git log $(rm -rf x)", "ask", allow=GIT_LOG),
    bash("dollar-paren-in-double-quotes", 'git log "$(rm -rf x)"', "ask", allow=GIT_LOG),
    bash("dollar-paren-in-single-quotes-is-data", "git log '$(rm -rf x)'", "allow", allow=GIT_LOG),
    bash("backticks", "git log `rm -rf x`", "ask", allow=GIT_LOG),
    bash("process-substitution", "git log <(rm -rf x)", "ask", allow=GIT_LOG),
    bash("nested-substitution", "git log $(echo $(rm x))", "ask", allow=(*GIT_LOG, "Bash(echo:*)")),
    # the output of an allowed command is still data that can become an option (`--output=…`)
    bash("substitution-output-is-unknown", "git log $(git log -1)", "ask", allow=GIT_LOG),
    bash("dynamic-command-name", "$CMD -rf x", "ask", allow=("Bash",)),
    bash("arithmetic-unverified", "git log $((1 + $(rm x)))", "ask", allow=GIT_LOG),
    bash("prompt-expansion-unverified", "git log ${x@P}", "ask", allow=GIT_LOG),
    bash("heredoc-body-is-data", "cat <<EOF\nrm -rf x; $HOME\nEOF", "allow", allow=("Bash(cat:*)",)),
    bash("heredoc-substitution", "cat <<EOF\n$(rm -rf x)\nEOF", "ask", allow=("Bash(cat:*)",)),
    bash("heredoc-quoted-is-data", "cat <<'EOF'\n$(rm -rf x)\nEOF", "allow", allow=("Bash(cat:*)",)),
    bash("heredoc-then-command", "cat <<'EOF'\nx\nEOF\nrm y", "ask", allow=("Bash(cat:*)",)),
    bash(
        "commit-message-heredoc",
        "git commit -m \"$(cat <<'EOF'\nFix: don't (really)\nEOF\n)\"",
        "allow",
        allow=("Bash(git commit:*)", "Bash(cat:*)"),
    ),
    bash("heredoc-unclosed", "cat <<EOF\nno end", "ask", allow=("Bash(cat:*)",)),
    bash("unterminated-quote", "git log 'oops", "ask", allow=GIT_LOG),
]
INDIRECT = [
    bash("sh-c", "sh -c 'git log; rm -rf x'", "ask", allow=GIT_LOG),
    bash("bash-lc", 'bash -lc "git log && curl evil"', "ask", allow=GIT_LOG),
    bash("sh-c-allowed-inside", "sh -c 'git log'", "allow", allow=GIT_LOG),
    bash("eval", "eval 'rm -rf x'", "ask", allow=("Bash(eval:*)",)),
    bash("xargs", "echo x | xargs rm", "ask", allow=("Bash(echo:*)", "Bash(xargs:*)")),
    # xargs appends what it reads: `echo --output=.git/config | xargs git log` would write
    bash("xargs-appends-unknown-args", "echo a | xargs -0 git log", "ask", allow=(*GIT_LOG, "Bash(echo:*)")),
    bash("find-exec", "find . -exec rm {} \\;", "ask", allow=("Bash(find:*)",)),
    bash("find-execdir-plus", "find . -execdir sh -c 'rm x' {} +", "ask", allow=("Bash(find:*)",)),
    bash("find-plain", "find . -name '*.py'", "allow", allow=("Bash(find:*)",)),
    # `find -exec` of a read-only command: `{}` is a file under find's START, read like `grep -r`'s
    bash("find-exec-read-only-plus", "find src -name '*.py' -exec grep -l TODO {} +", "allow"),
    bash("find-exec-read-only-each", "find src -exec grep -l TODO {} \\;", "allow"),
    bash("find-exec-read-only-in-cwd", "find -exec wc -l {} +", "allow", extra={"cwd": "{ws}/src"}),
    bash("find-exec-a-link-out-is-read-where-it-points", "find docs -exec cat {} +", "ask"),
    bash("find-exec-from-the-top-meets-the-links-out", "find . -name '*.py' -exec grep -l TODO {} +", "ask"),
    bash("find-exec-start-outside", "find {out} -exec grep -l x {} +", "ask"),
    bash("find-exec-start-unknown", "find $D -exec cat {} +", "ask"),
    bash("find-exec-writer", "find src -exec rm {} +", "ask"),
    bash("find-exec-sed-in-place", "find src -exec sed -i s/a/b/ {} +", "ask"),
    bash("find-exec-brace-inside-a-word", "find src -exec cat {}.bak \\;", "ask"),
    bash("find-exec-wrapped", "find src -exec sh -c 'cat $1' sh {} \\;", "ask"),
    bash("find-execdir-read-only", "find src -execdir grep -l TODO {} +", "ask"),
    bash("timeout-wrapper", "timeout -s KILL 5 git log", "allow", allow=GIT_LOG),
    bash("wrapper-stack", "nice -n 5 nohup env LC_ALL=C time git log", "allow", allow=GIT_LOG),
    bash("wrapper-stack-unknown-variable", "nice -n 5 nohup env A=1 time git log", "ask", allow=GIT_LOG),
    bash("wrapper-hides-rm", "timeout 5 rm -rf x", "ask", allow=GIT_LOG),
    bash("watch", "watch -n 1 'rm x'", "ask", allow=("Bash(watch:*)",)),
    bash("risky-env", "PATH=/tmp/evil:$PATH git log", "ask", allow=GIT_LOG),
    bash("risky-env-via-env", "env LD_PRELOAD=/x.so git log", "ask", allow=GIT_LOG),
    bash("git-c-is-not-git-log", "git -c core.pager=sh log", "ask", allow=GIT_LOG),
]
DENY_RM = {"allow": ("Bash",), "deny": ("Bash(rm:*)",)}
DENIES = [
    bash("deny-in-chain", "git log; rm -rf x", "deny", **DENY_RM),
    bash("deny-through-timeout", "timeout 5 rm x", "deny", **DENY_RM),
    bash("deny-absolute-binary", "/bin/rm x", "deny", **DENY_RM),
    bash("deny-in-sh-c", "sh -c 'rm x'", "deny", **DENY_RM),
    bash("deny-in-substitution", "echo $(rm x)", "deny", **DENY_RM),
    bash("deny-in-find-exec", "find . -exec rm {} +", "deny", **DENY_RM),
    bash("deny-via-xargs", "ls | xargs rm", "deny", **DENY_RM),
    bash("deny-via-eval", 'eval "rm -rf /"', "deny", **DENY_RM),
    bash("deny-unrelated-allowed", "echo ok", "allow", **DENY_RM),
    bash("deny-wins-in-bypass", "rm x", "deny", mode="bypassPermissions", deny=("Bash(rm:*)",)),
    bash("ask-rule-beats-allow", "git push", "ask", allow=("Bash",), ask=("Bash(git push:*)",)),
    bash("read-deny-covers-cat", "cat .env", "deny", allow=("Bash(cat:*)",), deny=("Read(**/.env)",)),
    bash("read-deny-other-file", "cat README", "allow", allow=("Bash(cat:*)",), deny=("Read(**/.env)",)),
    bash("plain-prefix-star", "lsof -i", "allow", allow=("Bash(ls*)",)),
    bash("word-star-not-prefix", "lsof -i", "ask", allow=("Bash(ls *)",)),
    bash("exact-rule", "npm  test", "allow", allow=("Bash(npm test)",)),
    bash("exact-rule-no-extra-args", "npm test --watch", "ask", allow=("Bash(npm test)",)),
    bash("middle-wildcard", "git push origin main", "allow", allow=("Bash(git push * main)",)),
]
ECHO = ("Bash(echo:*)",)
REDIRECTS = [
    # acceptEdits would allow a plain write inside the workspace: each ask below is the path's doing
    # a redirection is a write: the same policy as the Write tool
    bash("redirect-inside-default-asks", "echo x > out.txt", "ask", allow=ECHO),
    bash("redirect-inside-accept-edits", "echo x > out.txt", "allow", allow=ECHO, mode="acceptEdits"),
    bash("redirect-inside-edit-rule", "echo x > out.txt", "allow", allow=(*ECHO, "Edit(./**)")),
    bash("redirect-dev-null", "echo x > /dev/null 2>&1", "allow", allow=ECHO),
    bash("redirect-into-git", "echo x > .git/config", "ask", allow=ECHO, mode="acceptEdits"),
    bash("append-to-bashrc", "echo x >> ~/.bashrc", "ask", allow=ECHO, mode="acceptEdits"),
    bash("stderr-into-foldline", "echo x 2> .foldline/log", "ask", allow=ECHO, mode="acceptEdits"),
    bash(
        "both-into-claude-quoted", 'echo x &> ".claude/settings.json"', "ask", allow=ECHO, mode="acceptEdits"
    ),
    bash(
        "tee-into-hooks",
        "echo x | tee .git/hooks/pre-commit",
        "ask",
        allow=(*ECHO, "Bash(tee:*)"),
        mode="acceptEdits",
    ),
    bash("dd-of-outside", "echo x | dd of=../escape", "ask", allow=(*ECHO, "Bash(dd:*)"), mode="acceptEdits"),
    bash("redirect-outside", "echo x > ../app2/x", "ask", allow=ECHO, mode="acceptEdits"),
    bash("cd-then-redirect", "cd .git && echo x > config", "ask", allow=ECHO, mode="acceptEdits"),
    bash("dynamic-target", 'echo x > "$HOME/.bashrc"', "ask", allow=ECHO, mode="acceptEdits"),
    bash("edit-deny-covers-redirect", "echo x > src/a.py", "deny", allow=ECHO, deny=("Edit(./src/**)",)),
    bash("protected-in-bypass", "echo x > .git/config", "ask", mode="bypassPermissions"),
    bash(
        "read-redirect-denied",
        "cat < secret.txt",
        "deny",
        allow=("Bash(cat:*)",),
        deny=("Read(./secret.txt)",),
    ),
]
MANY = [
    bash("over-50-denied", "true; " * MAX_SUBCOMMANDS + "git log", "deny", allow=(*GIT_LOG, "Bash(true)")),
    bash("over-50-denied-in-bypass", "true; " * MAX_SUBCOMMANDS + "true", "deny", mode="bypassPermissions"),
    bash("exactly-50-allowed", "true; " * (MAX_SUBCOMMANDS - 1) + "true", "allow", allow=("Bash(true)",)),
]
MODES = [
    bash("plan-denies-bash", "git log", "deny", mode="plan", allow=GIT_LOG),
    bash("bypass-allows-unmatched", "make deploy", "allow", mode="bypassPermissions"),
    bash("default-asks-unmatched", "make deploy", "ask"),
    bash("accept-edits-is-not-for-commands", "make deploy", "ask", mode="acceptEdits"),
    bash("allow-needs-the-literal-binary", "/tmp/evil/git log", "ask", allow=GIT_LOG),
    bash("bypass-still-asks-unverifiable", "echo $((1 + 2))", "ask", mode="bypassPermissions"),
]


def read(id: str, path: str, expected: str, tool: str = "Read", **kw: Any) -> Case:
    key = "file_path" if tool in ("Read", "Write", "Edit") else "path"
    return Case(
        id,
        tool,
        {key: path, "pattern": "x", "content": "", "old_string": "a", "new_string": "b"},
        expected,
        **kw,
    )


PATHS = [
    read("read-inside", "{ws}/src/a.py", "allow"),
    read("read-relative-inside", "src/a.py", "allow"),
    read("read-outside-asks", "{out}/target.txt", "ask"),
    read("read-sibling-prefix", "{ws2}/x", "ask"),
    read("read-dotdot-escape", "src/../../outside/target.txt", "ask"),
    read("read-through-symlink-out", "link_out/target.txt", "ask"),
    read("grep-outside", "{out}", "ask", tool="Grep"),
    read("grep-inside", "src", "allow", tool="Grep"),
    Case("glob-pattern-escapes", "Glob", {"pattern": "../outside/*"}, "ask"),
    Case("glob-absolute-pattern", "Glob", {"pattern": "{out}/*"}, "ask"),
    Case("glob-inside", "Glob", {"pattern": "src/**/*.py"}, "allow"),
    read("deny-beats-allow", "{ws}/.env", "deny", allow=("Read",), deny=("Read(**/.env)",)),
    read("deny-bare-name-any-depth", "{ws}/src/deep/.env", "deny", deny=("Read(.env)",)),
    read("deny-through-symlink", "alias.txt", "deny", deny=("Read(./secret.txt)",)),
    read("deny-dir-covers-contents", "src/a.py", "deny", deny=("Read(./src)",)),
    read("deny-absolute-rule", "{out}/target.txt", "deny", deny=("Read(//{out}/**)",)),
    read("allow-rule-outside", "{out}/target.txt", "allow", allow=("Read(//{out}/**)",)),
    read("allow-rule-no-sibling-prefix", "{ws2}/x", "ask", allow=("Read(//{ws}/**)",)),
    read("tool-glob-deny", "src/a.py", "deny", deny=("*",)),
    read("write-default-asks", "src/a.py", "ask", tool="Write"),
    read("write-accept-edits", "src/a.py", "allow", tool="Write", mode="acceptEdits"),
    read("edit-accept-edits", "src/a.py", "allow", tool="Edit", mode="acceptEdits"),
    read("write-outside-accept-edits", "{out}/new.txt", "ask", tool="Write", mode="acceptEdits"),
    read("write-sibling-prefix", "{ws2}/new.txt", "ask", tool="Write", mode="acceptEdits"),
    read("write-dotdot", "docs/../../app2/x", "ask", tool="Write", mode="acceptEdits"),
    read("write-symlink-dir-out", "link_out/new.txt", "ask", tool="Write", mode="acceptEdits"),
    read("write-plan-denied", "src/a.py", "deny", tool="Write", mode="plan", allow=("Write",)),
    read("edit-plan-denied", "src/a.py", "deny", tool="Edit", mode="plan"),
    read("read-plan-allowed", "src/a.py", "allow", mode="plan"),
    read("write-bypass", "{out}/new.txt", "allow", tool="Write", mode="bypassPermissions"),
    read("write-git-bypass-asks", ".git/config", "ask", tool="Write", mode="bypassPermissions"),
    read("write-missing-claude-settings", ".claude/settings.json", "ask", tool="Write", mode="acceptEdits"),
    read("write-shell-rc", "~/.zshrc", "ask", tool="Edit", mode="bypassPermissions"),
    read("protected-beats-allow", ".git/config", "ask", tool="Edit", allow=("Edit",)),
    read(
        "edit-deny-covers-write",
        "src/x.py",
        "deny",
        tool="Write",
        mode="acceptEdits",
        deny=("Edit(./src/**)",),
    ),
    read("allow-rule-not-borrowed-by-symlink", "docs/evil", "ask", tool="Write", allow=("Edit(./docs/**)",)),
    read("allow-rule-inside", "docs/ok.md", "allow", tool="Write", allow=("Edit(./docs/**)",)),
    read("allow-rule-not-sibling-dir", "docsx/ok.md", "ask", tool="Write", allow=("Edit(./docs/**)",)),
    read(
        "ask-rule-beats-accept-edits",
        "docs/a.md",
        "ask",
        tool="Edit",
        mode="acceptEdits",
        ask=("Edit(/docs)",),
    ),
]
CWD = [
    # the model moved the cwd outside: relative paths follow it, the boundary does not
    read("cwd-out-write-asks", "new.txt", "ask", tool="Write", mode="acceptEdits", extra={"cwd": "{out}"}),
    read("cwd-out-read-inside-allowed", "{ws}/src/a.py", "allow", extra={"cwd": "{out}"}),
    Case(
        "cwd-in-tool-input-ignored",
        "Write",
        {"file_path": "new.txt", "content": "", "cwd": "{ws}"},
        "ask",
        mode="acceptEdits",
        extra={"cwd": "{out}"},
    ),
    bash("cd-out-then-write", "cd {out} && echo x > f", "ask", allow=ECHO, mode="acceptEdits"),
    bash("cwd-out-bash-redirect", "echo x > f", "ask", allow=ECHO, extra={"cwd": "{out}"}),
    # where these leave the shell is only known at run time: a relative path after them cannot be
    # checked, even against a deny rule, so it asks
    bash(
        "cd-dynamic-then-write",
        'cd "$HOME"/../.. && echo x > f',
        "ask",
        allow=(*ECHO, "Bash(cd:*)"),
        mode="acceptEdits",
    ),
    bash(
        "cd-back-then-write",
        "cd {out} && cd - && echo x > f",
        "ask",
        deny=("Edit(./f)",),
        mode="bypassPermissions",
    ),
    bash(
        "popd-then-write",
        "pushd {out} && popd && echo x > f",
        "ask",
        deny=("Edit(./f)",),
        mode="bypassPermissions",
    ),
    bash(
        "cd-dynamic-then-read-still-denied",
        'cd "$D" && cat secret.txt',
        "deny",
        allow=("Bash(cat:*)", "Bash(cd:*)"),
        deny=("Read(./secret.txt)",),
    ),
    bash(
        "cd-dynamic-then-read-asks",
        'cd "$D" && cat notes.txt',
        "ask",
        allow=("Bash(cat:*)", "Bash(cd:*)"),
        deny=("Read(./secret.txt)",),
        mode="bypassPermissions",
    ),
    bash(
        "cd-dynamic-then-absolute",
        'cd "$D" && echo x > {ws}/f',
        "deny",
        deny=("Edit(./f)",),
        mode="bypassPermissions",
    ),
    bash(
        "cd-back-then-absolute-allowed",
        "cd {out} && cd - && echo x > {ws}/f",
        "allow",
        mode="bypassPermissions",
    ),
]
OTHER = [
    Case("snip-always", "Snip", {"ids": ["a"]}, "allow", mode="plan"),
    Case("snip-denied-by-rule", "Snip", {"ids": ["a"]}, "deny", deny=("Snip",)),
    Case("unknown-tool-asks", "WebFetch", {"url": "x"}, "ask"),
    Case("unknown-tool-allowed", "WebFetch", {"url": "x"}, "allow", allow=("WebFetch",)),
    Case("unknown-tool-plan", "WebFetch", {"url": "x"}, "deny", mode="plan", allow=("WebFetch",)),
    Case("read-without-path", "Read", {}, "deny"),
    Case("bash-without-command", "Bash", {"cmd": "ls"}, "deny"),
]
ALL = CHAINS + SUBSTITUTIONS + INDIRECT + DENIES + REDIRECTS + MANY + MODES + PATHS + CWD + OTHER


@pytest.mark.parametrize("case", ALL, ids=[c.id for c in ALL])
def test_permission(case: Case, layout: dict[str, str]) -> None:
    decision = _decide(case, layout)
    assert decision.behavior == case.expected, decision
    assert decision.reason


def test_ids_are_unique() -> None:
    assert len({c.id for c in ALL}) == len(ALL)


def test_decisions_name_the_rule_and_reason(layout: dict[str, str]) -> None:
    decision = _decide(bash("x", "git log; rm -rf /", "deny", **DENY_RM), layout)
    assert decision.rule == "Bash(rm:*)"
    assert "rm -rf /" in decision.reason
    too_many = _decide(MANY[0], layout)
    assert f"limit of {MAX_SUBCOMMANDS}" in too_many.reason


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("Bash(git log:*)", Rule("Bash", "git log:*")),
        ("Read", Rule("Read")),
        ("Bash(*)", Rule("Bash")),
        ("  Edit( ./src/** ) ", Rule("Edit", "./src/**")),
        ("Bash(echo (a))", Rule("Bash", "echo (a)")),
    ],
)
def test_rule_parse(text: str, rule: Rule) -> None:
    assert Rule.parse(text) == rule


@pytest.mark.parametrize("text", ["", "Bash()", "not a rule", "Bash(unclosed"])
def test_rule_parse_rejects(text: str) -> None:
    with pytest.raises(UserError, match="not a permission rule"):
        Rule.parse(text)


@pytest.mark.parametrize(
    ("spec", "command", "matches"),
    [
        ("git log:*", "git log", True),
        ("git log:*", "git logs", False),
        ("git log *", "git log", True),
        ("git log", "git log", True),
        ("git log", "git log -1", False),
        ("ls*", "lsof", True),
        ("* --version", "node --version", True),
        ("git commit -m 'a b':*", "git commit -m 'a b' --amend", True),
    ],
)
def test_bash_rule_matching(spec: str, command: str, matches: bool) -> None:
    assert bash_rule_matches(spec, command) is matches


@pytest.mark.parametrize(
    ("path", "protected"),
    [
        ("/w/.git/hooks/pre-commit", True),
        ("/w/.foldline/settings.json", True),
        ("/home/u/.bashrc", True),
        ("/home/u/.ssh/authorized_keys", True),
        ("/w/src/git.py", False),
        ("/w/.gitignore", False),
    ],
)
def test_protected_paths(path: str, protected: bool) -> None:
    assert is_protected_path(Path(path)) is protected


# --- authorize: settling `ask` through the callback ---------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("answer", "expected"), [(True, "allow"), (False, "deny")])
async def test_authorize_asks_the_callback(layout: dict[str, str], answer: bool, expected: str) -> None:
    asked: list[tuple[str, Decision]] = []

    async def ask(tool: str, tool_input: Mapping[str, Any], decision: Decision) -> bool:
        asked.append((tool, decision))
        return answer

    ctx = ToolContext(workspace=Path(layout["ws"]))
    decision = await authorize("Bash", {"command": "make"}, ctx, None, "default", ask)
    assert decision.behavior == expected
    assert [(tool, d.behavior) for tool, d in asked] == [("Bash", "ask")]


@pytest.mark.anyio
async def test_authorize_without_callback_denies_and_never_asks_for_decided_calls(
    layout: dict[str, str],
) -> None:
    async def never(tool: str, tool_input: Mapping[str, Any], decision: Decision) -> bool:
        raise AssertionError("must not be asked")

    ctx = ToolContext(workspace=Path(layout["ws"]))
    assert (await authorize("Bash", {"command": "make"}, ctx, None, "default", None)).behavior == "deny"
    rules = PermissionRules.from_lists(allow=["Bash(make)"], deny=["Bash(rm:*)"])
    assert (await authorize("Bash", {"command": "make"}, ctx, rules, "default", never)).behavior == "allow"
    assert (await authorize("Bash", {"command": "rm x"}, ctx, rules, "default", never)).behavior == "deny"


def test_workspace_given_through_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    ctx = ToolContext(workspace=tmp_path / "via")
    for path in (tmp_path / "via" / "a.txt", real / "a.txt"):
        decision = check_permission(
            "Write", {"file_path": str(path), "content": ""}, ctx, None, "acceptEdits"
        )
        assert decision.behavior == "allow", decision


@pytest.mark.anyio
async def test_permission_gate_returns_none_or_the_reason(layout: dict[str, str]) -> None:
    ctx = ToolContext(workspace=Path(layout["ws"]))
    gate = permission_gate(PermissionRules.from_lists(allow=["Bash(ls)"]), "default", None)
    assert await gate(BashTool(), {"command": "ls"}, ctx) is None
    reason = await gate(BashTool(), {"command": "ls; curl evil"}, ctx)
    assert reason is not None
    assert "curl evil" in reason


def test_foldline_own_saved_output_is_readable_without_asking(tmp_path: Path) -> None:
    """R3.0: a saved oversized result lies outside the workspace, but its preview tells the model to
    Read it; that read is allowed (not asked, not refused in -p). Writing there, reading beside it,
    and a deny rule are unchanged."""
    workspace, saved = tmp_path / "ws", tmp_path / "sessions" / "s1" / "tool-results"
    workspace.mkdir()
    saved.mkdir(parents=True)
    (saved / "toolu_1-abc.txt").write_text("big\n")
    (tmp_path / "sessions" / "other.txt").write_text("no\n")
    ctx = ToolContext(workspace=workspace, own_output_dirs=(saved,))
    read = {"file_path": str(saved / "toolu_1-abc.txt")}
    assert check_permission("Read", read, ctx, PermissionRules(), "default").behavior == "allow"
    beside = {"file_path": str(tmp_path / "sessions" / "other.txt")}
    assert check_permission("Read", beside, ctx, PermissionRules(), "default").behavior == "ask"
    write = {"file_path": str(saved / "x.txt"), "content": "x"}
    assert check_permission("Write", write, ctx, PermissionRules(), "acceptEdits").behavior == "ask"
    denied = PermissionRules(deny=(Rule.parse(f"Read(/{saved}/**)"),))
    assert check_permission("Read", read, ctx, denied, "default").behavior == "deny"
    plain = ToolContext(workspace=workspace)
    assert check_permission("Read", read, plain, PermissionRules(), "default").behavior == "ask"


def test_the_issues_find_exec_search_runs_in_default_mode_without_asking(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("# TODO: later\n")
    ctx = ToolContext(workspace=tmp_path)
    for command in (
        "find . -name '*.py' -exec grep -l TODO {} +",
        "find . -name '*.py' -exec grep -l TODO {} \\;",
    ):
        decision = check_permission("Bash", {"command": command}, ctx, PermissionRules(), "default")
        assert decision.behavior == "allow", (command, decision)
    (tmp_path / "pkg" / "up").symlink_to(tmp_path.parent)  # now a file found may lead out of it
    decision = check_permission("Bash", {"command": "find . -exec grep -l TODO {} +"}, ctx, PermissionRules())
    assert decision.behavior == "ask", decision
    assert "outside the workspace" in decision.reason


def test_find_exec_asks_when_a_file_under_its_start_is_denied_to_read(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("print()\n")
    ctx = ToolContext(workspace=tmp_path)
    command = {"command": "find pkg -name '*.py' -exec cat {} +"}
    for allow in ((), ("Bash(cat:*)",)):  # an allow rule for the reader does not lift a read deny
        rules = PermissionRules.from_lists(allow=allow, deny=("Read(**/.env)",))
        assert check_permission("Bash", command, ctx, rules).behavior == "allow"  # nothing denied there
        (tmp_path / "pkg" / ".env").write_text("KEY=1\n")
        decision = check_permission("Bash", command, ctx, rules)
        assert decision.behavior == "ask", decision
        assert ".env" in decision.reason
        (tmp_path / "pkg" / ".env").unlink()
