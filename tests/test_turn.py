"""`decide` and `advance`: every decision of the tool loop, without I/O."""

from __future__ import annotations

from dataclasses import replace

import pytest

from foldline.config import Config
from foldline.errors import (
    ModelHTTPError,
    OutputRoomError,
    OverloadedError,
    PromptTooLongAPIError,
    UnexpectedModelBehavior,
)
from foldline.providers.base import http_error
from foldline.turn import (
    MIN_OUTPUT_TOKENS,
    Continue,
    Failure,
    Final,
    GiveUp,
    Recover,
    Reply,
    TurnState,
    advance,
    decide,
)

CONFIG = Config(max_output_tokens=8_192, escalated_max_output_tokens=64_000, max_output_recoveries=3)
FRESH = TurnState(max_tokens=8_192)


def _too_long(prompt: int, limit: int) -> ModelHTTPError:
    return http_error("m", 400, {}, f"prompt is too long: {prompt} tokens > {limit} maximum")


def _no_room(prompt: int, max_tokens: int, limit: int) -> ModelHTTPError:
    text = f"input length and `max_tokens` exceed context limit: {prompt} + {max_tokens} > {limit}"
    return http_error("m", 400, {}, text)


@pytest.mark.parametrize(
    ("state", "reply", "expected"),
    [
        pytest.param(FRESH, Reply("end_turn"), Final("end_turn"), id="end-turn"),
        pytest.param(FRESH, Reply("stop_sequence"), Final("stop_sequence"), id="stop-sequence"),
        pytest.param(FRESH, Reply("refusal"), Final("refusal"), id="refusal"),
        pytest.param(FRESH, Reply("tool_use", tool_calls=2), Continue("tool_results"), id="tools"),
        pytest.param(
            FRESH, Reply("max_tokens"), Recover("escalate_output", max_tokens=64_000), id="escalate-first"
        ),
        pytest.param(
            FRESH,
            Reply("max_tokens", tool_calls=1, broken_tool_input=True),
            Recover("escalate_output", max_tokens=64_000),
            id="escalate-even-with-a-cut-tool-call",
        ),
        pytest.param(
            TurnState(max_tokens=64_000, escalated=True),
            Reply("max_tokens"),
            Continue("continue_message"),
            id="continue-after-escalation",
        ),
        pytest.param(
            TurnState(max_tokens=2_000, output_shrunk=True),
            Reply("max_tokens"),
            Continue("continue_message"),
            id="no-escalation-when-output-was-shrunk",
        ),
        pytest.param(
            TurnState(max_tokens=64_000),
            Reply("max_tokens"),
            Continue("continue_message"),
            id="already-at-the-escalated-limit",
        ),
        pytest.param(
            TurnState(max_tokens=64_000, escalated=True, continuations=3),
            Reply("max_tokens"),
            Final("max_tokens"),
            id="continuations-exhausted",
        ),
        pytest.param(
            TurnState(max_tokens=64_000, escalated=True, continuations=3),
            Reply("max_tokens", tool_calls=1),
            Continue("tool_results"),
            id="tool-calls-go-on-after-continuations",
        ),
    ],
)
def test_after_a_reply(state: TurnState, reply: Reply, expected: object) -> None:
    assert decide(state, reply, CONFIG) == expected


def test_a_broken_tool_input_gives_up_unless_the_reply_was_cut_off() -> None:
    decision = decide(TurnState(max_tokens=64_000, escalated=True), Reply("tool_use", 1, True), CONFIG)
    assert isinstance(decision, GiveUp)
    assert isinstance(decision.error, UnexpectedModelBehavior)
    cut = decide(TurnState(max_tokens=64_000, escalated=True), Reply("max_tokens", 1, True), CONFIG)
    assert cut == Continue("tool_results")


@pytest.mark.parametrize(
    ("rounds", "reply", "expected"),
    [
        (0, Reply("tool_use", 1), Continue("tool_results")),
        (1, Reply("tool_use", 1), Final("max_turns")),
        (2, Reply("tool_use", 1), Final("max_turns")),
        (1, Reply("end_turn"), Final("end_turn")),
    ],
)
def test_max_turns_counts_accepted_replies(rounds: int, reply: Reply, expected: object) -> None:
    config = Config(max_turns=2)
    assert decide(TurnState(max_tokens=8_192, rounds=rounds), reply, config) == expected


def test_without_max_turns_rounds_never_end_a_turn() -> None:
    assert decide(TurnState(max_tokens=8_192, rounds=10_000), Reply("tool_use", 1), CONFIG) == Continue(
        "tool_results"
    )


