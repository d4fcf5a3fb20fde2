"""What the simulated model recalls of earlier turns' work: the file a fix changed, the test a check
saw fail, the decision the user made.

A prompt may refer back to earlier work by what was done, never by name: "Rerun the tests of the
module you changed when we fixed the rounding bug.", "Rerun the test that failed in the parser
check.", "Apply the decision on the cache key to the orders module." The referent is read from the
request alone: every text of its messages (typed prompts, the assistant's replies, tool calls'
inputs and results, summaries and notes in any wording), never the system prompt and never the
referring prompt itself. The latest match wins. The rules:

- a file ("... when we fixed the T"): a call whose input marks a change for the T (`fixed: T`, the
  mark the model leaves on a fix) names the file in its path; or one sentence of any text names
  "the T" and a `.py` path (an answer, a summary line, a note).
- a result ("the test that failed in the S check"): a `FAIL: test_x (dotted.Class)` line in the
  result of a call whose input names the check's script (`S_check`); or one text, not a tool
  result, that names the S check (or its script) and exactly one failing test (in its sentences
  that say something failed), or one sentence of it that names both.
- a decision ("the decision on the X"): a line saying "keep the X as V, not W".

Texts are read with JSON's string escapes read (`unescaped`), as the model reads statements: a
search of a JSON-lines transcript quotes each stored line whole, many answers joined by `\\n`, and
one answer's file must not be read as another's that follows it on the same stored line.

Where the request holds none of them the model pays to recover (`model.py` plans the calls): a file
by searching the tree for the fix's mark, one more round; a result by finding the check's script and
running it again, two more rounds with its whole output. A recovery that cannot pin the referent
down (no file or several, no failing test or several) is a miss: the model runs the whole suite
instead. A decision cannot be recovered, as nothing in the workspace records it: the model applies
none and says so, a quality miss.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foldline.server.backend import text_of

__all__ = [
    "APPLY",
    "CHANGED",
    "DECIDE",
    "FAILED",
    "FIX",
    "changed_file",
    "decision",
    "failed_test",
    "failing_tests",
    "script_stem",
    "unescaped",
]

FIX = re.compile(r"^Fix the (?P<topic>[\w' -]+?) in `(?P<name>\w+)`\.$")
CHANGED = re.compile(r"^Rerun the tests of the module you changed when we fixed the (?P<topic>[\w' -]+?)\.$")
FAILED = re.compile(r"^Rerun the test that failed in the (?P<topic>[\w' -]+? check)\.$")
DECIDE = re.compile(r"^Let's keep the (?P<subject>[\w' -]+?) as (?P<value>.+?), not (?P<rejected>.+?)\.$")
APPLY = re.compile(r"^Apply the decision on the (?P<subject>[\w' -]+?) to the (?P<module>\w+) module\.$")

_SOURCE = re.compile(r"[\w./-]+\.py\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")
"""Where a sentence ends: a note or an answer may state several pieces of work on one line."""
_TEST_ID = re.compile(r"\b(test_\w+ \([\w.]+\))")
_FAIL_LINE = re.compile(r"^FAIL: (test_\w+ \([\w.]+\))", re.MULTILINE)

Canonical = Callable[[str, Mapping[str, Any]], tuple[str, dict[str, Any]]]
"""A call read back into the model's own terms: its kind and its input, paths relative."""


@dataclass(frozen=True, slots=True)
class _Text:
    kind: str
    """`text` (a typed prompt, a reply, a summary), `input` (a call's) or `result` (a tool result)."""
    text: str
    call: str = ""
    """For a result: the input of the call it answers, its values joined."""
    path: str = ""
    """For an input: the path the call acts on."""


def unescaped(text: str) -> str:
    """`text` with JSON's string escapes read (a search of a JSON-lines transcript quotes its lines
    as they are stored): newlines and quotes end a statement as they do in plain text."""
    return text.replace("\\n", "\n").replace("\\t", " ").replace('\\"', '"').replace('"', ' " ')


def _texts(messages: Sequence[Mapping[str, Any]], prompt: str, canonical: Canonical) -> Iterator[_Text]:
    """Every text of `messages` in order but the referring `prompt` itself."""
    calls: dict[str, str] = {}
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                text = str(block.get("text", ""))
                if text.strip() != prompt:
                    yield _Text("text", unescaped(text))
            elif kind == "tool_use":
                raw = block.get("input")
                _, tool_input = canonical(str(block.get("name")), raw if isinstance(raw, dict) else {})
                joined = "\n".join(str(v) for v in tool_input.values() if isinstance(v, str))
                calls[str(block.get("id"))] = joined
                yield _Text("input", joined, path=str(tool_input.get("file_path", "")))
            elif kind == "tool_result":
                call = calls.get(str(block.get("tool_use_id")), "")
                yield _Text("result", unescaped(text_of(block.get("content"))), call=call)


def _names(text: str, phrase: str) -> bool:
    return re.search(rf"\b{re.escape(phrase)}\b", text, re.IGNORECASE) is not None


def changed_file(
    messages: Sequence[Mapping[str, Any]], topic: str, prompt: str, canonical: Canonical
) -> str | None:
    """The file changed when the `topic` was fixed, as the request shows it (None: it does not)."""
    found = None
    for item in _texts(messages, prompt, canonical):
        if item.kind == "input":
            if item.path and f"fixed: {topic}".lower() in item.text.lower():
                found = item.path
            continue
        for sentence in _SENTENCE_END.split(item.text):
            path = _SOURCE.search(sentence)
            if path and _names(sentence, f"the {topic}"):
                found = path.group()
    return found


def script_stem(topic: str) -> str:
    """The script a check is run by, as its name spells it ("parser check": `parser_check`)."""
    return "_".join(topic.lower().split())


def failing_tests(output: str) -> list[str]:
    """The distinct failing tests a test run's output reports, in order."""
    return list(dict.fromkeys(_FAIL_LINE.findall(output)))


def failed_test(
    messages: Sequence[Mapping[str, Any]], topic: str, prompt: str, canonical: Canonical
) -> str | None:
    """The test that failed in the `topic` check (`test_x (dotted.Class)`), as the request shows it."""
    stem = script_stem(topic)
    found = None
    for item in _texts(messages, prompt, canonical):
        if item.kind == "result":
            failed = failing_tests(item.text)
            if stem in item.call and len(failed) == 1:
                found = failed[0]
        elif item.kind == "text" and (stem in item.text or _names(item.text, f"the {topic}")):
            failures = [s for s in _SENTENCE_END.split(item.text) if re.search(r"\bfail", s, re.IGNORECASE)]
            ids = {test for sentence in failures for test in _TEST_ID.findall(sentence)}
            if len(ids) == 1:
                found = ids.pop()
            # a text that states several runs' failures (a summary) may still name this check's one
            # failing test in the sentence that names the check
            for sentence in failures:
                named = set(_TEST_ID.findall(sentence))
                if len(named) == 1 and (stem in sentence or _names(sentence, f"the {topic}")):
                    found = named.pop()
    return found


def decision(
    messages: Sequence[Mapping[str, Any]], subject: str, prompt: str, canonical: Canonical
) -> str | None:
    """The value the user decided for `subject` ("keep the X as V, not W"), as the request shows it."""
    said = re.compile(rf"\bkeep the {re.escape(subject)} as (.+?), not ", re.IGNORECASE)
    found = None
    for item in _texts(messages, prompt, canonical):
        if item.kind != "input":
            for match in said.finditer(item.text):
                found = match.group(1)
    return found
