"""Fixtures for the tool tests: a real workspace directory and a context rooted in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from foldline.tools import ToolContext


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    root.mkdir()
    return root


@pytest.fixture
def ctx(workspace: Path) -> ToolContext:
    return ToolContext(workspace=workspace)
