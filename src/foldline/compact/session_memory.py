"""The session-memory file: a running summary the background tail keeps current (R3.4.2, R3.4.10, R6.1).

`extract_memories` runs after a query loop (a tail hook) and, when the cadence says so, asks a forked
request (the main prefix plus the full-compaction instruction, so the server reads the prefix from
cache) for a summary in the nine sections AutoCompact uses, and writes it to
`<session dir>/session-memory.md`. When the context later crosses the AutoCompact threshold, a
current memory is used as the summary: no API call at compaction time.

Cadence (R3.4.10): first written once the context passes 10,000 tokens; refreshed once both 5,000
tokens and 3 tool calls have come after the entry the memory covers.

File format: one header line naming the last entry the memory covers, then the summary text:

```
<!-- foldline session memory; covers <entry uuid> -->
## Primary Request and Intent
...
```

Invariants:
- The file is replaced atomically (write beside, then rename): a reader sees the old memory or the new.
- A reply that is not a usable summary (`parse_sections`) never replaces the file.
- One extraction at a time: a tail that finds one running skips its turn.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from foldline._types import Block
from foldline.compact.fork import ask_forked
from foldline.compact.prompts import SUMMARY_SECTIONS, read_summary, summary_prompt
from foldline.config import Config
from foldline.errors import PromptTooLongAPIError
from foldline.events import EventBus, NoticeEvent
from foldline.projection import context_tokens_of, project_view
from foldline.providers.base import Provider
from foldline.timeline import AnyRecord, AssistantEntry, Entry, Timeline, Usage, api_filter
from foldline.tokens import estimate_entry, padded

__all__ = ["MEMORY_FILE", "MEMORY_INSTRUCTIONS", "MemoryState", "SessionMemory"]

MEMORY_FILE = "session-memory.md"
"""The file's name inside the session's directory (beside the transcript)."""

MEMORY_INSTRUCTIONS = (
    "This summary is the session's running memory: it will stand in for the conversation when the "
    "context fills, so write it for whoever continues the work."
)
"""What the memory request adds to the full-compaction instruction."""

_HEADER = re.compile(r"^<!-- foldline session memory; covers (\S+) -->\n")


@dataclass(frozen=True)
class MemoryState:
    """The memory file's content."""

    covered_uuid: str
    """The last entry the memory summarizes."""
    text: str


class _HasTimeline(Protocol):
    """What the tail hook reads from the engine it is given."""

    @property
    def timeline(self) -> Timeline: ...


@dataclass
class SessionMemory:
    """One session's memory file and the forked request that keeps it current.

    Args:
        path: The memory file (`<session dir>/session-memory.md`).
        provider, system, tools: The main conversation's, so the fork shares its cached prefix.
        config: The engine's configuration (`autocompact.memory` holds the cadence).
        events: Where extraction telemetry goes (optional).
    """

    path: Path
    provider: Provider
    system: str | Sequence[str | Block]
    tools: Sequence[Mapping[str, Any]]
    config: Config
    events: EventBus | None = None
    requests: int = 0
    """Memory requests sent so far (each one a forked call)."""
    usage: list[Usage] = field(default_factory=list)
    """The usage each memory request reported."""
    _running: bool = field(default=False, init=False)

    def load(self) -> MemoryState | None:
        """The memory as the file holds it; None when there is none (or it is not one of ours)."""
        try:
            raw = self.path.read_text(encoding="utf-8")
        except OSError:
            return None
        match = _HEADER.match(raw)
        if match is None:
            return None
        return MemoryState(match.group(1), raw[match.end() :])

    def save(self, state: MemoryState) -> None:
        """Replace the file atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"<!-- foldline session memory; covers {state.covered_uuid} -->\n{state.text}")
        os.replace(tmp, self.path)

    def due(self, records: Sequence[AnyRecord]) -> bool:
        """Whether the cadence calls for an extraction now (R3.4.10)."""
        cfg = self.config.autocompact.memory
        if not cfg.enabled:
            return False
        state = self.load()
        if state is None:
            return context_tokens_of(records) >= self.config.scaled(cfg.init_tokens)
        view = api_filter(project_view(records))
        index = next((i for i, e in enumerate(view) if e.uuid == state.covered_uuid), -1)
        after = view[index + 1 :]
        tokens = padded(sum(estimate_entry(e) for e in after))
        return tokens >= self.config.scaled(cfg.update_tokens) and _tool_calls(after) >= cfg.update_tool_calls

    async def extract(self, records: Sequence[AnyRecord]) -> bool:
        """Ask for a fresh memory of `records` and write it; False when the reply was not usable."""
        last = api_filter(project_view(records))
        if not last:
            return False
        self.requests += 1
        reply = await ask_forked(
            self.provider,
            records,
            summary_prompt(MEMORY_INSTRUCTIONS),
            config=self.config,
            system=self.system,
            tools=self.tools,
            max_tokens=self.config.summary_tokens,
            limit=self.config.blocking_limit,
        )
        self.usage.append(reply.usage)
        if read_summary(reply.text, SUMMARY_SECTIONS, free=self.config.summary_format == "free") is None:
            if self.events is not None:
                self.events.emit(NoticeEvent("session memory: the reply was not a usable summary", "warning"))
            return False
        self.save(MemoryState(last[-1].uuid, reply.text.strip()))
        if self.events is not None:
            self.events.telemetry(
                "session_memory", covered=last[-1].uuid, cache_read=reply.usage.cache_read_input_tokens
            )
        return True

    async def extract_memories(self, engine: _HasTimeline) -> None:
        """The background-tail hook (R6.1): extract when due, one extraction at a time."""
        if self._running:
            return
        records = engine.timeline.snapshot()
        if not self.due(records):
            return
        self._running = True
        try:
            await self.extract(records)
        except PromptTooLongAPIError as e:
            # The conversation is at the limit: the next round compacts it, and the memory catches
            # up on the smaller conversation. Not an error worth more than telemetry.
            if self.events is not None:
                self.events.telemetry("session_memory_skipped", reason=e.message)
        finally:
            self._running = False


def _tool_calls(entries: Sequence[Entry]) -> int:
    return sum(
        1
        for e in entries
        if isinstance(e, AssistantEntry)
        for b in e.message.content
        if b.get("type") == "tool_use"
    )
