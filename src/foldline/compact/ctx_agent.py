"""The ctx-agent of Context Collapse: which finished spans to fold, and the text of each fold: a record
of its turns by default, or the model's summary (R3.3.1; docs/design.md, "Record folds").

A *task span* is a run of whole user turns, each from the typed prompt (with the attachments sent
just before it) through the last entry before the next prompt. Whole turns never split a
`tool_use` from its `tool_result`, and every span is checked for that anyway. The newest
`keep_recent_turns` turns, counting the one in progress, are never in a span (so the current task
never is, and after a turn's final reply, when none is in progress, that turn may be), nor are
entries already folded or already staged. Spans are found oldest first: a fold changes the request
bytes from its first message on, so folding the oldest spans first keeps the cache rewrite of later
folds inside what the first one already rewrites.

A span's record (`CollapseConfig.folds = "record"`, the default) is built from its entries with no
request (`compact.mechanical.record_fold`). A span's summary (`folds = "summary"`) comes from a
forked request (`compact.fork`): the main conversation's request with `span_prompt` as the last user
message, so it reads the main prefix from the cache. A reply
that `read_summary` rejects is a failure, reported and never staged (R3.4.9's rule, applied here).
A summary cut at the output limit is no summary either (it silently loses what came past the cut);
a span of several turns is then summarized again as two halves, each half of the turns to tell. A
single turn whose summary does not fit is a failure that asking again cannot mend (`FoldFailure.
cut`): the collapse store leaves that turn out of later runs rather than pay for the same cut
summary after every turn.

This module decides and asks; it never writes the timeline. The collapse store (`compact.collapse`)
stages what it returns and commits it from the compaction round.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foldline._types import Block
from foldline.api.params import carries_snip_tags
from foldline.compact.fork import ForkedReply, ask_forked
from foldline.compact.mechanical import record_fold
from foldline.compact.prompts import SPAN_SECTIONS, read_summary, span_prompt, span_prompt_by_words
from foldline.compact.snip import short_id
from foldline.config import Config
from foldline.errors import ModelAPIError, PromptTooLongAPIError
from foldline.projection import collapse_summary_text, project_view, rebuild_state
from foldline.providers.base import Provider
from foldline.timeline import (
    ENTRY_TYPES,
    AnyRecord,
    AssistantEntry,
    AttachmentEntry,
    CollapseCommit,
    Entry,
    Usage,
    UserEntry,
    api_filter,
    is_api_visible,
    new_uuid,
)
from foldline.tokens import estimate_entry, estimate_text, padded

__all__ = [
    "CtxAgent",
    "FoldFailure",
    "StagedFold",
    "TaskSpan",
    "cached_rewrite_tokens",
    "find_spans",
    "fold_savings",
    "is_typed_prompt",
    "opens_turn",
    "split_span",
    "summary_of",
    "summary_tokens",
]


@dataclass(frozen=True)
class TaskSpan:
    """Whole finished user turns `first_turn..last_turn` (UI numbering), entries `first_uuid..last_uuid`."""

    first_uuid: str
    last_uuid: str
    uuids: frozenset[str]
    """Every API-visible entry in the span."""
    tokens: int
    """Padded estimate of what the span sends today."""
    first_turn: int
    last_turn: int
    last_tagged_uuid: str = ""
    """The span's last user-side entry: requests tag only user messages (R3.1.1), so the summary
    instruction names the span by this entry's tag rather than by the final reply's, which has none."""

    def turns(self) -> str:
        """`turn 4` or `turns 4–9`, as receipts say it."""
        if self.first_turn == self.last_turn:
            return f"turn {self.first_turn}"
        return f"turns {self.first_turn}–{self.last_turn}"


@dataclass(frozen=True)
class StagedFold:
    """A finished analysis: the span and the summary that will stand in for it once committed."""

    span: TaskSpan
    summary: str
    usage: Usage
    """The forked request's usage as the server reported it (its cache read shows the prefix reuse)."""


@dataclass(frozen=True)
class FoldFailure:
    """A span the ctx-agent could not summarize, and why (recorded, never fatal)."""

    span: TaskSpan
    reason: str
    cut: bool = False
    """The summary was cut at the output limit: asking the same again would be cut again (a span
    of several turns is asked about as two halves instead; a failed request may pass next time)."""
    unusable: bool = False
    """The model answered with no usable summary (empty or malformed): an emergency fold commits a
    mechanical fold for the span instead (design.md R3.4.11)."""


