"""Claude Code session transcripts (JSONL, CC 1.0 → 2.1) imported as foldline timeline records (R2.5).

Owns the reading of Claude Code's `~/.claude/projects/<cwd>/<session>.jsonl` files and their subagent
transcripts, and their mapping onto foldline's record types. The format is described, from real files,
in docs/design.md §T; the ids below (T1-T4) refer to it.

How a file becomes a timeline:
1. Every line is parsed on its own. Non-JSON lines, lines that are not objects, and user/assistant lines
   whose `message` is malformed (an SSE transcript spread into `{"0":"e",...}`, T2, or a content
   block the API would refuse: an unknown type, a required field missing or of the wrong kind) are
   skipped with a warning naming the line. Metadata line types (`summary`, `file-history-snapshot`,
   ...) and unknown types are ignored and counted; malformed and unknown lines that carry a uuid
   still link the chain (a walk passes through them), so a new CC node type does not cut history.
2. The live leaf is the newest-timestamp main-chain user/assistant line that is no other user/assistant
   line's ancestor (ties go to the later line in the file). A leaf holding only tool_results ranks by
   the time of the nearest ancestor that is not one, so a result that lags behind the next reply does
   not steal the live leaf. Timestamps compare as strings: CC always writes ISO-8601 UTC with
   milliseconds and `Z`.
3. The chain runs from that leaf back to its root through `parentUuid`; at a `compact_boundary` it
   continues through `logicalParentUuid`, so pre-compaction history stays, with a `CompactBoundary`
   record in place. Cycles, self-references and dangling parents (`request_<uuid>`) end the walk with a
   warning: the import is total.
4. Side branches that are not rewinds are pulled back in (T3 a, b): assistant lines sharing a
   `message.id` with a chain line, the `tool_result` of every tool_use of the chain (first one in file
   order when it is off the chain), and progress/attachment/system lines whose nearest user/assistant
   ancestor was kept. Everything else off the chain (rewound branches) is dropped and counted.
5. Records come out in chain order, kept side lines merged in by file position.

Choice: split assistant lines are MERGED at import. All lines of one `message.id` become one
`AssistantEntry` (blocks in chain order, `usage`/`stop_reason` from the last line), placed where the
first line was and carrying its uuid. `show`, counts and the API view then see whole replies. The
request normalizer (S3) must still merge split ids, because foldline's own streaming writes one entry
per piece. Blocks that carry an identity (tool_use id, thinking signature) are de-duplicated within a
message, which makes a replayed line harmless; other blocks are kept byte-exact, including empty
thinking with its signature. The CC-only `caller` key is stripped from tool_use blocks.

Parents: the main timeline is linear, like a native foldline one: each record's `parent_uuid` is the
previous main record's uuid. Sidechain records keep their original parent (mapped onto the merged
entry when it pointed at a merged-away line).

Subagents: inline 1.0.x `isSidechain` lines are kept in file position, marked `is_sidechain=True`.
Subagent files (`<session>/subagents/agent-*.jsonl`, and legacy `agent-<8hex>.jsonl` beside the main
file with the same `sessionId`) are linearized on their own and appended after the main records, marked
`is_sidechain=True`; a compact boundary inside a sidechain becomes a `SystemEntry(subtype=
"compact_boundary")`, because a `CompactBoundary` record would restart the main API view. A subagent
file imported by itself is its own main chain (`is_sidechain=False`); its session id is the file stem,
since its lines carry the parent session's id.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from foldline._json import JSONDecodeError, dumps, loads
from foldline._types import Block, JSONObject
from foldline.errors import TranscriptError
from foldline.timeline import (
    AnyRecord,
    ApiErrorInfo,
    AssistantEntry,
    AssistantMessage,
    AttachmentEntry,
    CompactBoundary,
    ProgressEntry,
    Record,
    SystemEntry,
    Usage,
    UserEntry,
    UserMessage,
)

__all__ = [
    "FileStats",
    "ImportIssue",
    "ImportedSession",
    "import_claude_code",
    "subagent_files",
]

# Conversation node types. Every other `type` (metadata such as `summary` or `file-history-snapshot`,
# or one a newer CC adds) is ignored and counted in `FileStats.ignored` (T1).
_GRAPH_TYPES = frozenset({"user", "assistant", "system", "attachment", "progress"})
_SIDE_TYPES = frozenset({"system", "attachment", "progress"})
_ENVELOPE_KEYS = frozenset(
    {
        "type", "uuid", "parentUuid", "logicalParentUuid", "isSidechain", "userType", "cwd", "sessionId",
        "version", "gitBranch", "timestamp", "entrypoint", "slug", "content", "level", "subtype", "isMeta",
        "agentId", "promptId", "permissionMode",
    }
)  # fmt: skip
# The content block types a CC message can carry back to the API, with the fields each must have and
# their JSON kinds, as the Messages API takes them. A line with any other block, or a block missing
# one of these, is malformed: sending it would be refused. `tool_result` content items are a subset.
_BLOCK_FIELDS: dict[str, dict[str, type]] = {
    "text": {"text": str},
    "image": {"source": dict},
    "document": {"source": dict},
    "tool_use": {"id": str, "name": str, "input": dict},
    "tool_result": {"tool_use_id": str},
    "thinking": {"thinking": str, "signature": str},
    "redacted_thinking": {"data": str},
    "tool_reference": {"tool_name": str},
}
_RESULT_ITEMS = frozenset({"text", "image", "document", "tool_reference"})
_LEGACY_AGENT = re.compile(r"agent-[0-9a-f]{8}\.jsonl")
_STATUS_PREFIX = re.compile(r"\s*(\d{3})\b")


# --- Public result types -------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportIssue:
    """Something in a source file that was skipped or repaired: where, and why."""

    path: Path
    line: int
    """1-based line number in `path` (0 when the issue is about the whole file)."""
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class FileStats:
    """What one source file contributed to an import."""

    path: Path
    lines: int
    """Non-empty lines read."""
    records: int
    """Records produced (after merging split assistant lines)."""
    sidechain: bool
    """The whole file is a subagent transcript appended as sidechain records."""
    malformed: int = 0
    """Lines skipped with a warning (not JSON, not an object, malformed message)."""
    off_chain: int = 0
    """Conversation lines left out because they sit on a rewound branch (or are orphans)."""
    ignored: Mapping[str, int] = field(default_factory=dict)
    """Metadata and unknown line types, by type."""


@dataclass(frozen=True)
class ImportedSession:
    """A Claude Code session as foldline records, with everything the import had to say about it."""

    path: Path
    session_id: str
    records: list[AnyRecord]
    warnings: list[ImportIssue]
    files: list[FileStats]
    is_subagent: bool = False
    """`path` itself is a subagent transcript (its chain is the timeline)."""


# --- Parsed lines --------------------------------------------------------------------------------


@dataclass(eq=False)
class _Line:
    no: int
    raw: JSONObject
    type: str
    uuid: str
    parent: str | None
    sidechain: bool
    valid: bool
    """False for a graph node whose payload is malformed: walked through, never emitted."""

    @property
    def timestamp(self) -> str:
        value = self.raw.get("timestamp")
        return value if isinstance(value, str) else ""

    @property
    def message_id(self) -> str:
        message = self.raw["message"]
        mid = message.get("id")
        return mid if isinstance(mid, str) and mid else self.uuid

    @property
    def is_boundary(self) -> bool:
        return self.type == "system" and self.raw.get("subtype") == "compact_boundary"

    def blocks(self) -> list[Block]:
        content = self.raw["message"]["content"]
        return content if isinstance(content, list) else []


@dataclass
class _Parsed:
    path: Path
    lines: list[_Line] = field(default_factory=list)
    by_uuid: dict[str, _Line] = field(default_factory=dict)
    issues: list[ImportIssue] = field(default_factory=list)
    ignored: Counter[str] = field(default_factory=Counter)
    malformed: int = 0
    read: int = 0

    def warn(self, line: int, reason: str) -> None:
        self.issues.append(ImportIssue(self.path, line, reason))


def _message_problem(obj: JSONObject) -> str | None:
    """Why a user/assistant line's `message` cannot be used, or None when it is fine."""
    message = obj.get("message")
    if not isinstance(message, dict):
        return "message is missing or not an object"
    if message and all(key.isdigit() for key in message):
        return "message is a string spread into an object (malformed SSE line)"
    content = message.get("content")
    if isinstance(content, str) and obj["type"] == "user":
        return None
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        return "message content is neither a string nor a list of blocks"
    return next((f"content block {i}: {p}" for i, b in enumerate(content) if (p := _block_problem(b))), None)


