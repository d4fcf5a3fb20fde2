"""The engine end to end over real HTTP: the official SDK against `foldline serve` on loopback.

Engine logic is tested in-process (`scripted`); these stay on HTTP because HTTP or the server is the
subject: attempts counted at the server (the SDK's own retries are off), a real `retry-after` header,
the server's prompt cache and its prompt-too-long message, and the headline loop end to end.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from foldline.compact.pipeline import CompactionContext
from foldline.errors import RetriesExhaustedError
from foldline.events import RetryEvent, TextDeltaEvent
from foldline.server.config import ServerConfig
from foldline.timeline import SnipBoundary, SystemEntry

from .conftest import Harness, assert_valid_next_request, reload
from .test_hooks import _SnipFirstExchange, _words


def _tool(name: str, **tool_input: object) -> dict[str, object]:
    return {"name": name, "input": tool_input}


@pytest.mark.anyio
async def test_multi_turn_tool_loop_writes_a_transcript_that_resumes_and_continues(
    harness: Callable[..., Harness],
) -> None:
    h = harness(
        [
            {
                "text": "Reading both.",
                "tool_calls": [_tool("Read", file_path="a.txt"), _tool("Read", file_path="b.txt")],
            },
            {"tool_calls": [_tool("Write", file_path="c.txt", content="A+B\n")]},
            {"tool_calls": [_tool("Bash", command="cat c.txt | tr a-z A-Z; echo done")]},
            {"text": "All done."},
            {"text": "Second turn answer."},
        ]
    )
    (h.workspace / "a.txt").write_text("alpha\n")
    (h.workspace / "b.txt").write_text("beta\n")
    engine = await h.engine()
    result = await engine.submit_message("combine a and b")
    assert (result.stop_reason, result.text) == ("end_turn", "All done.")
    assert (h.workspace / "c.txt").read_text() == "A+B\n"

    requests = h.requests()
    assert len(requests) == 4
    parallel_results = requests[1].messages[-1]["content"]
    # Both results in one user message, then the snip id tag (R3.1.1).
    assert [b["type"] for b in parallel_results] == ["tool_result", "tool_result", "text"]
    assert "alpha" in str(parallel_results[0]["content"])
    assert "beta" in str(parallel_results[1]["content"])
    bash_output = str(requests[3].messages[-1]["content"][0]["content"])
    assert "A+B" in bash_output
    assert "done" in bash_output
    assert "".join(e.text for e in h.events if isinstance(e, TextDeltaEvent)).startswith("Reading both.")

    # The transcript alone rebuilds the timeline, record for record.
    resumed = reload(h)
    assert resumed.snapshot() == engine.timeline.snapshot()

    again = await h.engine()
    assert_valid_next_request(h, again)
    second = await again.submit_message("and now?")
    assert second.text == "Second turn answer."
    assert len(h.requests()) == 5
    history = h.requests()[-1].messages
    assert history[0]["content"][0]["text"].startswith("combine a and b")
    assert sum(1 for m in history if m["role"] == "assistant") == 4


@pytest.mark.anyio
async def test_a_turn_of_sixty_tool_rounds_completes(harness: Callable[..., Harness]) -> None:
    h = harness(
        [{"tool_calls": [_tool("Bash", command=f"echo {i}")]} for i in range(60)] + [{"text": "done"}]
    )
    engine = await h.engine()
    result = await engine.submit_message("work")
    assert (result.stop_reason, result.text, len(h.requests()), result.attempts) == (
        "end_turn",
        "done",
        61,
        61,
    )


@pytest.mark.anyio
async def test_prompt_too_long_runs_the_recovery_chain_and_retries(harness: Callable[..., Harness]) -> None:
    h = harness(
        [{"text": "one"}, {"text": "two"}],
        server=ServerConfig(context_window=4_000),
        snip_enabled=False,
        max_output_tokens=100,
    )
    stage = _SnipFirstExchange()
    hooked: list[int] = []

    async def pre_compact(ctx: CompactionContext) -> None:
        hooked.append(len(ctx.records))

    engine = await h.engine(stages=[stage], pre_compact_hooks=[pre_compact])
    await engine.submit_message(_words(1_500, "a"))
    assert (await engine.submit_message(_words(1_600, "b"))).text == "two"
    assert h.statuses() == [200, 400, 200]
    assert stage.gaps[0] is not None
    assert stage.gaps[0] > 0  # parsed from "prompt is too long: N tokens > M maximum"
    assert len(hooked) == 1
    assert any(isinstance(r, SnipBoundary) for r in reload(h).snapshot())
    assert " a0 " not in repr(h.requests()[-1].messages)  # the snipped exchange is gone from the API view


@pytest.mark.anyio
async def test_a_server_side_eviction_is_reported_as_a_cache_break(harness: Callable[..., Harness]) -> None:
    server_time = [1_000.0]
    h = harness([{"text": "one"}, {"text": "two"}, {"text": "three"}], server_clock=lambda: server_time[0])
    engine = await h.engine(session_dir=h.workspace.parent / "files")
    await engine.submit_message(_words(3_000))
    await engine.submit_message("again")
    server_time[0] += 600  # the server's 5-minute cache entries expire; the client changed nothing
    await engine.submit_message("and again")
    breaks = [r for r in reload(h).snapshot() if isinstance(r, SystemEntry) and r.subtype == "cache_break"]
    assert len(breaks) == 1
    assert "likely server-side" in breaks[0].content
    assert breaks[0].level == "warning"


@pytest.mark.slow
@pytest.mark.anyio
async def test_retry_after_three_seconds_is_honoured(harness: Callable[..., Harness]) -> None:
    h = harness([{"text": "finally"}], faults="1:429/3")
    engine = await h.engine()
    started = time.monotonic()
    result = await engine.submit_message("hi")
    assert time.monotonic() - started >= 3.0
    assert (result.text, result.attempts, h.statuses()) == ("finally", 2, [429, 200])
    assert [e.delay for e in h.events if isinstance(e, RetryEvent)] == [3.0]


@pytest.mark.anyio
async def test_http_attempts_per_turn_never_exceed_the_cap(harness: Callable[..., Harness]) -> None:
    h = harness([{"text": "never"}], faults="1-50:529", retry={"max_attempts": 4})
    engine = await h.engine()
    with pytest.raises(RetriesExhaustedError, match="gave up after 4 attempts"):
        await engine.submit_message("hi")
    assert h.statuses() == [529] * 4  # counted at the server: the SDK's own retries are off


@pytest.mark.anyio
async def test_retries_per_turn_stop_at_the_cap(harness: Callable[..., Harness]) -> None:
    odd = ",".join(f"{n}:529" for n in range(1, 40, 2))  # every round's first attempt fails
    replies = [{"tool_calls": [{"name": "Bash", "input": {"command": "true"}}]}] * 20
    h = harness(replies, faults=odd, retry={"max_retries_per_turn": 3})
    engine = await h.engine()
    with pytest.raises(RetriesExhaustedError, match="already retried 3 times"):
        await engine.submit_message("hi")
    assert h.statuses() == [529, 200] * 3 + [529]
