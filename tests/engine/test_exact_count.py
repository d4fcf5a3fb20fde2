"""The blocking limit holds exactly (R3.4.1): a request the estimate would let through is counted first.

The padded estimate assumes 3 characters per token; a prompt of digits and dots comes out near 1 at
the server. These tests send such a prompt over real HTTP and check, at the server, that nothing
over the blocking limit ever reached the model, main loop or fork.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from foldline.compact.autocompact import install_autocompact
from foldline.compact.microcompact import MicrocompactStage
from foldline.compact.pipeline import CompactionContext
from foldline.compact.prompts import SUMMARY_SECTIONS
from foldline.compact.window import deleting
from foldline.config import AutoCompactConfig, Config, SessionMemoryConfig
from foldline.errors import PromptTooLongError
from foldline.providers.base import Capabilities
from foldline.server.backend import BackendRequest
from foldline.server.caching import flatten, total_tokens
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AssistantMessage,
    CachePin,
    CollapseCommit,
    CompactBoundary,
    ResultsCleared,
    UserEntry,
    UserMessage,
)
from foldline.tokens import estimate_text, padded

from .conftest import MODEL, Harness, reload

pytestmark = pytest.mark.anyio

SUMMARY_ASK = "Your task is to write a detailed summary"


def _small() -> dict[str, Any]:
    """A 20K window, 2K reserve: blocking limit 15,000; AutoCompact only reacts (threshold 17,000)."""
    return {
        "context_window": 20_000,
        "output_reserve": 2_000,
        "max_output_tokens": 500,
        "snip_enabled": False,
        "autocompact": AutoCompactConfig(
            buffer_tokens=1_000, summary_max_tokens=1_000, memory=SessionMemoryConfig(enabled=False)
        ),
    }


def _dense(tokens: int) -> str:
    """Digits and dots: the server counts one token per character, the estimate one per three."""
    return "".join(f"{i % 10}." for i in range(tokens // 2))


def _tokens(request: BackendRequest) -> int:
    body = {"model": MODEL, "messages": request.messages, "system": request.system, "tools": request.tools}
    return total_tokens(flatten(body))


def _summary() -> str:
    return "\n\n".join(f"## {title}\n{title} text." for title in SUMMARY_SECTIONS)


async def test_a_dense_prompt_under_the_estimate_is_counted_and_compacted_before_it_is_sent(
    harness: Callable[..., Harness],
) -> None:
    summary = {"text": _summary(), "when": {"last_user_contains": SUMMARY_ASK}}
    h = harness([summary, {"text": "first"}, {"text": "second"}], **_small())
    engine = await h.engine()
    counts: list[dict[str, object]] = []
    engine.events.sinks.append(lambda name, data: counts.append(data) if name == "exact_count" else None)
    install_autocompact(engine)
    await engine.submit_message("start " + " ".join(f"w{i}" for i in range(4_500)))  # ~5.7K tokens
    prompt = _dense(10_000)
    assert padded(estimate_text(prompt)) < 3_400  # the estimate alone would call the total ~9K
    await engine.submit_message(prompt)

    limit = engine.config.blocking_limit
    assert h.backend is not None
    sent = [_tokens(c) for c in h.backend.calls]
    assert max(sent) <= limit, sent  # main loop and summary fork alike
    assert any(isinstance(c, int) and c > limit for c in (d["tokens"] for d in counts))  # refused unsent
    assert any(isinstance(r, CompactBoundary) for r in reload(h).snapshot())  # recovered by compacting
    assert h.statuses() == [200] * len(h.backend.calls)  # no request the server had to refuse


async def test_a_prompt_too_dense_to_ever_fit_is_one_clear_error_and_never_sent(
    harness: Callable[..., Harness],
) -> None:
    h = harness([{"text": "first"}], **_small())
    engine = await h.engine()
    install_autocompact(engine)
    await engine.submit_message("hello")
    with pytest.raises(PromptTooLongError, match="run /compact"):
        await engine.submit_message(_dense(16_000))
    assert h.backend is not None
    assert len(h.backend.calls) == 1  # only the first turn reached the model
    assert h.statuses() == [200]


def test_pending_deletions_of_results_a_compaction_removed_free_nothing() -> None:
    """A cache_edits delete asked for before a compaction must not be subtracted from what follows it."""
    call = AssistantEntry(
        uuid="a1",
        timestamp="t",
        message=AssistantMessage(
            id="m1", content=[{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}]
        ),
    )
    result = UserEntry(
        uuid="u2",
        parent_uuid="a1",
        timestamp="t",
        message=UserMessage(
            content=[{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x" * 3_000}]
        ),
    )
    records: list[AnyRecord] = [
        UserEntry(uuid="u1", timestamp="t", message=UserMessage(content="go")),
        call,
        result,
    ]
    edits = [{"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "ref_toolu_1"}]}]
    assert deleting(records, edits) == padded(750)
    summary = UserEntry(uuid="s", timestamp="t", is_compact_summary=True, message=UserMessage(content="S"))
    compacted = [*records, CompactBoundary(uuid="cb", timestamp="t", logical_parent_uuid="u2"), summary]
    assert deleting(compacted, edits) == 0


def test_results_deleted_by_pins_a_later_fold_moved_are_cleared_not_sent_in_full() -> None:
    """A fold committed after Microcompact ran moves its pins: their results must not come back."""

    def turn(n: int) -> list[AnyRecord]:
        call = AssistantEntry(
            uuid=f"a{n}",
            timestamp="t",
            message=AssistantMessage(
                id=f"m{n}",
                content=[{"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {}}],
            ),
        )
        block = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "line\n" * 800}
        return [
            UserEntry(uuid=f"p{n}", timestamp="t", message=UserMessage(content=f"read {n}")),
            call,
            UserEntry(uuid=f"r{n}", timestamp="t", message=UserMessage(content=[block])),
            AssistantEntry(
                uuid=f"e{n}",
                timestamp="t",
                message=AssistantMessage(id=f"z{n}", content=[{"type": "text", "text": "ok"}]),
            ),
        ]

    records = [r for n in range(1, 9) for r in turn(n)]
    delete = {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "ref_toolu_5"}]}
    pin = CachePin(uuid="pin", timestamp="t", message_index=20, block_index=0, block=delete)
    ctx = CompactionContext((*records, pin), Config(), Capabilities(name="t", supports_cache_edits=True), 0)
    stage = MicrocompactStage()
    assert stage.repin(ctx).records == ()  # the pin still holds: the server deletes that result
    fold = CollapseCommit(
        uuid="c", timestamp="t", collapse_id="c", first_uuid="p1", last_uuid="e1", summary="S"
    )
    moved = dataclasses.replace(ctx, records=(*records, pin, fold))
    [cleared] = stage.repin(moved).records
    assert isinstance(cleared, ResultsCleared)
    assert cleared.tool_use_ids == ("toolu_5",)
    assert stage.repin(dataclasses.replace(moved, records=(*moved.records, cleared))).records == ()
