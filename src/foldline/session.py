"""`Session`: one agent session from open to close, the way chat, the demo and tests all need it.

Opening a session is four steps that must happen in order and be undone in reverse: open or resume
the transcript (taking its single-writer lock), rebuild the timeline from it, answer tool calls
whose results never reached the disk (so nothing runs twice), and build the engine over both.
Closing drains the engine's background tail before the transcript closes, so a tail that appends
still has somewhere to write; after the last write it leaves the normalized head of the request
beside the transcript (`api.frozen_head`), which the next resume takes back when the transcript
still starts as it did, so a long session's first request is not normalized from scratch.
`Session` owns exactly that; the engine owns the loop.

Invariants:
- A session never writes beside a file foldline does not own: a Claude Code transcript is refused
  here and imported into a new foldline transcript with `foldline.sessions.import_claude_code_session`.
- Damage found on resume is never silent: every notice goes to `on_notice` (and `Session.notices`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Self

from foldline.api.frozen_head import HEAD_FILE, load_head, save_head
from foldline.compact.levels import install_levels
from foldline.config import Config, FsyncPolicy
from foldline.containment.checkpoints import CheckpointStore
from foldline.containment.sandbox import Sandbox
from foldline.engine import AssemblingBuilder, QueryEngine, TurnResult
from foldline.errors import UserError
from foldline.events import UIEvent
from foldline.providers.base import Provider
from foldline.sessions import detect_format
from foldline.system_prompt import (
    ENVIRONMENT_SUBTYPE,
    environment_block,
    recorded_environment,
    system_prompt_for,
    with_environment,
    with_transcript,
)
from foldline.timeline import SystemEntry
from foldline.tools.base import Tool
from foldline.tools.permissions import AskCallback, PermissionMode, PermissionRules
from foldline.transcript import TranscriptWriter, open_session

__all__ = ["Session", "offered_tools"]


@dataclass
class Session:
    """An open session: its engine and the transcript it appends to. Use as an async context manager.

    ```python
    async with Session.open("session.jsonl", provider=provider, workspace=Path.cwd()) as session:
        result = await session.submit_message("Add a docstring to calc.py")
    ```
    """

    engine: QueryEngine
    transcript: TranscriptWriter
    notices: tuple[str, ...] = ()
    """What resume found and skipped (damaged lines, a torn tail moved aside)."""
    _closed: bool = field(default=False, init=False, repr=False)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        provider: Provider,
        workspace: Path | None = None,
        session_id: str | None = None,
        config: Config | None = None,
        system: str | None = None,
        tools: Sequence[Tool] = (),
        rules: PermissionRules | None = None,
        permission_mode: PermissionMode = "default",
        ask: AskCallback | None = None,
        sandbox: Sandbox | None = None,
        fsync: FsyncPolicy | None = None,
        on_event: Callable[[UIEvent], None] | None = None,
        on_notice: Callable[[str], None] | None = None,
        levels: bool = True,
        clock: Callable[[], float] | None = None,
        environment: bool | str = True,
        undo: bool = True,
    ) -> Session:
        """Resume the foldline transcript at `path`, or create it; then build the engine over it.

        Args:
            path: The transcript. Created (with its folders) when missing.
            provider: Who answers; closed with the session.
            workspace: Where tools act (default: the current directory); recorded in a new header.
            session_id: Names a new session (default: the file's stem); a resumed one keeps its own.
            config, system, tools, rules, permission_mode, ask, sandbox: passed to `QueryEngine`;
                `system` defaults to foldline's prompt for the window (`system_prompt_for`).
            fsync: The transcript's fsync policy (default: `TranscriptConfig().fsync`).
            on_event: Subscribed to the engine's UI events before anything is appended.
            on_notice: Called with each line of damage found on resume.
            levels: Install every compaction level (`compact.levels.install_levels`); False keeps
                the engine's bare round (budget, Snip, Microcompact) for callers that add their own.
            clock: The engine's clock, epoch seconds (default: the wall clock); a simulated session
                passes a virtual one so that time passes between its turns.
            environment: A new session gathers the environment block (directory, date, platform,
                git) once, records it, and appends it to `system` (`foldline.system_prompt`); a
                string is the block itself, recorded instead of gathering one (a simulated session
                states a deterministic one). A resumed session uses the block it recorded, if any,
                whatever this says.
            undo: Apply each tool call's change through the workspace's checkpoint store
                (`containment.checkpoints`), so `/undo` and `/rewind` take it back; an apply a kill
                cut off is finished first (said as a notice).

        Raises:
            UserError: `path` is another tool's transcript (import it first).
            TranscriptError: the file cannot be read or is held by another process.
        """
        file = Path(path)
        if file.is_file() and detect_format(file) != "foldline":
            raise UserError(
                f"{file}: a Claude Code transcript; foldline never appends to another tool's file. "
                "Import it with foldline.sessions.import_claude_code_session (or `foldline chat --resume`)"
            )
        workspace = (workspace or Path.cwd()).resolve()
        config, tools = offered_tools(config or Config(), tools)
        if system is None:
            system = system_prompt_for(config.window, config.full_system_prompt_min_window)
        notices: list[str] = []

        def notice(text: str) -> None:
            notices.append(text)
            if on_notice is not None:
                on_notice(text)

        writer, timeline = open_session(
            file, session_id=session_id or file.stem, cwd=str(workspace), fsync=fsync, on_notice=notice
        )
        try:
            checkpoints = CheckpointStore(workspace, timeline.session_id) if undo else None
            if checkpoints is not None:
                for line in checkpoints.recover():
                    notice(line)
            env = recorded_environment(timeline.snapshot())
            new_env = None
            if env is None and environment and not timeline.snapshot():  # a new session
                gathered = environment if isinstance(environment, str) else None
                env = new_env = gathered or environment_block(workspace, limits=config.tools)
            engine = QueryEngine(
                provider=provider,
                config=config,
                system=with_transcript(with_environment(system, env), file, config.names_transcript),
                tools=tools,
                workspace=workspace,
                rules=rules,
                permission_mode=permission_mode,
                ask=ask,
                sandbox=sandbox,
                checkpoints=checkpoints,
                timeline=timeline,
                transcript=writer,
                session_dir=file.with_suffix(""),  # beside the transcript, as Claude Code keeps subagents
                clock=clock if clock is not None else time.time,
            )
            if new_env is not None:  # recorded before anything else, so a resume finds it
                engine.log.append(engine.log.entry(SystemEntry, subtype=ENVIRONMENT_SUBTYPE, content=new_env))
            if levels:
                install_levels(engine)
            if isinstance(engine.build_request, AssemblingBuilder) and engine.session_dir is not None:
                # what the last close normalized, if the transcript still starts as it did then
                load_head(engine.build_request.assembler, file, engine.session_dir)
            if on_event is not None:
                engine.events.subscribers.append(on_event)
            engine.answer_dangling_tool_calls()
        except BaseException:
            writer.close()
            raise
        return cls(engine, writer, tuple(notices))

    @property
    def path(self) -> Path:
        """The transcript file."""
        return self.transcript.path

    @property
    def session_id(self) -> str:
        """The session's id, as its transcript header records it."""
        return self.engine.timeline.session_id

    async def submit_message(self, text: str) -> TurnResult:
        """Run one user turn (see `QueryEngine.submit_message`)."""
        return await self.engine.submit_message(text)

    async def aclose(self) -> None:
        """Drain the background tail and close the provider, then the transcript (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.engine.aclose()
        finally:
            self.transcript.close()
            self._keep_head()

    def _keep_head(self) -> None:
        """Leave the normalized head beside the transcript for the next resume (`api.frozen_head`)."""
        builder = self.engine.build_request
        if not isinstance(builder, AssemblingBuilder) or self.engine.session_dir is None:
            return
        try:
            if self.transcript.poisoned:  # records the file lacks: no head may claim to describe it
                (self.engine.session_dir / HEAD_FILE).unlink(missing_ok=True)
            else:
                save_head(builder.assembler, self.path, self.engine.session_dir, len(self.engine.timeline))
        except OSError:
            pass  # only a cache: the next resume normalizes from scratch, as it would without it

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def offered_tools(config: Config, tools: Sequence[Tool]) -> tuple[Config, Sequence[Tool]]:
    """Snip's `[id:…]` tags and its nudge only where the model has the Snip tool to act on them (a
    session opened without it, `tools=()` or a custom set, must not advertise a tool it cannot call);
    no Snip tool on a window below `Config.snip_min_window`; and the other way round, with Snip off
    (`Config.snip_enabled`), no Snip tool whose tags the requests do not carry."""
    if config.window < config.snip_min_window:
        config = replace(config, snip_enabled=False)
    has_snip = any(tool.name == "Snip" for tool in tools)
    if config.snip_enabled and not has_snip:
        return replace(config, snip_enabled=False), tools
    if not config.snip_enabled and has_snip:
        return config, [tool for tool in tools if tool.name != "Snip"]
    return config, tools
