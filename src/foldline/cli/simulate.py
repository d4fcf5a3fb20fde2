"""`foldline simulate`: play a profile's user through a real session and print what it looked like.

A thin shell over `foldline.simulation.simulate`. Without `--url` the simulated model runs in-process
(`foldline.testing.SimulatedProvider`); with `--url` it talks to `foldline serve --backend simulated`
(start that with the same `--seed` and `--profile`). The profile's workspace is generated under
`--workspace` (default: a temporary directory, removed afterwards).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import click

from foldline.cli import PROFILE_CHOICE, cli

__all__ = ["simulate_command"]


@cli.command("simulate")
@click.option(
    "--profile",
    default="feature",
    show_default=True,
    type=PROFILE_CHOICE,
)
@click.option("--turns", default=20, show_default=True, type=click.IntRange(1), help="Prompts to type.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option(
    "--url", default=None, help="A `foldline serve --backend simulated` to talk to (default: in-process)."
)
@click.option(
    "--context-window",
    default=200_000,
    show_default=True,
    type=click.IntRange(1),
    help="The client's window.",
)
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option(
    "--no-compaction", is_flag=True, help="Turn Microcompact, Collapse and AutoCompact off (the baseline)."
)
@click.option(
    "--no-collapse", is_flag=True, help="Context Collapse off: AutoCompact compacts at its threshold instead."
)
def simulate_command(
    profile: str,
    turns: int,
    seed: int,
    url: str | None,
    context_window: int,
    workspace: Path | None,
    no_compaction: bool,
    no_collapse: bool,
) -> None:
    """Play a simulated user's session through the real engine and print its statistics."""
    from foldline.config import CollapseConfig, Config, TranscriptConfig
    from foldline.providers.anthropic import AnthropicProvider
    from foldline.providers.base import Provider
    from foldline.simulation import simulate
    from foldline.testing import SimulatedProvider

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        provider: Provider = (
            AnthropicProvider(base_url=url, api_key="simulated")
            if url
            else SimulatedProvider(seed=seed, profile=profile, validate=False)
        )
        config = Config(
            context_window=context_window,
            collapse=CollapseConfig(enabled=not no_collapse),
            transcript=TranscriptConfig(sessions_dir=root / "sessions", fsync="never"),
        )
        report = asyncio.run(
            simulate(
                provider,
                profile=profile,
                turns=turns,
                seed=seed,
                workspace=workspace or root / "ws",
                sessions_dir=root / "sessions",
                config=config,
                levels=not no_compaction,
            )
        )
    click.echo("\n".join(report.lines()))
    if report.errors:
        raise SystemExit(1)
