"""`foldline chat` typed into as a person would (a real terminal, through pexpect), against a real
`foldline serve --backend simulated` process, in a generated workspace: it explores, reads, answers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from foldline.server.simulated import generate_workspace
from foldline.server.simulated.profiles import package_name

pexpect = pytest.importorskip("pexpect")

CLI = ["-c", "from foldline.cli import main; main()"]


@pytest.fixture
def simulated_server(tmp_path: Path) -> Iterator[str]:
    log = (tmp_path / "serve.log").open("w+")
    command = [sys.executable, *CLI, "serve", "--backend", "simulated", "--seed", "2", "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=os.environ.copy())
    try:
        deadline = time.monotonic() + 30
        url = None
        while url is None and time.monotonic() < deadline and process.poll() is None:
            log.seek(0)
            match = re.search(r"on (http://\S+) ", log.read())
            url = match.group(1) if match else None
            time.sleep(0.05)
        assert url is not None, "foldline serve did not start"
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


def test_chat_explores_the_workspace_and_answers_about_it(simulated_server: str, tmp_path: Path) -> None:
    workspace = generate_workspace(tmp_path / "ws", seed=2)
    args = [
        *CLI,
        "chat",
        "--base-url",
        simulated_server,
        "--api-key",
        "k",
        "--workspace",
        str(workspace),
        "--sessions-dir",
        str(tmp_path / "sessions"),
        "--permission-mode",
        "bypassPermissions",
    ]
    child = pexpect.spawn(sys.executable, args, cwd=str(workspace), encoding="utf-8", timeout=60)
    child.setwinsize(50, 200)
    try:
        child.expect("›")
        child.sendline("How does the pricing module compute its values?")
        child.expect(r"context [\d,]+/[\d,]+")  # the status line that ends every turn
        turn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before)  # styles and cursor moves out
        child.expect("›")
        assert "⏺" in turn  # tool calls ran
        assert re.search(r"⏺ (Read|Glob|Bash|Grep)", turn)
        answer = turn.rsplit("⎿", 1)[-1]
        assert "pricing.py" in answer  # the answer names the file it found
        assert "You said" not in turn  # not an echo
        assert (workspace / "src" / package_name(2) / "pricing.py").exists()
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
