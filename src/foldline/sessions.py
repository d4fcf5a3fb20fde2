"""Loading and listing sessions of either format: foldline transcripts and Claude Code transcripts.

Owns format detection, the one `load_session` entry point that `show`, `request` and resume use,
importing a Claude Code session into a foldline transcript of its own (so it can be continued
without touching the source), the session listing behind `foldline sessions`, and the definition of
a "turn" (a prompt the user typed).

Invariants:
- Detection reads only the head of a file: a foldline transcript starts with a `{"kind":"header",...}`
  line; a Claude Code transcript is JSONL objects with a string `type` (or an empty file: Claude Code
  leaves 0-byte files, foldline never does).
- Loading never fails on bad lines: they come back as warnings with their line numbers. It fails only
  when the file cannot be read or is neither format (`TranscriptError` and subclasses).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias

from foldline._json import JSONDecodeError, loads
from foldline.config import FsyncPolicy
from foldline.errors import TranscriptError, TranscriptFormatError, UserError
from foldline.importers.claude_code import ImportIssue, import_claude_code, subagent_files
from foldline.timeline import ENTRY_TYPES, AnyRecord, SystemEntry, UserEntry, new_uuid, now_iso
from foldline.transcript import TranscriptWriter, load_transcript

__all__ = [
    "FormatChoice",
    "LoadedSession",
    "SessionFormat",
    "SessionInfo",
    "claude_code_projects_dir",
    "count_turns",
    "detect_format",
    "find_session",
    "first_prompt",
    "import_claude_code_session",
    "is_session_id",
    "is_typed_prompt",
    "last_activity",
    "list_sessions",
    "load_session",
]

SessionFormat: TypeAlias = Literal["foldline", "claude-code"]
FormatChoice: TypeAlias = Literal["auto", "foldline", "claude-code"]

_SNIFF_LINES = 20
_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""What is looked up as a session id: no glob, path or drive characters."""
# User text that Claude Code writes on the user's behalf: command output, caveats, interrupt markers.
_NOT_TYPED_PREFIXES = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<local-command-caveat>",
    "Caveat: ",
    "[Request interrupted by user",
)


@dataclass(frozen=True)
class LoadedSession:
    """A session read from disk, whatever its format."""

    path: Path
    format: SessionFormat
    session_id: str
    records: list[AnyRecord]
    warnings: list[ImportIssue]


@dataclass(frozen=True)
class SessionInfo:
    """One row of `foldline sessions`."""

    path: Path
    format: SessionFormat
    session_id: str
    size_bytes: int
    turns: int
    """Prompts the user typed (see `is_typed_prompt`)."""
    last_activity: str | None
    """The newest entry timestamp (ISO-8601), None for a session without entries."""
    first_prompt: str = ""
    """The first prompt the user typed, on one line ("" when there is none): the session's title."""


def _sniff_line(raw: bytes) -> SessionFormat | None:
    try:
        obj = loads(raw)
    except JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    if obj.get("kind") == "header":
        return "foldline"
    return "claude-code" if isinstance(obj.get("type"), str) else None


