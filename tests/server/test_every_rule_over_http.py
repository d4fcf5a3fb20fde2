"""Every validator rule a request body can break, sent over real HTTP: the API's status, type and text.

The cases are the validator's own table (tests/api/test_validate.py); each breaking body is posted
to the running server as raw JSON, and the error envelope must carry exactly what the validator
reports for that body under the server's limits. Cases whose rule needs limits other than the
server's defaults (a different model maximum, say) are checked under those limits in the
validator's tests and skipped here by construction, not by a skip marker.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from tests.api.test_validate import CASES, Case

from foldline._json import dumps
from foldline.api.validate import ValidationLimits, find_errors
from foldline.server.app import create_app
from foldline.server.caching import flatten, total_tokens
from foldline.server.config import ServerConfig
from foldline.server.testing import run_server

SERVER = ServerConfig()
# Consecutive same-role messages are combined by the server, as by the first-party API (rule A3).
HTTP_CASES = [
    case for case in CASES if case.limits == ValidationLimits() and not case.id.startswith("rule03-")
]


def _server_limits(body: object) -> ValidationLimits:
    blocks = flatten(body) if isinstance(body, dict) else []
    return ValidationLimits(
        max_output_tokens={"": SERVER.max_output_tokens, **SERVER.max_output_by_model},
        context_window=SERVER.context_window,
        input_tokens=total_tokens(blocks),
        max_request_bytes=SERVER.max_request_bytes,
        max_media=SERVER.max_media,
        prefill_allowed=SERVER.prefill_allowed,
        allow_consecutive_roles=SERVER.allow_consecutive_roles,
    )


@pytest.fixture(scope="module")
def client() -> Iterator[httpx2.Client]:
    with run_server(create_app(SERVER)) as url, httpx2.Client(base_url=url, timeout=30) as http:
        yield http


def test_most_rules_are_reachable_over_http() -> None:
    assert len(HTTP_CASES) >= len(CASES) * 3 // 4


@pytest.mark.parametrize("case", HTTP_CASES, ids=[case.id for case in HTTP_CASES])
def test_rule_over_http(client: httpx2.Client, case: Case) -> None:
    raw = dumps(case.bad)
    expected = find_errors(case.bad, _server_limits(case.bad), body_bytes=len(raw))
    assert expected[0].message == case.message  # the case's own rule is the one reported
    response = client.post("/v1/messages", content=raw, headers={"content-type": "application/json"})
    body = response.json()
    assert (response.status_code, body["error"]["type"], body["error"]["message"]) == (
        expected[0].status,
        expected[0].error_type,
        expected[0].message,
    )
    assert body["type"] == "error"
    assert body["request_id"] == response.headers["request-id"]
    assert "Traceback" not in response.text
