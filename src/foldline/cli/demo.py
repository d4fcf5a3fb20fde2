"""`foldline demo`: the scripted end-to-end session (see `foldline.demo`)."""

from __future__ import annotations

import click

from foldline.cli import cli


@cli.command()
@click.option("--turns", default=8, show_default=True, type=click.IntRange(1, 200), help="User turns to run.")
def demo(turns: int) -> None:
    """Run a scripted coding session against the local server and print what it cost."""
    try:
        from foldline.demo import main
    except ImportError as e:  # starlette/uvicorn are the optional `server` extra
        raise click.ClickException(
            f"the demo needs the server extra: pip install 'foldline[server]' ({e})"
        ) from e
    main(turns)
