"""The compaction instructions name their sections, and a reply is usable only in that shape."""

from __future__ import annotations

from foldline.compact.prompts import (
    SPAN_SECTIONS,
    SUMMARY_SECTIONS,
    parse_sections,
    requested_sections,
    span_prompt,
    summary_prompt,
)


def test_each_prompt_lists_the_sections_it_asks_for() -> None:
    assert requested_sections(summary_prompt()) == list(SUMMARY_SECTIONS)
    assert requested_sections(span_prompt("a1", "b2")) == list(SPAN_SECTIONS)
    assert requested_sections("Summarize please.") == []


def test_user_instructions_follow_the_sections_without_adding_one() -> None:
    prompt = summary_prompt("## Focus on the database work")
    assert prompt.endswith("## Focus on the database work")
    assert requested_sections(prompt) == list(SUMMARY_SECTIONS)


def test_a_reply_with_every_heading_in_order_parses_to_its_sections() -> None:
    reply = "\n".join(f"## {title}\ntext of {title}" for title in SPAN_SECTIONS)
    assert parse_sections(reply, SPAN_SECTIONS) == {t: f"text of {t}" for t in SPAN_SECTIONS}


def test_missing_reordered_or_empty_sections_are_not_a_summary() -> None:
    missing = "## Task\nx\n## Outcome\ny"
    reordered = "## Outcome\ny\n## Task\nx\n## Facts to Keep\nz"
    empty = "## Task\n## Outcome\n## Facts to Keep\n"
    for reply in (missing, reordered, empty, ""):
        assert parse_sections(reply, SPAN_SECTIONS) is None


def test_a_quoted_heading_stays_inside_its_section() -> None:
    reply = "## Task\nsummary of a summary:\n## Task\nold\n## Outcome\ny\n## Facts to Keep\nz"
    parsed = parse_sections(reply, SPAN_SECTIONS)
    assert parsed is not None
    assert parsed["Task"] == "summary of a summary:\n## Task\nold"
    assert parsed["Facts to Keep"] == "z"
