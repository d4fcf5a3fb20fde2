"""Forked requests stream under the idle watchdog with their own retry budget (R5.6, R5.7).

A summary fork that goes silent used to hold the user's turn forever in-process (and up to 600 s x 5
attempts against the real API). Now the watchdog cuts it, the fork's own few attempts are spent, the
compaction fails with a receipt, and the user's turn goes on.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from foldline.compact.autocompact import install_autocompact
from foldline.config import AutoCompactConfig, Config, RetryConfig, SessionMemoryConfig
from foldline.engine import QueryEngine
from foldline.testing import FunctionProvider, stall
from foldline.timeline import SystemEntry, Timeline

pytestmark = pytest.mark.anyio

SUMMARY_ASK = "Your task is to write a detailed summary"


def _config() -> Config:
    """A 20K window: AutoCompact's threshold at 6,000 tokens, the blocking limit at 15,000."""
    return Config(
        model="claude-sonnet-4-5",
        context_window=20_000,
        output_reserve=2_000,
        max_output_tokens=500,
        snip_enabled=False,
        retry=RetryConfig(
            base_backoff_s=0.01,
            max_backoff_s=0.02,
            stream_idle_timeout_s=30.0,
            fork_stream_idle_timeout_s=0.2,
            fork_max_attempts=2,
        ),
        autocompact=AutoCompactConfig(
            buffer_tokens=12_000,
            warning_below_threshold=2_000,
            summary_max_tokens=1_000,
            memory=SessionMemoryConfig(enabled=False),
        ),
    )


async def test_a_stalled_summary_fork_is_cut_by_the_watchdog_and_the_turn_goes_on(tmp_path: Path) -> None:
    forks: list[float] = []

    def model(body: dict[str, Any], betas: tuple[str, ...]) -> Any:
        if SUMMARY_ASK in str(body["messages"][-1]["content"]):
            forks.append(time.monotonic())
            return stall({"text": "never finished"}, after_events=2)  # silent forever after 2 events
        return {"text": "ok"}

    workspace = tmp_path / "ws"
    workspace.mkdir()
    engine = QueryEngine(
        provider=FunctionProvider(model),
        config=_config(),
        workspace=workspace,
        timeline=Timeline(session_id="s1"),
        instructions=False,
    )
    stage = install_autocompact(engine)
    with anyio.fail_after(20):  # before the fix: the first fork never returns
        for turn in range(12):
            result = await engine.submit_message(f"step {turn}: " + " ".join(f"w{i}" for i in range(700)))
            assert result.text == "ok"
            if forks:
                break
    assert len(forks) == 2  # the fork's own two attempts, each cut by the watchdog
    assert result.attempts == 1  # the user's turn spent none of its retries on the fork
    [failed] = [r for r in engine.timeline if isinstance(r, SystemEntry) and r.subtype == "compaction"]
    assert "idle for 0.2 s" in failed.content
    assert stage.failures == 1
    await engine.aclose()
