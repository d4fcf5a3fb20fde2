"""One user turn's state, and the loop's single decision after each model call (R0.1, R5.4, R5.5).

Every "go round again" of the tool loop is decided here, by `decide`, a pure function of the turn's
state and what the model call produced. The engine carries the decision out and `advance` records
it in the state; neither reads error text nor keeps flags of its own, and no path calls itself.

```
outcome                                     decision
Reply, stop=max_tokens, first time        -> Recover(escalate_output)   same request, more room
Reply, a tool_use input is broken JSON    -> GiveUp(UnexpectedModelBehavior)
Reply with tool calls                     -> Continue(tool_results)     or Final(max_turns)
Reply, stop=max_tokens, escalated         -> Continue(continue_message) up to max_output_recoveries
Reply otherwise                           -> Final(stop_reason)
Failure OutputRoomError, room enough      -> Recover(shrink_output)     once per turn
Failure PromptTooLongAPIError (or no room)-> Recover(compact)           each level at most once
Failure otherwise                         -> GiveUp(error)
```

A compact recovery asks the levels of R5.4's chain that have not been asked since the last reply
(`ContextWindow.recover`), so a retry still refused goes on down the chain; when no level is left
that can act, the window ends the turn with a `PromptTooLongError` saying to run /compact.

Transient failures (overloaded, 5xx, dropped connections) never reach `decide`: the retry layer
repeats the same request below it, within its own bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, TypeAlias, assert_never

from foldline.config import Config
from foldline.errors import ModelHTTPError, OutputRoomError, PromptTooLongAPIError, UnexpectedModelBehavior

__all__ = [
    "MIN_OUTPUT_TOKENS",
    "Continue",
    "Decision",
    "Failure",
    "Final",
    "GiveUp",
    "Outcome",
    "Recover",
    "Reply",
    "TurnState",
    "advance",
    "decide",
]

MIN_OUTPUT_TOKENS = 1_024
"""Below this much room for the reply, shrinking max_tokens is pointless: the prompt must shrink."""


@dataclass(frozen=True)
class TurnState:
    """What the decisions of one turn depend on; a new turn starts from a fresh one."""

    max_tokens: int
    rounds: int = 0
    """Replies accepted this turn (`Config.max_turns` counts these)."""
    continuations: int = 0
    """"Resume where you stopped" messages sent after a reply hit max_tokens."""
    escalated: bool = False
    output_shrunk: bool = False
    compacted: bool = False
    """A prompt-too-long (or no-room) answer was met with the recovery chain this turn."""


@dataclass(frozen=True)
class Reply:
    """The model answered."""

    stop_reason: str | None
    tool_calls: int = 0
    """Complete tool_use blocks (they run whatever is decided, unless the reply is discarded)."""
    broken_tool_input: bool = False
    """A tool_use block's input was not valid JSON."""


@dataclass(frozen=True)
class Failure:
    """The API refused the request with an error that retrying unchanged cannot fix."""

    error: ModelHTTPError


Outcome: TypeAlias = Reply | Failure


@dataclass(frozen=True)
class Continue:
    """Accept the reply and go round again."""

    reason: Literal["tool_results", "continue_message"]


@dataclass(frozen=True)
class Recover:
    """Do not accept anything: change the request and make the call again."""

    kind: Literal["escalate_output", "shrink_output", "compact"]
    max_tokens: int | None = None
    """For the output kinds: the reply's new limit."""
    gap: int | None = None
    """For compact: tokens that must go for the retry to pass foldline's own count before sending
    (the blocking limit, under a server's window by the output reserve); None when the API did not
    say how long the prompt was."""


@dataclass(frozen=True)
class Final:
    """Accept the reply (running its tool calls, if any) and end the turn."""

    stop_reason: str | None


@dataclass(frozen=True)
class GiveUp:
    """End the turn with this error."""

    error: Exception


Decision: TypeAlias = Continue | Recover | Final | GiveUp


def decide(state: TurnState, outcome: Outcome, config: Config) -> Decision:
    """What the loop does next, given the turn so far and what the last model call produced."""
    match outcome:
        case Reply():
            return _after_reply(state, outcome, config)
        case Failure(error=error):
            return _after_failure(state, error, config)
        case _:
            assert_never(outcome)


def _after_reply(state: TurnState, reply: Reply, config: Config) -> Decision:
    cut_off = reply.stop_reason == "max_tokens"
    if (
        cut_off
        and not state.escalated
        and not state.output_shrunk  # the context has no room for a larger reply
        and state.max_tokens < config.escalated_output_tokens  # never past the model's own limit (R5.5)
    ):
        return Recover("escalate_output", max_tokens=config.escalated_output_tokens)
    if reply.broken_tool_input and not cut_off:
        return GiveUp(UnexpectedModelBehavior("a tool_use block's input was not valid JSON"))
    goes_on = reply.tool_calls > 0 or (cut_off and state.continuations < config.max_output_recoveries)
    if not goes_on:
        return Final(reply.stop_reason)
    if config.max_turns is not None and state.rounds + 1 >= config.max_turns:
        return Final("max_turns")
    return Continue("tool_results" if reply.tool_calls else "continue_message")


def _after_failure(state: TurnState, error: ModelHTTPError, config: Config) -> Decision:
    if isinstance(error, OutputRoomError):
        if not state.output_shrunk and error.room >= MIN_OUTPUT_TOKENS:
            return Recover("shrink_output", max_tokens=error.room)
        # No room for a reply worth having beside this prompt: the prompt must shrink so the reply
        # fits (a prompt at the blocking limit of a server whose window is the blocking limit).
        return Recover("compact", gap=max(1, error.prompt_tokens + error.max_tokens - error.limit))
    if isinstance(error, PromptTooLongAPIError):
        # A server's limit is its window; the retry must also pass the blocking limit below it.
        # The chain itself bounds the retries: each level is asked at most once (R5.4).
        limit = min(config.blocking_limit, error.limit or config.blocking_limit)
        return Recover("compact", gap=None if error.prompt_tokens is None else error.prompt_tokens - limit)
    return GiveUp(error)


def advance(state: TurnState, decision: Decision) -> TurnState:
    """The state after carrying `decision` out."""
    match decision:
        case Continue(reason=reason):
            return replace(
                state,
                rounds=state.rounds + 1,
                continuations=state.continuations + (reason == "continue_message"),
            )
        case Final():
            return replace(state, rounds=state.rounds + 1)
        case Recover(kind=kind, max_tokens=limit):
            if kind == "compact":
                return replace(state, compacted=True)
            limit = limit or state.max_tokens
            if kind == "escalate_output":
                return replace(state, escalated=True, max_tokens=limit)
            return replace(state, output_shrunk=True, max_tokens=limit)
        case GiveUp():
            return state
        case _:
            assert_never(decision)
