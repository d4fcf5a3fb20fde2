"""How `foldline chat` shows a session: the engine's UI events rendered with rich, the status line, the recap.

`Renderer` subscribes to the engine's events. On a terminal it streams the answer as markdown (each
finished paragraph or code block is printed for good; the unfinished one is drawn live below it),
shows a spinner with what the turn is doing (waiting for the model, thinking, running a tool and
its latest progress line), collapses thinking to one line and prints every compaction receipt as it
fires (R3.0.1). Elsewhere (a pipe, a file) it prints the raw text as it streams, so scripts read
what the model wrote.

Invariants:
- Text from the model or a tool is never read as rich markup: it is printed as `Text` or `Markdown`.
- Nor is it ever acted on by the terminal: control characters and bidi controls in it are shown
  escaped (`neutralize`), on a terminal and in a pipe alike (a pipe often ends in one).
- Before anything asks the person a question, `pause()` takes the live display down, so the
  question and the typed answer are not drawn over.
"""

from __future__ import annotations

import textwrap
import time
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.text import Text

from foldline.cli._errors import web_page_summary
from foldline.cli._prompt import escape_controls
from foldline.config import Config
from foldline.engine import INTERRUPT_MARKER, INTERRUPT_MARKER_TOOLS, RESUME_MARKER
from foldline.events import (
    CompactionEvent,
    NoticeEvent,
    RecordEvent,
    RetryEvent,
    TextDeltaEvent,
    ThinkingDeltaEvent,
    ToolInputDeltaEvent,
    UIEvent,
)
from foldline.executor import INTERRUPTED_BEFORE_START, INTERRUPTED_WHILE_RUNNING
from foldline.media import decode_image
from foldline.pricing import prices_for
from foldline.projection import context_tokens_of
from foldline.sessions import is_typed_prompt
from foldline.timeline import AnyRecord, AssistantEntry, ProgressEntry, UserEntry
from foldline.usage import usage_of

__all__ = [
    "Renderer",
    "clip_words",
    "neutralize",
    "recap",
    "result_preview",
    "short_input",
    "split_markdown",
    "status_line",
]

_INPUT_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description")
_INTERRUPTED = (INTERRUPTED_BEFORE_START, INTERRUPTED_WHILE_RUNNING, RESUME_MARKER)


_TERMINAL_ACTIVE = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})
"""Format characters a terminal acts on: the bidi marks, embeddings, overrides and isolates."""


def neutralize(text: str) -> str:
    """Model or tool text made safe to write to a terminal: every control character but newline
    and tab (ESC of an ANSI or OSC sequence, CR, BS, BEL, C1's CSI) and every bidi control is shown
    escaped (`\\x1b`); the rest, zero-width joiners of emoji included, is left as written.

    Without it, a model's answer (or a file it echoes) could clear the screen, retitle the window,
    plant a hyperlink, or redraw lines above it, such as an earlier approval prompt."""
    if text.isprintable():
        return text  # the common case, and the fast one: no control or format character at all
    text = text.replace("\r\n", "\n")
    out = []
    for ch in text:
        code = ord(ch)
        if ch in "\n\t" or not (unicodedata.category(ch) == "Cc" or code in _TERMINAL_ACTIVE):
            out.append(ch)
        else:
            out.append(escape_controls(ch))
    return "".join(out)


def short_input(tool_input: Mapping[str, Any], limit: int = 80) -> str:
    """A tool call's input in one line: the field that says what it does (command, path), else all of it."""
    value = next((tool_input[k] for k in _INPUT_KEYS if isinstance(tool_input.get(k), str)), None)
    text = str(value) if value is not None else ", ".join(f"{k}={v!r}" for k, v in tool_input.items())
    return clip_words(escape_controls(" ".join(text.split())), limit)


def split_markdown(text: str) -> tuple[str, str]:
    """(finished, pending): `text` cut after its last blank line outside a code fence.

    What comes before can be rendered for good; the rest may still grow (a paragraph, a list, an
    open code block).
    """
    cut, fenced, offset = 0, False, 0
    for line in text.splitlines(keepends=True):
        offset += len(line)
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            if not fenced:
                cut = offset  # a code block just closed: it is finished
        elif not fenced and not line.strip() and line.endswith("\n"):
            cut = offset
    return text[:cut], text[cut:]


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)


