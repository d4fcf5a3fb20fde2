"""The environment block a session states cannot change the simulated model's work (issue bench-5,
item 3), and the benchmark sessions send the block foldline ships, the same bytes on every run.

A directory stated in the block once made the model read different files: it read its own calls'
paths back relative to the stated directory but not the paths a search listed, so a file it had
read looked unread (debug seed 103 grew three turns by 20-43K tokens). Which file a path names is
now told from the paths alone; the block is read only to give an absolute path to a tool that
wants one.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import shutil
import tempfile
from datetime import date
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foldline.server.simulated import PROFILES, generate_workspace
from foldline.server.simulated.profiles import package_name
from foldline.server.tokenizer import count_block
from foldline.simulation import SimulatedClock, SimulationReport, simulate, simulated_environment
from foldline.testing import SimulatedProvider
from foldline.timeline import AssistantEntry, UserEntry
from foldline.transcript import load_transcript

SEED, TURNS = 103, 4
ROOT = Path(tempfile.mkdtemp(prefix="foldline-env-"))
"""One workspace path per profile for every run: the tools' results (Grep lists absolute paths) are
then the same bytes whatever the block states, and only the block's own tokens may differ."""
atexit.register(shutil.rmtree, ROOT, True)


def _play(
    profile: str, environment: bool | str | None, *, seed: int = SEED, turns: int = TURNS
) -> tuple[list[list[str]], list[int], SimulationReport]:
    """One session (`environment` None: `simulate`'s default): each turn's tool calls (name and
    input, paths made workspace-relative) and each turn's tool-result tokens, as the transcript
    records them."""
    stated = {} if environment is None else {"environment": environment}
    root = ROOT / profile
    shutil.rmtree(root, ignore_errors=True)  # the model edits and writes: every run starts clean
    workspace = root / "ws"
    report = asyncio.run(
        simulate(
            SimulatedProvider(seed=seed, profile=profile),
            profile=profile,
            turns=turns,
            seed=seed,
            workspace=workspace,
            sessions_dir=root / "sessions",
            clock=SimulatedClock(),
            **stated,
        )
    )
    records = load_transcript(root / "sessions" / f"simulated-{profile}-{seed}.jsonl").records
    calls: list[list[str]] = []
    results: list[int] = []
    for record in records:
        if isinstance(record, UserEntry) and isinstance(record.message.content, str):
            calls.append([])  # a typed prompt starts a turn
            results.append(0)
        elif isinstance(record, AssistantEntry):
            for block in record.message.content:
                if block.get("type") == "tool_use":
                    shown = json.dumps([block.get("name"), block.get("input")], sort_keys=True)
                    calls[-1].append(shown.replace(f"{workspace.resolve()}/", ""))
        elif isinstance(record, UserEntry):
            results[-1] += sum(
                count_block(b) for b in record.message.content if b.get("type") == "tool_result"
            )
    return calls, results, report


@functools.cache
def _plain(profile: str) -> tuple[list[list[str]], list[int]]:
    calls, results, _ = _play(profile, False)
    return calls, results


def _directories(profile: str) -> st.SearchStrategy[str]:
    workspace = str((ROOT / profile / "ws").resolve())
    pkg = package_name(SEED)
    segment = st.from_regex(r"[a-z][a-z0-9_.-]{0,12}", fullmatch=True)
    modules = st.sampled_from(["money", "pricing", "orders", "settings", "inventory", "worker"])
    return st.one_of(
        st.just(workspace),
        st.builds(lambda m: f"{workspace}/src/{pkg}/{m}", modules),  # inside it, naming a module
        st.builds(lambda m: f"/home/dev/{m}", modules),
        st.builds(lambda m: f"/srv/{pkg}/{m}.py", modules),
        st.lists(segment, min_size=1, max_size=14).map(lambda parts: "/" + "/".join(parts)),  # deep
    )