def test_prompt_too_long_compacts_with_the_parsed_gap_each_time() -> None:
    error = _too_long(210_000, 200_000)
    # over the window by 10,000, and the retry must pass the blocking limit below it
    assert CONFIG.blocking_limit < 200_000
    assert decide(FRESH, Failure(error), CONFIG) == Recover("compact", gap=210_000 - CONFIG.blocking_limit)
    ours = _too_long(CONFIG.blocking_limit + 500, CONFIG.blocking_limit)  # counted before sending
    assert decide(FRESH, Failure(ours), CONFIG) == Recover("compact", gap=500)
    # still refused after a recovery: the chain goes on (the window asks only the levels not yet
    # asked, and ends the turn itself when none is left, R5.4)
    again = decide(TurnState(max_tokens=8_192, compacted=True), Failure(error), CONFIG)
    assert again == Recover("compact", gap=210_000 - CONFIG.blocking_limit)


def test_a_413_without_numbers_compacts_with_an_unknown_gap() -> None:
    error = http_error("m", 413, {}, "request_too_large")
    assert isinstance(error, PromptTooLongAPIError)
    assert decide(FRESH, Failure(error), CONFIG) == Recover("compact", gap=None)


def test_no_room_for_the_reply_shrinks_it_once_then_compacts() -> None:
    error = _no_room(190_000, 64_000, 200_000)
    assert decide(FRESH, Failure(error), CONFIG) == Recover("shrink_output", max_tokens=10_000)
    shrunk = TurnState(max_tokens=10_000, output_shrunk=True)
    assert decide(shrunk, Failure(error), CONFIG) == Recover("compact", gap=190_000 + 64_000 - 200_000)


def test_too_little_room_to_be_worth_shrinking_compacts() -> None:
    prompt = 200_000 - MIN_OUTPUT_TOKENS + 1
    error = _no_room(prompt, 8_192, 200_000)
    # the prompt must shrink until the reply fits beside it (R5.4), not end the turn
    assert decide(FRESH, Failure(error), CONFIG) == Recover("compact", gap=prompt + 8_192 - 200_000)


def test_other_failures_give_up() -> None:
    error = http_error("m", 400, {}, "messages: roles must alternate")
    assert type(error) is ModelHTTPError
    assert decide(FRESH, Failure(error), CONFIG) == GiveUp(error)


def test_http_error_types_by_status_and_text() -> None:
    assert isinstance(http_error("m", 529, {}, "Overloaded"), OverloadedError)
    assert isinstance(http_error("m", 200, {}, "x", error_type="overloaded_error"), OverloadedError)
    room = _no_room(150_000, 64_000, 200_000)
    assert isinstance(room, OutputRoomError)
    assert (room.prompt_tokens, room.max_tokens, room.limit, room.room) == (150_000, 64_000, 200_000, 50_000)
    too_long = _too_long(5, 3)
    assert isinstance(too_long, PromptTooLongAPIError)
    assert too_long.prompt_too_long
    assert too_long.gap == 2
    assert not http_error("m", 500, {}, "boom").prompt_too_long


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (Continue("tool_results"), TurnState(max_tokens=8_192, rounds=1)),
        (Continue("continue_message"), TurnState(max_tokens=8_192, rounds=1, continuations=1)),
        (Final("end_turn"), TurnState(max_tokens=8_192, rounds=1)),
        (Recover("escalate_output", max_tokens=64_000), TurnState(max_tokens=64_000, escalated=True)),
        (Recover("shrink_output", max_tokens=2_000), TurnState(max_tokens=2_000, output_shrunk=True)),
        (Recover("compact", gap=5), TurnState(max_tokens=8_192, compacted=True)),
        (GiveUp(RuntimeError("x")), FRESH),
    ],
)
def test_advance_records_what_was_done(decision: object, expected: TurnState) -> None:
    assert advance(FRESH, decision) == expected  # type: ignore[arg-type]


def test_a_turn_that_keeps_hitting_max_tokens_ends() -> None:
    state, decisions = FRESH, []
    for _ in range(10):
        decision = decide(state, Reply("max_tokens"), CONFIG)
        decisions.append(decision)
        state = advance(state, decision)
        if isinstance(decision, Final):
            break
    assert decisions == [
        Recover("escalate_output", max_tokens=64_000),
        *[Continue("continue_message")] * 3,
        Final("max_tokens"),
    ]


def test_escalation_is_capped_by_the_models_output_limit() -> None:
    """R5.5: on an 8K model the escalated retry asks for 8K, not 64K (a 400 that loses the reply)."""
    haiku = replace(CONFIG, model="claude-3-5-haiku-20241022", max_output_tokens=4_096)
    assert decide(TurnState(max_tokens=4_096), Reply("max_tokens"), haiku) == Recover(
        "escalate_output", max_tokens=8_192
    )
    at_limit = decide(
        TurnState(max_tokens=8_192), Reply("max_tokens"), replace(haiku, max_output_tokens=8_192)
    )
    assert at_limit == Continue("continue_message")  # nothing to escalate to: continue in a new reply
