"""The search tools: Grep (regex over file contents) and Glob (paths by pattern) (R9.1).

Invariants:
- Both are read-only and concurrency-safe; the walk runs in a worker thread and stops early when
  `ctx.abort` is set.
- Version-control directories (`.git`, `.hg`, `.svn`) are never searched or listed, nor are the
  home's keys and tokens (`HOME_SECRETS`, for a workspace that is the home), nor anything
  `ctx.read_denied` names (a `Read(**/.env)` deny also hides `.env` from Grep and Glob).
- Results are bounded (`search_max_results` or the call's `head_limit`) and say when they were cut.
- A file is read only when it is a regular file, opened without following a link (the walk has
  resolved it inside the workspace or the searched folder), so a FIFO or device never blocks or
  floods it; rg gets the searched folder resolved, and refuses one that links out of the workspace.
- Grep's Python engine is the reference behaviour; `rg` is used only when asked for (`"ripgrep"`)
  or, with `"auto"`, when it is on PATH. Binary files (NUL in the first 8 KiB) never match.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import anyio

from foldline._glob import glob_regex, literal_prefix
from foldline._types import JSONObject
from foldline.containment.paths import HOME_SECRETS, is_home_secret
from foldline.containment.programs import find_program
from foldline.containment.safe_read import read_regular_file
from foldline.errors import ToolError
from foldline.tools.base import BaseTool, ToolContext, ToolResult
from foldline.tools.files import is_binary, split_lines

__all__ = ["GlobTool", "GrepTool"]

_VCS_DIRS = frozenset({".git", ".hg", ".svn"})
_MAX_MATCH_CHARS = 500
"""A matching line is cut to this many characters: one minified line must not flood the context."""
OutputMode = Literal["files_with_matches", "content", "count"]
GrepEngine = Literal["auto", "python", "ripgrep"]


def _walk(root: Path, ctx: ToolContext) -> Iterator[Path]:
    """Every regular file under `root` (or `root` itself), VCS dirs pruned, stopping on abort.
    Folder links are not followed, and a file link only when it resolves inside the workspace
    or `root` (a planted `notes.txt -> ~/.aws/credentials` is skipped, as Read would ask)."""
    if root.is_file():
        if not ctx.read_denied(root):
            yield root
        return
    home = Path.home()
    for dirpath, dirnames, filenames in os.walk(root):
        if ctx.abort.is_set():
            return
        real = Path(os.path.realpath(dirpath))  # once per folder: the home's keys are never searched
        kept = (
            d
            for d in dirnames
            if d not in _VCS_DIRS
            and not ctx.read_denied(Path(dirpath, d))
            and not is_home_secret(real / d, home)
        )
        dirnames[:] = sorted(kept)
        for name in sorted(filenames):
            path = Path(dirpath, name)
            if is_home_secret(real / name, home):
                continue
            if path.is_file() and not ctx.read_denied(path) and _stays_inside(path, root, ctx):
                yield path


def _stays_inside(path: Path, root: Path, ctx: ToolContext) -> bool:
    """Whether a file found under `root` is one the search may read: itself, or what its link
    resolves to, inside the workspace or `root` and not denied."""
    if not path.is_symlink():
        return True
    real = Path(os.path.realpath(path))
    inside = real.is_relative_to(ctx.workspace) or real.is_relative_to(root)
    return inside and real.is_file() and not ctx.read_denied(real)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _by_mtime(paths: list[Path]) -> list[Path]:
    """Newest first; ties by path, so the order is stable."""
    return sorted(paths, key=lambda p: (-_mtime(p), str(p)))


def _search_root(ctx: ToolContext, tool_input: Mapping[str, Any]) -> Path:
    raw = str(tool_input.get("path") or ".")
    root = ctx.resolve(raw)
    if not root.exists():
        raise ToolError(f"Path does not exist: {raw}")
    return root


def _cut(lines: list[str], limit: int) -> str:
    if len(lines) <= limit:
        return "\n".join(lines)
    return "\n".join(lines[:limit]) + f"\n… [{len(lines) - limit} more results not shown; narrow the search]"


class GrepTool(BaseTool):
    """Search file contents with a regular expression."""

    name = "Grep"
    description = (
        "Search file contents with a regular expression (Python `re` syntax) under a path (default: the "
        "cwd). Filter files with glob (e.g. `*.py`, `**/*.{ts,tsx}`). output_mode: files_with_matches "
        "(default; newest first), content (path:line:text), or count. -i for case-insensitive."
    )
    input_schema: JSONObject = {  # noqa: RUF012 - read-only class constant
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for"},
            "path": {"type": "string", "description": "File or directory to search (default: cwd)"},
            "glob": {"type": "string", "description": "Only files whose path matches this glob"},
            "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"]},
            "-i": {"type": "boolean", "description": "Case-insensitive"},
            "head_limit": {"type": "integer", "description": "Return at most this many results"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    concurrency_safe = True

    def __init__(self, engine: GrepEngine = "auto") -> None:
        self.engine = engine

    def _ripgrep_binary(self, ctx: ToolContext) -> str | None:
        """`rg`, found on PATH outside the workspace, when this Grep uses it."""
        if self.engine == "python":
            return None
        found = find_program("rg", ctx.workspace)
        if self.engine == "ripgrep" and found is None:
            raise ToolError(
                "Grep is configured to use ripgrep, but `rg` is not on PATH outside the workspace"
            )
        return found

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        mode: str = tool_input.get("output_mode", "files_with_matches")
        if mode not in ("files_with_matches", "content", "count"):
            raise ToolError(f"Invalid input: unknown output_mode {mode!r}")
        limit = int(tool_input.get("head_limit") or ctx.limits.search_max_results)
        if limit < 1:
            raise ToolError(f"Invalid input: `head_limit` must be at least 1, got {limit}")
        try:
            regex = re.compile(str(tool_input["pattern"]), re.IGNORECASE if tool_input.get("-i") else 0)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {tool_input['pattern']!r}: {exc}") from exc
        root = _search_root(ctx, tool_input)
        glob = tool_input.get("glob")
        if (rg := self._ripgrep_binary(ctx)) is not None:
            hits = await anyio.to_thread.run_sync(_ripgrep, rg, regex, root, glob, ctx)
        else:
            hits = await anyio.to_thread.run_sync(_python_grep, regex, root, glob, ctx)
        return self._format(hits, mode, limit)

    @staticmethod
    def _format(hits: dict[Path, list[tuple[int, str]]], mode: str, limit: int) -> ToolResult:
        files = _by_mtime(list(hits))
        structured: JSONObject = {"files": len(files), "matches": sum(len(v) for v in hits.values())}
        if not files:
            return ToolResult("No matches found", structured=structured)
        if mode == "files_with_matches":
            lines = [str(p) for p in files]
            header = f"Found {len(files)} file{'s' if len(files) != 1 else ''}\n"
            return ToolResult(header + _cut(lines, limit), structured=structured)
        if mode == "count":
            return ToolResult(_cut([f"{p}:{len(hits[p])}" for p in files], limit), structured=structured)
        lines = [f"{p}:{n}:{text}" for p in sorted(files) for n, text in hits[p]]
        return ToolResult(_cut(lines, limit), structured=structured)


def _excerpt(line: str, regex: re.Pattern[str]) -> str:
    """`line`, or where it is longer than `_MAX_MATCH_CHARS` the part around its first match, marked
    `…` where cut: a match far into a long line (a minified file, a JSON-lines log or transcript) is
    what the search was for, and its first 500 characters would not show it."""
    if len(line) <= _MAX_MATCH_CHARS:
        return line
    found = regex.search(line)
    start = 0 if found is None else max(0, found.start() - _MAX_MATCH_CHARS // 4)
    start = min(start, len(line) - _MAX_MATCH_CHARS)
    end = start + _MAX_MATCH_CHARS
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")


def _glob_filter(glob: str | None) -> re.Pattern[str] | None:
    return glob_regex(glob if "/" in glob else f"**/{glob}") if glob else None


def _python_grep(
    regex: re.Pattern[str], root: Path, glob: str | None, ctx: ToolContext
) -> dict[Path, list[tuple[int, str]]]:
    """The reference engine: line-by-line `re.search` over text files under `root`."""
    wanted = _glob_filter(glob)
    hits: dict[Path, list[tuple[int, str]]] = {}
    for path in _walk(root, ctx):
        relative = path.relative_to(root).as_posix() if path != root else path.name
        if wanted is not None and not wanted.fullmatch(relative):
            continue
        # opened without following links or blocking: a FIFO or `/dev/zero` swapped in since the
        # walk saw a regular file is skipped, not waited on or read whole
        data = read_regular_file(Path(os.path.realpath(path)), limit_bytes=ctx.limits.search_max_file_bytes)
        if data is None or is_binary(data):
            continue
        lines = split_lines(data.decode("utf-8", errors="replace"))
        found = [(n, _excerpt(line, regex)) for n, line in enumerate(lines, 1) if regex.search(line)]
        if found:
            hits[path] = found
    return hits


def _ripgrep(
    rg: str, regex: re.Pattern[str], root: Path, glob: str | None, ctx: ToolContext
) -> dict[Path, list[tuple[int, str]]]:
    """The same search through `rg` (faster on big trees); output parsed back into the same shape.
    rg follows no links unless told to (`-L`), so only `root` itself may be one."""
    args = [
        rg,
        "--no-config",
        "--hidden",
        "--no-ignore",
        "--line-number",
        "--with-filename",
        "--no-heading",
        "--null",  # NUL after each path: a `:` in a file name cannot shift the fields
    ]
    args += ["--glob", "!{.git,.hg,.svn}", "--max-filesize", str(ctx.limits.search_max_file_bytes)]
    if regex.flags & re.IGNORECASE:
        args.append("--ignore-case")
    if glob:
        args += ["--glob", glob]
    top = _rg_root(root, ctx)
    home = Path(os.path.realpath(Path.home()))
    if home.is_relative_to(top):  # after the caller's glob: a later glob wins in rg
        under = "" if home == top else f"/{home.relative_to(top).as_posix()}"
        args += [arg for rel in HOME_SECRETS for arg in ("--glob", f"!{under}/{rel}")]
    args += ["--regexp", regex.pattern, "--", str(top)]
    # bytes, not text mode: universal newlines would break lines at a lone CR, which the Python
    # engine (and `split_lines`) keeps inside the line
    proc = subprocess.run(args, capture_output=True, check=False)
    if proc.returncode > 1:
        raise ToolError(f"rg failed: {proc.stderr.decode('utf-8', errors='replace').strip()}")
    hits: dict[Path, list[tuple[int, str]]] = {}
    for line in split_lines(proc.stdout.decode("utf-8", errors="replace")):
        name, _, numbered = line.partition("\0")
        number, _, text = numbered.partition(":")
        path = Path(name)
        if not ctx.read_denied(path):
            hits.setdefault(path, []).append((int(number), _excerpt(text, regex)))
    return hits


def _rg_root(root: Path, ctx: ToolContext) -> Path:
    """The folder rg searches: `root` resolved (rg is handed no link to follow), never one that a
    link inside the workspace carries out of it (a link swapped in after the permission check).

    Raises:
        ToolError: `root` lies inside the workspace but resolves outside it, or is no regular file
            or folder.
    """
    real = Path(os.path.realpath(root))
    if Path(os.path.abspath(root)).is_relative_to(ctx.workspace) and not real.is_relative_to(ctx.workspace):
        raise ToolError(f"{root} is a link to {real}, outside the workspace: search {real} itself")
    if not (real.is_dir() or real.is_file()):
        raise ToolError(f"{root} is not a regular file or folder (a FIFO or device is never searched)")
    return real


class GlobTool(BaseTool):
    """List files whose path matches a glob, newest first."""

    name = "Glob"
    description = (
        "Find files by glob pattern (`**/*.py`, `src/**/test_*.{py,pyi}`) under a directory (default: "
        "the cwd). Returns matching file paths sorted by modification time, newest first."
    )
    input_schema: JSONObject = {  # noqa: RUF012 - read-only class constant
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern, relative to path"},
            "path": {"type": "string", "description": "Directory to search (default: cwd)"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    }
    concurrency_safe = True

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = str(tool_input["pattern"])
        if not pattern:
            raise ToolError("Invalid input: `pattern` is empty")
        root = _search_root(ctx, tool_input)
        if not root.is_dir():
            raise ToolError(f"Not a directory: {tool_input.get('path')}")
        prefix, rest = literal_prefix(pattern)
        matches = await anyio.to_thread.run_sync(_glob_files, root / prefix if prefix else root, rest, ctx)
        limit = ctx.limits.search_max_results
        structured: JSONObject = {"count": len(matches), "truncated": len(matches) > limit}
        if not matches:
            return ToolResult("No files found", structured=structured)
        lines = [str(p) for p in _by_mtime(matches)[:limit]]
        if len(matches) > limit:
            lines.append(
                f"(Results are truncated: {len(matches) - limit} more. Use a more specific pattern.)"
            )
        return ToolResult("\n".join(lines), structured=structured)


def _glob_files(base: Path, pattern: str, ctx: ToolContext) -> list[Path]:
    base = Path(os.path.realpath(base))
    if not base.is_dir():
        return []
    regex = glob_regex(pattern)
    return [p for p in _walk(base, ctx) if regex.fullmatch(p.relative_to(base).as_posix())]
