"""The head a session leaves beside its transcript: taken back only when nothing it came from changed,
and a resumed build from it is byte-identical to a build from scratch."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.api.strategies import Generated, messy_timelines
from tests.api.test_params import LOCAL, reply, user

from foldline._json import encode_line
from foldline.api.frozen_head import HEAD_FILE, load_head, save_head
from foldline.api.params import RequestAssembler, build_request
from foldline.config import Config
from foldline.errors import UserError
from foldline.timeline import AnyRecord, AssistantEntry, ResultsCleared, SnipBoundary, UserEntry

TOOLS = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]
SYSTEM = ["stable", "dynamic"]
CONFIG = Config(thinking_budget_tokens=2048)


def _assembler(config: Config = CONFIG) -> RequestAssembler:
    return RequestAssembler(config, SYSTEM, TOOLS, LOCAL)


def _write(path: Path, records: list[AnyRecord]) -> Path:
    path.write_bytes(b"".join(encode_line(r) for r in records))
    return path


def _session(turns: int = 6, size: int = 10) -> list[AnyRecord]:
    records: list[AnyRecord] = [user("go")]
    for turn in range(turns):
        tid = f"toolu_{turn:03d}"
        records += [
            reply(f"m{turn}", {"type": "tool_use", "id": tid, "name": "Read", "input": {"n": turn}}),
            user([{"type": "tool_result", "tool_use_id": tid, "content": f"result {turn}".ljust(size)}]),
        ]
    return records


def _saved(tmp_path: Path, records: list[AnyRecord]) -> tuple[Path, Path]:
    """A warm assembler's head for `records`, saved beside their transcript."""
    warm = _assembler()
    warm.build(records[:-2])
    warm.build(records)
    transcript = _write(tmp_path / "s.jsonl", records)
    assert save_head(warm, transcript, tmp_path / "s", len(records))
    return transcript, tmp_path / "s"


def _same(plan_body: dict[str, Any], records: list[AnyRecord], config: Config = CONFIG) -> bool:
    fresh = build_request(records, config, SYSTEM, TOOLS, LOCAL).body
    return orjson.dumps(plan_body) == orjson.dumps(fresh)


def test_a_resumed_build_starts_from_the_head_and_equals_a_fresh_build(tmp_path: Path) -> None:
    records = _session()
    transcript, where = _saved(tmp_path, records)
    resumed = _assembler()
    assert load_head(resumed, transcript, where)
    more = [*records, reply("m9", {"type": "text", "text": "done"}), user("next")]
    body = resumed.build(more).body
    assert _same(body, more)
    frozen = resumed.frozen_head()
    assert frozen is not None
    assert len(frozen[0].uuids) > 6  # it went on from the restored head, not from scratch


def test_a_head_is_not_taken_back_when_the_transcript_start_changed(tmp_path: Path) -> None:
    records = _session()
    transcript, where = _saved(tmp_path, records)
    data = bytearray(transcript.read_bytes())
    data[data.index(b"result 1")] = ord("R")  # same length, one byte edited by hand
    transcript.write_bytes(bytes(data))
    assert not load_head(_assembler(), transcript, where)
    transcript.write_bytes(bytes(data[:100]))  # shorter than when the head was saved
    assert not load_head(_assembler(), transcript, where)


def test_appending_to_the_transcript_keeps_the_head_valid(tmp_path: Path) -> None:
    records = _session()
    transcript, where = _saved(tmp_path, records)
    later = [reply("m9", {"type": "text", "text": "done"}), user("next")]
    with transcript.open("ab") as f:
        f.write(b"".join(encode_line(r) for r in later))
    resumed = _assembler()
    assert load_head(resumed, transcript, where)
    assert _same(resumed.build([*records, *later]).body, [*records, *later])


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"{not json",
        b'{"format": 1}',
        b"[1, 2, 3]\n{}",
        b'{"format": 1, "code": "x"}\n{}',
    ],
)
def test_a_missing_or_damaged_head_file_is_not_used(tmp_path: Path, damage: bytes) -> None:
    records = _session()
    transcript, where = _saved(tmp_path, records)
    (where / HEAD_FILE).write_bytes(damage)
    assert not load_head(_assembler(), transcript, where)
    (where / HEAD_FILE).unlink()
    assert not load_head(_assembler(), transcript, where)


def test_other_options_or_other_code_make_the_head_stale(tmp_path: Path) -> None:
    records = _session()
    transcript, where = _saved(tmp_path, records)
    assert not load_head(_assembler(Config(snip_enabled=True)), transcript, where)
    header, body = (where / HEAD_FILE).read_bytes().split(b"\n", 1)
    data = orjson.loads(header)
    data["code"] = "0" * 32
    (where / HEAD_FILE).write_bytes(orjson.dumps(data) + b"\n" + body)
    assert not load_head(_assembler(), transcript, where)


def _resumed_after(tmp_path: Path, records: list[AnyRecord], control: AnyRecord) -> str:
    """The first request after a resume, when `control` was appended after the head was saved."""
    transcript, where = _saved(tmp_path, records)
    with transcript.open("ab") as f:
        f.write(encode_line(control))
    resumed = _assembler()
    assert load_head(resumed, transcript, where)  # the file is fine; what it saved no longer holds
    later = [*records, control, user("next")]
    body = resumed.build(later).body
    assert _same(body, later)
    return orjson.dumps(body).decode()


def test_a_view_changed_since_the_head_was_saved_is_normalized_from_scratch(tmp_path: Path) -> None:
    records = _session()
    snip = SnipBoundary(uuid="snip-1", timestamp="t", removed_uuids=(records[2].uuid,))
    assert "result 0" not in _resumed_after(tmp_path, records, snip)


