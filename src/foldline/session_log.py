"""`SessionLog`: the session's one write path, timeline first, then transcript, then an event (R1.1, R1.7).

The engine, the tool runner and recovery all record through it, so "append to the timeline" can
never again be done without also reaching the disk and the UI, and every new entry is chained to
the one before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from foldline.events import EventBus, RecordEvent
from foldline.timeline import AnyRecord, Entry, Timeline, new_uuid, now_iso

__all__ = ["SessionLog", "TranscriptSink"]

E = TypeVar("E", bound=Entry)


class TranscriptSink(Protocol):
    """Where records are persisted (a `TranscriptWriter`, or a fake in tests)."""

    def append(self, record: AnyRecord, *, sync: bool = False) -> None:
        """Write one record; `sync` asks for it to be durable before returning."""
        ...

    def sync(self) -> None:
        """Make everything written so far durable."""
        ...


@dataclass
class SessionLog:
    """Appends records to the timeline, the transcript (when there is one) and the event bus."""

    timeline: Timeline
    transcript: TranscriptSink | None
    events: EventBus
    clock: Callable[[], float] = time.time
    """Stamps new entries: the engine's clock, so a simulated hour passes for the records too and
    Microcompact's idle check (last reply's timestamp against the same clock) agrees with it."""

    def entry(self, cls: type[E], **fields: Any) -> E:
        """A new entry of `cls`, chained to the newest entry and stamped with this session's id."""
        return cls(
            uuid=new_uuid(),
            parent_uuid=self.timeline.last_uuid,
            timestamp=now_iso(self.clock()),
            session_id=self.timeline.session_id,
            **fields,
        )

    def append(self, record: AnyRecord, *, sync: bool = False) -> None:
        """Record `record` everywhere; `sync` makes it durable before tools with effects may run."""
        self.timeline.append(record)
        if self.transcript is not None:
            self.transcript.append(record, sync=sync)
        self.events.emit(RecordEvent(record))

    def sync(self) -> None:
        """Make everything appended so far durable (the fsync policy decides how hard)."""
        if self.transcript is not None:
            self.transcript.sync()