@st.composite
def _blocks(draw: st.DrawFn, profile: str) -> str:
    """An environment block in foldline's format (`system_prompt.environment_block`), stating
    whatever directory, date, platform and git state."""
    lines = [
        "<environment>",
        f"Working directory: {draw(_directories(profile))}",
        f"Date: {draw(st.dates(date(1990, 1, 1), date(2099, 12, 31))).isoformat()}",
        f"Platform: {draw(st.sampled_from(['linux 6.8.0-45-generic', 'darwin 24.1.0', 'windows 11']))}",
        f"Shell: {draw(st.sampled_from(['/bin/bash', '/usr/bin/zsh', 'unknown']))}",
    ]
    if draw(st.booleans()):
        words = st.sampled_from(["fix", "the", "pricing", "timeout", "worker.log", "orders", "is", "add"])
        lines.append(
            f"Git branch: {draw(st.sampled_from(['main', 'fix/pricing-timeout', '(detached HEAD)']))}"
        )
        status = draw(
            st.lists(
                st.builds(
                    lambda code, path: f"{code} {path}",
                    st.sampled_from([" M", "??", "A ", " D"]),
                    st.sampled_from(
                        ["src/x/pricing.py", "logs/worker.log", "notes/", "tests/test_orders.py"]
                    ),
                ),
                max_size=5,
            )
        )
        lines.append(
            f"Git status at session start ({len(status)} changed paths; it may differ now):"
            if status
            else "Git status at session start: clean"
        )
        lines += status
        commits = draw(st.lists(st.lists(words, min_size=1, max_size=8).map(" ".join), max_size=3))
        if commits:
            lines += ["Recent commits:", *(f"{n:07x} {c}" for n, c in enumerate(commits))]
    else:
        lines.append("Git repository: no")
    lines.append("</environment>")
    return "\n".join(lines)


@given(data=st.data(), profile=st.sampled_from(PROFILES))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_environment_block_never_changes_the_work(data: st.DataObject, profile: str) -> None:
    block = data.draw(_blocks(profile))
    plain_calls, plain_results = _plain(profile)
    calls, results, report = _play(profile, block)
    assert report.environment == block
    assert report.turns_done == TURNS
    assert calls == plain_calls
    # Exactly equal, no tolerance: the workspace is the same path in both runs, so the results'
    # absolute paths are the same bytes; only the calls' absolute paths would differ, and the model
    # gives them only to a tool that wants them (foldline's take relative ones).
    assert results == plain_results
    assert sum(results) > 0  # a session that read nothing would pass without proving anything


def test_the_block_a_simulated_session_sends_is_the_same_on_every_run(tmp_path: Path) -> None:
    """Two runs of one seed send the same bytes: the block states the simulated clock's date, a
    fixed platform and no repository (a generated workspace has none), whatever machine runs it."""
    generate_workspace(tmp_path / "ws", SEED)
    clock = SimulatedClock()
    block = simulated_environment(tmp_path / "ws", clock)
    assert block == simulated_environment(tmp_path / "ws", SimulatedClock())
    assert f"Working directory: {(tmp_path / 'ws').resolve()}\n" in block
    assert "Date: 2026-01-01\n" in block  # the clock's start, not today
    assert "Git repository: no" in block
    clock.advance(86_400)
    assert "Date: 2026-01-02\n" in simulated_environment(tmp_path / "ws", clock)


def test_two_runs_of_one_seed_with_the_block_are_identical() -> None:
    """A simulated session sends the block unless told not to (foldline as shipped), and its bytes
    are the same on every run."""
    profile = "debug"
    calls, results, first = _play(profile, None)
    again_calls, again_results, again = _play(profile, None)
    assert first.environment.startswith("<environment>\nWorking directory: ")
    assert (calls, results) == (again_calls, again_results)
    assert [r.prompt for r in first.requests] == [r.prompt for r in again.requests]
    assert first.usage.cost() == again.usage.cost()
    # the block is sent: every request is larger than the same session's without it
    plain = _play(profile, False)[2]
    assert all(a.prompt > b.prompt for a, b in zip(first.requests, plain.requests, strict=True))


def test_a_turn_reads_a_file_once_however_its_path_is_written() -> None:
    """foldline's Grep lists absolute paths, its Bash and the prompts relative ones: one file, two
    spellings. Compared as strings, a file read through one looked unread through the other, and
    the turn read it again (feature seed 103's first turn read four files twice)."""
    calls, _, _ = _play("feature", False, turns=1)
    reads = [
        json.loads(call)[1]["file_path"].removeprefix("./")
        for call in calls[0]
        if json.loads(call)[0] == "Read" and "offset" not in json.loads(call)[1]
    ]
    assert len(reads) >= 4
    assert len(reads) == len(set(reads)), reads
