"""The server's bounds over real HTTP: JSON nesting and value count, concurrency, idle connections."""

from __future__ import annotations

import socket
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.server.conftest import MODEL, Served

from foldline._json import dumps
from foldline.server.config import ServerConfig
from foldline.server.faults import parse_faults
from foldline.server.limits import _values_outside_strings

JSON = {"content-type": "application/json"}
ENDPOINTS = ["/v1/messages", "/v1/messages/count_tokens"]
MB = 1_000_000


def _post(served: Served, path: str, content: bytes, **kwargs: Any) -> httpx2.Response:
    with httpx2.Client(timeout=60) as http:
        return http.post(served.url + path, headers=JSON, content=content, **kwargs)


def _nested(depth: int) -> str:
    """A JSON object `depth` levels deep: {"a": {"a": ... 1 ...}}."""
    return '{"a":' * depth + "1" + "}" * depth


def _tool_body(input_json: str) -> bytes:
    """A valid request whose tool_use input is `input_json`: the input sits 5 levels into the body."""
    head = f'{{"model":"{MODEL}","max_tokens":10,"tools":[{{"name":"t","input_schema":{{"type":"object"}}}}],'
    return (
        head + '"messages":[{"role":"user","content":"hi"},'
        '{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"t","input":'
        + input_json
        + '}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}'
    ).encode()


def _error(response: httpx2.Response) -> dict[str, str]:
    body = response.json()
    assert body["type"] == "error"
    error: dict[str, str] = body["error"]
    return error


