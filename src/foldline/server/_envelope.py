"""The error envelope as a starlette response, shared by the app and the request guard in front of it.

The envelope itself is built by the pure `foldline.server.envelope` (the in-process fakes use it
too); this adds the matching `request-id` header.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import Response

from foldline._json import dumps
from foldline.server.envelope import error_body

__all__ = ["error_response"]


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
