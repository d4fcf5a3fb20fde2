"""The validator's entry points: `find_errors()` and `validate_request()`, and the order of the checks.

Order is the order the API reports in: request bytes (413, answered before any parsing), then the
schema ("shape"), then the semantic rules. Within the semantic rules the order is
`_SEMANTIC_CHECKS` (parameters, cache_control, list structure, text, tool pairing, thinking, media,
context window): the API's own order between families is not public, except that cache_control
errors are seen before the empty-text error a bad breakpoint also causes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foldline.api.validate._bytes import _check_request_bytes
from foldline.api.validate._cache_control import _check_cache_control
from foldline.api.validate._context import _check_context
from foldline.api.validate._errors import _ROOT, _error
from foldline.api.validate._limits import ValidationLimits
from foldline.api.validate._media import _check_media
from foldline.api.validate._pairing import _check_tool_pairing
from foldline.api.validate._semantic import (
    _Check,
    _check_parameters,
    _check_structure,
    _check_text,
    _Request,
)
from foldline.api.validate._shape import _check_shape
from foldline.api.validate._thinking import _check_thinking
from foldline.errors import RequestValidationError

_DEFAULT_LIMITS = ValidationLimits()


_SEMANTIC_CHECKS: tuple[_Check, ...] = (
    _check_parameters,
    _check_cache_control,
    _check_structure,
    _check_text,
    _check_tool_pairing,
    _check_thinking,
    _check_media,
    _check_context,
)


def find_errors(
    body: Mapping[str, Any],
    limits: ValidationLimits = _DEFAULT_LIMITS,
    *,
    body_bytes: int | None = None,
) -> list[RequestValidationError]:
    """Every rule the request body breaks, in the order the API would report them.

    Args:
        body: The decoded JSON request body of `POST /v1/messages`.
        limits: Model- and provider-dependent limits (output maximum, context window, ...).
        body_bytes: The encoded body's size; computed by re-encoding `body` when omitted.

    Returns:
        The errors, first-reported first; empty when the API would accept the body.

    Raises:
        UserError: `body` cannot be encoded as JSON (so its size cannot be known).
    """
    if not isinstance(body, Mapping):
        return [_error(_ROOT, "Input should be a valid dictionary")]
    too_large = _check_request_bytes(body, limits, body_bytes)
    if too_large:
        return too_large
    shape = _check_shape(body)
    if shape:
        return shape
    request = _Request.of(body, limits)
    return [error for check in _SEMANTIC_CHECKS for error in check(request)]


def validate_request(
    body: Mapping[str, Any],
    limits: ValidationLimits = _DEFAULT_LIMITS,
    *,
    body_bytes: int | None = None,
) -> None:
    """Raise the first error the API would report for `body`; return quietly if it would accept it.

    Args:
        body: The decoded JSON request body of `POST /v1/messages`.
        limits: Model- and provider-dependent limits.
        body_bytes: The encoded body's size; computed when omitted.

    Raises:
        RequestValidationError: The first broken rule, with the API's status, type and message.
        UserError: `body` cannot be encoded as JSON.
    """
    errors = find_errors(body, limits, body_bytes=body_bytes)
    if errors:
        raise errors[0]


def validate_window(body: Mapping[str, Any], limits: ValidationLimits) -> None:
    """Raise the context-window error (rules A38, A39) for `body`, if any.

    For a caller that has already run `validate_request` on `body` without `limits.input_tokens`
    and then counted the prompt: no other rule reads `input_tokens`, so this is what
    `validate_request` with the count would raise, without walking the body again.
    """
    for error in _check_context(_Request.of(body, limits)):
        raise error
