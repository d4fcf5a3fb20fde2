"""The demo session: it runs, survives its mid-session resume, and keeps the prompt cache warm."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from foldline.cli import cli
from foldline.demo import run_demo


@pytest.mark.anyio
async def test_demo_resumes_mid_session_and_keeps_reading_the_cache(tmp_path: Path) -> None:
    out = io.StringIO()
    result = await run_demo(4, console=Console(file=out, width=120), workdir=tmp_path)
    assert [t.requests for t in result.turns] == [5, 5, 5, 5]
    assert result.resumed_at == 2
    resumed = result.turns[result.resumed_at]
    # The resumed process rebuilt a byte-identical prefix: the server's cache still hits.
    assert resumed.cache_read / resumed.prompt > 0.9
    assert "Done: `calc.div`" in out.getvalue()
    assert "def div(a, b):" in (tmp_path / "workspace" / "calc.py").read_text()


def test_demo_command_prints_the_summary() -> None:
    result = CliRunner().invoke(cli, ["demo", "--turns", "2"])
    assert result.exit_code == 0, result.output
    assert "prompt caching saves" in result.output
