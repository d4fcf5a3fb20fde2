"""Shared test fixtures and paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FOLDLINE_SHARED", ROOT.parent / "shared"))
CLAUDE_CODE_DATA = SHARED / "data" / "claude-code"


_REAL_HOME = Path.home()


@pytest.fixture(autouse=True)
def _private_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets an empty home of its own: what foldline keeps there (the settings a user
    confirmed, history, sessions) never reads or writes the real one. The download caches stay
    shared (models, npm packages), so nothing is fetched twice."""
    monkeypatch.setenv("XDG_CACHE_HOME", os.environ.get("XDG_CACHE_HOME") or str(_REAL_HOME / ".cache"))
    monkeypatch.setenv("npm_config_cache", os.environ.get("npm_config_cache") or str(_REAL_HOME / ".npm"))
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def anyio_backend() -> str:
    """Every `@pytest.mark.anyio` test runs on asyncio (the engine uses asyncio directly)."""
    return "asyncio"


def claude_code_files() -> list[Path]:
    """Every real Claude Code transcript under `CLAUDE_CODE_DATA` (empty if absent)."""
    if not CLAUDE_CODE_DATA.is_dir():
        return []
    return sorted(CLAUDE_CODE_DATA.rglob("*.jsonl"))


requires_claude_code_data = pytest.mark.skipif(
    not claude_code_files(), reason=f"real Claude Code transcripts not found under {CLAUDE_CODE_DATA}"
)
