"""The Makefile installs what each target runs: `make demo` stays light, `make test` gets everything.

Checked with `make -n` (prints the recipes, runs nothing) against a venv path that does not exist,
so the whole bootstrap chain is shown.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def _dry_run(target: str, venv: Path) -> str:
    return subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_demo_installs_neither_torch_nor_the_model_extra(tmp_path: Path) -> None:
    steps = _dry_run("demo", tmp_path / "venv")
    assert "pip install" in steps  # the bootstrap was shown, so its absence below means something
    assert "torch" not in steps
    assert "model" not in steps
    assert "dev" not in steps.replace("/dev/", "")
    assert "fleet]" not in steps  # Ray is the fleet's extra, never the demo's
    assert "'.[server]'" in steps  # the demo starts the local server


def test_test_installs_the_model_dev_and_fleet_extras(tmp_path: Path) -> None:
    steps = _dry_run("test", tmp_path / "venv")
    assert "torch==" in steps
    assert "'.[dev,model,fleet]'" in steps  # CI runs the two-node Ray test
    assert steps.index("torch==") < steps.index("'.[dev,model,fleet]'")  # pinned torch first


def test_model_stamp_is_separate_from_the_demo_stamp(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed").touch()  # a demo venv already built (newer than pyproject.toml)
    steps = _dry_run(f"{venv}/.installed-model", venv)
    assert "torch==" in steps
    assert "-m venv" not in steps  # builds on the demo venv, does not rebuild it


def test_real_model_serves_a_gguf_without_the_model_extra(tmp_path: Path) -> None:
    steps = _dry_run("real-model", tmp_path / "venv")
    assert "foldline model serve" in steps
    assert "torch" not in steps
    assert "model]" not in steps  # the `model` extra (torch, transformers) is not installed
    transformers = _dry_run("real-model-transformers", tmp_path / "venv")
    assert "torch==" in transformers
    assert "foldline model fetch" in transformers


def test_test_quick_runs_the_pipeline_tests_without_the_slow_ones(tmp_path: Path) -> None:
    steps = _dry_run("test-quick", tmp_path / "venv")
    run = next(line for line in steps.splitlines() if "bin/pytest" in line)
    assert '-m "not slow"' in run
    folders = [word for word in run.split() if word.startswith("tests/")]
    assert folders == ["tests/api", "tests/compact", "tests/engine"]
    assert all((ROOT / folder).is_dir() for folder in folders)
    assert "ruff" not in steps.replace("ruff>=", "")  # no lint: that is `make test`