def test_a_result_cleared_after_the_save_is_normalized_from_scratch(tmp_path: Path) -> None:
    cleared = ResultsCleared(uuid="clear-1", timestamp="t", tool_use_ids=("toolu_000",), placeholder="[gone]")
    # the same uuids, other content: not the saved head
    assert "[gone]" in _resumed_after(tmp_path, _session(), cleared)


def test_a_cleared_result_that_normalization_had_rewritten_is_not_taken_from_the_head(tmp_path: Path) -> None:
    # an id the API refuses is rewritten (A14), so this result is saved as a copy, not as a place
    records = _session()
    records[3:5] = [
        reply("m1", {"type": "tool_use", "id": "bad id!", "name": "Read", "input": {}}),
        user([{"type": "tool_result", "tool_use_id": "bad id!", "content": "stale result"}]),
    ]
    cleared = ResultsCleared(uuid="clear-1", timestamp="t", tool_use_ids=("bad id!",), placeholder="[gone]")
    body = _resumed_after(tmp_path, records, cleared)
    assert "[gone]" in body
    assert "stale result" not in body


def test_blocks_normalization_passed_through_are_saved_as_places_not_copies(tmp_path: Path) -> None:
    records = _session(turns=40, size=2_000)
    _, where = _saved(tmp_path, records)
    warm = _assembler()
    warm.build(records)
    frozen = warm.frozen_head()
    assert frozen is not None
    full = len(orjson.dumps(frozen[0].wire))  # about 80 KB of results
    assert (where / HEAD_FILE).stat().st_size < full / 10


def test_the_normalizer_takes_a_head_back_only_for_entries_that_start_with_its_uuids() -> None:
    from foldline.api.normalize import IncrementalNormalizer, normalize_messages_for_api
    from foldline.timeline import Entry

    def entries(size: int) -> list[Entry]:
        return [r for r in _session(size=size) if isinstance(r, UserEntry | AssistantEntry)]

    first = IncrementalNormalizer()
    saved = entries(10)
    first.messages(saved)
    head = first.frozen()
    assert head is not None
    other = entries(30)  # the same shape, other uuids and other results
    resumed = IncrementalNormalizer()
    resumed.restore(head)
    assert resumed.messages(other) == normalize_messages_for_api(other)
    again = IncrementalNormalizer()
    again.restore(head)
    assert again.messages(saved) == normalize_messages_for_api(saved)
    assert again.frozen() is not None


def test_nothing_frozen_leaves_no_file_and_removes_an_old_one(tmp_path: Path) -> None:
    records = _session()
    transcript, where = _saved(tmp_path, records)
    empty = _assembler()
    assert not save_head(empty, transcript, where, len(records))  # never built: nothing frozen
    assert not (where / HEAD_FILE).exists()


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messy_timelines(max_actions=30), st.data())
def test_resuming_from_any_saved_point_is_a_fresh_build(generated: Generated, data: st.DataObject) -> None:
    entries: list[AnyRecord] = list(generated.entries)
    cut = data.draw(st.integers((len(entries) + 1) // 2, len(entries)), label="saved after")
    warm = _assembler()
    for k in range(1, cut + 1):
        try:
            warm.build(entries[:k])
        except UserError:
            pass
    with tempfile.TemporaryDirectory() as tmp:
        transcript = _write(Path(tmp) / "s.jsonl", entries[:cut])
        saved = save_head(warm, transcript, Path(tmp) / "s", cut)
        event(f"head saved: {saved}")
        with transcript.open("ab") as f:
            f.write(b"".join(encode_line(r) for r in entries[cut:]))
        resumed = _assembler()
        assert load_head(resumed, transcript, Path(tmp) / "s") == saved
        for k in range(cut, len(entries) + 1):
            try:
                want = orjson.dumps(build_request(entries[:k], CONFIG, SYSTEM, TOOLS, LOCAL).body)
            except UserError:
                with pytest.raises(UserError):
                    resumed.build(entries[:k])
                continue
            assert orjson.dumps(resumed.build(entries[:k]).body) == want


def test_a_head_saved_by_one_process_is_taken_back_by_another(tmp_path: Path) -> None:
    # a resume is always another process, with another string-hash seed (set orders differ)
    records = _session()
    _write(tmp_path / "s.jsonl", records)
    script = """
import pickle, sys
from pathlib import Path
from foldline.api.frozen_head import load_head, save_head
from foldline.api.params import RequestAssembler
from foldline.config import Config
from tests.api.test_frozen_head import CONFIG, LOCAL, SYSTEM, TOOLS
records = pickle.loads(Path(sys.argv[2]).read_bytes())
tmp = Path(sys.argv[3])
assembler = RequestAssembler(CONFIG, SYSTEM, TOOLS, LOCAL)
if sys.argv[1] == "save":
    assembler.build(records[:-2])
    assembler.build(records)
    print(save_head(assembler, tmp / "s.jsonl", tmp / "s", len(records)))
else:
    print(load_head(assembler, tmp / "s.jsonl", tmp / "s"))
"""
    (tmp_path / "records.pickle").write_bytes(pickle.dumps(records))
    root = Path(__file__).resolve().parents[2]
    for action, seed in (("save", "1"), ("load", "2")):
        done = subprocess.run(
            [sys.executable, "-c", script, action, str(tmp_path / "records.pickle"), str(tmp_path)],
            capture_output=True,
            text=True,
            cwd=root,
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
        )
        assert done.stdout.strip() == "True", (action, done.stderr)
