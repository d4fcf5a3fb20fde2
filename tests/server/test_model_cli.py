"""`foldline serve --backend transformers --model DIR`: the options reach a real model backend."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner

from foldline.cli import cli

pytest.importorskip("torch")
pytest.importorskip("transformers")


def _capture(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def fake_run(server: uvicorn.Server, sockets: list[socket.socket]) -> None:
        seen.update(app=server.config.app)

    monkeypatch.setattr(uvicorn.Server, "run", fake_run)
    return seen


def test_transformers_backend_serves_the_model_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from foldline.server.model.backend import TransformersBackend
    from foldline.server.model.tiny import write_tiny_model

    model = write_tiny_model(tmp_path / "model")
    seen = _capture(monkeypatch)
    result = CliRunner().invoke(
        cli, ["serve", "--port", "0", "--backend", "transformers", "--model", str(model)]
    )
    assert result.exit_code == 0, result.output
    assert "(transformers)" in result.output
    state = seen["app"].state.foldline
    assert isinstance(state.backend, TransformersBackend)
    assert state.config.model_prefixes == ("",)  # any model name the client sends is the local model


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--backend", "transformers"], "needs --model"),
        (["--model", "/nonexistent"], "needs --backend transformers"),
        (["--backend", "transformers", "--model", "/nonexistent"], "not a model directory"),
    ],
)
def test_wrong_model_options_are_usage_errors(
    monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    seen = _capture(monkeypatch)
    result = CliRunner().invoke(cli, ["serve", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert seen == {}
