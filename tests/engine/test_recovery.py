"""Interruptions in every window of the loop, then a resumed new turn (R5.3, design.md F1, F13).

Each case stops the loop at one point — by cancelling its task (Ctrl-C) or by a simulated kill
(the transcript write that would come next never happens) — then starts a fresh engine on the same
transcript and runs a new turn. Each asserts: the model accepted the new request (the in-process
model runs the server's strict validator), no tool ran twice, and the interruption is in the history
the model sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from foldline.engine import INTERRUPT_MARKER, INTERRUPT_MARKER_TOOLS, RESUME_MARKER, QueryEngine
from foldline.events import TextDeltaEvent, ToolInputDeltaEvent, UIEvent
from foldline.executor import INTERRUPTED_BEFORE_START, INTERRUPTED_WHILE_RUNNING
from foldline.testing import overloaded, stall
from foldline.timeline import AnyRecord, AssistantEntry, UserEntry

from .conftest import Harness, assert_valid_next_request, reload


def _tool(name: str, **tool_input: object) -> dict[str, object]:
    return {"name": name, "input": tool_input}


def _long_text(words: int) -> str:
    return " ".join(f"word{i}" for i in range(words))


async def _cancel_when(engine: QueryEngine, prompt: str, seen: Callable[[UIEvent], bool]) -> None:
    """Run a turn and cancel it from inside the first event for which `seen` is true."""
    task = asyncio.ensure_future(engine.submit_message(prompt))
    engine.events.subscribers.append(lambda event: task.cancel() if seen(event) else None)
    with pytest.raises(asyncio.CancelledError):
        await task


async def _new_turn_is_valid(h: Harness) -> list[dict[str, Any]]:
    """Resume on a fresh engine, run a new turn; return the history the server was sent."""
    engine = await h.engine()
    assert_valid_next_request(h, engine)
    before = len(h.requests())
    await engine.submit_message("are you still there?")
    assert len(h.requests()) == before + 1
    assert h.statuses()[-1] == 200
    return h.requests()[-1].messages


def _texts(messages: list[dict[str, Any]]) -> str:
    return repr(messages)


@pytest.mark.anyio
async def test_cancel_mid_text_stream_keeps_the_text_shown_and_marks_the_interrupt(
    scripted: Callable[..., Harness],
) -> None:
    h = scripted([stall({"text": _long_text(400)}, after_events=6), {"text": "yes"}])
    engine = await h.engine()
    await _cancel_when(engine, "tell me a story", lambda e: isinstance(e, TextDeltaEvent))
    records = reload(h).snapshot()
    partial = [r for r in records if isinstance(r, AssistantEntry)]
    assert len(partial) == 1
    assert partial[0].message.content[0]["text"].startswith("word0")
    assert _is_marker(records[-1], INTERRUPT_MARKER)
    history = await _new_turn_is_valid(h)
    assert INTERRUPT_MARKER in _texts(history)
    assert "word0" in _texts(history)


@pytest.mark.anyio
async def test_cancel_mid_tool_use_input_never_runs_the_tool(scripted: Callable[..., Harness]) -> None:
    h = scripted(
        [
            stall(
                {"tool_calls": [_tool("Write", file_path="big.txt", content=_long_text(400))]}, after_events=6
            ),
            {"text": "ok"},
        ]
    )
    engine = await h.engine()
    await _cancel_when(engine, "write it", lambda e: isinstance(e, ToolInputDeltaEvent))
    assert not (h.workspace / "big.txt").exists()
    records = reload(h).snapshot()
    assert not [r for r in records if isinstance(r, AssistantEntry)]  # half a tool call is never kept
    assert _is_marker(records[-1], INTERRUPT_MARKER)
    await _new_turn_is_valid(h)
    assert not (h.workspace / "big.txt").exists()


@pytest.mark.anyio
@pytest.mark.timeout(120)
async def test_cancel_during_one_of_several_tools(scripted: Callable[..., Harness]) -> None:
    h = scripted(
        [
            {
                "tool_calls": [
                    _tool("Read", file_path="a.txt"),
                    _tool("Bash", command="echo ran >> counter.txt; echo started > started.fifo; sleep 30"),
                    _tool("Glob", pattern="*.txt"),
                ]
            },
            {"text": "ok"},
        ]
    )
    (h.workspace / "a.txt").write_text("alpha\n")
    os.mkfifo(h.workspace / "started.fifo")
    engine = await h.engine()
    counter = h.workspace / "counter.txt"
    task = asyncio.ensure_future(engine.submit_message("go"))
    # Opening a FIFO for reading blocks until the Bash command opens it for writing: an event, not a
    # poll. Should the command never start, a writer opens it after a minute (a bound no busy
    # machine reaches), the read gets end-of-file, and the test fails here instead of hanging.
    fifo = h.workspace / "started.fifo"

    def unblock() -> None:
        with contextlib.suppress(OSError):  # ENXIO: nobody reads it any more
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    release = threading.Timer(60, unblock)
    release.start()
    try:
        assert await asyncio.to_thread(fifo.read_text) == "started\n"
    finally:
        release.cancel()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = reload(h).snapshot()[-1]
    assert isinstance(last, UserEntry)
    assert isinstance(last.message.content, list)
    results = last.message.content
    assert "alpha" in str(results[0]["content"])  # the read finished: its real result is kept
    assert results[1]["content"] == INTERRUPTED_WHILE_RUNNING
    assert results[2]["content"] == INTERRUPTED_BEFORE_START
    assert results[3] == {"type": "text", "text": INTERRUPT_MARKER_TOOLS}
    await _new_turn_is_valid(h)
    assert counter.read_text() == "ran\n"  # the Bash call never ran twice


class _Killed(BaseException):
    """Stands in for SIGKILL: the process stops before the next transcript write."""


@pytest.mark.anyio
async def test_killed_after_results_but_before_they_are_saved(scripted: Callable[..., Harness]) -> None:
    h = scripted([{"tool_calls": [_tool("Bash", command="echo ran >> counter.txt")]}, {"text": "ok"}])
    engine = await h.engine()
    writer = engine.transcript
    assert writer is not None
    real_append = writer.append

    def append(record: AnyRecord, *, sync: bool = False) -> None:
        if isinstance(record, UserEntry) and "tool_result" in repr(record.message.content):
            raise _Killed
        real_append(record, sync=sync)

    writer.append = append  # type: ignore[method-assign]
    with pytest.raises(_Killed):
        await engine.submit_message("count")
    assert (h.workspace / "counter.txt").read_text() == "ran\n"
    history = await _new_turn_is_valid(h)
    assert RESUME_MARKER in _texts(history)  # recorded as "may have run", never re-run
    assert (h.workspace / "counter.txt").read_text() == "ran\n"


@pytest.mark.anyio
async def test_cancel_in_a_backoff_sleep(scripted: Callable[..., Harness]) -> None:
    h = scripted([overloaded(), {"text": "first"}])
    sleeping = asyncio.Event()

    async def slow_sleep(delay: float) -> None:
        sleeping.set()
        await asyncio.sleep(60)

    engine = await h.engine(sleep=slow_sleep)
    task = asyncio.ensure_future(engine.submit_message("hello"))
    await sleeping.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert h.statuses() == [529]
    assert _is_marker(reload(h).snapshot()[-1], INTERRUPT_MARKER)
    history = await _new_turn_is_valid(h)
    assert INTERRUPT_MARKER in _texts(history)


def _is_marker(record: AnyRecord, marker: str) -> bool:
    return isinstance(record, UserEntry) and marker in repr(record.message.content)
