"""The streaming tool executor (R5.2): tools start as their blocks complete, results come back in order.

Concurrency-safe tools (Read, Grep, Glob) start the moment their `tool_use` block completes and run
in parallel. A tool with side effects starts only after `release()`, which the engine calls once the
assistant message that asks for it is durably in the transcript (write-ahead: a crash can never leave
a side effect whose intent is not on disk), and it runs alone: it waits for every earlier call, and
every later call waits for it. If the stream then fails and is retried, `discard()` cancels the
speculative reads, which had no side effects.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from foldline._types import MALFORMED_TOOL_CALL, Block
from foldline.tools.base import Tool, ToolContext, ToolResult, input_error, result_block

__all__ = [
    "INTERRUPTED_BEFORE_START",
    "INTERRUPTED_WHILE_RUNNING",
    "PermissionGate",
    "ToolCall",
    "ToolExecutor",
    "malformed_call_message",
    "run_call",
]

INTERRUPTED_BEFORE_START = "[Request interrupted by user: this tool call was never started]"
INTERRUPTED_WHILE_RUNNING = (
    "[Request interrupted by user: this tool was stopped while running; it may have had effects]"
)


class PermissionGate(Protocol):
    """Decides whether a call may run: `None` to allow, or the reason it may not."""

    def __call__(
        self, tool: Tool, tool_input: Mapping[str, Any], ctx: ToolContext
    ) -> Awaitable[str | None]: ...


@dataclass
class ToolCall:
    """One `tool_use` block and what became of it."""

    block: Block
    tool: Tool | None
    task: asyncio.Task[ToolResult] | None = None
    started: bool = False
    result: ToolResult | None = None

    @property
    def id(self) -> str:
        return str(self.block["id"])


@dataclass
class ToolExecutor:
    """Runs the tool calls of one assistant message."""

    tools: Mapping[str, Tool]
    context: ToolContext
    permit: PermissionGate
    on_progress: Callable[[str, str], None] = lambda tool_use_id, text: None
    calls: list[ToolCall] = field(default_factory=list)
    released: bool = False

    def submit(self, block: Block) -> None:
        """A `tool_use` block completed: start it now if it is safe to, else queue it."""
        call = ToolCall(block=block, tool=self.tools.get(str(block.get("name"))))
        # A read queued behind a write must see the write: it waits for release like the write.
        behind_a_write = any(_exclusive(c) for c in self.calls)
        self.calls.append(call)
        if self.released or (not _exclusive(call) and not behind_a_write):
            self._start(call)

    def release(self) -> None:
        """The assistant message is persisted: start every queued call."""
        self.released = True
        for call in self.calls:
            if call.task is None:
                self._start(call)

    async def results(self) -> list[Block]:
        """Wait for every call; `tool_result` blocks in tool_use order."""
        self.release()
        for call in self.calls:
            assert call.task is not None
            call.result = await call.task
        return [result_block(call.id, call.result) for call in self.calls if call.result is not None]

    def discard(self) -> None:
        """Cancel everything (the message they belong to was thrown away)."""
        for call in self.calls:
            if call.task is not None:
                call.task.cancel()

    async def interrupt(self) -> list[Block]:
        """Stop every call; results for all of them, finished ones real, the rest marked interrupted."""
        self.context.abort.set()
        self.discard()
        tasks = [c.task for c in self.calls if c.task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)
        blocks = []
        for call in self.calls:
            task = call.task
            if task is not None and task.done() and not task.cancelled() and task.exception() is None:
                result = task.result()
            else:
                text = INTERRUPTED_WHILE_RUNNING if call.started else INTERRUPTED_BEFORE_START
                result = ToolResult(content=text, is_error=True)
            blocks.append(result_block(call.id, result))
        return blocks

    def _start(self, call: ToolCall) -> None:
        before = [c.task for c in self.calls[: self.calls.index(call)] if c.task is not None]
        exclusive = call.tool is None or not call.tool.concurrency_safe
        waits = before if exclusive else [c.task for c in self.calls if c.task in before and _exclusive(c)]
        call.task = asyncio.ensure_future(self._run(call, waits))

    async def _run(self, call: ToolCall, waits: Sequence[asyncio.Task[ToolResult]]) -> ToolResult:
        if waits:
            await asyncio.wait(waits)
        context = dataclasses.replace(self.context, progress=lambda text: self.on_progress(call.id, text))

        def started() -> None:
            call.started = True

        return await run_call(
            call.tool, call.block.get("name"), call.block.get("input") or {}, context, self.permit, started
        )


async def run_call(
    tool: Tool | None,
    name: object,
    tool_input: Mapping[str, Any],
    context: ToolContext,
    permit: PermissionGate,
    on_start: Callable[[], None] = lambda: None,
) -> ToolResult:
    """One call, top-level or inside a composite tool: lookup, schema, permission, then the tool.

    Every failure becomes an error result the model reads; `on_start` fires just before the tool
    itself runs (from then on its effects may have happened).
    """
    if tool is None and name == MALFORMED_TOOL_CALL:
        return ToolResult(content=malformed_call_message(tool_input), is_error=True)
    if tool is None:
        return ToolResult(content=f"<tool_use_error>No such tool: {name}</tool_use_error>", is_error=True)
    invalid = input_error(tool, tool_input)
    if invalid is not None:  # a malformed call is the model's mistake, not a permission matter
        return ToolResult(content=invalid, is_error=True)
    precheck = getattr(tool, "precheck", None)  # optional: not every `Tool` has one
    doomed = precheck(tool_input, context) if precheck is not None else None
    if doomed is not None:  # never ask the person to approve a call that cannot succeed
        return ToolResult(content=doomed, is_error=True)
    refusal = await permit(tool, tool_input, context)
    if refusal is not None:
        return ToolResult(content=f"Permission denied: {refusal}", is_error=True)
    on_start()
    try:
        return await tool.run(tool_input, context)
    except asyncio.CancelledError:
        raise
    except Exception as e:  # a tool bug must not kill the loop: the model gets the error
        return ToolResult(
            content=f"<tool_use_error>{tool.name} failed: {e!r}</tool_use_error>", is_error=True
        )


def malformed_call_message(tool_input: Mapping[str, Any]) -> str:
    """The error result of a call the model botched (the server names it `MALFORMED_TOOL_CALL`)."""
    error = str(tool_input.get("error") or "the tool call could not be read")
    return (
        f"<tool_use_error>Your tool call could not be read: {error}. Write each call as "
        '<tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call> with valid JSON.'
        "</tool_use_error>"
    )


def _exclusive(call: ToolCall) -> bool:
    return call.tool is None or not call.tool.concurrency_safe
