"""Compaction hooks, prompt-too-long recovery (R5.4), blocking limit, instructions, tail, telemetry."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from foldline.compact.pipeline import CompactionContext, StageResult
from foldline.config import AutoCompactConfig
from foldline.engine import QueryEngine
from foldline.errors import PromptTooLongError
from foldline.events import JsonlTelemetrySink
from foldline.testing import overloaded
from foldline.timeline import (
    AssistantEntry,
    AttachmentEntry,
    SnipBoundary,
    UserEntry,
    new_uuid,
    now_iso,
    ui_view,
)

from .conftest import Harness, reload


def _words(n: int, tag: str = "w") -> str:
    return "".join(f" {tag}{i}" for i in range(n))


@dataclass
class _SnipFirstExchange:
    """A test level: on prompt-too-long, snips the first user/assistant exchange."""

    name: str = "snip-first"
    gaps: list[int | None] = field(default_factory=list)

    async def run(self, ctx: CompactionContext) -> StageResult:
        return StageResult()

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        await ctx.run_pre_compact_hooks()
        self.gaps.append(gap_tokens)
        first = [e.uuid for e in ui_view(ctx.records) if isinstance(e, UserEntry | AssistantEntry)][:2]
        return StageResult((SnipBoundary(uuid=new_uuid(), timestamp=now_iso(), removed_uuids=tuple(first)),))


@pytest.mark.anyio
async def test_prompt_too_long_runs_the_recovery_chain_and_retries(model: Callable[..., Harness]) -> None:
    h = model(
        [{"text": "one"}, {"text": "two"}],
        server_context_window=4_000,
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
async def test_prompt_too_long_with_nothing_to_compact_tells_the_user(
    scripted: Callable[..., Harness],
) -> None:
    h = scripted([], server_context_window=500)
    engine = await h.engine()
    with pytest.raises(PromptTooLongError, match="run /compact"):
        await engine.submit_message(_words(800))
    last = reload(h).snapshot()[-1]
    assert isinstance(last, AssistantEntry)
    assert last.is_api_error_message


@pytest.mark.anyio
async def test_blocking_limit_refuses_before_sending(scripted: Callable[..., Harness]) -> None:
    h = scripted(
        [],
        context_window=4_000,
        output_reserve=1_000,
        autocompact=AutoCompactConfig(blocking_margin=500),
    )
    engine = await h.engine()
    with pytest.raises(PromptTooLongError, match="over the blocking limit"):
        await engine.submit_message("x" * 12_000)
    assert h.statuses() == []  # nothing was sent


@pytest.mark.anyio
async def test_instruction_files_are_attached_once_per_session(scripted: Callable[..., Harness]) -> None:
    h = scripted([{"text": "one"}, {"text": "two"}])
    (h.workspace / "FOLDLINE.md").write_text("Always answer in haiku.\n")
    engine = await h.engine()
    await engine.submit_message("hi")
    await engine.submit_message("again")
    attachments = [r for r in reload(h).snapshot() if isinstance(r, AttachmentEntry)]
    assert [a.attachment_type for a in attachments] == ["instructions"]
    assert "Always answer in haiku." in repr(h.requests()[0].messages[0])


@pytest.mark.anyio
async def test_background_tail_never_blocks_the_next_input(scripted: Callable[..., Harness]) -> None:
    h = scripted([{"text": "one"}, {"text": "two"}])
    release = asyncio.Event()
    finished: list[int] = []

    async def slow_tail(engine: QueryEngine) -> None:
        await release.wait()
        finished.append(len(engine.timeline))

    engine = await h.engine(tail_hooks=[slow_tail])
    await engine.submit_message("first")
    assert (await engine.submit_message("second")).text == "two"  # the first tail is still waiting
    assert finished == []
    release.set()
    await engine.drain()
    assert len(finished) == 2


@pytest.mark.anyio
async def test_jsonl_telemetry_sink_is_opt_in(scripted: Callable[..., Harness], tmp_path: Path) -> None:
    h = scripted([overloaded(), {"text": "late"}])
    engine = await h.engine()
    sink = tmp_path / "telemetry.jsonl"
    engine.events.sinks.append(JsonlTelemetrySink(sink))
    await engine.submit_message("hi")
    await engine.drain()
    events = [json.loads(line)["event"] for line in sink.read_text().splitlines()]
    assert events == ["retry", "turn_end"]


@pytest.mark.anyio
async def test_a_reply_that_would_overflow_the_window_is_asked_to_be_shorter(
    scripted: Callable[..., Harness],
) -> None:
    h = scripted([{"text": "short"}], server_context_window=4_000)
    engine = await h.engine()
    result = await engine.submit_message("hi")  # ~1,100 prompt tokens + the default 8,192 > 4,000
    assert result.text == "short"
    assert h.statuses() == [400, 200]
    [request] = h.requests()
    assert 1_024 <= request.max_tokens < 4_000


@pytest.mark.anyio
async def test_no_room_for_a_reply_falls_through_to_the_prompt_too_long_chain(
    scripted: Callable[..., Harness],
) -> None:
    h = scripted([], server_context_window=2_000)
    engine = await h.engine()
    # ~1,100 prompt tokens leave under 1,024 for a reply: the chain is asked (R5.4), and with
    # nothing in the conversation to compact the turn ends with its one message
    with pytest.raises(PromptTooLongError, match=r"exceed context limit.*nothing more could be compacted"):
        await engine.submit_message("hi")
    assert h.statuses() == [400]