def detect_format(path: Path | str) -> SessionFormat:
    """Which format `path` is in, from its first parseable lines.

    Raises:
        TranscriptError: the file cannot be read.
        TranscriptFormatError: its head is neither a foldline header nor Claude Code lines.
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            heads = [raw for _, raw in zip(range(_SNIFF_LINES), fh, strict=False) if raw.strip()]
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read the session file ({exc.strerror or exc})") from exc
    if not heads:
        return "claude-code"
    for raw in heads:
        found = _sniff_line(raw)
        if found is not None:
            return found
    raise TranscriptFormatError(
        f"{path}: neither a foldline transcript (no header line) nor a Claude Code transcript "
        "(no JSON lines with a `type`); pass a .jsonl session file"
    )


def claude_code_projects_dir() -> Path:
    """`$CLAUDE_CONFIG_DIR/projects` (default `~/.claude/projects`): where Claude Code keeps sessions."""
    home = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(home) if home else Path.home() / ".claude") / "projects"


def is_session_id(ref: str) -> bool:
    """Whether `ref` can be a session id: no glob, path or drive characters (so never a path)."""
    return _PLAIN_ID.fullmatch(ref) is not None


def find_session(ref: str, roots: Sequence[Path]) -> Path | None:
    """The session file `ref` names: an existing file path, else a session id under `roots`.

    An id is looked up as `<root>/<project>/<id>.jsonl` in each root in turn (first root first,
    project folders in name order), so foldline's own sessions can shadow another tool's. Returns
    None when nothing matches; a `ref` with glob or path characters is only ever taken as a path.
    """
    path = Path(ref)
    if path.is_file():
        return path
    if not is_session_id(ref):
        return None
    for root in roots:
        matches = sorted(root.glob(f"*/{ref}.jsonl")) if root.is_dir() else []
        if matches:
            return matches[0]
    return None


def _load_foldline(path: Path) -> LoadedSession:
    result = load_transcript(path)
    warnings = [ImportIssue(path, w.line, w.reason) for w in result.warnings]
    return LoadedSession(path, "foldline", result.header.session_id, list(result.records), warnings)


def _load_claude_code(path: Path) -> LoadedSession:
    imported = import_claude_code(path)
    return LoadedSession(path, "claude-code", imported.session_id, imported.records, imported.warnings)


def load_session(path: Path | str, format: FormatChoice = "auto") -> LoadedSession:
    """Read a session file of either format into foldline records.

    Args:
        path: a foldline transcript or a Claude Code session (`<session>.jsonl` or `agent-*.jsonl`).
        format: `auto` detects it from the file's head; the others force a reader.

    Raises:
        UserError: `format` is not one of the three choices.
        TranscriptError: the file cannot be read, or (TranscriptFormatError) is in neither format.
    """
    path = Path(path)
    if format not in ("auto", "foldline", "claude-code"):
        raise UserError(f"unknown session format {format!r}; use auto, foldline or claude-code")
    if not path.is_file():
        raise TranscriptError(f"{path}: no such session file")
    chosen = detect_format(path) if format == "auto" else format
    return _load_foldline(path) if chosen == "foldline" else _load_claude_code(path)


def import_claude_code_session(
    source: Path | str, dest: Path | str, *, cwd: str, fsync: FsyncPolicy | None = None
) -> LoadedSession:
    """Copy a Claude Code session into a new foldline transcript at `dest`, to continue it there.

    The source file is only read: foldline never writes beside another tool's transcript. The new
    transcript holds the imported records followed by a `system` entry (subtype `imported`) naming
    the source and what was skipped, so where the session came from stays on record. Its session id
    is `dest`'s stem.

    Returns:
        What was imported, read from the source (its warnings name the source's damaged lines).

    Raises:
        TranscriptError: the source cannot be read, or `dest` already exists or is held.
    """
    loaded = load_session(source, "claude-code")
    dest = Path(dest)
    with TranscriptWriter.create(dest, session_id=dest.stem, cwd=cwd, fsync=fsync) as writer:
        for record in loaded.records:
            writer.append(record)
        skipped = f"; {len(loaded.warnings)} damaged line(s) skipped" if loaded.warnings else ""
        last = next((r.uuid for r in reversed(loaded.records) if isinstance(r, ENTRY_TYPES)), None)
        writer.append(
            SystemEntry(
                uuid=new_uuid(),
                parent_uuid=last,
                timestamp=now_iso(),
                session_id=dest.stem,
                subtype="imported",
                content=f"Imported Claude Code session {loaded.session_id} from {loaded.path}"
                f" ({len(loaded.records)} records{skipped})",
                data={"source": str(loaded.path), "source_session_id": loaded.session_id},
            ),
            sync=True,
        )
    return loaded


def is_typed_prompt(entry: object) -> bool:
    """Whether an entry is a prompt the user typed (slash commands included).

    Not typed: meta/injected text, compact summaries, tool results, sidechain and virtual entries,
    and the text Claude Code writes for the user (command output, caveats, interrupt markers).
    """
    if not isinstance(entry, UserEntry) or entry.is_meta or entry.is_compact_summary:
        return False
    if entry.is_sidechain or entry.is_virtual:
        return False
    content = entry.message.content
    if isinstance(content, str):
        text = content
    elif any(block.get("type") == "tool_result" for block in content):
        return False
    else:
        text = "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")
    return not text.lstrip().startswith(_NOT_TYPED_PREFIXES)


def count_turns(records: Iterable[AnyRecord]) -> int:
    """The number of prompts the user typed in `records`."""
    return sum(1 for record in records if is_typed_prompt(record))


def first_prompt(records: Iterable[AnyRecord]) -> str:
    """The text of the first prompt the user typed in `records`, whitespace collapsed ("" if none)."""
    entry = next((r for r in records if is_typed_prompt(r)), None)
    if not isinstance(entry, UserEntry):
        return ""
    content = entry.message.content
    text = content if isinstance(content, str) else " ".join(str(b.get("text", "")) for b in content)
    return " ".join(text.split())


def last_activity(records: Sequence[AnyRecord]) -> str | None:
    """The newest entry timestamp in `records` (ISO-8601 strings compare in time order)."""
    stamps = [r.timestamp for r in records if isinstance(r, ENTRY_TYPES) and r.timestamp]
    return max(stamps, default=None)


def _session_files(path: Path) -> list[Path]:
    """The session files under a directory: every `*.jsonl` except the subagent transcripts of a session.

    Those are listed as part of their session, in either layout: under `<session>/subagents/`, or as a
    legacy `agent-<hex>.jsonl` beside a main file with the same session id. A lone agent file is listed.
    """
    files = sorted(p for p in path.rglob("*.jsonl") if "subagents" not in p.relative_to(path).parts[:-1])
    claimed = {sub for f in files if not f.name.startswith("agent-") for sub in subagent_files(f)}
    return [f for f in files if f not in claimed]


def _info(path: Path) -> SessionInfo | None:
    size = path.stat().st_size
    if size == 0:
        return None
    try:
        session = load_session(path)
    except TranscriptFormatError:
        return None
    return SessionInfo(
        path=path,
        format=session.format,
        session_id=session.session_id,
        size_bytes=size,
        turns=count_turns(session.records),
        last_activity=last_activity(session.records),
        first_prompt=first_prompt(session.records),
    )


def list_sessions(paths_or_dirs: Iterable[Path | str]) -> list[SessionInfo]:
    """Describe every session file in the given files and directories (searched recursively).

    Empty files and `.jsonl` files in neither format are left out. Subagent transcripts (under a
    session's `subagents/` folder, or legacy `agent-<hex>.jsonl` files beside a main file with their
    session id) belong to their session and are not listed on their own.

    Raises:
        TranscriptError: a path does not exist, or a session file cannot be read.
    """
    infos: list[SessionInfo] = []
    for item in map(Path, paths_or_dirs):
        if item.is_dir():
            files = _session_files(item)
        elif item.is_file():
            files = [item]
        else:
            raise TranscriptError(f"{item}: no such file or directory")
        infos.extend(info for info in map(_info, files) if info is not None)
    return infos
