"""Writer-side helpers for the transcript crash, lock and disk-full tests.

Importable (the crash test forks a child that runs `write_until_killed`) and runnable as a script,
so that tests get a real second process:

- `python _crash_writer.py hold PATH`: resume PATH, print `locked <pid>`, block until stdin closes.
- `python _crash_writer.py fsize PATH LIMIT SIZE`: resume PATH under `RLIMIT_FSIZE=LIMIT`, append a
  record of about SIZE bytes, print `error: <message>` / `poisoned: <bool>` or `ok`.

Records are deterministic functions of their sequence number, so the parent can recompute the
exact bytes of every record a child acknowledged.
"""

from __future__ import annotations

import os
import random
import resource
import signal
import sys
from pathlib import Path

from foldline._json import encode_line
from foldline.config import FsyncPolicy
from foldline.errors import TranscriptWriteError
from foldline.timeline import UserEntry, UserMessage
from foldline.transcript import TranscriptWriter

# Mixed in so that cuts land inside multi-byte characters and line separators cross the disk.
_SPICE = "é😀\u2028\u2029\x85"
# Record text is sliced out of one block, so that building a record costs next to nothing and a
# random kill lands in the append rather than in the test's own data generation.
_BLOCK = random.Random(0).randbytes(1_800_000).hex()


def make_record(seq: int) -> UserEntry:
    """The record with sequence number `seq`: 50 B to 2.3 MB (1 in 6 over 64 KB, 1 in 25 over 2 MB).

    Appends over 2 MB matter: Linux cuts a buffered write short on SIGKILL only at large-folio
    boundaries, so smaller appends rarely tear under a kill (torn tails at every byte offset are
    tested separately).
    """
    rng = random.Random(seq)
    roll = rng.random()
    if roll < 0.60:
        size = rng.randint(50, 3_000)
    elif roll < 0.82:
        size = rng.randint(3_000, 20_000)
    elif roll < 0.96:
        size = rng.randint(65_537, 150_000)
    else:
        size = rng.randint(2_100_000, 2_300_000)
    start = rng.randrange(len(_BLOCK) - size)
    text = _BLOCK[start : start + size]
    cut = rng.randrange(len(text) + 1)
    text = f"{text[:cut]}{_SPICE}{text[cut:]}"
    return UserEntry(
        uuid=f"seq-{seq:08d}",
        parent_uuid=f"seq-{seq - 1:08d}" if seq else None,
        timestamp="2026-01-01T00:00:00.000Z",
        message=UserMessage(content=text),
    )


def record_line(seq: int) -> bytes:
    """The exact bytes `make_record(seq)` occupies in a transcript."""
    return encode_line(make_record(seq))


def seq_of(uuid: str) -> int:
    """The sequence number of a record made by `make_record`."""
    return int(uuid.removeprefix("seq-"))


def write_until_killed(path: Path, ack_fd: int, fsync: FsyncPolicy) -> None:
    """Resume `path` and append records forever.

    Writes `ready\\n` to `ack_fd` once resumed, `> <seq> <characters of text>\\n` as each append
    starts (so the parent can aim its kill at a large append) and `<seq>\\n` when it returns: the
    record is then in the page cache, which a SIGKILL cannot lose (and on disk under `"always"`).
    """
    writer, loaded = TranscriptWriter.resume(path, fsync=fsync)
    os.write(ack_fd, b"ready\n")
    seq = len(loaded.records)
    while True:
        record = make_record(seq)
        os.write(ack_fd, f"> {seq} {len(record.message.content)}\n".encode())
        writer.append(record)
        os.write(ack_fd, f"{seq}\n".encode())
        seq += 1


def _hold(path: Path) -> None:
    with TranscriptWriter.resume(path, fsync="never")[0]:
        print(f"locked {os.getpid()}", flush=True)
        sys.stdin.read()


def _fsize(path: Path, limit: int, size: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    writer, _ = TranscriptWriter.resume(path, fsync="always")
    with writer:
        try:
            writer.append(UserEntry(uuid="big", timestamp="t", message=UserMessage(content="x" * size)))
        except TranscriptWriteError as exc:
            print(f"error: {exc}")
            print(f"poisoned: {writer.poisoned}")
            return
    print("ok")


if __name__ == "__main__":
    command, file = sys.argv[1], Path(sys.argv[2])
    if command == "hold":
        _hold(file)
    elif command == "fsize":
        _fsize(file, int(sys.argv[3]), int(sys.argv[4]))
    else:
        raise SystemExit(f"unknown command {command!r}")
