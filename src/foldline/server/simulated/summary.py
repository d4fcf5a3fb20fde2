"""Extractive summaries: how the simulated model answers a compaction request, in any wording.

A summary request is recognised by what it asks (`summary_request`), whatever the words: a
summarizing verb about the conversation, the session or the work so far ("Condense this session");
a summary, hand-off, prompt or notes made of it or for someone carrying it on ("Write a prompt that
lets another agent continue"); a state kept from the events ("You keep a state summary for an
agent"); or a list of sections a summary keeps (`COMPLETED:`, `PENDING:`, ...) that the text before
them asks to be filled in (foldline's AutoCompact and ctx-agent prompts, opencode's, OpenHands',
Claude Code's, or a bare "Summarize the conversation so far"). A summary handed back after a
compaction asks for nothing: telling ("the conversation was compacted", "the summary below") is not
asking. The sections it asks for (`## Title` headings, numbered items, `UPPER_CASE:` keys) shape
only the layout of the answer.

What the answer keeps is decided from the content alone, never from the section titles, their order
or their number (`kept_lines`):

- every plain statement anyone made ("the staging port is 6543."): in what the user typed, in an
  assistant's text, in a tool result's line that is one plain statement, in a previous summary or a
  folded span (they are text like any other, so recursive summaries carry facts forward), the most
  recent ones first when there are too many;
- what the user asked: the first prompt and the most recent ones;
- what the work touched: tool calls' inputs (paths, commands, patterns), error lines of results;
- what the assistant said last, and the first line of its earlier answers;
- every statement of earlier work, in any text but a tool's own output (`work_sentences`): a
  decision ("keep the X as V, not W"), a fix that names the file it changed, a run that names the
  one test it failed. A previous summary handed back is such a text, so the work it kept is kept
  again, the most recent first when there is too much: a client that compacts twice loses no more
  of it than one that compacts once.

The kept lines are then laid out under the requested headings by how well each group fits a title;
a group that fits none goes under the last one. Nothing is invented: every body line is a substring
of a text the request carries, which is what lets a test prove that a summary holds only what the
request held, and what makes planted facts survive compaction exactly when the request still showed
them. The one exception is the last line of a summary that covers a request still being worked on
(`progress_line`): the request, verbatim, and how many tool rounds of it are done, so that a
compaction inside a turn neither shortens nor lengthens the turn's work (the model reads it back,
`read_progress`). An earlier summary's progress line is never copied: it may be stale.

The request is read generically (no import of the client's prompt module: the server shares no code
with the side that builds requests).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from foldline._json import dumps, loads
from foldline.server.backend import text_of
from foldline.server.config import SimulatedConfig

__all__ = [
    "Item",
    "build_summary",
    "items_of",
    "kept_lines",
    "progress_line",
    "read_progress",
    "span_bounds",
    "summary_request",
    "work_sentences",
]

_TAG = re.compile(r"\[id:([0-9a-z]+)\]")
_TAG_BLOCK = re.compile(r"^\s*(?:\[id:[0-9a-z]+\]\s*)+$")
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]?")
_FACT = re.compile(r"\bthe [\w' -]+? is \w", re.IGNORECASE)
_FACT_LINE = re.compile(r"^the [\w' -]+? is \S+\.$", re.IGNORECASE)
"""A tool-output line that is one plain statement ("the stress test seed is 48213."): kept as a fact."""
_ERROR = re.compile(r"error|fail|traceback|exception", re.IGNORECASE)
_DECIDED = re.compile(r"\bkeep the [\w' -]+? as .+?, not ", re.IGNORECASE)
_FIXED = re.compile(r"\bfix(?:ed|es|ing)?\b", re.IGNORECASE)
_SOURCE = re.compile(r"[\w./-]+\.py\b")
_FAILED_TEST = re.compile(r"\bfail.*\btest_\w+ \([\w.]+\)|\btest_\w+ \([\w.]+\).*\bfail", re.IGNORECASE)
_WORK_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n")
"""Where a statement of work ends: as `earlier.py` splits a text, so a kept one reads back whole."""

_SUMMARIZE = (
    r"\b(?:summari[sz](?:e|es|ing)|condens(?:e|es|ing)|recap(?:s|ping)?|distil(?:l|ls|ling)?|"
    r"digest(?:s|ing)?|compress(?:es|ing)?|sum(?:s|ming)?\s+up|boil(?:s|ing)?\s+down|abridg(?:e|es|ing))\b"
)
"""Verbs that ask for a summary (never their `-ed` form: "the conversation was compacted" tells,
it does not ask)."""
_MAKE = (
    r"\b(?:write|create|produce|provide|give|generate|prepare|draft|compose|output|return|emit|"
    r"maintain\w*|keep|keeps|keeping|track|update|record|make|build|leave|hand over|put together|"
    r"reply with|respond with)\b"
)
_PRODUCT = (
    r"\b(?:summary|summaries|recap|synopsis|digest|overview|hand-?off|memento|checkpoint|snapshot|"
    r"brief(?:ing)?|prompt|notes?|memo|state summary)\b"
)
"""What a summary request asks to be made, whatever it calls it."""
_TOPIC = (
    r"\b(?:conversation|chat|dialog(?:ue)?|exchange|interaction|so far|above|up to (?:now|here|this point)|"
    r"until now|history|session|context|thread|transcript|events?|span|messages|discussion|work|"
    r"progress|part|agent|llm|previous summary|what (?:we|you|i) (?:did|have done|'ve done|accomplished|"
    r"finished))\b"
)
"""What a summary is of: the conversation, the session, the work so far, whoever words it."""
_ONWARD = (
    r"\b(?:continu\w*|resum\w*|carr(?:y|ies) on|pick(?:s)? up|take(?:s)? over|left off|"
    r"(?:next|another|fresh|new|future) (?:agent|model|llm|assistant|instance|session|developer|engineer))\b"
)
"""What a hand-off is for: someone carrying the work on."""
_STATE = (
    r"(?:(?<=[.?!\n])|^)(?=[^.?!\n]*?\b(?:agent|events?|conversation|session|history|progress|work|so far)\b)"
    r"[^.?!\n]*?\b(?:keep|keeps|keeping|maintain\w*|track\w*|record\w*|update\w*|hold\w*)\b(?!\s+down)"
    r"[^.?!\n]{0,60}?\b(?:state(?!\s+machine)|running (?:record|notes|log|summary)|(?:agent's|its) memory)\b"
)
"""A state-keeping request, in a sentence about the agent, the events or the work: "keep the
agent's state from the events", "maintain a running record of the session"."""
_ASKS: tuple[re.Pattern[str], ...] = (
    re.compile(_SUMMARIZE + r"[^.?!\n]*?" + _TOPIC + "|" + _TOPIC + r"[^.?!\n]*?" + _SUMMARIZE, re.I),
    re.compile(_MAKE + r"[^.?!\n]{0,60}?" + _PRODUCT + r"[^.?!\n]*?(?:" + _TOPIC + "|" + _ONWARD + ")", re.I),
    re.compile(r"\bprompt for continu\w+", re.I),
    re.compile(_STATE, re.I | re.M),
)
"""What a summary request asks for, in any of the wordings agents use: a summarizing verb about the
conversation, a summary (or hand-off, prompt, notes) made of it or for carrying it on, a state kept
from the events (each within one sentence)."""
_DIRECTIVE = re.compile(
    r"(?:^|[.!?:;]\s+|\n\s*)(?:please\s+)?(?:track|record|fill|note|list|use|follow|keep|maintain|update|"
    r"write|give|provide|output|produce|return|cover|include)\b|\byour? (?:task|job|role|are to|will|must|"
    r"should|keep|maintain|track)\b",
    re.I,
)
_SUMMARY_WORD = re.compile(
    r"\b(?:summary|summari[sz]\w*|state|events?|history|conversation|session|so far|progress)\b", re.I
)
_STRUCTURED_MIN = 3
"""Sections a structured request lists that fit what a summary keeps (USER_CONTEXT, COMPLETED, ...)."""
_PROGRESS = re.compile(
    r"^Work in progress: (\d+) tool rounds? done on the request (\"(?:[^\"\\\n]|\\.)*\")\.$", re.M
)
"""The summary's one line that is not extractive (`progress_line`)."""
_MD_HEADING = re.compile(r"^\s*#{1,4}\s+(.+?)\s*#*\s*$")
_NUMBERED = re.compile(r"^\s*(\d{1,2})[.)]\s+\**([A-Z][^:*\n]{1,60}?)\**\s*(?::|$)")
_KEY = re.compile(r"^\s*([A-Z][A-Z_ ]{2,40}[A-Z]):")
_SUMMARY_TAGS = re.compile(r"<summary>", re.IGNORECASE)


