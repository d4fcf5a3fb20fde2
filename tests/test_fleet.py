"""The fleet: units as plain values, the results folder's resume and retries, and a real two-node Ray
cluster on this machine that loses a node mid-way and still gives every unit's row as run alone."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from foldline.config import FleetConfig
from foldline.fleet import (
    FleetStatus,
    Results,
    Unit,
    comparable,
    knobs,
    pace_class,
    run_fleet,
    run_unit,
)

SRC = Path(__file__).resolve().parents[1] / "src"


def test_a_unit_s_key_is_made_of_its_fields_alone() -> None:
    unit = Unit(profile="debug", strategy="no-collapse", seed=3, turns=5, knobs=knobs(verbosity_scale=0.5))
    same = Unit(profile="debug", strategy="no-collapse", seed=3, turns=5, knobs=knobs(verbosity_scale=0.5))
    assert unit == same
    assert hash(unit) == hash(same)
    assert unit.key == same.key
    assert unit.key.startswith("debug-no-collapse-s3-t5-")
    others = [
        Unit(profile="debug", strategy="no-collapse", seed=4, turns=5, knobs=knobs(verbosity_scale=0.5)),
        Unit(profile="debug", strategy="no-collapse", seed=3, turns=5, knobs=knobs(verbosity_scale=1.0)),
        Unit(profile="debug", strategy="no-collapse", seed=3, turns=5, window=100_000),
        Unit(kind="economics:fleet_row", profile="debug", strategy="no-collapse", seed=3, turns=5),
    ]
    assert len({unit.key, *(o.key for o in others)}) == 5
    # a key is a file name on any store
    assert all(c.isalnum() or c in "._=-" for c in unit.key)


def test_a_unit_runs_alone_with_its_own_server_and_gives_its_transcripts() -> None:
    unit = Unit(profile="feature", seed=5, turns=2)
    first, second = run_unit(unit), run_unit(unit)
    assert first.row["turns_completed"] == 2
    assert first.row["api_calls"] > 0
    assert first.row["cost_usd"] > 0
    assert first.row["unit_key"] == unit.key
    # the session's transcript and the server's request log
    assert set(first.transcripts) == {"requests.jsonl", "sessions/simulated-feature-5.jsonl"}
    assert comparable(first.row) == comparable(second.row)


def failing(unit: Unit, root: Path) -> dict[str, Any]:
    """A unit kind that fails until its folder's counter says it ran `fail_times` times before."""
    counter = Path(str(unit.knob("counter", "")))
    count = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(count + 1))
    if count < int(unit.knob("fail_times", 0)):
        raise RuntimeError(f"attempt {count + 1} failed on purpose")
    return {"seed": unit.seed, "attempt": count + 1}


def test_a_failing_unit_is_retried_then_its_last_error_is_a_row_and_done_units_are_not_rerun(
    tmp_path: Path,
) -> None:
    here = str(Path(__file__).parent)
    kind = f"{Path(__file__).stem}:failing"
    flaky = Unit(kind=kind, seed=1, knobs=knobs(counter=str(tmp_path / "c1"), fail_times=1))
    broken = Unit(kind=kind, seed=2, knobs=knobs(counter=str(tmp_path / "c2"), fail_times=99))
    results = str(tmp_path / "results")
    config = FleetConfig(retries=2)
    seen = []
    report = run_fleet(
        [flaky, broken], results, in_process=True, paths=[here], config=config, progress=seen.append
    )
    assert [r["attempt"] for r in report.rows] == [2]
    assert report.rows[0]["attempts"] == 2
    [failure] = report.failed
    assert failure["unit_key"] == broken.key
    assert failure["attempts"] == 3  # the first try and `retries` more
    assert "attempt 3 failed on purpose" in failure["error"]
    assert (tmp_path / "c2").read_text() == "3"
    assert seen[-1].done == 1
    assert seen[-1].failed == 1
    assert sum(seen[-1].left.values()) == 0  # every unit's end reached the ETA's count
    assert len(seen[-1].walls[pace_class(flaky)]) == 1  # the row's unit wall, not the failure's
    # the folder says which fleet made it: its commit (this checkout's) on every row and in fleet.json
    manifest = json.loads((tmp_path / "results" / "fleet.json").read_text())
    assert (manifest["units"], manifest["rows"], manifest["failed"]) == (2, 1, 1)
    assert manifest["row_commits"] == [str(report.rows[0]["commit"])]
    assert report.commit == report.rows[0]["commit"]
    assert len(list((tmp_path / "results" / "fleets").iterdir())) == 1
    # Resumed: the row is kept and not run again; the failure gets a fresh budget.
    again = run_fleet([flaky, broken], results, in_process=True, paths=[here], config=config)
    assert (tmp_path / "c1").read_text() == "2"
    assert (tmp_path / "c2").read_text() == "6"
    assert again.rows == report.rows
    assert Results(results).keys("failed") == {broken.key}


