"""`foldline simulate`: play a profile's user through a real session and print what it looked like.

A thin shell over `foldline.simulation.simulate`. With `--url` it talks to `foldline serve --backend
simulated` (start that with the same `--seed` and `--profile`); without, it starts that same server
in this process, on a free loopback port, for the run: the prompt cache, and so the cache-read share
and the cost, are the server's either way (the in-process `SimulatedProvider` has no prompt cache, and
billed every request uncached: 0.0% and $0.20 where the server said 87.1% and $0.05). The profile's
workspace is generated under `--workspace` (default: a temporary directory, removed afterwards).
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from foldline.cli import PROFILE_CHOICE, cli

__all__ = ["simulate_command", "simulated_server"]


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
    "--url",
    default=None,
    help="A `foldline serve --backend simulated` to talk to (default: that server, started in-process).",
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
    from foldline.simulation import simulate

    with tempfile.TemporaryDirectory() as tmp, simulated_server(url, seed, profile) as served:
        root = Path(tmp)
        provider = AnthropicProvider(base_url=served, api_key="simulated")
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


@contextmanager
def simulated_server(url: str | None, seed: int, profile: str) -> Iterator[str]:
    """`url`, or `foldline serve --backend simulated --seed SEED --profile PROFILE` (its defaults
    otherwise) started here for the block: one server code path, so one cache accounting."""
    if url:
        yield url
        return
    try:
        from foldline.server.app import create_app
        from foldline.server.config import ServerConfig
        from foldline.server.simulated import SimulatedBackend
        from foldline.server.testing import run_server
    except ImportError as e:
        raise click.ClickException(
            f"foldline simulate runs foldline serve in-process, which needs the 'server' extra "
            f"({e.name} is missing); or pass --url of a running one"
        ) from e
    app = create_app(ServerConfig(), backend=SimulatedBackend(seed=seed, profile=profile))
    with run_server(app) as served:
        yield served
