"""`foldline sessions` (list session files) and `foldline show` (print one session readably), design.md §10.

Both read foldline transcripts and Claude Code transcripts through `foldline.sessions`; this module
only renders. Invariant: every piece of session text is printed as a `rich.text.Text` (never parsed as
markup) with terminal escape sequences removed, so a transcript cannot restyle or corrupt the terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import assert_never

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from foldline._json import dumps
from foldline._types import Block
from foldline.cli import cli, format_option
from foldline.config import default_sessions_dir
from foldline.errors import FoldlineError
from foldline.sessions import (
    FormatChoice,
    LoadedSession,
    SessionInfo,
    claude_code_projects_dir,
    find_session,
    list_sessions,
    load_session,
)
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    AttachmentEntry,
    CachePin,
    CollapseCommit,
    CompactBoundary,
    LatchedHeaders,
    ProgressEntry,
    ResultsCleared,
    SnipBoundary,
    SystemEntry,
    UnknownRecord,
    UserEntry,
)

__all__ = ["resolve_session", "sessions", "show"]

# CSI and BEL-terminated OSC sequences go whole; any other C0 or C1 control (a lone ESC, the 8-bit
# CSI U+009B) goes on its own. Tab and newline stay.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(text: str) -> str:
    return _ANSI.sub("", text)


def _plain(text: str, style: str = "") -> Text:
    """Text from a session (or a file name) ready to print: escapes removed, never read as markup."""
    return Text(_clean(text), style=style)


def _clip(text: str, limit: int) -> str:
    text = _clean(text)
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit} chars)"


def _human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def _shown_path(path: Path, roots: Sequence[Path]) -> str:
    for root in roots:
        if root.is_dir() and path.is_relative_to(root):
            return str(path.relative_to(root))
    return str(path)


def title(info: SessionInfo, limit: int = 60) -> str:
    """A session's title: its first typed prompt, escapes removed, shortened to `limit` characters."""
    text = _clean(info.first_prompt)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _sessions_table(infos: Iterable[SessionInfo], roots: Sequence[Path]) -> Table:
    table = Table(show_lines=False, expand=False)
    table.add_column("last activity", no_wrap=True)
    table.add_column("turns", justify="right")
    table.add_column("title (first prompt)", overflow="fold", ratio=3)
    for name, justify in (("path", "left"), ("format", "left"), ("size", "right")):
        table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for info in infos:
        when = (info.last_activity or "-").replace("T", " ")[:16]
        table.add_row(
            when,
            str(info.turns),
            _plain(title(info)),
            _plain(_shown_path(info.path, roots)),
            info.format,
            _human_size(info.size_bytes),
        )
    return table


@cli.command()
@click.argument("dirs", nargs=-1, type=click.Path(path_type=Path))
@click.option("--all", "show_all", is_flag=True, help="Also list sessions without a typed prompt.")
def sessions(dirs: tuple[Path, ...], show_all: bool) -> None:
    """List the sessions (foldline or Claude Code) under DIRS (default: the sessions directory)."""
    roots = list(dirs) or [default_sessions_dir()]
    for root in roots:
        if not root.exists():
            raise click.ClickException(
                f"{root}: no such directory; pass a folder of sessions (for Claude Code: ~/.claude/projects)"
            )
    try:
        infos = list_sessions(roots)
    except FoldlineError as exc:
        raise click.ClickException(str(exc)) from exc
    console = Console()
    empty = [i for i in infos if i.turns == 0]
    if not show_all:
        infos = [i for i in infos if i.turns > 0]
    if not infos:
        console.print(_plain(f"No sessions under {', '.join(map(str, roots))}."))
    if empty and not show_all:
        console.print(_plain(f"({len(empty)} session(s) without a prompt hidden; --all lists them)", "dim"))
    if not infos:
        return
    infos.sort(key=lambda i: i.last_activity or "", reverse=True)
    console.print(_sessions_table(infos, roots))


# --- show ----------------------------------------------------------------------------------------


def _result_text(block: Block) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type')}]" for b in content]
        return " ".join(parts)
    return ""


def _user_lines(entry: UserEntry, limit: int) -> list[Text]:
    content = entry.message.content
    if entry.is_compact_summary:
        text = content if isinstance(content, str) else " ".join(str(b.get("text", "")) for b in content)
        return [
            Text("compact summary: ", style="bold magenta") + Text(_clip(text, limit * 2), style="magenta")
        ]
    label, style = ("meta", "dim") if entry.is_meta else ("user", "bold cyan")
    if isinstance(content, str):
        text = _clip(content, limit) if entry.is_meta else _clean(content)
        return [Text(f"{label}: ", style=style) + Text(text, style="dim" if entry.is_meta else "")]
    lines: list[Text] = []
    for block in content:
        kind = block.get("type")
        if kind == "tool_result":
            style = "red" if block.get("is_error") else "green"
            head = Text(f"  ⎿ result {_clean(str(block.get('tool_use_id', '')))[-8:]}: ", style=style)
            lines.append(head + Text(_clip(_result_text(block), limit), style="dim"))
        elif kind == "text":
            lines.append(Text(f"{label}: ", style=style) + _plain(str(block.get("text", ""))))
        else:
            lines.append(_plain(f"{label}: [{kind}]", style=style))
    return lines


