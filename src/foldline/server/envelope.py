"""The Messages API's error envelope, and the messages the server's injected faults answer with.

Pure (no starlette), so the server and the in-process fakes in `foldline.testing` build the same
error bodies: `{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}`
(https://docs.claude.com/en/api/errors).
"""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["ERROR_TYPES", "FAULT_MESSAGES", "error_body", "request_id"]

ERROR_TYPES: dict[int, str] = {
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
"""The API's `error.type` for each HTTP status."""

FAULT_MESSAGES: dict[int, str] = {
    429: "Number of request tokens has exceeded your rate limit",
    500: "Internal server error",
    529: "Overloaded",
}
"""What an injected 429 / 500 / 529 says."""


def request_id() -> str:
    """A fresh `request-id` in the API's format."""
    return "req_" + uuid.uuid4().hex[:24]


def error_body(status: int, message: str, error_type: str | None = None) -> dict[str, Any]:
    """The API's error envelope for `status` (the type defaults to the API's type for that status)."""
    kind = error_type or ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id()}
