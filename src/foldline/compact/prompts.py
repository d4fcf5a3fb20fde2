"""The instructions foldline sends the model when it asks for compaction work (design.md §3).

Three texts live here so that the levels that send them and the simulated model that answers them
(`foldline.server.simulated`) agree on one wording:

- `summary_prompt()`: AutoCompact's full-compaction instruction (R3.4.3), nine sections.
- `span_prompt()`: the ctx-agent's instruction to summarize one finished span (R3.3.1), which the
  span's first and last `[id:...]` tags delimit.
- `snip_nudge()`: the reminder that the context is filling and the Snip tool may be used (R3.1).

Every summary reply has the same shape: one `## <title>` heading per requested section, in the
order asked, each followed by its text. `parse_sections` reads that shape back and is what decides
whether a reply is a usable summary (R3.4.9: an empty or malformed summary is a failure).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = [
    "SPAN_SECTIONS",
    "SUMMARY_SECTIONS",
    "parse_sections",
    "read_summary",
    "requested_sections",
    "snip_nudge",
    "span_prompt",
    "summary_prompt",
]

SUMMARY_SECTIONS: tuple[str, ...] = (
    "Primary Request and Intent",
    "Key Technical Concepts",
    "Files and Code Sections",
    "Errors and Fixes",
    "Problem Solving",
    "All User Messages",
    "Pending Tasks",
    "Current Work",
    "Optional Next Step",
)
"""The nine sections of a full compaction summary, in order (R3.4.3)."""

SPAN_SECTIONS: tuple[str, ...] = ("Task", "Outcome", "Facts to Keep")
"""The sections of a ctx-agent span summary."""

_SECTIONS_LEAD = "Answer with exactly these sections, each under its own `## ` heading, in this order:"
_HEADING = re.compile(r"^## (.+?)\s*$", re.MULTILINE)


def _section_list(sections: Sequence[str]) -> str:
    return "\n".join(f"## {title}" for title in sections)


def summary_prompt(instructions: str = "") -> str:
    """The full-compaction instruction, sent as the last user message of a forked request (R3.4.3).

    Args:
        instructions: What the user added to `/compact` (kept verbatim, after the sections).
    """
    text = (
        "Your task is to write a detailed summary of the conversation so far. It replaces the "
        "conversation: whoever continues the work will see only your summary, so keep every fact, "
        "decision, file name, error and user request needed to carry on, and quote the user's own "
        "words where they matter. Use only what is in this conversation; do not call any tools.\n\n"
        f"{_SECTIONS_LEAD}\n{_section_list(SUMMARY_SECTIONS)}"
    )
    if instructions.strip():
        text += f"\n\nAdditional instructions from the user:\n{instructions.strip()}"
    return text


def span_prompt(first_tag: str, last_tag: str) -> str:
    """The ctx-agent's instruction to summarize the messages from `[id:first_tag]` to `[id:last_tag]`.

    The tags are the short ids the request already carries (R3.1.1), so the span is named by text the
    model can see rather than by positions it cannot.
    """
    return (
        f"Summarize only the finished part of this conversation that starts at the message tagged "
        f"[id:{first_tag}] and ends at the message tagged [id:{last_tag}] (both included). The summary "
        "will replace that part; keep every fact, file name, decision and user statement from it that "
        "later work may need. Do not call any tools.\n\n"
        f"{_SECTIONS_LEAD}\n{_section_list(SPAN_SECTIONS)}"
    )


def span_prompt_by_words(first_words: str, last_words: str) -> str:
    """`span_prompt` for requests that carry no `[id:…]` tags (a small window, no Snip tool): the span
    named by the opening words of its first and last user-side messages."""
    return (
        "Summarize only the finished part of this conversation that starts at the message beginning "
        f"{first_words!r} and ends at the message beginning {last_words!r} and the reply to it (all "
        "included). The summary will replace that part; keep every fact, file name, decision and user "
        "statement from it that later work may need. Do not call any tools.\n\n"
        f"{_SECTIONS_LEAD}\n{_section_list(SPAN_SECTIONS)}"
    )


def snip_nudge(percent_full: int) -> str:
    """The reminder appended when Snip is enabled and the context passes the configured share (R3.1)."""
    return (
        f"<system-reminder>The context is {percent_full}% full. You can remove messages you no longer "
        "need, such as bulky tool output that has served its purpose, by calling the Snip tool with "
        "the short ids from their [id:...] tags.</system-reminder>"
    )


def requested_sections(prompt: str) -> list[str]:
    """The section titles a summary instruction asks for, in order ([] when it asks for none)."""
    lead = prompt.find(_SECTIONS_LEAD)
    if lead < 0:
        return []
    listing = prompt[lead + len(_SECTIONS_LEAD) :].split("\n\n", 1)[0]
    return _HEADING.findall(listing)


def parse_sections(reply: str, sections: Sequence[str]) -> dict[str, str] | None:
    """The reply's text per requested section, or None when the reply is not a usable summary.

    Usable: every requested heading is present, in order, and at least one section has text. Each
    heading is the first match after the previous one, so a body that quotes a heading (a summary of
    a conversation that already holds a summary) stays inside its section instead of breaking it.
    """
    found = [(m.group(1), m.start(), m.end()) for m in _HEADING.finditer(reply)]
    marks: list[tuple[str, int, int]] = []
    at = 0
    for title in sections:
        match = next(((t, start, end) for t, start, end in found[at:] if t == title), None)
        if match is None:
            return None
        marks.append(match)
        at = found.index(match) + 1
    out: dict[str, str] = {}
    for i, (title, _, end) in enumerate(marks):
        stop = marks[i + 1][1] if i + 1 < len(marks) else len(reply)
        out[title] = reply[end:stop].strip()
    return out if any(out.values()) else None


def read_summary(reply: str, sections: Sequence[str], *, free: bool) -> dict[str, str] | None:
    """`parse_sections`, or with `free` (`Config.summary_format == "free"`) a reply without the
    sections taken whole as the first one: a small local model cannot follow the format, and what it
    wrote is still its reading of the conversation. An empty reply is never a summary."""
    parsed = parse_sections(reply, sections)
    if parsed is not None or not free or not reply.strip():
        return parsed
    return {title: (reply.strip() if i == 0 else "") for i, title in enumerate(sections)}
