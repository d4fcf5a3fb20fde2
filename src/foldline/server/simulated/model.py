"""`SimulatedBackend`: a deterministic stand-in for a coding model, acting only on the request.

Given a request it answers as a coding model would in a real workspace, with whatever tools the
request offers (`toolbox.py` reads them from their names and schemas: foldline's, Claude Code's,
opencode's): a typed prompt becomes rounds of tool calls (a search or a listing to explore, parallel
reads of what they found, shell commands running the tests or searching logs, edits and writes),
then a final answer about what the turn found. Everything it decides comes from the request:

- The current turn starts at the last user message with typed text; the rounds so far are the
  assistant messages with tool calls after it. The number of rounds the turn will take is drawn
  from a seeded hash of the seed and the prompt alone (the simulated user never types the same
  prompt twice, so the prompt is the turn's id), from the measured distribution
  (`SimulatedConfig.round_quantiles`): the work is the user's, whatever a strategy left visible.
- Lost information costs work, the same for every strategy: a file read in full this turn whose
  listing was cleared since is read again (once), and that round does not count as progress.
- Targets come from visible tool results: search output gives paths to read; an edit's old text is
  copied from a visible read of that file in this turn, so it really applies. Search terms are the
  identifiers the prompt names ("Where is add defined?" searches for `add`), never its verbs.
- A summary request, in any wording, gets an extractive, title-blind summary (`summary.py`).
  "What is the X?" is answered from a visible "the X is Y." statement, or with "I don't know" when
  the request shows none.
- When a `<system-reminder>` in the turn invites removing old context (it names the offered Snip
  tool, in any case, or says the context is filling and asks for messages to be removed, in any
  words) and a tool of that purpose is offered (read by description and schema, whatever its
  name), the model snips old bulky tool-result messages by their `[id:...]` tags, by size alone.
- A compaction inside a turn leaves the turn's work as it was: a summary the model writes of a
  request still in progress ends with that request and its rounds done (`summary.progress_line`),
  and the model goes on from there, in whatever message and wording the client hands it back.

Invariants: the same seed and request give the same reply (no clock, no global randomness); the
work per request is bounded by the current turn, except for the rare requests that must look at
everything (a summary, a fact question, a snip); a tool whose purpose the model cannot tell, or a
deferred tool not loaded, is never called.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from foldline._types import Block
from foldline.server.backend import BackendRequest, Reply, text_of
from foldline.server.config import SimulatedConfig
from foldline.server.simulated import earlier
from foldline.server.simulated.summary import (
    build_summary,
    items_of,
    lost_in_progress,
    read_progress,
    span_bounds,
    statement_of,
    summary_request,
)
from foldline.server.simulated.toolbox import Kind, Toolbox

__all__ = ["SimulatedBackend", "draw_quantile", "draw_rounds", "think_time"]

_TAG_BLOCK = re.compile(r"^\s*(?:\[id:[0-9a-z]+\]\s*)+$")
_TAG = re.compile(r"\[id:([0-9a-z]+)\]")
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_QUESTION = re.compile(r"^\s*what (?:is|was) the ([\w' -]+?)\s*\?\s*$", re.IGNORECASE)
_STATEMENT = re.compile(r"\bthe ([\w' -]+?) is (\w[^\n]*?)\.(?=\s|$)", re.IGNORECASE)
_RUN = re.compile(r"\bRun `([^`]+)`")
_ARCHIVE = re.compile(r"\btranscript\b[^\n]{0,200}?\bat:?\s+((?:/|~/)[^\s'\"`<>]+)", re.IGNORECASE)
"""A file named as the conversation's transcript ("read the full transcript at: PATH")."""
_PATH_WORD = re.compile(r"[\w./-]+\.(?:py|md|log|csv|toml|txt|json|cfg|ini|yaml|yml)\b")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_IDENTIFIER = re.compile(
    r"`([^`\s]+)`|\b([A-Za-z]\w*_\w+|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*|[A-Za-z_]\w*\.[A-Za-z_]\w*(?:\(\))?|[A-Za-z]+\d\w*)\b"
)
"""Words that are code, whatever the sentence: `backticked`, snake_case, camelCase, dotted.name, x2."""
_SENTENCE_START = re.compile(r"(?:^|[.?!;:]\s+|\n)\s*([A-Za-z]+)")
_TURN_ID = re.compile(r"\s*\(turn \d+\)\s*$")
_CHANGE = re.compile(
    r"\b(add|fix|write|document|tidy|comment|move|wire|rename|implement|update|change|refactor)\b", re.I
)
_LOGS = re.compile(r"\blogs?\b|\berror|traceback|timeout", re.I)
_DATA = re.compile(r"\.csv\b|\bdata\b|\brows?\b", re.I)
_TESTS = re.compile(r"\btests?\b|suite", re.I)
_STOP = frozenset(
    "what which where when with from that this there their about into then than have does look "
    "check find tell show make sure every each file files code source module modules first whole "
    "still pass passes passing whether anything rest them they same some more most only also just "
    "test tests suite write rename nothing across package imports review keep tidy entry changes "
    "explain interact behaviour behavior investigate reproduce compare group public function functions "
    "read search codebase find look run fix what fail fails failing "
    "the and for but not all any can how why its our you are was has did get set use one two "
    "per via too out now yet who whom whose may might should would could will shall into onto "
    "grep move after before turn where here again please thanks".split()
)
_NOTE = re.compile(r"(?:[\w ]+:\s*)?\bthe [\w' -]+? is \w[^\n]*?\.(?=\s|$)", re.IGNORECASE)
_ASKS = re.compile(r"\?\s*$|^\s*(how|why|where|what|which|does|is|can)\b", re.IGNORECASE)
_TEXT_EXT = (".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".rst")
_BINARY_EXT = (
    ".pyc",
    ".pyo",
    ".so",
    ".o",
    ".a",
    ".class",
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".gz",
    ".zip",
    ".whl",
)
"""Files no coding model opens to read: a search that lists bytecode (the tests left `__pycache__`
where a client's shell writes it) does not make it a source to read."""


def _hash(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


def _unit(*parts: object) -> float:
    return _hash(*parts) / 2**64


def draw_quantile(u: float, quantiles: Sequence[tuple[float, float]]) -> float:
    """The value at cumulative share `u` in [0, 1): geometric between the anchors around it (linear
    from a zero anchor)."""
    for (p0, r0), (p1, r1) in itertools.pairwise(quantiles):
        if u < p1 or p1 >= 1.0:
            if p1 == p0 or r0 == r1:
                return r0
            t = (u - p0) / (p1 - p0)
            if r0 == 0:
                return r1 * t
            return r0 * math.pow(r1 / r0, t)
    return quantiles[-1][1]


def draw_rounds(u: float, quantiles: Sequence[tuple[float, int]]) -> int:
    """The rounds at cumulative share `u` in [0, 1) (`draw_quantile`, rounded)."""
    return round(draw_quantile(u, quantiles))


def think_time(seed: int, turn: int, quantiles: Sequence[tuple[float, float]]) -> float:
    """Seconds the simulated user pauses before prompt `turn` (0-based; none before the first): a
    pure function of the seed and the turn, so a session's time is the same for every strategy."""
    return 0.0 if turn == 0 else draw_quantile(_unit(seed, "think", turn), quantiles)


def _text_blocks(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return []


def _typed_text(message: dict[str, Any]) -> str:
    """A user message's typed text: its text blocks without id tags and system reminders."""
    return "\n".join(_typed_parts(message))


def _typed_parts(message: dict[str, Any]) -> list[str]:
    if message.get("role") != "user":
        return []
    parts = [_REMINDER.sub("", t).strip() for t in _text_blocks(message) if not _TAG_BLOCK.match(t)]
    return [p for p in parts if p]


def _prompt_text(message: dict[str, Any]) -> str:
    """What the user typed in a user message: its last typed block. A client may put other text
    before the prompt in the same message (a summary of the conversation, when it merges the
    summary's message with the next prompt's); taking it as part of the prompt would draw the turn's
    work from the summary's wording, so one compaction would change the work it is judged on."""
    parts = _typed_parts(message)
    return parts[-1] if parts else ""


@dataclass
class _Call:
    """One tool call of this turn and its result (None while unanswered)."""

    round: int
    name: str
    input: dict[str, Any]
    result: str | None = None
    is_error: bool = False


@dataclass
class _Turn:
    """The current turn as the request shows it."""

    prompt: str
    prompt_index: int
    calls: list[_Call] = field(default_factory=list)
    rounds: int = 0
    rereads: int = 0
    """Rounds that only read again files whose earlier listing had been cleared: extra work that
    lost information costs, not counted against the turn's planned rounds."""
    before: int = 0
    """Rounds of this turn done before a compaction inside it, as the summary's progress line says."""
    carried: bool = False
    """The prompt was read from a summary's progress line, not from the user's own message."""
    lost: frozenset[str] = frozenset()
    """Statements of the carried prompt that the summary lost (`summary.lost_in_progress`): the
    model no longer knows them, so its answer does not repeat them."""
    reminders: str = ""

    @property
    def progress(self) -> int:
        """Rounds of the turn's planned work done so far (re-reads excluded, earlier rounds included)."""
        return self.before + self.rounds - self.rereads

    def read_listing(self, path: str) -> str | None:
        """The latest complete Read listing of `path` in this turn, if no edit followed it."""
        for call in reversed(self.calls):
            if not _same_path(call.input.get("file_path"), path):
                continue
            if call.name in ("Edit", "Write"):
                return None
            if call.name == "Read" and call.result is not None and not call.is_error:
                if "offset" in call.input or "limit" in call.input or "more lines; continue" in call.result:
                    return None
                if _cleared(call.result):
                    return None
                return call.result
        return None

    def done(self, name: str, path: str) -> bool:
        return any(c.name == name and _same_path(c.input.get("file_path"), path) for c in self.calls)

    def lost_reads(self) -> list[str]:
        """Files read in full this turn whose listing was cleared since and not read again (each file
        is read again once per turn at most: a strategy that keeps clearing costs work, not a loop)."""
        lost: dict[str, None] = {}
        reads: dict[str, int] = {}
        for call in self.calls:
            if call.name != "Read" or call.result is None or "offset" in call.input:
                continue
            path = _file_key(call.input.get("file_path", ""), reads)
            reads[path] = reads.get(path, 0) + 1
            if _cleared(call.result):
                lost[path] = None
            else:
                lost.pop(path, None)
        return [path for path in lost if reads[path] < 2]

    @property
    def command(self) -> str | None:
        """The command a "Run `cmd`" prompt asks for."""
        run = _RUN.search(self.prompt)
        return run.group(1) if run else None

    def ran_command(self, call: _Call) -> bool:
        """Whether `call` is the Bash run of `command`."""
        return self.command is not None and call.name == "Bash" and call.input.get("command") == self.command


def _turn_start(
    messages: Sequence[dict[str, Any]], system: str = ""
) -> tuple[int, str, int, bool, frozenset[str]] | None:
    """Where the current turn starts, its prompt, its rounds done before that point, whether the
    prompt came from a summary's progress line, and which of its statements that summary lost.

    A turn starts at the last user message with typed text, except after a summary that says a
    request is in progress (`read_progress`, in any message or the system prompt): that request is
    the turn's, and it stays the turn's until an answer (an assistant message without tool calls)
    ends it, whatever the client typed in between to make the model go on ("Continue", a
    reminder): a client does not type the simulated user's next prompt in the middle of a turn. The
    same prompt typed again, even after an acknowledgement, is the client handing it back, never a
    new turn: the simulated user never types a prompt twice."""
    found: tuple[int, str, int, bool, frozenset[str]] | None = None
    carried = read_progress(system) if system else None
    if carried is not None:
        found = (0, carried[0], carried[1], True, lost_in_progress(system))
    open_from_summary = carried is not None
    for index, message in enumerate(messages):
        progress, lost = None, frozenset[str]()
        for text in _text_blocks(message):
            if (read := read_progress(text)) is not None:
                progress, lost = read, lost_in_progress(text)
        if progress is not None:
            found = (index, progress[0], progress[1], True, lost)
            open_from_summary = True
            continue
        if message.get("role") == "assistant":
            if _answered(message):
                open_from_summary = False  # an answer ends the carried turn
            continue
        typed = _prompt_text(message)
        if found is not None and found[3] and typed == found[1]:
            open_from_summary = True  # the prompt handed back again: no user types a prompt twice
        elif typed and not open_from_summary:
            found = (index, typed, 0, False, frozenset())
    return found


def _read_turn(messages: Sequence[dict[str, Any]], tools: Toolbox, system: str = "") -> _Turn | None:
    """The current turn (`_turn_start`) and everything after its start, its calls read back into the
    model's own terms (`Toolbox.canonical`)."""
    where = _turn_start(messages, system)
    if where is None:
        return None
    start, prompt, before, carried, lost = where
    turn = _Turn(prompt, start, before=before, carried=carried, lost=lost)
    by_id: dict[str, _Call] = {}
    for message in messages[start:]:
        content = message.get("content")
        for text in _text_blocks(message):
            turn.reminders += "".join(_REMINDER.findall(text))
        if not isinstance(content, list):
            continue
        if message.get("role") == "assistant":
            uses = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
            # Only a file whose listing was cleared is re-read as extra work; counting any repeated
            # read would keep the round number still, so the same read would be planned forever.
            lost_before = set(turn.lost_reads())
            calls = []
            for block in uses:
                # paths are read back as written: making them relative to the working directory a
                # request states would make which files were read depend on whether it states one
                name, tool_input = tools.canonical(str(block.get("name")), dict(block.get("input") or {}))
                call = _Call(turn.rounds, name, tool_input)
                calls.append(call)
                by_id[str(block.get("id"))] = call
            turn.calls += calls
            if calls and all(
                _full_read(c) and any(_same_path(c.input.get("file_path"), p) for p in lost_before)
                for c in calls
            ):
                turn.rereads += 1
            turn.rounds += 1 if uses else 0
        else:
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    found = by_id.get(str(block.get("tool_use_id")))
                    if found is not None:
                        found.result = _tool_output(text_of(block.get("content")))
                        found.is_error = bool(block.get("is_error"))
    return turn


def _tool_output(result: str) -> str:
    """What the tool printed: a client may append its own reminders to a tool result (Claude Code
    does, after a Bash run), notes to the model that are no line of the output."""
    return _REMINDER.sub("", result).rstrip() if "<system-reminder>" in result else result


def _answered(message: dict[str, Any]) -> bool:
    """Whether `message` is an answer: an assistant message without tool calls."""
    content = message.get("content")
    calls = isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_use" for b in content
    )
    return message.get("role") == "assistant" and not calls


def _path_key(path: object) -> str:
    text = str(path)
    return text[2:] if text.startswith("./") else text


def _same_path(a: object, b: object) -> bool:
    """Whether `a` and `b` name one file: the same path, or an absolute one and a relative one it
    ends with (`/ws/src/x.py`, `src/x.py`). Told from the paths alone, never from the working
    directory a request states: which files a turn has read must not depend on whether it states one."""
    if a is None or b is None:
        return False
    one, other = _path_key(a), _path_key(b)
    if one == other:
        return True
    if one.startswith("/") == other.startswith("/"):
        return False
    absolute, relative = (one, other) if one.startswith("/") else (other, one)
    return absolute.endswith("/" + relative)


def _file_key(path: object, known: Iterable[str]) -> str:
    """The first of `known` that names the same file as `path` (`_same_path`), else `path`'s own key."""
    return next((k for k in known if _same_path(k, path)), _path_key(path))


def _distinct(paths: Iterable[str]) -> list[str]:
    """`paths` in order, each file once however many ways it is written."""
    out: list[str] = []
    for path in paths:
        if not any(_same_path(path, kept) for kept in out):
            out.append(path)
    return out


def _full_read(call: _Call) -> bool:
    return call.name == "Read" and "offset" not in call.input and "limit" not in call.input


_CLEARED = re.compile(r"\b(cleared|removed|omitted|masked|pruned|elided|truncated away)\b", re.I)
_CLEARED_CHARS = 300
"""A tool result this short that says it was cleared is a placeholder, not the file."""


def _cleared(result: str) -> bool:
    """Whether a tool result is a placeholder left where a strategy cleared the real one."""
    return len(result) <= _CLEARED_CHARS and bool(_CLEARED.search(result)) and not _listing_lines(result)


_PATHLIKE = re.compile(r"^(?:/|\./)?[\w.-]+(?:/[\w.-]+)*\.[A-Za-z][A-Za-z0-9]{0,5}$")
"""A file path with an extension, as search results list them (`src/x.py`, `/abs/x.py`, `./x.py`)."""


def _paths_in(text: str) -> list[str]:
    """The file paths a search result lists (one per line; `path:line:text` for content matches)."""
    out = []
    for line in text.splitlines():
        head = line.split(":", 1)[0].strip()
        if _PATHLIKE.match(head):
            out.append(head)
    return out


_NUMBERED = re.compile(r"^\s*\d+(?:\t|\u2192|\| |: )")
"""A numbered listing line: `cat -n` (`  12\tcode`), Claude Code's (`  12\u2192code`), opencode's
(`00012| code` or `12: code`)."""


def _unnumbered(line: str) -> str:
    """A result line without its listing number, in whichever client's format it came: an answer
    quotes the same code lines to every client."""
    match = _NUMBERED.match(line)
    return line[match.end() :] if match else line


def _listing_lines(listing: str) -> list[str]:
    """The file lines of a Read listing, without their numbers."""
    lines = []
    for line in listing.splitlines():
        match = _NUMBERED.match(line)
        if match:
            lines.append(line[match.end() :])
    return lines


@dataclass
class SimulatedBackend:
    """A deterministic simulated coding model for `foldline serve --backend simulated`.

    Args:
        seed: Varies every choice (rounds per turn, which files, which tools); the same seed and the
            same request always give the same reply.
        profile: The profile whose world it is meant for (`profiles.PROFILES`); the model itself acts
            only on the request, so any workspace works.
        config: Calibration and limits.
    """

    seed: int = 0
    profile: str = "feature"
    config: SimulatedConfig = field(default_factory=SimulatedConfig)
    answered: int = 0
    """Requests answered (for statistics; never used to decide a reply)."""

    def reply(self, request: BackendRequest) -> Reply:
        """The model's reply to `request` (see the module docstring)."""
        self.answered += 1
        return Reply(content=tuple(self._content(request)))

    # --- deciding ---------------------------------------------------------------------------------

    def _content(self, request: BackendRequest) -> list[Block]:
        messages = request.messages
        last = _typed_text(messages[-1]) if messages else ""
        sections = summary_request(last) if last else None
        if sections is not None:
            progress = self._progress(request, last)
            return [_text(build_summary(messages, last, sections, self.config, progress, self.seed))]
        tools = Toolbox.of(request.tools, messages, _request_texts(request))
        turn = _read_turn(messages, tools, _instructions(request))
        if turn is None:
            return [_text("There is nothing to answer yet: I see no request from you.")]
        question = _QUESTION.match(turn.prompt)
        if question:
            subject = question.group(1)
            known = self._recall(messages, turn.prompt, subject, request)
            if known is None:
                return self._look_up(turn, tools, subject, request) or [_text(_unknown(subject))]
            return [_text(known)]
        referring = _earlier_work(messages, turn, tools, self.config, _archives(request))
        if referring is not None:
            return referring
        # The workload is the user's: drawn from the prompt alone (the simulated user never types the
        # same prompt twice in a session), never from how much of the session the request still shows.
        target = draw_rounds(_unit(self.seed, turn.prompt), self.config.round_quantiles)
        if _keywords(turn.prompt) or _PATH_WORD.search(turn.prompt):
            # a request about the work gets at least a look at it; a question, a look and a read
            target = max(2 if _ASKS.search(turn.prompt) else 1, target)
        if turn.command is not None and "Bash" in tools:
            # "Run `cmd`": run it, then report; the output's incidental lines go unmentioned
            if turn.rounds == 0 and turn.before == 0:
                command = {"command": turn.command, "description": "Run the command you asked for"}
                run = _render(tools, [_use("Bash", command)])
                if run:
                    return [_text("Running it now."), *run]
            return [_text(self._answer(turn))]
        if tools.specs and turn.progress < target:
            lost = self._reread(turn, tools)
            if lost:
                return lost
            snip = self._snip(messages, turn, tools)
            if snip is not None:
                return snip
            blocks = self._round(turn, tools, target)
            if blocks:
                return blocks
        return [_text(self._answer(turn))]

    def _progress(self, request: BackendRequest, instruction: str) -> tuple[str, int, frozenset[str]] | None:
        """The request a summary's messages leave in progress and its rounds done (None when they
        end with an answer, or hold no request), and the statements of that request an earlier summary
        already lost: the summary states it (`progress_line`)."""
        messages = list(request.messages)
        start, stop = span_bounds(messages, instruction)
        covered = messages[start:stop]
        last = messages[-1] if messages else {}
        if stop == len(messages) - 1 and isinstance(last.get("content"), list):
            # a client may append the instruction to the message holding the last tool results
            results = [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results:
                covered.append({"role": "user", "content": results})
        # the request is in progress when no answer follows it, in the span or after it (a span
        # summary replaces only its span: a turn answered later needs no line to go on from)
        if not covered or any(_answered(m) for m in [covered[-1], *messages[stop:-1]]):
            return None
        tools = Toolbox.of(request.tools, covered, _request_texts(request))
        turn = _read_turn(covered, tools, _instructions(request) if start == 0 else "")
        if turn is None or _QUESTION.match(turn.prompt):
            return None
        return turn.prompt, turn.progress, turn.lost

    def _reread(self, turn: _Turn, tools: Toolbox) -> list[Block]:
        """Read again the files whose listing this turn needs but a strategy cleared: the work lost
        information costs, the same whoever cleared it."""
        lost = turn.lost_reads()[: self.config.max_parallel_reads]
        calls = _render(tools, [_use("Read", {"file_path": path}) for path in lost])
        return [_text("That output is gone from my context; reading it again."), *calls] if calls else []

    def _recall(
        self, messages: Sequence[dict[str, Any]], question: str, subject: str, request: BackendRequest
    ) -> str | None:
        """The planted fact's value from a visible statement, else None.

        Every text is read but the question itself: a client may hand a summary back in the same
        message as the next prompt, and what that summary states is as visible as anywhere else.
        """
        wanted = " ".join(subject.lower().split())
        value = None
        texts = [_instructions(request)] + [
            i.text.replace(question, "") if i.kind == "prompt" else i.text
            for i in items_of(messages)
            if i.kind in ("prompt", "assistant", "result")
        ]
        for text in texts:
            for match in _STATEMENT.finditer(earlier.unescaped(text)):
                if " ".join(match.group(1).lower().split()) == wanted:
                    value = match.group(2)
        return None if value is None else f"The {subject} is {value}."

    def _look_up(self, turn: _Turn, tools: Toolbox, subject: str, request: BackendRequest) -> list[Block]:
        """A search of a file the request says holds the earlier conversation word for word, once
        per turn, for a statement the request no longer shows (empty when there is no such file, no
        search tool, or it was searched already). Whoever names the file (a client's post-compaction
        message, a system prompt) and whatever the tool is called, the search costs one round and
        its result's tokens, billed as any other."""
        lead = f"I no longer see the {subject} in my context; searching the transcript for it."
        return _search_archive(turn, tools, f"the {subject} is", _archives(request), lead)

    def _snip(self, messages: Sequence[dict[str, Any]], turn: _Turn, tools: Toolbox) -> list[Block] | None:
        """A Snip call over old bulky tool-result messages, when a reminder in this turn allows it."""
        if "Snip" not in tools or not _nudged(turn.reminders, tools.specs["Snip"].name):
            return None
        if any(c.name == "Snip" for c in turn.calls):
            return None
        ids: list[str] = []
        stop = min(turn.prompt_index, len(messages) - self.config.keep_recent_messages)
        for message in messages[:stop]:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            size = sum(
                len(text_of(b.get("content")))
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_result"
            )
            if size >= self.config.bulky_result_chars:
                for text in _text_blocks(message):
                    if _TAG_BLOCK.match(text):
                        ids.extend(_TAG.findall(text))
            if len(ids) >= self.config.max_snips:
                break
        if not ids:
            return None
        calls = _render(tools, [_use("Snip", {"ids": ids[: self.config.max_snips]})])
        if not calls:
            return None
        return [
            _text("Some earlier tool output is bulky and no longer needed; removing it from the context."),
            *calls,
        ]

    def _round(self, turn: _Turn, tools: Toolbox, target: int) -> list[Block]:
        """The tool calls of round `turn.rounds` (empty when nothing sensible is left to do)."""
        k = turn.progress  # a re-read round is extra work, not progress through the plan
        prompt = turn.prompt
        change = bool(_CHANGE.search(prompt))
        pick = _hash(self.seed, prompt, k)
        phases: list[str] = []
        if k == 0:
            phases = ["explore"]
        elif change:
            cycle = [
                "read",
                "edit",
                "test",
                "read",
                "edit",
                "shell",
                *(["write"] if pick % 5 == 0 else []),
                "grep",
            ]
            if k == target - 1 and k >= 3:
                # the last round of a change: make it if it is not made yet, else check it
                edited = any(c.name == "Edit" and not c.is_error for c in turn.calls)
                phases = ["test", "edit", "read"] if edited else ["edit", "test", "read"]
            else:
                phases = [cycle[(k - 1) % len(cycle)], "edit", "read", "grep", "explore"]
        else:
            cycle = ["read"]
            if _LOGS.search(prompt):
                cycle += ["logs", "read", "logs"]
            if _DATA.search(prompt):
                cycle += ["data"]
            if _TESTS.search(prompt):
                cycle.append("test")
            cycle += ["shell", "grep", "read", "test"]
            first = "read" if k == 1 else cycle[(k - 1 + pick % 3) % len(cycle)]  # read what was found
            phases = [first, "read", "grep", "explore"]
        for phase in phases:
            blocks = _render(tools, self._phase(phase, turn, tools, pick))
            if blocks:
                lead = _NARRATION[phase][pick % len(_NARRATION[phase])]
                return [_text(self._observations(turn) + lead), *blocks]
        return []

    def _observations(self, turn: _Turn, *, final: bool = False) -> str:
        """What the results showed (the previous round's, or the whole turn's for the final answer),
        as a model notes it: lines copied from the results, as many as the profile's verbosity."""
        lines, answer_lines = self.config.reply_lines(self.profile)
        limit = answer_lines if final else lines
        if limit <= 0 or turn.rounds == 0:
            return ""
        seen: list[str] = []
        for call in turn.calls:
            if (not final and call.round != turn.rounds - 1) or not call.result or call.is_error:
                continue
            where = PurePosixPath(str(call.input.get("file_path") or call.input.get("path") or ".")).name
            for line in call.result.splitlines():
                code = _unnumbered(line)
                if code is line and "\t" in line:
                    code = line.partition("\t")[2]  # a tabbed output's last columns (`du`, `uniq -c`)
                stripped = code.strip()
                if stripped.startswith(_NOTABLE) or " ERROR " in code:
                    seen.append(f"- {where}: `{stripped[:120]}`")
                if len(seen) >= limit:
                    break
            if len(seen) >= limit:
                break
        if not seen:
            return ""
        head = "Here is what the results show:" if final else "What I see so far:"
        return f"{head}\n" + "\n".join(seen) + "\n\n"

    def _phase(self, phase: str, turn: _Turn, tools: Toolbox, pick: int) -> list[_Planned]:
        words = _keywords(turn.prompt)
        mentioned = _PATH_WORD.findall(turn.prompt)
        if phase == "explore":
            return self._explore(turn, tools, pick, words, mentioned)
        if phase == "read" and "Read" in tools:
            paths = self._candidates(turn, words, mentioned)
            count = 1 + pick % self.config.max_parallel_reads
            return [_use("Read", self._read_input(p, pick)) for p in paths[:count]]
        if phase == "grep" and "Bash" in tools and words and (pick % 3 or "Grep" not in tools):
            word = words[(pick // 7) % len(words)]
            command = f"grep -rn '{word}' src tests docs | head -n 30"
            return [_use("Bash", {"command": command, "description": f"Find uses of {word}"})]
        if phase == "shell" and "Bash" in tools:
            looks = (
                "ls -la . src tests docs",
                "grep -c '' -r src | sort -t: -k2 -n | tail -n 15",
                "grep -rn 'def ' src | wc -l",
                "head -n 40 README.md pyproject.toml",
                "du -sh logs data docs",
            )
            return [_use("Bash", {"command": looks[pick % len(looks)], "description": "Look around"})]
        if phase == "grep" and "Grep" in tools and words:
            word = words[(pick // 7) % len(words)]
            mode = ("files_with_matches", "content", "count")[pick % 3]
            where = {"glob": "*.py"} if pick % 4 else {"glob": "*.md"}
            return [_use("Grep", {"pattern": word, "output_mode": mode, "-i": True, **where})]
        if phase == "logs":
            return self._logs(turn, tools, pick, mentioned)
        if phase == "data" and "Bash" in tools:
            data = next((p for p in mentioned if p.endswith(".csv")), "data/measurements.csv")
            commands = (
                f"wc -l {data} && head -n 20 {data}",
                f"grep -c ',returned$' {data}; grep ',returned$' {data} | head -n 40",
                f"cut -d, -f2 {data} | sort | uniq -c",
            )
            return [_use("Bash", {"command": commands[pick % 3], "description": "Inspect the data file"})]
        if phase == "test" and "Bash" in tools:
            command = "python3 -m unittest discover -s tests -q 2>&1 | tail -n 15"
            return [_use("Bash", {"command": command, "description": "Run the test suite"})]
        if phase == "edit" and "Edit" in tools:
            return self._edit(turn, pick)
        if phase == "write" and "Write" in tools:
            slug = "-".join(words[:3]).lower() or "notes"
            read = [c.input["file_path"] for c in turn.calls if c.name == "Read"]
            body = f"# Notes: {turn.prompt[:80]}\n\nFiles looked at:\n" + "".join(f"- {p}\n" for p in read)
            path = f"notes/{slug}-{pick % 10_000:04d}.md"
            return [_use("Write", {"file_path": path, "content": body})]
        return []

    def _explore(
        self, turn: _Turn, tools: Toolbox, pick: int, words: list[str], mentioned: list[str]
    ) -> list[_Planned]:
        """The first round: read the files the prompt names, search for the thing a question names,
        or look for the files the prompt's subject suggests."""
        calls: list[_Planned] = []
        named = [w for w in words if w.islower() and len(w) > 4]
        if mentioned and "Read" in tools:
            reads = mentioned[: self.config.max_parallel_reads]
            calls += [_use("Read", self._read_input(p, pick)) for p in reads]
        elif words and _ASKS.search(turn.prompt) and ("Grep" in tools or "Bash" in tools):
            # a question about something: search the code for the thing it names, not for its verbs
            word = words[0]
            if "Grep" in tools:
                search = {"pattern": rf"\b{re.escape(word)}\b", "output_mode": "files_with_matches"}
                return [_use("Grep", search)]
            command = f"grep -rlw -- {_shell_quote(word)} . | head -n 40"
            return [_use("Bash", {"command": command, "description": f"Find {word}"})]
        elif "Glob" in tools and (pick % 4 == 0 or "Bash" not in tools):
            pattern = f"**/*{named[0]}*" if named else "**/*.py"
            calls.append(_use("Glob", {"pattern": pattern}))
        elif "Bash" in tools:
            # also when a Glob would have been drawn but none is offered: whether a turn starts its
            # work must not depend on which search tools a client happens to ship
            name = f"*{named[0]}*" if named else "*.py"  # the first content word: the subject
            command = f"find . -name '{name}' -not -path '*/.*' | sort | head -n 40"
            calls.append(_use("Bash", {"command": command, "description": "Find the relevant files"}))
        if words and pick % 4 == 0:
            word = words[pick % len(words)]
            if "Grep" in tools:
                calls.append(_use("Grep", {"pattern": word, "glob": "*.py", "-i": True}))
            elif "Bash" in tools:
                command = f"grep -rli --include='*.py' -- {_shell_quote(word)} . | head -n 40"
                calls.append(_use("Bash", {"command": command, "description": f"Find files that use {word}"}))
        return calls

    def _read_input(self, path: str, pick: int) -> dict[str, Any]:
        if path.endswith((".log", ".csv")):
            if _unit(pick, "full") < self.config.full_log_read_share:
                return {"file_path": path}
            return {"file_path": path, "offset": 1 + pick % 2000, "limit": self.config.read_window_lines}
        return {"file_path": path}

    def _candidates(self, turn: _Turn, words: list[str], mentioned: list[str]) -> list[str]:
        """Paths worth reading next, best first: named in the prompt, then found this turn."""
        seen: dict[str, None] = {}
        for call in turn.calls:
            if call.name in ("Glob", "Grep", "Bash") and call.result and not call.is_error:
                for path in _paths_in(call.result):
                    seen.setdefault(path, None)
        found = list(seen)
        lowered = [w.lower() for w in words]

        ranked = [p for p in mentioned if not turn.done("Read", p)]
        readable = [p for p in found if not p.endswith(_BINARY_EXT)]
        ranked += _ranked([p for p in readable if p.endswith(_TEXT_EXT) or hits_any(p, lowered)], lowered)
        return [p for p in _distinct(ranked) if not turn.done("Read", p)]

    def _logs(self, turn: _Turn, tools: Toolbox, pick: int, mentioned: list[str]) -> list[_Planned]:
        logs = [p for p in mentioned if p.endswith(".log")] or ["logs/worker.log"]
        log = logs[pick % len(logs)]
        choice = pick % 5
        if choice == 0 and "Grep" in tools:
            # a grep over the whole log: the raw output is far past the level-0 budget
            return [
                _use(
                    "Grep",
                    {
                        "pattern": "INFO|DEBUG|WARNING",
                        "path": log,
                        "output_mode": "content",
                        "head_limit": self.config.big_grep_lines,
                    },
                )
            ]
        if choice == 1 and "Read" in tools:
            return [_use("Read", self._read_input(log, pick))]
        if choice == 2 and "Grep" in tools:
            return [
                _use(
                    "Grep", {"pattern": "ERROR|Traceback|TimeoutError", "path": log, "output_mode": "content"}
                )
            ]
        if "Bash" in tools:
            commands = (
                f"grep -n 'ERROR' {log} | head -n 40",
                f"grep -c 'ERROR' logs/worker.log logs/app.log; tail -n 60 {log}",
                f"grep -B2 -A4 'Traceback' {log} | head -n 80",
            )
            return [_use("Bash", {"command": commands[pick % 3], "description": "Search the logs"})]
        return []

    def _edit(self, turn: _Turn, pick: int) -> list[_Planned]:
        """An Edit whose old_string is a unique line of a file read in full this turn."""
        for call in reversed(turn.calls):
            path = str(call.input.get("file_path", ""))
            if call.name != "Read" or not path.endswith((".py", ".md")):
                continue
            listing = turn.read_listing(path)
            if listing is None:
                continue
            lines = _listing_lines(listing)
            text = "\n".join(lines)
            candidates = [
                line
                for line in lines
                if line.strip()
                and "#" not in line
                and not line.rstrip().endswith("\\")
                and text.count(line) == 1
            ]
            if not candidates:
                continue
            old = candidates[pick % len(candidates)]
            topic = " ".join(_keywords(turn.prompt)[:3]) or "review"
            new = f"{old}  # checked: {topic}" if path.endswith(".py") else f"{old} (checked: {topic})"
            return [_use("Edit", {"file_path": path, "old_string": old, "new_string": new})]
        return []

    # --- answering ----------------------------------------------------------------------------------

    def _answer(self, turn: _Turn) -> str:
        """The turn's final answer: what it looked at, what it found, what it changed."""
        parts: list[str] = []
        parts += _noted(turn)
        reads = list(dict.fromkeys(str(c.input["file_path"]) for c in turn.calls if c.name == "Read"))
        edits = list(
            dict.fromkeys(
                str(c.input["file_path"])
                for c in turn.calls
                if c.name in ("Edit", "Write") and not c.is_error
            )
        )
        if reads:
            names = ", ".join(PurePosixPath(p).name for p in reads[:8])
            more = f" and {len(reads) - 8} more" if len(reads) > 8 else ""
            parts.append(f"I read {names}{more}.")
        for call in turn.calls:
            if turn.ran_command(call) and call.result:
                last = call.result.strip().splitlines()[-1] if call.result.strip() else "no output"
                # the failing tests are named in the same sentence as the command: what a later
                # "the test that failed in the X check" is read back from (`earlier.failed_test`)
                failed = earlier.failing_tests(call.result)
                failing = f", failing {', '.join(failed)}" if failed else ""
                parts.append(
                    f"`{turn.command}` finished{' with an error' if call.is_error else ''}: {last}{failing}."
                )
        searches = [
            c
            for c in turn.calls
            if c.name in ("Glob", "Grep", "Bash") and c.result and not c.is_error and not turn.ran_command(c)
        ]
        if searches and not reads:
            found = _ranked(
                list(dict.fromkeys(p for c in searches for p in _paths_in(c.result or ""))),
                [w.lower() for w in _keywords(turn.prompt)],
            )
            shown = ", ".join(PurePosixPath(p).name for p in found[:6]) or "nothing matching"
            parts.append(f"I searched the workspace ({len(searches)} searches) and found {shown}.")
        words = _keywords(turn.prompt)
        if words and _ASKS.search(turn.prompt):
            where = _where_named(words[0], searches)
            if where is not None:
                shown = ", ".join(PurePosixPath(p).name for p in where[:8])
                parts.append(f"`{words[0]}` appears in {shown}." if where else f"I found no `{words[0]}`.")
        finding = self._finding(turn)
        if finding:
            parts.append(finding)
        tests = [c for c in turn.calls if c.name == "Bash" and "unittest" in str(c.input.get("command"))]
        if tests and tests[-1].result:
            summary = [
                line for line in tests[-1].result.splitlines() if line.startswith(("Ran ", "OK", "FAILED"))
            ]
            if summary:
                parts.append("Test run: " + "; ".join(summary) + ".")
        if edits:
            parts.append("Changed: " + ", ".join(PurePosixPath(p).name for p in edits) + ".")
        if not turn.calls:
            words = _keywords(turn.prompt)
            topic = f" about {', '.join(words[:3])}" if words else ""
            parts.append(f"Understood{topic}. Tell me when you want me to look at the code.")
        notes = self._observations(turn, final=True)
        if notes:
            parts.append("\n\n" + notes.rstrip())
        errors = sum(1 for c in turn.calls if c.is_error)
        if errors:
            parts.append(f"{errors} tool call(s) failed along the way.")
        return " ".join(parts)

    def _finding(self, turn: _Turn) -> str:
        """One concrete line from this turn's results that matches the prompt's words."""
        words = [w.lower() for w in _keywords(turn.prompt)]
        for call in turn.calls:
            if call.result is None or call.is_error or call.name not in ("Read", "Grep", "Bash"):
                continue
            for line in call.result.splitlines()[:400]:
                lowered = line.lower()
                if any(w in lowered for w in words) or "error" in lowered:
                    where = (
                        call.input.get("file_path")
                        or call.input.get("path")
                        or call.input.get("command")
                        or f"a search for {call.input.get('pattern')!r}"
                    )
                    shown = _unnumbered(line).strip()[:160]
                    return f"In {where} I found: `{shown}`."
        return ""


_PRESSURE = re.compile(
    r"\b(?:context|window|conversation)\b[^.\n]{0,60}?(?:\d+\s*(?:%|percent)|\b(?:full|filling|fills up|"
    r"nearly|almost|limit|running out|space|large|big)\b)"
    r"|\d+\s*(?:%|percent)\b[^.\n]{0,40}?\b(?:context|window)\b",
    re.I,
)
_REMOVAL = re.compile(
    r"\b(?:remove|drop|delete|prune|forget|clear|discard|evict|snip|trim|cut|free|elide)\w*\b[^.\n]{0,60}?"
    r"\b(?:messages?|output|results?|context|entries|history)\b",
    re.I,
)


def _unknown(subject: str) -> str:
    return (
        f"I don't know the {subject}: nothing I can see in this conversation states it. "
        "If you told me earlier, it is no longer in my context; please tell me again."
    )


def _archives(request: BackendRequest) -> list[str]:
    """Files the request says hold the earlier conversation word for word (a transcript), in the
    order named, each once: "read the full transcript at: PATH", "the full transcript ... is at PATH"."""
    found: dict[str, None] = {}
    texts = [request.system_text()] + [t for m in request.messages for t in _text_blocks(m)]
    for text in texts:
        for match in _ARCHIVE.finditer(text):
            found[match.group(1).rstrip(".,;:)")] = None
    return list(found)


def _nudged(reminders: str, tool: str) -> bool:
    """Whether this turn's reminders invite removing old context with the offered Snip tool: they
    name the tool (in any case, `prune_context` as "prune context" too), or say the context is
    filling and ask for messages to be removed, in whatever words."""
    words = " ".join(_SPLIT_NAME.findall(tool))
    names = {tool.lower(), words.lower()} - {""}
    lowered = " ".join(reminders.lower().split())
    if any(re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", lowered) for n in names):
        return True
    return any(_PRESSURE.search(r) and _REMOVAL.search(r) for r in _REMINDER.findall(reminders))


_SPLIT_NAME = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _where_named(word: str, searches: Sequence[_Call]) -> list[str] | None:
    """The files this turn's search for `word` found it in (None when the turn did not search for it)."""
    pattern, command = rf"\b{re.escape(word)}\b", f"grep -rlw -- {_shell_quote(word)} "
    hits = [
        c
        for c in searches
        if c.input.get("pattern") == pattern or str(c.input.get("command", "")).startswith(command)
    ]
    if not hits:
        return None
    return list(dict.fromkeys(p for c in hits for p in _paths_in(c.result or "")))


def _ranked(paths: list[str], words: list[str]) -> list[str]:
    """`paths`, those naming more of `words` (lowercase) first, then sources before tests and docs."""

    def score(path: str) -> tuple[int, int, str]:
        name = path.lower()
        source = 0 if name.endswith(".py") and "/test" not in name else 1
        return (-sum(1 for w in words if w in name), source, path)

    return sorted(paths, key=score)


def hits_any(path: str, words: list[str]) -> bool:
    """Whether `path` names any of `words` (lowercase)."""
    name = path.lower()
    return any(w in name for w in words)


def _noted(turn: _Turn) -> list[str]:
    """What the answer notes of the statements the turn's prompt makes (those a summary lost aside)."""
    return [
        f"Noted: the {m.group(1)} is {m.group(2)}."
        for m in _STATEMENT.finditer(turn.prompt)
        if statement_of(m.group()) not in turn.lost
    ]


def _keywords(prompt: str) -> list[str]:
    """The prompt's search terms, in order, without duplicates: the identifiers it names first (code
    words, whatever their position), then its other content words, leaving out common words, stated
    facts, verb forms (`defined`, `tested`) and the verb a sentence starts with ("Add ...", "Grep ...")."""
    task = _TURN_ID.sub("", _NOTE.sub("", prompt))
    identifiers = [a or b for a, b in _IDENTIFIER.findall(task)]
    identifiers = [w for w in identifiers if not _PATH_WORD.fullmatch(w)]
    task = _PATH_WORD.sub(" ", task)  # a path is read, not searched for
    starts = {m.start(1) for m in _SENTENCE_START.finditer(task)}
    words = []
    for match in _WORD.finditer(task):
        word = match.group()
        lowered = word.lower()
        if lowered in _STOP or match.start() in starts:
            continue
        if lowered.endswith("ed") and len(lowered) > 4 and "_" not in word:
            continue  # a verb form says what to do with the thing, not what the thing is
        words.append(word)
    return list(dict.fromkeys([*identifiers, *words]))


def _shell_quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def _text(text: str) -> Block:
    return {"type": "text", "text": text}


_Planned = tuple[Kind, dict[str, Any]]
"""A call the model plans, in its own terms (foldline's tool and parameter names)."""


def _use(kind: Kind, tool_input: dict[str, Any]) -> _Planned:
    """A call in the model's own terms, rendered for the offered tools by `_render`."""
    return kind, tool_input


def _render(tools: Toolbox, calls: Sequence[_Planned]) -> list[Block]:
    """`calls` in the offered tools' own names and parameters (those the tools cannot take dropped)."""
    return [block for kind, tool_input in calls if (block := tools.use(kind, tool_input)) is not None]


_ENVIRONMENT = re.compile(r"<(environment|env)>.*?</\1>", re.DOTALL | re.IGNORECASE)
"""A client's environment block in its system prompt (foldline's `<environment>`, Claude Code's
`<env>`): directory, date, platform, git state."""


def _instructions(request: BackendRequest) -> str:
    """The request's system text without its environment block: what the model reads for a summary's
    progress line or a stated fact. A directory, a date or a commit message stated there is the
    client's machine, not the conversation, and the work must not change with it; the working
    directory is read from the full text (`_request_texts`), for tools that want absolute paths."""
    return _ENVIRONMENT.sub("", request.system_text())


def _request_texts(request: BackendRequest) -> Iterator[str]:
    """Where a request states its working directory: the system prompt, then the users' texts, then
    the tool results (lazily: the first statement ends the search, usually in the system prompt).

    The tool results are read last but read: a client that states its environment in a reminder of
    its first message can carry that reminder on a tool result once it has compacted (Claude Code
    does), and a model that forgot where it works would stop reading files for the rest of the
    session, a workload set by how a client writes its history."""
    yield request.system_text()
    users = [m for m in request.messages if m.get("role") == "user"]
    for message in users:
        yield from _text_blocks(message)
    for message in users:
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield text_of(block.get("content"))


_NARRATION: dict[str, tuple[str, ...]] = {
    "explore": (
        "Let me look at the workspace first.",
        "I'll find the relevant files.",
        "Searching the code.",
    ),
    "read": ("Reading the files that matter here.", "Let me read these.", "Opening the relevant sources."),
    "grep": ("Searching for related uses.", "Let me grep for that.", "Checking where else this appears."),
    "logs": ("Looking through the logs.", "Searching the logs for errors.", "Checking the log output."),
    "data": ("Inspecting the data file.", "Let me look at the data.", "Checking the rows."),
    "shell": ("Let me look around.", "Checking the layout.", "A quick look with the shell."),
    "test": ("Running the tests.", "Let me run the test suite.", "Checking the tests pass."),
    "edit": ("Making the change.", "Editing the file.", "Applying the fix."),
    "write": ("Writing down notes.", "Recording what I found.", "Saving notes for later."),
}

_NOTABLE = (
    "def ",
    "class ",
    "Ran ",
    "FAILED",
    "ERROR",
    '"""',
    "#",
    "return ",
    "if ",
    "self.assert",
    "Scales ",
)
"""Result lines worth noting: definitions, checks, test outcomes, errors, headings, docs."""


# --- earlier work (`earlier.py`) ---------------------------------------------------------------------

_SUITE = "python3 -m unittest discover -s tests -q 2>&1 | tail -n 5"


def _earlier_work(
    messages: Sequence[dict[str, Any]],
    turn: _Turn,
    tools: Toolbox,
    config: SimulatedConfig,
    archives: Sequence[str] = (),
) -> list[Block] | None:
    """The work of a prompt that makes, or refers back to, earlier work (`earlier.py`): a fix, a
    decision, a rerun of what a fix changed or a check failed, a decision applied. None for any other
    prompt. Its rounds are set by what the request shows, not drawn: a referent the request lost
    costs the rounds that recover it. A decision the request lost is searched for in a file the
    request names as the transcript (`archives`, as a forgotten fact is: `_look_up`), once a turn."""
    prompt = turn.prompt
    if "Bash" not in tools:
        return None

    def canonical(name: str, tool_input: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        kind, ours = tools.canonical(name, tool_input)
        if isinstance(ours.get("file_path"), str):
            ours["file_path"] = _path_key(tools.relative(ours["file_path"]))
        return kind, ours

    if (decided := earlier.DECIDE.match(prompt)) is not None:
        subject, value, rejected = decided.group("subject", "value", "rejected")
        return [_text(f"Agreed: we keep the {subject} as {value}, not {rejected}. I will apply it there.")]
    if not any(p.match(prompt) for p in (earlier.FIX, earlier.CHANGED, earlier.FAILED, earlier.APPLY)):
        return None
    if turn.progress >= config.max_reference_rounds:
        return [_text("I have spent the rounds this needs without settling it; tell me how to go on.")]
    if (fix := earlier.FIX.match(prompt)) is not None:
        return _fix(turn, tools, fix.group("topic"), fix.group("name"))
    if (changed := earlier.CHANGED.match(prompt)) is not None:
        topic = changed.group("topic")
        return _rerun_changed(turn, tools, topic, earlier.changed_file(messages, topic, prompt, canonical))
    if (failed := earlier.FAILED.match(prompt)) is not None:
        topic = failed.group("topic")
        return _rerun_failed(turn, tools, topic, earlier.failed_test(messages, topic, prompt, canonical))
    if (apply := earlier.APPLY.match(prompt)) is not None:
        subject, module = apply.group("subject", "module")
        value = earlier.decision(messages, subject, prompt, canonical)
        if value is None and (search := _search_archive(turn, tools, f"keep the {subject} as", archives)):
            return search
        return _apply(turn, tools, subject, module, value)
    return None


def _search_archive(
    turn: _Turn,
    tools: Toolbox,
    pattern: str,
    archives: Sequence[str],
    lead: str = "That is no longer in my context; searching the transcript for it.",
) -> list[Block]:
    """A search of the first named transcript this turn has not searched yet (empty when none is
    left or there is no tool to search with): what a model told where its whole conversation is does
    before saying it cannot see something. With a search tool, that tool; with only a shell (Claude
    Code 2.1 offers no Grep), `grep` in it: the same search, whatever the client offers."""
    searched = {
        path
        for c in turn.calls
        for path in archives
        if (c.name == "Grep" and str(c.input.get("path", "")) == path)
        or (c.name == "Bash" and path in str(c.input.get("command", "")))
    }
    for path in archives:
        if path in searched:
            continue
        search = {"pattern": pattern, "path": path, "output_mode": "content", "-i": True}
        calls = _render(tools, [_use("Grep", search)]) or _render(
            tools,
            [_bash(f"grep -i -- {_shell_quote(pattern)} {_shell_quote(path)}", "Search the transcript")],
        )
        if calls:
            return [_text(lead), *calls]
    return []


def _ran(turn: _Turn, command: str) -> _Call | None:
    """The answered Bash run of `command` in this turn, if any."""
    runs = [c for c in turn.calls if c.name == "Bash" and c.input.get("command") == command]
    return runs[-1] if runs and runs[-1].result is not None else None


def _step(tools: Toolbox, lead: str, call: _Planned) -> list[Block]:
    blocks = _render(tools, [call])
    return [_text(lead), *blocks] if blocks else [_text("I cannot do that with the tools I have here.")]


def _bash(command: str, description: str) -> _Planned:
    return _use("Bash", {"command": command, "description": description})


def _tests_of(path: str) -> str:
    """The command running one source file's unittest module (`src/pkg/x.py`: `tests.test_x`)."""
    return f"python3 -m unittest -q tests.test_{PurePosixPath(path).stem} 2>&1 | tail -n 5"


def _last_line(call: _Call) -> str:
    lines = (call.result or "").strip().splitlines()
    return lines[-1] if lines else "no output"


def _sources(call: _Call | None, suffix: str = ".py") -> list[str]:
    return (
        list(dict.fromkeys(_path_key(p) for p in _paths_in(call.result or "") if p.endswith(suffix)))
        if call
        else []
    )


def _edit_line(
    turn: _Turn, tools: Toolbox, path: str, pick: Callable[[str], bool], mark: str
) -> list[Block] | None:
    """Read `path` (once more at most when its listing was lost) and append `mark` to its first line
    `pick` accepts; None once the file was edited this turn (or cannot be)."""
    if any(c.name == "Edit" and _same_path(c.input.get("file_path"), path) for c in turn.calls):
        return None
    listing = turn.read_listing(path)
    if listing is None:
        reads = sum(1 for c in turn.calls if c.name == "Read" and _same_path(c.input.get("file_path"), path))
        return _step(tools, "Reading it.", _use("Read", {"file_path": path})) if reads < 2 else None
    line = next((line for line in _listing_lines(listing) if pick(line)), None)
    if line is None:
        return None
    change = {"file_path": path, "old_string": line, "new_string": f"{line}  # {mark}"}
    return _step(tools, "Making the change.", _use("Edit", change))


def _fix(turn: _Turn, tools: Toolbox, topic: str, name: str) -> list[Block]:
    """Find where `name` is defined, mark the fix on its definition, run that module's tests."""
    find = f"grep -rl -- 'def {name}(' src"
    search = _ran(turn, find)
    if search is None:
        return _step(tools, f"Let me find where `{name}` is defined.", _bash(find, f"Find {name}"))
    found = _sources(search)
    if not found:
        return [_text(f"I found no definition of `{name}` under src.")]
    path = found[0]
    edit = _edit_line(turn, tools, path, lambda line: line.startswith(f"def {name}("), f"fixed: {topic}")
    if edit is not None:
        return edit
    run = _ran(turn, _tests_of(path))
    if run is None:
        return _step(tools, "Running its tests.", _bash(_tests_of(path), "Run the module's tests"))
    return [_text(f"Fixed the {topic} in `{name}`: changed {path}. Its tests: {_last_line(run)}.")]


def _rerun_changed(turn: _Turn, tools: Toolbox, topic: str, path: str | None) -> list[Block]:
    """Rerun the tests of the file the `topic` fix changed: from the request, else found by searching
    the tree for the fix's mark (the whole suite when that finds no single file)."""
    recovered = ""
    if path is None:
        recovery = f"grep -rl -- 'fixed: {topic}' src"
        search = _ran(turn, recovery)
        if search is None:
            lead = f"I no longer see which module the fix for the {topic} changed; searching the tree for it."
            return _step(tools, lead, _bash(recovery, "Find the fixed module"))
        found = _sources(search)
        path = found[0] if len(found) == 1 else None
        recovered = " (I had to search the tree for it)"
    command = _tests_of(path) if path else _SUITE
    run = _ran(turn, command)
    if run is None:
        return _step(tools, "Rerunning the tests.", _bash(command, "Rerun the tests"))
    if path is None:
        return [
            _text(f"I could not tell which module we changed, so I ran the whole suite: {_last_line(run)}.")
        ]
    return [_text(f"Reran the tests of {path}{recovered}: {_last_line(run)}.")]


def _rerun_failed(turn: _Turn, tools: Toolbox, topic: str, test: str | None) -> list[Block]:
    """Rerun the one test the `topic` check failed: from the request, else by running the check's
    script again (the whole suite when its output fails no single test)."""
    if test is None:
        find = f"find . -name '*{earlier.script_stem(topic)}*' -not -path '*/.*'"
        search = _ran(turn, find)
        if search is None:
            lead = f"I no longer see which test failed in the {topic}; finding the check to run it again."
            return _step(tools, lead, _bash(find, "Find the check's script"))
        scripts = _sources(search, ".sh")
        if len(scripts) == 1:
            command = f"sh {scripts[0]}"
            run = _ran(turn, command)
            if run is None:
                return _step(tools, "Running the check again.", _bash(command, "Run the check"))
            failed = earlier.failing_tests(run.result or "")
            test = failed[0] if len(failed) == 1 else None
    if test is None:
        command = _SUITE
    else:
        name, _, where = test.rstrip(")").partition(" (")
        command = f"python3 -m unittest -q {where}.{name} 2>&1 | tail -n 5"
    run = _ran(turn, command)
    if run is None:
        return _step(tools, "Rerunning the test.", _bash(command, "Rerun the failing test"))
    shown = f"`{test}`" if test else f"the whole suite (I could not tell which test failed in the {topic})"
    return [_text(f"Reran {shown}: {_last_line(run)}.")]


def _apply(turn: _Turn, tools: Toolbox, subject: str, module: str, value: str | None) -> list[Block]:
    """Mark the decided `value` for `subject` in `module`'s source; with no decision in sight, say so."""
    find = f"find . -name '{module}.py' -not -path '*/.*'"
    search = _ran(turn, find)
    if search is None:
        return _step(tools, f"Finding the {module} module.", _bash(find, f"Find {module}.py"))
    found = _sources(search)
    if not found:
        return [_text(f"I found no {module} module.")]
    path = found[0]
    mark = f"{subject}: {value}" if value else f"{subject}: left as it was (no decision found)"
    edit = _edit_line(turn, tools, path, lambda line: _SETTING.match(line) is not None, mark)
    if edit is not None:
        return edit
    if value is None:
        return [
            _text(f"I see no decision on the {subject} in this conversation, so I left {path} as it was.")
        ]
    return [_text(f"Applied the decision on the {subject} to {path}: {value}.")]


_SETTING = re.compile(r"^[A-Z][A-Z0-9_]* = ")
"""A module-level setting: where a decision about the module's behaviour is marked."""