# --- nesting -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("depth", [250, 400, 1_000])
def test_nesting_the_server_cannot_encode_is_a_clear_400(
    serve: Callable[..., Served], path: str, depth: int
) -> None:
    """Decodable (under orjson's 1,024 levels) but not encodable (254): this was a 500."""
    served = serve()
    response = _post(served, path, _tool_body(_nested(depth)))
    assert response.status_code == 400, response.text
    error = _error(response)
    assert error["type"] == "invalid_request_error"
    assert "nests JSON objects and arrays more deeply than this server can encode" in error["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_nesting_past_the_decoder_is_a_400_too(serve: Callable[..., Served], path: str) -> None:
    response = _post(serve(), path, _tool_body(_nested(5_000)))
    assert response.status_code == 400
    assert "depth limit exceeded" in _error(response)["message"]


@pytest.mark.parametrize("path", ENDPOINTS)
def test_the_deepest_encodable_body_is_answered(serve: Callable[..., Served], path: str) -> None:
    # 5 levels of request around the input's 249: the 254 levels the encoder takes.
    response = _post(serve(), path, _tool_body(_nested(249)))
    assert response.status_code == 200, response.text


def test_a_deep_streaming_request_is_a_400_before_any_event(serve: Callable[..., Served]) -> None:
    body = _tool_body(_nested(300)).replace(b'"max_tokens":10', b'"max_tokens":10,"stream":true')
    response = _post(serve(), "/v1/messages", body)
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"


# --- values per body: memory ----------------------------------------------------------------------


def _empty_objects(size: int, *, as_object: bool) -> bytes:
    """A valid request whose `metadata` is about `size` bytes of empty objects, in a list or an object."""
    if as_object:
        inner = b"{" + b",".join(b'"k%d":{}' % n for n in range(size // 10)) + b"}"
    else:
        inner = b"[" + b",".join([b"{}"] * (size // 3)) + b"]"
    return b'{"model":"%s","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"metadata":%s}' % (
        MODEL.encode(),
        inner,
    )


@pytest.mark.parametrize("as_object", [False, True], ids=["list", "object"])
def test_8_mb_of_empty_objects_is_refused_in_bounded_memory(
    serve: Callable[..., Served], as_object: bool
) -> None:
    """It cost ~180 MB (and many seconds) as decoded objects; refused before decoding it costs copies
    of the body. The bound is generous (8 MB body: the client's copy, the server's chunks and join)."""
    served = serve()
    body = _empty_objects(8 * MB, as_object=as_object)
    tracemalloc.start()
    try:
        response = _post(served, "/v1/messages", body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert response.status_code == 400
    assert "ServerConfig.max_json_values" in _error(response)["message"]
    assert peak < 64 * MB, f"peak {peak / MB:.0f} MB"


def test_commas_and_braces_inside_strings_are_not_values(serve: Callable[..., Served]) -> None:
    """Over the cap by a raw byte count, under it once strings are skipped: answered."""
    served = serve(config=ServerConfig(max_json_values=1_000))
    text = "f(a, b, [c], {d}) " * 2_000  # 8,000 commas, brackets and braces, all inside one string
    escaped = 'say \\"{[,\\" ' * 500  # escaped quotes must not end the string early
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": text}]}
    assert _post(served, "/v1/messages", dumps(body)).status_code == 200
    raw = dumps(body).replace(b"f(a, b", f"{escaped} f(a, b".encode(), 1)
    assert _post(served, "/v1/messages", raw).status_code == 200


def _enum_body(values: int) -> bytes:
    """A valid request whose tool schema lists `values` numbers: `values` + 16 JSON values in all."""
    schema = {"type": "object", "properties": {"x": {"enum": list(range(values))}}}
    tools = [{"name": "t", "input_schema": schema}]
    return dumps(
        {"model": MODEL, "max_tokens": 10, "tools": tools, "messages": [{"role": "user", "content": "hi"}]}
    )


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_body_over_the_value_cap_is_refused(serve: Callable[..., Served], path: str) -> None:
    served = serve(config=ServerConfig(max_json_values=1_000))
    assert _post(served, path, _enum_body(900)).status_code == 200
    response = _post(served, path, _enum_body(1_000))
    assert response.status_code == 400
    assert "more than 1000 JSON values" in _error(response)["message"]


# --- concurrency ---------------------------------------------------------------------------------


def test_past_the_concurrency_limit_the_answer_is_529_overloaded(serve: Callable[..., Served]) -> None:
    served = serve(config=ServerConfig(max_concurrent_requests=2), faults=parse_faults("1-2:stall/5"))
    body = dumps({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    # Two requests that hold their slots for 5 s, sent whole before anything else is: raw sockets, so
    # that no client thread can be late and lose its slot to the third request below.
    stalled = [_connect(served) for _ in range(2)]
    for sock in stalled:
        sock.sendall(_request("/v1/messages", body))
    refused = None
    deadline = time.monotonic() + 4
    while refused is None and time.monotonic() < deadline:
        response = _post(served, "/v1/messages/count_tokens", body)
        if response.status_code == 529:
            refused = response
    assert refused is not None, "no request was refused while two were in flight"
    error = _error(refused)
    assert error["type"] == "overloaded_error"
    assert "max_concurrent_requests" in error["message"]
    for sock in stalled:
        with sock:
            assert _status_line(sock) == b"HTTP/1.1 200 OK"
    # The slots are free again.
    assert _post(served, "/v1/messages", body).status_code == 200


def _request(path: str, body: bytes) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    return head.encode() + b"Content-Length: %d\r\n\r\n" % len(body) + body


def _status_line(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    received = b""
    while b"\r\n" not in received:
        chunk = sock.recv(4096)
        assert chunk, "the server closed the connection without answering"
        received += chunk
    return received.split(b"\r\n", 1)[0]


# --- idle connections ----------------------------------------------------------------------------


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` (reading and dropping whatever it sends)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def _connect(served: Served) -> socket.socket:
    host, port = served.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)))


@pytest.mark.parametrize(
    "sent", [b"", b"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"], ids=["nothing", "half-a-head"]
)
def test_a_connection_without_a_complete_request_head_is_closed(
    serve: Callable[..., Served], sent: bytes
) -> None:
    served = serve(config=ServerConfig(header_timeout=0.5))
    with _connect(served) as sock:
        sock.sendall(sent)
        assert _closed_within(sock, 5.0)


def test_trickled_bodies_hold_no_slot(serve: Callable[..., Served]) -> None:
    """Twice as many connections as there are slots each send a head and trickle their bodies a
    byte at a time: a request takes its slot only once its body is whole, so the next client is
    answered, not told 529; and a trickled body that does end is answered too."""
    served = serve(config=ServerConfig(max_concurrent_requests=2, body_timeout=60.0, header_timeout=60))
    body = dumps({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    request = _request("/v1/messages", body)
    head = len(request) - len(body)
    slow = [_connect(served) for _ in range(4)]
    try:
        for sock in slow:
            sock.sendall(request[: head + 1])  # the head and one byte of the body
        time.sleep(0.3)  # the server has read every head (and would have given out the slots)
        assert _post(served, "/v1/messages", body).status_code == 200
        for sock in slow:
            sock.sendall(request[head + 1 : head + 2])  # ...the bodies keep coming, a byte at a time
        assert _post(served, "/v1/messages/count_tokens", body).status_code == 200
        slow[0].sendall(request[head + 2 :])  # one trickled body ends: it is answered
        assert _status_line(slow[0]) == b"HTTP/1.1 200 OK"
    finally:
        for sock in slow:
            sock.close()


def test_a_trickled_body_is_closed_after_the_body_timeout(serve: Callable[..., Served]) -> None:
    served = serve(config=ServerConfig(body_timeout=1.0, header_timeout=60))
    body = dumps({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    with _connect(served) as sock:
        sock.sendall(_request("/v1/messages", body)[: -len(body) + 1])  # the head and one byte
        assert _closed_within(sock, 5.0)


def test_bodies_in_transit_share_a_byte_budget(serve: Callable[..., Served]) -> None:
    """Bodies are read whole before they take a slot, so together they are bounded
    (`max_pending_body_bytes`): past it a request is a 529, and the budget frees with the body."""
    body = dumps({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    served = serve(config=ServerConfig(max_pending_body_bytes=3 * len(body), header_timeout=60))
    big = dumps({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 400}]})
    request = _request("/v1/messages", big)
    held = _connect(served)
    try:
        held.sendall(request[: len(request) - len(big) + 3 * len(body) - 10])  # most of the budget
        refused = None
        deadline = time.monotonic() + 10
        while refused is None and time.monotonic() < deadline:
            response = _post(served, "/v1/messages/count_tokens", body)
            if response.status_code == 529:
                refused = response
        assert refused is not None, "the budget was never full"
        assert "max_pending_body_bytes" in _error(refused)["message"]
    finally:
        held.close()
    deadline = time.monotonic() + 10
    while _post(served, "/v1/messages/count_tokens", body).status_code != 200:
        assert time.monotonic() < deadline, "the budget did not free when the connection closed"


def test_an_idle_keep_alive_connection_is_closed(serve: Callable[..., Served]) -> None:
    served = serve(config=ServerConfig(keep_alive_timeout=1, header_timeout=60))
    body = dumps({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    with _connect(served) as sock:
        sock.sendall(_request("/v1/messages/count_tokens", body))
        assert _closed_within(sock, 5.0)


def test_a_slow_answer_is_not_cut_by_the_head_timeout(serve: Callable[..., Served]) -> None:
    """The head timer stops once a request's head is in: a 1.5 s stall outlives a 0.5 s head timeout,
    on the first request of a connection and on the next one (kept alive)."""
    served = serve(config=ServerConfig(header_timeout=0.5), faults=parse_faults("1-2:stall/1.5"))
    body = dumps({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    with httpx2.Client(timeout=30) as http:
        for _ in range(2):
            response = http.post(served.url + "/v1/messages", headers=JSON, content=body)
            assert response.status_code == 200


# --- the count itself ------------------------------------------------------------------------------

_text = st.text(alphabet=st.sampled_from('ab,{}[]:"\\ é\n'), max_size=12)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=30,
)


def _blank(value: Any) -> Any:
    """`value` with every string emptied and every key made plain: punctuation only where JSON has it."""
    if isinstance(value, str):
        return ""
    if isinstance(value, list):
        return [_blank(v) for v in value]
    if isinstance(value, dict):
        return {f"k{n}": _blank(v) for n, v in enumerate(value.values())}
    return value


@given(value=_json_values, chunk=st.integers(min_value=1, max_value=9))
def test_values_are_counted_outside_strings_whatever_the_chunks(value: Any, chunk: int) -> None:
    raw = dumps(value)
    plain = dumps(_blank(value))
    expected = 1 + sum(plain.count(c) for c in (b",", b"{", b"["))
    assert _values_outside_strings(raw, cap=10**9, chunk=chunk) == expected
