"""The validator's per-request limits: `ValidationLimits`, and the schema's `MIN_THINKING_BUDGET`.

The limits depend on the model, the caller's tokenizer, or the provider; every layer of the
validator reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class ValidationLimits:
    """The per-request limits that depend on the model, the caller's tokenizer, or the provider."""

    max_output_tokens: Mapping[str, int] | None = None
    """Model-name prefix -> largest allowed `max_tokens` (rule A40); the longest matching prefix wins.
    `None` skips the check."""
    context_window: int | None = None
    """The model's context window in tokens; with `input_tokens` it enables rules A38 and A39."""
    input_tokens: int | None = None
    """The prompt's size as counted by the caller's tokenizer."""
    max_request_bytes: int = 32 * 1024 * 1024
    """Rule A41: larger bodies get HTTP 413 `request_too_large`."""
    max_media: int = 100
    """Rule A32: images plus document pages per request (100 on 200K-context models)."""
    prefill_allowed: bool = True
    """`False` enforces rule A9: the request must end with a user message (newer models)."""
    allow_consecutive_roles: bool = False
    """`True` accepts consecutive same-role messages, as today's first-party API does (rule A3)."""
    interleaved_thinking: bool = False
    """`True` when the interleaved-thinking beta is on: `budget_tokens` may then exceed `max_tokens`."""
    max_image_bytes: int = 5 * 1024 * 1024
    """Rule A29, measured on the base64 text (other providers allow less: Bedrock 3.75 MB)."""
    max_image_pixels: int = 8000
    """Rule A30: the longer image side."""
    many_images_pixels: int = 2000
    """Rule A31: the longer image side once a request holds more than `many_images_threshold` images."""
    many_images_threshold: int = 20
    max_pdf_pages: int = 100
    """Rule A33."""
    max_cache_breakpoints: int = 4
    """Rule A42: blocks with `cache_control` across tools, system and messages."""


# A schema fact, not a limit: the API's pydantic model declares `ge=1024`.
MIN_THINKING_BUDGET = 1024