def is_typed_prompt(entry: Entry) -> bool:
    """A user turn's start: user-typed content, not tool results, not injected, not a summary."""
    if not isinstance(entry, UserEntry) or entry.is_meta or entry.is_compact_summary:
        return False
    content = entry.message.content
    if isinstance(content, str):
        return True
    return not any(b.get("type") == "tool_result" for b in content)


def opens_turn(records: Sequence[AnyRecord]) -> bool:
    """Whether the next request is a user turn's first: a typed prompt came after the last reply.

    That request's cached prefix ends where the turn before it did, so a change made now rewrites
    only what follows the change up to the new prompt; made later in the turn, it would also rewrite
    every round of the turn so far (design.md R3.3.7).
    """
    for record in reversed(records):
        if isinstance(record, AssistantEntry) and not record.is_api_error_message:
            return False
        if isinstance(record, UserEntry) and is_typed_prompt(record):
            return True
    return False


@dataclass(frozen=True)
class _Turn:
    entries: tuple[Entry, ...]
    start: int
    end: int
    """View indices: entries are view[start:end]."""
    number: int
    tokens: int


def _pairs_whole(entries: Sequence[Entry]) -> bool:
    """Every tool_use in `entries` has its result in them, and every result its call."""
    calls: set[str] = set()
    results: set[str] = set()
    for entry in entries:
        if isinstance(entry, AssistantEntry):
            calls.update(str(b.get("id")) for b in entry.message.content if b.get("type") == "tool_use")
        elif isinstance(entry, UserEntry) and not isinstance(entry.message.content, str):
            results.update(
                str(b.get("tool_use_id")) for b in entry.message.content if b.get("type") == "tool_result"
            )
    return calls == results


def _finished(turn: _Turn) -> bool:
    """Whether `turn` ended: its last entry is a final reply (no tool call waits on a result)."""
    last = turn.entries[-1] if turn.entries else None
    return (
        isinstance(last, AssistantEntry)
        and not last.is_api_error_message
        and not any(b.get("type") == "tool_use" for b in last.message.content)
    )


def _turn_numbers(records: Sequence[AnyRecord]) -> dict[str, int]:
    """Each typed prompt's 1-based number over the whole session, as the UI counts turns."""
    numbers: dict[str, int] = {}
    for record in records:
        if isinstance(record, ENTRY_TYPES) and is_api_visible(record) and is_typed_prompt(record):
            numbers[record.uuid] = len(numbers) + 1
    return numbers


def _turns(records: Sequence[AnyRecord]) -> list[_Turn]:
    """The user turns of the API view, in order; folded summaries and leading context are in none."""
    state = rebuild_state(records)
    view = api_filter(project_view(records, state))
    folded = {c.uuid for c in state.collapses}
    numbers = _turn_numbers(records)
    prompts = [i for i, e in enumerate(view) if is_typed_prompt(e)]
    starts: list[int] = []
    previous = -1
    for p in prompts:
        s = p
        while s - 1 > previous and isinstance(view[s - 1], AttachmentEntry):
            s -= 1  # the attachments sent with a prompt belong to its turn
        starts.append(s)
        previous = p
    turns: list[_Turn] = []
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(view)
        cut = next((i for i in range(start + 1, end) if view[i].uuid in folded), end)
        entries = tuple(view[start:cut])
        number = numbers.get(view[prompts[k]].uuid, 0)
        turns.append(_Turn(entries, start, cut, number, sum(estimate_entry(e) for e in entries)))
    return turns


def find_spans(
    records: Sequence[AnyRecord],
    config: Config,
    *,
    exclude: frozenset[str] = frozenset(),
    min_tokens: int | None = None,
) -> list[TaskSpan]:
    """Foldable spans of `records`, oldest first (see the module docstring for what may be folded).

    Args:
        exclude: uuids already staged; a turn holding any of them is skipped.
        min_tokens: a run of turns smaller than this is left for later, when it may have grown
            (default `collapse.span_target_tokens`; an emergency fold passes 0).
    """
    cfg = config.collapse
    floor = config.scaled(cfg.span_target_tokens) if min_tokens is None else min_tokens
    turns = _turns(records)
    keep = max(cfg.keep_recent_turns, 1)
    if turns and _finished(turns[-1]):
        keep -= 1  # no turn is in progress: the newest finished one is the first a new prompt follows
    candidates = turns[: max(len(turns) - keep, 0)]
    spans: list[TaskSpan] = []
    run: list[_Turn] = []

    def close(force: bool) -> None:
        tokens = padded(sum(t.tokens for t in run))
        if run and (force or tokens >= floor) and tokens > 0:
            spans.append(_span_of(run))
        run.clear()

    for turn in candidates:
        usable = (
            bool(turn.entries)
            and _pairs_whole(turn.entries)
            and not any(e.uuid in exclude for e in turn.entries)
        )
        if not usable or (run and run[-1].end != turn.start):
            close(force=False)
        if not usable:
            continue
        run.append(turn)
        if padded(sum(t.tokens for t in run)) >= config.scaled(cfg.span_target_tokens):
            close(force=True)
    close(force=False)
    return spans


