"""Level 0 of compaction, the tool-result budget (R3.0): oversized results go to a file, once.

A tool result over `Config.tool_result_budget_chars` (50,000) is written to a file in the session's
directory and replaced, when it is first recorded, by a preview and the file's path; the model can
Read the file back. Nothing later rewrites the result, so the prompt cache is never disturbed.

Read's own results are exempt up to Read's cap (`ToolsConfig.read_max_output_chars`): Read pages
large files itself, and sending an ordinary Read result to a file the model must Read again would
loop. A Read result past that cap (which Read itself never makes) is moved like any other, so no
result of any tool reaches the context uncapped.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from foldline._types import Block

__all__ = ["EXEMPT_TOOLS", "MovedResult", "apply_result_budget"]

EXEMPT_TOOLS = frozenset({"Read"})


@dataclass(frozen=True)
class MovedResult:
    """One result that went to a file."""

    tool_use_id: str
    chars: int
    path: Path


def _text_of(content: object) -> str | None:
    """The result's text when it is text only (string or text blocks); None when it holds media."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in content):
        return "\n".join(str(b.get("text", "")) for b in content)
    return None


def _store(text: str, directory: Path, tool_use_id: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = directory / f"{tool_use_id}-{digest}.txt"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # a crash mid-write never leaves a half file under the final name
    return path


def _replacement(text: str, path: Path, preview: int) -> str:
    return (
        f"[Output too large for the context: {len(text):,} characters. The full output is saved to "
        f"{path}; Read it (with offset/limit) if you need more than this preview.]\n\n"
        f"{text[:preview]}\n…"
    )


def apply_result_budget(
    results: Sequence[Block],
    tool_names: dict[str, str],
    *,
    limit: int,
    directory: Path,
    preview: int,
    exempt_limit: int | None = None,
) -> tuple[list[Block], list[MovedResult]]:
    """Results with every oversized, text-only, non-exempt one moved to a file under `directory`.

    Args:
        results: `tool_result` blocks as they are about to be recorded.
        tool_names: tool_use id -> tool name, to honour `EXEMPT_TOOLS`.
        limit: the budget in characters.
        directory: where the full outputs are written (the session's directory).
        preview: characters of a moved result kept in its place (`Config.tool_result_preview_chars`).
        exempt_limit: the budget of `EXEMPT_TOOLS` (Read's own cap); None: they are never moved.

    Returns:
        The blocks to record, and what was moved (for the visible notice, R3.0.1).
    """
    out: list[Block] = []
    moved: list[MovedResult] = []
    for block in results:
        text = _text_of(block.get("content"))
        tool_use_id = str(block.get("tool_use_id", ""))
        budget = exempt_limit if tool_names.get(tool_use_id) in EXEMPT_TOOLS else limit
        if text is None or budget is None or len(text) <= budget:
            out.append(block)
            continue
        path = _store(text, directory, tool_use_id)
        out.append({**block, "content": _replacement(text, path, preview)})
        moved.append(MovedResult(tool_use_id, len(text), path))
    return out, moved
