"""`foldline chat`'s command and flags, declared apart from its body so `foldline chat --help`
loads only click (design.md §10).

The body (`chat.py`) pulls in the SDK, httpx, prompt_toolkit and rich's markdown, seconds on a busy
machine; it is imported once the flags are parsed, never for `--help` or a flag error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from foldline.cli import cli

__all__ = ["MODES", "chat"]

MODES = ("default", "acceptEdits", "plan", "bypassPermissions")
"""The permission modes `--permission-mode` takes."""


@cli.command()
@click.option("-p", "--prompt", help="Run one turn with PROMPT and print the answer (stdin works too).")
@click.option("--continue", "latest", is_flag=True, help="Continue this workspace's newest session.")
@click.option("--resume", metavar="ID", help="Resume a session by id (or transcript path).")
@click.option("--model", help="Model name (default: the configured one).")
@click.option("--base-url", envvar="ANTHROPIC_BASE_URL", help="Another server that speaks the API.")
@click.option(
    "--cache-edits/--no-cache-edits",
    default=None,
    envvar="FOLDLINE_CACHE_EDITS",
    help="Whether the server takes cache_edits (Microcompact then clears old tool results without "
    "breaking the prompt cache). Default: ask the server; foldline serve says yes, the public API no.",
)
@click.option(
    "--thinking/--no-thinking",
    default=None,
    help="Extended thinking on every request (default: off; on when --thinking-budget is given).",
)
@click.option(
    "--thinking-budget",
    type=click.IntRange(min=1024),
    default=None,
    metavar="TOKENS",
    help="Thinking tokens per request (default with --thinking: Config.default_thinking_budget_tokens).",
)
@click.option(
    "--1m",
    "long_context",
    is_flag=True,
    help="Use the model's 1M-token window (Sonnet 4 and later) and send its beta header.",
)
@click.option("--api-key", envvar="ANTHROPIC_API_KEY", help="API key (default: $ANTHROPIC_API_KEY).")
@click.option(
    "--context-window",
    type=click.IntRange(min=1024),
    default=None,
    help="The model's window in tokens (default: Claude's table; for another model, what the server "
    "reports, else 200000). Every compaction threshold scales to it: a smaller working window than "
    "the model's (100000 on a 200K model) compacts earlier and costs less per turn "
    "(docs/benchmarks.md).",
)
@click.option(
    "--max-output-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="The model's output limit in tokens (default: Claude's table, or what the server reports).",
)
@click.option(
    "--summary-format",
    type=click.Choice(["sections", "free"]),
    default="sections",
    show_default=True,
    help="free: keep a compaction summary that lacks the requested sections (a small local model).",
)
@click.option(
    "--permission-mode", type=click.Choice(MODES), help="Default: the settings' defaultMode, else default."
)
@click.option(
    "--workspace",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The project the agent works in (default: the current directory).",
)
@click.option(
    "--max-turns",
    type=click.IntRange(min=1),
    default=None,
    help="Stop a turn after this many model rounds (default: no limit).",
)
@click.option("--sessions-dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--repl", "force_repl", is_flag=True, hidden=True)
@click.option(
    "--output-format",
    type=click.Choice(["text", "json", "stream-json"]),
    default="text",
    show_default=True,
    help="With -p or stdin: the answer as text, one JSON object at the end, or one JSON line per event.",
)
def chat(**options: Any) -> None:
    """Talk to the agent: one turn with -p (or stdin), otherwise a REPL."""
    from foldline.cli.chat import chat as run  # heavy: only once there is a chat to run

    run(**options)
