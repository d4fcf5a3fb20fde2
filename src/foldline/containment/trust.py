"""Workspace settings the user has confirmed: the trust store (§9.4).

Owns `is_trusted` and `trust`. A settings file inside a workspace (`.foldline/settings*.json`,
`.claude/settings*.json`) may come from a cloned repository, or from a command the agent ran;
it loosens nothing until the user created it through foldline (a "yes, always" answer) or
confirmed it once (`foldline trust`, or the prompt at chat's start). What was confirmed is the
file's content: the store, `~/.foldline/trusted-settings.json`, maps each file's resolved path to
the sha256 of its bytes, so any later change makes it untrusted again. The store lives in the
home, which the Bash sandbox hides, so no command can confirm a file for the user.

Both take the bytes the caller read (and showed, or parsed) rather than reading the file again:
what is confirmed is exactly what the user saw, never what a command wrote there in between.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from foldline._json import JSONDecodeError, dumps, loads
from foldline.containment.safe_read import read_regular_file
from foldline.errors import TrustStoreError

__all__ = ["is_trusted", "store_path", "trust"]


def store_path(home: Path) -> Path:
    """The trust store of the user whose home is `home`."""
    return home / ".foldline" / "trusted-settings.json"


def _digest(path: Path, content: bytes | None) -> str | None:
    data = read_regular_file(path) if content is None else content
    return None if data is None else hashlib.sha256(data).hexdigest()


def _load(home: Path) -> dict[str, str]:
    try:
        data = loads(store_path(home).read_bytes())
    except (OSError, JSONDecodeError):
        return {}  # no store, or a damaged one: nothing is trusted (fail closed)
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def is_trusted(path: Path, home: Path, content: bytes | None = None) -> bool:
    """Whether the user confirmed `path` holding exactly `content` (default: the bytes it holds
    now, read as a regular file that is no link)."""
    digest = _digest(path, content)
    return digest is not None and _load(home).get(os.path.realpath(path)) == digest


def trust(path: Path, home: Path, content: bytes | None = None) -> None:
    """Record `path` holding `content` (default: its current bytes) as confirmed by the user
    (atomically; other entries kept).

    Raises:
        TrustStoreError: the store cannot be written (a read-only home, a file in the way); the
            store is left as it was.
    """
    digest = _digest(path, content)
    if digest is None:
        return
    files = _load(home)
    files[os.path.realpath(path)] = digest
    store = store_path(home)
    tmp: str | None = None
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=store.parent, prefix=".trusted.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(dumps({"files": files}, indent=True).decode() + "\n")
        os.replace(tmp, store)
    except OSError as e:
        if tmp is not None:  # a half-written copy must not linger beside the store
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise TrustStoreError(str(store), e.strerror or str(e)) from e
