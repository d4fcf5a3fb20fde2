"""Listing sessions reads each legacy agent file's head once, not once per main session file."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from foldline.importers import claude_code
from foldline.sessions import list_sessions


def _line(session_id: str, uuid: str) -> bytes:
    obj = {
        "type": "user",
        "uuid": uuid,
        "parentUuid": None,
        "sessionId": session_id,
        "timestamp": "2026-01-01T00:00:00Z",
        "message": {"role": "user", "content": "hi"},
    }
    return orjson.dumps(obj) + b"\n"


def test_each_legacy_agent_file_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    claude_code._head_session_id.cache_clear()
    for i in range(12):
        sid = f"{i:08x}-0000-4000-8000-000000000000"
        (tmp_path / f"{sid}.jsonl").write_bytes(_line(sid, f"{i:08x}-1111-4000-8000-000000000000"))
        (tmp_path / f"agent-{i:08x}.jsonl").write_bytes(_line(sid, f"{i:08x}-2222-4000-8000-000000000000"))
    opened: list[Path] = []
    real_open = Path.open

    def counting_open(self: Path, *args: object, **kwargs: object) -> object:
        if self.name.startswith("agent-"):
            opened.append(self)
        return real_open(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "open", counting_open)
    sessions = list_sessions([tmp_path])
    assert len(sessions) == 12
    # Before the memo: 300 opens (every main file re-read every agent file's head).
    assert len(opened) <= 2 * 12, f"{len(opened)} opens of 12 agent files"
