"""The normalized head a session leaves beside its transcript, so a resume need not redo it.

A long session's first request after a resume would otherwise normalize its whole history again
(`IncrementalNormalizer` keeps the finished part, the frozen head, only in memory). At close the
session writes that head to `<session dir>/request-head.json`; on resume it is handed back to the
fresh assembler, which then normalizes only what came after it.

The file is a cache, never a source of truth: it is taken back only when everything it was made
from is provably the same, and otherwise ignored (the build normalizes from scratch, as without it):

- the transcript still starts with the exact bytes it had when the head was written (its length and
  SHA-256 are recorded), so the entries the head came from are the same records;
- the code that normalizes is the same (a digest of its source files) and so are the options;
- no record after the saved ones changes the view of earlier entries (a snip, fold, compaction or
  cleared result), and the next build's projected entries start with the head's uuids.

Most blocks pass through normalization unchanged; those are written as their place in the entries
and taken from the resumed entries again, so the file holds, and a resume parses, mostly structure.

Writes go to a temporary file renamed over the old one, so a crash leaves the old file or the new.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

from foldline._incremental import collection_paused
from foldline._json import dumps, loads
from foldline.api.normalize import FrozenHead, MessageParam, NormalizeOptions
from foldline.api.params import RequestAssembler
from foldline.projection import REPROJECTING
from foldline.timeline import AnyRecord, AssistantEntry, Entry, UserEntry

__all__ = ["HEAD_FILE", "load_head", "save_head"]

HEAD_FILE = "request-head.json"
_FORMAT = 1
_CHUNK = 1 << 20


@cache
def _code_fingerprint() -> str:
    """A digest of the source that decides what a head holds: normalization and the record types."""
    root = Path(__file__).resolve().parents[1]
    files = [
        *sorted((root / "api" / "normalize").glob("*.py")),
        *sorted((root / "transcript").glob("*.py")),
        root / "timeline.py",
        root / "projection.py",
        Path(__file__),
    ]
    digest = hashlib.blake2b(digest_size=16)
    for file in files:
        digest.update(file.name.encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _options_key(options: NormalizeOptions) -> str:
    """The options as a string that is the same in every process (a `repr` is not: its frozensets
    list their strings in an order that changes with each interpreter's hash seed)."""
    return dumps(asdict(options), default=sorted, sort_keys=True).decode()


def _prefix_digest(path: Path, size: int) -> str | None:
    """SHA-256 of the first `size` bytes of `path` (None when it is shorter or unreadable).

    SHA-256 rather than BLAKE2b: with the CPU's SHA instructions it hashes a 25 MB transcript in
    about 16 ms against 42, and this runs on every resume.
    """
    digest = hashlib.sha256()
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


def _shared(entries: Sequence[Entry]) -> dict[int, list[int]]:
    """Where each content block of `entries` sits, by object identity: [entry index, block index]."""
    where: dict[int, list[int]] = {}
    for i, entry in enumerate(entries):
        content = entry.message.content if isinstance(entry, UserEntry | AssistantEntry) else None
        if isinstance(content, list):
            for j, block in enumerate(content):
                where[id(block)] = [i, j]
    return where


def save_head(assembler: RequestAssembler, transcript: Path, directory: Path, records: int) -> bool:
    """Write `assembler`'s frozen head for `transcript` into `directory` (False: nothing to keep).

    Call it after the transcript's last write, with the number of records the session holds (all of
    them are in the file). A block normalization passed through unchanged (most of them) is written
    as its place in the entries, `[entry, block]`, and taken from the entries again on resume: the
    file stays small, and a resume parses only what normalization changed. An old file is removed
    when there is no head, so a stale one never outlives the session that made it.

    Raises:
        OSError: the directory or file cannot be written (the caller decides whether that matters).
    """
    target = directory / HEAD_FILE
    frozen = assembler.frozen_head()
    size = transcript.stat().st_size if frozen is not None else 0
    digest = _prefix_digest(transcript, size) if frozen is not None else None
    if frozen is None or digest is None:
        target.unlink(missing_ok=True)
        return False
    head, entries = frozen
    where = _shared(entries)
    wire = [
        {"role": m["role"], "content": [where.get(id(b), b) for b in m["content"]]}  # blocks are objects
        for m in head.wire
    ]
    header = {
        "format": _FORMAT,
        "code": _code_fingerprint(),
        "options": _options_key(assembler.normalize_options),
        "transcript": {"bytes": size, "sha256": digest, "records": records},
    }
    body = {
        "uuids": head.uuids,
        "wire": wire,
        "tool_ids": sorted(head.tool_ids),
        "msg_ids": sorted(head.msg_ids),
        "media": head.media,
    }
    try:
        encoded = dumps(header) + b"\n" + dumps(body)  # the header first: checked before the body
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
        Whether it was handed over. The next build still checks that the records after the saved
        ones change no projection and that the entries start with the head's uuids, and normalizes
        from scratch when they do not; a missing, damaged or stale file is simply not used.
    """
    with collection_paused():  # a whole session's messages parsed at once: nothing cyclic in them
        saved = _read(assembler, transcript, directory)
    if saved is None:
        return False
    assembler.restore_head(saved.thaw)
    return True


@dataclass(frozen=True)
class _Saved:
    """A head file's body, parsed, waiting for the entries its shared blocks point into."""

    records: int
    uuids: tuple[str, ...]
    wire: list[Any]
    tool_ids: frozenset[str]
    msg_ids: frozenset[str]
    media: tuple[int, int, int]

    def thaw(self, records: Sequence[AnyRecord], entries: Sequence[Entry]) -> FrozenHead | None:
        """The head for these records, or None when something after the saved records changed the
        view of the saved ones (a snip, fold, compaction or cleared result): same uuids, other
        content. Whether `entries` start with the head's uuids, the normalizer checks on `restore`
        (a head resolved against other entries is dropped there)."""
        if len(records) < self.records or len(entries) < len(self.uuids):
            return None
        if any(isinstance(r, REPROJECTING) for r in records[self.records :]):
            return None
        try:
            with collection_paused():
                wire = self._resolved(entries)
        except (LookupError, TypeError, ValueError, AttributeError):
            return None
        return FrozenHead(self.uuids, wire, self.tool_ids, self.msg_ids, self.media)

    def _resolved(self, entries: Sequence[Entry]) -> list[MessageParam]:
        """The saved messages with each `[entry, block]` place replaced by that block of `entries`.

        The parsed messages are this object's own, so they are completed in place (one pass, no
        copies): this runs once, over every message of a resumed session.
        """
        for message in self.wire:
            content = message["content"]
            for k, block in enumerate(content):
                if block.__class__ is list:
                    blocks = entries[block[0]].message.content  # type: ignore[union-attr]
                    if blocks.__class__ is not list:
                        raise ValueError("a shared block points at no content list")
                    content[k] = blocks[block[1]]
        return self.wire


def _read(assembler: RequestAssembler, transcript: Path, directory: Path) -> _Saved | None:
    try:
        raw = (directory / HEAD_FILE).read_bytes()
        cut = raw.index(b"\n")
        header: Any = loads(raw[:cut])
        if (
            header["format"] != _FORMAT
            or header["code"] != _code_fingerprint()
            or header["options"] != _options_key(assembler.normalize_options)
        ):
            return None
        size, digest = int(header["transcript"]["bytes"]), str(header["transcript"]["sha256"])
        records = int(header["transcript"]["records"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if _prefix_digest(transcript, size) != digest:
        return None
    try:
        data: Any = loads(memoryview(raw)[cut + 1 :])
        images, pages, max_px = (int(n) for n in data["media"])
        saved = _Saved(
            records=records,
            uuids=tuple(str(u) for u in data["uuids"]),
            wire=list(data["wire"]),
            tool_ids=frozenset(str(t) for t in data["tool_ids"]),
            msg_ids=frozenset(str(m) for m in data["msg_ids"]),
            media=(images, pages, max_px),
        )
    except (ValueError, KeyError, TypeError):
        return None
    return saved if saved.uuids else None
