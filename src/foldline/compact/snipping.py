"""Snip in the compaction round (design.md §3.1): carry out the model's Snip calls, and tell it when it may.

The `Snip` tool only validates short ids; this stage turns each successful call into a
`snip_boundary` (R3.1.2) the first round after its result is recorded, with a receipt naming the
messages and tokens it removed (R3.0.1). The tokens are subtracted before Microcompact and the later
levels check their thresholds (R3.0.2): the next request's usage has not yet seen the removal.

The nudge: with Snip on and the context past `Config.snip_nudge_share` of the effective window,
the model is reminded (`prompts.snip_nudge`) that it can snip by the `[id:...]` tags; it is reminded
again after a snip or a compaction, or, when `Config.snip_renudge_turns` is set, once that many
prompts went by without one.

Invariants:
- A call is carried out once: its boundary records its `tool_use_id`, so a resumed session (or a
  crash between the result and the next round) neither loses nor repeats a snip.
- Failed, refused and interrupted calls (error results) snip nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
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

__all__ = ["NUDGE_ATTACHMENT", "SnipStage", "pending_snip_calls"]

NUDGE_ATTACHMENT = "snip_nudge"
"""The `attachment_type` of the reminder that Snip may be used."""


def _blocks(entry: Entry) -> Sequence[Block]:
    if isinstance(entry, UserEntry | AssistantEntry) and isinstance(entry.message.content, list):
        return entry.message.content
    return ()


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
            state = rebuild_state(ctx.records)
            removed = set(state.removed)
            by_short = {short_id(r.uuid): r.uuid for r in ctx.records if isinstance(r, ENTRY_TYPES)}
            visible = {e.uuid: e for e in api_filter(project_view(ctx.records, state))}
            for tool_use_id, ids in calls:
                new = tuple(dict.fromkeys(by_short[i] for i in ids if i in by_short))
                new = tuple(u for u in new if u not in removed)
                if not new:
                    continue  # every id unknown or already gone: nothing to carry out
                removed.update(new)
                tokens = padded(sum(estimate_entry(visible[u]) for u in new if u in visible))
                freed += tokens
                records.append(
                    SnipBoundary(
                        uuid=new_uuid(), timestamp=now_iso(), removed_uuids=new, tool_use_id=tool_use_id
                    )
                )
                count = f"{len(new)} message{'s' if len(new) != 1 else ''}"
                receipts.append(
                    Receipt(
                        self.name,
                        f"snipped {count}, {tokens:,} tokens",
                        tokens,
                        {"messages": len(new), "tokens": tokens, "tool_use_id": tool_use_id},
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
