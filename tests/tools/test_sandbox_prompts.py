"""benchmarks/sandbox_prompts.py: with the sandbox, an everyday session asks only about what leaves
the workspace or touches a protected path."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._benchmarks import load_benchmark

bench = load_benchmark("sandbox_prompts")
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
