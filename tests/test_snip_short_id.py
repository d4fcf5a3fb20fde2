"""short_id is total over any string id, and keeps the tags of real uuids."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from foldline.api.validate import find_errors
from foldline.cli import cli
from foldline.compact.snip import short_id


def test_real_uuid_keeps_its_tag() -> None:
    # Tags already sent to the model name entries this way: they must not change.
    assert short_id("00000000-0000-0000-0000-000000000000") == "0"
    assert short_id("0000000024-aaaa") == "10"


def test_non_uuid_ids_get_a_tag() -> None:
    tags = {short_id(s) for s in ("request_abc", "request_0123456789ab", "", "ü", "x" * 100)}
    assert len(tags) == 5
    assert all(t and t.isalnum() for t in tags)


@settings(max_examples=50)
@given(st.text())
def test_short_id_is_total_and_stable(value: str) -> None:
    assert short_id(value) == short_id(value)
    assert 0 < len(short_id(value)) <= 8


def test_request_id_and_spread_message_do_not_crash_request(tmp_path: Path) -> None:
    sid = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
    env = {"sessionId": sid, "timestamp": "2025-01-01T00:00:00.000Z", "isSidechain": False}
    lines = [
        {**env, "type": "user", "uuid": "request_0f3a", "parentUuid": None,
         "message": {"role": "user", "content": "hi"}},
        {**env, "type": "assistant", "uuid": "request_zz9", "parentUuid": "request_0f3a",
         "message": {}},
        {**env, "type": "assistant", "uuid": "request_beef", "parentUuid": "request_0f3a",
         "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "yo"}]}},
    ]  # fmt: skip
    lines[1]["message"] = {str(i): c for i, c in enumerate("event: x")}
    path = tmp_path / f"{sid}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(line) for line in lines) + b"\n")
    result = CliRunner().invoke(cli, ["request", str(path), "--body-only"])
    assert result.exit_code == 0, result.output
    body = orjson.loads(result.stdout)
    assert find_errors(body) == []