def _span_of(turns: Sequence[_Turn]) -> TaskSpan:
    entries = [e for t in turns for e in t.entries]
    return TaskSpan(
        first_uuid=entries[0].uuid,
        last_uuid=entries[-1].uuid,
        uuids=frozenset(e.uuid for e in entries),
        tokens=padded(sum(t.tokens for t in turns)),
        first_turn=turns[0].number,
        last_turn=turns[-1].number,
        last_tagged_uuid=next(
            (e.uuid for e in reversed(entries) if not isinstance(e, AssistantEntry)), entries[0].uuid
        ),
    )


def split_span(records: Sequence[AnyRecord], span: TaskSpan) -> tuple[TaskSpan, TaskSpan] | None:
    """`span`'s turns as two spans of about half its tokens each (None for a single turn)."""
    turns = [t for t in _turns(records) if t.entries and t.entries[0].uuid in span.uuids]
    if len(turns) < 2:
        return None
    half, running, cut = sum(t.tokens for t in turns) / 2, 0, 1
    for i, turn in enumerate(turns[:-1], start=1):
        running += turn.tokens
        cut = i
        if running >= half:
            break
    return _span_of(turns[:cut]), _span_of(turns[cut:])


def cached_rewrite_tokens(records: Sequence[AnyRecord], folds: Sequence[StagedFold]) -> int:
    """Cached tokens committing `folds` (oldest first) makes the next request write again.

    The last reply's usage says how much of its request was cached (read or written). From the first
    fold's first message on, every byte changes: the folded spans are dropped (not written again),
    their summaries are written in their place, and whatever follows them is written again. Estimated
    from that message to the last reply, capped by what was cached.
    """
    if not folds:
        return 0
    view = api_filter(project_view(records))
    first = next((i for i, e in enumerate(view) if e.uuid == folds[0].span.first_uuid), None)
    if first is None:
        return 0
    folded = frozenset(u for fold in folds for u in fold.span.uuids)
    for anchor in range(len(view) - 1, first, -1):
        reply = view[anchor]
        if isinstance(reply, AssistantEntry) and reply.message.usage is not None:
            usage = reply.message.usage
            cached = usage.cache_read_input_tokens + usage.cache_creation_input_tokens
            kept = sum(estimate_entry(e) for e in view[first:anchor] if e.uuid not in folded)
            written = sum(summary_tokens(fold.summary) for fold in folds)
            return min(cached, padded(kept) + written)
    return 0


def summary_of(sections: Mapping[str, str]) -> str:
    """The summary text a fold stores: the sections in their requested order."""
    return "\n\n".join(f"## {title}\n{sections[title]}" for title in SPAN_SECTIONS)


def _opening(records: Sequence[AnyRecord], uuid: str, chars: int) -> str:
    """The first words of entry `uuid`'s text (a prompt, or a tool result's content)."""
    for record in records:
        if getattr(record, "uuid", None) != uuid:
            continue
        content = getattr(getattr(record, "message", None), "content", "")
        parts = [content] if isinstance(content, str) else []
        for block in content if isinstance(content, list) else ():
            inner = block.get("text") if block.get("type") == "text" else block.get("content")
            parts += [inner] if isinstance(inner, str) else [b.get("text", "") for b in inner or ()]
        text = " ".join(" ".join(str(p) for p in parts).split())
        return text[:chars]
    return ""