def clip_words(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut at the last space before it (never mid-word unless one
    word is longer than the limit), ending in `…` when anything was cut."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    head = text[: cut if cut > limit // 2 else limit - 1].rstrip()
    return head + "…"


def _image_line(block: Mapping[str, Any]) -> str:
    source = block.get("source") or {}
    data = source.get("data") if isinstance(source, dict) else None
    media_type = str(source.get("media_type", "image")) if isinstance(source, dict) else "image"
    if not isinstance(data, str):
        return f"[image: {media_type}]"
    size = len(data) * 3 // 4  # base64: 4 characters per 3 bytes
    found = decode_image(data)
    dims = f", {found[1][0]}x{found[1][1]}" if found else ""
    return f"[image: {media_type}{dims}, {size / 1024:,.1f} KB]"


_PREVIEW_WIDTH = 100
"""Characters of one output line a tool result shows, on a terminal wide enough (a note is whole)."""


def result_preview(block: Mapping[str, Any], lines: int = 4, width: int = _PREVIEW_WIDTH) -> list[str]:
    """What a tool result shows in the REPL: its first `lines` non-blank lines, each escaped, tabs
    expanded (a Read's `     1\tcode` reads as code) and cut at a word boundary, then `… +N lines`
    for the rest; an image as its type, size and dimensions; `(no output)` when there is nothing."""
    content = block.get("content", "")
    parts = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
    rows: list[str] = []
    for part in parts:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "image":
            rows.append(_image_line(part))
        elif part.get("type") == "text":
            rows += [line.expandtabs(4).rstrip() for line in str(part.get("text", "")).splitlines()]
    rows = [row for row in rows if row.strip()]
    if not rows:
        return ["(no output)"]
    # a note is read whole (wrapped by the renderer), never clipped mid-sentence like output
    head = set(_workspace_notes(rows[:lines]))
    shown = [
        escape_controls(row) if row in head else clip_words(escape_controls(row), width)
        for row in rows[:lines]
    ]
    notes = _workspace_notes(rows[lines:])
    if len(rows) > lines + len(notes):
        shown.append(f"… +{len(rows) - lines - len(notes)} lines")
    return shown + [escape_controls(row) for row in notes]


_ALWAYS_SHOWN = (
    "Note: ",
    "Workspace: ",
    "Held back, not applied",
    "Warning: this command changed",
    "Changed by someone else",
)
"""What a call did to the workspace, what was held back or warned about, and what the sandbox did
to a command (`tools.bash`'s notes): shown whole however long the output above it is (the user, not
only the model, must see it)."""


def _workspace_notes(rows: list[str]) -> list[str]:
    """The rows of `rows` that start an `_ALWAYS_SHOWN` note, and the `- ` items under each."""
    notes: list[str] = []
    inside = False
    for row in rows:
        if row.startswith(_ALWAYS_SHOWN):
            notes.append(row)
            inside = True
        elif inside and row.startswith("- "):
            notes.append(row)
        else:
            inside = False
    return notes


class _Activity:
    """The live area: the unfinished paragraph, then a spinner saying what the turn is doing."""

    def __init__(self, renderer: Renderer) -> None:
        self.renderer = renderer
        self.spinner = Spinner("dots", style="cyan")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        r = self.renderer
        parts: list[RenderableType] = []
        if r.pending.strip():
            parts.append(Markdown(r.pending))
        elapsed = time.monotonic() - r.phase_since
        label = Text(f" {r.phase}… {elapsed:.0f}s · esc to interrupt", style="dim")
        if r.progress:
            label.append(f"  {r.progress}", style="dim italic")
        self.spinner.update(text=label)
        parts.append(self.spinner)
        yield Group(*parts)


class Renderer:
    """The engine's UI events on the console (subscribe it with `Session.open(on_event=...)`)."""

    def __init__(self, console: Console, *, live: bool | None = None, answer: bool = True) -> None:
        self.console = console
        self.live_ok = console.is_terminal if live is None else live
        self.answer = answer
        """Show the model's text as it streams; off for `-p`, which prints only the final answer
        (on stdout) and keeps this trace of calls, results and receipts on stderr."""
        self.pending = ""
        self.phase = "waiting for the model"
        self.phase_since = time.monotonic()
        self.progress = ""
        self._thinking: tuple[float, int] | None = None  # (started, chars)
        self._live: Live | None = None
        self._in_turn = False
        self._streamed_raw = False
        self._compacting = False
        """The phase names a compaction in progress (a progress notice) until its receipt arrives."""

    # --- turn boundaries ---------------------------------------------------------------------------

    def begin_turn(self) -> None:
        """A prompt was sent: show the spinner until the first token."""
        self._in_turn = True
        self.phase, self.phase_since, self.progress = "waiting for the model", time.monotonic(), ""
        self._show_live()

    def begin_work(self, phase: str) -> None:
        """Work outside a turn the person waits on (`/compact`): the spinner says `phase` and the
        seconds since it began, as a turn's does, until `end_turn`. A summary on a local model can
        take over a minute: a static line would look like a hang."""
        self._in_turn = True
        self.phase, self.phase_since, self.progress = phase, time.monotonic(), ""
        self._compacting = True  # its progress notice names the same work: the clock keeps running
        self._show_live()

    def end_turn(self) -> None:
        """The turn is over (finished, failed or interrupted): print what is pending, drop the spinner."""
        self._flush_text()
        self._end_thinking()
        self._stop_live()
        self._in_turn = False
        if self._streamed_raw:
            self.console.print()
            self._streamed_raw = False

    def pause(self) -> None:
        """Take the live display down (before a question); it comes back with the next event."""
        self._flush_text()
        self._stop_live()

    def print(self, renderable: RenderableType) -> None:
        """Print above the live area (or plainly), keeping the spinner where it is."""
        if self._streamed_raw:
            self.console.print()
            self._streamed_raw = False
        self.console.print(renderable)

    # --- events ------------------------------------------------------------------------------------

    def __call__(self, event: UIEvent) -> None:
        if isinstance(event, TextDeltaEvent):
            self._end_thinking()
            if self.answer:
                self._text(event.text)
        elif isinstance(event, ThinkingDeltaEvent):
            self._thinking_delta(event.text)
        elif isinstance(event, ToolInputDeltaEvent):
            self._flush_text()
            self._end_thinking()
            self._set_phase("writing a tool call")
        elif isinstance(event, RecordEvent):
            self._record(event.record)
        elif isinstance(event, RetryEvent):
            self.pending = ""  # what streamed belongs to the failed attempt
            reason = web_page_summary(event.reason) or clip_words(" ".join(event.reason.split()), 200)
            self.print(Text(f"retrying in {event.delay:.1f}s: {neutralize(reason)}", style="yellow"))
            self._set_phase(f"retrying (attempt {event.attempt + 1})")
        elif isinstance(event, NoticeEvent):
            style = {"warning": "yellow", "error": "red"}.get(event.level, "dim")
            self.print(Text(neutralize(event.text), style=style))
            if event.level == "progress" and self._in_turn:  # a summary the turn waits on: say so
                self._flush_text()
                if not self._compacting:  # under begin_work the phase already says it, since it began
                    self._set_phase(clip_words(neutralize(event.text).split(":")[0], 60))
                self._compacting = True
            elif self._compacting:  # the compaction failed or stopped: the turn goes on waiting
                self._compacting = False
                self._set_phase("waiting for the model")
        elif isinstance(event, CompactionEvent):  # R3.0.1: never clear silently
            self._flush_text()
            self.print(Text(f"⎯ {event.level}: {neutralize(event.text)}", style="cyan"))
            if self._compacting:
                self._compacting = False
                self._set_phase("waiting for the model")

    def _record(self, record: AnyRecord) -> None:
        if isinstance(record, AssistantEntry) and not record.is_virtual:
            self._flush_text()
            self._end_thinking()
            for block in record.message.content:
                if block.get("type") == "tool_use":
                    name = escape_controls(str(block.get("name")))  # the model names it: it may be anything
                    line = Text("⏺ ", style="magenta") + Text(name, style="bold magenta")
                    line.append(f"({short_input(block.get('input') or {})})", style="dim")
                    self.print(line)
                    self._set_phase(f"running {name}")
        elif isinstance(record, ProgressEntry):
            self.progress = escape_controls(" ".join(record.text.split()))[-80:]
        elif isinstance(record, UserEntry) and isinstance(record.message.content, list):
            results = [b for b in record.message.content if b.get("type") == "tool_result"]
            for block in results:
                style = "red" if block.get("is_error") else "dim"
                # a long line (a note) wraps under its own indent, at the terminal's width
                width = max(self.console.width - 4, 20)
                preview = result_preview(block, width=min(_PREVIEW_WIDTH, width))
                lines = [
                    textwrap.fill(line, width + 4, initial_indent=first, subsequent_indent="    ")
                    for first, line in zip(["  ⎿ ", *["    "] * (len(preview) - 1)], preview, strict=True)
                ]
                self.print(Text("\n".join(lines), style=style))
            if results and self._in_turn:
                self._set_phase("waiting for the model")

    # --- text and thinking -------------------------------------------------------------------------

    def _text(self, text: str) -> None:
        text = neutralize(text)
        if not self.live_ok:
            self.console.print(text, end="", markup=False, highlight=False)
            self._streamed_raw = True
            return
        self.pending += text
        finished, self.pending = split_markdown(self.pending)
        if finished.strip():
            self.console.print(Markdown(finished))
        self._set_phase("answering")
        self._show_live()

    def _flush_text(self) -> None:
        text, self.pending = self.pending, ""  # cleared first: the live area must not draw it twice
        if text.strip():
            self.console.print(Markdown(text))

    def _thinking_delta(self, text: str) -> None:
        started, chars = self._thinking or (time.monotonic(), 0)
        self._thinking = (started, chars + len(text))
        self._set_phase("thinking")
        self._show_live()

    def _end_thinking(self) -> None:
        if self._thinking is None:
            return
        started, chars = self._thinking
        self._thinking = None
        seconds = time.monotonic() - started
        self.print(Text(f"✻ thought for {seconds:.0f}s ({chars:,} chars)", style="dim italic"))

    # --- the live area -----------------------------------------------------------------------------

    def _set_phase(self, phase: str) -> None:
        if phase != self.phase:
            self.phase, self.phase_since, self.progress = phase, time.monotonic(), ""
        if self._in_turn:
            self._show_live()

    def _show_live(self) -> None:
        if not self.live_ok or not self._in_turn or self._live is not None:
            return
        self._live = Live(
            _Activity(self),
            console=self.console,
            refresh_per_second=8,
            transient=True,
            vertical_overflow="crop",
        )
        self._live.start()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


def status_line(
    records: Sequence[AnyRecord], config: Config, *, mode: str = "default", sandboxed: bool = True
) -> Text:
    """After a turn: the model, the context against the warning and blocking limits, the session's
    cost; and a permission mode other than `default`, and Bash unsandboxed, so neither is forgotten."""
    tokens = context_tokens_of(records)
    share = tokens / config.window if config.window else 0.0
    if tokens >= config.blocking_limit:
        style, note = "bold red", "at the blocking limit"
    elif tokens >= config.autocompact_threshold:
        style, note = "red", "compaction will run"
    elif tokens >= config.warning_threshold:
        style, note = "yellow", "past the warning line"
    else:
        style, note = "green", ""
    line = Text(f"{config.model} · ", style="dim")
    line.append(f"context {tokens:,}/{config.window:,} ({share:.0%})", style=style)
    line.append(
        f" warn {config.warning_threshold // 1000}K, block {config.blocking_limit // 1000}K"
        + (f": {note}" if note else ""),
        style="dim",
    )
    if prices_for(config.model).known:  # a local model has no list price: no made-up dollars
        line.append(f" · ${usage_of(records).cost():.4f}", style="dim")
    if mode != "default":
        line.append(f" · mode {mode}", style="bold yellow")
    if not sandboxed:
        line.append(" · Bash unsandboxed", style="bold yellow")
    return line


def _clip(text: str, limit: int) -> str:
    return clip_words(escape_controls(" ".join(text.split())), limit)


def _interrupted_calls(records: Sequence[AnyRecord]) -> Iterable[str]:
    """Tool calls whose recorded result says they were interrupted (or may have run, after a crash)."""
    calls: dict[str, Mapping[str, Any]] = {}
    for record in records:
        if isinstance(record, AssistantEntry):
            calls.update({b["id"]: b for b in record.message.content if b.get("type") == "tool_use"})
    for record in records:
        if isinstance(record, UserEntry) and isinstance(record.message.content, list):
            for block in record.message.content:
                text = _result_text(block) if block.get("type") == "tool_result" else ""
                if text in _INTERRUPTED:
                    call = calls.get(str(block.get("tool_use_id")), {})
                    shown = short_input(call.get("input") or {})
                    yield f"{call.get('name', 'a tool')}({shown}): {_clip(text, 90)}"


def recap(records: Sequence[AnyRecord], limit: int = 300) -> list[Text]:
    """Where a resumed session stopped: the last prompt, the last answer (shortened), interrupted calls."""
    last_prompt = next((r for r in reversed(records) if is_typed_prompt(r)), None)
    if last_prompt is None:
        return [Text("(no earlier prompt in this session)", style="dim")]
    assert isinstance(last_prompt, UserEntry)
    content = last_prompt.message.content
    prompt = content if isinstance(content, str) else " ".join(str(b.get("text", "")) for b in content)
    lines = [Text("last prompt: ", style="bold cyan") + Text(_clip(prompt, limit))]
    after = records[records.index(last_prompt) :]
    answer = ""
    for record in after:
        if isinstance(record, AssistantEntry) and not record.is_virtual:
            text = "".join(str(b.get("text", "")) for b in record.message.content if b.get("type") == "text")
            answer = text or answer
    lines.append(Text("last answer: ", style="bold yellow") + Text(_clip(answer, limit) or "(none)"))
    for call in _interrupted_calls(after):
        lines.append(Text("interrupted: ", style="bold red") + Text(call))
    markers = (INTERRUPT_MARKER, INTERRUPT_MARKER_TOOLS)
    if any(isinstance(r, UserEntry) and any(m in str(r.message.content) for m in markers) for r in after):
        lines.append(Text("the last turn was interrupted", style="red"))
    return lines
