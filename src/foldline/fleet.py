"""The fleet: many whole sessions, each a plain value (`Unit`), run on Ray into one results folder.

What it owns:

- `Unit`: one session to run (kind, profile, strategy or client setting, seed, turns, window,
  simulator knobs), frozen and hashable, with a stable `key` made from its fields alone.
- `run_unit`: the one runner. It makes the unit its own folder (workspace, sessions, the server's
  request log), calls the function its `kind` names, and returns the row and the transcripts. The
  kind `simulate` is foldline's own simulated session through its own `foldline serve`; any other
  kind is `module:function`, imported on the worker (the benchmarks register theirs this way:
  `economics:fleet_row`, with `benchmarks/` on the workers' path).
- `run_fleet`: every unit as a Ray task declaring its CPUs and memory (`FleetConfig`), on a local
  Ray started for the call or an existing cluster (`address`). Rows and transcripts go to a results
  folder named by an fsspec URL (`Results`); a unit whose row is already there is not run again, a
  unit that raises is submitted again up to `FleetConfig.retries` times and then its last error is
  kept as a row of its own (`failed/`), and Ray reruns a unit whose node died (`node_retries`).
- `live_progress`: the live display (done / running / failed, ETA) on stderr.

Ray and fsspec are the `fleet` extra: they are imported inside the functions that need them, so
`import foldline` and `make demo` never load them. The unit functions must be deterministic for a
given unit: a row from the fleet equals the row of the same unit run alone, but for `VOLATILE`.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import importlib
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from foldline._json import dumps, loads
from foldline.config import CollapseConfig, Config, FleetConfig, TranscriptConfig

__all__ = [
    "RUN_KEYS",
    "SIMULATE",
    "VOLATILE",
    "FleetReport",
    "FleetStatus",
    "Results",
    "RunRecord",
    "Unit",
    "UnitResult",
    "comparable",
    "live_progress",
    "run_fleet",
    "run_unit",
]

SIMULATE = "simulate"
"""The built-in kind: foldline's simulated session over HTTP (`_simulate`)."""
SIMULATE_STRATEGIES = ("foldline", "no-collapse", "no-compaction")
"""The engine settings the `simulate` kind takes as its strategy (as `foldline simulate`'s flags)."""
VOLATILE = ("wall_s", "node", "host", "attempts", "unit_wall_s", "commit")
"""Row keys that differ between two runs of one deterministic unit: timings, where and at which
commit it ran."""
RUN_KEYS = ("unit_key", "unit", "unit_wall_s", "node", "host", "attempts", "commit")
"""The keys the runner adds to a unit function's row: what ran, how long, where, at which attempt,
from which commit."""

Knob = str | int | float | bool


class Unit(msgspec.Struct, frozen=True, kw_only=True):
    """One whole session to run: a plain value, the same on the driver and on any worker."""

    kind: str = SIMULATE
    """`simulate`, or `module:function` for a unit function a benchmark registers."""
    profile: str = "feature"
    strategy: str = "foldline"
    """The strategy (economics), client setting (peers) or engine setting (`simulate`)."""
    seed: int = 0
    turns: int = 20
    window: int = 200_000
    knobs: tuple[tuple[str, Knob], ...] = ()
    """Everything else the kind takes (the simulator's reply length, a timeout), as sorted pairs."""

    @property
    def key(self) -> str:
        """A file name made from every field: readable in front, a digest of all of them behind."""
        digest = hashlib.sha256(dumps(msgspec.to_builtins(self), sort_keys=True)).hexdigest()[:12]
        name = f"{self.profile}-{self.strategy}-s{self.seed}-t{self.turns}"
        return f"{re.sub(r'[^A-Za-z0-9._=-]+', '_', name)}-{digest}"

    def knob(self, name: str, default: Knob) -> Knob:
        """The knob `name`, or `default` where the unit does not set it."""
        return dict(self.knobs).get(name, default)

    def fields(self) -> dict[str, Any]:
        """The unit as plain JSON values (stored in its row, so a results folder says what ran)."""
        return {**msgspec.to_builtins(self), "knobs": dict(self.knobs)}


