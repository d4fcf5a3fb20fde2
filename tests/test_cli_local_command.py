"""Slash-command output is recorded as `local_command` entries (R1.3) and `/rewind` drops a turn.

The model used to never see what `/context` or `/cost` showed, and the transcript did not have it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from foldline.cli._slash import run_slash
from foldline.config import Config
from foldline.session import Session
from foldline.testing import ScriptedProvider
from foldline.timeline import SystemEntry
from foldline.transcript import load_transcript

pytestmark = pytest.mark.anyio


@dataclass
class _Chat:
    session: Session
    console: Console
    sessions_dir: Path

    async def switch(self, path: Path | None, *, model: str | None = None) -> None:
        raise AssertionError("not used here")

    async def run_cancellable(self, work: Any) -> None:
        await work


def _chat(tmp_path: Path, provider: ScriptedProvider) -> tuple[_Chat, io.StringIO]:
    (tmp_path / "ws").mkdir()
    session = Session.open(
        tmp_path / "s.jsonl",
        provider=provider,
        workspace=tmp_path / "ws",
        config=Config(model="claude-sonnet-4-5"),
        levels=False,
    )
    out = io.StringIO()
    return _Chat(session, Console(file=out, width=100), tmp_path), out


async def test_cost_output_is_shown_recorded_and_sent_with_the_next_prompt(tmp_path: Path) -> None:
    provider = ScriptedProvider([{"text": "first"}, {"text": "I see the cost"}])
    chat, out = _chat(tmp_path, provider)
    await chat.session.submit_message("hi")
    assert await run_slash(chat, "/cost")
    shown = out.getvalue()
    assert "1 API calls" in shown  # still shown to the user
    [entry] = [
        r for r in chat.session.engine.timeline if isinstance(r, SystemEntry) and r.subtype != "environment"
    ]
    assert entry.subtype == "local_command"
    assert entry.content.startswith("<command-name>/cost</command-name>\n<command-args></command-args>\n")
    assert shown.strip() in entry.content  # what the user saw, as plain text
    await chat.session.submit_message("what did that cost?")
    sent = str(provider.calls[-1].body["messages"])
    assert "<local-command-stdout>1 API calls" in sent  # the model sees what the user saw
    path = chat.session.path
    await chat.session.aclose()
    records = load_transcript(path).timeline().snapshot()
    assert any(isinstance(r, SystemEntry) and r.subtype == "local_command" for r in records)


async def test_rewind_drops_the_last_turn_from_the_next_request(tmp_path: Path) -> None:
    provider = ScriptedProvider([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    chat, out = _chat(tmp_path, provider)
    await chat.session.submit_message("keep this")
    await chat.session.submit_message("drop this")
    assert await run_slash(chat, "/rewind")
    assert "rewound a turn: 2 messages no longer sent to the model" in out.getvalue()
    await chat.session.submit_message("go on")
    sent = str(provider.calls[-1].body["messages"])
    assert "keep this" in sent
    assert "drop this" not in sent
    await chat.session.aclose()
