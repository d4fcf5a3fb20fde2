"""Project instruction files, injected into the session as `attachment` entries (R9.3).

Looks in the workspace root for `FOLDLINE.md`, then `CLAUDE.md` (for projects set up for Claude
Code), then `.foldline/FOLDLINE.md` and `.claude/CLAUDE.md`, in that order, which is also the order of
the returned entries (later files read as more specific). Parent directories and the home
directory are not searched.

Invariants:
- Only regular files inside the workspace are read (`containment.safe_read`): a symlink that
  resolves outside it is skipped, so a checked-out repository cannot pull in arbitrary files; a
  FIFO, a device or a file past `ToolsConfig.host_read_max_bytes` is skipped too. A file reached
  twice (one name symlinked to the other) is injected once.
- The entries are fresh values (new uuid, timestamp, no parent); the engine links and appends them.
"""

from __future__ import annotations

import os
from pathlib import Path

from foldline.containment.safe_read import read_workspace_file
from foldline.timeline import AttachmentEntry, new_uuid, now_iso

__all__ = ["INSTRUCTION_FILES", "load_instruction_files"]

INSTRUCTION_FILES = ("FOLDLINE.md", "CLAUDE.md", ".foldline/FOLDLINE.md", ".claude/CLAUDE.md")
"""Where instruction files are looked for, relative to the workspace root, in injection order."""


def load_instruction_files(workspace: Path, *, session_id: str = "") -> list[AttachmentEntry]:
    """One `instructions` attachment per instruction file present in `workspace`.

    Args:
        workspace: The launch workspace (resolved here).
        session_id: Stamped on the entries.

    Returns:
        The entries, in `INSTRUCTION_FILES` order; empty files are skipped.
    """
    root = Path(os.path.realpath(workspace))
    entries: list[AttachmentEntry] = []
    seen: set[Path] = set()
    for relative in INSTRUCTION_FILES:
        path = Path(os.path.realpath(root / relative))
        if path in seen:
            continue
        data = read_workspace_file(path, root)
        if data is None:
            continue
        seen.add(path)  # CLAUDE.md is often a symlink to FOLDLINE.md: inject it once
        text = data.decode("utf-8", errors="replace")
        if not text.strip():
            continue
        entries.append(
            AttachmentEntry(
                uuid=new_uuid(),
                timestamp=now_iso(),
                session_id=session_id,
                attachment_type="instructions",
                content=text,
                path=str(path),
            )
        )
    return entries
