"""Fixtures for engine tests: the real local server (uvicorn, loopback), a real transcript, real tools."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from foldline.api.validate import ValidationLimits, validate_request
from foldline.config import Config, RetryConfig
from foldline.engine import QueryEngine
from foldline.events import UIEvent
from foldline.providers.anthropic import AnthropicProvider
from foldline.server.app import ServerState, create_app
from foldline.server.backend import BackendRequest, Reply, ScriptedBackend
from foldline.server.config import ServerConfig
from foldline.server.faults import parse_faults
from foldline.server.testing import run_server
from foldline.timeline import Timeline
from foldline.tools import default_tools
from foldline.transcript import TranscriptWriter, load_transcript, open_session

MODEL = "claude-sonnet-4-5"


@dataclass
class Harness:
    """A scripted server plus everything an engine needs; `engine()` builds one (resumed if a file exists)."""

    url: str
    state: ServerState
    backend: ScriptedBackend
    workspace: Path
    transcript: Path
    stack: ExitStack
    config: Config
    events: list[UIEvent] = field(default_factory=list)
    writers: list[TranscriptWriter] = field(default_factory=list)
    engines: list[QueryEngine] = field(default_factory=list)

    async def engine(self, **kwargs: Any) -> QueryEngine:
        """A fresh engine on the session file: created if absent, else resumed (dangling calls answered).

        The previous engine is shut down first, as a process exit would: its background tail drained,
        its transcript writer closed.
        """
        for old in self.engines:
            await old.aclose()
        for writer in self.writers:
            writer.close()
        self.engines.clear()
        self.writers.clear()
        writer, timeline = open_session(self.transcript, session_id="s1", fsync="never")
        self.writers.append(writer)
        provider = AnthropicProvider(base_url=self.url, api_key="k")
        engine = QueryEngine(
            provider=provider,
            config=kwargs.pop("config", self.config),
            tools=kwargs.pop("tools", default_tools()),
            workspace=self.workspace,
            timeline=timeline,
            transcript=writer,
            permission_mode=kwargs.pop("permission_mode", "bypassPermissions"),
            **kwargs,
        )
        engine.events.subscribers.append(self.events.append)
        self.engines.append(engine)
        engine.answer_dangling_tool_calls()
        return engine

    def requests(self) -> list[BackendRequest]:
        return list(self.backend.calls)

    def statuses(self) -> list[int]:
        return [r.status for r in self.state.records]


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Callable[..., Harness]]:
    started: list[Harness] = []
    with ExitStack() as stack:

        def start(
            replies: Sequence[Reply | dict[str, Any]] = (),
            *,
            faults: str = "",
            server: ServerConfig | None = None,
            server_clock: Callable[[], float] = time.monotonic,
            **config: Any,
        ) -> Harness:
            backend = ScriptedBackend(replies=replies, select="sequence")
            plan = parse_faults(faults) if faults else None
            app = create_app(server, backend=backend, faults=plan, clock=server_clock)
            url = stack.enter_context(run_server(app))
            workspace = tmp_path / "ws"
            workspace.mkdir(exist_ok=True)
            retry = RetryConfig(base_backoff_s=0.01, max_backoff_s=0.05, **config.pop("retry", {}))
            cfg = Config(model=MODEL, retry=retry, **config)
            h = Harness(url, app.state.foldline, backend, workspace, tmp_path / "s1.jsonl", stack, cfg)
            stack.callback(lambda: [w.close() for w in h.writers if not w.closed])
            started.append(h)
            return h

        yield start
        for h in started:
            for engine in h.engines:
                await engine.aclose()


def assert_valid_next_request(h: Harness, engine: QueryEngine) -> None:
    """What the engine would send next passes the strict validator."""
    assert engine.build_request is not None
    plan = engine.build_request(engine.timeline.snapshot(), max_tokens=1024)
    validate_request(plan.body, ValidationLimits())


def reload(h: Harness) -> Timeline:
    return load_transcript(h.transcript).timeline()
