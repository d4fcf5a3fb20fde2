"""Fixtures for the tool tests: a real workspace directory, a context rooted in it, and `fill` for
tables whose paths are `{placeholders}`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def fill(value: Any, layout: Mapping[str, str]) -> Any:
    """`value` (a string, or a tuple or mapping of them) with each `{key}` replaced by `layout[key]`."""
    if isinstance(value, str):
        for key, path in layout.items():
            value = value.replace("{" + key + "}", path)
        return value
    if isinstance(value, Mapping):
        return {k: fill(v, layout) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(fill(v, layout) for v in value)
    return value