def summary_request(prompt: str) -> list[str] | None:
    """The section titles a summary request asks for ([] when it asks for none), or None when
    `prompt` is no summary request."""
    sections = requested_sections(prompt)
    if any(ask.search(prompt) for ask in _ASKS) or _structured_request(prompt, sections):
        return sections
    return None


def _structured_request(prompt: str, sections: Sequence[str]) -> bool:
    """Whether `prompt` asks, before the sections it lists, for those sections to be filled in, and
    enough of them are what a summary keeps (a state to track: `USER_CONTEXT:`, `COMPLETED:`, ...).

    Only the text before the first listed section counts as the ask: a summary handed back after a
    compaction lists the same kind of sections, filled with lines of the conversation that may
    start with any verb."""
    fitting = [t for t in sections if any(_title_words(t) & words for words in _GROUPS.values())]
    if len(fitting) < _STRUCTURED_MIN:
        return False
    first = min(
        (i for i, line in enumerate(prompt.splitlines()) if any(t in line for t in sections)), default=0
    )
    preamble = "\n".join(prompt.splitlines()[:first])
    return bool(_DIRECTIVE.search(preamble)) and (
        bool(_SUMMARY_WORD.search(preamble)) or len(fitting) > _STRUCTURED_MIN
    )


def requested_sections(prompt: str) -> list[str]:
    """The sections `prompt` lists, in order: markdown headings, else numbered items, else
    `UPPER_CASE:` keys ([] when it lists none)."""
    lines = prompt.splitlines()
    for pattern, group in ((_MD_HEADING, 1), (_NUMBERED, 2), (_KEY, 1)):
        titles = [m.group(group).strip() for line in lines if (m := pattern.match(line))]
        if pattern is _NUMBERED:
            numbers = [int(m.group(1)) for line in lines if (m := pattern.match(line))]
            if numbers[:1] != [1]:
                continue  # a numbered list of sections starts at 1
        titles = list(dict.fromkeys(t for t in titles if t))
        if titles:
            return titles
    return []


