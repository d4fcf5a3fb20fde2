"""Hypothesis strategies that damage real Claude Code transcripts the ways real files get damaged.

A mutant starts from a window of consecutive lines of one real transcript (small, so each example
stays fast) and applies a few edits: ids replaced by arbitrary strings (non-hex, empty, unicode, very
long, or another line's id, making duplicates), fields dropped or retyped (envelope,
`message` and content block fields alike), lines duplicated,
reordered, glued together on one line or truncated mid-line, and `message` spread into an object
character by character (the malformed SSE lines Claude Code 2.1.81 wrote). A session may come with a
mutated subagent transcript in its `<stem>/subagents/` folder.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import orjson
from hypothesis import strategies as st

# A line of a mutant: a JSON object still open to edits, or raw bytes (glued, truncated).
Line: TypeAlias = "dict[str, Any] | bytes"

ID_FIELDS = (
    "uuid", "parentUuid", "logicalParentUuid", "sessionId", "leafUuid", "messageId", "agentId",
    "requestId", "sourceToolAssistantUUID", "sourceToolUseID", "toolUseID", "promptId",
)  # fmt: skip
"""Envelope keys that hold an id."""
FIELDS = (
    "message", "type", "timestamp", "toolUseResult", "isSidechain", "uuid", "parentUuid", "sessionId",
    "subtype", "isMeta", "isCompactSummary", "isApiErrorMessage", "logicalParentUuid", "attachment",
    "data", "content", "level", "compactMetadata", "error", "errorDetails", "apiErrorStatus",
)  # fmt: skip
"""Envelope keys to drop or retype."""
MESSAGE_FIELDS = ("content", "role", "id", "model", "usage", "stop_reason", "stop_sequence", "type")
_ID_KEY = {"tool_use": "id", "tool_result": "tool_use_id"}
"""The id key of each content block type that has one."""

_SSE = 'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","content":[]}}\n\n'

ids = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12),
    st.just(""),
    st.builds(lambda h: f"request_{h}", st.text(alphabet="0123456789abcdef-", max_size=36)),
    st.sampled_from(["ü", "🙂", "x" * 3000, "0" * 36, "../x", "a/b", "toolu_01", "request_"]),
)
"""Id strings that are not uuids."""

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
"""Any JSON value (what a retyped field gets)."""


@functools.cache
def source_lines(path: Path) -> tuple[bytes, ...]:
    """The non-empty lines of a real transcript (read once per test run)."""
    return tuple(line for line in path.read_bytes().split(b"\n") if line.strip())


@dataclass
class Mutant:
    """A damaged transcript: its file name, its lines, and the subagent transcript beside it, if any."""

    name: str
    lines: list[Line]
    subagent: list[Line] | None = None
    edits: list[str] = field(default_factory=list)

    def write(self, folder: Path) -> Path:
        """Write the session into `folder` (the subagent under `<stem>/subagents/`); the main file's path."""
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / self.name
        path.write_bytes(_encode(self.lines))
        if self.subagent is not None:
            sub = folder / path.stem / "subagents" / "agent-a0123456789abcdef.jsonl"
            sub.parent.mkdir(parents=True, exist_ok=True)
            sub.write_bytes(_encode(self.subagent))
        return path


def _encode(lines: list[Line]) -> bytes:
    return b"".join((line if isinstance(line, bytes) else orjson.dumps(line)) + b"\n" for line in lines)


def _objects(lines: list[Line]) -> list[int]:
    return [i for i, line in enumerate(lines) if isinstance(line, dict)]


def _id_pool(lines: list[Line]) -> list[str]:
    """Ids already in the window: reusing one makes a duplicate."""
    keys = ("uuid", "parentUuid")
    return [v for line in lines if isinstance(line, dict) for k in keys if isinstance(v := line.get(k), str)]


def _blocks(line: dict[str, Any]) -> list[Any]:
    message = line.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


# Each edit changes line `i` (a JSON object, already copied) of `lines` in place and says what it did.
Edit: TypeAlias = Callable[[st.DrawFn, list[Line], int, dict[str, Any]], str]


def _set_id(draw: st.DrawFn, lines: list[Line], i: int, line: dict[str, Any]) -> str:
    key = draw(st.sampled_from(ID_FIELDS))
    line[key] = value = draw(ids | st.sampled_from(_id_pool(lines) or [""]))
    return f"line {i}: {key} = {value[:40]!r}"


def _set_block_id(draw: st.DrawFn, lines: list[Line], i: int, line: dict[str, Any]) -> str:
    ided = [b for b in _blocks(line) if isinstance(b, dict) and _ID_KEY.get(str(b.get("type")))]
    if not ided:
        return "block_id: no tool block"
    block = draw(st.sampled_from(ided))
    key = _ID_KEY[block["type"]]
    content = [{**b, key: draw(ids)} if b is block else b for b in _blocks(line)]
    line["message"] = {**line["message"], "content": content}
    return f"line {i}: block {key} replaced"


