"""`foldline serve`: run the offline Anthropic Messages API server (SPEC §8, R8.6).

A thin shell over `foldline.server.app.create_app`. starlette and uvicorn are the optional `server`
extra, imported only when the command runs, so the rest of the CLI works without them. Binds to
loopback unless told otherwise.
"""

from __future__ import annotations

import click

from foldline.cli import cli
from foldline.errors import UserError

__all__ = ["serve"]


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback default).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="TCP port.")
@click.option(
    "--backend", "backend_name", default="scripted", show_default=True, type=click.Choice(["scripted"])
)
@click.option("--scenario", type=click.Path(dir_okay=False), help="Scenario file of scripted replies.")
@click.option("--faults", "faults_spec", default="", help="Fault spec, e.g. '1:529,3:cut/5,10%:500,seed=7'.")
@click.option("--context-window", default=200_000, show_default=True, type=click.IntRange(1), help="Tokens.")
@click.option("--api-key", default=None, help="Require this key in x-api-key (per launch).")
def serve(
    host: str,
    port: int,
    backend_name: str,
    scenario: str | None,
    faults_spec: str,
    context_window: int,
    api_key: str | None,
) -> None:
    """Serve the Anthropic Messages API offline: scripted replies, prompt caching, cache_edits, faults."""
    try:
        import uvicorn

        from foldline.server.app import create_app
    except ImportError as e:
        raise click.ClickException(
            f"foldline serve needs the 'server' extra ({e.name} is missing): pip install 'foldline[server]'"
        ) from e
    from foldline.server.backend import ScriptedBackend, load_scenario
    from foldline.server.config import ServerConfig
    from foldline.server.faults import parse_faults

    try:
        backend = load_scenario(scenario) if scenario else ScriptedBackend()
        faults = parse_faults(faults_spec)
    except UserError as e:
        raise click.BadParameter(str(e)) from e
    config = ServerConfig(context_window=context_window, api_key=api_key)
    click.echo(f"foldline serve ({backend_name}) on http://{host}:{port}", err=True)
    uvicorn.run(create_app(config, backend=backend, faults=faults), host=host, port=port, log_level="info")
