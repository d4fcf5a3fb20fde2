"""Host-side reads of files a sandboxed command may have written, and their text on a terminal (§9.4).

Owns `read_workspace_file` (a file inside the workspace), `read_regular_file` (one outside it that a
workspace file points at, such as a worktree's git directory) and `escape_controls` (text from such
a file shown to the user).

Why: a command may write anything inside the workspace, and foldline itself reads files there on
the host, outside the sandbox: git's index and configs (the after-call check), `.gitmodules`,
settings files (and the trust prompt), instruction files, what Grep searches. A planted link would
carry such a read out of the workspace (the user's credentials, quoted back into a tool result), a
FIFO would never return, `/dev/zero` would be read until foldline is killed for memory, and escape
sequences in a file would drive the user's terminal.

Invariants:
- A file is opened with `O_NOFOLLOW | O_NONBLOCK` and read only when `fstat` says it is a regular
  file: no FIFO blocks, no device is read.
- `read_workspace_file` walks from the workspace one folder at a time with `O_NOFOLLOW` directory
  descriptors, so no link below the workspace is followed, even one swapped in after a check. With
  `follow_links` a link is resolved first and taken only when its target lies inside the workspace.
- At most `limit_bytes` are read, within `timeout_s`; past either the answer is None (never a
  prefix, which could be mistaken for the whole file).
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

from foldline.config import ToolsConfig

__all__ = ["escape_controls", "read_regular_file", "read_workspace_file"]

_DEFAULTS = ToolsConfig()
_CHUNK = 1024 * 1024
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""C0 (but tab and newline), DEL, C1, and the line/bidi controls that reorder what a line shows."""


def read_workspace_file(
    path: Path,
    workspace: Path,
    *,
    follow_links: bool = False,
    limit_bytes: int | None = None,
    timeout_s: float | None = None,
) -> bytes | None:
    """The bytes of the regular file `path` inside `workspace`, or None: missing, not a regular
    file, reached through a link (with `follow_links`: one whose target lies outside the
    workspace), outside the workspace, or larger than `limit_bytes` (default
    `ToolsConfig.host_read_max_bytes`) or slower than `timeout_s`."""
    root = os.path.realpath(workspace)
    target = os.path.abspath(path)
    if follow_links:
        target = os.path.realpath(target)
    relative = _below(target, root) or _below(target, os.path.abspath(workspace))
    if not relative:
        return None
    try:
        folder = os.open(root, _DIR_FLAGS)
    except OSError:
        return None
    try:
        for part in relative[:-1]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=folder)
            os.close(folder)
            folder = inner
        fd = os.open(relative[-1], _FILE_FLAGS, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    return _read_fd(fd, limit_bytes, timeout_s)


def read_regular_file(
    path: Path, *, follow_links: bool = False, limit_bytes: int | None = None, timeout_s: float | None = None
) -> bytes | None:
    """The bytes of the regular file `path` wherever it is, or None (as `read_workspace_file`).
    Without `follow_links` the file itself may not be a link. For files a workspace file points
    at outside it (a worktree's git directory): read, never quoted back to the model."""
    try:
        fd = os.open(path, _FILE_FLAGS if not follow_links else _FILE_FLAGS & ~os.O_NOFOLLOW)
    except OSError:
        return None
    return _read_fd(fd, limit_bytes, timeout_s)


def escape_controls(text: str) -> str:
    """`text` with every control character but tab and newline written as `\\x1b`-style escapes:
    what a workspace file says reaches the terminal as text, never as a command to it."""
    return _CONTROLS.sub(lambda m: repr(m[0])[1:-1] if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def _below(target: str, root: str) -> tuple[str, ...]:
    """`target`'s components below `root` (empty when it is not strictly below it)."""
    if not root or not target.startswith(root.rstrip("/") + "/"):
        return ()
    parts = tuple(p for p in target[len(root.rstrip("/")) + 1 :].split("/") if p)
    return () if ".." in parts or "." in parts else parts


def _read_fd(fd: int, limit_bytes: int | None, timeout_s: float | None) -> bytes | None:
    limit = _DEFAULTS.host_read_max_bytes if limit_bytes is None else limit_bytes
    deadline = time.monotonic() + (_DEFAULTS.host_read_timeout_s if timeout_s is None else timeout_s)
    chunks: list[bytes] = []
    size = 0
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None  # a FIFO, a device (`/dev/zero`), a socket, a folder
        while chunk := os.read(fd, min(_CHUNK, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit or time.monotonic() > deadline:
                return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
