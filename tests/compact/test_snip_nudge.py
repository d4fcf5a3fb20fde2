"""The Snip nudge (R3.1): once past the share, again after a snip or compaction, or after quiet turns."""

from __future__ import annotations

import pytest

from foldline.compact.pipeline import CompactionContext
from foldline.compact.snipping import NUDGE_ATTACHMENT, SnipStage
from foldline.config import Config
from foldline.providers.base import Capabilities
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AssistantMessage,
    AttachmentEntry,
    UserEntry,
    UserMessage,
)

pytestmark = pytest.mark.anyio

CONFIG = Config(snip_renudge_turns=3)
FULL = int(CONFIG.effective_window * 0.9)  # past the 0.5 nudge share


def _turns(first: int, count: int) -> list[AnyRecord]:
    out: list[AnyRecord] = []
    for n in range(first, first + count):
        out.append(UserEntry(uuid=f"u{n}", timestamp="t", message=UserMessage(content=f"prompt {n}")))
        reply = AssistantMessage(id=f"m{n}", content=[{"type": "text", "text": "ok"}])
        out.append(AssistantEntry(uuid=f"a{n}", timestamp="t", message=reply))
    return out


def _nudge() -> AttachmentEntry:
    return AttachmentEntry(uuid="n", timestamp="t", attachment_type=NUDGE_ATTACHMENT, content="snip")


async def _nudges(records: list[AnyRecord]) -> int:
    ctx = CompactionContext(tuple(records), CONFIG, Capabilities(name="t"), FULL)
    result = await SnipStage().run(ctx)
    return sum(1 for r in result.records if isinstance(r, AttachmentEntry))


async def test_a_nudge_stands_for_a_few_prompts_then_comes_again() -> None:
    assert await _nudges(_turns(0, 2)) == 1  # never nudged: nudge now
    assert await _nudges([*_turns(0, 2), _nudge(), *_turns(2, 2)]) == 0  # two prompts since: it stands
    assert await _nudges([*_turns(0, 2), _nudge(), *_turns(2, 3)]) == 1  # three without a snip: again


async def test_by_default_a_nudge_stands_until_a_snip_or_a_compaction() -> None:
    ctx = CompactionContext((*_turns(0, 2), _nudge(), *_turns(2, 30)), Config(), Capabilities(name="t"), FULL)
    assert (await SnipStage().run(ctx)).records == ()
