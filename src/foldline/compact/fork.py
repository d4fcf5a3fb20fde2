"""Forked requests: ask the model about the conversation without adding to it (R3.3.1, R3.4.3).

A fork is the main conversation's next request with an instruction as the last user message: the same
system prompt, tools, model, betas and pinned `cache_edits`, so its prefix is byte-identical to what
the main loop last sent and the server reads it from cache instead of writing a new one. Nothing of
the fork enters the timeline; the caller decides what to record from the answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foldline._types import Block
from foldline.api.params import build_request
from foldline.config import Config
from foldline.providers.base import Provider
from foldline.retry import AttemptBudget, retrying
from foldline.stream import MessageAccumulator
from foldline.timeline import AnyRecord, Usage, UserEntry, UserMessage, new_uuid, now_iso

__all__ = ["ForkedReply", "ask_forked", "fork_body"]


@dataclass(frozen=True)
class ForkedReply:
    """What a forked request answered."""

    text: str
    """The reply's text blocks, joined (tool calls, which a fork never runs, are ignored)."""
    usage: Usage
    stop_reason: str | None


def _instruction_entry(records: Sequence[AnyRecord], instruction: str) -> UserEntry:
    last = next((r for r in reversed(records) if hasattr(r, "parent_uuid")), None)
    return UserEntry(
        uuid=new_uuid(),
        parent_uuid=getattr(last, "uuid", None),
        timestamp=now_iso(),
        session_id=getattr(last, "session_id", ""),
        message=UserMessage(content=instruction),
    )


def fork_body(
    provider: Provider,
    records: Sequence[AnyRecord],
    instruction: str,
    *,
    config: Config,
    system: str | Sequence[str | Block],
    tools: Sequence[Mapping[str, Any]],
    max_tokens: int,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The forked request's body and betas: `records` plus `instruction` as the last user message."""
    plan = build_request(
        [*records, _instruction_entry(records, instruction)],
        config,
        system,
        tools,
        provider.capabilities,
        max_tokens=max_tokens,
    )
    return dict(plan.body), plan.betas


async def ask_forked(
    provider: Provider,
    records: Sequence[AnyRecord],
    instruction: str,
    *,
    config: Config,
    system: str | Sequence[str | Block],
    tools: Sequence[Mapping[str, Any]],
    max_tokens: int,
) -> ForkedReply:
    """Send the fork (transient failures retried as the main loop retries them) and return its text.

    Raises whatever the provider raises once retries are spent (`ModelAPIError` and subclasses); a
    prompt-too-long answer surfaces as `PromptTooLongAPIError` so the caller can drop history and retry.
    """
    body, betas = fork_body(
        provider, records, instruction, config=config, system=system, tools=tools, max_tokens=max_tokens
    )

    async def attempt() -> MessageAccumulator:
        accumulator = MessageAccumulator()
        async for event in provider.stream(body, betas=betas):
            accumulator.feed(event)
        return accumulator

    done = await retrying(
        attempt, policy=config.retry, budget=AttemptBudget(config.retry.max_retries_per_turn)
    )
    message = done.message()
    text = "".join(str(b.get("text", "")) for b in message.content if b.get("type") == "text")
    return ForkedReply(text=text, usage=message.usage or Usage(), stop_reason=message.stop_reason)
