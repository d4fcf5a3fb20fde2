"""The new user's path to a loosened session, typed as a person would (a real terminal, through
pexpect): `foldline trust --yes` a workspace settings file that turns the permission prompts and
the Bash sandbox off, then `foldline chat` against a real `foldline serve --backend simulated`. The
first line says the mode and the sandbox and which file set them; the status line keeps saying so."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from foldline.cli._ui import status_line
from foldline.config import Config

pexpect = pytest.importorskip("pexpect")

CLI = ["-c", "from foldline.cli import main; main()"]
_STYLES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture
def home_env(tmp_path: Path) -> dict[str, str]:
    """This process's environment with a home of the test's own (where `trust` records)."""
    home = tmp_path / "home"
    home.mkdir()
    return {**os.environ, "HOME": str(home)}


@pytest.fixture
def simulated_server(tmp_path: Path, home_env: dict[str, str]) -> Iterator[str]:
    log = (tmp_path / "serve.log").open("w+")
    command = [sys.executable, *CLI, "serve", "--backend", "simulated", "--seed", "2", "--port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, env=home_env)
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


def test_a_trusted_file_that_loosens_everything_is_said_first_and_in_the_status_line(
    simulated_server: str, tmp_path: Path, home_env: dict[str, str]
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".foldline").mkdir(parents=True)
    (workspace / "notes.txt").write_text("hello\n")
    settings = workspace / ".foldline" / "settings.local.json"
    settings.write_text('{"defaultMode": "bypassPermissions", "sandbox": "off"}\n')
    trusted = subprocess.run(
        [sys.executable, *CLI, "trust", "--yes", "--workspace", str(workspace)],
        env=home_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert trusted.returncode == 0, trusted.stderr
    assert "Trusted 1 file" in trusted.stderr
    args = [*CLI, "chat", "--base-url", simulated_server, "--api-key", "k", "--workspace", str(workspace)]
    args += ["--sessions-dir", str(tmp_path / "sessions")]
    child = pexpect.spawn(
        sys.executable, args, cwd=str(workspace), env=home_env, encoding="utf-8", timeout=60
    )
    child.setwinsize(50, 400)
    try:
        child.expect("›")
        opening = _STYLES.sub("", child.before).replace("\r", "").strip().splitlines()
        first = opening[0]
        assert first.startswith("permission mode: bypassPermissions")
        assert f"set by {settings}" in first
        assert "every tool call runs without asking" in first
        assert "Bash sandbox: off: Bash runs on the host" in first
        assert first.count(f"set by {settings}") == 2  # the sandbox's state names its file too
        child.sendline("Read notes.txt")
        child.expect(r"context [\d,]+/[\d,]+")  # the status line that ends every turn
        child.expect("›")
        status = _STYLES.sub("", child.before)
        assert "mode bypassPermissions" in status
        assert "Bash unsandboxed" in status
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_the_status_line_names_a_mode_other_than_default_and_an_unsandboxed_bash() -> None:
    plain = status_line([], Config()).plain
    loose = status_line([], Config(), mode="acceptEdits", sandboxed=False).plain
    assert "mode" not in plain.replace("model", "")
    assert "unsandboxed" not in plain
    assert loose.startswith(plain)
    assert loose.endswith(" · mode acceptEdits · Bash unsandboxed")
