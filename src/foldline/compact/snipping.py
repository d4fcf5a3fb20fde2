"""Snip in the compaction round (design.md §3.1): carry out the model's Snip calls, and tell it when it may.

The `Snip` tool only validates short ids; this stage turns each successful call into a
`snip_boundary` (R3.1.2) the first round after its result is recorded, with a receipt naming the
messages and tokens it removed (R3.0.1). The tokens are subtracted before Microcompact and the later
levels check their thresholds (R3.0.2): the next request's usage has not yet seen the removal.

The nudge: with Snip on and the context past `Config.snip_nudge_share` of the effective window,
the model is reminded (`prompts.snip_nudge`) that it can snip by the `[id:...]` tags; it is reminded
again after a snip or a compaction, or, when `Config.snip_renudge_turns` is set, once that many
prompts went by without one.

Ids are resolved in one place, `resolve_snip`, for both the Snip tool's answer and the boundary:
unknown ids (or ids already snipped) are named, never silently dropped, and a message that holds one
side of a tool call is removed together with the other side, so the model never sees a call whose
result is gone (which the request path would answer "[Tool call interrupted…]", inviting a re-run).

Invariants:
- A call is carried out once: its boundary records its `tool_use_id`, so a resumed session (or a
  crash between the result and the next round) neither loses nor repeats a snip.
- Failed, refused and interrupted calls (error results) snip nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from foldline._types import Block
from foldline.compact.ctx_agent import is_typed_prompt
from foldline.compact.pipeline import CompactionContext, Receipt, StageResult
from foldline.compact.prompts import snip_nudge
from foldline.compact.snip import short_id
from foldline.projection import project_view, rebuild_state
from foldline.timeline import (
    ENTRY_TYPES,
    AnyRecord,
    AssistantEntry,
    AttachmentEntry,
    CompactBoundary,
    Entry,
    SnipBoundary,
    UserEntry,
    api_filter,
    new_uuid,
    now_iso,
)
from foldline.tokens import estimate_entry, padded

__all__ = ["NUDGE_ATTACHMENT", "SnipResolution", "SnipStage", "pending_snip_calls", "resolve_snip"]

NUDGE_ATTACHMENT = "snip_nudge"
"""The `attachment_type` of the reminder that Snip may be used."""


def _blocks(entry: Entry) -> Sequence[Block]:
    if isinstance(entry, UserEntry | AssistantEntry) and isinstance(entry.message.content, list):
        return entry.message.content
    return ()


@dataclass(frozen=True)
class SnipResolution:
    """What a Snip call's short ids come to on the current records."""

    removed: tuple[str, ...]
    """Uuids to remove, in order: those the ids named, then their tool-pair partners."""
    named: tuple[str, ...]
    """The short ids that named an entry still in the conversation."""
    unknown: tuple[str, ...]
    """The short ids that named nothing there (mistyped, or already snipped)."""
    partners: int
    """How many of `removed` were added to keep a tool call and its result together."""


def _tool_ids(entry: Entry, kind: str, key: str) -> set[str]:
    return {str(b.get(key)) for b in _blocks(entry) if b.get("type") == kind}


def _pair_closure(entries: Iterable[Entry], chosen: set[str]) -> list[str]:
    """Uuids of entries outside `chosen` that hold the other side of a tool pair with one inside it,
    repeated until nothing changes (a reply's calls and every message answering them go together)."""
    entries = list(entries)
    removed, added = set(chosen), []
    changed = True
    while changed:
        changed = False
        calls = set().union(*(_tool_ids(e, "tool_use", "id") for e in entries if e.uuid in removed))
        answered = set().union(
            *(_tool_ids(e, "tool_result", "tool_use_id") for e in entries if e.uuid in removed)
        )
        for entry in entries:
            if entry.uuid in removed:
                continue
            if (
                _tool_ids(entry, "tool_result", "tool_use_id") & calls
                or _tool_ids(entry, "tool_use", "id") & answered
            ):
                removed.add(entry.uuid)
                added.append(entry.uuid)
                changed = True
    return added


def resolve_snip(records: Sequence[AnyRecord], ids: Sequence[str]) -> SnipResolution:
    """The entries `ids` remove from `records` now, and the ids that name nothing there."""
    state = rebuild_state(records)
    visible = api_filter(project_view(records, state))
    by_short = {short_id(r.uuid): r.uuid for r in records if isinstance(r, ENTRY_TYPES)}
    named = [i for i in dict.fromkeys(ids) if i in by_short and by_short[i] not in state.removed]
    unknown = tuple(i for i in dict.fromkeys(ids) if i not in named)
    chosen = tuple(dict.fromkeys(by_short[i] for i in named))
    partners = _pair_closure(visible, set(chosen))
    return SnipResolution((*chosen, *partners), tuple(named), unknown, len(partners))


