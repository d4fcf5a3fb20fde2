"""The event timeline: the one authoritative, append-only record of a session (design.md §1).

Owns the entry types (R1.3), the control records that later stages append instead of editing
history (snip boundaries, cleared results, collapse commits, compact boundaries, cache pins, latched
headers: R2.1),
the `Timeline` container, and the per-consumer views (R1.4, R1.5) as pure functions.

Invariants:
- Records are frozen values; the timeline only ever grows (`append`), nothing is edited in place.
- Every record carries a `kind` tag, which is also its JSONL discriminator (permanent API).
- Views never copy history into a second editable structure: they are filters over a snapshot.
"""

from __future__ import annotations

import hashlib
import random
import re
import uuid as _uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Literal, TypeAlias

import msgspec

from foldline._types import Block, JSONObject

__all__ = [
    "ENTRY_TYPES",
    "AnyRecord",
    "ApiErrorInfo",
    "AssistantEntry",
    "AssistantMessage",
    "AttachmentEntry",
    "CachePin",
    "CollapseCommit",
    "CompactBoundary",
    "ControlRecord",
    "Entry",
    "LatchedHeaders",
    "ProgressEntry",
    "Record",
    "ResultsCleared",
    "SnipBoundary",
    "SystemEntry",
    "Timeline",
    "UnknownRecord",
    "Usage",
    "UserEntry",
    "UserMessage",
    "api_filter",
    "is_api_visible",
    "new_uuid",
    "now_iso",
    "seeded_uuids",
    "short_id",
    "ui_view",
]


_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"
_BASE36_PAIRS = [a + b for a in _BASE36 for b in _BASE36]
"""Every number below 36**2 as exactly two base-36 digits."""
_HEX_HEAD = re.compile(r"[0-9a-fA-F]{10}")


