"""Citations stay inside the repository, and every id they cite exists in docs/design.md.

Docstrings and comments cite requirements (`R3.2.4`, `design.md §4.2`), API rules (`A39`), caching
behaviours (`P7`), failure families (`F11`) and Claude Code transcript facts (`T3`). These tests
fail when a citation points at a document users never see, or at an id design.md does not define.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"

# Documents that lived beside the repository, never in it. Spelled in pieces so that this file
# does not match itself.
_OUTSIDE = re.compile(
    "|".join(
        [
            r"SPEC(\.md|'s| §| R\d| order| step)",
            "api_" + "rules",
            "reliability" + r"\.md",
            "landscape" + r"\.md",
            "session_" + "stats",
            "permissions_" + "design",
            "aesthetics" + r"\.md",
            "STYLE" + r"\.md",
            "reference" + "/",
            "claude_code_" + "transcripts",
            "transcript_" + "schema",
            r"\.\./" + "shared",
        ]
    )
)
_R_ID = re.compile(r"(?<![\w.])R(\d+(?:\.\d+)+)")
_LETTER_ID = re.compile(r"(?<![\w.])([AFPT]\d{1,2})(?![\w.])")
_SECTION = re.compile(r"§([0-9]+(?:\.[0-9]+)*|[A-Z])\b")


def _scanned() -> list[Path]:
    """The repository's own text: code, tests, benchmarks, docs and the top-level files."""
    files = [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "Makefile", "pyproject.toml")]
    for folder, pattern in (("src", "*.py"), ("tests", "*.py"), ("benchmarks", "*.py"), ("docs", "*.md")):
        files += sorted((ROOT / folder).rglob(pattern))
    return [f for f in files if f.is_file() and f != Path(__file__).resolve()]


def _defined() -> tuple[set[str], set[str]]:
    """design.md's ids (`**R3.2.4**`, `**A39**`, `**S6.h**`) and section numbers (`§3.2`, `§A`)."""
    text = DESIGN.read_text(encoding="utf-8")
    ids = set(re.findall(r"\*\*([A-Z]\d+(?:\.\d+)*(?:\.[a-h])?)\*\*", text))
    sections = set(re.findall(r"^#{2,3} §(\S+)", text, flags=re.MULTILINE))
    return ids, sections


def _hits(pattern: re.Pattern[str], files: list[Path]) -> list[tuple[str, str]]:
    return [
        (f"{path.relative_to(ROOT)}:{n}", match.group(0))
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in pattern.finditer(line)
    ]


def test_design_doc_defines_the_ids_code_relies_on() -> None:
    ids, sections = _defined()
    assert {"R0.1", "R3.2.4", "R10.3", "S6.h", "A1", "A45", "P7", "F1", "F15", "T3"} <= ids
    assert {"0", "3.2", "4.1", "10", "A", "P", "F", "T"} <= sections


def test_nothing_cites_a_document_outside_the_repository() -> None:
    assert _hits(_OUTSIDE, _scanned()) == []


@pytest.mark.parametrize(
    ("pattern", "kind"), [(_R_ID, "requirement"), (_LETTER_ID, "rule or family"), (_SECTION, "section")]
)
def test_every_cited_id_exists_in_design_doc(pattern: re.Pattern[str], kind: str) -> None:
    ids, sections = _defined()
    files = [f for f in _scanned() if f != DESIGN]
    missing = []
    for where, cited in _hits(pattern, files):
        name = cited.lstrip("R§") if pattern is not _LETTER_ID else cited
        if pattern is _SECTION:
            ok = name in sections
        elif pattern is _R_ID:
            ok = f"R{name}" in ids or name in sections
        else:
            ok = name in ids
        if not ok:
            missing.append((where, cited))
    assert missing == [], f"{kind} ids cited but not defined in docs/design.md"


def test_the_check_catches_what_it_guards_against() -> None:
    assert _OUTSIDE.search("see SPEC §3.2")
    assert _OUTSIDE.search("api_" + "rules #39")
    assert _LETTER_ID.findall("limits (A29-A33, A41); rule A6/A7") == ["A29", "A33", "A41", "A6", "A7"]
    assert _R_ID.findall("(R3.2.4, R7.5).") == ["3.2.4", "7.5"]
    assert not _LETTER_ID.findall("S6.h, 0xA1, a.F1, UTF-8")


