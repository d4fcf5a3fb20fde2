"""The API's error envelope, shared by the app and the request guard that runs in front of it.

Every error the server sends is `{"type": "error", "error": {"type": ..., "message": ...},
"request_id": ...}` with a matching `request-id` header; the type defaults to the API's type for
the status (https://docs.anthropic.com/en/api/errors).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

from foldline._json import dumps

__all__ = ["error_body", "error_response", "request_id"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def request_id() -> str:
    """A fresh `req_...` id for one response."""
    return "req_" + uuid.uuid4().hex[:24]


def error_body(status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
    """The API's error envelope for `status` (the type defaults to the API's type for that status)."""
    kind = error_type or _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id()}


def error_response(
    status: int, message: str, error_type: str | None = None, headers: Mapping[str, str] | None = None
) -> Response:
    """`error_body` as a JSON response with its `request-id` header (and any extra headers)."""
    body = error_body(status, message, error_type)
    return Response(
        dumps(body),
        status_code=status,
        media_type="application/json",
        headers={"request-id": body["request_id"], **(headers or {})},
    )
