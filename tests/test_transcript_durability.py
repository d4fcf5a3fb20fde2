"""Transcript durability (R2.3): SIGKILL at random moments, torn tails at every byte, the session lock,
and injected disk-full / EIO failures."""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import time
import traceback
import typing
from collections import Counter
from pathlib import Path

import pytest
from tests._crash_writer import record_line, seq_of, write_until_killed

from foldline._json import encode_line
from foldline.config import FsyncPolicy
from foldline.errors import TranscriptLockedError, TranscriptWriteError
from foldline.timeline import AnyRecord, AssistantEntry, AssistantMessage, UserEntry, UserMessage
from foldline.transcript import LoadResult, TranscriptWriter, load_transcript

HELPER = Path(__file__).with_name("_crash_writer.py")
TS = "2026-01-01T00:00:00.000Z"
A = UserEntry(uuid="a", timestamp=TS, message=UserMessage(content="first"))
B = UserEntry(uuid="b", parent_uuid="a", timestamp=TS, message=UserMessage(content="second"))
C = UserEntry(uuid="c", parent_uuid="b", timestamp=TS, message=UserMessage(content="third"))


def sidecars(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".corrupt-*"))


# --- 1. SIGKILL at random moments ---------------------------------------------------------------


def _run_writer_and_kill(path: Path, rng: random.Random) -> list[int]:
    """Fork a writer appending to `path`, SIGKILL it at a random moment; return the acked seqs.

    One kill in ten lands anywhere in the first 10 ms, resume and tail repair included. The rest
    let a few appends through, then land up to 15 ms into an append over 2 MB (encoding one takes
    5-10 ms, writing it a few more), or up to 0.3 ms into one over 64 KB.
    """
    read_end, write_end = os.pipe()
    policy: FsyncPolicy = "always" if rng.random() < 0.2 else "never"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            os.close(read_end)
            write_until_killed(path, write_end, policy)
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(1)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        seen = b""
        roll = rng.random()
        if roll < 0.1:
            _spin(rng.uniform(0.0, 0.01))
        elif roll < 0.45:
            seen = _read_until_an_append(pipe, acks=0, larger_than=2_000_000)
            _spin(rng.uniform(0.0, 0.015))
        else:
            seen = _read_until_an_append(pipe, acks=rng.randint(0, 2), larger_than=65_536)
            _spin(rng.uniform(0.0, 0.0003))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        lines = seen + pipe.read()
    assert os.WIFSIGNALED(status), f"the writer died on its own (status {status}); see its stderr"
    return [int(line) for line in lines.split(b"\n") if line.isdigit()]


def _read_until_an_append(pipe: typing.BinaryIO, *, acks: int, larger_than: int) -> bytes:
    """Read the writer's reports until, after `acks` acks, an append of the given size starts."""
    seen = b""
    while line := pipe.readline():
        seen += line
        if line[:1].isdigit():
            acks -= 1
        elif line.startswith(b">") and acks <= 0 and int(line.split()[2]) > larger_than:
            break
    return seen


def _spin(seconds: float) -> None:
    # time.sleep overshoots by ~0.1 ms, as long as many of the appends being aimed at.
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


class _Expected:
    """The exact bytes the file must start with: header plus every record line, grown as needed."""

    def __init__(self, header: bytes) -> None:
        self.bytes = bytearray(header)
        self.count = 0

    def through(self, n: int) -> bytearray:
        assert n >= self.count, "records never disappear from the file"
        while self.count < n:
            self.bytes += record_line(self.count)
            self.count += 1
        return self.bytes


