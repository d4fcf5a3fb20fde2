"""What the copy-on-write layer costs (docs/design.md §9.6), side by side in one run.

1. A sandboxed command that changes nothing (`true`), with and without the layer: median and
   spread of `--runs` calls each, interleaved so machine load hits both alike. Target: the layer
   costs at most 1.5x the plain sandboxed call.
2. Applying a 10,000-file change (an `npm install`-sized tree): read the layer's diff, review it
   under the policy and apply it, once into a new folder (one rename) and once spread over 100
   existing folders (10,000 renames). Target: under a second.
3. Undoing a 1 GB deletion: the file is `rm`-ed on a layer, applied, then undone; the inode comes
   back and the filesystem's free space never drops by the file's size (no copy). Target: no copy.

Run: `PYTHONPATH=src .venv/bin/python benchmarks/undo_layer.py [--runs 30]`
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio

from foldline.containment import git_state
from foldline.containment.checkpoints import CheckpointStore
from foldline.containment.layer import read_diff
from foldline.containment.paths import own_install
from foldline.containment.policy import review
from foldline.containment.sandbox import SandboxPolicy, detect_sandbox
from foldline.tools.base import ToolContext
from foldline.tools.bash import BashTool

_FILES = 10_000
_GIB = 1024**3


def _no_change(ws: Path, runs: int) -> None:
    sandbox = detect_sandbox(SandboxPolicy(), workspace=ws)
    if not sandbox.layered:
        raise SystemExit(f"no layer here: {sandbox.problem or sandbox.layer_problem}")
    plain = ToolContext(workspace=ws, sandbox=sandbox)
    layered = ToolContext(workspace=ws, sandbox=sandbox, checkpoints=CheckpointStore(ws, "bench"))
    times: dict[str, list[float]] = {"sandbox": [], "sandbox + layer": []}
    for _ in range(runs):
        for name, ctx in (("sandbox", plain), ("sandbox + layer", layered)):
            start = time.perf_counter()
            anyio.run(BashTool().run, {"command": "true"}, ctx.for_turn())
            times[name].append((time.perf_counter() - start) * 1000)
    for name, values in times.items():
        q = statistics.quantiles(values, n=10)
        print(f"  {name:16} median {statistics.median(values):6.1f} ms  (p10 {q[0]:.1f}, p90 {q[-1]:.1f})")
    ratio = statistics.median(times["sandbox + layer"]) / statistics.median(times["sandbox"])
    print(f"  ratio {ratio:.2f}x (target <= 1.5x)")


def _apply_many(ws: Path, spread: bool) -> None:
    store = CheckpointStore(ws, "bench")
    if spread:
        for d in range(100):
            (ws / "tree" / f"d{d}").mkdir(parents=True, exist_ok=True)
    layer = store.new_layer()
    for i in range(_FILES):
        folder = layer.upper / ("tree" if spread else "node_modules") / f"d{i % 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.js").write_text("module.exports = 1\n")
    start = time.perf_counter()
    diff = read_diff(layer, ws, max_entries=1_000_000, timeout_s=60, max_compare=1 << 26)
    gitdirs = git_state.git_dirs(ws, git_state.snapshot(ws))
    held = review(diff, ws, layer.upper, gitdirs=gitdirs, executed=[], own=own_install(ws))
    applied = store.apply(layer, diff, tool="bench", what="10k files", turn=1)
    took = time.perf_counter() - start
    where = "into 100 existing folders" if spread else "into a new folder"
    said = f"{applied.summary}, {len(held)} held"
    print(f"  {_FILES:,} files {where}: {took * 1000:.0f} ms ({said}; target < 1 s)")


def _undo_big(ws: Path) -> None:
    big = ws / "big.bin"
    with open(big, "wb") as handle:
        os.posix_fallocate(handle.fileno(), 0, _GIB)
    inode = big.stat().st_ino
    free = shutil.disk_usage(ws).free
    sandbox = detect_sandbox(SandboxPolicy(), workspace=ws)
    ctx = ToolContext(workspace=ws, sandbox=sandbox, checkpoints=CheckpointStore(ws, "big"))
    start = time.perf_counter()
    anyio.run(BashTool().run, {"command": "rm big.bin"}, ctx)
    deleted = time.perf_counter() - start
    low = shutil.disk_usage(ws).free
    start = time.perf_counter()
    assert ctx.checkpoints is not None
    ctx.checkpoints.undo()
    undone = time.perf_counter() - start
    lowest = min(low, shutil.disk_usage(ws).free)
    same = big.stat().st_ino == inode
    print(
        f"  rm of a 1 GiB file on the layer: {deleted * 1000:.0f} ms; undo: {undone * 1000:.1f} ms; "
        f"same inode back: {same}; free space dipped by {(free - lowest) / 1024**2:,.1f} MiB "
        "(no copy: < 1,024)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as folder:
        root = Path(folder)
        print("1. a command that changes nothing")
        (root / "a").mkdir()
        _no_change(root / "a", args.runs)
        print("2. applying a 10,000-file change")
        for spread in (False, True):
            ws = root / f"b{int(spread)}"
            ws.mkdir()
            _apply_many(ws, spread)
        print("3. undoing a 1 GiB deletion")
        (root / "c").mkdir()
        _undo_big(root / "c")


if __name__ == "__main__":
    main()
