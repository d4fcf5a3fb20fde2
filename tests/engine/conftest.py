"""Fixtures for engine tests: a real transcript and real tools, and a model that is either in-process or HTTP.

`scripted(script, **config)` answers from a strict `foldline.testing.ScriptedProvider` (no server,
every item must be used); `harness(replies, faults=..., **config)` starts the real local server
(uvicorn on loopback) and talks to it through the official SDK. Use `harness` only where HTTP or the
server is the subject: status codes counted at the server, headers, its prompt cache, end to end.
`model` is each of the two in turn, for a test whose body must hold both in-process and over HTTP.
"""

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
from foldline.providers.base import Provider
from foldline.server.app import ServerState, create_app
from foldline.server.backend import BackendRequest, Reply, ScriptedBackend
from foldline.server.config import ServerConfig
from foldline.server.faults import parse_faults
from foldline.server.testing import run_server
from foldline.testing import Call, ScriptedProvider, ScriptItem
from foldline.timeline import Timeline
from foldline.tools import default_tools
from foldline.transcript import TranscriptWriter, load_transcript, open_session

MODEL = "claude-sonnet-4-5"


@dataclass
class Harness:
    """A scripted model plus everything an engine needs; `engine()` builds one (resumed if a file exists).

    The model is the real server (`url`, `state`, `backend`) or an in-process `fake`.
    """

    workspace: Path
    transcript: Path
    config: Config
    url: str = ""
    state: ServerState | None = None
    backend: ScriptedBackend | None = None
    fake: ScriptedProvider | None = None
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
        provider: Provider = self.fake or AnthropicProvider(base_url=self.url, api_key="k")
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

    def requests(self) -> list[BackendRequest] | list[Call]:
        """The requests the model answered (over HTTP: those that reached the backend)."""
        if self.fake is not None:
            return [c for c in self.fake.calls if c.message is not None]
        assert self.backend is not None
        return list(self.backend.calls)

    def statuses(self) -> list[int | None]:
        """Each request's HTTP status, as the server logged it (in-process: as it would have)."""
        if self.fake is not None:
            return [c.status for c in self.fake.calls]
        assert self.state is not None
        return [r.status for r in self.state.records]

    async def close(self) -> None:
        for engine in self.engines:
            await engine.aclose()
        for writer in self.writers:
            if not writer.closed:
                writer.close()


def _config(**config: Any) -> Config:
    retry = RetryConfig(base_backoff_s=0.01, max_backoff_s=0.05, **config.pop("retry", {}))
    return Config(retry=retry, **{"model": MODEL, **config})


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return workspace


@pytest.fixture
async def scripted(tmp_path: Path) -> AsyncIterator[Callable[..., Harness]]:
    """`scripted(script, server_context_window=None, **config)`: the engine on a strict in-process model.

    `server_context_window` is the model's window (the fake answers 400 past it, as the server does);
    `config` builds the engine's `Config`.

    After the test, every script item must have been used (`ScriptedProvider.assert_complete`).
    """
    started: list[Harness] = []

    def start(
        script: Sequence[ScriptItem] = (), *, server_context_window: int | None = None, **config: Any
    ) -> Harness:
        fake = ScriptedProvider(script, context_window=server_context_window)
        h = Harness(_workspace(tmp_path), tmp_path / "s1.jsonl", _config(**config), fake=fake)
        started.append(h)
        return h

    yield start
    for h in started:
        await h.close()
    for h in started:
        assert h.fake is not None
        h.fake.assert_complete()


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Callable[..., Harness]]:
    started: list[Harness] = []
    with ExitStack() as stack:

        def start(
            replies: Sequence[Reply | dict[str, Any]] = (),
            *,
            faults: str = "",
            server_context_window: int | None = None,
            server_clock: Callable[[], float] = time.monotonic,
            **config: Any,
        ) -> Harness:
            backend = ScriptedBackend(replies=replies, select="sequence", strict=True)  # never echo
            plan = parse_faults(faults) if faults else None
            server: ServerConfig | None = None
            if server_context_window is not None:
                server = ServerConfig(context_window=server_context_window)
            app = create_app(server, backend=backend, faults=plan, clock=server_clock)
            url = stack.enter_context(run_server(app))
            h = Harness(
                _workspace(tmp_path),
                tmp_path / "s1.jsonl",
                _config(**config),
                url=url,
                state=app.state.foldline,
                backend=backend,
            )
            started.append(h)
            return h

        yield start
        for h in started:
            await h.close()


@pytest.fixture(params=["scripted", "harness"])
def model(request: pytest.FixtureRequest) -> Callable[..., Harness]:
    """`scripted`, then `harness`: the same test body in-process and over real HTTP.

    Both take `(replies, server_context_window=None, **config)`.
    """
    start: Callable[..., Harness] = request.getfixturevalue(request.param)
    return start


def assert_valid_next_request(h: Harness, engine: QueryEngine) -> None:
    """What the engine would send next passes the strict validator."""
    assert engine.build_request is not None
    plan = engine.build_request(engine.timeline.snapshot(), max_tokens=1024)
    validate_request(plan.body, ValidationLimits())


def reload(h: Harness) -> Timeline:
    return load_transcript(h.transcript).timeline()