@dataclass
class CtxAgent:
    """Asks the model, through forked requests, for one summary per span."""

    provider: Provider
    system: str | Sequence[str | Block]
    tools: Sequence[Mapping[str, Any]]
    config: Config

    async def summarize(self, records: Sequence[AnyRecord], span: TaskSpan) -> StagedFold | FoldFailure:
        """One forked request for `span`; a failure is returned, never raised (cancellation is)."""
        if self.config.collapse.folds == "record":
            entries = [r for r in records if isinstance(r, ENTRY_TYPES) and r.uuid in span.uuids]
            return self._checked(span, record_fold(entries, self.config), Usage())
        last = span.last_tagged_uuid or span.last_uuid
        if carries_snip_tags(self.config, self.tools):
            instruction = span_prompt(short_id(span.first_uuid), short_id(last))
        else:  # no tags in the requests to name the span by: its messages' opening words instead
            chars = self.config.collapse.span_opening_chars
            first_words, last_words = (
                _opening(records, span.first_uuid, chars),
                _opening(records, last, chars),
            )
            instruction = span_prompt_by_words(first_words, last_words)
        try:
            try:
                reply = await self._ask(records, instruction)
            except PromptTooLongAPIError:
                # What follows the span is context the summary does not need: without it the fork
                # still reads the cached prefix up to the span and fits under the limit.
                reply = await self._ask(_through(records, span.last_uuid), instruction)
        except ModelAPIError as e:
            return FoldFailure(span, f"request failed: {e}")
        if reply.stop_reason == "max_tokens" and self.config.summary_format != "free":
            # A cut summary can still have every heading, and silently lose the facts past the cut.
            return FoldFailure(span, "the summary was cut at the output limit", cut=True)
        sections = read_summary(reply.text, SPAN_SECTIONS, free=self.config.summary_format == "free")
        if sections is None:
            return FoldFailure(span, "the summary was empty or malformed", unusable=True)
        return self._checked(span, summary_of(sections), reply.usage)

    @staticmethod
    def _checked(span: TaskSpan, summary: str, usage: Usage) -> StagedFold | FoldFailure:
        if summary_tokens(summary) >= span.tokens:  # a fold that grows the context is never committed
            return FoldFailure(
                span,
                f"the summary ({summary_tokens(summary):,} tokens) is not smaller than the turns it would "
                f"replace ({span.tokens:,}); nothing was committed",
                unusable=True,  # as useless as a malformed one: an emergency folds mechanically instead
            )
        return StagedFold(span, summary, usage)

    async def _ask(self, records: Sequence[AnyRecord], instruction: str) -> ForkedReply:
        return await ask_forked(
            self.provider,
            records,
            instruction,
            config=self.config,
            system=self.system,
            tools=self.tools,
            max_tokens=min(
                self.config.limits.max_output, self.config.scaled(self.config.collapse.summary_max_tokens)
            ),
            limit=self.config.blocking_limit,
        )

    async def run(
        self,
        records: Sequence[AnyRecord],
        spans: Sequence[TaskSpan],
        *,
        enough: Callable[[int], bool] = lambda _freed: False,
        on_span: Callable[[int, TaskSpan], None] | None = None,
    ) -> tuple[list[StagedFold], list[FoldFailure]]:
        """Summarize `spans` in order, at most `max_spans_per_run`, until `enough(freed)` says stop.

        `freed` is the estimate of what the folds so far would free; `on_span(i, span)` reports
        progress before each request (R3.3.6).
        """
        staged: list[StagedFold] = []
        failed: list[FoldFailure] = []
        freed = 0
        # (progress number, span); a span whose summary was cut comes back as its two halves
        queue = list(enumerate(spans[: self.config.collapse.max_spans_per_run]))
        while queue and not enough(freed):
            i, span = queue.pop(0)
            if on_span is not None:
                on_span(i, span)
            result = await self.summarize(records, span)
            if isinstance(result, StagedFold):
                staged.append(result)
                freed += fold_savings(result)
            elif not result.cut or (halves := split_span(records, span)) is None:
                failed.append(result)
            else:
                queue[:0] = [(i, halves[0]), (i, halves[1])]
        return staged, failed


def _through(records: Sequence[AnyRecord], last_uuid: str) -> list[AnyRecord]:
    """`records` up to the entry `last_uuid`, with the control records after it kept.

    Later folds, snips and clearings still apply to what comes before the cut, so the prefix the fork
    sends stays the one the main loop sends (and its cache).
    """
    cut = next((i for i, r in enumerate(records) if getattr(r, "uuid", None) == last_uuid), len(records) - 1)
    return [*records[: cut + 1], *(r for r in records[cut + 1 :] if not isinstance(r, ENTRY_TYPES))]


def summary_tokens(summary: str) -> int:
    """Padded estimate of a fold's summary as it is sent, wrapped as `collapse_summary_text` wraps it."""
    probe = CollapseCommit(
        uuid="", timestamp="", collapse_id=short_id(new_uuid()), first_uuid="", last_uuid="", summary=summary
    )
    return padded(estimate_text(collapse_summary_text(probe)))


def fold_savings(fold: StagedFold) -> int:
    """Estimated tokens a committed fold frees: the span's tokens minus its summary's."""
    return max(0, fold.span.tokens - summary_tokens(fold.summary))
