"""No tool result makes a session unrecoverable (R3.0, R3.4.5, R5.4).

A 4 MB Read used to come back whole (about a million tokens): every later turn failed with "run
/compact", and `/compact` failed too, because the summary fork can drop old rounds but never the
newest one. Read now stops at its cap, the level-0 budget covers what passes it, and the summary fork
cuts an oversized block to its head before it gives up.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from foldline.compact.autocompact import install_autocompact
from foldline.compact.prompts import SUMMARY_SECTIONS
from foldline.config import Config
from foldline.engine import QueryEngine
from foldline.errors import PromptTooLongError
from foldline.testing import FunctionProvider
from foldline.timeline import (
    AssistantEntry,
    AssistantMessage,
    CompactBoundary,
    Timeline,
    UserEntry,
    UserMessage,
    new_uuid,
    now_iso,
)
from foldline.tools import PermissionRules, Rule, default_tools
from foldline.transcript import open_session

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-5"
SUMMARY_ASK = "Your task is to write a detailed summary"


def _summary() -> str:
    return "\n\n".join(
        f"## {title}\nThe user looked at a wide file ({title.lower()})." for title in SUMMARY_SECTIONS
    )


def _last_user_text(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    texts = (str(b.get("text", "")) for b in content if b.get("type") == "text")
    return " ".join(t for t in texts if not t.startswith("[id:"))  # Snip's tags are not the prompt


def _model(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
    """Reads when asked to, summarizes when asked to, otherwise answers briefly."""
    text = _last_user_text(body)
    if SUMMARY_ASK in text:
        return {"text": _summary()}
    if not text.strip():  # only tool results
        return {"text": "I read it."}
    if "read wide.txt" in text:
        return {"tool_calls": [{"name": "Read", "input": {"file_path": "wide.txt"}}]}
    return {"text": "ok"}


def _engine(tmp_path: Path, provider: FunctionProvider, timeline: Timeline | None = None) -> QueryEngine:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    engine = QueryEngine(
        provider=provider,
        config=Config(model=MODEL),
        tools=default_tools(),
        workspace=workspace,
        timeline=timeline or Timeline(session_id="s1"),
        permission_mode="bypassPermissions",
        session_dir=tmp_path / "session",
    )
    install_autocompact(engine)
    return engine


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(("w" * 1_999 + "\n") * 2_000, id="2000-lines-of-2000-chars"),
        pytest.param("[" + "1," * 2_000_000 + "1]", id="one-4mb-line"),
    ],
)
async def test_a_4mb_read_mid_session_then_five_turns_and_compact_all_succeed(
    tmp_path: Path, content: str
) -> None:
    provider = FunctionProvider(_model, context_window=200_000)  # the API's own 400 past the window
    engine = _engine(tmp_path, provider)
    (engine.workspace / "wide.txt").write_text(content)  # 4 MB
    await engine.submit_message("hello")
    assert (await engine.submit_message("read wide.txt")).text == "I read it."
    for i in range(5):  # enough to compact even when the Read result was small
        assert (await engine.submit_message(f"turn {i}: " + "word " * 2_000)).text == "ok"
    assert any(isinstance(r, CompactBoundary) for r in await engine.compact())
    assert (await engine.submit_message("after compact")).text == "ok"
    assert all(c.status in (None, 200) for c in provider.calls)
    await engine.aclose()


async def test_compact_succeeds_when_the_newest_round_alone_is_too_big(tmp_path: Path) -> None:
    """A session already holding a huge result (an older foldline, an imported transcript): the
    summary fork cuts the block to its head instead of failing, and the session goes on."""
    timeline = Timeline(session_id="s1")
    parent: str | None = None

    def add(entry: UserEntry | AssistantEntry) -> None:
        nonlocal parent
        timeline.append(entry)
        parent = entry.uuid

    def common() -> dict[str, Any]:
        return {"uuid": new_uuid(), "parent_uuid": parent, "timestamp": now_iso(), "session_id": "s1"}

    add(UserEntry(**common(), message=UserMessage(content="read wide.txt")))
    call = {"type": "tool_use", "id": "toolu_big", "name": "Read", "input": {"file_path": "wide.txt"}}
    add(
        AssistantEntry(
            **common(), message=AssistantMessage(id="msg_1", content=[call], stop_reason="tool_use")
        )
    )
    huge = {"type": "tool_result", "tool_use_id": "toolu_big", "content": "x" * 4_000_000}
    add(UserEntry(**common(), message=UserMessage(content=[huge])))
    forks: list[str] = []

    def model(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        if SUMMARY_ASK in _last_user_text(body):
            forks.append(str(body["messages"]))
        return _model(body, betas)

    engine = _engine(tmp_path, FunctionProvider(model, context_window=200_000), timeline)
    added = await engine.compact()
    assert any(isinstance(r, CompactBoundary) for r in added), added
    assert len(forks) == 1
    assert "more characters left out of this summary request" in forks[0]
    assert (await engine.submit_message("go on")).text == "ok"
    await engine.aclose()


async def test_a_saved_oversized_result_is_read_back_without_asking(tmp_path: Path) -> None:
    """R3.0: the preview says "Read it"; with nobody to approve (-p), the Read must still run."""
    saved = re.compile(r"The full output is saved to (\S+);")
    reads: list[dict[str, Any]] = []

    def model(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        last = body["messages"][-1]["content"]
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"]
        if not results:
            return {"tool_calls": [{"name": "Bash", "input": {"command": "seq 1 20000"}}]}
        if match := saved.search(str(results[0]["content"])):
            return {"tool_calls": [{"name": "Read", "input": {"file_path": match[1], "limit": 3}}]}
        reads.append(results[0])
        return {"text": "done"}

    workspace = tmp_path / "ws"
    workspace.mkdir()
    engine = QueryEngine(
        provider=FunctionProvider(model),
        config=Config(model=MODEL, tool_result_budget_chars=10_000),  # Bash keeps 30K: moved
        tools=default_tools(),
        workspace=workspace,
        timeline=Timeline(session_id="s1"),
        permission_mode="default",
        rules=PermissionRules(allow=(Rule.parse("Bash(seq:*)"),)),
        ask=None,  # -p: nobody can approve, so an "ask" is a refusal
        session_dir=tmp_path / "session",
    )
    assert (await engine.submit_message("count")).text == "done"
    [read] = reads
    assert not read.get("is_error"), read
    assert read["content"].startswith("     1\t1\n     2\t2\n     3\t3")
    await engine.aclose()


async def test_a_prompt_that_can_never_fit_is_refused_before_it_is_saved(tmp_path: Path) -> None:
    """A 5 MB prompt used to be saved, then fail every later turn; now nothing is recorded."""
    transcript = tmp_path / "s1.jsonl"
    writer, timeline = open_session(transcript, session_id="s1", fsync="never")
    provider = FunctionProvider(_model, context_window=200_000)
    engine = _engine(tmp_path, provider, timeline)
    engine.transcript = writer
    engine.log.transcript = writer
    await engine.submit_message("hello")
    before, size = len(engine.timeline), transcript.stat().st_size
    huge = "data " * 1_000_000  # 5 MB
    with pytest.raises(PromptTooLongError) as caught:
        await engine.submit_message(huge)
    message = str(caught.value)
    assert "5,000,000 characters, at least 833,334 tokens" in message
    assert f"over the blocking limit ({engine.config.blocking_limit:,} tokens" in message
    assert "not sent or saved" in message
    assert (len(engine.timeline), transcript.stat().st_size) == (before, size)
    assert len(provider.calls) == 1
    assert (await engine.submit_message("a normal one")).text == "ok"
    await engine.aclose()
    writer.close()


async def test_rewind_gets_a_session_stuck_over_the_limit_going_again(tmp_path: Path) -> None:
    """A turn that overfilled the context (saved by an older foldline) fails every prompt after it,
    `/compact` included; `/rewind` drops it from the model's view and the next prompt works."""
    provider = FunctionProvider(_model, context_window=200_000)
    engine = _engine(tmp_path, provider)
    engine.stages = [s for s in engine.stages if s.name != "autocompact"]  # as if the summary failed
    await engine.submit_message("hello")
    stuck = engine.log.entry(UserEntry, message=UserMessage(content="x" * 800_000))  # 200K+ tokens
    engine.log.append(stuck)
    with pytest.raises(PromptTooLongError, match=r"run /compact, or /rewind to drop the last turn"):
        await engine.submit_message("anything")
    assert engine.rewind() == 2  # the prompt that failed and the error entry it left
    assert engine.rewind() == 1  # the turn that overfilled the context
    assert (await engine.submit_message("after rewind")).text == "ok"
    assert "x" * 1_000 not in str(provider.calls[-1].body)
    assert "hello" in str(provider.calls[-1].body)  # earlier turns are kept
    await engine.aclose()
