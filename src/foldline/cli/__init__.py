"""The `foldline` command line: a thin shell over the library (SPEC §10).

Each command lives in its own module and is registered here.
"""

from __future__ import annotations

import click

__all__ = ["cli", "format_option", "main"]

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["auto", "foldline", "claude-code"]),
    default="auto",
    show_default=True,
    help="Transcript format of SESSION (auto: read the first line).",
)
"""The `--format` option every command that reads a session file takes."""


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="foldline")
def cli() -> None:
    """foldline: the message pipeline of a coding agent, with an offline Messages API server."""


def main() -> None:
    """Console-script entry point."""
    cli()


from foldline.cli import chat as _chat  # noqa: E402,F401
from foldline.cli import demo as _demo  # noqa: E402,F401
from foldline.cli import request as _request  # noqa: E402,F401
from foldline.cli import serve as _serve  # noqa: E402,F401
from foldline.cli import sessions as _sessions  # noqa: E402,F401
