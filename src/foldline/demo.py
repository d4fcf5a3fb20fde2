"""`foldline demo` / `make demo`: a scripted coding session run end to end, offline.

What it runs: the local Messages API server (real uvicorn on loopback, scripted backend) and the
real engine with real tools in a throwaway workspace: every turn globs, reads, edits a file and
runs Python through Bash. Halfway through, the process "dies" (the engine is dropped mid-session)
and the session is resumed from its JSONL transcript alone. It ends with a table of turns, tokens,
cache-read share and cost, next to the same traffic without prompt caching.

Microcompact, Context Collapse and AutoCompact are not built yet; the demo says so rather than
pretending.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from foldline.config import Config
from foldline.events import CompactionEvent, RecordEvent, RetryEvent, UIEvent
from foldline.providers.anthropic import FOLDLINE_SERVE_CAPABILITIES, AnthropicProvider
from foldline.session import Session
from foldline.timeline import AssistantEntry, UserEntry
from foldline.tools import PermissionRules, default_tools
from foldline.transcript import load_transcript
from foldline.usage import UsageTotals, usage_of

__all__ = ["DemoResult", "main", "run_demo", "scenario"]

MODEL = "claude-sonnet-4-5"

_SEED_FILE = (
    '"""A tiny calculator the demo agent grows one function per turn."""\n\n\n'
    "def add(a, b):\n    return a + b\n\n# end\n"
)
_FUNCTIONS = [("sub", "a - b"), ("mul", "a * b"), ("div", "a / b"), ("mod", "a % b"), ("power", "a ** b")]
_FUNCTIONS += [("maximum", "max(a, b)"), ("minimum", "min(a, b)"), ("mean", "(a + b) / 2")]


def _tool(name: str, **tool_input: object) -> dict[str, Any]:
    return {"name": name, "input": tool_input}


def scenario(turns: int) -> list[dict[str, Any]]:
    """The scripted replies: five model calls per user turn (glob, read, edit, run, report)."""
    replies: list[dict[str, Any]] = []
    for i in range(turns):
        name, expr = _FUNCTIONS[i % len(_FUNCTIONS)]
        name = f"{name}{i // len(_FUNCTIONS) or ''}"
        code = f"def {name}(a, b):\n    return {expr}\n\n# end\n"
        replies += [
            {
                "text": f"Let me look at the project before adding `{name}`.",
                "tool_calls": [_tool("Glob", pattern="*.py")],
            },
            {"tool_calls": [_tool("Read", file_path="calc.py")]},
            {
                "text": f"Adding `{name}`.",
                "tool_calls": [_tool("Edit", file_path="calc.py", old_string="# end\n", new_string=code)],
            },
            {"tool_calls": [_tool("Bash", command=f"python3 -c 'import calc; print(calc.{name}(7, 3))'")]},
            {"text": f"Done: `calc.{name}` is in place and returns the right value for (7, 3)."},
        ]
    return replies


@dataclass
class DemoResult:
    """What the demo measured."""

    turns: list[UsageTotals]
    transcript: Path
    resumed_at: int
    seconds: float


def _session(
    base_url: str, workspace: Path, transcript: Path, on_event: Callable[[UIEvent], None]
) -> Session:
    return Session.open(
        transcript,
        provider=AnthropicProvider(
            base_url=base_url, api_key="demo", capabilities=FOLDLINE_SERVE_CAPABILITIES
        ),
        workspace=workspace,
        session_id="demo",
        config=Config(model=MODEL),
        tools=default_tools(),
        permission_mode="acceptEdits",
        rules=PermissionRules.from_lists(allow=["Bash(python3 -c:*)"]),
        fsync="boundaries",
        on_event=on_event,
    )


async def run_demo(
    turns: int = 8, *, console: Console | None = None, workdir: Path | None = None
) -> DemoResult:
    """Run the scripted session; print it as it goes; return the per-turn usage."""
    from foldline.server.app import create_app
    from foldline.server.backend import ScriptedBackend
    from foldline.server.testing import run_server

    console = console or Console()
    started = time.monotonic()
    with _workdir(workdir) as root:
        workspace, transcript = root / "workspace", root / "session.jsonl"
        workspace.mkdir()
        (workspace / "calc.py").write_text(_SEED_FILE)
        app = create_app(backend=ScriptedBackend(replies=scenario(turns), select="sequence"))
        with run_server(app) as url:
            console.print(f"[dim]local Messages API on {url}; workspace {workspace}[/dim]")
            resumed_at = turns // 2
            stats: list[UsageTotals] = []
            session = _session(url, workspace, transcript, _printer(console))
            for turn in range(turns):
                if turn == resumed_at:
                    await session.aclose()
                    console.rule("[yellow]process stopped; resuming from the transcript alone[/yellow]")
                    session = _session(url, workspace, transcript, _printer(console))
                engine = session.engine
                before = len(engine.timeline)
                prompt = f"Add the next calculator function (task {turn + 1} of {turns})."
                console.print(f"\n[bold cyan]user>[/bold cyan] {prompt}")
                await session.submit_message(prompt)
                stats.append(usage_of(list(engine.timeline.snapshot()[before:])))
            await session.aclose()
        loaded = load_transcript(transcript)
        console.print(
            f"\n[dim]transcript: {transcript.stat().st_size:,} bytes, {len(loaded.records)} records[/dim]"
        )
        return DemoResult(stats, transcript, resumed_at, time.monotonic() - started)


@contextmanager
def _workdir(path: Path | None) -> Iterator[Path]:
    if path is not None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="foldline-demo-") as d:
        yield Path(d)


def _printer(console: Console) -> Callable[[UIEvent], None]:
    def show(event: UIEvent) -> None:
        if isinstance(event, RetryEvent):
            console.print(f"[yellow]retrying in {event.delay:.1f}s: {event.reason}[/yellow]")
        if isinstance(event, CompactionEvent):  # R3.0.1: never clear silently
            console.print(f"[cyan]  {event.level}: {event.text}[/cyan]", highlight=False)
        if not isinstance(event, RecordEvent):
            return
        record = event.record
        if isinstance(record, AssistantEntry) and not record.is_virtual:
            for block in record.message.content:
                if block.get("type") == "text":
                    console.print(f"[green]model>[/green] {block['text']}")
                elif block.get("type") == "tool_use":
                    console.print(f"[magenta]  tool[/magenta] {block['name']} {block['input']}")
        elif isinstance(record, UserEntry) and isinstance(record.message.content, list):
            for block in record.message.content:
                if block.get("type") == "tool_result":
                    text = str(block.get("content"))[:70].replace("\n", " ⏎ ")
                    mark = "[red]error[/red]" if block.get("is_error") else "[dim]ok[/dim]"
                    console.print(f"    {mark} [dim]{text}[/dim]")

    return show


def summary_table(result: DemoResult) -> Table:
    """Turns, tokens, cache-read share and cost, with the uncached cost beside it."""
    table = Table(title="usage per turn, as the server billed it")
    for column in ("turn", "calls", "prompt", "read", "write", "output", "read %", "cost", "no-cache $"):
        table.add_column(column, justify="right")
    for i, t in enumerate(result.turns, 1):
        table.add_row(*_row(f"{i}{'*' if i - 1 == result.resumed_at else ''}", t))
    table.add_row(*_row("total", sum(result.turns, UsageTotals())), style="bold")
    return table


def _row(label: str, t: UsageTotals) -> list[str]:
    return [
        label,
        str(t.requests),
        f"{t.prompt:,}",
        f"{t.cache_read:,}",
        f"{t.cache_write + t.input:,}",
        f"{t.output:,}",
        f"{t.read_share:.0%}",
        f"${t.cost():.4f}",
        f"${t.cost(cached=False):.4f}",
    ]


def main(turns: int = 8) -> None:
    """Run the demo and print its summary."""
    console = Console() if sys.stdout.isatty() else Console(width=100)
    console.rule("[bold]foldline demo[/bold]: a scripted coding session against the local Messages API")
    result = asyncio.run(run_demo(turns, console=console))
    console.print(summary_table(result))
    console.print(
        "[dim]prompt = read + write (uncached input included); * = first turn after the resume[/dim]"
    )
    total_cached = sum(t.cost() for t in result.turns)
    total_plain = sum(t.cost(cached=False) for t in result.turns)
    console.print(
        f"{len(result.turns)} turns in {result.seconds:.1f}s; prompt caching saves "
        f"{1 - total_cached / total_plain:.0%} of the cost (${total_cached:.4f} vs ${total_plain:.4f})."
    )
    console.print(
        "[dim]This short session stays far below the context window, so no compaction level fires; "
        "`foldline simulate --turns 60 --context-window 60000` plays a long one that runs them all.[/dim]"
    )


if __name__ == "__main__":
    main()
