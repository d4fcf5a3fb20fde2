"""`ToolRunner`: everything between "the model asked for tools" and "their results are recorded".

Per reply it builds a `ToolExecutor` with a fresh abort event (an old Ctrl-C cannot leak into a
later reply) over one read registry for the whole session (Write and Edit see the Reads of earlier
turns). It owns the permission gate, a composite tool's inner calls (recorded as virtual pairs,
R1.6), and the level-0 budget that moves oversized results to files before they are recorded (R3.0).
The engine only decides when. (A `Snip` call's boundary is appended by the compaction round's Snip
stage, `compact.snipping`.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from foldline._types import Block
from foldline.compact.budget import apply_result_budget
from foldline.compact.ctx_agent import is_typed_prompt
from foldline.compact.snipping import resolve_snip
from foldline.config import Config
from foldline.containment.checkpoints import CheckpointStore
from foldline.containment.sandbox import Sandbox
from foldline.events import CompactionEvent, NoticeEvent
from foldline.executor import ToolExecutor, run_call
from foldline.session_log import SessionLog
from foldline.timeline import (
    AssistantEntry,
    AssistantMessage,
    ProgressEntry,
    SystemEntry,
    UserEntry,
    UserMessage,
    new_uuid,
)
from foldline.tools.base import ReadRegistry, Tool, ToolContext, ToolResult, result_block
from foldline.tools.permissions import (
    AskCallback,
    PermissionMode,
    PermissionRules,
    authorize,
    read_denied_filter,
)
from foldline.tools.transaction import confirm_through

__all__ = ["ToolRunner"]


@dataclass
class ToolRunner:
    """Runs the tools of one session, under its permission rules, recording through its log."""

    log: SessionLog
    config: Config
    tools: Sequence[Tool]
    workspace: Path
    rules: PermissionRules | None = None
    permission_mode: PermissionMode = "default"
    ask: AskCallback | None = None
    """Answers "ask" decisions (R9.2); without one, a call that needs asking is refused."""
    sandbox: Sandbox | None = None
    """The OS sandbox Bash runs in (`tools.sandbox.detect_sandbox`); None: unsandboxed."""
    results_dir: Path | None = None
    """Where oversized results are saved (default `<sessions_dir>/<session_id>/tool-results`)."""
    fixed_tokens: int = 0
    """Estimated tokens of the system prompt and tools: what a result's cap leaves room beside."""
    checkpoints: CheckpointStore | None = None
    """Where each call's change is applied with its undo; None: tools write directly, no undo."""
    _read_files: ReadRegistry = field(default_factory=ReadRegistry, init=False)

    def executor(self) -> ToolExecutor:
        """A new executor for one reply's tool calls."""
        # with no rules too: Grep and Glob skip the undo store, whose files left their old names
        denied = read_denied_filter(self.rules or PermissionRules(), self.workspace)
        context = ToolContext(
            workspace=self.workspace,
            abort=anyio.Event(),
            read_files=self._read_files,
            limits=dataclasses.replace(self.config.tools, read_max_output_chars=self._read_cap()),
            read_denied=denied,
            own_output_dirs=self._own_output(),
            snip_ids=self._snip_ids,
            sandbox=self.sandbox,
            checkpoints=self.checkpoints,
            turn=self.turn(),
            confirm=confirm_through(self.ask) if self.ask is not None else None,
        )
        context = dataclasses.replace(context, run_tool=self._run_virtual(context))
        return ToolExecutor({t.name: t for t in self.tools}, context, self._permit, self._on_progress)

    def turn(self) -> int:
        """The number of prompts the user typed so far: the turn a call belongs to (`/rewind`)."""
        return sum(1 for e in self.log.timeline.snapshot() if isinstance(e, UserEntry) and is_typed_prompt(e))

    async def results(self, executor: ToolExecutor) -> list[Block]:
        """The reply's tool results, in call order, oversized ones already moved to files."""
        return self._budget(await executor.results(), executor)

    def _run_virtual(self, context: ToolContext) -> Callable[[str, Mapping[str, Any]], Awaitable[ToolResult]]:
        """R1.6: a composite tool's inner call, permission-checked and recorded as a virtual pair."""
        tools = {t.name: t for t in self.tools}

        async def run(name: str, tool_input: Mapping[str, Any]) -> ToolResult:
            block: Block = {"type": "tool_use", "id": f"toolu_virtual_{new_uuid().replace('-', '')}"}
            block |= {"name": name, "input": dict(tool_input)}
            message = AssistantMessage(id=f"virtual_{block['id']}", content=[block])
            self.log.append(self.log.entry(AssistantEntry, is_virtual=True, message=message))
            result = await run_call(tools.get(name), name, tool_input, context, self._permit)
            content = [result_block(block["id"], result)]
            self.log.append(self.log.entry(UserEntry, is_virtual=True, message=UserMessage(content=content)))
            return result

        return run

    async def _permit(self, tool: Tool, tool_input: Mapping[str, Any], ctx: ToolContext) -> str | None:
        decision = await authorize(tool.name, tool_input, ctx, self.rules, self.permission_mode, self.ask)
        return None if decision.behavior == "allow" else decision.reason

    def _budget(self, results: list[Block], executor: ToolExecutor) -> list[Block]:
        """R3.0: oversized results go to a file in the session directory before they are recorded."""
        names = {call.id: call.block.get("name", "") for call in executor.calls}
        directory = self._results_dir()
        # design.md's 50,000 characters on 200K, scaled down to the room of a smaller window
        limit = self.config.result_cap_chars(self.config.tool_result_budget_chars, self.fixed_tokens)
        kept, moved = apply_result_budget(
            results,
            names,
            limit=limit,
            directory=directory,
            exempt_limit=self._read_cap(),
            preview=min(self.config.tool_result_preview_chars, limit // 2),  # R3.0.6: the note fits too
        )
        if moved:
            chars = sum(m.chars for m in moved)
            text = f"saved {len(moved)} oversized tool result(s), {chars:,} chars, to files"
            data = {"level": "budget", "results": len(moved), "chars": chars}
            self.log.append(
                self.log.entry(SystemEntry, subtype="tool_result_budget", content=text, data=data)
            )
            self.log.events.emit(NoticeEvent(text))
            self.log.events.emit(CompactionEvent("budget", text, 0, {"results": len(moved), "chars": chars}))
            self.log.events.telemetry("compaction", text=text, **data)
        return kept

    def _read_cap(self) -> int:
        """Read's output cap for this window (R3.0): 100,000 characters on 200K, less on a smaller one."""
        return self.config.result_cap_chars(self.config.tools.read_max_output_chars, self.fixed_tokens)

    def _snip_ids(self, ids: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...], int]:
        resolution = resolve_snip(self.log.timeline.snapshot(), ids)
        return resolution.named, resolution.unknown, resolution.partners

    def _own_output(self) -> tuple[Path, ...]:
        # the saved results: their previews tell the model to Read them (R3.0); the transcript, when
        # the system prompt names it for the model to search (`TranscriptConfig.named_to_model`)
        transcript = getattr(self.log.transcript, "path", None)
        if self.config.names_transcript and isinstance(transcript, Path):
            return (self._results_dir(), transcript)
        return (self._results_dir(),)

    def _results_dir(self) -> Path:
        return self.results_dir or (
            self.config.transcript.sessions_dir / (self.log.timeline.session_id or "session") / "tool-results"
        )

    def _on_progress(self, tool_use_id: str, text: str) -> None:
        self.log.append(self.log.entry(ProgressEntry, text=text, tool_use_id=tool_use_id))