def progress_line(prompt: str, rounds: int) -> str:
    """The line a summary ends with when it covers a request still being worked on: the request,
    verbatim, and how many tool rounds of it are done. A model's summary says what it is working on
    and how far it got; a client that compacts in the middle of a turn hands this back in whatever
    message and wording it likes, and the work goes on where it stopped (`read_progress`)."""
    rounds_done = f"{rounds} tool round{'s' if rounds != 1 else ''}"
    return f"Work in progress: {rounds_done} done on the request {dumps(prompt).decode()}."


def read_progress(text: str) -> tuple[str, int] | None:
    """The request in progress and its rounds done that the last `progress_line` in `text` states."""
    found = None
    for match in _PROGRESS.finditer(text):
        found = match
    if found is None:
        return None
    prompt = loads(found.group(2))
    return (prompt, int(found.group(1))) if isinstance(prompt, str) else None


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


_GROUPS: dict[str, frozenset[str]] = {
    "facts": frozenset(
        "fact facts concept concepts key keep knowledge discover discoveries discovered note notes "
        "information technical remember context details state".split()
    ),
    "requests": frozenset(
        "user users request requests intent goal goals task tasks instruction instructions message "
        "messages ask asked primary requirements".split()
    ),
    "files": frozenset("file files code sections directory directories relevant changes paths".split()),
    "errors": frozenset(
        "error errors fix fixes problem problems issue issues failure failures tests".split()
    ),
    "recent": frozenset(
        "current work progress outcome status accomplished completed done next pending step steps".split()
    ),
    "answers": frozenset("solving approach decision decisions findings result results summary".split()),
    "work": frozenset("fix fixes fixed decision decisions changes made errors failures".split()),
}
"""The words of a section title that each group of kept lines fits (layout only: what is kept does
not depend on them)."""


