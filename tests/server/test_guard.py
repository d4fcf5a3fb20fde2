"""The request guard over real HTTP: Host (DNS rebinding), Origin, Content-Type, and the body cap."""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from tests.server.conftest import MODEL, Served

from foldline.server.config import ServerConfig

BODY = {"model": MODEL, "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}
JSON = {"content-type": "application/json"}
MiB = 1024 * 1024


def _post(served: Served, headers: dict[str, str], **kwargs: Any) -> httpx2.Response:
    with httpx2.Client() as http:
        return http.post(served.url + "/v1/messages", headers=headers, **kwargs)


def _cors_headers(response: httpx2.Response) -> list[str]:
    return [h for h in response.headers if h.lower().startswith("access-control-")]


def _error(response: httpx2.Response) -> dict[str, str]:
    body = response.json()
    assert body["type"] == "error"
    assert body["request_id"] == response.headers["request-id"]
    error: dict[str, str] = body["error"]
    return error


@pytest.mark.parametrize(
    "host",
    [
        "evil.example:8765",
        "evil.example",
        "192.168.1.5:8765",
        "127.0.0.1.evil.example",
        "localhost.evil.example",
    ],
)
def test_a_host_that_is_not_loopback_is_refused(serve: Callable[..., Served], host: str) -> None:
    served = serve()
    response = _post(served, {**JSON, "host": host}, json=BODY)
    assert response.status_code == 403
    error = _error(response)
    assert error["type"] == "permission_error"
    assert f"--allow-host {host.split(':')[0]}" in error["message"]
    assert served.state.records == []  # refused before the app counted it


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.0.0.1:8765", "127.9.9.9:80", "localhost", "LocalHost:8765", "[::1]", "[::1]:8765"],
)
def test_loopback_hosts_are_served(serve: Callable[..., Served], host: str) -> None:
    response = _post(serve(), {**JSON, "host": host}, json=BODY)
    assert response.status_code == 200, response.text


def test_configured_hosts_are_served(serve: Callable[..., Served]) -> None:
    served = serve(config=ServerConfig(allowed_hosts=("box.lan:8765",)))
    assert _post(served, {**JSON, "host": "BOX.lan:9000"}, json=BODY).status_code == 200
    assert _post(served, {**JSON, "host": "evil.example"}, json=BODY).status_code == 403
    anything = serve(config=ServerConfig(allowed_hosts=("*",)))
    assert _post(anything, {**JSON, "host": "evil.example"}, json=BODY).status_code == 200


def test_a_browser_origin_is_refused_without_cors_headers(serve: Callable[..., Served]) -> None:
    served = serve()
    origin = {"origin": "https://evil.example", "access-control-request-method": "POST"}
    with httpx2.Client() as http:
        preflight = http.options(served.url + "/v1/messages", headers=origin)
    post = _post(served, {**JSON, **origin}, json=BODY)
    for response in (preflight, post):
        assert response.status_code == 403
        error = _error(response)
        assert error["type"] == "permission_error"
        assert "--allow-origin https://evil.example" in error["message"]
        assert _cors_headers(response) == []
    assert served.state.records == []


def test_a_configured_origin_is_served_with_cors(serve: Callable[..., Served]) -> None:
    page = "http://localhost:3000"
    served = serve(config=ServerConfig(allowed_origins=(page + "/",)))
    ask = {
        "origin": page,
        "access-control-request-method": "POST",
        "access-control-request-headers": "x-api-key",
    }
    with httpx2.Client() as http:
        preflight = http.options(served.url + "/v1/messages", headers=ask)
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == page
    assert preflight.headers["access-control-allow-methods"] == "POST"
    assert preflight.headers["access-control-allow-headers"] == "x-api-key"
    post = _post(served, {**JSON, "origin": page}, json=BODY)
    assert post.status_code == 200
    assert post.headers["access-control-allow-origin"] == page
    other = _post(served, {**JSON, "origin": "http://localhost:3001"}, json=BODY)
    assert other.status_code == 403


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
    ],
    ids=["text", "text-charset", "form", "multipart", "missing"],
)
@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_a_body_that_is_not_json_is_a_415(
    serve: Callable[..., Served], content_type: str | None, path: str
) -> None:
    served = serve()
    headers = {"content-type": content_type} if content_type else {}
    with httpx2.Client() as http:
        response = http.post(served.url + path, headers=headers, content=json.dumps(BODY).encode())
    assert response.status_code == 415
    error = _error(response)
    assert error["type"] == "invalid_request_error"
    assert "content-type: application/json" in error["message"]
    assert served.state.records == []


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"]
)
def test_json_with_parameters_is_served(serve: Callable[..., Served], content_type: str) -> None:
    response = _post(serve(), {"content-type": content_type}, json=BODY)
    assert response.status_code == 200, response.text


def test_a_declared_length_over_the_cap_is_refused_before_the_body(serve: Callable[..., Served]) -> None:
    served = serve()
    host, port = served.url.removeprefix("http://").split(":")
    head = (
        f"POST /v1/messages HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n"
        f"content-length: {10**12}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode())  # no body follows: an answer proves the guard did not wait for one
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        assert answer.status == 413
        assert json.loads(answer.read())["error"]["type"] == "request_too_large"


def _chunks(total: int, size: int = MiB) -> Iterator[bytes]:
    chunk = b" " * size
    for _ in range(total // size):
        yield chunk


def test_a_chunked_body_over_the_cap_is_a_413(serve: Callable[..., Served]) -> None:
    served = serve(config=ServerConfig(max_request_bytes=MiB))
    response = _post(served, JSON, content=_chunks(8 * MiB, 64 * 1024))
    assert response.status_code == 413
    error = _error(response)
    assert error["type"] == "request_too_large"
    # refused while the body streams in, before any route (the concurrency limit reads it whole)
    assert [r.status for r in served.state.access] == [413]
    # The SDK streams nothing, but a body under the cap still goes through the capped receive.
    assert served.client.messages.create(**BODY).role == "assistant"


def _peak_rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    assert found, "no VmHWM in /proc: the memory test needs Linux"
    return int(found.group(1)) * 1024


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads peak RSS from /proc")
def test_a_200_mb_chunked_upload_keeps_the_server_small() -> None:
    command = [sys.executable, "-c", "from foldline.cli import main; main()", "serve", "--port", "0"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        url = next(
            (m.group(1) for line in process.stderr if (m := re.search(r" on (http://\S+) ", line))), ""
        )
        assert url, f"foldline serve did not start (exit code {process.poll()})"
        with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client:
            client.messages.create(**BODY)  # warm: everything a request touches is loaded
        before = _peak_rss(process.pid)
        with httpx2.Client(timeout=60) as http:  # the generator keeps the client small too
            response = http.post(url + "/v1/messages", headers=JSON, content=_chunks(200 * MiB))
        growth = _peak_rss(process.pid) - before
        assert response.status_code == 413
        # The cap is 32 MiB: the app holds at most that, the guard one chunk more (399 MiB before).
        assert growth < 50 * MiB, f"peak RSS grew {growth / MiB:.1f} MiB"
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stderr is not None:
            process.stderr.close()