def _block_problem(block: JSONObject) -> str | None:
    """Why a content block cannot be sent back to the API, or None when its own fields are usable."""
    kind = block.get("type")
    if not isinstance(kind, str) or kind not in _BLOCK_FIELDS:
        return f"type {kind!r:.40} is not a content block type foldline can send"
    for key, expected in _BLOCK_FIELDS[kind].items():
        if not isinstance(block.get(key), expected):
            return f"{kind}.{key} is missing or not a {expected.__name__}"
    if kind == "tool_result":
        if not isinstance(block.get("is_error", False), bool):
            return "tool_result.is_error is not a boolean"
        inner = block.get("content", "")
        items = inner if isinstance(inner, list) else []
        if not isinstance(inner, str | list) or not all(
            isinstance(b, dict) and not _block_problem(b) and b["type"] in _RESULT_ITEMS for b in items
        ):
            return "tool_result.content is neither a string nor a list of blocks"
    return None


def _parse_line(parsed: _Parsed, no: int, data: bytes) -> None:
    try:
        obj = loads(data)
    except JSONDecodeError as exc:
        parsed.malformed += 1
        parsed.warn(no, f"not JSON ({exc}); line skipped")
        return
    kind = obj.get("type") if isinstance(obj, dict) else None
    if not isinstance(kind, str):
        parsed.malformed += 1
        parsed.warn(no, "not an object with a string `type`; line skipped")
        return
    uuid = obj.get("uuid")
    known = kind in _GRAPH_TYPES
    if not known:
        parsed.ignored[kind] += 1
    if not isinstance(uuid, str):
        if known:
            parsed.malformed += 1
            parsed.warn(no, f"{kind} line without a uuid; line skipped")
        return
    problem = _message_problem(obj) if kind in ("user", "assistant") else None
    if problem:
        parsed.malformed += 1
        parsed.warn(no, f"{problem}; line skipped")
    parent = obj.get("parentUuid")
    # An unknown type with a uuid may be a new kind of chain node: index it so the walk passes through.
    line = _Line(no, obj, kind, uuid, parent if isinstance(parent, str) else None,
                 obj.get("isSidechain") is True, known and problem is None)  # fmt: skip
    if uuid in parsed.by_uuid:
        parsed.warn(no, f"duplicate uuid {uuid} (first on line {parsed.by_uuid[uuid].no}); line skipped")
        return
    parsed.by_uuid[uuid] = line
    parsed.lines.append(line)


