"""The query engine: `submit_message` and the do-while tool loop (design.md §0, R1.1, §5, R6.1).

```
submit_message ─> run ─> step ──> compaction round ─> query (stream, retry) ─> decide
                          ^                                                      │
                          ├── Continue: reply recorded, tools run, results appended
                          └── Recover: request changed (more/less output room, compaction)
                                 Final: end_turn / stop_sequence / refusal / max_turns
```

What happens after each model call is decided in one place, `foldline.turn.decide`; this module
carries decisions out.

Invariants:
- The timeline is the only history. Every record goes through `SessionLog.append`, which also writes
  it to the transcript; nothing is edited.
- Write-ahead: the assistant message is fsynced before any tool with side effects starts, and
  tool results before the next API call. A kill at any moment resumes into a valid request and no
  tool runs twice (`answer_dangling_tool_calls` answers them on resume, it never re-runs them).
- Cancellation (Ctrl-C) records what happened before it propagates: streamed text, real results of
  finished tools, "interrupted" results for the rest, and a marker the model sees.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, assert_never

import msgspec

from foldline._types import Block
from foldline.api.params import RequestAssembler, RequestPlan
from foldline.cachebreak import CacheBreakDetector
from foldline.compact.ctx_agent import is_typed_prompt
from foldline.compact.pipeline import PreCompactHook, Stage
from foldline.compact.rounds import default_stages
from foldline.compact.window import ContextWindow
from foldline.config import Config
from foldline.containment.checkpoints import CheckpointStore, Undone
from foldline.containment.sandbox import Sandbox
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
    RetryEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolInputDeltaEvent,
)
from foldline.executor import ToolExecutor
from foldline.projection import project_view
from foldline.providers.base import Capabilities, Provider
from foldline.retry import AttemptBudget, idle_watchdog, retrying
from foldline.session_log import SessionLog, TranscriptSink
from foldline.stream import (
    BlockStop,
    InputJSONDelta,
    MessageAccumulator,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)
from foldline.system_prompt import DEFAULT_SYSTEM_PROMPT
from foldline.timeline import (
    AnyRecord,
    ApiErrorInfo,
    AssistantEntry,
    AssistantMessage,
    AttachmentEntry,
    SystemEntry,
    Timeline,
    Usage,
    UserEntry,
    UserMessage,
    api_filter,
    new_uuid,
)
from foldline.tokens import estimate_fixed
from foldline.tool_runner import ToolRunner
from foldline.tools.base import Tool, tool_specs
from foldline.tools.instructions import load_instruction_files
from foldline.tools.permissions import (
    AskCallback,
    PermissionMode,
    PermissionRules,
)
from foldline.turn import (
    Continue,
    Decision,
    Failure,
    Final,
    GiveUp,
    Outcome,
    Recover,
    Reply,
    TurnState,
    advance,
    decide,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "AssemblingBuilder",
    "QueryEngine",
    "RequestBuilder",
    "RequestPlan",
    "TranscriptSink",
    "TurnResult",
    "request_builder",
]

INTERRUPT_MARKER = "[Request interrupted by user]"
INTERRUPT_MARKER_TOOLS = "[Request interrupted by user for tool use]"
RESUME_MARKER = (
    "[The previous session stopped before these tool results were recorded; the tools may have run]"
)
CONTINUE_AFTER_MAX_TOKENS = (
    "Output token limit hit. Resume directly where you stopped, with no apology and no recap; "
    "split remaining work into smaller pieces."
)


class RequestBuilder(Protocol):
    """Records snapshot in, request out: projection -> normalize -> breakpoints -> params (design.md §4)."""

    def __call__(
        self, records: Sequence[AnyRecord], *, max_tokens: int, new_edits: Sequence[Block] = ()
    ) -> RequestPlan: ...


@dataclass(frozen=True)
class AssemblingBuilder:
    """The standard `RequestBuilder`: one `RequestAssembler` per session, so per-turn work tracks what
    changed. `assembler` is public so a `Session` can keep its frozen head across a resume."""

    assembler: RequestAssembler

    def __call__(
        self, records: Sequence[AnyRecord], *, max_tokens: int, new_edits: Sequence[Block] = ()
    ) -> RequestPlan:
        return self.assembler.build(records, max_tokens=max_tokens, new_edits=new_edits)


def request_builder(
    config: Config, system: str, tools: Sequence[Tool], capabilities: Capabilities
) -> AssemblingBuilder:
    """The standard builder over a fresh `RequestAssembler`."""
    return AssemblingBuilder(RequestAssembler(config, system, tool_specs(list(tools)), capabilities))


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
    """Per-turn working set: created by `run`, dropped when it ends (never leaks into the next turn)."""

    budget: AttemptBudget
    state: TurnState
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
    sandbox: Sandbox | None = None
    """The OS sandbox Bash runs in (`tools.sandbox.detect_sandbox`); None: unsandboxed."""
    checkpoints: CheckpointStore | None = None
    """Where each tool call's change is applied with its undo (`/undo`, `/rewind`); None: no undo."""
    last_rewind: list[Undone] = field(default_factory=list, init=False)
    """The tool calls the last `rewind` undid in the workspace."""
    stages: Sequence[Stage] = field(default_factory=default_stages)
    """The compaction levels, in order (R3.0); default: budget, Snip, Microcompact."""
    timeline: Timeline = field(default_factory=Timeline)
    transcript: TranscriptSink | None = None
    events: EventBus = field(default_factory=EventBus)
    attachment_hooks: Sequence[Callable[[str], Sequence[AttachmentEntry]]] = ()
    """Called with each prompt; their attachments are appended before it (memory, skills)."""
    pre_compact_hooks: Sequence[PreCompactHook] = ()
    instructions: bool = True
    """Inject FOLDLINE.md / CLAUDE.md from the workspace as attachments on a session's first prompt (R9.3)."""
    tail_hooks: Sequence[Callable[[QueryEngine], Any]] = ()
    stop_hooks: Sequence[Callable[[str], Awaitable[None]]] = ()
    """Called with "interrupt" (Ctrl-C, after the interruption is recorded) and "close": background
    work that must not outlive either (the ctx-agent, R3.3.1) is cancelled here."""
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], Any] = asyncio.sleep
    session_dir: Path | None = None
    """Where this session keeps files beside its transcript (oversized tool results, R3.0);
    default `<sessions_dir>/<session_id>/`."""
    build_request: RequestBuilder | None = None
    """Defaults to `request_builder(config, system, tools, provider.capabilities)`."""
    log: SessionLog = field(init=False)
    """The one write path: timeline, transcript, events."""
    runner: ToolRunner = field(init=False)
    """Runs the tools the model asks for."""
    window: ContextWindow = field(init=False)
    """The context arithmetic: estimate, exact count, pending cache_edits, the compaction round."""
    _turn: _Turn | None = field(default=None, init=False)
    _cache_watch: CacheBreakDetector = field(default_factory=CacheBreakDetector, init=False)
    """A new engine (a resume) starts without a baseline: R7.4's reset on resume."""
    _tail: set[asyncio.Future[Any]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.log = SessionLog(self.timeline, self.transcript, self.events, self.clock)
        results_dir = self.session_dir / "tool-results" if self.session_dir else None
        fixed = estimate_fixed(self.system, tool_specs(list(self.tools)))
        self.runner = ToolRunner(
            self.log,
            self.config,
            self.tools,
            self.workspace,
            rules=self.rules,
            permission_mode=self.permission_mode,
            ask=self.ask,
            sandbox=self.sandbox,
            checkpoints=self.checkpoints,
            results_dir=results_dir,
            fixed_tokens=fixed,
        )
        self.window = ContextWindow(
            self.config,
            self.provider,
            self.log,
            stages=lambda: self.stages,
            pre_compact=lambda: self.pre_compact_hooks,
            clock=self.clock,
            fixed_tokens=fixed,
            on_change=lambda: self._cache_watch.reset_baseline(),
        )
        if self.build_request is None:
            self.build_request = request_builder(
                self.config, self.system, self.tools, self.provider.capabilities
            )

    # --- entry point -----------------------------------------------------------------------------

    async def submit_message(self, text: str) -> TurnResult:
        """Append the user's message (timeline, then transcript) and run the loop on it (R1.1).

        Raises:
            PromptTooLongError: the prompt could never fit a request; nothing was recorded.
        """
        self.window.refuse_prompt(text)
        if self.instructions and not any(
            isinstance(r, AttachmentEntry) and r.attachment_type == "instructions" for r in self.timeline
        ):
            for attachment in load_instruction_files(self.workspace, session_id=self.timeline.session_id):
                self.log.append(msgspec.structs.replace(attachment, parent_uuid=self.timeline.last_uuid))
        for hook in self.attachment_hooks:
            for attachment in hook(text):
                self.log.append(attachment)
        self.log.append(self.log.entry(UserEntry, message=UserMessage(content=text)))
        return await self.run()

    async def run(self) -> TurnResult:
        """The do-while loop (R0.1): step until a final decision; record any interruption."""
        budget = AttemptBudget(self.config.retry.max_retries_per_turn)
        self._turn = turn = _Turn(budget, TurnState(max_tokens=self.config.output_tokens))
        self.window.settle()
        try:
            while not isinstance(decision := await self.step(), Final):
                pass
        except asyncio.CancelledError:
            await self._record_interruption(turn)
            await self._stop("interrupt")
            raise
        except (ModelAPIError, PromptTooLongError) as e:
            self._record_api_error(e)
            raise
        finally:
            self._turn = None
            self._start_tail()
        text = "".join(b.get("text", "") for b in turn.last.message.content) if turn.last else ""
        return TurnResult(decision.stop_reason, text, turn.budget.used)

    async def step(self) -> Decision:
        """One round: compaction, one model call, then whatever `decide` says about its outcome."""
        turn = self._require_turn()
        await self.window.round()
        outcome = await self.query(turn)
        if isinstance(outcome, Reply):
            self.window.settle()  # the request fit: a later refusal starts the R5.4 chain afresh
        decision = decide(turn.state, outcome, self.config)
        turn.state = advance(turn.state, decision)
        match decision:
            case Continue() | Final():
                await self._accept(turn, decision)
            case Recover():
                await self._recover(turn, decision, outcome)
            case GiveUp(error=error):
                raise error  # a refusal recovery could answer never gets here: the window ends it (R5.4)
            case _:
                assert_never(decision)
        return decision

    async def _accept(self, turn: _Turn, decision: Continue | Final) -> None:
        """Record the reply (durably first when tools will run), run its tools, record their results."""
        accumulator, executor = turn.accumulator, turn.executor
        assert accumulator is not None, "accept() follows a reply"
        assert executor is not None, "accept() follows a reply"
        entry = self.log.entry(AssistantEntry, message=accumulator.message())
        turn.last, turn.accumulator = entry, None
        self.log.append(entry, sync=bool(executor.calls))
        if executor.calls:
            results = await self.runner.results(executor)
            turn.executor = None
            self.log.append(self.log.entry(UserEntry, message=UserMessage(content=results)))
        elif decision == Continue("continue_message"):  # R5.5/R5.8: continue in a new reply
            self.log.append(
                self.log.entry(
                    UserEntry, is_meta=True, message=UserMessage(content=CONTINUE_AFTER_MAX_TOKENS)
                )
            )
        if decision == Final("max_turns"):
            # Like Claude Code's `--max-turns`: stop once the tool results are recorded, so the
            # timeline ends on a user message and the next prompt builds a valid request.
            text = f"Reached maximum number of turns ({self.config.max_turns})"
            self.log.append(self.log.entry(SystemEntry, subtype="max_turns", content=text, level="warning"))
            self.events.emit(NoticeEvent(text, "warning"))

    async def _recover(self, turn: _Turn, decision: Recover, outcome: Outcome) -> None:
        """Carry out a recovery; the next step makes the changed request."""
        if turn.executor is not None:
            turn.executor.discard()  # the reply is not accepted: its speculative work goes with it
        turn.accumulator = turn.executor = None
        if decision.kind == "escalate_output":
            self.events.emit(NoticeEvent(f"output limit hit; retrying with max_tokens={decision.max_tokens}"))
        elif decision.kind == "shrink_output":
            self.events.emit(
                NoticeEvent(f"context nearly full: this reply is limited to {decision.max_tokens:,} tokens")
            )
        else:
            error = outcome.error if isinstance(outcome, Failure) else None
            await self.window.recover(error, decision.gap)

    # --- query: one model reply, streamed, with the one retry layer ------------------------------

    async def query(self, turn: _Turn) -> Outcome:
        """Build the request, stream the reply (starting safe tools early), retry transient failures.

        A reply is left in `turn.accumulator` and `turn.executor` for `step` to accept or discard.
        """
        plan = self._plan(turn)
        self.log.sync()  # R2 fsync policy: everything the request is built from is durable first
        if refused := await self.window.refuse_over_limit(plan):
            return Failure(refused)  # recovered from exactly as the API's own refusal would be

        async def attempt() -> Reply:
            accumulator, executor = MessageAccumulator(), self.runner.executor()
            turn.accumulator, turn.executor = accumulator, executor
            try:
                stream = self.provider.stream(plan.body, betas=plan.betas)
                idle = self.config.retry.stream_idle_timeout_s
                async for event in idle_watchdog(stream, idle, self.config.model):
                    try:
                        self._on_stream_event(event, accumulator, executor)
                    except UnexpectedModelBehavior as e:
                        # a stream that breaks the protocol (a third-party server under load sent
                        # a block before its message) is a broken transfer: retried like a drop
                        raise ModelConnectionError(
                            self.config.model, f"the reply stream broke off: {e}"
                        ) from e
            except asyncio.CancelledError:
                raise  # the interruption handler still needs what this attempt started
            except BaseException:
                executor.discard()  # a failed attempt's speculative reads are thrown away with it
                raise
            return Reply(accumulator.stop_reason, len(executor.calls), bool(accumulator.incomplete))

        def on_retry(attempt_no: int, delay: float, reason: str) -> None:
            self.events.emit(RetryEvent(attempt_no, delay, reason))
            self.events.telemetry("retry", attempt=attempt_no, delay=delay, reason=reason)

        try:
            reply = await retrying(
                attempt, policy=self.config.retry, budget=turn.budget, on_retry=on_retry, sleep=self.sleep
            )
        except ModelHTTPError as e:
            turn.accumulator = turn.executor = None
            return Failure(e)
        assert turn.accumulator is not None, "a successful attempt leaves its reply"
        self._watch_cache(turn.accumulator.usage)
        return reply

    def _plan(self, turn: _Turn) -> RequestPlan:
        assert self.build_request is not None
        plan = self.build_request(
            self.timeline.snapshot(), max_tokens=turn.state.max_tokens, new_edits=self.window.take_edits()
        )
        for record in plan.new_records:
            self.log.append(record)
        self._cache_watch.before_request(plan.prompt_state, plan.body)
        return plan

    def _watch_cache(self, usage: Usage) -> None:
        """R7.3: a confirmed cache break becomes a visible notice with its likely cause."""
        report = self._cache_watch.after_response(usage, server_reason=usage.cache_miss_reason)
        if report is not None:
            text = report.describe()
            data = {
                "before": report.before,
                "after": report.after,
                "changes": list(report.changes),
                "likely_server_side": report.likely_server_side,
                "diff_path": str(report.diff_path) if report.diff_path else None,
                "server_reason": report.server_reason,
            }  # so `cache_stats` can read the break back from the transcript exactly
            notice = self.log.entry(
                SystemEntry, subtype="cache_break", content=text, level="warning", data=data
            )
            self.log.append(notice)
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

    async def compact(self, instructions: str = "") -> list[AnyRecord]:
        """Compact now (`/compact [instructions]`): `ContextWindow.compact`.

        Raises:
            UserError: no level that compacts on request is installed.
        """
        return await self.window.compact(instructions)

    def rewind(self) -> int:
        """Drop the last user turn from what the model sees (`ContextWindow.rewind`), and put the
        workspace back as it was before it: every tool call of that turn (and any later one),
        undone newest first (`last_rewind` says which). Returns the messages dropped.

        Raises:
            UserError: there is no user turn to drop.
        """
        view = api_filter(project_view(self.log.timeline.snapshot()))
        last = next((e for e in reversed(view) if is_typed_prompt(e)), None)
        removed = self.window.rewind()
        self.last_rewind = []
        if last is not None and self.checkpoints is not None:
            entries = self.log.timeline.snapshot()
            end = next(i for i, e in enumerate(entries) if getattr(e, "uuid", None) == last.uuid) + 1
            turn = sum(1 for e in entries[:end] if isinstance(e, UserEntry) and is_typed_prompt(e))
            self.last_rewind = self.checkpoints.rewind(turn)
            for item in self.last_rewind:
                self.log.append(self.log.entry(SystemEntry, subtype="undo", content=item.line()))
            self.log.sync()
        return removed

    def undo(self) -> Undone | None:
        """Undo the last tool call's change to the workspace (`/undo`); None when there is none.
        Recorded, so the model knows the workspace went back."""
        if self.checkpoints is None:
            return None
        undone = self.checkpoints.undo()
        if undone is not None:
            self.log.append(self.log.entry(SystemEntry, subtype="undo", content=undone.line()))
            self.log.sync()
        return undone

    def record_local_command(self, command: str, args: str, output: str) -> None:
        """Record what a slash command showed as a `local_command` entry (R1.3): in the transcript,
        and sent to the model with the next prompt, so it knows what the user saw (`/context`, `/cost`)."""
        content = (
            f"<command-name>{command}</command-name>\n<command-args>{args}</command-args>\n"
            f"<local-command-stdout>{output}</local-command-stdout>"
        )
        self.log.append(self.log.entry(SystemEntry, subtype="local_command", content=content), sync=True)

    # --- interruption and resume ------------------------------------------------------------------

    async def _record_interruption(self, turn: _Turn) -> None:
        """R5.3: leave a transcript that resumes cleanly, and a marker the model sees."""
        content: list[Block] = []
        if turn.accumulator is not None and turn.accumulator.started:
            message = turn.accumulator.message(complete_only=True)
            if message.content:
                self.log.append(self.log.entry(AssistantEntry, message=message), sync=True)
        if turn.executor is not None and turn.executor.calls:
            content = await turn.executor.interrupt()
        marker = INTERRUPT_MARKER_TOOLS if content else INTERRUPT_MARKER
        content.append({"type": "text", "text": marker})
        self.log.append(
            self.log.entry(UserEntry, is_meta=not content[:-1], message=UserMessage(content=content)),
            sync=True,
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
        self.log.append(
            self.log.entry(AssistantEntry, message=message, is_api_error_message=True, api_error=info),
            sync=True,
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
            self.log.append(self.log.entry(UserEntry, message=UserMessage(content=results)), sync=True)

    # --- background tail (R6.1) ---------------------------------------------------------------------

    def _start_tail(self) -> None:
        self._track(asyncio.ensure_future(self._run_tail()))

    def _track(self, task: asyncio.Future[Any]) -> None:
        self._tail.add(task)
        task.add_done_callback(self._tail.discard)

    async def _run_tail(self) -> None:
        self.log.sync()
        for hook in self.tail_hooks:
            try:
                result = hook(self)
                if asyncio.iscoroutine(result):
                    await result
                elif isinstance(result, asyncio.Future):
                    self._track(result)  # work the hook left running: `drain` waits for it too
            except Exception as e:  # the tail never breaks the session; it says what failed
                self.events.emit(NoticeEvent(f"background task {hook!r} failed: {e}", "warning"))
        self.events.telemetry("turn_end", records=len(self.timeline))

    async def _stop(self, reason: str) -> None:
        for hook in self.stop_hooks:
            try:
                await hook(reason)
            except Exception as e:  # stopping background work never breaks the interrupt or the close
                self.events.emit(NoticeEvent(f"stopping {hook!r} failed: {e}", "warning"))

    async def drain(self) -> None:
        """Wait for background work, the tail and what its hooks left running (tests, shutdown, a
        simulated user's pause); normal use never needs to."""
        while self._tail:
            await asyncio.wait(list(self._tail))  # a cancelled run is done, not an error to raise here

    async def aclose(self) -> None:
        """Shut down: stop cancellable background work, finish the tail, flush, close the provider."""
        await self._stop("close")
        await self.drain()
        self.log.sync()
        aclose = getattr(self.provider, "aclose", None)
        if aclose is not None:
            await aclose()

    # --- plumbing ---------------------------------------------------------------------------------

    def _require_turn(self) -> _Turn:
        if self._turn is None:
            raise RuntimeError("step() runs inside run(); call submit_message()")
        return self._turn
