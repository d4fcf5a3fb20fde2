"""Collapse's background ctx-agent against `foldline serve --backend simulated`, over real HTTP.

The in-process version is tests/engine/test_collapse.py; here the slow reply is the server's own
`stall` fault on the fork's request number, so the main loop, the fork and the stall all go through
the real provider, the real server and the simulated model.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from foldline._json import dumps
from foldline.compact.collapse import Collapse
from foldline.compact.prompts import span_prompt
from foldline.config import (
    AutoCompactConfig,
    CollapseConfig,
    Config,
    RetryConfig,
    SessionMemoryConfig,
    TranscriptConfig,
)
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.providers.base import Capabilities, Provider
from foldline.server.app import ServerState, create_app
from foldline.server.config import ServerConfig
from foldline.server.faults import FaultPlan, parse_faults
from foldline.server.simulated import SimulatedBackend, generate_workspace, user_prompts
from foldline.server.testing import run_server
from foldline.session import Session
from foldline.stream import StreamEvent
from foldline.tools import default_tools

pytestmark = pytest.mark.anyio

SEED = 3
PROFILE = "feature"
TURNS = 10
STALL_S = 5.0
# The span instruction up to its first tag: what makes a request a ctx-agent fork.
FORK_MARK = span_prompt("FIRST", "LAST").split("[id:FIRST]")[0]


@dataclass
class _Recorder:
    """A provider that passes every request through and keeps each body, in the order sent."""

    inner: Provider
    bodies: list[dict[str, Any]] = field(default_factory=list)

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        self.bodies.append(body)
        return self.inner.stream(body, betas=betas)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    def forks(self) -> list[int]:
        """The 1-based numbers of the requests that were ctx-agent forks."""
        return [i + 1 for i, b in enumerate(self.bodies) if FORK_MARK in dumps(b["messages"][-1]).decode()]


def _config(sessions: Path) -> Config:
    return Config(
        context_window=100_000,
        # A small span target so the ctx-agent starts after a few turns; session memory off so the
        # only fork in the tail is Collapse's and request numbers are the same in both runs.
        collapse=CollapseConfig(folds="summary", span_target_tokens=3_000),
        autocompact=AutoCompactConfig(blocking_margin=500, memory=SessionMemoryConfig(enabled=False)),
        retry=RetryConfig(base_backoff_s=0.01, max_backoff_s=0.05),
        transcript=TranscriptConfig(sessions_dir=sessions, fsync="never"),
    )


def _collapse(session: Session) -> Collapse:
    [collapse] = [s for s in session.engine.stages if isinstance(s, Collapse)]
    return collapse


async def _until(check: Callable[[], bool]) -> None:
    """Poll `check` for up to 5 s (the server numbers a request without telling anyone)."""
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


def _open(tmp_path: Path, name: str, url: str) -> tuple[Session, _Recorder]:
    workspace = tmp_path / f"ws-{name}"
    generate_workspace(workspace, SEED)
    provider = _Recorder(
        AnthropicProvider(base_url=url, api_key="k", capabilities=FOLDLINE_SERVE_CAPABILITIES)
    )
    session = Session.open(
        tmp_path / f"{name}.jsonl",
        provider=provider,
        workspace=workspace,
        config=_config(tmp_path / "sessions"),
        tools=default_tools(),
        permission_mode="bypassPermissions",
        fsync="never",
    )
    return session, provider


def _app(faults: FaultPlan | None = None) -> Any:
    return create_app(
        ServerConfig(api_key="k"), backend=SimulatedBackend(seed=SEED, profile=PROFILE), faults=faults
    )


async def _dry_run(tmp_path: Path) -> tuple[int, int]:
    """(the turn after which the first fork is sent, 0-based; that fork's request number)."""
    app = _app()
    with run_server(app) as url:
        session, provider = _open(tmp_path, "dry", url)
        async with session:
            collapse = _collapse(session)
            for turn, text in enumerate(user_prompts(PROFILE, TURNS, SEED)):
                await session.submit_message(text)
                await session.engine.drain()
                await collapse.wait()
                if provider.forks():
                    state: ServerState = app.state.foldline
                    assert {r.status for r in state.records} == {200}
                    assert len(state.records) == len(provider.bodies)  # no retries: numbers are indexes
                    return turn, provider.forks()[0]
    raise AssertionError(f"no ctx-agent fork in {TURNS} turns")


@pytest.mark.slow
async def test_a_turn_completes_while_the_served_ctx_agent_request_stalls(tmp_path: Path) -> None:
    fork_turn, fork_number = await _dry_run(tmp_path)

    app = _app(parse_faults(f"{fork_number}:stall/{STALL_S}"))
    state: ServerState = app.state.foldline
    prompts = user_prompts(PROFILE, TURNS, SEED)
    assert fork_turn + 1 < len(prompts)
    with run_server(app) as url:
        session, provider = _open(tmp_path, "stalled", url)
        async with session:
            collapse = _collapse(session)
            for text in prompts[:fork_turn]:
                await session.submit_message(text)
                await session.engine.drain()
                await collapse.wait()
            await session.submit_message(prompts[fork_turn])
            # The tail has sent the fork and the server, having numbered it, is holding its first byte
            # (a stalled request is recorded only once answered, so its number is the sign).
            await _until(lambda: state._count >= fork_number)
            stalled_at = time.perf_counter()
            assert provider.forks() == [fork_number]  # the stalled request is the ctx-agent's fork
            assert collapse.in_flight

            started = time.perf_counter()
            result = await session.submit_message(prompts[fork_turn + 1])
            turn_s = time.perf_counter() - started
            assert result.text
            assert turn_s < STALL_S / 2, f"the turn took {turn_s:.2f} s behind a {STALL_S} s stall"
            assert collapse.in_flight
            assert collapse.store.staged == []
            main_during = [
                n for n in range(fork_number + 1, len(provider.bodies) + 1) if n not in provider.forks()
            ]
            assert main_during  # the turn's own requests went out while the fork waited

            async with asyncio.timeout(2 * STALL_S):
                await collapse.wait()
            staged_s = time.perf_counter() - stalled_at
            assert collapse.store.staged
            assert collapse.store.failures == []
            assert staged_s > STALL_S / 2  # the summary arrived only after the server let the fork go
            [record] = [r for r in state.records if r.number == fork_number]
            assert record.fault == "stall"
        assert {r.status for r in state.records} == {200}
        print(
            f"fork = request {fork_number} after turn {fork_turn + 1}; turn {fork_turn + 2} took "
            f"{turn_s:.2f} s ({len(main_during)} requests) during a {STALL_S} s stall; "
            f"staged {len(collapse.store.staged)} fold(s) {staged_s:.2f} s after the stall began"
        )