def _parse_file(path: Path) -> _Parsed:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TranscriptError(
            f"{path}: cannot read the Claude Code transcript ({exc.strerror or exc})"
        ) from exc
    parsed = _Parsed(path)
    # Split on b"\n" only: U+2028 inside a string is not a line break (str.splitlines would split it).
    for no, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            parsed.read += 1
            _parse_line(parsed, no, raw)
    return parsed


# --- Linearization -------------------------------------------------------------------------------


def _up(line: _Line) -> str | None:
    """The next node towards the root: `parentUuid`, or across a compaction, `logicalParentUuid`."""
    if line.parent is None and line.is_boundary:
        logical = line.raw.get("logicalParentUuid")
        return logical if isinstance(logical, str) else None
    return line.parent


def _live_leaf(parsed: _Parsed, side: bool) -> _Line | None:
    """The newest user/assistant line of the `side` chain that no other user/assistant line descends from."""
    ancestors: set[str] = set()
    for line in parsed.lines:
        if line.type not in ("user", "assistant"):
            continue
        up = _up(line)
        while up is not None and up not in ancestors and up in parsed.by_uuid:
            ancestors.add(up)
            up = _up(parsed.by_uuid[up])
    candidates = [
        ln for ln in parsed.lines if ln.type in ("user", "assistant") and ln.valid and ln.sidechain == side
    ]
    leaves = [ln for ln in candidates if ln.uuid not in ancestors]
    if not leaves and candidates:
        # Every candidate is someone's ancestor: only a cycle does that. Start from the file's end.
        parsed.warn(candidates[-1].no, "no leaf found (parent cycle); starting from the last line")
        return candidates[-1]
    return max(leaves, key=lambda ln: (_rank_time(parsed, ln), ln.no), default=None)


