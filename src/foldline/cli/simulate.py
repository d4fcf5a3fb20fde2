"""`foldline simulate`: play a profile's user through a real session and print what it looked like.

A thin shell over `foldline.simulation.simulate`. With `--url` it talks to `foldline serve --backend
simulated` (start that with the same `--seed` and `--profile`); without, it starts that same server
in this process, on a free loopback port, for the run: the prompt cache, and so the cache-read share
and the cost, are the server's either way (the in-process `SimulatedProvider` has no prompt cache, and
billed every request uncached: 0.0% and $0.20 where the server said 87.1% and $0.05). The profile's
workspace is generated under `--workspace` (default: a temporary directory, removed afterwards).

With `--seeds`, `--address` or `--results`, each seed is a unit of a fleet (`foldline.fleet`, kind
`simulate`: its own `foldline serve` and folder): `--jobs N` local Ray workers (1: one after another
in this process), or the Ray cluster at `--address`; rows and transcripts go to `--results` (a path
or fsspec URL), and a seed that already has a row there is not run again (docs/fleet.md).
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
@click.option(
    "--seeds", default=None, help="Comma-separated seeds, each one unit of a fleet (docs/fleet.md)."
)
@click.option(
    "--jobs", default=1, show_default=True, type=click.IntRange(1), help="The fleet's local workers."
)
@click.option("--address", default=None, help="Run the fleet on this Ray cluster (HOST:PORT or ray://...).")
@click.option("--results", default=None, help="The fleet's results folder (a path or fsspec URL).")
def simulate_command(
    profile: str,
    turns: int,
    seed: int,
    url: str | None,
    context_window: int,
    workspace: Path | None,
    no_compaction: bool,
    no_collapse: bool,
    seeds: str | None,
    jobs: int,
    address: str | None,
    results: str | None,
) -> None:
    """Play a simulated user's session through the real engine and print its statistics."""
    if seeds is not None or address is not None or results is not None:
        if url is not None or workspace is not None:
            raise click.UsageError(
                "a fleet's units start their own server and folder: drop --url/--workspace"
            )
        strategy = "no-compaction" if no_compaction else "no-collapse" if no_collapse else "foldline"
        numbers = [int(s) for s in (seeds or str(seed)).split(",") if s.strip()]
        _fleet(profile, turns, numbers, context_window, strategy, jobs, address, results)
        return
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


def _fleet(
    profile: str,
    turns: int,
    seeds: list[int],
    window: int,
    strategy: str,
    jobs: int,
    address: str | None,
    results: str | None,
) -> None:
    """One `simulate` unit per seed on the fleet; a line per row, the failures on stderr."""
    from foldline.fleet import SIMULATE, Unit, live_progress, run_fleet

    units = [
        Unit(kind=SIMULATE, profile=profile, strategy=strategy, seed=s, turns=turns, window=window)
        for s in seeds
    ]
    with tempfile.TemporaryDirectory() as tmp, live_progress() as progress:
        in_process = jobs <= 1 and address is None
        report = run_fleet(
            units, results or tmp, address=address, workers=jobs, in_process=in_process, progress=progress
        )
    for row in report.rows:
        click.echo(
            f"{row['profile']} seed {row['seed']}: {row['turns_completed']}/{row['turns_planned']} turns, "
            f"${row['cost_usd']:.4f}, cache read {row['cache_read_share']:.1%}, peak "
            f"{row['peak_context_tokens']:,} tokens, {row['api_calls']} calls, facts "
            f"{row['facts_retained']}/{row['facts_asked']} (node {str(row['node'])[:12]})"
        )
    for failure in report.failed:
        click.echo(f"{failure['unit_key']} failed: {failure['error'][-500:]}", err=True)
    if report.failed:
        raise SystemExit(1)
