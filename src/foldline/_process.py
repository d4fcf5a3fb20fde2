"""Stopping a child process: ask it to end, give it a grace period, then kill it (the servers and
clients foldline starts: `foldline serve`, opencode's server, llama-server)."""

from __future__ import annotations

import subprocess

__all__ = ["stop"]


def stop(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM, then SIGKILL if `process` has not exited within `grace_s` seconds; reaped either way."""
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