def _rank_time(parsed: _Parsed, leaf: _Line) -> str:
    """When the conversation was at `leaf`: a bare tool_result counts from the call it answers.

    CC can write a tool_result after the reply that continues past it (T3 b); ranking that result by
    its own, later timestamp would make it the live leaf and drop the reply.
    """
    line, seen = leaf, {leaf.uuid}
    while _only_tool_results(line):
        up = parsed.by_uuid.get(line.parent) if line.parent is not None else None
        if up is None or up.uuid in seen:
            break
        line = up
        seen.add(up.uuid)
    return line.timestamp


def _walk_chain(parsed: _Parsed, leaf: _Line) -> list[_Line]:
    """Leaf back to root, returned root first; terminates on cycles and dangling parents."""
    chain: list[_Line] = []
    seen: set[str] = set()
    line: _Line | None = leaf
    while line is not None:
        if line.uuid in seen:
            parsed.warn(line.no, f"parent cycle at {line.uuid}; history before it is cut")
            break
        seen.add(line.uuid)
        chain.append(line)
        up = _up(line)
        if up is None:
            break
        line = parsed.by_uuid.get(up)
        # A compact boundary whose pre-compaction history is not in this file (a session continued
        # from another one) is where this file's history starts, as CC writes it: not damage.
        if line is None and not chain[-1].is_boundary:
            parsed.warn(chain[-1].no, f"parent {up} not found in the file; history before it is cut")
    chain.reverse()
    return chain


def _only_tool_results(line: _Line) -> bool:
    """A user line made of tool_result blocks alone (a tool's answer, no prompt text)."""
    blocks = line.blocks() if line.type == "user" and line.valid else []
    return bool(blocks) and all(b.get("type") == "tool_result" for b in blocks)


def _tool_result_ids(line: _Line) -> list[str]:
    if line.type != "user" or not line.valid:
        return []
    return [str(b.get("tool_use_id")) for b in line.blocks() if b.get("type") == "tool_result"]


def _gather_side_lines(parsed: _Parsed, chain: Sequence[_Line], side: bool) -> set[int]:
    """Line numbers off the chain that belong with it: split pieces, stray tool_results, side notices."""
    on_chain = {ln.no for ln in chain}
    pool = [ln for ln in parsed.lines if ln.sidechain == side and ln.no not in on_chain]
    chain_ids = {ln.message_id for ln in chain if ln.type == "assistant" and ln.valid}
    kept = {ln.no for ln in pool if ln.type == "assistant" and ln.valid and ln.message_id in chain_ids}
    selected = [*chain, *(ln for ln in pool if ln.no in kept)]
    wanted = {
        str(b.get("id"))
        for ln in selected
        if ln.type == "assistant" and ln.valid
        for b in ln.blocks()
        if b.get("type") == "tool_use"
    }
    wanted.difference_update(tid for ln in chain for tid in _tool_result_ids(ln))
    for ln in pool:
        ids = [tid for tid in _tool_result_ids(ln) if tid in wanted]
        if ids:
            kept.add(ln.no)
            wanted.difference_update(ids)
    anchors = on_chain | kept
    kept.update(ln.no for ln in pool if ln.type in _SIDE_TYPES and _anchored(parsed, ln, anchors))
    return kept


def _anchored(parsed: _Parsed, line: _Line, kept: set[int]) -> bool:
    """Whether the nearest user/assistant ancestor of a side line (walking through side lines) is kept."""
    seen: set[str] = set()
    up = line.parent
    while up is not None and up not in seen:
        seen.add(up)
        node = parsed.by_uuid.get(up)
        if node is None:
            return False
        if node.type in ("user", "assistant"):
            return node.no in kept
        up = node.parent
    return False


def _ordered(chain: Sequence[_Line], extra: Iterable[_Line]) -> list[_Line]:
    """Chain order, with extra lines slotted in before the first chain line that follows them in the file."""
    pending = sorted(extra, key=lambda ln: ln.no)
    out: list[_Line] = []
    i = 0
    for line in chain:
        while i < len(pending) and pending[i].no < line.no:
            out.append(pending[i])
            i += 1
        out.append(line)
    out.extend(pending[i:])
    return out


