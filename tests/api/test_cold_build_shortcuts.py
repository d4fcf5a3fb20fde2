"""The cold build's shortcuts give what the steps they stand for give.

`edges_clean`, the one scan that lets the incremental path skip S6.a-S6.g, never vouches wrongly:
on every prefix of the messy timelines of `tests/api/strategies.py`, whenever it says the messages
are clean, each of the seven steps returns them unchanged; and one hand-made case per step, a
message list that step would change, where the scan must say no. `lift_all` lifts as `_lift` does.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from tests.api.strategies import Generated, messy_timelines

from foldline.api.normalize._base import NormalizeOptions, _Msg
from foldline.api.normalize._final import STEPS
from foldline.api.normalize._lift import _lift, lift_all
from foldline.api.normalize._s6_edges import EDGE_STEP_NAMES, edges_clean
from foldline.timeline import AssistantEntry, AssistantMessage, UserEntry, UserMessage

_OPTIONS = NormalizeOptions(snip_enabled=True)
_BEFORE = STEPS[: [s.name for s in STEPS].index("S6.a")]
_EDGES = [s for s in STEPS if s.name in EDGE_STEP_NAMES]
_UP_TO_S3 = STEPS[: [s.name for s in STEPS].index("S3") + 1]


def _user(*blocks: dict[str, Any]) -> _Msg:
    return _Msg("user", list(blocks), ("u",))


def _reply(*blocks: dict[str, Any]) -> _Msg:
    return _Msg("assistant", list(blocks), ("a",), msg_id="msg_1")


_TEXT = {"type": "text", "text": "hello"}
_THINK = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
_RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messy_timelines(max_actions=20))
def test_when_the_scan_says_clean_no_edge_step_changes_anything(generated: Generated) -> None:
    for k in range(1, len(generated.entries) + 1):
        msgs = [_lift(e) for e in generated.entries[:k]]
        for step in _BEFORE:
            msgs = step.run(msgs, _OPTIONS)
        if edges_clean(msgs):
            for step in _EDGES:
                assert step.run(msgs, _OPTIONS) == msgs, f"{step.name} changed messages the scan called clean"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messy_timelines(max_actions=20))
def test_lift_all_gives_s3_what_lifting_one_by_one_gives(generated: Generated) -> None:
    for k in range(1, len(generated.entries) + 1):
        entries = generated.entries[:k]
        joined, one_by_one = lift_all(entries), [_lift(e) for e in entries]
        for step in _UP_TO_S3:
            joined, one_by_one = step.run(joined, _OPTIONS), step.run(one_by_one, _OPTIONS)
        assert joined == one_by_one


def test_lift_all_joins_a_reply_written_block_by_block_and_keeps_a_replay_apart() -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}
    stamp = "2026-01-01T00:00:00.000Z"
    pieces = [
        AssistantEntry(uuid=f"a{k}", timestamp=stamp, message=AssistantMessage(id="msg_1", content=[b]))
        for k, b in enumerate([_THINK, _TEXT, use])
    ]
    [joined] = lift_all(pieces)
    assert joined.uuids == ("a0", "a1", "a2")
    assert [b["type"] for b in joined.content] == ["thinking", "text", "tool_use"]
    # The same block twice (a replayed line under a new uuid): left to S3, which keeps one.
    assert len(lift_all([*pieces, msgspec.structs.replace(pieces[2], uuid="a3")])) == 4
    # A piece replayed under its own uuid, adjacent or after the reply's tool result: S3 skips it.
    result = UserEntry(
        uuid="u1", timestamp=stamp, message=UserMessage(content=[_RESULT | {"tool_use_id": "toolu_1"}])
    )
    for timeline in ([*pieces, pieces[1]], [*pieces, result, pieces[1], pieces[1]]):
        joined_s3, one_by_one = lift_all(timeline), [_lift(e) for e in timeline]
        for step in _UP_TO_S3:
            joined_s3, one_by_one = step.run(joined_s3, _OPTIONS), step.run(one_by_one, _OPTIONS)
        assert joined_s3 == one_by_one
        assert [b["type"] for b in joined_s3[0].content] == ["thinking", "text", "tool_use"]


def test_a_clean_conversation_is_called_clean() -> None:
    assert edges_clean([_user(_TEXT), _reply(_THINK, _TEXT), _user(_RESULT, _TEXT), _reply()])


@pytest.mark.parametrize(
    ("step", "msgs"),
    [
        ("S6.a", [_user(_TEXT), _reply(_THINK), _user(_TEXT)]),
        ("S6.b", [_user(_TEXT), _reply(_TEXT, _THINK), _user(_TEXT)]),
        ("S6.c", [_user(_TEXT), _reply({"type": "text", "text": "  "}), _user(_TEXT)]),
        ("S6.c", [_user(_TEXT, {"type": "text", "text": "\n"}), _reply(_TEXT)]),
        ("S6.c", [_user(), _reply(_TEXT), _user(_TEXT)]),
        ("S6.d", [_user(_TEXT), _reply(), _user(_TEXT)]),
        ("S6.e", [_user(_TEXT), _reply(_TEXT), _reply(_TEXT), _user(_TEXT)]),
        ("S6.f", [_user(_RESULT, {"type": "text", "text": "<system-reminder>\nnote\n</system-reminder>"})]),
        ("S6.g", [_user(_RESULT | {"is_error": True, "content": ""})]),
        ("S6.g", [_user(_RESULT | {"content": [{"type": "text", "text": ""}]})]),
    ],
)
def test_each_change_an_edge_step_would_make_is_seen(step: str, msgs: list[_Msg]) -> None:
    run = next(s for s in _EDGES if s.name == step)
    assert run.run(msgs, _OPTIONS) != msgs, "the case must be one the step changes"
    assert not edges_clean(msgs)