def knobs(**values: Knob) -> tuple[tuple[str, Knob], ...]:
    """`Unit.knobs` from keyword arguments, in a stable order (the key depends on it)."""
    return tuple(sorted(values.items()))


@dataclass
class UnitResult:
    """What one unit left: its row and its transcripts (relative path -> bytes)."""

    row: dict[str, Any]
    transcripts: dict[str, bytes] = field(default_factory=dict)


UnitFunction = Callable[[Unit, Path], dict[str, Any]]
"""A kind's function: runs `unit` in the empty folder `root` and returns its row."""


def resolve(kind: str) -> UnitFunction:
    """The function a unit's `kind` names.

    Raises:
        ValueError: neither `simulate` nor `module:function`.
    """
    if kind == SIMULATE:
        return _simulate
    module, sep, name = kind.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"unit kind {kind!r}: expected {SIMULATE!r} or 'module:function'")
    function: UnitFunction = getattr(importlib.import_module(module), name)
    return function


def run_unit(unit: Unit, *, paths: Sequence[str] = ()) -> UnitResult:
    """Run `unit` end to end in a folder of its own and return its row and transcripts.

    `paths` are put on `sys.path` first (where a `module:function` kind lives on this worker).
    The folder is `<tmp>/tmpXXXXXXXX/w000`, one length for every unit: tool results quote the
    workspace's absolute path, and a longer path would cost the session tokens.
    """
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    function = resolve(unit.kind)
    base = Path(tempfile.mkdtemp())
    root = base / "w000"
    root.mkdir()
    started = time.perf_counter()
    try:
        row = function(unit, root)
        transcripts = {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*.jsonl"))
            if p.is_file() and "ws" not in p.relative_to(root).parts[:1]
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    row = {**row, "unit_key": unit.key, "unit": unit.fields(), "unit_wall_s": time.perf_counter() - started}
    return UnitResult(row, transcripts)


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    """`row` without what differs between two runs of one deterministic unit (`VOLATILE`)."""
    return {k: v for k, v in row.items() if k not in VOLATILE}


# --- the built-in kind -----------------------------------------------------------------------------


def _simulate(unit: Unit, root: Path) -> dict[str, Any]:
    """foldline's simulated session: its own `foldline serve --backend simulated` (prompt cache on
    a frozen clock, as the benchmarks run it) and `simulate` over the SDK."""
    from foldline import interop
    from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
    from foldline.simulation import simulate

    if unit.strategy not in SIMULATE_STRATEGIES:
        raise ValueError(f"simulate unit: strategy {unit.strategy!r} is not one of {SIMULATE_STRATEGIES}")
    scale = str(unit.knob("verbosity_scale", 1.0))
    args = ("--seed", str(unit.seed), "--profile", unit.profile, "--context-window", str(unit.window))
    with interop.serve(root, *args, "--verbosity-scale", scale, "--cache-clock", "frozen") as server:
        provider = AnthropicProvider(
            base_url=server.url, api_key="fleet", capabilities=FOLDLINE_SERVE_CAPABILITIES
        )
        config = Config(
            context_window=unit.window,
            collapse=CollapseConfig(enabled=unit.strategy == "foldline"),
            transcript=TranscriptConfig(sessions_dir=root / "sessions", fsync="never"),
        )
        report = asyncio.run(
            simulate(
                provider,
                profile=unit.profile,
                turns=unit.turns,
                seed=unit.seed,
                workspace=root / "ws",
                sessions_dir=root / "sessions",
                config=config,
                levels=unit.strategy != "no-compaction",
                output_facts=True,
            )
        )
    usage = report.usage
    return {
        "profile": unit.profile,
        "strategy": unit.strategy,
        "seed": unit.seed,
        "cost_usd": round(usage.cost(), 4),
        "cache_read_share": round(usage.read_share, 4),
        "peak_context_tokens": report.peak_request,
        "api_calls": report.api_calls,
        "main_requests": report.main_requests,
        "facts_asked": report.facts_asked,
        "facts_retained": report.facts_retained,
        "turns_completed": report.turns_done,
        "turns_planned": report.turns_planned,
        "receipts": report.receipts,
        "errors": report.errors[:3],
        "request_tokens": report.request_tokens,
        "wall_s": round(report.wall_s, 1),
    }


# --- the results folder ----------------------------------------------------------------------------


class Results:
    """The results folder at an fsspec URL (a local path by default; `s3://…` on a cluster).

    Layout: `rows/<key>.json` (one per finished unit), `failed/<key>.json` (the last error of a unit
    that failed every attempt; run again by the next fleet), `transcripts/<key>/…` (the unit's JSONL
    files), `fleet.json` (the last fleet's commit, size and wall time, and every run that made its
    rows), `fleets/<run>.json` (each run's record, rewritten as it runs: what a killed run did).
    A row is written whole or not at all: on a local disk through a temporary name and a rename, on
    an object store by one put.
    """

    def __init__(self, url: str, *, stamp: dict[str, Any] | None = None) -> None:
        """`stamp`: keys added to every row this store writes (the fleet's commit)."""
        import fsspec

        self.stamp = stamp or {}
        # A plain path is made absolute here: a worker's working directory is not the driver's.
        self.url = url if "://" in url else os.path.abspath(url)
        self.fs, self.root = fsspec.core.url_to_fs(self.url)
        self.fs.makedirs(self.root, exist_ok=True)
        self._local = "file" in _protocols(self.fs)

    def _path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def write(self, relative: str, data: bytes) -> None:
        """`data` at `relative`, whole or not at all."""
        path = self._path(relative)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        if not self._local:
            self.fs.pipe_file(path, data)  # one object put: readers see all of it or nothing
            return
        temporary = f"{path}.{uuid.uuid4().hex}.tmp"
        self.fs.pipe_file(temporary, data)
        os.replace(temporary, path)

    def read(self, relative: str) -> dict[str, Any] | None:
        path = self._path(relative)
        if not self.fs.exists(path):
            return None
        found: dict[str, Any] = loads(self.fs.cat_file(path))
        return found

    def row(self, key: str) -> dict[str, Any] | None:
        return self.read(f"rows/{key}.json")

    def names(self, folder: str) -> list[str]:
        """The JSON files' names in `folder`."""
        path = self._path(folder)
        if not self.fs.exists(path):
            return []
        names = (str(p).rsplit("/", 1)[-1] for p in self.fs.ls(path, detail=False))
        return [n for n in names if n.endswith(".json")]

    def keys(self, folder: str = "rows") -> set[str]:
        """Keys with a file in `folder` (`rows` or `failed`)."""
        return {n.removesuffix(".json") for n in self.names(folder)}

    def put_row(self, key: str, row: dict[str, Any]) -> None:
        self.write(f"rows/{key}.json", dumps({**row, **self.stamp}, sort_keys=True))
        path = self._path(f"failed/{key}.json")
        if self.fs.exists(path):
            self.fs.rm(path)

    def put_failed(self, key: str, row: dict[str, Any]) -> None:
        self.write(f"failed/{key}.json", dumps(row, sort_keys=True))

    def put_transcripts(self, key: str, transcripts: dict[str, bytes]) -> None:
        for name, data in transcripts.items():
            self.write(f"transcripts/{key}/{name}", data)


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


# --- the fleet -------------------------------------------------------------------------------------


def pace_class(unit: Unit) -> str:
    """The units expected to take about as long as `unit`: its kind and its strategy or client setting
    (profiles and seeds of one strategy differ far less than strategies do)."""
    return f"{unit.kind}/{unit.strategy}"


@dataclass
class FleetStatus:
    """Where a fleet stands, as the live display shows it."""

    total: int
    skipped: int = 0
    """Units whose row was already in the results folder."""
    done: int = 0
    running: int = 0
    failed: int = 0
    retried: int = 0
    workers: float = 0.0
    """CPUs the cluster has now (a dead node's are gone)."""
    slots: int = 1
    """Units the cluster runs at once now."""
    started: float = field(default_factory=time.perf_counter)
    left: dict[str, int] = field(default_factory=dict)
    """Units not yet finished, by `pace_class`."""
    walls: dict[str, list[float]] = field(default_factory=dict)
    """The walls of the units finished so far, by `pace_class`."""
    ran: list[str] = field(default_factory=list)
    """The keys of the units this run gave a row."""
    nodes: int = 0
    """The most nodes alive so far."""

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started

    def plan(self, units: Iterable[Unit]) -> None:
        """Count the units still to run, by the class whose pace they are expected to share."""
        for unit in units:
            self.left[pace_class(unit)] = self.left.get(pace_class(unit), 0) + 1

    def finished(self, unit: Unit, wall_s: float | None, *, failed: bool = False) -> None:
        """Count a unit that finished, with a row or (`failed`) its last failure, and learn its pace
        from `wall_s` where known."""
        if failed:
            self.failed += 1
        else:
            self.done += 1
            self.ran.append(unit.key)
        name = pace_class(unit)
        self.left[name] = max(0, self.left.get(name, 0) - 1)
        if wall_s is not None:
            self.walls.setdefault(name, []).append(wall_s)

    @property
    def eta_s(self) -> float | None:
        """Seconds left: each class's units still to run at that class's mean unit wall so far (a
        class none of whose units has finished, at its kind's mean, else at the mean of all), spread
        over the slots. A fleet
        mixes kinds whose units differ tenfold (a simulated session against a real client's): one
        mean over the units finished first would promise the slow ones the fast ones' pace.
        None before the first unit finishes."""
        every = [w for walls in self.walls.values() for w in walls]
        if not every:
            return None

        def pace(name: str) -> float:
            kind = name.split("/", 1)[0] + "/"
            same_kind = [w for other, walls in self.walls.items() if other.startswith(kind) for w in walls]
            walls = self.walls.get(name) or same_kind or every
            return sum(walls) / len(walls)

        return sum(count * pace(name) for name, count in self.left.items()) / max(1, self.slots)

    def line(self) -> str:
        eta = "?" if self.eta_s is None else f"{self.eta_s:,.0f} s"
        return (
            f"fleet: {self.done + self.skipped}/{self.total} done ({self.skipped} from before), "
            f"{self.running} running, {self.failed} failed, {self.retried} retried, "
            f"{self.workers:g} CPUs, {self.elapsed_s:,.0f} s, ETA {eta}"
        )


@dataclass
class FleetReport:
    """A finished fleet: every unit's row in the order given, the failures, and what ran them."""

    rows: list[dict[str, Any]]
    failed: list[dict[str, Any]]
    wall_s: float
    workers: float
    """The most CPUs the cluster had during the run."""
    nodes: int
    """The most nodes alive during the run."""
    commit: str | None = None
    """The commit of the checkout the driver ran from (where it is one)."""
    manifest: dict[str, Any] = field(default_factory=dict)
    """What `fleet.json` says of this fleet: its commit, size, failures, wall time, and every run that
    made its rows (`RunRecord.runs`)."""


def run_fleet(
    units: Iterable[Unit],
    results_url: str,
    *,
    address: str | None = None,
    workers: int | None = None,
    in_process: bool = False,
    paths: Sequence[str] = (),
    runtime_env: dict[str, Any] | None = None,
    progress: Callable[[FleetStatus], None] | None = None,
    config: FleetConfig | None = None,
) -> FleetReport:
    """Run every unit that has no row in `results_url` yet; return every unit's row.

    Args:
        units: What to run (duplicates run once).
        results_url: The results folder (`Results`): a path or an fsspec URL every worker can write.
        address: An existing Ray cluster (`ray://…` or `host:port`); None starts a local Ray for the
            call, with `workers` CPUs (default: every core).
        workers: The local Ray's CPUs; ignored with `address`.
        in_process: Run the units one after another in this process, without Ray (a single local
            worker: what `--jobs 1` means to the benchmarks). Same folder, skips and retries.
        paths: Put on each worker's `sys.path` before a unit runs (where `module:function` kinds live).
        runtime_env: Ray's runtime environment for the job (`working_dir`, `py_modules`, `pip`,
            `env_vars`), for a cluster whose workers do not have the code; see docs/fleet.md.
        progress: Called with the status whenever it changes, and every `progress_interval_s`.
        config: The fleet's numbers (`FleetConfig()` by default).
    """
    config = config or FleetConfig()
    commit = _commit()  # before the units run: what they ran, whatever changes while they do
    store = Results(results_url, stamp={"commit": commit})
    wanted = list(dict.fromkeys(units))
    have = store.keys()
    todo = [u for u in wanted if u.key not in have]
    status = FleetStatus(total=len(wanted), skipped=len(wanted) - len(todo))
    record = RunRecord(store, commit, len(wanted), config.record_interval_s)

    def noted(status: FleetStatus) -> None:
        record.note(status)
        if progress:
            progress(status)

    report = (_inline if in_process else _on_ray)(
        todo, store, status, address, workers, paths, runtime_env, noted, config
    )
    record.note(status, finished=True)
    rows = [row for u in wanted if (row := store.row(u.key)) is not None]
    failed = [row for u in wanted if (row := store.read(f"failed/{u.key}.json")) is not None]
    report.rows, report.failed, report.commit = rows, failed, commit
    report.manifest = _manifest(report, len(wanted), runs=record.runs({u.key for u in wanted}))
    store.write("fleet.json", dumps(report.manifest, sort_keys=True, indent=True))
    return report


class RunRecord:
    """One run's record in the results folder (`fleets/<started>-<id>.json`): its commit, the units
    it gave rows, its wall time so far and whether it finished. Rewritten whenever a unit finishes
    and every `record_interval_s` between, so a run that is killed (Ctrl-C, a reboot, the end of a
    machine's loan) still says how long it ran and what it made; a fleet resumed over several runs
    adds their walls up (`runs`)."""

    def __init__(self, store: Results, commit: str | None, units: int, interval_s: float) -> None:
        self.store, self.commit, self.units, self.interval_s = store, commit, units, interval_s
        self.name = f"fleets/{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}.json"
        self.started = datetime.datetime.now(datetime.UTC).isoformat()
        self._written: tuple[float, int] | None = None

    def note(self, status: FleetStatus, *, finished: bool = False) -> None:
        ended = status.done + status.failed
        now = time.perf_counter()
        if self._written and not finished:
            at, count = self._written
            if count == ended and now - at < self.interval_s:
                return
        self._written = (now, ended)
        record = {
            "started": self.started,
            "commit": self.commit,
            "units": self.units,
            "ran": status.ran,
            "failed": status.failed,
            "wall_s": round(status.elapsed_s, 1),
            "workers": status.workers,
            "nodes": status.nodes,
            "finished": finished,
        }
        self.store.write(self.name, dumps(record, sort_keys=True, indent=True))

    def runs(self, keys: set[str]) -> list[dict[str, Any]]:
        """This run and every run recorded in the folder that gave a row to a unit among `keys`,
        oldest first: its record's name, start, commit, wall, how many of those rows it made and
        whether it finished. (Records written before runs named their rows are not counted.)"""
        found = []
        for name in (f"fleets/{n}" for n in self.store.names("fleets")):
            record = self.store.read(name)
            if record is None or "started" not in record:
                continue
            made = len(keys.intersection(record["ran"]))
            if made or name == self.name:
                found.append(
                    {
                        "record": name,
                        "started": record["started"],
                        "commit": record["commit"],
                        "wall_s": record["wall_s"],
                        "rows": made,
                        "finished": record["finished"],
                    }
                )
        return sorted(found, key=lambda run: str(run["started"]))


def _manifest(report: FleetReport, units: int, runs: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """What `fleet.json` says of a finished fleet of `units` units: its commit and its rows', size,
    failures, wall time, workers and nodes (a page names the fleet that made its rows from it), and
    `runs`: every run that made its rows (`RunRecord.runs`), with their walls added up."""
    return {
        "runs": list(runs),
        "wall_s_all_runs": round(sum(float(r["wall_s"]) for r in runs), 1),
        "commit": report.commit,
        # a resumed fleet's rows may come from earlier commits: each row names its own
        "row_commits": sorted({str(r.get("commit")) for r in report.rows}),
        "units": units,
        "rows": len(report.rows),
        "failed": len(report.failed),
        "wall_s": round(report.wall_s, 1),
        "workers": report.workers,
        "nodes": report.nodes,
    }


def _commit() -> str | None:
    """The checkout's commit, where the package runs from a git checkout; `-dirty` after it when
    tracked files were changed since (the rows are then not that commit's alone)."""
    import subprocess

    def git(*args: str) -> str:
        where = Path(__file__).parent
        done = subprocess.run(
            ["git", *args], cwd=where, capture_output=True, text=True, timeout=10, check=False
        )
        return done.stdout.strip()

    try:
        head = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except OSError:
        return None
    return f"{head}-dirty" if head and dirty else head or None


def _failure(unit: Unit, attempts: int, error: str) -> dict[str, Any]:
    return {"unit_key": unit.key, "unit": unit.fields(), "attempts": attempts, "error": error[-4000:]}


def _inline(
    todo: list[Unit],
    store: Results,
    status: FleetStatus,
    address: str | None,
    workers: int | None,
    paths: Sequence[str],
    runtime_env: dict[str, Any] | None,
    progress: Callable[[FleetStatus], None] | None,
    config: FleetConfig,
) -> FleetReport:
    status.workers, status.slots, status.nodes = 1, 1, 1
    status.plan(todo)
    for unit in todo:
        for attempt in range(1, config.retries + 2):
            status.running = 1
            if progress:
                progress(status)
            try:
                result = run_unit(unit, paths=paths)
            except Exception:
                error = traceback.format_exc()
                if attempt <= config.retries:
                    status.retried += 1
                    continue
                store.put_failed(unit.key, _failure(unit, attempt, error))
                status.finished(unit, None, failed=True)
                break
            store.put_transcripts(unit.key, result.transcripts)
            row = {**result.row, "node": "in-process", "host": socket.gethostname(), "attempts": attempt}
            store.put_row(unit.key, row)
            status.finished(unit, row.get("unit_wall_s"))
            break
    status.running = 0
    if progress:
        progress(status)
    return FleetReport([], [], status.elapsed_s, 1, status.nodes)


def _fleet_task(unit: Unit, results_url: str, paths: Sequence[str]) -> dict[str, Any]:
    """One unit on a Ray worker: run it, write its transcripts, return its row with the node's id."""
    import ray

    result = run_unit(unit, paths=paths)
    Results(results_url).put_transcripts(unit.key, result.transcripts)
    return {**result.row, "node": ray.get_runtime_context().get_node_id(), "host": socket.gethostname()}


def _on_ray(
    todo: list[Unit],
    store: Results,
    status: FleetStatus,
    address: str | None,
    workers: int | None,
    paths: Sequence[str],
    runtime_env: dict[str, Any] | None,
    progress: Callable[[FleetStatus], None] | None,
    config: FleetConfig,
) -> FleetReport:
    import ray

    with _ray(address, workers, runtime_env):
        task = ray.remote(
            num_cpus=config.unit_cpus,
            memory=config.unit_memory_mb * 2**20,
            max_retries=config.node_retries,
            retry_exceptions=False,
        )(_fleet_task)
        queue = list(reversed(todo))
        status.plan(todo)
        attempts: dict[str, int] = {}
        flight: dict[Any, Unit] = {}
        while queue or flight:
            status.workers, alive = _cluster(ray)
            status.nodes = max(status.nodes, alive)
            # Only as many in flight as the cluster can run: `running` is then true, and a unit
            # not yet submitted goes to whichever node frees up first, a new node included.
            room = status.slots = max(1, int(status.workers // config.unit_cpus))
            while queue and len(flight) < room:
                unit = queue.pop()
                attempts[unit.key] = attempts.get(unit.key, 0) + 1
                flight[task.remote(unit, store.url, list(paths))] = unit
            status.running = len(flight)
            if progress:
                progress(status)
            ready, _ = ray.wait(list(flight), num_returns=1, timeout=config.progress_interval_s)
            for ref in ready:
                unit = flight.pop(ref)
                try:
                    row = ray.get(ref)
                except ray.exceptions.RayError as e:
                    if attempts[unit.key] <= config.retries:
                        status.retried += 1
                        queue.append(unit)
                    else:
                        store.put_failed(unit.key, _failure(unit, attempts[unit.key], str(e)))
                        status.finished(unit, None, failed=True)
                    continue
                store.put_row(unit.key, {**row, "attempts": attempts[unit.key]})
                status.finished(unit, row.get("unit_wall_s"))
        status.running = 0
        if progress:
            progress(status)
        return FleetReport([], [], status.elapsed_s, status.workers, status.nodes)


def _cluster(ray: Any) -> tuple[float, int]:
    """The cluster's CPUs and live nodes now (a dead node's are gone; Ray's state calls are untyped)."""
    cpus = float(ray.cluster_resources().get("CPU", 0.0))
    return cpus, len([n for n in ray.nodes() if n.get("Alive")])


@contextlib.contextmanager
def _ray(address: str | None, workers: int | None, runtime_env: dict[str, Any] | None) -> Iterator[None]:
    """Ray connected for the block: the cluster at `address`, or a local one this call starts (and
    stops). A Ray this process had already joined is used as it is and left running."""
    import ray

    if ray.is_initialized():
        yield
        return
    options: dict[str, Any] = {"runtime_env": runtime_env} if runtime_env else {}
    if address is None:
        options |= {"num_cpus": workers or os.cpu_count() or 1, "include_dashboard": False}
    ray.init(address=address, log_to_driver=False, configure_logging=False, **options)
    try:
        yield
    finally:
        ray.shutdown()


@contextlib.contextmanager
def live_progress() -> Iterator[Callable[[FleetStatus], None]]:
    """A `progress` callback for stderr: one live line on a terminal (rich), left in place at the
    end; elsewhere (a log, CI) a line each time a unit finishes, fails or is retried."""
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console(stderr=True)
    if not console.is_terminal:
        last: list[tuple[int, int, int]] = []

        def log(status: FleetStatus) -> None:
            now = (status.done, status.failed, status.retried)
            if not last or now != last[-1]:
                print(status.line(), file=sys.stderr, flush=True)
                last.append(now)

        yield log
        return
    # stdout stays the caller's (rows printed as JSON); stderr is printed above the live line
    live = Live(Text("fleet: starting"), console=console, refresh_per_second=4, redirect_stdout=False)
    with live:

        def show(status: FleetStatus) -> None:
            live.update(Text(status.line()))

        yield show
