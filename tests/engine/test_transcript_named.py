"""The transcript named to the model (`TranscriptConfig.named_to_model`): a lost detail can be searched."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from foldline.config import Config
from foldline.session import Session
from foldline.testing import ScriptedProvider
from foldline.tools import default_tools


def _config(tmp_path: Path, named: bool) -> Config:
    base = Config()
    return dataclasses.replace(
        base,
        transcript=dataclasses.replace(
            base.transcript, sessions_dir=tmp_path / "sessions", named_to_model=named
        ),
    )


def _open(tmp_path: Path, provider: ScriptedProvider, *, named: bool) -> Session:
    (tmp_path / "ws").mkdir(exist_ok=True)
    return Session.open(
        tmp_path / "sessions" / "s.jsonl",
        provider=provider,
        workspace=tmp_path / "ws",
        config=_config(tmp_path, named),
        system="You are a test.",
        environment=False,
        undo=False,
        tools=default_tools(),
    )


def test_the_model_is_told_where_the_transcript_is_and_may_search_it(tmp_path: Path) -> None:
    asyncio.run(_told(tmp_path))


async def _told(tmp_path: Path) -> None:
    transcript = (tmp_path / "sessions" / "s.jsonl").resolve()
    provider = ScriptedProvider(
        [
            {"text": "Noted."},
            {
                "tool_calls": [
                    {
                        "name": "Grep",
                        "input": {
                            "pattern": "staging port is",
                            "path": str(transcript),
                            "output_mode": "content",
                        },
                    }
                ]
            },
            {"text": "It is 6543."},
        ]
    )
    session = _open(tmp_path, provider, named=True)
    try:
        assert str(transcript) in session.engine.system
        await session.submit_message("Note for later: the staging port is 6543.")
        await session.submit_message("What was the staging port?")
    finally:
        await session.aclose()
    provider.assert_complete()
    # the search ran without asking (default mode, a path outside the workspace) and found the line
    result = provider.calls[2].messages[-1]["content"][0]
    assert result["type"] == "tool_result"
    assert not result.get("is_error"), result
    assert "6543" in str(result["content"])


def test_without_the_setting_the_transcript_is_neither_named_nor_readable(tmp_path: Path) -> None:
    asyncio.run(_not_told(tmp_path))


async def _not_told(tmp_path: Path) -> None:
    transcript = (tmp_path / "sessions" / "s.jsonl").resolve()
    provider = ScriptedProvider(
        [
            {"tool_calls": [{"name": "Grep", "input": {"pattern": "port", "path": str(transcript)}}]},
            {"text": "I could not look."},
        ]
    )
    session = _open(tmp_path, provider, named=False)
    try:
        assert str(transcript) not in session.engine.system
        await session.submit_message("What was the staging port?")
    finally:
        await session.aclose()
    result = provider.calls[1].messages[-1]["content"][0]
    # the search was tried (the tool ran its permission check) and refused: outside the workspace
    assert result["type"] == "tool_result"
    assert result.get("is_error"), result
    assert "outside the workspace" in str(result["content"]), result


def test_a_small_window_names_no_transcript(tmp_path: Path) -> None:
    """Where the short system prompt goes (a small local model's window), the line would cost more
    room than it could save."""
    small = dataclasses.replace(_config(tmp_path, True), context_window=8_192)
    assert not small.names_transcript
    assert _config(tmp_path, True).names_transcript
    (tmp_path / "ws").mkdir(exist_ok=True)
    session = Session.open(
        tmp_path / "sessions" / "s.jsonl",
        provider=ScriptedProvider([]),
        workspace=tmp_path / "ws",
        config=small,
        environment=False,
        undo=False,
    )
    asyncio.run(session.aclose())
    assert "transcript" not in session.engine.system