def test_the_claude_code_home_in_server_md_is_the_one_the_interop_tests_use(tmp_path: Path) -> None:
    """docs/server.md's `.claude.json` for Claude Code against `foldline serve` says what
    `interop.ClaudeCode.prepare` writes (the state the interop tests run Claude Code with)."""
    import json
    import subprocess

    from foldline.interop import ClaudeCode

    doc = (Path(__file__).resolve().parents[1] / "docs" / "server.md").read_text()
    section = doc[doc.index("## Claude Code against `foldline serve`") :]
    line = next(x for x in section.splitlines() if x.startswith("printf "))
    template = line.split("'")[1]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # the doc's printf, run by the shell, with its %s as the workspace
    shown = subprocess.run(
        ["printf", template.replace("\\n", ""), str(workspace)], capture_output=True, text=True
    )
    client = ClaudeCode(binary=Path("claude"), root=tmp_path, url="http://127.0.0.1:9")
    client.prepare()
    written = json.loads((client.home / ".claude.json").read_text())
    assert json.loads(shown.stdout) == written
    for name in ("ANTHROPIC_BASE_URL", "DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"):
        assert name in section
        assert name in client.env()


def test_the_readme_names_the_library_only_features_by_what_exists() -> None:
    """README says plainly which features the CLI cannot reach; each name it gives must exist."""
    from foldline.engine import QueryEngine
    from foldline.events import EventBus
    from foldline.tools import default_tools
    from foldline.tools.batch import BatchTool

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    paragraph = readme[readme.index("Library features, not reachable from `foldline chat`") :].split("\n\n")[
        0
    ]
    for attribute in ("pre_compact_hooks", "attachment_hooks"):
        assert f"QueryEngine.{attribute}" in paragraph
        assert attribute in QueryEngine.__dataclass_fields__
    assert "events.sinks" in paragraph
    assert "sinks" in EventBus.__dataclass_fields__
    assert "BatchTool" in paragraph
    assert not any(isinstance(t, BatchTool) for t in default_tools())


def _shell_lines(text: str) -> list[str]:
    """The lines of a document's ```sh blocks."""
    blocks = re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    return [line for block in blocks for line in block.splitlines()]


def test_install_commands_in_the_docs_work_from_a_clone() -> None:
    """foldline is not on the package index: `pip install 'foldline[server]'` fails for a new user.
    Every install command the README and docs show installs from the clone, with an extra that
    pyproject.toml defines."""
    extras = set(re.findall(r"^(\w+) = \[", (ROOT / "pyproject.toml").read_text(), flags=re.MULTILINE))
    shown = [
        (path.name, line)
        for path in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
        for line in _shell_lines(path.read_text(encoding="utf-8"))
        if line.lstrip().startswith("pip install")
    ]
    assert shown  # the check ran on something
    assert [(name, line) for name, line in shown if re.search(r"pip install\s+['\"]?foldline", line)] == []
    for _, line in shown:
        for extra in re.findall(r"\.\[(\w+)\]", line):
            assert extra in extras, line


def test_server_md_runs_the_server_beside_claude_code_not_under_it() -> None:
    """Claude Code against `foldline serve`: a server started with a bare `&` in Claude Code's
    terminal prints its access log into Claude Code's screen; and Claude Code's "use this API
    key?" question defaults to No, which the reader must know to answer."""
    doc = (ROOT / "docs" / "server.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Claude Code against `foldline serve`") : doc.index("## In tests")]
    serves = [line for line in _shell_lines(section) if line.startswith("foldline serve")]
    assert serves
    assert [line for line in serves if re.search(r"&\s*(#.*)?$", line) and ">" not in line] == []
    assert "second terminal" in section
    assert "use this API key?" in section
    assert "**Yes**" in section


def test_the_readme_command_table_names_every_command() -> None:
    """A new user learns the commands from the README's table: each one `foldline --help` lists."""
    import click

    from foldline.cli import cli

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Command line") :]
    rows = [line for line in table.splitlines() if line.startswith("| `foldline ")]
    assert rows
    names = cli.list_commands(click.Context(cli))
    assert "chat" in names
    missing = [name for name in names if not any(f"`foldline {name}" in row for row in rows)]
    assert missing == []