def _assistant_lines(entry: AssistantEntry, limit: int) -> list[Text]:
    if entry.is_api_error_message:
        info = entry.api_error
        detail = f"{info.status or ''} {info.message}".strip() if info else ""
        return [Text("api error: ", style="bold red") + Text(_clip(detail, limit))]
    lines: list[Text] = [_plain(f"assistant ({entry.message.model})", style="bold yellow")]
    for block in entry.message.content:
        kind = block.get("type")
        if kind == "text":
            text = _clean(str(block.get("text", "")))
            if text.strip():
                lines.append(Text(text))
        elif kind == "thinking":
            lines.append(
                Text(
                    _clip(str(block.get("thinking", "")), limit * 2) or "(thinking: signature only)",
                    style="dim italic",
                )
            )
        elif kind == "tool_use":
            args = dumps(block.get("input", {})).decode()
            lines.append(
                _plain(f"  → {block.get('name')}", style="bold blue") + Text(f" {_clip(args, limit)}")
            )
        else:
            lines.append(_plain(f"  [{kind}]", style="dim"))
    return lines


def _control_line(record: AnyRecord) -> Text | None:
    if isinstance(record, CompactBoundary):
        return Text(
            f"── context compacted ({record.trigger}, {record.pre_tokens:,} tokens before) ──",
            style="magenta",
        )
    if isinstance(record, SnipBoundary):
        return Text(f"── snipped {len(record.removed_uuids)} entries ──", style="dim")
    if isinstance(record, CollapseCommit):
        return Text(f"── collapsed span: {_clip(record.summary, 200)} ──", style="dim")
    if isinstance(record, ResultsCleared):
        return Text(f"── cleared {len(record.tool_use_ids)} old tool results ──", style="dim")
    return None


def _record_lines(record: AnyRecord, limit: int, verbose: bool) -> list[Text]:
    if isinstance(record, UserEntry):
        return _user_lines(record, limit)
    if isinstance(record, AssistantEntry):
        return _assistant_lines(record, limit)
    if isinstance(record, SystemEntry):
        body = _clip(record.content, limit)
        return [_plain(f"system/{record.subtype}" + (f": {body}" if body else ""), style="dim")]
    if isinstance(record, AttachmentEntry | ProgressEntry):
        if not verbose:
            return []
        if isinstance(record, AttachmentEntry):
            label, note = record.attachment_type, _result_text({"content": record.content})
        else:
            label, note = "progress", record.text
        return [_plain(f"  [{label}] {_clip(note, limit)}", style="dim")]
    if isinstance(
        record, SnipBoundary | CollapseCommit | CompactBoundary | CachePin | LatchedHeaders | ResultsCleared
    ):
        line = _control_line(record)
        return [line] if line is not None else []
    if isinstance(record, UnknownRecord):
        return [Text(f"[unknown record kind {record.kind!r}]", style="dim")]
    assert_never(record)


def _render(console: Console, session: LoadedSession, limit: int, verbose: bool) -> None:
    console.print(_plain(f"{session.path} ({session.format}, session {session.session_id})", style="bold"))
    for warning in session.warnings:
        console.print(_plain(f"warning: {warning}", style="yellow"))
    for record in session.records:
        if getattr(record, "is_sidechain", False) and not verbose:
            continue
        for line in _record_lines(record, limit, verbose):
            console.print(line, soft_wrap=True)


def resolve_session(session: str) -> Path:
    """The file SESSION names (a path, or an id of a foldline or Claude Code session), or a usage error."""
    path = Path(session)
    if path.exists() and not path.is_file():
        raise click.ClickException(f"{path}: not a file; pass a session .jsonl file")
    roots = [default_sessions_dir(), claude_code_projects_dir()]
    found = find_session(session, roots)
    if found is None:
        raise click.ClickException(
            f"{session}: no such session file, nor a session id under {roots[0]} or {roots[1]}; "
            "run `foldline sessions [DIR]` to list sessions and pass a path"
        )
    return found


@cli.command()
@click.argument("session")
@format_option
@click.option(
    "--max-chars", default=300, show_default=True, help="Truncate tool results and inputs (0: never)."
)
@click.option("-v", "--verbose", is_flag=True, help="Also show attachments, progress and subagent entries.")
def show(session: str, fmt: FormatChoice, max_chars: int, verbose: bool) -> None:
    """Print SESSION (a foldline or Claude Code transcript file, or a session id) readably."""
    path = resolve_session(session)
    try:
        loaded = load_session(path, fmt)
    except FoldlineError as exc:
        raise click.ClickException(f"{exc} (check the path, or force the reader with --format)") from exc
    _render(Console(), loaded, max_chars, verbose)
