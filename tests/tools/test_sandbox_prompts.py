"""benchmarks/sandbox_prompts.py: with the sandbox, an everyday session asks only about what leaves
the workspace or touches a protected path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sandbox_prompts", BENCHMARKS / "sandbox_prompts.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sandbox_prompts"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


bench = _load()
OUTSIDE = {"cat ~/.bashrc", "echo x > /etc/motd", "cp src/app.py ~/backup.py", "echo x >> .git/config",
           "rm -rf ../other-project"}  # fmt: skip


@pytest.mark.parametrize("mode", ["default", "acceptEdits"])
def test_the_sandbox_saves_every_prompt_but_those_about_leaving_the_workspace(
    tmp_path: Path, mode: str
) -> None:
    count = bench.count(bench._workspace(tmp_path), mode)
    assert count.commands >= 100
    assert set(count.still_asking) == OUTSIDE
    # the checker alone asks about nearly everything that builds, tests or edits
    assert count.asks_without >= 80
    assert count.asks_with == len(OUTSIDE) < count.asks_without