def kept_lines(items: Sequence[Item], config: SimulatedConfig) -> dict[str, list[str]]:
    """The lines a summary keeps, by group, decided from the content alone (see the module docstring).

    Every group has its own cap, from `config`, independent of how many sections are asked for.
    """
    width = config.summary_line_chars
    cap = config.summary_lines_per_section
    prompts = [i for i in items if i.kind == "prompt"]
    answers = [i for i in items if i.kind == "assistant"]
    facts: list[str] = []
    for item in items:
        if item.kind == "result":
            facts += [line for line in _lines(item.text, width) if _FACT_LINE.match(line)]
        elif item.kind in ("prompt", "assistant"):
            facts += [s[:width] for s in _sentences(item.text) if _FACT.search(s)]
    facts = list(dict.fromkeys(reversed(facts)))[:cap][::-1]  # the most recent statements win
    asked = prompts[:1] + prompts[1:][-(cap // 2 - 1) :] if len(prompts) > 1 else prompts
    requests = [line for i in asked for line in list(_lines(i.text, width))[:2]]
    files = [line for i in items if i.kind == "input" for line in list(_lines(i.text, width))[:1]]
    errors = [
        line for i in items if i.kind == "result" for line in _lines(i.text, width) if _ERROR.search(line)
    ]
    recent = [line for i in answers[-3:] for line in _lines(i.text, width)]
    work = [s[:width] for i in items if i.kind in ("prompt", "assistant") for s in work_sentences(i.text)]
    earlier = [line for i in answers for line in list(_lines(i.text, width))[:1]]
    groups = {
        "facts": facts,
        "requests": requests,
        "files": files,
        "errors": errors,
        "recent": recent[-cap:],
        "answers": earlier,
        "work": list(dict.fromkeys(reversed(work)))[:cap][::-1],  # the most recent work wins
    }
    return {
        name: list(dict.fromkeys(lines))[:cap] if name != "recent" else lines
        for name, lines in groups.items()
    }


def work_sentences(text: str) -> list[str]:
    """The sentences of `text` that state earlier work: a decision, a fix naming a source file, a
    run naming a test it failed."""
    return [
        sentence
        for part in _WORK_SENTENCE.split(text)
        if (sentence := part.strip())
        and (
            _DECIDED.search(sentence)
            or (_FIXED.search(sentence) and _SOURCE.search(sentence))
            or _FAILED_TEST.search(sentence)
        )
    ]


def _title_words(title: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]+", title)}


def _layout(sections: Sequence[str]) -> dict[str, int]:
    """Which section each group goes under: the one whose title fits it best, else the last."""
    where: dict[str, int] = {}
    for group, words in _GROUPS.items():
        fits = [len(_title_words(t) & words) for t in sections]
        best = max(fits, default=0)
        where[group] = fits.index(best) if best > 0 else len(sections) - 1
    return where


def build_summary(
    messages: Sequence[dict[str, Any]],
    instruction: str,
    sections: Sequence[str],
    config: SimulatedConfig,
    progress: tuple[str, int] | None = None,
) -> str:
    """The summary reply: the kept lines (`kept_lines`), under each requested `## Title` when any.

    Args:
        messages: The request's messages; the last one carries the instruction.
        instruction: The instruction's text (its `[id:...]` tags bound a span summary; statements in
            it, such as a summarizer's embedded events or the user's own notes, count as content).
        sections: The titles the instruction asks for, in order (may be empty).
        config: Line limits.
        progress: The request the covered messages leave in progress and its tool rounds done
            (`progress_line`), or None when they end with an answer.
    """
    start, stop = span_bounds(messages, instruction)
    # an earlier summary's progress line is no content: only this summary's own says where work stands
    items = [
        Item(i.message, i.kind, text)
        for i in items_of(messages[start:stop])
        if (text := _PROGRESS.sub("", i.text)).strip()
    ]
    items += [
        Item(len(messages) - 1, "prompt", s)
        for s in _sentences(_PROGRESS.sub("", instruction))
        if _FACT.search(s) and not _TAG.search(s) and not any(ask.search(s) for ask in _ASKS)
    ]
    groups = kept_lines(items, config)
    seen: set[str] = set()

    def fresh(lines: Sequence[str]) -> list[str]:
        # each line once; a quoted heading (of a previous summary) is layout, not content
        out = [line for line in dict.fromkeys(lines) if line not in seen and not line.startswith("#")]
        seen.update(out)
        return out

    if sections:
        where = _layout(sections)
        bodies: list[list[str]] = [[] for _ in sections]
        for group, lines in groups.items():
            bodies[where[group]] += lines
        parts = [
            f"## {title}\n" + "\n".join(fresh(body)) for title, body in zip(sections, bodies, strict=True)
        ]
        text = "\n\n".join(parts) + "\n"
    else:
        text = "\n".join(fresh([line for body in groups.values() for line in body])) + "\n"
    if progress is not None:
        text += progress_line(*progress) + "\n"
    if _SUMMARY_TAGS.search(instruction):
        text = f"<summary>\n{text}</summary>\n"
    return text
