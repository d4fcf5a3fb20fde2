"""The provider interface: one abstract `stream(request)` and declared capabilities (R0.2).

The pipeline never depends on a provider's private behaviour except through `Capabilities`. Every
provider that speaks the Messages API turns its error answers into typed errors with `http_error`,
so the engine decides by type and never matches error text.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from foldline.errors import (
    BadOutputError,
    ModelHTTPError,
    OutputRoomError,
    OverloadedError,
    PromptTooLongAPIError,
)
from foldline.providers.servers import bad_output, context_refusal, error_object, window_refused
from foldline.stream import StreamEvent

__all__ = [
    "CAPABILITIES_HEADER",
    "Capabilities",
    "Provider",
    "TokenCounter",
    "advertised_capabilities",
    "count_tokens",
    "http_error",
    "too_long_before_sending",
]

# The API's own wording; the numbers are what recovery needs.
_PROMPT_TOO_LONG = re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum")
_OUTPUT_ROOM = re.compile(r"input length and `max_tokens` exceed context limit: (\d+) \+ (\d+) > (\d+)")


def http_error(
    model: str,
    status: int,
    body: object,
    message: str,
    *,
    error_type: str = "",
    retry_after: float | None = None,
    in_stream: bool = False,
) -> ModelHTTPError:
    """The typed error for a Messages API error answer (status, body, the API's message text).

    The API's own wording first, then the third-party servers' (`providers.servers`: llama.cpp,
    vLLM, SGLang), so a window overflow from any of them is recovered from the same way.
    """
    error_type = error_type or str(error_object(body).get("type") or "")
    fields: dict[str, Any] = {"error_type": error_type, "retry_after": retry_after, "in_stream": in_stream}
    if room := _OUTPUT_ROOM.search(message):
        output = OutputRoomError(model, status, body, message, **fields)
        output.prompt_tokens, output.max_tokens, output.limit = (int(n) for n in room.groups())
        return output
    if status == 413 or "prompt is too long" in message:
        too_long = PromptTooLongAPIError(model, status, body, message, **fields)
        if numbers := _PROMPT_TOO_LONG.search(message):
            too_long.prompt_tokens, too_long.limit = int(numbers[1]), int(numbers[2])
        return too_long
    if (refusal := context_refusal(message, body)) is not None:
        if refusal.prompt_fits:
            assert refusal.output_tokens is not None
            output = OutputRoomError(model, status, body, message, **fields)
            output.prompt_tokens, output.max_tokens = refusal.prompt_tokens, refusal.output_tokens
            output.limit = refusal.limit
            return output
        too_long = PromptTooLongAPIError(model, status, body, message, **fields)
        too_long.prompt_tokens, too_long.limit = refusal.prompt_tokens, refusal.limit
        return too_long
    if window_refused(body, error_type):
        return PromptTooLongAPIError(model, status, body, message, **fields)
    if status in (503, 529) or error_type in ("overloaded_error", "unavailable_error"):
        return OverloadedError(model, status, body, message, **fields)
    if bad_output(message):
        return BadOutputError(model, status, body, message, **fields)
    return ModelHTTPError(model, status, body, message, **fields)


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a provider supports, declared rather than guessed."""

    name: str
    supports_cache_edits: bool = False
    """Accepts `cache_reference` on tool_results and `cache_edits` blocks (R3.2.3)."""
    supports_thinking: bool = True
    cache_edits_beta: str | None = None
    """The beta header that turns cache_edits on, where the provider needs one."""


CAPABILITIES_HEADER = "foldline-capabilities"
"""The response header where a server lists, comma-separated, the betas beyond the public API it
takes (`foldline serve`: its cache_edits beta). Every answer carries it, errors and 404s included,
so a client learns it from any request (`foldline chat` asks `GET /v1/models/{id}` at start)."""


def advertised_capabilities(header: str | None, name: str = "foldline-serve") -> Capabilities | None:
    """The capabilities a `CAPABILITIES_HEADER` value declares; None when the header is absent (a
    server that advertises nothing: the public API's defaults apply)."""
    if header is None:
        return None
    betas = [b.strip() for b in header.split(",") if b.strip()]
    cache_edits = next((b for b in betas if b.startswith("cache-edits-")), None)
    return Capabilities(name=name, supports_cache_edits=cache_edits is not None, cache_edits_beta=cache_edits)


class Provider(Protocol):
    """Something that speaks the Messages API."""

    @property
    def capabilities(self) -> Capabilities:
        """What this provider supports."""
        ...

    def stream(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> AsyncIterator[StreamEvent]:
        """Send one request body and yield its stream events.

        Makes exactly one HTTP attempt (retries belong to the engine's single retry layer) and
        raises `ModelHTTPError` / `ModelConnectionError` for failures.
        """
        ...


@runtime_checkable
class TokenCounter(Protocol):
    """A provider that can count a request's input tokens without running it (`count_tokens`)."""

    async def count_tokens(self, body: dict[str, Any], *, betas: Sequence[str] = ()) -> int | None:
        """The input tokens `body` would bill (cache_edits deletions excluded), or None when unknown."""
        ...


async def count_tokens(provider: object, body: dict[str, Any], betas: Sequence[str] = ()) -> int | None:
    """`provider`'s exact count of `body`, or None when it cannot count or the count failed.

    A count is an optimisation over the estimate, never a new way for a turn to fail: errors fall
    back to the estimate, except a prompt-too-long answer, whose number is the count itself.
    """
    if not isinstance(provider, TokenCounter):
        return None
    try:
        return await provider.count_tokens(body, betas=betas)
    except PromptTooLongAPIError as e:
        return e.prompt_tokens
    except ModelHTTPError:
        return None


def too_long_before_sending(model: str, tokens: int, limit: int) -> PromptTooLongAPIError:
    """The error for a request refused locally because it is over `limit` (never sent).

    Worded as the API words a prompt-too-long answer, so recovery treats both the same way.
    """
    message = f"prompt is too long: {tokens} tokens > {limit} maximum (counted before sending)"
    error = PromptTooLongAPIError(model, 400, None, message, error_type="invalid_request_error")
    error.prompt_tokens, error.limit = tokens, limit
    return error
