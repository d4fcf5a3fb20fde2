"""Differential test: the simple commands the parser finds are the ones real bash runs.

Each line runs under `bash --norc --noprofile -c` in a temporary directory whose PATH starts with
shim scripts (`qa` ... `qh`, and `qfail`, which exits 1). A shim appends its argv to a trace file
and prints nothing, so the trace is exactly what bash executed, through chains, substitutions,
heredocs, `sh -c`, `eval`, `xargs`, `find -exec` and wrappers. The lines are chosen so every branch
runs, which makes the comparison two-sided:

- every command bash ran is one the parser found (soundness: nothing runs unseen), and
- every shim command the parser found with literal words ran in bash, with those exact words
  (skipped for a line tree-sitter cannot parse: that line asks, and its recovery over-approximates).

Words only known at run time (`$(…)`, `$i`, what `xargs` appends) are compared by command name; a
command whose name is itself only known at run time stands for any one command.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from foldline.tools._shell import SimpleCommand, parse_command

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")

SHIMS = (*(f"q{c}" for c in "abcdefgh"), "qfail")
_SHIM = """#!/bin/sh
line=$(printf '%s\\037' "${0##*/}" "$@")
printf '%s\\036' "$line" >> "$FOLDLINE_TRACE"
"""

# a process substitution runs in the background: `wait $!` makes bash wait for it before exiting,
# and `{ qa; } > >(qc)` puts the redirection in this shell, where `$!` can see it
CASES = [
    "qa; qb", "qa && qb 1", "qfail || qb", "qa | qb", "qa |& qb", "qa & qb; wait", "qa\nqb x",
    "qa \\\n x; qb", "(qa; (qb))", "{ qa; qb; }", "! qa", "qa 'a;b' \"c && d\" e\\;f", "qa # qb",
    "qa $(qb x)", "qa `qb y`", "qa \"x $(qb 'z w') y\"", "qa $(qb $(qc))", "qa <(qb); wait $!",
    "{ qa; } > >(qc); wait $!",
    "x=$(qa) qb", "X=1 qa", "qa $((1 + 2))", "echo $(qa # )\nqb)", "qa \"$(qb)\" $(qc)",
    "sh -c 'qa; qb 1'", "bash -c 'qa && qb'", "bash -ec 'qa'", "sh -c -- 'qa x'", "bash -o errexit -c qa",
    "sh -c \"bash -c 'qa 2'\"", "eval 'qa 1; qb 2'", "eval qa 'x y'", "trap 'qa' EXIT",
    "trap 'qb t' EXIT; qa",
    "timeout 5 qa 1", "timeout -k 1 5 qa", "nice -n 5 qa", "nice qa", "env X=1 qa", "env -u X qa y",
    "nohup qa 2>/dev/null", "setsid -w qa", "stdbuf -oL qa", "command qa", "exec qa z",
    "timeout 5 nice -n 1 env A=1 qa", "echo x | xargs qa", "echo x | xargs -I{} qa {} y",
    "echo x | xargs -0 qa", "printf 'a\\nb\\n' | xargs -n 1 qa", "find . -maxdepth 0 -exec qa {} \\;",
    "find . -maxdepth 0 -execdir qa {} +", "find . -maxdepth 0 -exec sh -c 'qb' \\;",
    "cat <<EOF | qa\nx\nEOF", "qa <<EOF && qb\nx\nEOF", "qa <<'EOF'\n$(qb)\nEOF", "qa <<EOF\n$(qb)\nEOF",
    "qa <<EOF\n`qb`\nEOF\nqc", "qa <<< $(qb)", "for i in 1 2; do qa $i; done", "for i in $(qa); do :; done",
    "if qa; then qb; fi", "if qfail; then :; else qb; fi", "while qfail; do :; done; qa",
    "case x in x) qa;; esac", "case $(qa) in *) qb;; esac", "f() { qa; }; f", "qa {1..2}", "q{a,b}",
    "qa *.none", "qa ~/x", "$'q\\x61' x", "q\\\na x", "q\\\nb y", "[[ $(qa) ]]", "[ -n \"$(qa)\" ]",
    "test -z $(qa)", "local_x=1; qa $local_x", "qa 2>&1 >/dev/null | qb", "{ qa; } > /dev/null",
    "(cd / && qa)", "qa & wait", "coproc qa; wait", "time qa", "qa && { qfail || qb; }",
    "qa $(echo $(qb) | qc)", "declare x=$(qa)", "export Y=$(qa)", "echo ${Z:-$(qa)}", "qa '$(qb)'",
    "qa \"\\$(qb)\"", "qa $'\\'$(qb)\\''", "qa <<-EOF\n\t$(qb)\n\tEOF", "qa <<EOF\n EOF\nEOF\nqb",
    "qa <<-EOF\n\tEOF\nqb", "qa <<EOF\nEOF \nEOF\nqb", "qa <<EOF\n`qb 'x'` $(qc \"y\")\nEOF",
    "qa <<EOF\n${X:-$(qb)}\nEOF", "qa <<EOF\n\\$(qb) \\`qc\\`\nEOF\nqd",
    # reserved words tree-sitter reads as plain words after `time`, `!` and `coproc`
    "time { qa; }", "time -p { qa x; }", "! { qa; }", "time ! qa", "coproc { qa; }; wait",
    "coproc NAME { qa y; }; wait", "time for i in 1; do qa $i; done",
]  # fmt: skip


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bash")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name in SHIMS:
        shim = bin_dir / name
        shim.write_text(_SHIM + ("exit 1\n" if name == "qfail" else ""))
        shim.chmod(0o755)
    return root


def ran_in_bash(line: str, root: Path) -> list[tuple[str, ...]]:
    trace = root / "trace"
    trace.write_text("")
    env = {"PATH": f"{root / 'bin'}:/usr/bin:/bin", "HOME": str(root), "FOLDLINE_TRACE": str(trace)}
    assert BASH is not None
    subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", line], cwd=root, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False,
    )  # fmt: skip
    records = trace.read_text().split("\x1e")
    return [tuple(r.split("\x1f")[:-1]) for r in records if r]


def found_by_parser(line: str) -> list[SimpleCommand]:
    return [
        c
        for c in parse_command(line).commands
        if c.words and (c.dynamic[0] or os.path.basename(c.words[0]) in SHIMS)
    ]


def _covers(cmd: SimpleCommand, argv: tuple[str, ...], home: Path) -> bool:
    if cmd.dynamic[0]:
        return True
    if any(cmd.dynamic):
        return cmd.name == argv[0]
    # the parser leaves `~` to the path checks, which expand it; bash expands it before running
    return tuple(str(home) + w[1:] if w.startswith("~/") else w for w in cmd.words) == argv


@pytest.mark.parametrize("line", CASES)
def test_parser_finds_what_bash_runs(line: str, sandbox: Path) -> None:
    ran = ran_in_bash(line, sandbox)
    found = found_by_parser(line)
    assert ran, "the line ran no shim: the case tests nothing"
    unseen = [argv for argv in ran if not any(_covers(c, argv, sandbox) for c in found)]
    assert not unseen, f"bash ran {unseen}, the parser found {[c.words for c in found]}"
    if "the command does not parse as bash" in parse_command(line).problems:
        return  # it asks; what tree-sitter recovers from a parse error is a superset at best
    never_ran = [c.words for c in found if not any(_covers(c, argv, sandbox) for argv in ran)]
    assert not never_ran, f"the parser found {never_ran}, bash ran {ran}"


def test_the_shims_trace_exact_argv(sandbox: Path) -> None:
    assert ran_in_bash("qa 'x y' '' z", sandbox) == [("qa", "x y", "", "z")]
    assert ran_in_bash("qfail || qb", sandbox) == [("qfail",), ("qb",)]