# --- Mapping lines to records --------------------------------------------------------------------


def _clean_block(block: Block) -> Block:
    if block.get("type") == "tool_use" and "caller" in block:
        return {k: v for k, v in block.items() if k != "caller"}
    return block


def _block_identity(block: Block) -> tuple[str, str] | None:
    kind = block.get("type")
    if kind == "tool_use":
        return ("tool_use", str(block.get("id")))
    if kind == "thinking" and block.get("signature"):
        return ("thinking", str(block["signature"]))
    return None


def _merged_blocks(lines: Sequence[_Line]) -> list[Block]:
    blocks: list[Block] = []
    seen: set[tuple[str, str]] = set()
    for line in lines:
        for block in line.blocks():
            ident = _block_identity(block)
            if ident is not None:
                if ident in seen:
                    continue
                seen.add(ident)
            blocks.append(_clean_block(block))
    return blocks


def _usage(raw: object) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    try:
        return msgspec.convert(raw, Usage)
    except msgspec.ValidationError:
        return None


def _api_error(lines: Sequence[_Line]) -> ApiErrorInfo:
    raw = next((ln.raw for ln in lines if ln.raw.get("isApiErrorMessage")), lines[-1].raw)
    text = "".join(str(b.get("text", "")) for ln in lines for b in ln.blocks() if b.get("type") == "text")
    details = raw.get("errorDetails")
    status = raw.get("apiErrorStatus")
    if not isinstance(status, int) and isinstance(details, str) and (m := _STATUS_PREFIX.match(details)):
        status = int(m.group(1))
    error = raw.get("error")
    return ApiErrorInfo(
        status=status if isinstance(status, int) else None,
        error_type=error if isinstance(error, str) else "",
        message=details if isinstance(details, str) and details else text,
    )


def _assistant_entry(lines: Sequence[_Line], parent: str | None, sidechain: bool) -> AssistantEntry:
    first, last = lines[0], lines[-1]
    message = last.raw["message"]
    model = message.get("model")
    synthetic = model == "<synthetic>" or any(ln.raw.get("isApiErrorMessage") for ln in lines)
    payload = AssistantMessage(
        id=first.message_id,
        model=model if isinstance(model, str) else "",
        content=_merged_blocks(lines),
        stop_reason=message.get("stop_reason") if isinstance(message.get("stop_reason"), str) else None,
        stop_sequence=message.get("stop_sequence") if isinstance(message.get("stop_sequence"), str) else None,
        usage=_usage(message.get("usage")),
    )
    return AssistantEntry(
        **_envelope(first, parent, sidechain),
        message=payload,
        is_api_error_message=synthetic,
        api_error=_api_error(lines) if synthetic else None,
    )


def _envelope(line: _Line, parent: str | None, sidechain: bool) -> dict[str, Any]:
    session = line.raw.get("sessionId")
    return {
        "uuid": line.uuid,
        "parent_uuid": parent,
        "timestamp": line.timestamp,
        "session_id": session if isinstance(session, str) else "",
        "is_sidechain": sidechain,
    }


def _level(raw: object) -> Literal["info", "warning", "error"]:
    if raw == "warning" or raw == "error":
        return raw
    return "info"


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else dumps(value).decode()


def _system_entry(line: _Line, parent: str | None, sidechain: bool) -> SystemEntry:
    raw = line.raw
    subtype = raw.get("subtype")
    data = {k: v for k, v in raw.items() if k not in _ENVELOPE_KEYS}
    return SystemEntry(
        **_envelope(line, parent, sidechain),
        subtype=subtype if isinstance(subtype, str) and subtype else "notice",
        content=_text(raw.get("content")),
        level=_level(raw.get("level")),
        data=data or None,
    )


def _boundary(line: _Line, logical: str | None) -> CompactBoundary:
    meta = line.raw.get("compactMetadata")
    meta = meta if isinstance(meta, dict) else {}
    trigger = meta.get("trigger")
    pre, post = meta.get("preTokens"), meta.get("postTokens")
    return CompactBoundary(
        uuid=line.uuid,
        timestamp=line.timestamp,
        trigger=trigger if trigger in ("auto", "manual") else "auto",
        logical_parent_uuid=logical,
        pre_tokens=pre if isinstance(pre, int) else 0,
        post_tokens=post if isinstance(post, int) else None,
    )


