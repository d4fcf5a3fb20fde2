"""The mechanical fold: what stands in for a summary when the model cannot write one (design.md R3.4.11),
and the record fold built the same way when Collapse is set to fold by records.

A small local model (SmolLM2 on an 8K window) may answer every summary request with nothing, or
with text that is not the sections asked for. Failing then ends the turn ("nothing more could be
compacted"), although the conversation holds plenty that can go. A mechanical fold is built from
the entries alone, with no model call: the user's prompts, the files the tools touched, and the
first lines of each tool result, under a heading that says plainly it is not a summary. Context
Collapse commits one for a span whose emergency summary failed, and AutoCompact's reactive
compaction for the conversation when its summary failed; each says so once (`MECHANICAL_NOTICE`).

A record fold (`CollapseConfig.folds = "record"`) is a record by choice, laid out as the turns went:
each prompt word for word, then each step of the assistant's work (what it said, cut short, and each
tool call with the first lines of its result), then the opening of the final reply, under a heading
that says where the rest is (the transcript). It masks the observations (tool output), the bulk of
an agent's context, and keeps the agent's own words and actions in order: the design that matched
model-written summaries on real models at half the cost (design.md, "Record folds").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from foldline._types import Block
from foldline.config import Config, MechanicalFoldConfig
from foldline.timeline import AnyRecord, AssistantEntry, Entry, SystemEntry, UserEntry
from foldline.tokens import CHARS_PER_TOKEN

__all__ = [
    "MECHANICAL_HEADING",
    "MECHANICAL_NOTICE",
    "RECORD_HEADING",
    "mechanical_fold",
    "record_fold",
    "said_before",
]

MECHANICAL_HEADING = (
    "[Not a summary: the model could not summarize this part of the conversation, so foldline kept "
    "a mechanical record of it: the user's prompts, the files touched and the first lines of each "
    "tool result. Everything else in it is gone; read a file again when its contents matter.]"
)
"""Opens every mechanical fold, so neither the model nor a reader takes it for a summary."""

RECORD_HEADING = (
    "[A record of these turns, not a summary: each of the user's prompts, then what the assistant "
    "said and did (cut short), each tool call with the first lines of its result, and the opening of "
    "the final reply. The session's transcript holds everything else; search it when a detail matters.]"
)
"""Opens every record fold (`CollapseConfig.folds = "record"`): chosen, not a fallback."""

MECHANICAL_NOTICE = (
    "the model could not summarize (its summaries were empty or malformed): foldline folded "
    "mechanically instead (the prompts, the files touched and the first lines of each result are "
    "kept, marked as not a summary); a model that summarizes keeps more"
)
"""What the user is told, once per session, the first time a level falls back to a mechanical fold."""

_PATH_KEYS = ("file_path", "path", "notebook_path")


def said_before(records: Sequence[AnyRecord]) -> bool:
    """Whether the session already has a mechanical fold's receipt: the notice is said once, also
    across a resume (every receipt of a mechanical fold carries `mechanical` in its data)."""
    return any(isinstance(r, SystemEntry) and r.data and r.data.get("mechanical") for r in records)


def record_fold(entries: Sequence[Entry], settings: Config) -> str:
    """A span's record when Collapse folds by records rather than summaries, within the fold's budget
    (`MechanicalFoldConfig`): each turn in order, its prompt (cut to `record_prompt_chars`), each
    step of the assistant's work (its words cut to `step_chars`; each tool call with its result's
    first lines) and its final reply's opening (`reply_chars`). Past the budget the results' lines
    go first, oldest first, then the assistant's words, then whole turns, oldest first: the newest
    work and what the user asked matter most."""
    config = settings.mechanical_fold
    turns: list[list[_Line]] = []
    files: dict[str, None] = {}
    calls: dict[str, _Line] = {}
    for entry in entries:
        if isinstance(entry, AssistantEntry):
            uses = [b for b in entry.message.content if b.get("type") == "tool_use"]
            said = " ".join(str(b.get("text", "")) for b in entry.message.content if b.get("type") == "text")
            if not turns:  # the span opens mid-turn: work with no prompt before it
                turns.append([])
            turn = turns[-1]
            if not uses:
                if said.strip():
                    turn.append(_Line("reply", f"- reply: {_cut(said, config.reply_chars)}"))
                continue
            if said.strip():
                turn.append(_Line("said", f"  - said: {_cut(said, config.step_chars)}"))
            for block in uses:
                line = _Line("call", f"  - {_call_label(block, files)}")
                calls[str(block.get("id"))] = line
                turn.append(line)
        elif isinstance(entry, UserEntry) and not entry.is_meta and not entry.is_compact_summary:
            tool_results, text = _user_parts(entry)
            for block in tool_results:
                if (call := calls.get(str(block.get("tool_use_id")))) is not None:
                    call.result = _first_lines(_text_of(block.get("content")), config)
            if not tool_results and text:
                turns.append([_Line("prompt", f"- prompt: {_cut(text, config.record_prompt_chars)}")])
    return _assemble_record(turns, list(files), _budget(settings))


@dataclass(eq=False, slots=True)
class _Line:
    """One line of a record fold; a tool call's line carries its result's first lines until the
    budget takes them."""

    kind: Literal["prompt", "said", "call", "reply"]
    text: str
    result: str = ""

    def render(self) -> str:
        return f"{self.text} -> {self.result}" if self.result else self.text


def _assemble_record(turns: list[list[_Line]], files: list[str], max_chars: int) -> str:
    def text() -> str:
        lines = [line.render() for turn in turns for line in turn]
        parts = [RECORD_HEADING, *(lines or ["- (nothing)"])]
        if files:
            parts.append("Files touched: " + ", ".join(files))
        return "\n".join(parts)

    current = text()
    while len(current) > max_chars:
        every = [line for turn in turns for line in turn]
        if result := next((line for line in every if line.result), None):
            result.result = ""
        elif said := next((line for line in every if line.kind == "said"), None):
            next(turn for turn in turns if said in turn).remove(said)
        elif len(turns) > 1:
            turns.pop(0)
        else:
            return current[:max_chars]
        current = text()
    return current


def mechanical_fold(entries: Sequence[Entry], settings: Config) -> str:
    """The mechanical record of `entries` (API-visible entries, oldest first), within its budget
    (`MechanicalFoldConfig`): the oldest prompts and results are left out first."""
    config = settings.mechanical_fold
    prompts: list[str] = []
    files: dict[str, None] = {}
    results: list[str] = []
    calls: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry, AssistantEntry):
            uses = [b for b in entry.message.content if b.get("type") == "tool_use"]
            for block in uses:
                calls[str(block.get("id"))] = _call_label(block, files)
        elif isinstance(entry, UserEntry) and not entry.is_meta and not entry.is_compact_summary:
            tool_results, text = _user_parts(entry)
            for block in tool_results:
                label = calls.get(str(block.get("tool_use_id")), "a tool")
                results.append(f"- {label}: {_first_lines(_text_of(block.get('content')), config)}")
            if not tool_results and text:
                prompts.append(f"- {_cut(text, config.prompt_chars)}")
    return _assemble(MECHANICAL_HEADING, "User prompts:", prompts, list(files), results, _budget(settings))


def _budget(settings: Config) -> int:
    """A fold's characters: `max_chars`, and at most `max_share` of the blocking limit."""
    config = settings.mechanical_fold
    return min(config.max_chars, int(settings.blocking_limit * config.max_share * CHARS_PER_TOKEN))