def test_a_fleet_stopped_mid_way_leaves_its_record_and_a_resumed_one_adds_the_runs_walls_up(
    tmp_path: Path,
) -> None:
    """A fleet too long for one sitting runs as several: the page must give the wall of them all, so
    a killed run's record must already say how long it ran and which rows it made."""
    here = str(Path(__file__).parent)
    kind = f"{Path(__file__).stem}:failing"
    units = [Unit(kind=kind, seed=s, knobs=knobs(counter=str(tmp_path / f"c{s}"))) for s in range(3)]
    results = tmp_path / "results"

    def stop_after_one(status: FleetStatus) -> None:
        if status.done == 1:
            raise KeyboardInterrupt  # what Ctrl-C or a kill does to the driver between two units

    with pytest.raises(KeyboardInterrupt):
        run_fleet(units, str(results), in_process=True, paths=[here], progress=stop_after_one)
    [first] = [json.loads(p.read_text()) for p in (results / "fleets").iterdir()]
    assert (first["ran"], first["finished"]) == ([units[0].key], False)
    assert not (results / "fleet.json").exists()  # only a fleet that ends writes it
    report = run_fleet(units, str(results), in_process=True, paths=[here])
    assert [(tmp_path / f"c{s}").read_text() for s in range(3)] == ["1", "1", "1"]  # none ran twice
    runs = report.manifest["runs"]
    assert [(r["rows"], r["finished"]) for r in runs] == [(1, False), (2, True)]
    both = first["wall_s"] + report.manifest["wall_s"]
    assert report.manifest["wall_s_all_runs"] == pytest.approx(both, abs=0.11)
    assert json.loads((results / "fleet.json").read_text()) == report.manifest
    # a fleet over other units counts only the runs that made its rows, and itself
    other = run_fleet(units[2:], str(results), in_process=True, paths=[here])
    assert [r["rows"] for r in other.manifest["runs"]] == [1, 0]


def test_the_eta_runs_each_kind_of_unit_at_its_own_pace() -> None:
    """A fleet submits fast simulated sessions first and real clients' slow ones last: the ETA must
    not promise the slow ones the fast ones' pace (the last `make bench` said 1,045 s with 52 real
    client sessions of about 170 s each still to run on 2 workers)."""
    fast = [Unit(kind="economics:fleet_row", strategy="limit", seed=s) for s in range(4)]
    slow = [Unit(kind="peers:fleet_row", strategy="opencode", seed=s) for s in range(3)]
    other = Unit(kind="peers:fleet_row", strategy="claude-code", seed=1)
    status = FleetStatus(total=8, slots=2)
    status.plan([*fast, *slow, other])
    assert status.eta_s is None  # no pace yet
    for unit in fast[:3]:
        status.finished(unit, 10.0)
    status.finished(slow[0], 170.0)
    # left: one `limit` at 10 s, two `opencode` at 170 s, and one Claude Code, of which none has
    # finished, at the pace of its kind (the real clients') rather than of all (50 s)
    assert status.eta_s == pytest.approx((10 + 2 * 170 + 170) / 2)
    status.finished(fast[3], None, failed=True)  # no longer left, and no pace learnt from it
    assert status.eta_s == pytest.approx((2 * 170 + 170) / 2)
    status.slots = 4
    assert status.eta_s == pytest.approx((2 * 170 + 170) / 4)
    # a kind none of whose units has finished runs at the mean of all
    status.plan([Unit(kind="simulate", strategy="foldline", seed=1)])
    assert status.eta_s == pytest.approx((2 * 170 + 170 + 50) / 4)
    assert (status.done, status.failed) == (4, 1)


# --- a real two-node cluster -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Node:
    """One `ray start --block` and every process it started (its own process group)."""

    process: subprocess.Popen[bytes]
    temp_dir: Path
    log: Path

    def kill(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            return

    def stop(self) -> None:
        self.kill(signal.SIGTERM)
        try:
            self.process.wait(timeout=5)  # a head's graceful stop can take 20 s; the group is killed next
        except subprocess.TimeoutExpired:
            pass
        self.kill(signal.SIGKILL)  # the daemons of the group that outlived `ray start`
        self.process.wait(timeout=20)


def start_node(ray: Path, env: dict[str, str], *args: str) -> Node:
    # Short folders: Ray's socket paths live under the temp dir, and a socket path has 107 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))
    log = temp_dir.with_suffix(".log")
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(ray), "start", "--block", "--num-cpus=1", f"--temp-dir={temp_dir}", *args],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # a process group of its own: killed alone, never `ray stop`
        )
    return Node(process, temp_dir, log)