def _attachment_content(att: JSONObject) -> str:
    content = att.get("content")
    if isinstance(content, dict) and isinstance(content.get("file"), dict):
        return _text(content["file"].get("content"))
    if content is not None:
        return _text(content)
    rest = {k: v for k, v in att.items() if k != "type"}
    return _text(rest) if rest else ""


def _attachment_entry(line: _Line, parent: str | None, sidechain: bool) -> AttachmentEntry:
    att = line.raw.get("attachment")
    att = att if isinstance(att, dict) else {}
    path = att.get("filename") or att.get("path") or att.get("planFilePath")
    tool_use_id = att.get("toolUseID") or line.raw.get("toolUseID")
    return AttachmentEntry(
        **_envelope(line, parent, sidechain),
        attachment_type=str(att.get("type") or "unknown"),
        content=_attachment_content(att),
        path=path if isinstance(path, str) else None,
        tool_use_id=tool_use_id if isinstance(tool_use_id, str) else None,
    )


def _progress_entry(line: _Line, parent: str | None, sidechain: bool) -> ProgressEntry:
    data = line.raw.get("data")
    data = data if isinstance(data, dict) else {}
    text = data.get("hookName") or data.get("type") or ""
    tool_use_id = line.raw.get("toolUseID")
    return ProgressEntry(
        **_envelope(line, parent, sidechain),
        text=str(text),
        tool_use_id=tool_use_id if isinstance(tool_use_id, str) else None,
        data=data or None,
    )


def _user_entry(line: _Line, parent: str | None, sidechain: bool) -> UserEntry:
    return UserEntry(
        **_envelope(line, parent, sidechain),
        message=UserMessage(content=line.raw["message"]["content"]),
        is_meta=line.raw.get("isMeta") is True,
        is_compact_summary=line.raw.get("isCompactSummary") is True,
    )


class _Emitter:
    """Turns ordered lines into records: merges split replies, relinks parents."""

    def __init__(self, ordered: Sequence[_Line], main_side: bool, mark_all_sidechain: bool) -> None:
        self.main_side = main_side
        self.mark_all = mark_all_sidechain
        self.groups: dict[tuple[bool, str], list[_Line]] = {}
        for line in ordered:
            if line.type == "assistant" and line.valid:
                self.groups.setdefault((line.sidechain, line.message_id), []).append(line)
        self.alias: dict[str, str] = {}
        for lines in self.groups.values():
            self.alias.update({ln.uuid: lines[0].uuid for ln in lines[1:]})
        self.last_main: str | None = None
        self.records: list[Record] = []

    def emit(self, line: _Line) -> None:
        if not line.valid or line.uuid in self.alias:
            return
        on_main = line.sidechain == self.main_side
        parent = self.last_main if on_main else self._alias(line.parent)
        record = self._record(line, parent, self.mark_all or not on_main)
        if record is not None:
            self.records.append(record)
            if on_main:
                self.last_main = record.uuid

    def _alias(self, uuid: str | None) -> str | None:
        return self.alias.get(uuid, uuid) if uuid is not None else None

    def _record(self, line: _Line, parent: str | None, sidechain: bool) -> Record | None:
        if line.type == "assistant":
            return _assistant_entry(self.groups[(line.sidechain, line.message_id)], parent, sidechain)
        if line.type == "user":
            return _user_entry(line, parent, sidechain)
        if line.is_boundary and not sidechain:
            logical = line.raw.get("logicalParentUuid")
            return _boundary(line, self._alias(logical) if isinstance(logical, str) else self.last_main)
        if line.type == "system":
            return _system_entry(line, parent, sidechain)
        if line.type == "attachment":
            return _attachment_entry(line, parent, sidechain)
        if line.type == "progress":
            return _progress_entry(line, parent, sidechain)
        return None


# --- Import --------------------------------------------------------------------------------------


def _is_subagent_file(path: Path, parsed: _Parsed) -> bool:
    if path.name.startswith("agent-"):
        return True
    return bool(parsed.lines) and all(ln.sidechain for ln in parsed.lines)


