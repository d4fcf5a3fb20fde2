"""`foldline undo` and `foldline checkpoints`: the workspace's undo store from a shell (§9.6).

`foldline undo` takes back the last tool call that changed the workspace (a Bash command or an
edit) of the workspace's latest session, as `/undo` does in the REPL, so a `chat -p` script can
undo too; `--turns N` puts the workspace back as it was before that session's last N turns.
`foldline checkpoints` lists what can be undone, and `--prune` deletes what is past the size and
age budget (`ToolsConfig.checkpoint_max_bytes`, `checkpoint_max_age_s`), saying which calls can
no longer be undone. Both first finish an apply or undo a kill cut off.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import click

from foldline.cli import cli
from foldline.config import ToolsConfig
from foldline.containment.checkpoints import Checkpoint, CheckpointStore, store_root

__all__ = ["checkpoints", "undo"]


def _latest_store(workspace: Path) -> CheckpointStore:
    """The store of the workspace's session whose last checkpoint is newest."""
    root = store_root(Path(os.path.realpath(workspace)))
    every = CheckpointStore(workspace, "").checkpoints(all_sessions=True) if root.is_dir() else []
    if not every:
        raise click.ClickException(f"nothing to undo: no tool call has changed {workspace} through foldline")
    return CheckpointStore(workspace, every[-1].session)


def _said(lines: list[str]) -> None:
    for line in lines:
        click.echo(line, err=True)


@cli.command()
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The workspace whose latest session to undo in.")  # fmt: skip
@click.option("--turns", type=click.IntRange(min=1), default=None,
              help="Undo every call of the session's last N turns instead of the last call.")  # fmt: skip
def undo(workspace: Path, turns: int | None) -> None:
    """Undo the last tool call that changed the workspace (its latest session)."""
    store = _latest_store(workspace)
    _said(store.recover())
    if turns is None:
        done = store.undo()
        if done is None:
            raise click.ClickException(
                "nothing to undo: every change of the latest session is undone already"
            )
        click.echo(done.line())
        return
    applied = [c for c in store.checkpoints(all_sessions=False) if c.state == "applied" and c.changed]
    if not applied:
        raise click.ClickException("nothing to undo: every change of the latest session is undone already")
    last_turns = sorted({c.turn for c in applied})[-turns:]
    for item in store.rewind(last_turns[0]):
        click.echo(item.line())


@cli.command()
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="The workspace whose store to list.")  # fmt: skip
@click.option("--prune", is_flag=True, help="Delete checkpoints past the size and age budget.")
@click.option("--max-bytes", type=click.IntRange(min=0), default=None,
              help="The size budget for --prune (default: ToolsConfig.checkpoint_max_bytes).")  # fmt: skip
@click.option("--max-age-days", type=click.FloatRange(min=0), default=None,
              help="The age budget for --prune (default: ToolsConfig.checkpoint_max_age_s).")  # fmt: skip
def checkpoints(workspace: Path, prune: bool, max_bytes: int | None, max_age_days: float | None) -> None:
    """List the workspace's checkpoints (what /undo can take back), or prune them."""
    store = CheckpointStore(workspace, "")
    _said(store.recover())
    if prune:
        limits = ToolsConfig()
        dropped = store.prune(
            max_bytes=limits.checkpoint_max_bytes if max_bytes is None else max_bytes,
            max_age_s=limits.checkpoint_max_age_s if max_age_days is None else max_age_days * 86400,
        )
        for entry in dropped:
            click.echo(f"deleted: {_row(entry)} (can no longer be undone)")
        click.echo(f"pruned {len(dropped)} checkpoint(s)")
        return
    every = store.checkpoints(all_sessions=True)
    if not every:
        click.echo("no checkpoints")
        return
    for entry in every:
        click.echo(_row(entry))
    click.echo(f"{len(every)} checkpoint(s), {sum(e.bytes for e in every) / 1024**2:,.1f} MiB kept")


def _row(entry: Checkpoint) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.created))
    what = " ".join(entry.what.split())[:60]
    where = f"{entry.session[:12]:12}  #{entry.seq:<4} turn {entry.turn:<3}"
    return f"{when}  {where} {entry.state:8} {entry.tool}: {what}"
