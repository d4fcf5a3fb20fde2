"""Bash: real subprocesses, exit codes, output caps, and whole-tree kills on timeout, abort and cancel."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from foldline.config import ToolsConfig
from foldline.tools import BashTool, ToolContext, ToolResult

pytestmark = pytest.mark.anyio

# the shell, then two background sleeps; every pid is written down before anything blocks
TREE = "sh -c 'echo $$ > pids; sleep 100 & echo $! >> pids; sleep 100 & echo $! >> pids; wait'"


_PF_EXITING = 0x4  # the kernel's flag, in /proc/PID/stat, of a process that has begun to exit


def _running(pid: int) -> bool:
    """Alive, not a zombie and not exiting: a zombie only waits for its reaper, and a process the
    kernel is tearing down (which on a loaded machine can take a while) runs no more code of its own."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] not in ("Z", "X") and not int(fields[6]) & _PF_EXITING


def _read_pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


async def _pids(path: Path, count: int) -> list[int]:
    """The pids the command wrote down; another process writes them, so there is no event to await."""
    with anyio.fail_after(10):
        while len(pids := _read_pids(path)) < count:  # noqa: ASYNC110
            await anyio.sleep(0.01)
    return pids


def _fast(workspace: Path, **limits: float) -> ToolContext:
    limits.setdefault("kill_grace_s", 0.5)
    return ToolContext(workspace=workspace, limits=ToolsConfig(**limits))  # type: ignore[arg-type]


async def test_stdout_stderr_and_exit_code(ctx: ToolContext) -> None:
    result = await BashTool().run({"command": "echo out; echo err >&2; exit 3"}, ctx)
    assert result.is_error
    assert result.content == "out\n[stderr]\nerr\nExit code: 3"
    assert result.structured is not None
    assert result.structured["exit_code"] == 3


async def test_success_is_not_an_error_and_runs_in_cwd(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    ctx = ToolContext(workspace=workspace, cwd=Path("sub"))
    result = await BashTool().run({"command": "pwd"}, ctx)
    assert not result.is_error
    assert result.content == f"{workspace / 'sub'}\nExit code: 0"


async def test_progress_is_reported(workspace: Path) -> None:
    seen: list[str] = []
    ctx = ToolContext(workspace=workspace, progress=seen.append)
    await BashTool().run({"command": "true"}, ctx)
    assert seen == ["Running: true"]


async def test_timeout_kills_the_whole_process_tree(workspace: Path) -> None:
    ctx = _fast(workspace)
    started = time.monotonic()
    result = await BashTool().run({"command": TREE, "timeout": 700}, ctx)
    elapsed = time.monotonic() - started
    pids = await _pids(workspace / "pids", 3)
    assert result.is_error
    assert "timed out after 0.7s" in str(result.content)
    assert result.structured is not None
    assert result.structured["outcome"] == "timeout"
    assert [pid for pid in pids if _running(pid)] == []
    assert elapsed < 10  # 0.7 s timeout + 0.5 s grace, with room for a loaded machine


async def test_abort_kills_the_whole_process_tree(workspace: Path) -> None:
    ctx = _fast(workspace)
    results: list[ToolResult] = []

    async def call() -> None:
        results.append(await BashTool().run({"command": TREE}, ctx))

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        pids = await _pids(workspace / "pids", 3)
        assert all(_running(pid) for pid in pids)
        ctx.abort.set()
    [result] = results
    assert result.is_error
    assert "interrupted" in str(result.content)
    assert [pid for pid in pids if _running(pid)] == []


async def test_caller_cancellation_kills_the_tree(workspace: Path) -> None:
    ctx = _fast(workspace)
    async with anyio.create_task_group() as group:
        group.start_soon(BashTool().run, {"command": TREE}, ctx)
        pids = await _pids(workspace / "pids", 3)
        group.cancel_scope.cancel()
    assert [pid for pid in pids if _running(pid)] == []


def _running_in(directory: Path) -> list[int]:
    """Running processes whose cwd is `directory`: what a call started and failed to stop."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cwd").readlink() == directory and _running(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("checkpoints", [0, 1, 2, 3, 5, 8])
async def test_cancel_at_any_point_leaves_no_process(workspace: Path, checkpoints: int) -> None:
    ctx = _fast(workspace)
    async with anyio.create_task_group() as group:
        group.start_soon(BashTool().run, {"command": "sleep 100 & sleep 100"}, ctx)
        for _ in range(checkpoints):
            await anyio.lowlevel.checkpoint()
        group.cancel_scope.cancel()
    assert _running_in(workspace) == []


async def test_sigterm_ignoring_process_gets_sigkill(workspace: Path) -> None:
    ctx = _fast(workspace, kill_grace_s=0.3)
    command = "trap '' TERM; echo $$ > pids; while :; do sleep 0.05; done"
    result = await BashTool().run({"command": command, "timeout": 500}, ctx)
    [pid] = await _pids(workspace / "pids", 1)
    assert result.structured is not None
    assert result.structured["outcome"] == "timeout"
    assert not _running(pid)


async def test_background_children_do_not_outlive_the_call(workspace: Path) -> None:
    ctx = _fast(workspace, background_grace_s=0.2)
    result = await BashTool().run({"command": "sleep 100 & echo $! > pids; echo started"}, ctx)
    [pid] = await _pids(workspace / "pids", 1)
    assert not result.is_error
    assert str(result.content).startswith("started\n")
    assert result.structured is not None
    assert result.structured["background_killed"] is True
    assert not _running(pid)


async def test_output_is_capped_keeping_head_and_tail(workspace: Path) -> None:
    ctx = _fast(workspace, max_output_chars=1000)
    command = "echo HEAD; head -c 100000 /dev/zero | tr '\\0' x; echo; echo TAIL"
    result = await BashTool().run({"command": command}, ctx)
    text = str(result.content)
    assert text.startswith("HEAD\n")
    assert "TAIL\nExit code: 0" in text
    assert "bytes of output truncated" in text
    assert len(text) < 1200
    assert result.structured is not None
    assert result.structured["stdout_truncated_bytes"] > 98_000


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        pytest.param({"command": "   "}, "`command` is empty", id="empty"),
        pytest.param({"command": "true", "timeout": 0}, "`timeout` must be positive", id="zero-timeout"),
        pytest.param({"command": ["ls"]}, "must be of type string", id="not-a-string"),
    ],
)
async def test_bad_input(ctx: ToolContext, tool_input: dict[str, object], message: str) -> None:
    result = await BashTool().run(tool_input, ctx)
    assert result.is_error
    assert message in str(result.content)


async def test_timeout_is_capped_by_config(workspace: Path) -> None:
    ctx = _fast(workspace, bash_max_timeout_s=0.3)
    result = await BashTool().run({"command": "sleep 5", "timeout": 600_000}, ctx)
    assert "timed out after 0.3s" in str(result.content)
