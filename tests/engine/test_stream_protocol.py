"""A reply stream that breaks the protocol (a block before its message, as a third-party server
under load once sent) is a broken transfer: retried like a dropped connection, not a failed turn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from foldline.engine import QueryEngine
from foldline.events import RetryEvent, UIEvent
from foldline.stream import BlockStart, StreamEvent
from foldline.testing import ScriptedProvider


class _BrokenFirst(ScriptedProvider):
    """Streams a block outside any message on its first call, then answers as scripted."""

    broken = 0

    async def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        if self.broken < self.limit:
            self.broken += 1
            yield BlockStart(index=0, block={"type": "text", "text": ""})
            return
        async for event in super().stream(body, betas=betas):
            yield event

    limit = 1


@pytest.mark.anyio
async def test_a_stream_out_of_order_is_retried_and_the_turn_answers(tmp_path: Path) -> None:
    provider = _BrokenFirst([{"text": "hello"}])
    events: list[UIEvent] = []
    engine = QueryEngine(provider=provider, workspace=tmp_path)
    engine.events.subscribers.append(events.append)
    result = await engine.submit_message("hi")
    assert result.text == "hello"
    retries = [e for e in events if isinstance(e, RetryEvent)]
    assert len(retries) == 1
    assert "out of order" in retries[0].reason or "outside a message" in retries[0].reason
    provider.assert_complete()