def short_id(uuid: str) -> str:
    """The first 10 hex digits of a uuid read as an integer, written in base 36 (R3.1.1).

    Any other string (imported ids such as `request_<hex>`, or an empty one) is tagged by the first
    10 hex digits of its SHA-256 instead, so the tag is total and stable; real uuids keep their tags,
    which snip requests already in transcripts refer to.
    """
    head = uuid.replace("-", "")[:10]
    if not _HEX_HEAD.fullmatch(head):
        head = hashlib.sha256(uuid.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    value = int(head, 16)
    # Two base-36 digits per step from a table, unrolled: ten hex digits are below 1296**4, so four
    # pairs always hold the value (every user message is tagged on each request, every one of them
    # on a cold or resumed session's first).
    high, r0 = divmod(value, 1296)
    high, r1 = divmod(high, 1296)
    high, r2 = divmod(high, 1296)
    pairs = _BASE36_PAIRS
    return (pairs[high] + pairs[r2] + pairs[r1] + pairs[r0]).lstrip("0") or "0"


_SEEDED: ContextVar[random.Random | None] = ContextVar("foldline_seeded_uuids", default=None)


def new_uuid() -> str:
    """A fresh random entry id (uuid4, canonical text form); drawn from a seed inside
    `seeded_uuids`."""
    drawn = _SEEDED.get()
    if drawn is None:
        return str(_uuid.uuid4())
    return str(_uuid.UUID(int=drawn.getrandbits(128), version=4))


@contextmanager
def seeded_uuids(seed: int) -> Iterator[None]:
    """Entry ids drawn from `seed` within this block (and the tasks started in it), not from the OS.

    Ids reach the model: every user message is tagged with its id's `short_id`, and a collapse
    commit is named by one. Two runs of one simulated session must send the same bytes, or their
    costs differ by chance (simulations and benchmarks use this; a real session never does).
    """
    token = _SEEDED.set(random.Random(seed))
    try:
        yield
    finally:
        _SEEDED.reset(token)


def now_iso(at: float | None = None) -> str:
    """The current UTC time (or `at`, seconds since the epoch) as ISO-8601 with milliseconds and `Z`,
    as Claude Code writes it."""
    moment = datetime.now(UTC) if at is None else datetime.fromtimestamp(at, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Struct(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Common struct settings: immutable, keyword-only, optional keys left out of the JSON."""


# --- API message payloads ---------------------------------------------------------------------


class Usage(_Struct, frozen=True, kw_only=True):
    """Token usage the API reported for one response (R3.0.2 anchors token counts on it)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation: dict[str, int] | None = None
    """`{ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}` where the API splits writes by TTL."""
    cache_deleted_input_tokens: int = 0
    """Tokens removed from the cached prefix by `cache_edits` deletions (R8.4)."""
    cache_miss_reason: str | None = None
    """The provider's own diagnosis of a cache miss, where it gives one (foldline serve does, R7.5.1)."""

    @property
    def prompt_tokens(self) -> int:
        """All input tokens of the request: uncached + cache writes + cache reads."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens


class UserMessage(_Struct, frozen=True, kw_only=True):
    """The API payload of a user turn: a string or a list of content blocks."""

    role: Literal["user"] = "user"
    content: str | list[Block]


class AssistantMessage(_Struct, frozen=True, kw_only=True):
    """The API payload of an assistant turn (or of one streamed piece of it: S3 merges by `id`)."""

    role: Literal["assistant"] = "assistant"
    id: str
    """The API message id (`msg_...`); pieces of one streamed reply share it."""
    model: str = ""
    content: list[Block]
    stop_reason: str | None = None
    stop_sequence: str | None = None
    usage: Usage | None = None


class ApiErrorInfo(_Struct, frozen=True, kw_only=True):
    """What an API error said, kept on the synthetic entry that records it (S2 reads it)."""

    status: int | None = None
    error_type: str = ""
    message: str = ""


# --- Timeline entries (R1.3) ------------------------------------------------------------------


class _EntryBase(_Struct, frozen=True, kw_only=True, tag_field="kind"):
    uuid: str
    parent_uuid: str | None = None
    timestamp: str
    session_id: str = ""
    is_virtual: bool = False
    """Generated internally (a composite tool's inner calls, R1.6): shown, never sent."""
    is_sidechain: bool = False
    """Belongs to a subagent's conversation, not the main chain (imported transcripts)."""


class UserEntry(_EntryBase, frozen=True, kw_only=True, tag="user"):
    """A user turn: typed input, tool results, or system-injected content (`is_meta`)."""

    message: UserMessage
    is_meta: bool = False
    """Injected by the system (caveats, reminders, skill bodies), not typed by the user."""
    is_compact_summary: bool = False
    """The summary message that starts the context after a compact boundary (R3.4.4)."""


class AssistantEntry(_EntryBase, frozen=True, kw_only=True, tag="assistant"):
    """A model reply, whole or one streamed piece of it."""

    message: AssistantMessage
    is_api_error_message: bool = False
    """A synthetic entry recording an API error; S0 filters it, S2 reads it."""
    api_error: ApiErrorInfo | None = None


class ProgressEntry(_EntryBase, frozen=True, kw_only=True, tag="progress"):
    """Tool progress ("Running bash…"): UI only."""

    text: str = ""
    tool_use_id: str | None = None
    data: JSONObject | None = None


class SystemEntry(_EntryBase, frozen=True, kw_only=True, tag="system"):
    """A notice for the user ("context compacted"); `local_command` output is also sent to the API."""

    subtype: str = "notice"
    content: str = ""
    level: Literal["info", "warning", "error"] = "info"
    data: JSONObject | None = None


class AttachmentEntry(_EntryBase, frozen=True, kw_only=True, tag="attachment"):
    """Context injected by hooks: project instruction files, memory, skills, hook output (R9.3)."""

    attachment_type: str
    content: str | list[Block]
    path: str | None = None
    tool_use_id: str | None = None
    """The tool call this attachment belongs beside (S1 moves it next to that call's result)."""


# --- Control records: what later levels append instead of rewriting history (R2.1, R2.2) --------


class _ControlBase(_Struct, frozen=True, kw_only=True, tag_field="kind"):
    uuid: str
    timestamp: str


class SnipBoundary(_ControlBase, frozen=True, kw_only=True, tag="snip_boundary"):
    """The Snip tool removed these entries from the API view (R3.1.2); the disk keeps them."""

    removed_uuids: tuple[str, ...]
    tool_use_id: str | None = None
    """The Snip call this boundary carries out (absent in transcripts written before the round did)."""


class ResultsCleared(_ControlBase, frozen=True, kw_only=True, tag="results_cleared"):
    """Microcompact's time-based path (R3.2.2): these tool results read as `placeholder` from now on."""

    tool_use_ids: tuple[str, ...]
    placeholder: str


class CollapseCommit(_ControlBase, frozen=True, kw_only=True, tag="collapse_commit"):
    """A committed Context Collapse fold: the span `first_uuid..last_uuid` reads as `summary` (R3.3.3)."""

    collapse_id: str
    first_uuid: str
    last_uuid: str
    summary: str
    tokens_before: int = 0
    tokens_after: int = 0


class CompactBoundary(_ControlBase, frozen=True, kw_only=True, tag="compact_boundary"):
    """AutoCompact ran: API views start here; the summary is the next `is_compact_summary` entry (R3.4.4)."""

    trigger: Literal["auto", "manual", "reactive"] = "auto"
    logical_parent_uuid: str | None = None
    """The last entry before the boundary: the UI can still walk back through it."""
    pre_tokens: int = 0
    post_tokens: int | None = None
    preserved_uuids: tuple[str, ...] = ()
    """Entries from before the boundary kept verbatim, in the view right after the summary (R3.4.10)."""


class CachePin(_ControlBase, frozen=True, kw_only=True, tag="cache_pin"):
    """A `cache_edits` block pinned where it was first injected; re-sent there every request (R3.2.4)."""

    message_index: int
    block_index: int
    block: JSONObject


class LatchedHeaders(_ControlBase, frozen=True, kw_only=True, tag="latched_headers"):
    """Beta headers sent in this session: every later request sends them too (R7.5)."""

    betas: tuple[str, ...]


class UnknownRecord(msgspec.Struct, frozen=True):
    """A record of a kind this version does not know (written by a newer foldline): kept, ignored."""

    kind: str
    raw: JSONObject


Entry: TypeAlias = UserEntry | AssistantEntry | ProgressEntry | SystemEntry | AttachmentEntry
"""A timeline entry proper: something that happened in the conversation (R1.3)."""

ControlRecord: TypeAlias = (
    SnipBoundary | CollapseCommit | CompactBoundary | CachePin | LatchedHeaders | ResultsCleared
)
"""A record that changes how entries are projected, never the entries themselves."""

Record: TypeAlias = Entry | ControlRecord
"""Every kind the transcript stores (the tagged union the JSONL decoder targets)."""

AnyRecord: TypeAlias = Record | UnknownRecord
"""What a resumed timeline can hold: known records plus forward-compatible unknown ones."""

ENTRY_TYPES: tuple[type[Entry], ...] = (
    UserEntry,
    AssistantEntry,
    ProgressEntry,
    SystemEntry,
    AttachmentEntry,
)


# --- The timeline -----------------------------------------------------------------------------


class Timeline:
    """The session's authoritative, append-only sequence of records (R1.2).

    The UI reads it directly; the API layer and compaction work on `snapshot()`s. There is no
    method that edits or removes a record: snips, folds and compactions append control records.
    """

    def __init__(self, records: Iterable[AnyRecord] = (), *, session_id: str = "") -> None:
        self.session_id = session_id
        self._records: list[AnyRecord] = []
        self._by_uuid: dict[str, Entry] = {}
        for record in records:
            self.append(record)

    def append(self, record: AnyRecord) -> None:
        """Append one record (R1.7: writes are unconditional appends)."""
        self._records.append(record)
        if isinstance(record, ENTRY_TYPES):
            self._by_uuid[record.uuid] = record

    def snapshot(self) -> tuple[AnyRecord, ...]:
        """An immutable view of every record so far, for the API layer and compaction."""
        return tuple(self._records)

    def get(self, uuid: str) -> Entry | None:
        """The entry with this uuid, if any."""
        return self._by_uuid.get(uuid)

    def entries(self) -> list[Entry]:
        """Every entry proper, in append order (control and unknown records left out)."""
        return [r for r in self._records if isinstance(r, ENTRY_TYPES)]

    @property
    def last_uuid(self) -> str | None:
        """The uuid of the newest entry: the parent of the next one."""
        for record in reversed(self._records):
            if isinstance(record, ENTRY_TYPES):
                return record.uuid
        return None

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[AnyRecord]:
        return iter(self._records)


# --- Views (R1.4, R1.5): pure functions over a snapshot --------------------------------------------


def ui_view(records: Iterable[AnyRecord]) -> list[Entry]:
    """What the UI renders: every entry of every kind, virtual ones included, full history."""
    return [r for r in records if isinstance(r, ENTRY_TYPES)]


def is_api_visible(entry: Entry) -> bool:
    """R1.5: the API takes user, assistant and attachment entries, and `local_command` system output.

    Dropped: progress, other system notices, virtual entries, synthetic API-error entries.
    """
    if entry.is_virtual or entry.is_sidechain:
        return False
    if isinstance(entry, (UserEntry, AttachmentEntry)):  # a tuple tests faster than an `X | Y` union
        return True
    if isinstance(entry, AssistantEntry):
        return not entry.is_api_error_message
    if isinstance(entry, SystemEntry):
        return entry.subtype == "local_command"
    return False


def api_filter(entries: Sequence[Entry]) -> list[Entry]:
    """The API layer's filter (R1.5) over entries already projected by compaction."""
    return [e for e in entries if is_api_visible(e)]
