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

Summaries may be lossy (`SimulatedConfig.summary_fidelity` q, `summary_fact_budget`;
`dropped_statements`): each statement the rules above keep survives with probability q, drawn from
the seed, the statement and the summarized content (`summary_key`), never from the request's words;
the budget then keeps the most recent ones. A lost statement is taken out of every text before the
lines are chosen, so it is gone from the whole summary while the rest of each line stays. At q = 1
with the budget not reached nothing is lost and the summary is what the rules above give.

The request is read generically (no import of the client's prompt module: the server shares no code
with the side that builds requests).
"""

from __future__ import annotations

import hashlib
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
    "dropped_statements",
    "items_of",
    "kept_lines",
    "lost_in_progress",
    "progress_line",
    "read_progress",
    "span_bounds",
    "statement_of",
    "statements",
    "summary_key",
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
_ESCAPED_RUN = re.compile(r"(?:\\u[0-9a-f]{4})+")
"""A sentence `progress_line` wrote as escapes (`dumps` writes none: it leaves text as UTF-8)."""
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


def progress_line(prompt: str, rounds: int, dropped: frozenset[str] = frozenset()) -> str:
    """The line a summary ends with when it covers a request still being worked on: the request,
    verbatim, and how many tool rounds of it are done. A model's summary says what it is working on
    and how far it got; a client that compacts in the middle of a turn hands this back in whatever
    message and wording it likes, and the work goes on where it stopped (`read_progress`).

    A sentence of the request that states one of the `dropped` statements is written as JSON
    `\\uXXXX` escapes: the request still reads back whole (the turn is the same turn, with the same
    work), but the line states nothing a reader can find, so a fact the summary lost stays lost."""
    rounds_done = f"{rounds} tool round{'s' if rounds != 1 else ''}"
    quoted = dumps(prompt).decode()
    for sentence in _sentences(prompt):
        if statement_of(sentence) in dropped:
            quoted = quoted.replace(dumps(sentence).decode()[1:-1], _escaped(sentence), 1)
    return f"Work in progress: {rounds_done} done on the request {quoted}."


def lost_in_progress(text: str) -> frozenset[str]:
    """The statements the last `progress_line` in `text` writes as escapes: what the summary lost of
    the request it carries. A later summary of the same turn keeps them lost, and the model's answer
    does not repeat them."""
    found = None
    for match in _PROGRESS.finditer(text):
        found = match
    if found is None:
        return frozenset()
    runs = [run for raw in _ESCAPED_RUN.findall(found.group(2)) if isinstance(run := loads(f'"{raw}"'), str)]
    return frozenset(s for run in runs for sentence in _sentences(run) if (s := statement_of(sentence)))


def _escaped(text: str) -> str:
    """`text` as JSON `\\uXXXX` escapes, every character (UTF-16 pairs past the BMP)."""
    units = text.encode("utf-16-be")
    return "".join(f"\\u{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2))


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


def statement_of(sentence: str) -> str | None:
    """The statement `sentence` makes ("Note for later: the Port is 6543." -> "the port is 6543"), in
    one normal form whoever wrote it and wherever; None when it states nothing."""
    match = _FACT.search(sentence)
    if match is None:
        return _normal(sentence) if _FACT_LINE.match(sentence.strip()) else None
    return _normal(sentence[match.start() :])


def _normal(text: str) -> str:
    return " ".join(text.split()).lower().rstrip(".!? ")


def statements(items: Sequence[Item], config: SimulatedConfig) -> list[str]:
    """Every statement the summary rules keep as a fact (`kept_lines`), normalized, in content order
    (repeats included): a one-statement line of a tool result, a statement sentence of a typed
    prompt or an assistant's text. The rules do not know which statements were planted."""
    width = config.summary_line_chars
    found: list[str] = []
    for item in items:
        if item.kind == "result":
            found += [_normal(line) for line in _lines(item.text, width) if _FACT_LINE.match(line)]
        elif item.kind in ("prompt", "assistant"):
            found += [s for s in map(statement_of, _sentences(item.text)) if s is not None]
    return found


