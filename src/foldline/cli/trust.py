"""`foldline trust`: confirm the workspace's own settings files (docs/design.md §9.4).

A settings file inside the workspace (`.foldline/settings*.json`, `.claude/settings*.json`) may
come with a cloned repository or from a command the agent ran; until the user confirms it, it
loosens nothing (`foldline.settings`). This command shows each unconfirmed file whole (control
characters escaped) and what it would do once confirmed, then asks, and records the confirmation
(`foldline.containment.trust`) of exactly the bytes it showed: each file is read once, so a change
made while the user reads is not what gets trusted, and any later change makes it unconfirmed
again. `foldline chat` asks the same question at start in a terminal.
"""

from __future__ import annotations

from pathlib import Path

import click

from foldline.cli import cli
from foldline.containment.safe_read import escape_controls
from foldline.containment.trust import trust as record_trust
from foldline.errors import FoldlineError, TrustStoreError
from foldline.settings import describe_effect, load_settings, read_settings_bytes

__all__ = ["confirm_settings", "trust"]


def confirm_settings(
    paths: tuple[Path, ...], workspace: Path, *, home: Path | None = None, assume_yes: bool = False
) -> bool:
    """Show each of `paths` (settings files inside `workspace`) and what it would do, and ask once
    whether to trust them all (or take `assume_yes`); record the answer for the bytes shown.
    Returns whether they are now trusted."""
    home = Path.home() if home is None else home
    shown: list[tuple[Path, bytes]] = []
    for path in paths:
        try:
            raw = read_settings_bytes(path, workspace)
            effect = describe_effect(path, raw, workspace) if raw is not None else []
        except FoldlineError as e:
            raise click.ClickException(str(e)) from e
        if raw is None:
            raise click.ClickException(f"{escape_controls(str(path))}: it is gone; nothing to confirm")
        shown.append((path, raw))
        click.echo(f"── {escape_controls(str(path))}", err=True)
        click.echo(escape_controls(raw.decode("utf-8", errors="replace").rstrip("\n")), err=True)
        click.echo("Once trusted, it:", err=True)
        click.echo("\n".join(f"  - {line}" for line in effect), err=True)
    question = (
        f"Trust {'this settings file' if len(paths) == 1 else 'these settings files'}? They may allow "
        "commands without asking, change the permission mode and open the Bash sandbox"
    )
    if not assume_yes and not _confirm(question):
        click.echo("Not trusted: their allow rules, mode and sandbox settings stay ignored.", err=True)
        return False
    try:
        for path, raw in shown:
            record_trust(path, home, raw)
    except TrustStoreError as e:
        raise click.ClickException(str(e)) from e
    files = f"{len(paths)} file{'s' if len(paths) != 1 else ''}"
    click.echo(f"Trusted {files} (until the next change).", err=True)
    return True


def _confirm(question: str) -> bool:
    """The person's yes or no; with no one to ask (stdin at its end: `</dev/null`, a script), say how
    to answer without a prompt rather than click's bare "Aborted!"."""
    try:
        return click.confirm(question, default=False, err=True)
    except click.Abort as e:
        if not isinstance(e.__context__, EOFError):
            raise  # Ctrl-C: the person stopped it
        raise click.ClickException(
            "no answer: stdin ended before a yes or no (nothing was trusted). Run it in a terminal, "
            "or pass --yes to trust the files shown above without asking"
        ) from None


@cli.command("trust")
@click.option(
    "--workspace",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    help="The workspace whose settings files to confirm (default: the current directory).",
)
@click.option("--yes", "-y", is_flag=True, help="Trust them without asking (after showing them).")
def trust(workspace: Path, yes: bool) -> None:
    """Show the workspace's unconfirmed settings files and confirm them, so they take effect."""
    try:
        settings = load_settings(workspace.resolve())
    except FoldlineError as e:
        raise click.ClickException(str(e)) from e
    if not settings.untrusted:
        click.echo("Nothing to confirm: no settings file here asks for more than it is given.", err=True)
        return
    confirm_settings(settings.untrusted, workspace.resolve(), assume_yes=yes)
