"""The provider interface: one abstract `stream(request)` and declared capabilities (R0.2).

The pipeline never depends on a provider's private behaviour except through `Capabilities`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from foldline.stream import StreamEvent

__all__ = ["Capabilities", "Provider"]


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What a provider supports, declared rather than guessed."""

    name: str
    supports_cache_edits: bool = False
    """Accepts `cache_reference` on tool_results and `cache_edits` blocks (R3.2.3)."""
    supports_thinking: bool = True
    cache_edits_beta: str | None = None
    """The beta header that turns cache_edits on, where the provider needs one."""


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