def summary_key(items: Sequence[Item], instruction: str) -> str:
    """The summary request's key: a digest of the summarized messages' texts (`items`), each with its
    `[id:...]` tags and system reminders taken out, its whitespace and case folded. The instruction's
    wording, the system prompt, the tools and the client never enter it, so the same content loses
    the same facts however the request is worded; different content draws afresh. A request whose
    messages hold nothing to summarize carries its content in the instruction itself (OpenHands
    sends the forgotten events as text after its own words), and the instruction is then the key."""
    texts = [text for i in items if (text := _folded(i.text))] or [_folded(instruction)]
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode() + b"\0")
    return digest.hexdigest()


def _folded(text: str) -> str:
    return " ".join(_REMINDER.sub(" ", _TAG.sub(" ", text)).split()).lower()


def _survives(seed: int, statement: str, key: str, fidelity: float) -> bool:
    digest = hashlib.sha256(f"{seed}\0{statement}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fidelity


def dropped_statements(items: Sequence[Item], seed: int, config: SimulatedConfig, key: str) -> frozenset[str]:
    """The statements of `items` this summary loses: each independently with probability 1 -
    `summary_fidelity`, drawn from (seed, statement, `key`: `summary_key`), so a statement repeated
    in the content shares one fate; then, of the survivors, all but the `summary_fact_budget` stated
    most recently."""
    order = list(dict.fromkeys(reversed(statements(items, config))))  # the most recent first
    if config.summary_fidelity >= 1.0 and len(order) <= config.summary_fact_budget:
        return frozenset()
    kept = [s for s in order if _survives(seed, s, key, config.summary_fidelity)]
    return frozenset(order) - set(kept[: config.summary_fact_budget])


def _scrubbed(item: Item, dropped: frozenset[str], width: int) -> str:
    """`item`'s text without the sentences (or, in a tool result, the one-statement lines) that state
    a `dropped` statement; the rest of the text as it was."""

    def sentence(match: re.Match[str]) -> str:
        return "" if statement_of(match.group()) in dropped else match.group()

    lines = []
    for line in item.text.splitlines(keepends=True):
        head = line.strip()[:width]
        if item.kind == "result" and _FACT_LINE.match(head) and _normal(head) in dropped:
            continue
        lines.append(_SENTENCE.sub(sentence, line))
    return "".join(lines)


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
    progress: tuple[str, int] | tuple[str, int, frozenset[str]] | None = None,
    seed: int = 0,
) -> str:
    """The summary reply: the kept lines (`kept_lines`), under each requested `## Title` when any.

    Args:
        messages: The request's messages; the last one carries the instruction.
        instruction: The instruction's text (its `[id:...]` tags bound a span summary; statements in
            it, such as a summarizer's embedded events or the user's own notes, count as content).
        sections: The titles the instruction asks for, in order (may be empty).
        config: Line limits, and how lossy the summary is (`summary_fidelity`,
            `summary_fact_budget`: `dropped_statements`).
        progress: The request the covered messages leave in progress and its tool rounds done
            (`progress_line`), and the statements of it an earlier summary lost, or None when they
            end with an answer.
        seed: The server's seed: with the content, it decides which statements a lossy summary loses.
    """
    start, stop = span_bounds(messages, instruction)
    # an earlier summary's progress line is no content: only this summary's own says where work stands
    items = [
        Item(i.message, i.kind, text)
        for i in items_of(messages[start:stop])
        if (text := _PROGRESS.sub("", i.text)).strip()
    ]
    key = summary_key(items, _PROGRESS.sub("", instruction))
    items += [
        Item(len(messages) - 1, "prompt", s)
        for s in _sentences(_PROGRESS.sub("", instruction))
        if _FACT.search(s) and not _TAG.search(s) and not any(ask.search(s) for ask in _ASKS)
    ]
    dropped = dropped_statements(items, seed, config, key)
    if dropped:  # a lost statement is lost from every line that carried it, not only the facts
        width = config.summary_line_chars
        items = [Item(i.message, i.kind, t) for i in items if (t := _scrubbed(i, dropped, width)).strip()]
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
        lost = progress[2] if len(progress) == 3 else frozenset()
        text += progress_line(progress[0], progress[1], dropped | lost) + "\n"
    if _SUMMARY_TAGS.search(instruction):
        text = f"<summary>\n{text}</summary>\n"
    return text
