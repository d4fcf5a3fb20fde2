"""Token estimation anchored on the last usage (R3.0.2)."""

from __future__ import annotations

import math

from foldline.config import Config
from foldline.timeline import AssistantEntry, AssistantMessage, Usage, UserEntry, UserMessage
from foldline.tokens import (
    ContextCount,
    context_count,
    context_tokens,
    estimate_blocks,
    estimate_fixed,
    estimate_text,
)


def test_four_characters_per_token_rounded_up() -> None:
    assert estimate_text("") == 0
    assert estimate_text("abcd") == 1
    assert estimate_text("abcde") == 2


def test_media_counts_two_thousand_tokens_even_inside_tool_results() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x" * 99}}
    result = {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "abcd"}, image]}
    assert estimate_blocks([image]) == 2000
    assert estimate_blocks([result]) == 2001


def test_context_anchors_on_last_usage_and_pads_only_the_tail() -> None:
    usage = Usage(
        input_tokens=10, cache_read_input_tokens=1000, cache_creation_input_tokens=90, output_tokens=50
    )
    entries = [
        UserEntry(uuid="u0", timestamp="t", message=UserMessage(content="x" * 4000)),
        AssistantEntry(
            uuid="a",
            timestamp="t",
            message=AssistantMessage(id="m", content=[{"type": "text", "text": "y"}], usage=usage),
        ),
        UserEntry(uuid="u1", timestamp="t", message=UserMessage(content="z" * 300)),
    ]
    assert context_tokens(entries) == 1150 + math.ceil(75 * 4 / 3)


def test_without_usage_everything_is_estimated() -> None:
    entries = [UserEntry(uuid="u", timestamp="t", message=UserMessage(content="x" * 400))]
    assert context_tokens(entries) == math.ceil(100 * 4 / 3)


def test_thresholds_match_the_spec_for_a_200k_window() -> None:
    config = Config()
    assert (config.effective_window, config.autocompact_threshold) == (180_000, 167_000)
    assert (config.warning_threshold, config.blocking_limit) == (147_000, 177_000)


def test_an_unanchored_count_adds_the_system_prompt_and_tools_the_usage_would_have_covered() -> None:
    entries = [UserEntry(uuid="u", timestamp="t", message=UserMessage(content="x" * 400))]
    tools = [{"name": "Read", "description": "d" * 396, "input_schema": {"type": "object"}}]
    fixed = estimate_fixed("s" * 800, tools)
    assert fixed > math.ceil((200 + 100) * 4 / 3)  # system and the tool's JSON, padded
    count = context_count(entries, unanchored_base=fixed)
    assert count == ContextCount(0, fixed + math.ceil(100 * 4 / 3))
    # An anchored count already has them inside the usage: the base is not added twice.
    usage = Usage(input_tokens=5000, output_tokens=10)
    reply = AssistantEntry(uuid="a", timestamp="t", message=AssistantMessage(id="m", content=[], usage=usage))
    assert context_count([*entries, reply], unanchored_base=fixed) == ContextCount(5010, 0)


def test_the_pessimistic_count_inflates_only_the_estimated_part() -> None:
    count = ContextCount(anchored=100_000, estimated=10_000)
    assert count.total == 110_000
    assert count.pessimistic(1.5) == 115_000
    assert ContextCount(0, 10_000).pessimistic(1.5) == 15_000