def _check_after_kill(path: Path, expected: _Expected, before: int, acked: list[int]) -> LoadResult:
    data = path.read_bytes()
    loaded = load_transcript(path)
    n = len(loaded.records)
    assert loaded.warnings == [], "a SIGKILL must never damage anything but the tail"
    assert [seq_of(r.uuid) for r in loaded.records if isinstance(r, UserEntry)] == list(range(n))
    assert acked == list(range(before, before + len(acked))), "acks are contiguous from the resume point"
    last_durable = acked[-1] if acked else before - 1
    assert last_durable < n, "every acked record is present"
    assert n <= last_durable + 2, "at most the one record in flight beyond the acks"
    prefix = expected.through(n)
    if loaded.unterminated:
        assert data == prefix[:-1]
    else:
        assert data[: loaded.good_size] == prefix, "every record is byte-identical"
        assert data[loaded.good_size :] == loaded.torn_tail
        assert record_line(n).startswith(loaded.torn_tail), "the torn tail is the record in flight"
    return loaded


def _crash_loop(path: Path, rng: random.Random, kills: int, stats: Counter[str]) -> None:
    """Kill `kills` writers appending to one fresh file, checking the file after every kill."""
    TranscriptWriter.create(path, session_id=path.stem, fsync="always").close()
    expected = _Expected(path.read_bytes())
    torn_tails: set[bytes] = set()
    records = 0
    for _ in range(kills):
        acked = _run_writer_and_kill(path, rng)
        loaded = _check_after_kill(path, expected, records, acked)
        records = len(loaded.records)
        stats["kills"] += 1
        stats["acked"] += len(acked)
        stats["torn tail"] += bool(loaded.torn_tail)
        stats["unterminated"] += loaded.unterminated
        if loaded.torn_tail:
            torn_tails.add(loaded.torn_tail)
    writer, _ = TranscriptWriter.resume(path, fsync="always")
    with writer:
        writer.append(A)
    final = load_transcript(path)
    assert final.clean
    assert len(final.records) == records + 1
    assert final.records[-1] == A
    assert {p.read_bytes() for p in sidecars(path)} == torn_tails, "every torn tail went to a sidecar"
    stats["bytes"] += path.stat().st_size
    for file in [path, *sidecars(path)]:
        file.unlink()  # hundreds of MB otherwise stay behind in pytest's kept temp dirs


@pytest.mark.slow
@pytest.mark.parametrize("segment", range(10))
def test_sigkill_at_random_moments_loses_at_most_the_record_in_flight(tmp_path: Path, segment: int) -> None:
    """220 kills in all: ten files of 22 kills each, small enough to reload after each kill. One test
    per file, so parallel workers share them (together they were the suite's longest test)."""
    rng = random.Random(f"20261202-{segment}")
    stats: Counter[str] = Counter()
    _crash_loop(tmp_path / f"crash-{segment}.jsonl", rng, 22, stats)
    print(f"\ncrash loop {segment}: {dict(stats)}")
    assert stats["kills"] == 22
    assert stats["acked"] > 0


# --- 2. The last line cut at every byte offset --------------------------------------------------


def _sample_records() -> list[AnyRecord]:
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "echo 'é😀'"}}
    reply = AssistantMessage(
        id="msg_1",
        content=[{"type": "text", "text": "Sure é😀 \u2028 next\x85"}, tool_use],
        stop_reason="tool_use",
    )
    return [A, B, AssistantEntry(uuid="d", parent_uuid="b", timestamp=TS, message=reply)]


def test_last_line_cut_at_every_byte_offset(tmp_path: Path) -> None:
    full_path = tmp_path / "full.jsonl"
    records = _sample_records()
    with TranscriptWriter.create(full_path, session_id="cut", fsync="never") as writer:
        for record in records:
            writer.append(record)
    data = full_path.read_bytes()
    last_start = len(data) - len(encode_line(records[-1]))
    path = tmp_path / "s.jsonl"
    for cut in range(last_start, len(data) + 1):
        path.write_bytes(data[:cut])
        loaded = load_transcript(path)
        whole = cut >= len(data) - 1  # only the final "\n" (or nothing) is missing
        assert loaded.records == (records if whole else records[:-1]), cut
        assert loaded.warnings == []
        assert loaded.torn_tail == (b"" if whole else data[last_start:cut])
        assert loaded.unterminated == (cut == len(data) - 1)

        writer, resumed = TranscriptWriter.resume(path, fsync="never")
        with writer:
            writer.append(C)
        after = load_transcript(path)
        assert after.clean, cut
        assert after.records == [*loaded.records, C]
        if loaded.torn_tail:
            assert resumed.sidecar is not None
            assert resumed.sidecar.read_bytes() == loaded.torn_tail
            resumed.sidecar.unlink()
        assert sidecars(path) == []


