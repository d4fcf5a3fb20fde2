"""Rule A41, request bytes: a body over the limit gets HTTP 413, answered before any parsing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foldline._json import JSONEncodeError, dumps
from foldline.api.validate._limits import ValidationLimits
from foldline.errors import RequestValidationError, UserError


def _check_request_bytes(
    body: Mapping[str, Any], limits: ValidationLimits, body_bytes: int | None
) -> list[RequestValidationError]:
    if body_bytes is None:
        try:
            body_bytes = len(dumps(body))
        except JSONEncodeError as exc:
            raise UserError(f"request body is not JSON-encodable: {exc}") from exc
    if body_bytes <= limits.max_request_bytes:
        return []
    return [request_too_large(limits.max_request_bytes)]


def request_too_large(max_request_bytes: int) -> RequestValidationError:
    """The API's 413 `request_too_large` error for a body over `max_request_bytes`.

    Public because the server answers it before parsing the body, where `find_errors` cannot run.
    """
    megabytes = max_request_bytes // (1024 * 1024)
    return RequestValidationError(
        "Request exceeds the maximum allowed number of bytes. "
        f"The maximum request size is {megabytes} MB for standard API endpoints.",
        status=413,
        error_type="request_too_large",
    )