def _user_parts(entry: UserEntry) -> tuple[list[Block], str]:
    """A user message's tool results and its typed text (text blocks joined)."""
    content = entry.message.content
    blocks: list[Block] = [{"type": "text", "text": content}] if isinstance(content, str) else content
    results = [b for b in blocks if b.get("type") == "tool_result"]
    return results, " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text").strip()


def _call_label(block: Block, files: dict[str, None]) -> str:
    name = str(block.get("name") or "tool")
    tool_input = block.get("input")
    if not isinstance(tool_input, dict):
        return name
    for key in _PATH_KEYS:
        if isinstance(value := tool_input.get(key), str) and value:
            files.setdefault(value, None)
            return f"{name} {value}"
    for key in ("command", "pattern", "url", "query"):
        if isinstance(value := tool_input.get(key), str) and value:
            return f"{name} `{_cut(value, 80)}`"
    return name


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = (b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        return "\n".join(str(t) for t in texts)
    return ""


def _first_lines(text: str, config: MechanicalFoldConfig) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "(no output)"
    kept = [_cut(line, config.line_chars) for line in lines[: config.result_lines]]
    more = f" (+{len(lines) - len(kept)} more lines)" if len(lines) > len(kept) else ""
    return " | ".join(kept) + more


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _assemble(
    heading: str, title: str, prompts: list[str], files: list[str], results: list[str], max_chars: int
) -> str:
    """The fold's text; while too long, the oldest result goes, then the oldest prompt."""
    while True:
        parts = [heading, title, *(prompts or ["- (none)"])]
        if files:
            parts.append("Files touched: " + ", ".join(files))
        if results:
            parts += ["Tool results (first lines):", *results]
        text = "\n".join(parts)
        if len(text) <= max_chars or not (results or len(prompts) > 1):
            return text[:max_chars] if len(text) > max_chars else text
        if results:
            results.pop(0)
        else:
            prompts.pop(0)