def _drop_or_retype(draw: st.DrawFn, obj: dict[str, Any], key: str) -> str:
    if draw(st.booleans()):
        obj.pop(key, None)
        return f"drop {key}"
    obj[key] = draw(json_values)
    return f"{key} = {obj[key]!r:.60}"


def _edit_field(draw: st.DrawFn, lines: list[Line], i: int, line: dict[str, Any]) -> str:
    return f"line {i}: " + _drop_or_retype(draw, line, draw(st.sampled_from(FIELDS)))


def _edit_message(draw: st.DrawFn, lines: list[Line], i: int, line: dict[str, Any]) -> str:
    if not isinstance(line.get("message"), dict):
        return "message_field: no message"
    line["message"] = message = dict(line["message"])
    return f"line {i}: message." + _drop_or_retype(draw, message, draw(st.sampled_from(MESSAGE_FIELDS)))


def _edit_block(draw: st.DrawFn, lines: list[Line], i: int, line: dict[str, Any]) -> str:
    blocks = _blocks(line)
    at = draw(st.integers(0, len(blocks) - 1)) if blocks else 0
    if not blocks or not isinstance(blocks[at], dict) or not blocks[at]:
        return "block_field: no block"
    block = dict(blocks[at])
    done = _drop_or_retype(draw, block, draw(st.sampled_from(sorted(block))))
    line["message"] = {**line["message"], "content": [*blocks[:at], block, *blocks[at + 1 :]]}
    return f"line {i}: block {at}: {done}"


def _glue(draw: st.DrawFn, lines: list[Line], i: int, line: dict[str, Any]) -> str:
    j = draw(st.sampled_from(_objects(lines)))
    lines[i] = orjson.dumps(line) + draw(st.sampled_from([b"", b" ", b"\r"])) + orjson.dumps(lines[j])
    if j != i:
        del lines[j]  # the newline between them was lost
    return f"glue {j} onto {i}"


def _truncate(draw: st.DrawFn, lines: list[Line], i: int, line: dict[str, Any]) -> str:
    raw = orjson.dumps(line)
    cut = draw(st.integers(0, len(raw) - 1))
    lines[i] = raw[:cut]
    return f"line {i}: truncated at byte {cut}"


def _spread(draw: st.DrawFn, lines: list[Line], i: int, line: dict[str, Any]) -> str:
    text = orjson.dumps(line.get("message")).decode() if draw(st.booleans()) else _SSE
    line["message"] = {str(n): ch for n, ch in enumerate(text[:2000])}
    return f"line {i}: message spread into an object"


_EDITS: dict[str, Edit] = {
    "id": _set_id,
    "block_id": _set_block_id,
    "field": _edit_field,
    "message_field": _edit_message,
    "block_field": _edit_block,
    "glue": _glue,
    "truncate": _truncate,
    "spread": _spread,
}


@st.composite
def _edit(draw: st.DrawFn, lines: list[Line]) -> str:
    """Apply one edit to `lines` in place; returns what it did (shown when a test fails)."""
    objects = _objects(lines)
    kind = draw(st.sampled_from(["id", "id", *_EDITS, "duplicate", "reorder"]))
    if kind in ("duplicate", "reorder") or not objects:
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        if kind == "duplicate":
            lines.insert(j, lines[i])
        else:
            lines.insert(j, lines.pop(i))
        return f"{kind} {i} -> {j}"
    i = draw(st.sampled_from(objects))
    line = lines[i] = dict(lines[i])  # type: ignore[arg-type]  # objects holds dict lines only
    return _EDITS[kind](draw, lines, i, line)


@st.composite
def _window(draw: st.DrawFn, files: list[Path], max_lines: int) -> tuple[Path, list[Line]]:
    path = draw(st.sampled_from(files))
    raw = source_lines(path)
    if not raw:
        return path, []
    start = draw(st.integers(0, len(raw) - 1))
    size = draw(st.integers(1, max_lines))
    return path, [orjson.loads(line) for line in raw[start : start + size]]


def _mutate(draw: st.DrawFn, lines: list[Line], max_edits: int) -> list[str]:
    edit: Callable[[list[Line]], st.SearchStrategy[str]] = _edit
    return [draw(edit(lines)) for _ in range(draw(st.integers(0, max_edits))) if lines]


@st.composite
def mutants(draw: st.DrawFn, files: list[Path], *, max_lines: int = 40, max_edits: int = 6) -> Mutant:
    """A damaged window of one of `files`, named like it, sometimes with a damaged subagent beside it."""
    path, lines = draw(_window(files, max_lines))
    edits = _mutate(draw, lines, max_edits)
    subagent = None
    if draw(st.integers(0, 3)) == 0:
        _, subagent = draw(_window(files, max_lines // 2))
        edits += [f"subagent: {e}" for e in _mutate(draw, subagent, max_edits // 2)]
    return Mutant(path.name, lines, subagent, edits)
