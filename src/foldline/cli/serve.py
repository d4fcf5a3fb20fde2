"""`foldline serve`: run the offline Anthropic Messages API server (design.md §8, R8.6).

A thin shell over `foldline.server.app.create_app`. starlette and uvicorn are the optional `server`
extra, imported only when the command runs, so the rest of the CLI works without them. Binds to
loopback unless told otherwise. `--backend simulated --seed N --profile NAME` serves the simulated
coding model (`foldline.server.simulated`); `--verbosity-scale X` scales how many result lines its
replies quote (`SimulatedConfig.verbosity_scale`); `--summary-fidelity Q` and `--summary-fact-budget
N` make its summaries lossy (`SimulatedConfig.summary_fidelity`, `summary_fact_budget`).
`--cache-clock frozen` stops the prompt cache's clock, so no entry expires: the benchmarks that
leave pauses out use it, so that a loaded machine cannot let an entry outlive its five minutes
between two requests and change the bill. `--backend transformers --model DIR` serves a local
Hugging Face model instead of scripted replies; torch and transformers (the `model` extra) load only
then. The port is bound before anything is printed, so a busy port is one clear error line rather
than a "serving on" banner followed by uvicorn's shutdown noise. Requests must name a loopback host
and carry no browser origin unless `--allow-host` / `--allow-origin` say otherwise (`server.guard`);
a non-loopback `--host` address is itself an allowed host name.
"""

from __future__ import annotations

import gc
import socket
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from foldline.cli import PROFILE_CHOICE, cli
from foldline.errors import UserError

if TYPE_CHECKING:
    from foldline.server.backend import Backend

__all__ = ["serve"]


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (loopback default).")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="TCP port.")
@click.option(
    "--backend",
    "backend_name",
    default="scripted",
    show_default=True,
    type=click.Choice(["scripted", "simulated", "transformers"]),
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of --backend simulated.")
@click.option(
    "--profile",
    default="feature",
    show_default=True,
    type=PROFILE_CHOICE,
    help="Profile of --backend simulated (the workspace and user `foldline simulate` plays).",
)
@click.option(
    "--verbosity-scale",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="--backend simulated: multiply the lines its replies quote from tool results (1.0: calibrated).",
)
@click.option(
    "--summary-fidelity",
    default=None,
    type=click.FloatRange(0, 1),
    help="--backend simulated: the chance each stated fact survives one summary (default 1.0: every one).",
)
@click.option(
    "--summary-fact-budget",
    default=None,
    type=click.IntRange(min=0),
    help="--backend simulated: most stated facts one summary keeps, the oldest lost first (default: "
    "SimulatedConfig.summary_fact_budget, which a 100-turn session does not reach).",
)
@click.option(
    "--cache-clock",
    default="wall",
    show_default=True,
    type=click.Choice(["wall", "frozen"]),
    help=(
        "What the prompt cache's TTLs run on. frozen: no entry ever expires, for benchmarks without "
        "pauses whose bills must not depend on how loaded the machine is."
    ),
)
@click.option("--scenario", type=click.Path(dir_okay=False), help="Scenario file of scripted replies.")
@click.option(
    "--model",
    "model_path",
    type=click.Path(file_okay=False),
    help="Local Hugging Face model directory (--backend transformers).",
)
@click.option("--faults", "faults_spec", default="", help="Fault spec, e.g. '1:529,3:cut/5,10%:500,seed=7'.")
@click.option(
    "--context-window",
    default=None,
    type=click.IntRange(1),
    help="Tokens (default: the model directory's window with --backend transformers, else 200000).",
)
@click.option("--api-key", default=None, help="Require this key in x-api-key (per launch).")
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Also accept this Host name (repeatable; '*' any). Default: loopback names only.",
)
@click.option(
    "--allow-origin",
    "allow_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Serve browser pages from this origin, e.g. http://localhost:3000 (repeatable; '*' any).",
)
@click.option(
    "--request-log",
    type=click.Path(dir_okay=False),
    help=(
        "Append every answered request to this file, one JSON line each (method, path, status; "
        "an answered messages request also its model, tool count and usage)."
    ),
)
def serve(
    host: str,
    port: int,
    backend_name: str,
    scenario: str | None,
    model_path: str | None,
    faults_spec: str,
    seed: int,
    profile: str,
    verbosity_scale: float,
    summary_fidelity: float | None,
    summary_fact_budget: int | None,
    cache_clock: str,
    context_window: int | None,
    api_key: str | None,
    allow_hosts: tuple[str, ...],
    allow_origins: tuple[str, ...],
    request_log: str | None,
) -> None:
    """Serve the Anthropic Messages API offline: scripted replies, prompt caching, cache_edits, faults."""
    try:
        import uvicorn  # noqa: F401  (checked here for the message below; `limits` imports it)

        from foldline.server.app import create_app
        from foldline.server.limits import uvicorn_server
    except ImportError as e:
        raise click.ClickException(
            f"foldline serve needs the 'server' extra ({e.name} is missing): pip install 'foldline[server]'"
        ) from e
    from foldline.server.config import ServerConfig
    from foldline.server.faults import parse_faults

    try:
        lossy = {"--summary-fidelity": summary_fidelity, "--summary-fact-budget": summary_fact_budget}
        if backend_name == "simulated":
            backend = _simulated(
                scenario, model_path, seed, profile, verbosity_scale, summary_fidelity, summary_fact_budget
            )
        elif verbosity_scale != 1.0:
            raise UserError("--verbosity-scale is a setting of --backend simulated")
        elif any(v is not None for v in lossy.values()):
            named = " and ".join(k for k, v in lossy.items() if v is not None)
            raise UserError(f"{named}: a setting of --backend simulated, not --backend {backend_name}")
        else:
            backend = _backend(backend_name, scenario, model_path)
        faults = parse_faults(faults_spec)
    except UserError as e:
        raise click.BadParameter(str(e)) from e
    # A local model answers whatever model name the client sends; the scripted server mimics the API's 404.
    prefixes = ("",) if backend_name == "transformers" else ServerConfig().model_prefixes
    if context_window is None:
        context_window = _model_window(model_path) if backend_name == "transformers" and model_path else None
    config = ServerConfig(
        context_window=context_window or ServerConfig().context_window,
        api_key=api_key,
        model_prefixes=prefixes,
        allowed_hosts=(*allow_hosts, *_bound_name(host)),
        allowed_origins=allow_origins,
        request_log=request_log,
    )
    clock = _frozen if cache_clock == "frozen" else time.monotonic
    app = create_app(config, backend=backend, faults=faults, clock=clock)
    listener = _bind(host, port)
    bound_port = listener.getsockname()[1]
    click.echo(f"foldline serve ({backend_name}) on http://{host}:{bound_port} (Ctrl+C to stop)", err=True)
    # SIGTERM and Ctrl-C cancel every generation at once, so the server stops within a second.
    state = app.state.foldline
    server = uvicorn_server(app, config, on_exit=state.close, host=host, port=bound_port, log_level="info")
    with listener:
        try:
            server.run(sockets=[listener])
        finally:
            # The interpreter's last garbage collection walks every object torch and transformers
            # made (1.5 s on 2 cores), after the server is already down: nothing needs collecting.
            gc.freeze()


