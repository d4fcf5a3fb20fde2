"""The query engine: `submit_message` and the do-while tool loop (design.md §0, R1.1, §5, R6.1).

```
submit_message ─> run ─> step ──> compaction round ─> query (stream, retry) ─> persist reply
                          ^                                                      │
                          └───── Continue: tool results appended <── execute ────┘ tool_use?
                                 Final: end_turn / stop_sequence / refusal / max recoveries
```

Invariants:
- The timeline is the only history. Every record goes through `_append`, which also writes it to
  the transcript; nothing is edited.
- Write-ahead: the assistant message is fsynced before any tool with side effects starts, and
  tool results before the next API call. A kill at any moment resumes into a valid request and no
  tool runs twice (`QueryEngine.resume` answers dangling tool calls, it never re-runs them).
- Cancellation (Ctrl-C) records what happened before it propagates: streamed text, real results of
  finished tools, "interrupted" results for the rest, and a marker the model sees.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias

import anyio
import msgspec

from foldline._types import Block
from foldline.api.params import RequestAssembler, RequestPlan
from foldline.cachebreak import CacheBreakDetector
from foldline.compact.budget import apply_result_budget
from foldline.compact.pipeline import (
    CompactionContext,
    PreCompactHook,
    Stage,
    recover_prompt_too_long,
    run_compaction,
)
from foldline.compact.snip import short_id
from foldline.config import Config
from foldline.errors import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    PromptTooLongError,
    UnexpectedModelBehavior,
)
from foldline.events import (
    EventBus,
    NoticeEvent,
    RecordEvent,
    RetryEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolInputDeltaEvent,
)
from foldline.executor import ToolExecutor, run_call
from foldline.projection import context_tokens_of, project_view
from foldline.providers.base import Capabilities, Provider
from foldline.retry import AttemptBudget, retrying
from foldline.stream import (
    BlockStop,
    InputJSONDelta,
    MessageAccumulator,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)
from foldline.timeline import (
    AnyRecord,
    ApiErrorInfo,
    AssistantEntry,
    AssistantMessage,
    AttachmentEntry,
    ProgressEntry,
    SnipBoundary,
    SystemEntry,
    Timeline,
    Usage,
    UserEntry,
    UserMessage,
    api_filter,
    new_uuid,
    now_iso,
)
from foldline.tools.base import ReadRegistry, Tool, ToolContext, ToolResult, result_block, tool_specs
from foldline.tools.instructions import load_instruction_files
from foldline.tools.permissions import (
    AskCallback,
    PermissionMode,
    PermissionRules,
    authorize,
    read_denied_filter,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "Continue",
    "Final",
    "QueryEngine",
    "RequestBuilder",
    "RequestPlan",
    "TranscriptSink",
    "TurnResult",
    "request_builder",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are a coding agent working in the user's workspace through the tools provided. "
    "Read before you edit, keep changes small, and say what you did."
)
INTERRUPT_MARKER = "[Request interrupted by user]"
INTERRUPT_MARKER_TOOLS = "[Request interrupted by user for tool use]"
RESUME_MARKER = (
    "[The previous session stopped before these tool results were recorded; the tools may have run]"
)
CONTINUE_AFTER_MAX_TOKENS = (
    "Output token limit hit. Resume directly where you stopped, with no apology and no recap; "
    "split remaining work into smaller pieces."
)
_PTL = re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum")
_OUTPUT_TOO_LONG = re.compile(r"input length and `max_tokens` exceed context limit: (\d+) \+ (\d+) > (\d+)")
MIN_OUTPUT_TOKENS = 1_024
"""Below this much room for the reply, shrinking max_tokens is pointless: the prompt must shrink."""


class RequestBuilder(Protocol):
    """Records snapshot in, request out: projection -> normalize -> breakpoints -> params (design.md §4)."""

    def __call__(self, records: Sequence[AnyRecord], *, max_tokens: int) -> RequestPlan: ...


def request_builder(
    config: Config, system: str, tools: Sequence[Tool], capabilities: Capabilities
) -> RequestBuilder:
    """The standard builder: one `RequestAssembler` per session, so per-turn work tracks what changed."""
    assembler = RequestAssembler(config, system, tool_specs(list(tools)), capabilities)

    def build(records: Sequence[AnyRecord], *, max_tokens: int) -> RequestPlan:
        return assembler.build(records, max_tokens=max_tokens)

    return build


class TranscriptSink(Protocol):
    """Where records are persisted (a `TranscriptWriter`)."""

    def append(self, record: AnyRecord, *, sync: bool = False) -> None:
        """Persist one record; with `sync`, durably before returning."""
        ...

    def sync(self) -> None:
        """Make every record appended so far durable."""
        ...


@dataclass(frozen=True)
class Continue:
    """The step ran tools (or recovered): go round again."""


@dataclass(frozen=True)
class Final:
    """The turn is over."""

    stop_reason: str | None


StepOutcome: TypeAlias = Continue | Final


@dataclass(frozen=True)
class TurnResult:
    """How a `submit_message` turn ended."""

    stop_reason: str | None
    text: str
    """The text of the last assistant message."""
    attempts: int
    """HTTP attempts this turn used (retries included)."""


@dataclass
class _Turn:
    """Per-turn state: created by `run`, dropped when it ends (never leaks into the next turn)."""

    budget: AttemptBudget
    max_tokens: int
    recoveries: int = 0
    rounds: int = 0
    """Model replies accepted this turn (`Config.max_turns` counts these)."""
    escalated: bool = False
    ptl_recovered: bool = False
    output_shrunk: bool = False
    accumulator: MessageAccumulator | None = None
    executor: ToolExecutor | None = None
    last: AssistantEntry | None = None


@dataclass
class QueryEngine:
    """Runs a session: one entry point for every input (R1.1), one loop (R0.1)."""

    provider: Provider
    config: Config = field(default_factory=Config)
    system: str = DEFAULT_SYSTEM_PROMPT
    tools: Sequence[Tool] = ()
    workspace: Path = field(default_factory=Path.cwd)
    rules: PermissionRules | None = None
    permission_mode: PermissionMode = "default"
    ask: AskCallback | None = None
    """Answers "ask" decisions (R9.2); without one, a call that needs asking is refused."""
    stages: Sequence[Stage] = ()
    timeline: Timeline = field(default_factory=Timeline)
    transcript: TranscriptSink | None = None
    events: EventBus = field(default_factory=EventBus)
    attachment_hooks: Sequence[Callable[[str], Sequence[AttachmentEntry]]] = ()
    """Called with each prompt; their attachments are appended before it (memory, skills)."""
    pre_compact_hooks: Sequence[PreCompactHook] = ()
    instructions: bool = True
    """Inject FOLDLINE.md / CLAUDE.md from the workspace as attachments on a session's first prompt (R9.3)."""
    tail_hooks: Sequence[Callable[[QueryEngine], Any]] = ()
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], Any] = asyncio.sleep
    session_dir: Path | None = None
    """Where this session keeps files beside its transcript (oversized tool results, R3.0);
    default `<sessions_dir>/<session_id>/`."""
    build_request: RequestBuilder | None = None
    """Defaults to `request_builder(config, system, tools, provider.capabilities)`."""
    _turn: _Turn | None = field(default=None, init=False)
    _read_files: ReadRegistry = field(default_factory=ReadRegistry, init=False)
    _cache_watch: CacheBreakDetector = field(default_factory=CacheBreakDetector, init=False)
    """A new engine (a resume) starts without a baseline: R7.4's reset on resume."""
    _tail: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        if self.build_request is None:
            self.build_request = request_builder(
                self.config, self.system, self.tools, self.provider.capabilities
            )

    # --- entry point -----------------------------------------------------------------------------

    async def submit_message(self, text: str) -> TurnResult:
        """Append the user's message (timeline, then transcript) and run the loop on it (R1.1)."""
        if self.instructions and not any(
            isinstance(r, AttachmentEntry) and r.attachment_type == "instructions" for r in self.timeline
        ):
            for attachment in load_instruction_files(self.workspace, session_id=self.timeline.session_id):
                self._append(msgspec.structs.replace(attachment, parent_uuid=self.timeline.last_uuid))
        for hook in self.attachment_hooks:
            for attachment in hook(text):
                self._append(attachment)
        self._append(self._entry(UserEntry, message=UserMessage(content=text)))
        return await self.run()

    async def run(self) -> TurnResult:
        """The do-while loop (R0.1): step until a final outcome; record any interruption."""
        retry = self.config.retry
        self._turn = turn = _Turn(AttemptBudget(retry.max_retries_per_turn), self.config.max_output_tokens)
        try:
            while True:
                outcome = await self.step()
                if isinstance(outcome, Final):
                    break
        except asyncio.CancelledError:
            await self._record_interruption(turn)
            raise
        except (ModelAPIError, PromptTooLongError) as e:
            self._record_api_error(e)
            raise
        finally:
            self._turn = None
            self._start_tail()
        text = "".join(b.get("text", "") for b in turn.last.message.content) if turn.last else ""
        return TurnResult(outcome.stop_reason, text, turn.budget.used)

    async def step(self) -> StepOutcome:
        """One round: compaction, one model reply, and the tools it asks for."""
        turn = self._require_turn()
        await self._compact()
        accumulator, executor = await self.query(turn)
        self._watch_cache(accumulator.usage)
        stop_reason = accumulator.stop_reason
        if (
            stop_reason == "max_tokens"
            and not turn.escalated
            and not turn.output_shrunk  # the context has no room for a larger reply
            and turn.max_tokens < self.config.escalated_max_output_tokens
        ):
            executor.discard()  # R5.5: the same request again with room to finish
            turn.escalated, turn.max_tokens = True, self.config.escalated_max_output_tokens
            self.events.emit(NoticeEvent(f"output limit hit; retrying with max_tokens={turn.max_tokens}"))
            return Continue()
        if accumulator.incomplete and stop_reason != "max_tokens":
            raise UnexpectedModelBehavior("a tool_use block's input was not valid JSON")
        entry = self._entry(AssistantEntry, message=accumulator.message())
        turn.last, turn.accumulator = entry, None
        turn.rounds += 1
        self._append(entry, sync=bool(executor.calls))
        if executor.calls:
            results = self._budget_results(await executor.results(), executor)
            turn.executor = None
            self._append(self._entry(UserEntry, message=UserMessage(content=results)))
            self._apply_snips(executor)
            return self._max_turns_reached(turn) or Continue()
        if stop_reason == "max_tokens" and turn.recoveries < self.config.max_output_recoveries:
            turn.recoveries += 1  # R5.5/R5.8: continue the message in a new reply
            self._append(
                self._entry(UserEntry, is_meta=True, message=UserMessage(content=CONTINUE_AFTER_MAX_TOKENS))
            )
            return self._max_turns_reached(turn) or Continue()
        return Final(stop_reason)

    def _max_turns_reached(self, turn: _Turn) -> Final | None:
        """Like Claude Code's `--max-turns`: stop once the tool results are recorded, so the
        timeline ends on a user message and the next prompt builds a valid request."""
        limit = self.config.max_turns
        if limit is None or turn.rounds < limit:
            return None
        text = f"Reached maximum number of turns ({limit})"
        self._append(self._entry(SystemEntry, subtype="max_turns", content=text, level="warning"))
        self.events.emit(NoticeEvent(text, "warning"))
        return Final("max_turns")

    # --- query: one model reply, streamed, with the one retry layer ------------------------------

    async def query(self, turn: _Turn) -> tuple[MessageAccumulator, ToolExecutor]:
        """Build the request, stream the reply (starting safe tools early), retry transient failures."""
        plan = self._plan(turn)
        self._sync()  # R2 fsync policy: everything the request is built from is durable first

        async def attempt() -> tuple[MessageAccumulator, ToolExecutor]:
            accumulator, executor = MessageAccumulator(), self._executor()
            turn.accumulator, turn.executor = accumulator, executor
            try:
                async for event in self._watch(self.provider.stream(plan.body, betas=plan.betas)):
                    self._on_stream_event(event, accumulator, executor)
            except asyncio.CancelledError:
                raise  # the interruption handler still needs what this attempt started
            except BaseException:
                executor.discard()  # a failed attempt's speculative reads are thrown away with it
                raise
            return accumulator, executor

        def on_retry(attempt_no: int, delay: float, reason: str) -> None:
            self.events.emit(RetryEvent(attempt_no, delay, reason))
            self.events.telemetry("retry", attempt=attempt_no, delay=delay, reason=reason)

        try:
            return await retrying(
                attempt, policy=self.config.retry, budget=turn.budget, on_retry=on_retry, sleep=self.sleep
            )
        except ModelHTTPError as e:
            if self._shrink_output(turn, e):
                return await self.query(turn)
            if not e.prompt_too_long or turn.ptl_recovered:
                raise
            turn.ptl_recovered = True
            await self._recover_prompt_too_long(e)
            return await self.query(turn)

    def _shrink_output(self, turn: _Turn, error: ModelHTTPError) -> bool:
        """Input fits but input + max_tokens does not (A39): ask for less output, once.

        Returns False when there is no such error, or the room left is under `MIN_OUTPUT_TOKENS`
        (then the prompt itself must shrink: the prompt-too-long chain takes over).
        """
        match = _OUTPUT_TOO_LONG.search(error.message)
        if match is None or turn.output_shrunk:
            return False
        prompt, limit = int(match[1]), int(match[3])
        room = limit - prompt
        if room < MIN_OUTPUT_TOKENS:
            return False
        turn.output_shrunk, turn.max_tokens = True, room
        self.events.emit(NoticeEvent(f"context nearly full: this reply is limited to {room:,} tokens"))
        return True

    def _plan(self, turn: _Turn) -> RequestPlan:
        assert self.build_request is not None
        plan = self.build_request(self.timeline.snapshot(), max_tokens=turn.max_tokens)
        for record in plan.new_records:
            self._append(record)
        self._cache_watch.before_request(plan.prompt_state, plan.body)
        return plan

    def _watch_cache(self, usage: Usage) -> None:
        """R7.3: a confirmed cache break becomes a visible notice with its likely cause."""
        report = self._cache_watch.after_response(usage)
        if report is not None:
            text = report.describe()
            self._append(self._entry(SystemEntry, subtype="cache_break", content=text, level="warning"))
            self.events.emit(NoticeEvent(text, "warning"))
            self.events.telemetry(
                "cache_break", before=report.before, after=report.after, changes=report.changes
            )

    def _on_stream_event(
        self, event: StreamEvent, accumulator: MessageAccumulator, executor: ToolExecutor
    ) -> None:
        accumulator.feed(event)
        if isinstance(event, TextDelta):
            self.events.emit(TextDeltaEvent(event.text))
        elif isinstance(event, ThinkingDelta):
            self.events.emit(ThinkingDeltaEvent(event.thinking))
        elif isinstance(event, InputJSONDelta):
            self.events.emit(ToolInputDeltaEvent(event.index, event.partial_json))
        elif isinstance(event, BlockStop):
            block = accumulator.blocks[event.index]
            if block.get("type") == "tool_use" and event.index not in accumulator.incomplete:
                executor.submit(block)

    async def _watch(self, stream: AsyncIterator[StreamEvent]) -> AsyncIterator[StreamEvent]:
        """R5.7: a stream that produces no event for `stream_idle_timeout_s` is aborted (and retried)."""
        idle = self.config.retry.stream_idle_timeout_s
        try:
            while True:
                try:
                    async with asyncio.timeout(idle):
                        event = await anext(stream)
                except StopAsyncIteration:
                    return
                except TimeoutError as e:
                    raise ModelConnectionError(
                        self.config.model, f"stream idle for {idle:g} s; aborted"
                    ) from e
                yield event
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    # --- compaction and limits ------------------------------------------------------------------

    def _compaction_context(self) -> CompactionContext:
        records = self.timeline.snapshot()
        return CompactionContext(
            records,
            self.config,
            self.provider.capabilities,
            context_tokens_of(records),
            self.clock(),
            tuple(self.pre_compact_hooks),
        )

    async def _compact(self) -> None:
        """The compaction round before every API call (R0.1), then the blocking limit (R3.4.1)."""
        for record in await run_compaction(self.stages, self._compaction_context()):
            self._append(record)
            self._cache_watch.reset_baseline()  # R7.4: a compaction's drop is expected
        ctx = self._compaction_context()
        if ctx.tokens > self.config.blocking_limit:
            await self._recover_prompt_too_long(None, gap=ctx.tokens - self.config.blocking_limit)

    async def _recover_prompt_too_long(self, error: ModelHTTPError | None, gap: int | None = None) -> None:
        """R5.4: ask the levels (drain collapse, reactive compact); else tell the user to compact."""
        match = _PTL.search(error.message) if error else None
        if match:
            gap = int(match[1]) - int(match[2])
        added = await recover_prompt_too_long(self.stages, self._compaction_context(), gap)
        if not added:
            detail = error.message if error else f"the conversation is {gap} tokens over the blocking limit"
            raise PromptTooLongError(f"{detail}; nothing more could be compacted automatically: run /compact")
        for record in added:
            self._append(record)
        self._cache_watch.reset_baseline()

    # --- tools ---------------------------------------------------------------------------------

    def _executor(self) -> ToolExecutor:
        # A fresh abort event per reply, so an old Ctrl-C cannot leak into a later turn; one read
        # registry per session, so Write/Edit see the Reads of earlier turns.
        context = ToolContext(
            workspace=self.workspace,
            abort=anyio.Event(),
            read_files=self._read_files,
            limits=self.config.tools,
            read_denied=read_denied_filter(self.rules, self.workspace) if self.rules else _nothing_denied,
        )
        context = dataclasses.replace(context, run_tool=self._run_virtual(context))
        return ToolExecutor({t.name: t for t in self.tools}, context, self._permit, self._on_progress)

    def _run_virtual(self, context: ToolContext) -> Callable[[str, Mapping[str, Any]], Awaitable[ToolResult]]:
        """R1.6: a composite tool's inner call, permission-checked and recorded as a virtual pair."""
        tools = {t.name: t for t in self.tools}

        async def run(name: str, tool_input: Mapping[str, Any]) -> ToolResult:
            block: Block = {"type": "tool_use", "id": f"toolu_virtual_{new_uuid().replace('-', '')}"}
            block |= {"name": name, "input": dict(tool_input)}
            message = AssistantMessage(id=f"virtual_{block['id']}", content=[block])
            self._append(self._entry(AssistantEntry, is_virtual=True, message=message))
            result = await run_call(tools.get(name), name, tool_input, context, self._permit)
            content = [result_block(block["id"], result)]
            self._append(self._entry(UserEntry, is_virtual=True, message=UserMessage(content=content)))
            return result

        return run

    async def _permit(self, tool: Tool, tool_input: Mapping[str, Any], ctx: ToolContext) -> str | None:
        decision = await authorize(tool.name, tool_input, ctx, self.rules, self.permission_mode, self.ask)
        return None if decision.behavior == "allow" else decision.reason

    def _budget_results(self, results: list[Block], executor: ToolExecutor) -> list[Block]:
        """R3.0: oversized results go to a file in the session directory before they are recorded."""
        names = {call.id: call.block.get("name", "") for call in executor.calls}
        directory = self.session_dir or self.config.transcript.sessions_dir / (
            self.timeline.session_id or "session"
        )
        kept, moved = apply_result_budget(
            results, names, limit=self.config.tool_result_budget_chars, directory=directory / "tool-results"
        )
        if moved:
            chars = sum(m.chars for m in moved)
            text = f"saved {len(moved)} oversized tool result(s), {chars:,} chars, to files"
            self._append(self._entry(SystemEntry, subtype="tool_result_budget", content=text))
            self.events.emit(NoticeEvent(text))
        return kept

    def _apply_snips(self, executor: ToolExecutor) -> None:
        """R3.1.2: a Snip call removes entries from the API view by appending a boundary."""
        by_short = {short_id(e.uuid): e.uuid for e in self.timeline.entries()}
        for call in executor.calls:
            structured = call.result.structured if call.result else None
            ids = structured.get("snip_ids") if structured else None
            if call.tool is not None and call.tool.name == "Snip" and ids:
                removed = tuple(by_short[i] for i in ids if i in by_short)
                if removed:
                    self._append(SnipBoundary(uuid=new_uuid(), timestamp=now_iso(), removed_uuids=removed))
                    self._cache_watch.reset_baseline()

    def _on_progress(self, tool_use_id: str, text: str) -> None:
        self._append(self._entry(ProgressEntry, text=text, tool_use_id=tool_use_id))

    # --- interruption and resume ------------------------------------------------------------------

    async def _record_interruption(self, turn: _Turn) -> None:
        """R5.3: leave a transcript that resumes cleanly, and a marker the model sees."""
        content: list[Block] = []
        if turn.accumulator is not None and turn.accumulator.started:
            message = turn.accumulator.message(complete_only=True)
            if message.content:
                self._append(self._entry(AssistantEntry, message=message), sync=True)
        if turn.executor is not None and turn.executor.calls:
            content = await turn.executor.interrupt()
        marker = INTERRUPT_MARKER_TOOLS if content else INTERRUPT_MARKER
        content.append({"type": "text", "text": marker})
        self._append(
            self._entry(UserEntry, is_meta=not content[:-1], message=UserMessage(content=content)), sync=True
        )

    def _record_api_error(self, error: ModelAPIError | PromptTooLongError) -> None:
        """A synthetic assistant entry saying the request failed: shown, never sent (S0), read by S2."""
        status = error.status if isinstance(error, ModelHTTPError) else None
        error_type = error.error_type if isinstance(error, ModelHTTPError) else type(error).__name__
        text = error.message if isinstance(error, ModelAPIError) else str(error)
        message = AssistantMessage(
            id=new_uuid(), model="<synthetic>", content=[{"type": "text", "text": text}]
        )
        info = ApiErrorInfo(status=status, error_type=error_type, message=text)
        self._append(
            self._entry(AssistantEntry, message=message, is_api_error_message=True, api_error=info), sync=True
        )

    def answer_dangling_tool_calls(self) -> None:
        """After a resume: give every tool call without a result a recorded "may have run" result.

        Called instead of re-running them: a tool whose result was never recorded may still have
        had its effect, and running it again could do the damage twice.
        """
        entries = api_filter(project_view(self.timeline.snapshot()))
        answered = {
            b.get("tool_use_id")
            for e in entries
            if isinstance(e, UserEntry) and isinstance(e.message.content, list)
            for b in e.message.content
        }
        last = next((e for e in reversed(entries) if isinstance(e, AssistantEntry)), None)
        if last is None:
            return
        dangling = [
            b["id"] for b in last.message.content if b.get("type") == "tool_use" and b["id"] not in answered
        ]
        if dangling:
            results: list[Block] = [
                {"type": "tool_result", "tool_use_id": i, "is_error": True, "content": RESUME_MARKER}
                for i in dangling
            ]
            self._append(self._entry(UserEntry, message=UserMessage(content=results)), sync=True)

    # --- background tail (R6.1) ---------------------------------------------------------------------

    def _start_tail(self) -> None:
        task = asyncio.ensure_future(self._run_tail())
        self._tail.add(task)
        task.add_done_callback(self._tail.discard)

    async def _run_tail(self) -> None:
        self._sync()
        for hook in self.tail_hooks:
            try:
                result = hook(self)
                if asyncio.iscoroutine(result):
                    await result
            except Exception as e:  # the tail never breaks the session; it says what failed
                self.events.emit(NoticeEvent(f"background task {hook!r} failed: {e}", "warning"))
        self.events.telemetry("turn_end", records=len(self.timeline))

    async def drain(self) -> None:
        """Wait for background work (tests, shutdown); normal use never needs to."""
        while self._tail:
            await asyncio.gather(*list(self._tail))

    async def aclose(self) -> None:
        """Shut down: finish the background tail, flush the transcript, close the provider."""
        await self.drain()
        self._sync()
        aclose = getattr(self.provider, "aclose", None)
        if aclose is not None:
            await aclose()

    # --- plumbing ---------------------------------------------------------------------------------

    def _entry(self, cls: Any, **fields: Any) -> Any:
        return cls(
            uuid=new_uuid(),
            parent_uuid=self.timeline.last_uuid,
            timestamp=now_iso(),
            session_id=self.timeline.session_id,
            **fields,
        )

    def _append(self, record: AnyRecord, *, sync: bool = False) -> None:
        self.timeline.append(record)
        if self.transcript is not None:
            self.transcript.append(record, sync=sync)
        self.events.emit(RecordEvent(record))

    def _sync(self) -> None:
        if self.transcript is not None:
            self.transcript.sync()

    def _require_turn(self) -> _Turn:
        if self._turn is None:
            raise RuntimeError("step() runs inside run(); call submit_message()")
        return self._turn


def _nothing_denied(path: Path) -> bool:
    return False
