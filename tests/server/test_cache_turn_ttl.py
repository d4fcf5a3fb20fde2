"""The turn breakpoints' TTL (design.md §4.2, `CacheConfig.turn_ttl`) against the server's cache:
a pause past five minutes between turns costs the last turn's tail, not the whole prefix, when a
1h entry pays for itself; and where it does not pay, none is written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.server.conftest import MODEL, FakeClock, Served, words

from foldline.api.cache import add_cache_breakpoints
from foldline.api.validate import find_errors
from foldline.config import CacheConfig

SYSTEM = [{"type": "text", "text": "You are a careful coding agent." + words(1100, "s")}]


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


def _turn(n: int, size: int) -> list[dict[str, Any]]:
    """One finished turn: a prompt, a tool call, its result, the answer."""
    call = {"type": "tool_use", "id": f"toolu_{n:04d}", "name": "Read", "input": {"file_path": "a.py"}}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{n:04d}", "content": words(size, f"r{n}_")}
    return [
        {"role": "user", "content": _text(f"prompt {n}" + words(50, f"p{n}_"))},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [result]},
        {"role": "assistant", "content": _text(f"answer {n}" + words(40, f"a{n}_"))},
    ]


def _send(
    served: Served, messages: list[dict[str, Any]], config: CacheConfig, share: float
) -> dict[str, Any]:
    marked = add_cache_breakpoints(messages, system=SYSTEM, config=config, pause_share=share)  # type: ignore[arg-type]
    body = {"model": MODEL, "max_tokens": 20, "system": marked.system, "messages": marked.messages}
    assert find_errors(body) == []  # A44 among them: no 1h breakpoint after a 5m one
    reply = served.client.messages.create(**body)
    return reply.usage.model_dump(exclude_none=True)


def _session(served: Served, clock: FakeClock, config: CacheConfig, share: float) -> dict[str, Any]:
    """Four turns of 2,000-token results a minute apart, then a 20-minute pause: the next turn's first
    request's usage."""
    history: list[dict[str, Any]] = []
    for n in range(4):
        turn = _turn(n, 2000)
        _send(served, [*history, turn[0]], config, share)  # the turn's first request
        _send(served, [*history, *turn[:3]], config, share)  # after the tool result
        history += turn
        clock.advance(60)
    clock.advance(20 * 60)
    return _send(served, [*history, _turn(4, 10)[0]], config, share)


def test_a_long_pause_keeps_the_prefix_up_to_the_previous_prompt(serve: Callable[..., Served]) -> None:
    clock = FakeClock()
    with_turns = _session(serve(clock=clock), clock, CacheConfig(), share=0.25)
    clock = FakeClock()
    rolling_only = _session(
        serve(clock=clock), clock, CacheConfig(turn_ttl="5m", static_ttl="5m"), share=0.25
    )
    assert rolling_only["cache_read_input_tokens"] == 0  # everything expired with the pause
    # the prefix through the previous prompt was written for an hour: only the last turn is new
    total = rolling_only["cache_creation_input_tokens"]
    assert with_turns["cache_read_input_tokens"] + with_turns["cache_creation_input_tokens"] == total
    assert with_turns["cache_creation_input_tokens"] < total / 3  # one turn of four
    assert with_turns["cache_creation"]["ephemeral_1h_input_tokens"] > 0


def test_a_session_without_long_pauses_writes_no_one_hour_turn_entries() -> None:
    history: list[dict[str, Any]] = []
    for n in range(3):
        history += _turn(n, 2000)
    messages = [*history, _turn(3, 10)[0]]
    paused = add_cache_breakpoints(messages, system=SYSTEM, pause_share=0.25)  # type: ignore[arg-type]
    never = add_cache_breakpoints(messages, system=SYSTEM, pause_share=0.0)  # type: ignore[arg-type]
    assert len(paused.message_breakpoints) == 2
    assert all(
        paused.messages[m]["content"][b]["cache_control"].get("ttl") == "1h"
        for m, b in paused.message_breakpoints
    )
    assert len(never.message_breakpoints) == 1
    (m, b) = never.message_breakpoints[0]
    assert never.messages[m]["content"][b]["cache_control"] == {"type": "ephemeral"}


def test_a_turn_bigger_than_what_it_would_save_stays_five_minutes() -> None:
    # a small prefix and a huge new turn: 0.75 x new outweighs 0.25 x 1.25 x prefix
    messages = [*_turn(0, 10), *_turn(1, 5000), _turn(2, 10)[0]]
    marked = add_cache_breakpoints(messages, system=SYSTEM, pause_share=0.25)  # type: ignore[arg-type]
    assert _ttls(marked) == ["5m"]  # the rolling entry alone, for five minutes


@pytest.mark.parametrize(
    "unread",
    [
        # a fold or a snip before the next long pause changes what the 1h entry held
        {"change_rate": 1.0},
        # a pause past the hour loses the 1h entry as well: writing at 2x bought nothing
        {"long_pause_share": 0.2},
    ],
)
def test_where_the_one_hour_entry_would_go_unread_none_is_written(unread: dict[str, float]) -> None:
    messages = [*_turn(0, 2000), *_turn(1, 2000), *_turn(2, 2000), _turn(3, 10)[0]]
    read = add_cache_breakpoints(messages, system=SYSTEM, pause_share=0.25, long_pause_share=0.0)  # type: ignore[arg-type]
    unread_marked = add_cache_breakpoints(messages, system=SYSTEM, pause_share=0.25, **unread)  # type: ignore[arg-type]
    assert _ttls(read) == ["1h", "1h"]  # the turn entry for an hour (and the rolling one after it)
    assert _ttls(unread_marked) == ["5m"]  # no hour entry anywhere: the rolling one for five minutes


def _ttls(marked: Any) -> list[str]:
    """The TTL of each message breakpoint, in order (`5m` where `cache_control` names none)."""
    controls = [marked.messages[m]["content"][b]["cache_control"] for m, b in marked.message_breakpoints]
    return [c.get("ttl", "5m") for c in controls]


def test_fold_summaries_held_by_their_own_entry_do_not_count_toward_a_turn_entry() -> None:
    # the big prefix is fold summaries, which their own 1h breakpoint holds; the turns after are small
    summaries = {
        "role": "user",
        "content": _text("<collapsed-context>" + words(6000, "f") + "</collapsed-context>"),
    }
    noted = {"role": "assistant", "content": _text("noted")}
    messages = [summaries, noted, *_turn(0, 30), *_turn(1, 30), _turn(2, 10)[0]]
    unheld = add_cache_breakpoints(messages, system=SYSTEM, pause_share=0.25)  # type: ignore[arg-type]
    held = add_cache_breakpoints(messages, system=SYSTEM, pause_share=0.25, stable_end=(0, 0))  # type: ignore[arg-type]
    assert len(unheld.message_breakpoints) == 2  # without the summaries' entry a 1h turn entry pays
    assert held.message_breakpoints[0] == (0, 0)  # the summaries' entry, then the rolling one
    assert held.messages[0]["content"][0]["cache_control"]["ttl"] == "1h"
    assert len(held.message_breakpoints) == 2
    assert held.messages[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