def _frozen() -> float:
    """A clock that never moves (`--cache-clock frozen`): a cache entry's TTL never passes."""
    return 0.0


def _model_window(model_path: str) -> int | None:
    """The window a model directory states: `foldline.json` (written by `foldline model fetch`), else
    the config's `max_position_embeddings`; None when neither says."""
    from pathlib import Path

    from foldline._json import loads

    for name, key in (("foldline.json", "context_window"), ("config.json", "max_position_embeddings")):
        try:
            value = loads((Path(model_path) / name).read_bytes()).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int) and value > 0:
            return value
    return None


def _bound_name(host: str) -> tuple[str, ...]:
    """`--host` as an allowed Host name when clients must use it to connect (not loopback, not `0.0.0.0`).

    Safe to allow: a DNS-rebinding page's requests carry the attacker's name, never this address.
    """
    from foldline.server.guard import is_loopback_host

    return () if host in ("", "0.0.0.0", "::") or is_loopback_host(host) else (host,)


def _simulated(
    scenario: str | None,
    model_path: str | None,
    seed: int,
    profile: str,
    verbosity_scale: float = 1.0,
    summary_fidelity: float | None = None,
    summary_fact_budget: int | None = None,
) -> Backend:
    """The simulated model (`--backend simulated --seed N --profile NAME [--verbosity-scale X]
    [--summary-fidelity Q] [--summary-fact-budget N]`); a summary setting not given keeps
    `SimulatedConfig`'s default."""
    from foldline.server.config import SimulatedConfig
    from foldline.server.simulated import SimulatedBackend

    if scenario or model_path:
        raise UserError("--backend simulated takes --seed and --profile, not --scenario or --model")
    config = SimulatedConfig(verbosity_scale=verbosity_scale)
    if summary_fidelity is not None:
        config = replace(config, summary_fidelity=summary_fidelity)
    if summary_fact_budget is not None:
        config = replace(config, summary_fact_budget=summary_fact_budget)
    return SimulatedBackend(seed=seed, profile=profile, config=config)


def _backend(name: str, scenario: str | None, model_path: str | None) -> Backend:
    """The backend `--backend` names; raises `UserError` on a missing or wrong option."""
    from foldline.server.backend import ScriptedBackend, load_scenario

    if name == "scripted":
        if model_path:
            raise UserError("--model needs --backend transformers")
        return load_scenario(scenario) if scenario else ScriptedBackend()
    if scenario:
        raise UserError("--scenario is for --backend scripted")
    if not model_path:
        raise UserError("--backend transformers needs --model DIR (a local Hugging Face model directory)")
    try:
        from foldline.server.model.backend import TransformersBackend
    except ImportError as e:
        raise click.ClickException(
            f"--backend transformers needs the 'model' extra ({e.name} is missing): "
            "pip install 'foldline[model]'"
        ) from e
    return TransformersBackend.load(model_path)


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port`, or a `ClickException` that says what to do instead."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        message = f"cannot serve on host {host!r}: {e.strerror}; try --host 127.0.0.1"
        raise click.ClickException(message) from e
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
        listener.listen(128)
    except OSError as e:
        listener.close()
        raise click.ClickException(
            f"cannot serve on {host}:{port}: {e.strerror}. Another server may hold the port: "
            "stop it, or pick another with --port (0 takes any free port)"
        ) from e
    listener.set_inheritable(True)
    return listener