def pending_snip_calls(records: Sequence[AnyRecord]) -> list[tuple[str, list[str]]]:
    """(tool_use id, short ids) of every successful Snip call that no boundary has carried out yet."""
    asked: dict[str, list[str]] = {}
    done: list[str] = []
    applied = {r.tool_use_id for r in records if isinstance(r, SnipBoundary) and r.tool_use_id}
    for record in records:
        if not isinstance(record, AssistantEntry | UserEntry) or record.is_virtual:
            continue
        for block in _blocks(record):
            if block.get("type") == "tool_use" and block.get("name") == "Snip":
                ids = block.get("input", {}).get("ids")
                asked[str(block.get("id"))] = [str(i) for i in ids] if isinstance(ids, list) else []
            elif block.get("type") == "tool_result" and not block.get("is_error"):
                done.append(str(block.get("tool_use_id")))
    return [(i, asked[i]) for i in done if i in asked and i not in applied]


def _nudged_recently(records: Sequence[AnyRecord], turns: int | None) -> bool:
    """A nudge stands until a snip or a compaction, or until `turns` prompts went by without a snip.

    A nudge the model could not act on (nothing bulky was old enough yet, or Microcompact had just
    cleared it) would otherwise be the last one for the whole epoch.
    """
    prompts = 0
    for record in reversed(records):
        if isinstance(record, AttachmentEntry) and record.attachment_type == NUDGE_ATTACHMENT:
            return turns is None or prompts < turns
        if isinstance(record, SnipBoundary | CompactBoundary):
            return False
        if isinstance(record, UserEntry) and is_typed_prompt(record):
            prompts += 1
    return False


@dataclass
class SnipStage:
    """Level 1: the model's Snip calls become boundaries with receipts; the nudge when the context fills."""

    name: str = "snip"

    async def run(self, ctx: CompactionContext) -> StageResult:
        """Carry out pending Snip calls, then nudge if the context is past the configured share."""
        records: list[AnyRecord] = []
        receipts: list[Receipt] = []
        freed = 0
        calls = pending_snip_calls(ctx.records)
        if calls:
            visible = {e.uuid: e for e in api_filter(project_view(ctx.records))}
            for tool_use_id, ids in calls:
                # Each call sees the boundaries of the calls before it in this round.
                resolution = resolve_snip([*ctx.records, *records], ids)
                new = resolution.removed
                if not new:
                    continue  # every id unknown or already gone: the tool's answer said so
                tokens = padded(sum(estimate_entry(visible[u]) for u in new if u in visible))
                freed += tokens
                records.append(
                    SnipBoundary(
                        uuid=new_uuid(), timestamp=now_iso(), removed_uuids=new, tool_use_id=tool_use_id
                    )
                )
                count = f"{len(new)} message{'s' if len(new) != 1 else ''}"
                paired = f" ({resolution.partners} to keep tool pairs whole)" if resolution.partners else ""
                unknown = f"; unknown ids: {', '.join(resolution.unknown)}" if resolution.unknown else ""
                receipts.append(
                    Receipt(
                        self.name,
                        f"snipped {count}{paired}, {tokens:,} tokens{unknown}",
                        tokens,
                        {
                            "messages": len(new),
                            "tokens": tokens,
                            "tool_use_id": tool_use_id,
                            "partners": resolution.partners,
                            "unknown": list(resolution.unknown),
                        },
                    )
                )
        nudge = self._nudge(ctx, [*ctx.records, *records], ctx.tokens - freed)
        if nudge is not None:
            records.append(nudge)
        return StageResult(tuple(records), freed, receipts=tuple(receipts))

    def _nudge(
        self, ctx: CompactionContext, records: Sequence[AnyRecord], tokens: int
    ) -> AttachmentEntry | None:
        config = ctx.config
        window = config.effective_window
        if not config.snip_enabled or window <= 0 or tokens < window * config.snip_nudge_share:
            return None
        if _nudged_recently(records, config.snip_renudge_turns):
            return None
        last = next((r for r in reversed(records) if isinstance(r, ENTRY_TYPES)), None)
        return AttachmentEntry(
            uuid=new_uuid(),
            parent_uuid=last.uuid if last else None,
            timestamp=now_iso(),
            session_id=last.session_id if last else "",
            attachment_type=NUDGE_ATTACHMENT,
            content=snip_nudge(min(100, round(100 * tokens / window))),
        )

    async def on_prompt_too_long(self, ctx: CompactionContext, gap_tokens: int | None) -> StageResult:
        """Snip is the model's decision (R3.1.5): it frees nothing on its own."""
        return StageResult()
