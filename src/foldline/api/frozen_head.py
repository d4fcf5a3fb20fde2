"""The normalized head a session leaves beside its transcript, so a resume need not redo it.

A long session's first request after a resume would otherwise normalize its whole history again
(`IncrementalNormalizer` keeps the finished part, the frozen head, only in memory). At close the
session writes that head to `<session dir>/request-head.json`; on resume it is handed back to the
fresh assembler, which then normalizes only what came after it.

The file is a cache, never a source of truth: it is taken back only when everything it was made
from is provably the same, and otherwise ignored (the build normalizes from scratch, as without it):

- the transcript still starts with the exact bytes it had when the head was written (its length and
  BLAKE2b digest are recorded), so the entries the head came from are the same records;
- the code that normalizes is the same (a digest of its source files) and so are the options;
- the next build's projected entries start with the head's uuids (`IncrementalNormalizer.restore`),
  which fails after a snip, fold or compaction that changed the view.

Writes go to a temporary file renamed over the old one, so a crash leaves the old file or the new.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path
from typing import Any

from foldline._incremental import collection_paused
from foldline._json import dumps, loads
from foldline.api.normalize import FrozenHead
from foldline.api.params import RequestAssembler

__all__ = ["HEAD_FILE", "load_head", "save_head"]

HEAD_FILE = "request-head.json"
_FORMAT = 1
_CHUNK = 1 << 20


@cache
def _code_fingerprint() -> str:
    """A digest of the source that decides what a head holds: normalization and the record types."""
    root = Path(__file__).resolve().parents[1]
    files = [*sorted((root / "api" / "normalize").glob("*.py")), root / "timeline.py", Path(__file__)]
    digest = hashlib.blake2b(digest_size=16)
    for file in files:
        digest.update(file.name.encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _prefix_digest(path: Path, size: int) -> str | None:
    """BLAKE2b of the first `size` bytes of `path` (None when it is shorter or unreadable)."""
    digest = hashlib.blake2b(digest_size=32)
    left = size
    try:
        with path.open("rb") as f:
            while left:
                chunk = f.read(min(_CHUNK, left))
                if not chunk:
                    return None
                digest.update(chunk)
                left -= len(chunk)
    except OSError:
        return None
    return digest.hexdigest()


def save_head(assembler: RequestAssembler, transcript: Path, directory: Path) -> bool:
    """Write `assembler`'s frozen head for `transcript` into `directory` (False: nothing to keep).

    Call it after the transcript's last write. An old file is removed when there is no head, so a
    stale one never outlives the session that made it.

    Raises:
        OSError: the directory or file cannot be written (the caller decides whether that matters).
    """
    target = directory / HEAD_FILE
    head = assembler.frozen_head()
    size = transcript.stat().st_size if head is not None else 0
    digest = _prefix_digest(transcript, size) if head is not None else None
    if head is None or digest is None:
        target.unlink(missing_ok=True)
        return False
    data = {
        "format": _FORMAT,
        "code": _code_fingerprint(),
        "options": repr(assembler.normalize_options),
        "transcript": {"bytes": size, "blake2b": digest},
        "uuids": head.uuids,
        "wire": head.wire,
        "tool_ids": sorted(head.tool_ids),
        "msg_ids": sorted(head.msg_ids),
        "media": head.media,
    }
    try:
        encoded = dumps(data)
    except TypeError:  # a value JSON cannot hold exactly (an integer past 64 bits): keep nothing
        target.unlink(missing_ok=True)
        return False
    directory.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{HEAD_FILE}.{os.getpid()}.tmp")
    temporary.write_bytes(encoded)
    os.replace(temporary, target)
    return True


def load_head(assembler: RequestAssembler, transcript: Path, directory: Path) -> bool:
    """Hand the head saved in `directory` to `assembler` if it still describes `transcript`.

    Returns:
        Whether it was handed over. The next build still checks the entries' uuids and normalizes
        from scratch when they differ; a missing, damaged or stale file is simply not used.
    """
    try:
        with collection_paused():  # a parse of a whole session's messages: nothing cyclic in it
            data: Any = loads((directory / HEAD_FILE).read_bytes())
    except (OSError, ValueError):
        return False
    try:
        if (
            data["format"] != _FORMAT
            or data["code"] != _code_fingerprint()
            or data["options"] != repr(assembler.normalize_options)
        ):
            return False
        size, digest = int(data["transcript"]["bytes"]), str(data["transcript"]["blake2b"])
        images, pages, max_px = (int(n) for n in data["media"])
        head = FrozenHead(
            uuids=tuple(str(u) for u in data["uuids"]),
            wire=list(data["wire"]),
            tool_ids=frozenset(str(t) for t in data["tool_ids"]),
            msg_ids=frozenset(str(m) for m in data["msg_ids"]),
            media=(images, pages, max_px),
        )
    except (KeyError, TypeError, ValueError):
        return False
    if len(head.uuids) == 0 or _prefix_digest(transcript, size) != digest:
        return False
    assembler.restore_head(head)
    return True
