"""Fault specs parse as documented, and each fault reaches the SDK as the real API's would."""

from __future__ import annotations

import time
from collections.abc import Callable

import anthropic
import httpx2
import pytest
from tests.server.conftest import MODEL, Served

from foldline.errors import UserError
from foldline.server.faults import Fault, FaultPlan, FaultRule, parse_faults

REQUEST = {"model": MODEL, "max_tokens": 200, "messages": [{"role": "user", "content": "tell me a story"}]}


def test_parse_every_kind() -> None:
    plan = parse_faults("1:529, 2-3:429/0.5, 4:cut/5, 5:error/3, 6:stall/2, 7:stall/1.5/4, 8:500, seed=9")
    assert plan.seed == 9
    assert [plan.for_request(n) for n in range(1, 10)] == [
        Fault(kind="529"),
        Fault(kind="429", retry_after=0.5),
        Fault(kind="429", retry_after=0.5),
        Fault(kind="cut", after_events=5),
        Fault(kind="error", after_events=3),
        Fault(kind="stall", seconds=2.0),
        Fault(kind="stall", seconds=1.5, after_events=4),
        Fault(kind="500"),
        None,
    ]


def test_rates_are_seeded_and_order_independent() -> None:
    plan = parse_faults("30%:529,seed=4")
    hits = [n for n in range(1, 1001) if plan.for_request(n)]
    assert 200 < len(hits) < 400
    assert (
        hits == [n for n in reversed(range(1, 1001)) if parse_faults("30%:529,seed=4").for_request(n)][::-1]
    )
    other = [n for n in range(1, 1001) if parse_faults("30%:529,seed=5").for_request(n)]
    assert other != hits


@pytest.mark.parametrize(
    "spec",
    ["529", "x:529", "1:418", "1:cut", "0:529", "3-2:529", "1:429/-1", "150%:500", "1:stall/a", "seed=x"],
)
def test_bad_specs_are_clear_errors(spec: str) -> None:
    with pytest.raises(UserError, match="--faults"):
        parse_faults(spec)


def _plan(number: int, fault: Fault) -> FaultPlan:
    return FaultPlan(rules=(FaultRule(fault=fault, requests=frozenset({number})),))


def test_529_is_retried_by_the_sdk_and_counted_at_the_server(serve: Callable[..., Served]) -> None:
    served = serve(faults=parse_faults("1-2:529"), max_retries=2)
    message = served.client.messages.create(**REQUEST)
    assert message.content[0].type == "text"
    assert [(r.number, r.status) for r in served.state.records] == [(1, 529), (2, 529), (3, 200)]


def test_529_past_the_retry_budget_is_an_overloaded_error(serve: Callable[..., Served]) -> None:
    served = serve(faults=parse_faults("1-5:529"), max_retries=1)
    with pytest.raises(anthropic.InternalServerError) as caught:
        served.client.messages.create(**REQUEST)
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    assert len(served.state.records) == 2


def test_429_carries_retry_after_and_the_sdk_honours_it(serve: Callable[..., Served]) -> None:
    served = serve(faults=parse_faults("1:429/0.6,3:429/0.6"), max_retries=1)
    started = time.monotonic()
    served.client.messages.create(**REQUEST)
    assert time.monotonic() - started >= 0.6
    no_retry = served.client.with_options(max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as caught:
        no_retry.messages.create(**REQUEST)
    assert caught.value.response.headers["retry-after"] == "0.6"
    assert caught.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]


def test_500_is_an_api_error(serve: Callable[..., Served]) -> None:
    served = serve(faults=parse_faults("1:500"))
    with pytest.raises(anthropic.InternalServerError) as caught:
        served.client.messages.create(**REQUEST)
    assert caught.value.status_code == 500
    assert caught.value.body["error"]["type"] == "api_error"  # type: ignore[index]


def test_stream_cut_raises_in_the_sdk(serve: Callable[..., Served]) -> None:
    served = serve(faults=parse_faults("1:cut/4"))
    seen: list[str] = []
    # A real cut looks the same. SDKs before 2.17 raised the transport's error while iterating a
    # stream; 2.17 wraps it in `APIConnectionError` like any other failed read: either is the cut.
    cut = (httpx2.RemoteProtocolError, anthropic.APIConnectionError)
    with pytest.raises(cut, match="incomplete chunked read"):  # noqa: PT012
        with served.client.messages.stream(**REQUEST) as stream:
            for event in stream:
                seen.append(event.type)
    assert seen[0] == "message_start"
    assert "message_stop" not in seen


def test_non_streaming_cut_raises_too(serve: Callable[..., Served]) -> None:
    served = serve(faults=parse_faults("1:cut/0"))
    with pytest.raises(anthropic.APIConnectionError):
        served.client.messages.create(**REQUEST)
    assert [r.fault for r in served.state.records] == ["cut"]


def test_error_event_inside_a_200_stream(serve: Callable[..., Served]) -> None:
    served = serve(faults=parse_faults("1:error/3"))
    with pytest.raises(anthropic.APIStatusError) as caught:
        with served.client.messages.stream(**REQUEST) as stream:
            stream.get_final_message()
    assert caught.value.response.status_code == 200
    assert caught.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


def test_error_fault_on_a_plain_request_is_a_529(serve: Callable[..., Served]) -> None:
    served = serve(faults=_plan(1, Fault(kind="error", after_events=2)))
    with pytest.raises(anthropic.InternalServerError) as caught:
        served.client.messages.create(**REQUEST)
    assert caught.value.status_code == 529
    assert [(r.status, r.fault, r.stream) for r in served.state.records] == [(529, "error", False)]
    assert [(r.status, r.fault, r.stream) for r in served.state.records] == [(529, "error", False)]


def test_stall_before_first_byte_trips_the_client_timeout(serve: Callable[..., Served]) -> None:
    served = serve(faults=parse_faults("1:stall/1.5,2:stall/0.4"))
    with pytest.raises(anthropic.APITimeoutError):
        served.client.with_options(timeout=0.3).messages.create(**REQUEST)
    started = time.monotonic()
    served.client.messages.create(**REQUEST)
    assert time.monotonic() - started >= 0.4


def test_stall_mid_stream_delivers_the_head_first(serve: Callable[..., Served]) -> None:
    served = serve(faults=parse_faults("1:stall/0.5/2"))
    arrivals: list[tuple[str, float]] = []
    started = time.monotonic()
    with served.client.messages.stream(**REQUEST) as stream:
        for event in stream:
            arrivals.append((event.type, time.monotonic() - started))
    assert arrivals[0][0] == "message_start"
    assert arrivals[0][1] < 0.4
    assert arrivals[-1] == ("message_stop", pytest.approx(arrivals[-1][1]))
    assert arrivals[-1][1] >= 0.5
    assert [(r.status, r.fault, r.stream) for r in served.state.records] == [(200, "stall", True)]
