"""Grep (the Python engine, and rg when present) and Glob over a real directory tree."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from foldline._glob import glob_regex, literal_prefix
from foldline.config import ToolsConfig
from foldline.tools import GlobTool, GrepTool, PermissionRules, ToolContext, read_denied_filter

pytestmark = pytest.mark.anyio


@pytest.fixture
def tree(workspace: Path) -> Path:
    files = {
        "src/app.py": "import os\ndef main():\n    return os.getcwd()\n",
        "src/util.py": "def helper():\n    return 'MAIN'\n",
        "src/web/page.ts": "export function main() {}\n",
        "docs/readme.md": "nothing to see\n",
        ".git/config": "def main(): in git metadata\n",
    }
    for i, (name, text) in enumerate(files.items()):
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # later in the dict = newer
    (workspace / "src/blob.bin").write_bytes(b"main\x00\x01")
    return workspace


async def grep(ctx: ToolContext, engine: str = "python", **tool_input: object) -> str:
    result = await GrepTool(engine).run(tool_input, ctx)  # type: ignore[arg-type]
    assert not result.is_error, result.content
    return str(result.content)


async def test_grep_files_newest_first_skipping_vcs_and_binary(ctx: ToolContext, tree: Path) -> None:
    text = await grep(ctx, pattern=r"def main|function main")
    assert text.splitlines() == ["Found 2 files", str(tree / "src/web/page.ts"), str(tree / "src/app.py")]


async def test_grep_content_mode_has_path_line_text(ctx: ToolContext, tree: Path) -> None:
    text = await grep(ctx, pattern="getcwd", output_mode="content")
    assert text == f"{tree / 'src/app.py'}:3:    return os.getcwd()"


async def test_grep_case_insensitive_and_count(ctx: ToolContext, tree: Path) -> None:
    assert await grep(ctx, pattern="main", output_mode="count", glob="*.py") == f"{tree / 'src/app.py'}:1"
    flags: dict[str, object] = {"pattern": "main", "output_mode": "count", "glob": "*.py", "-i": True}
    counted = str((await GrepTool("python").run(flags, ctx)).content)
    assert sorted(counted.splitlines()) == [f"{tree / 'src/app.py'}:1", f"{tree / 'src/util.py'}:1"]


@pytest.mark.parametrize(
    ("glob", "expected"),
    [
        pytest.param("*.ts", ["src/web/page.ts"], id="basename"),
        pytest.param("src/*.py", ["src/app.py"], id="anchored"),
        pytest.param("**/*.{ts,py}", ["src/web/page.ts", "src/app.py"], id="braces"),
    ],
)
async def test_grep_glob_filter(ctx: ToolContext, tree: Path, glob: str, expected: list[str]) -> None:
    text = await grep(ctx, pattern="main", glob=glob)
    assert text.splitlines()[1:] == [str(tree / e) for e in expected]


async def test_grep_single_file_path_and_no_match(ctx: ToolContext, tree: Path) -> None:
    assert await grep(ctx, pattern="helper", path="src/util.py") == f"Found 1 file\n{tree / 'src/util.py'}"
    assert await grep(ctx, pattern="zebra") == "No matches found"


async def test_grep_head_limit_says_results_were_cut(ctx: ToolContext, tree: Path) -> None:
    text = await grep(ctx, pattern="e", output_mode="content", head_limit=2)
    assert len(text.splitlines()) == 3
    assert "more results not shown" in text


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        pytest.param({"pattern": "("}, "Invalid regular expression", id="bad-regex"),
        pytest.param({"pattern": "x", "path": "nowhere"}, "Path does not exist", id="missing-path"),
        pytest.param({"pattern": "x", "output_mode": "lines"}, "unknown output_mode", id="bad-mode"),
        pytest.param(
            {"pattern": "e", "head_limit": -2}, "`head_limit` must be at least 1", id="negative-limit"
        ),
    ],
)
async def test_grep_errors(ctx: ToolContext, tool_input: dict[str, object], message: str) -> None:
    result = await GrepTool("python").run(tool_input, ctx)
    assert result.is_error
    assert message in str(result.content)


@pytest.fixture
def rg_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Put the `ripgrep` wheel's `rg` (installed beside this interpreter) on PATH, or skip."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if shutil.which("rg") is None:
        pytest.skip("ripgrep is not installed")


@pytest.mark.usefixtures("rg_on_path")
async def test_ripgrep_engine_agrees_with_python(ctx: ToolContext, tree: Path) -> None:
    for mode in ("files_with_matches", "content", "count"):
        kwargs = {"pattern": "main|helper", "output_mode": mode}
        assert await grep(ctx, "ripgrep", **kwargs) == await grep(ctx, "python", **kwargs)


@pytest.mark.usefixtures("rg_on_path")
async def test_ripgrep_engine_reads_colons_in_names_and_odd_line_breaks(
    ctx: ToolContext, workspace: Path
) -> None:
    # rg's `path:line:text` is ambiguous when the path has a colon, and a form feed or a lone CR
    # inside a line is not a line break for either engine.
    (workspace / "a:1:b.txt").write_text("x main\n")
    (workspace / "feed.txt").write_bytes(b"main\x0cmore\nmain\rtail\r\n")
    for mode in ("files_with_matches", "content", "count"):
        kwargs = {"pattern": "main", "output_mode": mode}
        assert await grep(ctx, "ripgrep", **kwargs) == await grep(ctx, "python", **kwargs)


async def test_ripgrep_engine_missing_is_a_clear_error(
    ctx: ToolContext, tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tree / "empty-bin"))
    result = await GrepTool("ripgrep").run({"pattern": "x"}, ctx)
    assert result.is_error
    assert "`rg` is not on PATH" in str(result.content)


async def test_glob_sorted_newest_first(ctx: ToolContext, tree: Path) -> None:
    result = await GlobTool().run({"pattern": "**/*.py"}, ctx)
    assert result.content == f"{tree / 'src/util.py'}\n{tree / 'src/app.py'}"


async def test_glob_with_path_and_prefix_and_no_vcs(ctx: ToolContext, tree: Path) -> None:
    result = await GlobTool().run({"pattern": "web/*", "path": "src"}, ctx)
    assert result.content == str(tree / "src/web/page.ts")
    everything = await GlobTool().run({"pattern": "**"}, ctx)
    assert ".git" not in str(everything.content)
    assert (await GlobTool().run({"pattern": "*.rs"}, ctx)).content == "No files found"


async def test_glob_truncates(tree: Path) -> None:
    ctx = ToolContext(workspace=tree, limits=ToolsConfig(search_max_results=2))
    result = await GlobTool().run({"pattern": "**/*"}, ctx)
    lines = str(result.content).splitlines()
    assert len(lines) == 3
    assert lines[-1].startswith("(Results are truncated")
    assert result.structured == {"count": 5, "truncated": True}  # .git is never listed


async def test_glob_absolute_pattern(ctx: ToolContext, tree: Path) -> None:
    result = await GlobTool().run({"pattern": f"{tree}/docs/*.md"}, ctx)
    assert result.content == str(tree / "docs/readme.md")


async def test_glob_on_a_file_is_an_error(ctx: ToolContext, tree: Path) -> None:
    result = await GlobTool().run({"pattern": "*", "path": "src/app.py"}, ctx)
    assert result.is_error
    assert "Not a directory" in str(result.content)


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        pytest.param("*.py", "a.py", True, id="star"),
        pytest.param("*.py", "d/a.py", False, id="star-stays-in-segment"),
        pytest.param("a/**/b", "a/b", True, id="globstar-zero-dirs"),
        pytest.param("a/**/b", "a/x/y/b", True, id="globstar-many-dirs"),
        pytest.param("a/**", "a/x/y", True, id="trailing-globstar"),
        pytest.param("?.txt", "ab.txt", False, id="question-one-char"),
        pytest.param("[!a]x", "bx", True, id="negated-class"),
        pytest.param("{x,y/z}.c", "y/z.c", True, id="braces"),
        pytest.param(r"\*.c", "a.c", False, id="escaped-star"),
        pytest.param("{unclosed", "{unclosed", True, id="unbalanced-brace-literal"),
    ],
)
def test_glob_dialect(pattern: str, path: str, matches: bool) -> None:
    assert (glob_regex(pattern).fullmatch(path) is not None) is matches


def test_literal_prefix() -> None:
    assert literal_prefix("src/**/*.py") == ("src", "**/*.py")
    assert literal_prefix("/a/b/*.md") == ("/a/b", "*.md")
    assert literal_prefix("*.py") == ("", "*.py")
    assert literal_prefix("/*.py") == ("/", "*.py")
    assert literal_prefix("/") == ("/", "")


async def test_read_deny_rules_hide_files_from_grep_and_glob(tree: Path) -> None:
    (tree / ".env").write_text("SECRET_main=1\n")
    (tree / "private").mkdir()
    (tree / "private" / "notes.md").write_text("main plans\n")
    rules = PermissionRules.from_lists(deny=["Read(**/.env)", "Read(./private)"])
    ctx = ToolContext(workspace=tree, read_denied=read_denied_filter(rules, tree))
    found = await grep(ctx, pattern="main")
    assert ".env" not in found
    assert "private" not in found
    assert str(tree / "src/app.py") in found
    assert await grep(ctx, pattern="SECRET", path=".env") == "No matches found"
    listed = str((await GlobTool().run({"pattern": "**"}, ctx)).content)
    assert ".env" not in listed
    assert "private" not in listed
    # without the filter both are visible: the rules, not the layout, hide them
    open_ctx = ToolContext(workspace=tree)
    assert ".env" in await grep(open_ctx, pattern="SECRET")


def test_rg_is_handed_the_folder_resolved_and_never_one_a_link_carries_out(tmp_path: Path) -> None:
    """The folder a link inside the workspace names may change after the permission check: rg gets
    the resolved path, and one that leads out of the workspace is refused (a FIFO too)."""
    from foldline.errors import ToolError
    from foldline.tools.search import _rg_root

    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (ws / "inside").symlink_to(ws / "src", target_is_directory=True)
    (ws / "out").symlink_to(tmp_path / "outside", target_is_directory=True)
    os.mkfifo(ws / "pipe")
    ctx = ToolContext(workspace=ws)
    assert _rg_root(ws / "inside", ctx) == ws / "src"
    assert _rg_root(tmp_path / "outside", ctx) == tmp_path / "outside"  # asked for, and approved
    with pytest.raises(ToolError, match="outside the workspace"):
        _rg_root(ws / "out", ctx)
    with pytest.raises(ToolError, match="not a regular file or folder"):
        _rg_root(ws / "pipe", ctx)


def test_grep_and_glob_over_a_workspace_that_is_the_home_skip_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio

    home = tmp_path / "me"
    for rel in (".ssh/id_ed25519", ".netrc", ".config/gh/hosts.yml", "notes.txt", ".config/app.toml"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"TOKEN in {rel}\n")
    monkeypatch.setenv("HOME", str(home))
    ctx = ToolContext(workspace=home)
    found = anyio.run(GrepTool("python").run, {"pattern": "TOKEN", "output_mode": "content"}, ctx)
    assert sorted(line.split(":")[0] for line in str(found.content).splitlines()) == [
        str(home / ".config" / "app.toml"),
        str(home / "notes.txt"),
    ]
    listed = anyio.run(GlobTool().run, {"pattern": "**/*"}, ctx)
    assert sorted(str(listed.content).splitlines()) == [
        str(home / ".config" / "app.toml"),
        str(home / "notes.txt"),
    ]


@pytest.mark.parametrize("engine", ["python", "ripgrep"])
async def test_a_match_far_into_a_long_line_is_shown_with_what_is_around_it(
    ctx: ToolContext, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON-lines transcript or a minified file: the line's first 500 characters would hide the match."""
    if engine == "ripgrep":
        monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        if shutil.which("rg") is None:
            pytest.skip("ripgrep is not installed")
    line = "step ok; " * 400 + "the stress test seed is 48213." + " step ok;" * 400
    (ctx.workspace / "log.jsonl").write_text(f'{{"content": "{line}"}}\n')
    text = await grep(ctx, engine, pattern="the stress test seed is", output_mode="content")
    shown = text.split(":", 2)[2]
    assert "the stress test seed is 48213." in shown
    assert shown.startswith("…")
    assert shown.endswith("…")
    assert len(shown) <= 502
