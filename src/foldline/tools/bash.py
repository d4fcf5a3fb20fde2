"""The Bash tool: one real `bash -c` subprocess per call, in its own process group (R9.1).

Invariants:
- The shell starts with `start_new_session=True`, so its pid is the process-group id of everything
  it spawns (unless a child calls `setsid` itself). The whole group is signalled: SIGTERM, then
  SIGKILL after `kill_grace_s`.
- The group is killed on timeout, on abort (`ctx.abort`), when the caller cancels the call, and when
  the shell exits while background children still hold its output pipes. No call leaves processes
  of its group behind.
- Output is bounded in memory: each stream keeps its first and last `max_output_chars / 2`
  characters and says how much it dropped.
- A non-zero exit, a timeout or an abort is an `is_error` result that states which.
- With `ctx.sandbox` active the shell runs inside bubblewrap (`foldline.containment.sandbox`); bwrap is
  the group leader, and the command's own pid namespace ends when the shell exits, so its
  background children die with it (`--die-with-parent` covers foldline dying). Where the settings
  require the sandbox and it cannot run, Bash is refused.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
from anyio.abc import ByteReceiveStream, Process

from foldline._types import JSONObject
from foldline.containment import git_state
from foldline.containment.paths import is_home_secret
from foldline.containment.programs import find_program
from foldline.containment.sandbox import HOME_TOOLCHAINS, SandboxCall
from foldline.errors import ToolError
from foldline.tools._semantics import effects as command_effects
from foldline.tools._shell import SimpleCommand, parse_command
from foldline.tools.base import BaseTool, ToolContext, ToolResult
from foldline.tools.permissions import checker_reads
from foldline.tools.transaction import apply_change

__all__ = ["BashTool", "kill_process_group"]

Outcome = Literal["exited", "timeout", "aborted"]
_SIGKILL_WAIT_S = 5.0
_PF_EXITING = 0x4
"""The kernel's flag (in /proc/PID/stat) of a process that has begun to exit."""


