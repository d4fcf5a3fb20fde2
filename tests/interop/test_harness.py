"""The interop harness judges only the start of what it runs: a client or server that cannot start
here skips (or fails), but what the test body raises is never turned into a skip."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.interop import _harness

from foldline.errors import ClientUnavailableError


@contextmanager
def _started(*_: Any, **__: Any) -> Iterator[str]:
    yield "server"


@contextmanager
def _unavailable(*_: Any, **__: Any) -> Iterator[str]:
    raise ClientUnavailableError("this llama.cpp build does not run on this machine")
    yield "never"


@pytest.fixture
def gguf(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    model = tmp_path / "model.gguf"
    monkeypatch.setattr(_harness, "fetch_gguf", lambda log: model)
    return model


def _raise_inside(folder: Path, ran: list[str]) -> None:
    try:
        with _harness.llama_server(folder, ctx_size=2048) as server:
            ran.append(server)
            raise ClientUnavailableError("raised by the test")
    except pytest.skip.Exception as e:
        pytest.fail(f"a failure inside the test became a skip: {e}")


def test_an_error_the_test_body_raises_inside_the_llama_server_is_not_a_skip(
    gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_harness, "serve", _started)
    ran: list[str] = []
    with pytest.raises(ClientUnavailableError, match="raised by the test"):
        _raise_inside(tmp_path, ran)
    assert ran == ["server"]  # the body ran


def test_a_llama_server_that_cannot_start_here_still_skips(
    gguf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_harness, "serve", _unavailable)
    with pytest.raises(pytest.skip.Exception, match="does not run on this machine"):
        with _harness.llama_server(tmp_path, ctx_size=2048):
            pytest.fail("the body of a server that did not start ran")
