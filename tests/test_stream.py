"""The stream accumulator: in-order assembly, strictness, and what survives an abort."""

from __future__ import annotations

import pytest

from foldline.errors import UnexpectedModelBehavior
from foldline.providers.anthropic import map_event
from foldline.stream import (
    BlockStart,
    BlockStop,
    InputJSONDelta,
    MessageAccumulator,
    MessageDelta,
    MessageStart,
    MessageStop,
    SignatureDelta,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)
from foldline.timeline import Usage


def _events() -> list[StreamEvent]:
    return [
        MessageStart("msg_1", "m", Usage(input_tokens=10)),
        BlockStart(0, {"type": "thinking", "thinking": "", "signature": ""}),
        ThinkingDelta(0, "let me "),
        ThinkingDelta(0, "see"),
        SignatureDelta(0, "sig=="),
        BlockStop(0),
        BlockStart(1, {"type": "text", "text": ""}),
        TextDelta(1, "Reading "),
        TextDelta(1, "now."),
        BlockStop(1),
        BlockStart(2, {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}),
        InputJSONDelta(2, '{"file_'),
        InputJSONDelta(2, 'path": "a.py"}'),
        BlockStop(2),
        MessageDelta("tool_use", None, Usage(output_tokens=42)),
        MessageStop(),
    ]


def test_assembles_blocks_in_order() -> None:
    acc = MessageAccumulator()
    for event in _events():
        acc.feed(event)
    message = acc.message()
    assert message.content == [
        {"type": "thinking", "thinking": "let me see", "signature": "sig=="},
        {"type": "text", "text": "Reading now."},
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.py"}},
    ]
    assert (message.stop_reason, message.usage) == ("tool_use", Usage(input_tokens=10, output_tokens=42))


@pytest.mark.parametrize(
    "bad",
    [
        [TextDelta(0, "x")],
        [MessageStart("m", "m", Usage()), TextDelta(0, "x")],
        [MessageStart("m", "m", Usage()), BlockStart(1, {"type": "text", "text": ""})],
        [MessageStart("m", "m", Usage()), BlockStart(0, {"type": "text", "text": ""}), ThinkingDelta(0, "x")],
        [MessageStart("m", "m", Usage()), MessageStart("m", "m", Usage())],
        [MessageStart("m", "m", Usage()), BlockStop(0)],
    ],
    ids=[
        "delta-before-start",
        "delta-before-block",
        "block-skips-index",
        "wrong-delta-kind",
        "two-starts",
        "stray-stop",
    ],
)
def test_out_of_order_events_raise(bad: list[StreamEvent]) -> None:
    acc = MessageAccumulator()
    for event in bad[:-1]:
        acc.feed(event)
    with pytest.raises(UnexpectedModelBehavior, match="out of order"):
        acc.feed(bad[-1])


def test_abort_keeps_finished_blocks_and_cut_text_but_not_half_thinking_or_tool_input() -> None:
    acc = MessageAccumulator()
    for event in _events()[:13]:  # cut inside the tool_use input
        acc.feed(event)
    assert acc.message(complete_only=True).content == [
        {"type": "thinking", "thinking": "let me see", "signature": "sig=="},
        {"type": "text", "text": "Reading now."},
    ]
    cut_in_text = MessageAccumulator()
    for event in _events()[:8]:
        cut_in_text.feed(event)
    assert cut_in_text.message(complete_only=True).content[-1] == {"type": "text", "text": "Reading "}


def test_tool_input_cut_by_max_tokens_is_marked_incomplete_and_never_sent() -> None:
    acc = MessageAccumulator()
    for event in [*_events()[:12], BlockStop(2), MessageDelta("max_tokens", None, Usage(output_tokens=8))]:
        acc.feed(event)
    assert acc.incomplete == {2}
    assert [b["type"] for b in acc.message().content] == ["thinking", "text"]


def test_wire_events_map_to_stream_events() -> None:
    assert map_event({"type": "ping"}) is None
    assert map_event(
        {"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}}
    ) == TextDelta(3, "x")
    start = map_event(
        {"type": "message_start", "message": {"id": "msg", "model": "m", "usage": {"input_tokens": 5}}}
    )
    assert start == MessageStart("msg", "m", Usage(input_tokens=5))
    delta = map_event(
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}}
    )
    assert delta == MessageDelta("end_turn", None, Usage(output_tokens=7))
