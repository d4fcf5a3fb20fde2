"""Forked requests: ask the model about the conversation without adding to it (R3.3.1, R3.4.3).

A fork is the main conversation's next request with an instruction as the last user message: the same
system prompt, tools, model, betas and pinned `cache_edits`, so its prefix is byte-identical to what
the main loop last sent and the server reads it from cache instead of writing a new one. Nothing of
the fork enters the timeline; the caller decides what to record from the answer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foldline._types import Block
from foldline.api.params import build_request
from foldline.config import Config
from foldline.projection import context_count_of
from foldline.providers.base import Provider, count_tokens, too_long_before_sending
from foldline.retry import AttemptBudget, idle_watchdog, retrying
from foldline.stream import MessageAccumulator
from foldline.timeline import AnyRecord, Usage, UserEntry, UserMessage, new_uuid, now_iso
from foldline.tokens import estimate_fixed

__all__ = ["ForkedReply", "ask_forked", "check_fits_alone", "fork_body"]


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
    return _fork_body(
        provider, [*records, _instruction_entry(records, instruction)], config, system, tools, max_tokens
    )


def _fork_body(
    provider: Provider,
    records: Sequence[AnyRecord],
    config: Config,
    system: str | Sequence[str | Block],
    tools: Sequence[Mapping[str, Any]],
    max_tokens: int,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    plan = build_request(
        records,
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
    limit: int | None = None,
) -> ForkedReply:
    """Send the fork and return its text: streamed under the idle watchdog (R5.7), transient failures
    retried within the fork's own budget (`RetryConfig.fork_max_attempts`, R5.6).

    `limit` (normally the blocking limit) holds forks to the main loop's rule: nothing is sent over
    it. A fork is the main request plus an instruction, so it is larger than anything the main loop
    sent; over the limit it is refused here, unsent, as the API would refuse it.

    Raises whatever the provider raises once retries are spent (`ModelAPIError` and subclasses); a
    prompt-too-long answer, the API's or the limit's, surfaces as `PromptTooLongAPIError` so the
    caller can drop history and retry.
    """
    forked = [*records, _instruction_entry(records, instruction)]
    body, betas = _fork_body(provider, forked, config, system, tools, max_tokens)
    if limit is not None:
        await _check_fits(provider, forked, body, betas, config, estimate_fixed(system, tools), limit)

    retry = config.retry
    policy = dataclasses.replace(retry, max_attempts=retry.fork_max_attempts)

    async def attempt() -> MessageAccumulator:
        accumulator = MessageAccumulator()
        stream = provider.stream(body, betas=betas)
        async for event in idle_watchdog(stream, retry.fork_stream_idle_timeout_s, config.model):
            accumulator.feed(event)
        return accumulator

    # Its own budget: a fork's retries never spend the user's turn's (R5.6), and are fewer.
    done = await retrying(attempt, policy=policy, budget=AttemptBudget(retry.fork_max_attempts - 1))
    message = done.message()
    text = "".join(str(b.get("text", "")) for b in message.content if b.get("type") == "text")
    return ForkedReply(text=text, usage=message.usage or Usage(), stop_reason=message.stop_reason)


async def check_fits_alone(
    provider: Provider,
    records: Sequence[AnyRecord],
    *,
    config: Config,
    system: str | Sequence[str | Block],
    tools: Sequence[Mapping[str, Any]],
    limit: int,
) -> None:
    """Raise `PromptTooLongAPIError` when `records`, sent with nothing but the system prompt and
    tools, are over `limit`: the fork's own check (`_check_fits`, counted exactly only near it)."""
    body, betas = _fork_body(provider, records, config, system, tools, max_tokens=1)
    await _check_fits(provider, records, body, betas, config, estimate_fixed(system, tools), limit)


async def _check_fits(
    provider: Provider,
    forked: Sequence[AnyRecord],
    body: dict[str, Any],
    betas: Sequence[str],
    config: Config,
    fixed: int,
    limit: int,
) -> None:
    """Raise `PromptTooLongAPIError` when the fork is over `limit`: estimated, else counted exactly."""
    count = context_count_of(forked, unanchored_base=fixed)
    tokens = count.total
    if count.pessimistic(config.autocompact.estimate_error_factor) > limit:
        tokens = await count_tokens(provider, body, betas) or tokens
    if tokens > limit:
        raise too_long_before_sending(config.model, tokens, limit)
