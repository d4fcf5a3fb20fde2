"""Extractive summaries: how the simulated model answers a compaction request.

A compaction instruction (AutoCompact's summary prompt, the ctx-agent's span prompt) asks for
sections as `## Title` lines after a lead sentence that mentions sections. The answer has exactly
those headings, in order, each followed by lines copied from the request itself. Nothing is
invented: every body line is a substring of a text the request carries (a text block, a tool
result, a tool call's string input), which is what lets a test prove that a summary holds only
what the request held, and what makes planted facts survive compaction exactly when the
request still showed them.

The request is read generically (no import of the client's prompt module: the server shares no
code with the side that builds requests), so any instruction of that shape gets a usable answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from foldline.server.backend import text_of
from foldline.server.config import SimulatedConfig

__all__ = ["Item", "build_summary", "items_of", "requested_sections", "span_bounds"]

_HEADING = re.compile(r"^## (.+?)\s*$")
_TAG = re.compile(r"\[id:([0-9a-z]+)\]")
_TAG_BLOCK = re.compile(r"^\s*(?:\[id:[0-9a-z]+\]\s*)+$")
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_FACT = re.compile(r"\bthe [\w' -]+? is \w", re.IGNORECASE)
_FACT_LINE = re.compile(r"^the [\w' -]+? is \S+\.$", re.IGNORECASE)
"""A tool-output line that is one plain statement ("the stress test seed is 48213."): kept as a fact."""
_ERROR = re.compile(r"error|fail|traceback|exception", re.IGNORECASE)


def requested_sections(prompt: str) -> list[str]:
    """The `## Title` lines that follow the first line mentioning sections ([] when none)."""
    lines = prompt.splitlines()
    for i, line in enumerate(lines):
        if "section" not in line.lower():
            continue
        titles: list[str] = []
        for after in lines[i + 1 :]:
            match = _HEADING.match(after)
            if match:
                titles.append(match.group(1))
            elif titles or after.strip():
                break
        if titles:
            return titles
    return []


@dataclass(frozen=True, slots=True)
class Item:
    """One text of the request, with where it came from."""

    message: int
    kind: str
    """`prompt` (a user's typed text), `assistant`, `result` (a tool result) or `input` (a tool call's)."""
    text: str


def items_of(messages: Sequence[dict[str, Any]]) -> Iterator[Item]:
    """Every text of `messages`, in order (tag blocks and system reminders left out of prompts)."""
    for index, message in enumerate(messages):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        user = message.get("role") == "user"
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                text = str(block.get("text", ""))
                if user and _TAG_BLOCK.match(text):
                    continue
                if user:
                    for part in _REMINDER.split(text):
                        if part.strip():
                            yield Item(index, "prompt", part)
                else:
                    yield Item(index, "assistant", text)
            elif kind == "tool_result":
                yield Item(index, "result", text_of(block.get("content")))
            elif kind == "tool_use":
                tool_input = block.get("input")
                for value in tool_input.values() if isinstance(tool_input, dict) else ():
                    if isinstance(value, str):
                        yield Item(index, "input", value)


def span_bounds(messages: Sequence[dict[str, Any]], instruction: str) -> tuple[int, int]:
    """The message range a span instruction names by its first and last `[id:...]` tags.

    Without two tags, or when a tag is not found, the whole conversation before the instruction.
    """
    end = len(messages) - 1
    tags = _TAG.findall(instruction)
    if len(tags) < 2:
        return 0, end
    first, last = tags[0], tags[-1]
    where: dict[str, int] = {}
    for index, message in enumerate(messages[:end]):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                for tag in _TAG.findall(str(block.get("text", ""))):
                    where.setdefault(tag, index)
    if first not in where or last not in where or where[first] > where[last]:
        return 0, end
    return where[first], where[last] + 1


def _lines(text: str, limit: int) -> Iterator[str]:
    for line in text.splitlines():
        line = line.strip()
        if line:
            yield line[:limit]


def _sentences(text: str) -> Iterator[str]:
    for match in _SENTENCE.finditer(text):
        sentence = match.group().strip()
        if sentence:
            yield sentence


def _pick(title: str, items: list[Item], config: SimulatedConfig) -> list[str]:
    """The lines for one section, by what its title asks for."""
    name = title.lower()
    width = config.summary_line_chars
    prompts = [i for i in items if i.kind == "prompt"]
    answers = [i for i in items if i.kind == "assistant"]
    out: list[str] = []
    if "user" in name:
        out = [line for i in prompts for line in list(_lines(i.text, width))[:2]]
    elif "fact" in name or "concept" in name:
        out = [s for i in prompts for s in _sentences(i.text) if _FACT.search(s)]
        out += [
            line
            for i in items
            if i.kind == "result"
            for line in _lines(i.text, width)
            if _FACT_LINE.match(line)
        ]
        out += [line for i in answers[-3:] for line in _lines(i.text, width)][:4]
    elif "request" in name or "intent" in name or name == "task":
        out = [line for i in prompts[:1] + prompts[-1:] for line in _lines(i.text, width)]
    elif "file" in name:
        out = [line for i in items if i.kind == "input" for line in list(_lines(i.text, width))[:1]]
    elif "error" in name:
        out = [
            line for i in items if i.kind == "result" for line in _lines(i.text, width) if _ERROR.search(line)
        ]
    elif "pending" in name or "next" in name:
        out = [line for i in prompts[-1:] for line in _lines(i.text, width)]
    elif "current" in name or "outcome" in name:
        out = [line for i in answers[-3:] for line in _lines(i.text, width)]
    else:
        out = [line for i in answers for line in list(_lines(i.text, width))[:1]]
    unique = list(dict.fromkeys(out))
    return (
        unique[-config.summary_lines_per_section :]
        if "current" in name
        else unique[: config.summary_lines_per_section]
    )


def build_summary(
    messages: Sequence[dict[str, Any]], instruction: str, sections: Sequence[str], config: SimulatedConfig
) -> str:
    """The summary reply: each requested `## Title`, then lines copied from the request's own text.

    Args:
        messages: The request's messages; the last one carries the instruction.
        instruction: The instruction's text (its `[id:...]` tags bound a span summary).
        sections: The titles the instruction asks for, in order.
        config: Line and section limits.
    """
    start, stop = span_bounds(messages, instruction)
    items = [i for i in items_of(messages[start:stop]) if i.text.strip()]
    parts = []
    for title in sections:
        body = _pick(title, items, config)
        parts.append(f"## {title}\n" + "\n".join(body))
    return "\n\n".join(parts) + "\n"
