"""`foldline demo`: the long simulated session through every compaction level (see `foldline.demo`)."""

from __future__ import annotations

from pathlib import Path

import click

from foldline.cli import PROFILE_CHOICE, cli


@cli.command()
@click.option(
    "--turns", default=60, show_default=True, type=click.IntRange(1, 1000), help="User turns to run."
)
@click.option("--html", type=click.Path(dir_okay=False, path_type=Path), help="Write the inspect page here.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option(
    "--profile",
    default="debug",
    show_default=True,
    type=PROFILE_CHOICE,
    help="Whose session: the simulated user's kind of work.",
)
@click.option("--seed", default=7, show_default=True, type=int, help="The simulated model's and user's seed.")
@click.option(
    "--context-window",
    default=60_000,
    show_default=True,
    type=click.IntRange(20_000, 1_000_000),
    help="The managed session's window, in tokens.",
)
def demo(turns: int, html: Path | None, as_json: bool, profile: str, seed: int, context_window: int) -> None:
    """Run a long coding session on a small window, every level on, beside the same one unmanaged."""
    try:
        from foldline.demo import main
    except ImportError as e:  # starlette/uvicorn are the optional `server` extra
        raise click.ClickException(
            f"the demo needs the server extra: pip install 'foldline[server]' ({e})"
        ) from e
    main(turns, html=html, as_json=as_json, profile=profile, seed=seed, context_window=context_window)
