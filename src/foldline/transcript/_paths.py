"""Where sessions live: `session_path`, `list_session_files`, `open_session` (R2.4)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from pathlib import Path

from foldline.config import FsyncPolicy
from foldline.errors import UserError
from foldline.timeline import Timeline
from foldline.transcript._write import TranscriptWriter

# The package's logger (`open_session` documents it by this name).
_log = logging.getLogger("foldline.transcript")


_SLUG_CHARS = re.compile(r"[/\\:.]")
_BAD_ID_CHARS = re.compile(r"[/\\:\x00]")


def cwd_slug(cwd: str) -> str:
    """The project directory name for a working directory, encoded as Claude Code does.

    `/`, `\\`, `:` and `.` become `-`: `/home/me/my.app` -> `-home-me-my-app`.
    """
    return _SLUG_CHARS.sub("-", cwd)


def open_session(
    path: str | os.PathLike[str],
    *,
    session_id: str,
    cwd: str = "",
    fsync: FsyncPolicy | None = None,
    on_notice: Callable[[str], None] | None = None,
) -> tuple[TranscriptWriter, Timeline]:
    """The writer and timeline of a session: resumed from `path` if it exists, else created there.

    `session_id` and `cwd` only name a new session; a resumed one keeps its header's. Damage found
    on resume (lines skipped, a torn tail moved to a sidecar) is never silent: each line of
    `LoadResult.notices()` goes to `on_notice`, or to the `foldline.transcript` logger as a warning
    when no callback is given.
    """
    if Path(path).exists():
        writer, loaded = TranscriptWriter.resume(path, fsync=fsync)
        for notice in loaded.notices():
            if on_notice is None:
                _log.warning("%s", notice)
            else:
                on_notice(notice)
        return writer, loaded.timeline()
    writer = TranscriptWriter.create(path, session_id=session_id, cwd=cwd, fsync=fsync)
    return writer, Timeline(session_id=session_id)


def session_path(sessions_dir: str | os.PathLike[str], cwd: str, session_id: str) -> Path:
    """Where a session's transcript lives: `<sessions_dir>/<slug of cwd>/<session_id>.jsonl`.

    Args:
        sessions_dir: The root of all sessions (`TranscriptConfig.sessions_dir`).
        cwd: The working directory the session belongs to.
        session_id: The session's id.

    Raises:
        UserError: `cwd` is empty, or `session_id` is empty or not a plain file name.
    """
    if not cwd:
        raise UserError("a session needs its working directory (cwd), got an empty string")
    if not session_id or session_id in {".", ".."} or _BAD_ID_CHARS.search(session_id):
        raise UserError(f"session id {session_id!r} must be a non-empty name without / \\ or :")
    return Path(sessions_dir) / cwd_slug(cwd) / f"{session_id}.jsonl"


def list_session_files(sessions_dir: str | os.PathLike[str], *, cwd: str | None = None) -> list[Path]:
    """Every session transcript under `sessions_dir`, most recently modified first.

    Args:
        sessions_dir: The root of all sessions.
        cwd: Only the sessions of this working directory.

    Returns:
        The `.jsonl` files (lock files and corrupt-tail sidecars are not listed).
    """
    root = Path(sessions_dir)
    # The slug is a literal directory name: never let glob read `[`, `*` or `?` in it.
    found = (root / cwd_slug(cwd)).glob("*.jsonl") if cwd else root.glob("*/*.jsonl")
    return sorted((p for p in found if p.is_file()), key=lambda p: (-p.stat().st_mtime_ns, str(p)))
