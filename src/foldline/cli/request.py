"""`foldline request SESSION`: print the next turn's request without sending it (design.md §10).

A thin shell over `foldline.api.params.build_request`, the same call the engine makes, so what it
prints is what would be sent: the compaction projection, normalization and cache marking applied.
Reads foldline and Claude Code transcripts. Nothing is written: the records the request would add
(cache pins, latched headers) are only counted on stderr. The system prompt and tools are
foldline's own (the session's recorded environment block included), as `foldline chat` sends them,
unless `--system` or `--tools` says otherwise.

When the session ends with a finished assistant reply, the next turn needs user input: `--prompt`
(default "Continue.") is appended as that input, with an id derived from the session so the output
is reproducible. A reply with an open tool call is answered instead (normalization synthesizes the
interrupted results), unless `--prompt` is given.
"""

from __future__ import annotations

import uuid as _uuid
from pathlib import Path
from typing import Literal

import click

from foldline._json import JSONDecodeError, dumps, loads
from foldline._types import JSONObject
from foldline.api.params import RequestPlan, build_request
from foldline.cli import cli, format_option
from foldline.cli.sessions import resolve_session
from foldline.config import DESIGN_WINDOW, Config
from foldline.errors import FoldlineError, UserError
from foldline.providers.base import Capabilities
from foldline.session import offered_tools
from foldline.sessions import load_session
from foldline.system_prompt import recorded_environment, system_prompt_for, with_environment, with_transcript
from foldline.timeline import (
    AnyRecord,
    AssistantEntry,
    Entry,
    UserEntry,
    UserMessage,
    api_filter,
    now_iso,
    ui_view,
)
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

__all__ = ["PROVIDERS", "request"]

DEFAULT_PROMPT = "Continue."
_LOCAL_CACHE_EDITS_BETA = "cache-edits-2025-06-01"
"""What `foldline serve` expects (server.caching.CACHE_EDITS_BETA), spelled out so the CLI does not
import the optional server extra."""

PROVIDERS: dict[str, Capabilities] = {
    "anthropic": Capabilities(name="anthropic"),
    "local": Capabilities(name="local", supports_cache_edits=True, cache_edits_beta=_LOCAL_CACHE_EDITS_BETA),
}
"""The capabilities `--provider` selects."""


def _ends_with_finished_reply(visible: list[Entry]) -> bool:
    """Whether the last entry is a reply with no open tool call (open calls are answered, not prompted)."""
    last = visible[-1] if visible else None
    if not isinstance(last, AssistantEntry):
        return False
    pieces = [e for e in visible if isinstance(e, AssistantEntry) and e.message.id == last.message.id]
    return not any(b.get("type") == "tool_use" for e in pieces for b in e.message.content)


def _with_prompt(records: list[AnyRecord], session_id: str, prompt: str | None) -> list[AnyRecord]:
    """Append the next user input after a finished reply (or wherever one was given)."""
    visible = api_filter(ui_view(records))
    if prompt is None and not _ends_with_finished_reply(visible):
        return records
    text = DEFAULT_PROMPT if prompt is None else prompt
    if not text.strip():
        raise UserError("--prompt must contain some text")
    parent = visible[-1].uuid if visible else None
    entry_id = _uuid.uuid5(_uuid.NAMESPACE_URL, f"foldline-request:{session_id}:{parent}:{text}")
    entry = UserEntry(
        uuid=str(entry_id),
        parent_uuid=parent,
        timestamp=now_iso(),
        session_id=session_id,
        message=UserMessage(content=text),
    )
    return [*records, entry]


def _read_tools(path: Path | None) -> list[JSONObject] | None:
    if path is None:
        return None  # foldline's own: which of them depends on the window (`offered_tools`)
    tools = loads(path.read_bytes())
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise UserError(f"{path}: expected a JSON list of tool definitions")
    return tools


def _render(plan: RequestPlan, body_only: bool) -> str:
    if body_only:
        return dumps(plan.body).decode()
    return dumps({"betas": list(plan.betas), "body": plan.body}, indent=True).decode()


@cli.command()
@click.argument("session")
@format_option
@click.option("--provider", type=click.Choice(sorted(PROVIDERS)), default="anthropic", show_default=True)
@click.option("--prompt", default=None, help=f"Next user input (default {DEFAULT_PROMPT!r} after a reply).")
@click.option("--model", default=None, help="Model name (default: the configured one).")
@click.option(
    "--system",
    "system",
    default=None,
    help="System prompt text (default: foldline's, with the environment block the session recorded).",
)
@click.option(
    "--tools",
    "tools_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSON tool list (default: foldline's built-in tools, as `foldline chat` sends them).",
)
@click.option("--thinking-budget", type=click.IntRange(1), default=None, help="Extended thinking budget.")
@click.option(
    "--context-window",
    type=click.IntRange(1024),
    default=None,
    help="The window the session runs with (as `foldline chat --context-window`): it decides the "
    "thresholds and which system prompt is sent. Default: the model's.",
)
@click.option("--body-only", is_flag=True, help="Print only the body, compact, byte for byte as sent.")
def request(
    session: str,
    fmt: Literal["auto", "foldline", "claude-code"],
    provider: str,
    prompt: str | None,
    model: str | None,
    system: str | None,
    tools_path: Path | None,
    thinking_budget: int | None,
    context_window: int | None,
    body_only: bool,
) -> None:
    """Print the JSON body (and beta headers) the next turn of SESSION would send, without sending it.

    SESSION is a foldline or Claude Code transcript file, or the id of a session under either tool's
    sessions folder (as `foldline show` takes it).
    """
    path = resolve_session(session)
    try:
        loaded = load_session(path, fmt)
        tools = _read_tools(tools_path)
    except (FoldlineError, OSError, JSONDecodeError) as exc:
        raise click.ClickException(str(exc)) from exc
    defaults = Config()
    config = Config(
        model=model or defaults.model,
        thinking_budget_tokens=thinking_budget,
        max_output_tokens=max(defaults.max_output_tokens, (thinking_budget or 0) + 1),
        context_window=context_window,
        reference_window=DESIGN_WINDOW,  # as `foldline chat` sets it
    )
    if tools is None:  # what `foldline chat` offers on this window (no Snip on a small one)
        config, offered = offered_tools(config, default_tools())
        tools = tool_specs(list(offered))
    try:
        records = _with_prompt(list(loaded.records), loaded.session_id, prompt)
        if system is None:  # as `foldline chat` would send it for this session (R4.3.2)
            static = system_prompt_for(config.window, config.full_system_prompt_min_window)
            system = with_transcript(
                with_environment(static, recorded_environment(records)),
                path,
                config.names_transcript,
            )
        plan = build_request(records, config, system, tools, PROVIDERS[provider])
    except FoldlineError as exc:
        # The session loaded, but its content cannot make a request: say which session.
        raise click.ClickException(f"{path}: {exc}") from exc
    for warning in loaded.warnings:
        click.echo(f"warning: {warning}", err=True)
    if plan.new_records:
        click.echo(f"note: sending would append {len(plan.new_records)} control record(s)", err=True)
    click.echo(_render(plan, body_only))
