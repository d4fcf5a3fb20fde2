"""The `foldline` command line: a thin shell over the library (design.md §10).

Each command lives in its own module, imported only when that command is looked up: `foldline
--help` and `foldline show` must not pay for the SDK, the engine or the server extra.
"""

from __future__ import annotations

import importlib

import click

__all__ = ["COMMANDS", "PROFILE_CHOICE", "cli", "format_option", "main"]

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "foldline", "claude-code"]),
    default="auto",
    show_default=True,
    help="Transcript format of SESSION (auto: read the first line).",
)
"""The `--format` option every command that reads a session file takes."""

PROFILE_CHOICE = click.Choice(["feature", "debug", "refactor", "swe"])
"""The simulated profiles `--profile` takes (serve, simulate, demo). Spelled out rather than imported
from `foldline.server.simulated`, which would load the server on every command; a test checks it
against `PROFILES`."""

COMMANDS: dict[str, tuple[str, str]] = {
    "cache": (
        "foldline.cli.inspect",
        "Print SESSION's prompt-cache statistics: hit share, writes and reads, breaks with causes and cost.",
    ),
    "chat": ("foldline.cli._chat_flags", "Talk to the agent: one turn with -p (or stdin), otherwise a REPL."),
    "demo": (
        "foldline.cli.demo",
        "Run a long coding session on a small window, every level on, beside the same one unmanaged.",
    ),
    "inspect": (
        "foldline.cli.inspect",
        "Chart SESSION's context, cache and cost per call; a summary here, the page with --html FILE.",
    ),
    "request": (
        "foldline.cli.request",
        "Print the JSON body (and beta headers) the next turn of SESSION would send, without sending it.",
    ),
    "serve": (
        "foldline.cli.serve",
        "Serve the Anthropic Messages API offline: scripted replies, prompt caching, cache_edits, faults.",
    ),
    "model": (
        "foldline.cli.model",
        "A real instruct model: serve its GGUF with llama.cpp, or fetch it for the transformers backend.",
    ),
    "simulate": (
        "foldline.cli.simulate",
        "Play a simulated user's session through the real engine and print its statistics.",
    ),
    "sessions": (
        "foldline.cli.sessions",
        "List the sessions (foldline or Claude Code) under DIRS (default: the sessions directory).",
    ),
    "trust": (
        "foldline.cli.trust",
        "Show the workspace's unconfirmed settings files and confirm them, so they take effect.",
    ),
    "undo": (
        "foldline.cli.undo",
        "Undo the last tool call that changed the workspace (its latest session).",
    ),
    "checkpoints": (
        "foldline.cli.undo",
        "List the workspace's checkpoints (what /undo can take back), or prune them.",
    ),
    "show": (
        "foldline.cli.sessions",
        "Print SESSION (a foldline or Claude Code transcript file, or a session id) readably.",
    ),
}
"""Command name -> (module that registers it, the short help `--help` lists without importing it).

A test checks each against the command's own docstring."""


class _LazyGroup(click.Group):
    """A group whose commands register themselves when their module is first imported."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(COMMANDS[cmd_name][0])
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Listing the commands must not import them; loaded ones show their own help.
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names), default=0)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is not None and command.hidden:
                continue
            # A bare Command with the stored help truncates exactly as the real one would.
            stand_in = command or click.Command(name, help=COMMANDS[name][1])
            text = stand_in.get_short_help_str(limit)
            rows.append((name, text))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="foldline")
def cli() -> None:
    """foldline: the message pipeline of a coding agent, with an offline Messages API server."""


def main() -> None:
    """Console-script entry point."""
    cli()
