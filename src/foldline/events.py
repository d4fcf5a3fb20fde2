"""What the engine tells the outside world: UI events as they happen, telemetry through pluggable sinks.

UI events drive a terminal or a test; telemetry events go to opt-in sinks (a JSONL sink ships,
off by default: nothing is recorded unless a sink is added). Sinks never break the loop: a sink
that raises is reported once and dropped.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeAlias

from foldline._json import dumps
from foldline._types import JSONObject
from foldline.timeline import AnyRecord

__all__ = [
    "CompactionEvent",
    "EventBus",
    "JsonlTelemetrySink",
    "NoticeEvent",
    "RecordEvent",
    "RetryEvent",
    "TelemetrySink",
    "TextDeltaEvent",
    "ThinkingDeltaEvent",
    "ToolInputDeltaEvent",
    "UIEvent",
]


@dataclass(frozen=True)
class TextDeltaEvent:
    """Streamed model text, as it arrives (R5.1)."""

    text: str


@dataclass(frozen=True)
class ThinkingDeltaEvent:
    """Streamed thinking text, as it arrives."""

    text: str


@dataclass(frozen=True)
class ToolInputDeltaEvent:
    """A piece of a tool call's input JSON, as it streams (lets a UI show a long Write arriving)."""

    index: int
    partial_json: str


@dataclass(frozen=True)
class RecordEvent:
    """A record was appended to the timeline (and the transcript)."""

    record: AnyRecord


@dataclass(frozen=True)
class RetryEvent:
    """A transient failure; the request will be retried after `delay` seconds.

    Any streamed text shown since the last `RecordEvent` belongs to the failed attempt.
    """

    attempt: int
    delay: float
    reason: str


@dataclass(frozen=True)
class NoticeEvent:
    """Something the user should know (a compaction ran, a limit is near)."""

    text: str
    level: str = "info"


@dataclass(frozen=True)
class CompactionEvent:
    """A compaction level acted (R3.0.1): which one, what the user is told, and the numbers."""

    level: str
    text: str
    tokens_freed: int = 0
    data: JSONObject = field(default_factory=dict)


UIEvent: TypeAlias = (
    TextDeltaEvent
    | ThinkingDeltaEvent
    | ToolInputDeltaEvent
    | RecordEvent
    | RetryEvent
    | NoticeEvent
    | CompactionEvent
)


class TelemetrySink(Protocol):
    """Receives telemetry events (name, data)."""

    def __call__(self, name: str, data: JSONObject) -> None: ...


@dataclass
class JsonlTelemetrySink:
    """Appends one JSON line per telemetry event to `path` (opt-in)."""

    path: Path

    def __call__(self, name: str, data: JSONObject) -> None:
        line = dumps({"ts": time.time(), "event": name, **data}) + b"\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


@dataclass
class EventBus:
    """Fans UI events out to subscribers and telemetry to sinks."""

    subscribers: list[Callable[[UIEvent], None]] = field(default_factory=list)
    sinks: list[TelemetrySink] = field(default_factory=list)

    def emit(self, event: UIEvent) -> None:
        """Deliver a UI event to every subscriber."""
        for subscriber in self.subscribers:
            subscriber(event)

    def telemetry(self, name: str, **data: object) -> None:
        """Deliver a telemetry event to every sink; a failing sink is dropped, not fatal."""
        for sink in list(self.sinks):
            try:
                sink(name, dict(data))
            except Exception as e:  # a broken sink must never break the loop
                self.sinks.remove(sink)
                print(f"foldline: telemetry sink {sink!r} failed and was removed: {e}", file=sys.stderr)