def _wait_for_port(port: int, node: Node, limit_s: float = 240.0) -> None:
    """Until the head's GCS accepts a connection (bounded); a head that died says so with its log."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if node.process.poll() is not None:
            pytest.fail(f"`ray start --head` exited: {node.log.read_text(errors='replace')[-2000:]}")
        with socket.socket() as probe:
            probe.settimeout(1.0)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    pytest.fail(f"the head's GCS did not listen on {port} within {limit_s:.0f} s")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, Node, dict[str, str]]]:
    """A head and a second node on this machine, each with one CPU and its own temp folder."""
    pytest.importorskip("ray", reason="the fleet extra (ray) is not installed")
    ray = Path(sys.executable).with_name("ray")
    if not ray.exists():
        pytest.skip(f"no `ray` command beside {sys.executable}")
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(Path(__file__).parent)]),
        # this cluster's own token, so nothing is read from or written to ~/.ray
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    head = start_node(
        ray,
        env,
        "--head",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--include-dashboard=false",
        f"--ray-client-server-port={free_port()}",
        "--dashboard-agent-listen-port=0",
    )
    nodes = [head]
    try:
        _wait_for_port(port, head)  # on a loaded machine the head's GCS can take a minute to listen
        second = start_node(
            ray,
            env,
            f"--address=127.0.0.1:{port}",
            "--node-ip-address=127.0.0.1",
            "--dashboard-agent-listen-port=0",
        )
        nodes.append(second)
        yield f"127.0.0.1:{port}", second, env
    finally:
        for node in reversed(nodes):
            node.stop()
            shutil.rmtree(node.temp_dir, ignore_errors=True)
            node.log.unlink(missing_ok=True)


DRIVER = """
import os, sys, signal
from foldline.fleet import Results, Unit, run_fleet
address, results, second_pgid = sys.argv[1], sys.argv[2], int(sys.argv[3])
units = [Unit(profile=p, seed=s, turns=2) for p in ("feature", "debug") for s in range(6)]
killed = []

def progress(status):
    # Kill the second node once it has finished a unit and a third of the fleet is done.
    if killed or status.done < 4:
        return
    store = Results(results)
    nodes = {store.row(k)["node"] for k in store.keys()}
    if len(nodes) >= 2:
        os.killpg(second_pgid, signal.SIGKILL)
        killed.append(status.done)
        print("killed the second node after", status.done, "units", flush=True)

report = run_fleet(units, results, address=address, progress=progress)
print("rows", len(report.rows), "failed", len(report.failed), "nodes", report.nodes, flush=True)
# The same fleet again on what is left of the cluster: every unit has its row, none runs.
seen = []
again = run_fleet(units, results, address=address, progress=seen.append)
print("resumed", seen[-1].skipped, "skipped", seen[-1].done, "run", len(again.rows), "rows", flush=True)
"""


@pytest.mark.slow  # two Ray nodes and 12 short sessions over HTTP: about a minute on 2 cores
def test_a_two_node_fleet_that_loses_a_node_gives_every_row_as_run_alone(
    cluster: tuple[str, Node, dict[str, str]], tmp_path: Path
) -> None:
    address, second, env = cluster
    results = tmp_path / "results"
    deadline = time.monotonic() + 60
    # the driver in its own process: Ray's import-time warnings are no test's business
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, address, str(results), str(second.process.pid)],
        capture_output=True,
        text=True,
        env=env,
        timeout=max(1.0, deadline - time.monotonic()) + 120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "killed the second node" in done.stdout, done.stdout + done.stderr[-3000:]
    assert "resumed 12 skipped 0 run 12 rows" in done.stdout, done.stdout
    assert second.process.poll() is not None  # it really died
    store = Results(str(results))
    units = [Unit(profile=p, seed=s, turns=2) for p in ("feature", "debug") for s in range(6)]
    rows = {u.key: store.row(u.key) for u in units}
    assert all(row is not None for row in rows.values()), [k for k, r in rows.items() if r is None]
    assert store.keys("failed") == set()
    assert len({row["node"] for row in rows.values() if row}) == 2  # rows name the node each ran on
    for unit in units:
        alone = run_unit(unit).row
        row = rows[unit.key]
        assert row is not None
        assert comparable(row) == comparable(alone), unit.key
        assert (results / "transcripts" / unit.key / "requests.jsonl").exists()


def test_importing_the_fleet_loads_neither_ray_nor_fsspec() -> None:
    """Ray is the `fleet` extra: `import foldline` and the demo must not need it."""
    code = "import sys, foldline, foldline.fleet; print(sorted({'ray', 'fsspec'} & set(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "[]"


def test_foldline_simulate_runs_seeds_as_units_and_resumes_from_the_results_folder(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from foldline.cli import cli

    results = tmp_path / "results"
    command = ["simulate", "--turns", "2", "--seeds", "3,4", "--results", str(results)]
    first = CliRunner().invoke(cli, command)
    assert first.exit_code == 0, first.output
    assert "feature seed 3: 2/2 turns" in first.output
    assert "feature seed 4: 2/2 turns" in first.output
    rows = {p.name: p.read_bytes() for p in (results / "rows").iterdir()}
    assert len(rows) == 2
    again = CliRunner().invoke(cli, command)
    assert again.exit_code == 0, again.output
    assert "2 from before" in again.output
    # not run again: the rows are the same bytes, their wall times included
    assert {p.name: p.read_bytes() for p in (results / "rows").iterdir()} == rows
