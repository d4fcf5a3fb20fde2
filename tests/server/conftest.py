"""Fixtures for the local server's tests: a real uvicorn server per test, the SDK pointed at it."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import anthropic
import pytest
from starlette.applications import Starlette

from foldline.server.app import ServerState, create_app
from foldline.server.testing import run_server

MODEL = "claude-sonnet-4-5"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def economics() -> ModuleType:
    """`benchmarks/economics.py` (the benchmark's own summary instructions), loaded once, as
    `tests/test_economics.py` loads it."""
    if "economics" in sys.modules:
        return sys.modules["economics"]
    spec = importlib.util.spec_from_file_location("economics", BENCHMARKS / "economics.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["economics"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Served:
    """A running server and a sync SDK client for it."""

    app: Starlette
    url: str
    client: anthropic.Anthropic

    @property
    def state(self) -> ServerState:
        state: ServerState = self.app.state.foldline
        return state


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """`serve(**create_app_kwargs, max_retries=0)` starts a server; everything stops after the test."""
    with ExitStack() as stack:

        def start(*, max_retries: int = 0, api_key: str = "test-key", **kwargs: Any) -> Served:
            app = create_app(**kwargs)
            url = stack.enter_context(run_server(app))
            client = anthropic.Anthropic(base_url=url, api_key=api_key, max_retries=max_retries)
            stack.callback(client.close)
            return Served(app, url, client)

        yield start


def words(n: int, tag: str = "w") -> str:
    """Text of exactly `n` tokens under the server's tokenizer (` w0 w1 ...`, one token each)."""
    return "".join(f" {tag}{i}" for i in range(n))
