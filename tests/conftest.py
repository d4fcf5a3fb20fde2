"""Shared test fixtures and paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FOLDLINE_SHARED", ROOT.parent / "shared"))
CLAUDE_CODE_DATA = SHARED / "data" / "claude-code"


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