class _BoundedBuffer:
    """Keeps the head and the tail of a byte stream, and counts what fell out of the middle."""

    def __init__(self, max_bytes: int) -> None:
        self._half = max(1, max_bytes // 2)
        self._head = bytearray()
        self._tail = bytearray()
        self.dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self._half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        excess = len(self._tail) - self._half
        if excess > 0:
            del self._tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        if self.dropped:
            return f"{head}\n… [{self.dropped} bytes of output truncated] …\n{tail}"
        return head + tail


async def _drain(stream: ByteReceiveStream | None, sink: _BoundedBuffer, done: anyio.Event) -> None:
    try:
        if stream is not None:
            async for chunk in stream:
                sink.feed(chunk)
    except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        done.set()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a pid reused by another user's process group
        return False
    return _has_live_member(pgid)


def _has_live_member(pgid: int) -> bool:
    """True if some non-zombie process is in group `pgid` (zombies await a reaper, they run nothing)."""
    try:
        entries = os.listdir("/proc")
    except OSError:  # pragma: no cover - no procfs (macOS): trust killpg's answer
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # a zombie awaits its reaper, and one already exiting (PF_EXITING: tearing down the
        # mount namespace of a layer can take a few milliseconds) runs no more code of its own
        if int(fields[2]) == pgid and fields[0] != b"Z" and not int(fields[6]) & _PF_EXITING:
            return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _wait_gone(pgid: int, seconds: float) -> bool:
    """Poll until group `pgid` has no running member; there is no event to wait on, because the
    dying processes are not all our children."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return True
        await anyio.sleep(0.02)
    return not _group_alive(pgid)


async def kill_process_group(pgid: int, grace_s: float) -> None:
    """SIGTERM every process in group `pgid`, then SIGKILL whatever is still running after `grace_s`."""
    _signal_group(pgid, signal.SIGTERM)
    if not await _wait_gone(pgid, grace_s):
        _signal_group(pgid, signal.SIGKILL)
        # SIGKILL cannot be refused; on a loaded machine the dying still need CPU time to exit
        await _wait_gone(pgid, max(grace_s, _SIGKILL_WAIT_S))


async def _supervise(process: Process, timeout_s: float, abort: anyio.Event) -> Outcome:
    """Wait for the shell to exit, the timeout to pass, or `abort` to be set, whichever is first."""
    outcome: Outcome = "exited"
    async with anyio.create_task_group() as group:

        async def watch_abort() -> None:
            nonlocal outcome
            await abort.wait()
            outcome = "aborted"
            group.cancel_scope.cancel()

        group.start_soon(watch_abort)
        with anyio.move_on_after(timeout_s) as deadline:
            await process.wait()
        if deadline.cancelled_caught:
            outcome = "timeout"
        group.cancel_scope.cancel()
    return outcome


@dataclass
class _Launch:
    """How one command starts: its argv and environment, and, when sandboxed, the call whose
    `consequences` are known once the run is over."""

    argv: list[str]
    env: dict[str, str] | None = None
    call: SandboxCall | None = None


@contextmanager
def _command_line(command: str, ctx: ToolContext) -> Iterator[_Launch]:
    """`bash -c command`, inside the OS sandbox when the session has one.

    Raises:
        ToolError: the settings require the sandbox and it cannot run here.
    """
    sandbox = ctx.sandbox
    # the shell too is found outside the workspace: a planted `<ws>/.venv/bin/bash` never starts
    argv = [find_program("bash", ctx.workspace) or "/bin/bash", "-c", command]
    if sandbox is not None and sandbox.refuses:
        raise ToolError(f"Bash is refused: {sandbox.notice()}")
    if sandbox is None or not sandbox.active:
        yield _Launch(argv)
        return
    opaque = not checker_reads(command)
    store = ctx.checkpoints
    layer = store.new_layer() if store is not None and sandbox.layered else None
    try:
        with sandbox.wrap(argv, ctx.workspace, ctx.current_dir, opaque=opaque, layer=layer) as call:
            yield _Launch(call.argv, sandbox.environment(), call)
    except BaseException:
        if store is not None and layer is not None:
            store.discard(layer)  # cut off before its change was read: the workspace is as before
        raise


_SANDBOX_SIGNS = (
    "Read-only file system",
    "Network is unreachable",
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Failed to connect",
    "Connection refused",
)
_NETWORK_PROGRAMS = {"curl": (6, 7), "wget": (4,), "git": (128,), "ssh": (255,), "nc": (1,)}
"""Exit codes that mean "could not reach the host", for programs that may print nothing."""


def _explain_sandbox(command: str, result: ToolResult, ctx: ToolContext) -> ToolResult:
    """A sandboxed command's result, with what the sandbox did to it said plainly: a failure that
    looks like the sandbox stopped it, writes outside the workspace that vanished with the private
    `/tmp` or home, an empty home listed. So the model does not retry the same thing in other
    words, and the user learns how to allow it."""
    assert ctx.sandbox is not None
    text = result.content if isinstance(result.content, str) else ""
    notes: list[str] = []
    network = ctx.sandbox.policy.network
    exit_code = (result.structured or {}).get("exit_code")
    parsed = parse_command(command)
    names = {cmd.name for cmd in parsed.commands}
    if result.is_error and not network:
        offline = any(exit_code in _NETWORK_PROGRAMS.get(n, ()) for n in names)
        if offline or any(sign in text for sign in _SANDBOX_SIGNS[1:]):
            notes.append(
                "The sandbox has no network, so the command could not reach any host. The user can "
                'turn it on in ~/.foldline/settings.json: {"sandbox": {"network": true}}.'
            )
    if result.is_error and "Read-only file system" in text:
        notes.append(
            "Only the workspace is writable, and in it not git's config, hooks and similar files, "
            ".foldline or .claude; a workspace that is no git repository cannot become one here "
            "(the user runs `git init`)."
        )
    if result.is_error and "externally-managed-environment" in text:
        reach = (
            ""
            if network
            else " The sandbox has no network, so pip can install only from files in the workspace "
            "until the user turns it on."
        )
        notes.append(
            "pip refuses to install into the system's Python (PEP 668), and the system is read-only "
            "here anyway. Make a virtual environment inside the workspace and install into it: "
            "`python3 -m venv .venv && .venv/bin/pip install NAME` (then run `.venv/bin/python`). "
            "Not --break-system-packages, --user or pipx: they write outside the workspace, which "
            "the sandbox throws away." + reach
        )
    home = str(Path.home())
    vanished = sorted(
        {
            path
            for cmd in parsed.commands
            for path in _written(cmd)
            if path.startswith(("/tmp", "/var/tmp", "~", "$HOME", home)) and not _inside(path, ctx)
        }
    )
    if vanished:
        notes.append(
            f"{', '.join(vanished)} lay outside the workspace: the sandbox's /tmp and home are "
            "private and thrown away after the call, so what was written there is gone. Write "
            "inside the workspace instead."
        )
    if exit_code == 127:
        notes += [_hidden_program(name, path) for name, path in _on_host_only(names, text)]
    words = [w for cmd in parsed.commands for w in cmd.words[1:]]
    if any(w in ("~", "$HOME", home) or w.startswith(("~/", "$HOME/")) for w in words):
        notes.append(
            "The home directory is hidden in the sandbox: it looks empty to the command, but for its "
            "toolchain folders (read-only) and what the settings' sandbox.homeReadable names."
        )
    if not notes:
        return result
    text = "\n".join([text, "Note: Bash runs in foldline's OS sandbox. " + " ".join(notes)])
    return ToolResult(text, is_error=result.is_error, structured=result.structured)


_NOT_FOUND = re.compile(r"([^\s:]+): (?:command not found|No such file or directory)")


def _on_host_only(names: set[str], text: str) -> list[tuple[str, str]]:
    """The programs the command ran, or the shell said it could not find, that the host's PATH
    finds: `(name, where)`. Inside the sandbox they were missing (exit 127)."""
    said = set(_NOT_FOUND.findall(text))
    found = []
    for name in sorted((names | said) - {""}):
        where = shutil.which(name) if "/" not in name else (name if os.path.isfile(name) else None)
        if where is not None and (name in said or where.startswith(str(Path.home()))):
            found.append((name, where))
    return found


def _hidden_program(name: str, where: str) -> str:
    """Why `name`, at `where` on the host, was not found in the sandbox, and what makes it visible."""
    home = Path(os.path.realpath(Path.home()))
    real = Path(os.path.realpath(where))
    for path in (Path(where), real):
        if path.is_relative_to(home) and path != home:
            top = path.relative_to(home).parts[0]
            if is_home_secret(home / top, home):
                break
            return (
                f"`{name}` exists on the host ({where}), but the sandbox hides the home except its "
                f"toolchain folders ({', '.join('~/' + t for t in HOME_TOOLCHAINS)}). The user can "
                "bind it read-only in ~/.foldline/settings.json: "
                f'{{"sandbox": {{"homeReadable": ["~/{top}"]}}}}.'
            )
    return (
        f"`{name}` exists on the host ({where}), but not at that place inside the sandbox (it sees the "
        "host's files read-only, an empty home and a private /tmp): run it by a path the sandbox shows, "
        "or the user adds its folder to the settings' sandbox.homeReadable if it lies in the home."
    )


def _written(cmd: SimpleCommand) -> list[str]:
    return [r.target for r in cmd.redirects if r.writes and not r.dynamic] + list(command_effects(cmd).writes)


def _inside(raw: str, ctx: ToolContext) -> bool:
    path = Path(os.path.realpath(ctx.current_dir / os.path.expanduser(raw)))
    return path.is_relative_to(ctx.workspace)


def _with_consequences(result: ToolResult, consequences: list[str]) -> ToolResult:
    """The result, with what the command changed that git will follow on the host said first."""
    if not consequences:
        return result
    warning = "\n".join(f"- {c}" for c in consequences)
    text = result.content if isinstance(result.content, str) else ""
    structured = {**(result.structured or {}), "consequences": list(consequences)}
    return ToolResult(
        f"{text}\nWarning: this command changed what runs outside the sandbox later:\n{warning}",
        is_error=result.is_error,
        structured=structured,
    )


@dataclass
class _Run:
    outcome: Outcome
    exit_code: int | None
    stdout: _BoundedBuffer
    stderr: _BoundedBuffer
    background_killed: bool = False


class BashTool(BaseTool):
    """Run a shell command with a timeout; its whole process tree dies on timeout or abort."""

    name = "Bash"
    description = (
        "Run a bash command in the working directory and return its stdout, stderr and exit code. "
        "timeout is in milliseconds (default 120000, at most 600000). The command and everything it "
        "starts is killed on timeout or interrupt; background processes do not outlive the call."
    )
    input_schema: JSONObject = {  # noqa: RUF012 - read-only class constant
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command to run"},
            "timeout": {"type": "integer", "description": "Timeout in milliseconds"},
            "description": {"type": "string", "description": "What the command does, in 5-10 words"},
        },
        "required": ["command"],
        "additionalProperties": False,
    }

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        command = str(tool_input["command"])
        if not command.strip():
            raise ToolError("Invalid input: `command` is empty")
        timeout_s = self._timeout_s(tool_input, ctx)
        ctx.progress(f"Running: {command}")
        with _command_line(command, ctx) as launch:
            run = await self._execute(launch.argv, launch.env, timeout_s, ctx)
        result = self._result(run, timeout_s)
        call = launch.call
        if call is None:
            return result
        result = _explain_sandbox(command, result, ctx)
        if call.layer is not None:
            result = await apply_change(
                ctx, call.layer, call.gitdirs, tool="Bash", what=command, result=result
            )
            assert call.before is not None
            call.consequences = git_state.changes(
                ctx.workspace, call.before, git_state.snapshot(ctx.workspace)
            )
        return _with_consequences(result, call.consequences)

    @staticmethod
    def _timeout_s(tool_input: Mapping[str, Any], ctx: ToolContext) -> float:
        if "timeout" not in tool_input:
            return ctx.limits.bash_timeout_s
        timeout_ms = int(tool_input["timeout"])
        if timeout_ms <= 0:
            raise ToolError(f"Invalid input: `timeout` must be positive milliseconds, got {timeout_ms}")
        return min(timeout_ms / 1000, ctx.limits.bash_max_timeout_s)

    async def _execute(
        self, argv: list[str], env: dict[str, str] | None, timeout_s: float, ctx: ToolContext
    ) -> _Run:
        limits = ctx.limits
        out, err = _BoundedBuffer(limits.max_output_chars), _BoundedBuffer(limits.max_output_chars)
        out_done, err_done = anyio.Event(), anyio.Event()
        with anyio.CancelScope(shield=True):
            # a cancel landing inside open_process would orphan the started child: take it below
            process = await anyio.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                cwd=ctx.current_dir,
                env=env,
                start_new_session=True,
            )
        pgid = process.pid
        run = _Run("exited", None, out, err)
        try:
            async with anyio.create_task_group() as readers:
                readers.start_soon(_drain, process.stdout, out, out_done)
                readers.start_soon(_drain, process.stderr, err, err_done)
                run.outcome = await _supervise(process, timeout_s, ctx.abort)
                if run.outcome != "exited":
                    await kill_process_group(pgid, limits.kill_grace_s)
                with anyio.move_on_after(limits.background_grace_s):
                    await out_done.wait()
                    await err_done.wait()
                drained = out_done.is_set() and err_done.is_set()
                if run.outcome == "exited" and (not drained or _group_alive(pgid)):
                    # background children would outlive the call (and may hold the pipes open)
                    run.background_killed = True
                    await kill_process_group(pgid, limits.kill_grace_s)
                readers.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None or _group_alive(pgid):
                    await kill_process_group(pgid, limits.kill_grace_s)
                await process.aclose()
        run.exit_code = process.returncode
        return run

    @staticmethod
    def _result(run: _Run, timeout_s: float) -> ToolResult:
        parts = [run.stdout.text().rstrip("\n")]
        stderr = run.stderr.text().rstrip("\n")
        if stderr:
            parts.append(f"[stderr]\n{stderr}")
        if run.outcome == "timeout":
            parts.append(f"Command timed out after {timeout_s:g}s; its process group was killed.")
        elif run.outcome == "aborted":
            parts.append("Command interrupted by the user; its process group was killed.")
        elif run.background_killed:
            parts.append("Background processes still running when the command exited were killed.")
        if run.outcome == "exited":
            parts.append(f"Exit code: {run.exit_code}")
        text = "\n".join(p for p in parts if p)
        structured: JSONObject = {
            "exit_code": run.exit_code,
            "outcome": run.outcome,
            "background_killed": run.background_killed,
            "stdout_truncated_bytes": run.stdout.dropped,
            "stderr_truncated_bytes": run.stderr.dropped,
        }
        is_error = run.outcome != "exited" or run.exit_code != 0
        return ToolResult(text, is_error=is_error, structured=structured)