def test_cut_anywhere_yields_a_prefix_or_a_header_error(tmp_path: Path) -> None:
    full_path = tmp_path / "full.jsonl"
    records = _sample_records()
    with TranscriptWriter.create(full_path, session_id="cut", fsync="never") as writer:
        for record in records:
            writer.append(record)
    data = full_path.read_bytes()
    header_end = data.index(b"\n")
    path = tmp_path / "s.jsonl"
    for cut in range(header_end, len(data) + 1):
        path.write_bytes(data[:cut])
        loaded = load_transcript(path)
        assert loaded.records == records[: len(loaded.records)]
        assert loaded.warnings == []
        assert data[: loaded.good_size] + loaded.torn_tail == data[:cut]


# --- 4. Two writers -----------------------------------------------------------------------------


def test_second_writer_is_refused_while_a_live_process_holds_the_session(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    TranscriptWriter.create(path, session_id="s", fsync="never").close()
    command = [sys.executable, str(HELPER), "hold", str(path)]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout is not None
        assert holder.stdout.readline() == f"locked {holder.pid}\n"
        with pytest.raises(TranscriptLockedError) as info:
            TranscriptWriter.resume(path)
        assert info.value.holder_pid == holder.pid
        assert f"session is open in process {holder.pid}" in str(info.value)
        assert str(path) in str(info.value)
        holder.kill()
        holder.wait()
    writer, _ = TranscriptWriter.resume(path, fsync="never")
    with writer:
        writer.append(A)
        assert (path.parent / "s.jsonl.lock").read_text() == f"{os.getpid()}\n"
    assert load_transcript(path).records == [A]


def test_second_writer_in_the_same_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with TranscriptWriter.create(path, session_id="s", fsync="never"):
        with pytest.raises(TranscriptLockedError) as info:
            TranscriptWriter.resume(path)
        assert info.value.holder_pid == os.getpid()
    TranscriptWriter.resume(path, fsync="never")[0].close()


def test_a_stale_pid_in_the_lock_file_does_not_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    TranscriptWriter.create(path, session_id="s", fsync="never").close()
    # A live but unrelated pid (PID reuse): without the flock it means nothing.
    (path.parent / "s.jsonl.lock").write_text(f"{os.getppid()}\n")
    writer, _ = TranscriptWriter.resume(path, fsync="never")
    writer.close()


# --- 5. Disk full and EIO -----------------------------------------------------------------------


def _same_file(fd: int, path: Path) -> bool:
    return os.fstat(fd).st_ino == path.stat().st_ino


def _short_write_then(
    monkeypatch: pytest.MonkeyPatch, path: Path, keep: int, then: BaseException
) -> list[int]:
    """Patch `os.write` for `path` only: the first write lands just `keep` bytes, later ones raise `then`.

    Returns:
        The byte counts asked of each write to `path`, filled in as the writes happen.
    """
    real_write = os.write
    asked: list[int] = []

    def short_then_fail(fd: int, data: bytes) -> int:
        if not _same_file(fd, path):
            return real_write(fd, data)
        asked.append(len(data))
        if len(asked) == 1:
            return real_write(fd, bytes(data[:keep]))
        raise then

    monkeypatch.setattr(os, "write", short_then_fail)
    return asked


def test_disk_full_mid_record_cuts_back_and_poisons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    writer = TranscriptWriter.create(path, session_id="s", fsync="never")
    writer.append(A)
    before = path.read_bytes()
    calls = _short_write_then(
        monkeypatch, path, len(encode_line(B)) // 2, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    )
    with pytest.raises(TranscriptWriteError, match="No space left on device") as info:
        writer.append(B)
    assert f"before byte {len(before)} is intact" in str(info.value)
    assert len(calls) == 2, "the short write was retried with the rest before giving up"
    assert path.read_bytes() == before, "the partial record was cut back"
    assert writer.poisoned
    with pytest.raises(TranscriptWriteError, match="no longer writable"):
        writer.append(C)
    with pytest.raises(TranscriptWriteError, match="no longer writable"):
        writer.sync()
    writer.close()
    monkeypatch.undo()
    assert load_transcript(path).records == [A]
    resumed, loaded = TranscriptWriter.resume(path, fsync="never")
    assert loaded.clean
    with resumed:
        resumed.append(B)
    assert load_transcript(path).records == [A, B]


def test_interrupt_between_partial_writes_cuts_the_record_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    writer = TranscriptWriter.create(path, session_id="s", fsync="never")
    writer.append(A)
    before = path.read_bytes()
    _short_write_then(monkeypatch, path, 7, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        writer.append(B)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert not writer.poisoned
    writer.append(C)
    writer.close()
    assert load_transcript(path).records == [A, C]
    assert load_transcript(path).clean


def test_failed_cut_back_leaves_a_torn_tail_that_resume_moves_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    writer = TranscriptWriter.create(path, session_id="s", fsync="never")
    writer.append(A)
    fragment = encode_line(B)[:10]
    _short_write_then(monkeypatch, path, len(fragment), OSError(errno.EIO, os.strerror(errno.EIO)))

    def broken_ftruncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", broken_ftruncate)
    with pytest.raises(TranscriptWriteError, match="moved aside on the next resume"):
        writer.append(B)
    monkeypatch.undo()
    writer.close()
    loaded = load_transcript(path)
    assert loaded.records == [A]
    assert loaded.torn_tail == fragment
    resumed, result = TranscriptWriter.resume(path, fsync="never")
    with resumed:
        resumed.append(C)
    assert result.sidecar is not None
    assert result.sidecar.read_bytes() == fragment
    after = load_transcript(path)
    assert after.records == [A, C]
    assert after.clean, "the new record must not be glued onto the fragment"


def test_fsync_eio_poisons_the_writer_and_keeps_earlier_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    writer = TranscriptWriter.create(path, session_id="s", fsync="boundaries")
    writer.append(A, sync=True)

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(TranscriptWriteError, match="fsync failed: Input/output error"):
        writer.append(B, sync=True)
    assert writer.poisoned
    with pytest.raises(TranscriptWriteError, match="no longer writable"):
        writer.append(C)
    writer.close()  # no second fsync on a poisoned writer: close succeeds and frees the lock
    monkeypatch.undo()
    assert load_transcript(path).records == [A, B]
    TranscriptWriter.resume(path, fsync="never")[0].close()


def test_fsync_failure_at_close_is_raised_and_the_lock_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.jsonl"
    writer = TranscriptWriter.create(path, session_id="s", fsync="boundaries")
    writer.append(A)

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(TranscriptWriteError, match="fsync failed"):
        writer.close()
    monkeypatch.undo()
    assert writer.closed
    resumed, loaded = TranscriptWriter.resume(path, fsync="never")
    resumed.close()
    assert loaded.records == [A]


def test_file_size_limit_in_a_child_process(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with TranscriptWriter.create(path, session_id="s", fsync="never") as writer:
        writer.append(A)
    before = path.read_bytes()
    limit = len(before) + 1_000
    command = [sys.executable, str(HELPER), "fsize", str(path), str(limit), "50000"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    assert "error: " in done.stdout
    assert "File too large" in done.stdout
    assert "poisoned: True" in done.stdout
    assert path.read_bytes() == before
    assert load_transcript(path).records == [A]