def _session_id(path: Path, parsed: _Parsed, subagent: bool) -> str:
    if not subagent:
        for line in parsed.lines:
            sid = line.raw.get("sessionId")
            if isinstance(sid, str) and sid:
                return sid
    return path.stem


def _import_file(path: Path, *, as_sidechain: bool) -> tuple[list[AnyRecord], _Parsed, FileStats, bool]:
    parsed = _parse_file(path)
    subagent = as_sidechain or _is_subagent_file(path, parsed)
    side = subagent
    leaf = _live_leaf(parsed, side)
    chain = _walk_chain(parsed, leaf) if leaf is not None else []
    kept = _gather_side_lines(parsed, chain, side)
    on_chain = {ln.no for ln in chain}
    extra = [ln for ln in parsed.lines if ln.no in kept or (ln.sidechain != side and ln.no not in on_chain)]
    ordered = _ordered(chain, extra)
    emitter = _Emitter(ordered, side, as_sidechain)
    for line in ordered:
        emitter.emit(line)
    records: list[AnyRecord] = list(emitter.records)
    main_lines = sum(1 for ln in parsed.lines if ln.sidechain == side and ln.valid)
    stats = FileStats(
        path=path,
        lines=parsed.read,
        records=len(records),
        sidechain=as_sidechain,
        malformed=parsed.malformed,
        off_chain=main_lines - sum(1 for ln in chain if ln.valid) - len(kept),
        ignored=dict(parsed.ignored),
    )
    return records, parsed, stats, subagent


def _first_session_id(path: Path) -> str | None:
    """The `sessionId` of the first line of `path` that has one (reads only the head of the file).

    Memoized on the file's identity and stat, because listing a directory asks this of every legacy
    agent file once per main session file: N sessions beside N agent files would read N² heads.
    """
    try:
        st = path.stat()
    except OSError:
        return None
    return _head_session_id(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4096)
def _head_session_id(path: Path, mtime_ns: int, size: int) -> str | None:
    try:
        with path.open("rb") as fh:
            for _, raw in zip(range(50), fh, strict=False):
                try:
                    obj = loads(raw)
                except JSONDecodeError:
                    continue
                if isinstance(obj, dict) and isinstance(obj.get("sessionId"), str):
                    return str(obj["sessionId"])
    except OSError:
        return None
    return None


def subagent_files(path: Path | str, session_id: str | None = None) -> list[Path]:
    """Subagent transcripts that belong to the main session file `path` (both on-disk layouts).

    `<dir>/<stem>/subagents/agent-*.jsonl` always belongs to it; a legacy `<dir>/agent-<8hex>.jsonl`
    belongs to it when its lines carry `session_id` (default: the main file's own `sessionId`).
    """
    path = Path(path)
    if session_id is None:
        session_id = _first_session_id(path) or path.stem
    nested = sorted((path.parent / path.stem / "subagents").glob("agent-*.jsonl"))
    legacy = [
        p
        for p in sorted(path.parent.glob("agent-*.jsonl"))
        if _LEGACY_AGENT.fullmatch(p.name) and p != path and _first_session_id(p) == session_id
    ]
    return nested + legacy


def import_claude_code(path: Path | str, *, include_subagents: bool = True) -> ImportedSession:
    """Import one Claude Code session file (and, for a main file, its subagent files) as foldline records.

    Args:
        path: a `<session>.jsonl` main file, or a subagent `agent-*.jsonl` file (imported as its own
            timeline).
        include_subagents: for a main file, also append the records of its subagent files (both
            layouts) as sidechain records.

    Returns:
        The records in timeline order, the session id, every warning with its file and line, and
        per-file statistics (main file first).

    Raises:
        TranscriptError: the file cannot be read.
    """
    path = Path(path)
    records, parsed, stats, subagent = _import_file(path, as_sidechain=False)
    session_id = _session_id(path, parsed, subagent)
    warnings, files = list(parsed.issues), [stats]
    if include_subagents and not subagent:
        for sub in subagent_files(path, session_id):
            sub_records, sub_parsed, sub_stats, _ = _import_file(sub, as_sidechain=True)
            records.extend(sub_records)
            warnings.extend(sub_parsed.issues)
            files.append(sub_stats)
    return ImportedSession(path, session_id, records, warnings, files, is_subagent=subagent)
