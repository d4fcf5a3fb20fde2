"""`foldline simulate`: play a profile's user through a real session and print what it looked like.

A thin shell over `foldline.simulation.simulate`. Without `--url` the simulated model runs in-process
(`foldline.testing.SimulatedProvider`); with `--url` it talks to `foldline serve --backend simulated`
(start that with the same `--seed` and `--profile`). The profile's workspace is generated under
`--workspace` (default: a temporary directory, removed afterwards).

With `--seeds`, `--address` or `--results`, each seed is a unit of a fleet (`foldline.fleet`, kind
`simulate`: its own `foldline serve` and folder): `--jobs N` local Ray workers (1: one after another
in this process), or the Ray cluster at `--address`; rows and transcripts go to `--results` (a path
or fsspec URL), and a seed that already has a row there is not run again (docs/fleet.md).
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
