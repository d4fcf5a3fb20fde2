"""Real coding agents, installed from npm, against `foldline serve` running as a subprocess.

Owns: installing a pinned client into a cache folder (`installed`), starting the server on a free
port with a request log (`foldline_server`), a throwaway workspace, and reading what happened from
the server's side (non-2xx answers) and from the client's own transcripts (tool calls, failures).

Nothing of the clients is kept in the repository: they are installed at test time, and their
requests and prompts exist only inside the test's temporary folders.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CACHE = Path(os.environ.get("FOLDLINE_INTEROP_CACHE", Path.home() / ".cache" / "foldline-interop"))
"""Where pinned clients are installed once and reused (override with $FOLDLINE_INTEROP_CACHE)."""

_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET", "ENETUNREACH", "network")
"""npm error words that mean the registry could not be reached (the one reason to skip)."""

_FOLDLINE = ["-c", "import sys; from foldline.cli import main; sys.argv[0] = 'foldline'; main()"]


@dataclass(frozen=True)
class Package:
    """A pinned npm package and the native binary inside it that the tests run."""

    name: str
    version: str
    binary: str

    @property
    def folder(self) -> Path:
        return CACHE / f"{self.name.replace('/', '-').lstrip('@')}-{self.version}"


CLAUDE_CODE = Package(
    "@anthropic-ai/claude-code", "2.1.328", "node_modules/@anthropic-ai/claude-code-linux-x64/claude"
)
OPENCODE = Package("opencode-ai", "1.18.33", "node_modules/opencode-linux-x64/bin/opencode")


def installed(package: Package) -> Path:
    """The package's binary, installed into the cache with npm on first use.

    Skips (saying why) only where npm is missing, the registry cannot be reached, or the package
    ships no binary for this machine; any other install failure fails the test.
    """
    binary = package.folder / package.binary
    if binary.exists():
        return binary
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip(f"{package.name} is run here through its linux-x64 binary; this is {platform.platform()}")
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip(f"npm is not installed, so {package.name}@{package.version} cannot be installed")
    package.folder.mkdir(parents=True, exist_ok=True)
    spec = f"{package.name}@{package.version}"
    command = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(package.folder), spec]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        output = done.stdout + done.stderr
        if any(word in output for word in _OFFLINE):
            pytest.skip(f"the npm registry is unreachable, so {spec} cannot be installed:\n{output[-800:]}")
        pytest.fail(f"npm install {spec} failed ({done.returncode}):\n{output[-2000:]}")
    if not binary.exists():
        pytest.fail(f"npm installed {spec} but {binary} is missing")
    return binary


@dataclass
class Server:
    """A running `foldline serve` subprocess."""

    url: str
    log: Path
    process: subprocess.Popen[bytes]

    def requests(self) -> list[dict[str, Any]]:
        """Every request the server answered so far: method, path, status."""
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]

    def non_2xx(self) -> list[dict[str, Any]]:
        return [r for r in self.requests() if not 200 <= r["status"] < 300]


def client_path() -> str:
    """`PATH` for a client: the test interpreter's bin folder first, where the `rg` opencode's grep
    runs comes from (the `ripgrep` dev dependency), then the system's."""
    return os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])


def foldline_command(*args: str) -> list[str]:
    """`foldline ARGS` run by this interpreter (so the checkout under test is what runs)."""
    return [sys.executable, *_FOLDLINE, *args]


@contextmanager
def foldline_server(folder: Path, *args: str) -> Iterator[Server]:
    """`foldline serve --backend simulated ARGS` on a free loopback port, stopped on exit."""
    log, output = folder / "requests.jsonl", folder / "server.log"
    command = foldline_command(
        "serve", "--backend", "simulated", "--port", "0", "--request-log", str(log), *args
    )
    with output.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        url = _wait_for_banner(output, process)
        _wait_until_answering(url)
        yield Server(url, log, process)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_banner(output: Path, process: subprocess.Popen[bytes], timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in output.read_text(errors="replace").splitlines():
            if " on http://" in line and line.startswith("foldline serve"):
                return line.split(" on ", 1)[1].split()[0]
        if process.poll() is not None:
            break
        time.sleep(0.1)
    pytest.fail(f"foldline serve did not start:\n{output.read_text(errors='replace')[-2000:]}")


def _wait_until_answering(url: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


WORKSPACE_FILES = {
    "calc.py": (
        '"""Small arithmetic helpers."""\n\n\ndef add(a, b):\n    return a + b\n\n\n'
        "def mul(a, b):\n    return a * b\n"
    ),
    "tests/__init__.py": "",
    "tests/test_calc.py": (
        "import unittest\n\nimport calc\n\n\nclass CalcTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n\n"
        "    def test_mul(self):\n        self.assertEqual(calc.mul(2, 3), 6)\n"
    ),
    "README.md": "# calc\n\nAdd and multiply numbers. Run the tests with `python3 -m unittest`.\n",
    # The simulated model looks around a project the way its generated workspaces are laid out
    # (`du -sh logs data docs`); a project without these folders would fail that command.
    "docs/usage.md": "# Usage\n\n`calc.add(a, b)` adds, `calc.mul(a, b)` multiplies.\n",
    "logs/app.log": "2026-12-01 10:00:00 INFO calc started\n2026-12-01 10:00:01 INFO add(2, 3) = 5\n",
    "data/samples.csv": "a,b,sum\n2,3,5\n4,5,9\n",
}


def make_workspace(root: Path, extra: dict[str, str] | None = None) -> Path:
    """A small Python project to work in."""
    for name, text in {**WORKSPACE_FILES, **(extra or {})}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def tool_stats(transcripts: list[Path]) -> tuple[int, int, int]:
    """(tool calls, failed tool results, thinking blocks) in a client's JSONL transcripts.

    Claude Code writes one assistant line per content block, so a message's blocks are counted
    from its lines; a tool_result with `is_error` is a failed call.
    """
    calls = failed = thinking = 0
    for path in transcripts:
        for line in path.read_text().splitlines():
            record = json.loads(line)
            message = record.get("message")
            if not isinstance(message, dict) or record.get("isSidechain"):
                continue
            content = message.get("content")
            for block in content if isinstance(content, list) else ():
                kind = block.get("type")
                calls += kind == "tool_use"
                thinking += kind == "thinking"
                failed += kind == "tool_result" and bool(block.get("is_error"))
    return calls, failed, thinking
