"""Prompt caching over HTTP: prefix reads, tail writes, invalidation order, TTLs, billing, lookback."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from tests.server.conftest import MODEL, FakeClock, Served, words

from foldline.server.caching import NoveltyCount, PromptCache, flatten
from foldline.server.config import ServerConfig
from foldline.server.tokenizer import count_text, count_tool

EPHEMERAL = {"type": "ephemeral"}
ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}
TOOLS = [
    {"name": "Read", "description": "Read a file." + words(600, "r"), "input_schema": {"type": "object"}},
    {"name": "Bash", "description": "Run a command." + words(600, "b"), "input_schema": {"type": "object"}},
]
SYSTEM = "You are a careful coding agent." + words(1100, "s")


def _usage(served: Served, **request: Any) -> dict[str, Any]:
    message = served.client.messages.create(model=MODEL, max_tokens=50, **request)
    return message.usage.model_dump(exclude_none=True)


def _marked(text: str, control: dict[str, str] | None = EPHEMERAL) -> list[dict[str, Any]]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if control:
        block["cache_control"] = control
    return [block]


def _total(request: dict[str, Any]) -> int:
    return flatten({"model": MODEL, **request})[-1].end


def test_growing_conversation_reads_the_prefix_and_writes_the_tail(serve: Callable[..., Served]) -> None:
    served = serve()
    messages: list[dict[str, Any]] = []
    previous_total = 0
    for turn in range(4):
        user = f"turn {turn}:" + words(500, "u")
        plain = [
            {**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
            for m in messages
        ]
        messages = [*plain, {"role": "user", "content": _marked(user)}]
        request = {"system": SYSTEM, "messages": messages}
        usage = _usage(served, **request)
        total = _total(request)
        assert usage["cache_read_input_tokens"] == previous_total
        assert usage["cache_creation_input_tokens"] == total - previous_total
        assert usage["cache_creation"]["ephemeral_5m_input_tokens"] == total - previous_total
        assert usage["input_tokens"] == 0
        reply = served.client.messages.create(model=MODEL, max_tokens=50, **request).content[0]
        messages.append({"role": "assistant", "content": [{"type": "text", "text": reply.text}]})  # type: ignore[union-attr]
        previous_total = total


def _three_level(tools: list[dict[str, Any]], system: str, user: str, **extra: Any) -> dict[str, Any]:
    return {
        "tools": [*tools[:-1], {**tools[-1], "cache_control": EPHEMERAL}],
        "system": _marked(system),
        "messages": [{"role": "user", "content": _marked(user)}],
        **extra,
    }


def _tools_end() -> int:
    return sum(count_tool(t) for t in TOOLS)


def _system_end() -> int:
    return _tools_end() + count_text(SYSTEM)


CHANGES: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[], int]]] = {
    "message byte": (lambda: _three_level(TOOLS, SYSTEM, "hello" + words(400, "u") + "!"), _system_end),
    "tool_choice": (
        lambda: _three_level(TOOLS, SYSTEM, "hello" + words(400, "u"), tool_choice={"type": "any"}),
        _system_end,
    ),
    "system byte": (lambda: _three_level(TOOLS, SYSTEM + ".", "hello" + words(400, "u")), _tools_end),
    "tool byte": (
        lambda: _three_level(
            [{**TOOLS[0], "description": "read a file."}, TOOLS[1]], SYSTEM, "hello" + words(400, "u")
        ),
        lambda: 0,
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_misses_from_its_level_on(serve: Callable[..., Served], change: str) -> None:
    served = serve()
    base = _three_level(TOOLS, SYSTEM, "hello" + words(400, "u"))
    first = _usage(served, **base)
    assert first["cache_creation_input_tokens"] == _total(base)
    assert _usage(served, **base)["cache_read_input_tokens"] == _total(base)
    build, expected_read = CHANGES[change]
    changed = build()
    usage = _usage(served, **changed)
    assert usage["cache_read_input_tokens"] == expected_read()
    assert usage["cache_creation_input_tokens"] == _total(changed) - expected_read()


def test_moving_the_breakpoint_does_not_invalidate(serve: Callable[..., Served]) -> None:
    served = serve()
    text = words(1500, "m")
    _usage(served, messages=[{"role": "user", "content": _marked(text)}])
    again = _usage(
        served,
        messages=[{"role": "user", "content": [{"type": "text", "text": text}, *_marked("and more")]}],
    )
    assert again["cache_read_input_tokens"] == count_text(text)


def test_ttl_expiry_and_refresh_on_read(serve: Callable[..., Served]) -> None:
    clock = FakeClock()
    served = serve(clock=clock)
    request = {"messages": [{"role": "user", "content": _marked(words(1500, "t"))}]}
    total = _total(request)
    assert _usage(served, **request)["cache_creation_input_tokens"] == total
    clock.advance(299)
    assert _usage(served, **request)["cache_read_input_tokens"] == total
    clock.advance(299)  # 598 s after the write, but only 299 s after the refreshing read
    assert _usage(served, **request)["cache_read_input_tokens"] == total
    clock.advance(301)
    expired = _usage(served, **request)
    assert expired["cache_read_input_tokens"] == 0
    assert expired["cache_creation_input_tokens"] == total


def test_one_hour_before_five_minutes_billing(serve: Callable[..., Served]) -> None:
    clock = FakeClock()
    served = serve(clock=clock)
    user = "question" + words(800, "q")

    def request(question: str) -> dict[str, Any]:
        return {
            "system": _marked(SYSTEM, ONE_HOUR),
            "messages": [{"role": "user", "content": _marked(question)}],
        }

    system_end = count_text(SYSTEM)
    first = _usage(served, **request(user))
    total = _total(request(user))
    # A = nothing read, B = the 1h system breakpoint, C = the last (5m) breakpoint.
    assert first["cache_creation"] == {
        "ephemeral_1h_input_tokens": system_end,
        "ephemeral_5m_input_tokens": total - system_end,
    }
    assert first["cache_creation_input_tokens"] == total
    clock.advance(600)  # the 5m entry is gone, the 1h one lives: A = system, B = A, C = last
    second = _usage(served, **request(user))
    assert second["cache_read_input_tokens"] == system_end
    assert second["cache_creation"] == {
        "ephemeral_1h_input_tokens": 0,
        "ephemeral_5m_input_tokens": total - system_end,
    }
    clock.advance(3000)  # 3600 s after the 1h write, but the read 3000 s ago refreshed it
    assert _usage(served, **request(user))["cache_read_input_tokens"] == system_end
    clock.advance(3601)
    assert _usage(served, **request(user))["cache_read_input_tokens"] == 0


def test_usage_parts_add_up_to_the_prompt(serve: Callable[..., Served]) -> None:
    served = serve()
    request = {
        "system": _marked(SYSTEM, ONE_HOUR),
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": words(900, "a"), "cache_control": EPHEMERAL},
                    {"type": "text", "text": "tail after the last breakpoint" + words(50, "z")},
                ],
            }
        ],
    }
    usage = _usage(served, **request)
    assert usage["input_tokens"] == count_text("tail after the last breakpoint" + words(50, "z"))
    parts = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert parts == _total(request)
    assert served.client.messages.count_tokens(model=MODEL, **request).input_tokens == _total(request)


def test_below_minimum_is_processed_without_caching(serve: Callable[..., Served]) -> None:
    served = serve()
    request = {"messages": [{"role": "user", "content": _marked(words(1000, "s"))}]}
    assert _total(request) < 1024
    for _ in range(2):
        usage = _usage(served, **request)
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
        assert usage["input_tokens"] == _total(request)


def test_minimum_is_per_model(serve: Callable[..., Served]) -> None:
    served = serve()
    request = {"messages": [{"role": "user", "content": _marked(words(2000, "s"))}]}
    assert 1024 <= _total(request) < 4096
    haiku = served.client.messages.create(model="claude-haiku-4-5", max_tokens=50, **request)
    assert haiku.usage.cache_creation_input_tokens == 0
    assert _usage(served, **request)["cache_creation_input_tokens"] == _total(request)


def _blocks(n: int, edited: int | None = None, breakpoints: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """`n` text blocks (1-based numbering as in the docs), cache_control on the listed ones."""
    out: list[dict[str, Any]] = []
    for i in range(1, n + 1):
        text = f"block {i}" + words(20, "x") + (" edited" if i == edited else "")
        block: dict[str, Any] = {"type": "text", "text": text}
        if i in breakpoints:
            block["cache_control"] = EPHEMERAL
        out.append(block)
    return out


def _config() -> ServerConfig:
    return ServerConfig(min_cacheable_tokens=10, min_cacheable_by_model={})


def test_docs_lookback_example_editing_block_5_misses(serve: Callable[..., Served]) -> None:
    served = serve(config=_config())
    _usage(served, messages=[{"role": "user", "content": _blocks(30, breakpoints=(30,))}])
    edited = _usage(served, messages=[{"role": "user", "content": _blocks(30, edited=5, breakpoints=(30,))}])
    assert edited["cache_read_input_tokens"] == 0


def test_docs_lookback_example_with_a_breakpoint_near_block_5(serve: Callable[..., Served]) -> None:
    served = serve(config=_config())
    _usage(served, messages=[{"role": "user", "content": _blocks(30, breakpoints=(4, 30))}])
    request = {"messages": [{"role": "user", "content": _blocks(30, edited=5, breakpoints=(4, 30))}]}
    edited = _usage(served, **request)
    assert edited["cache_read_input_tokens"] == flatten({"model": MODEL, **request})[3].end


@pytest.mark.parametrize(("distance", "hit"), [(20, True), (21, False)])
def test_lookback_reaches_exactly_20_blocks_back(
    serve: Callable[..., Served], distance: int, hit: bool
) -> None:
    served = serve(config=_config())
    _usage(served, messages=[{"role": "user", "content": _blocks(5, breakpoints=(5,))}])
    request = {"messages": [{"role": "user", "content": _blocks(5 + distance, breakpoints=(5 + distance,))}]}
    usage = _usage(served, **request)
    assert usage["cache_read_input_tokens"] == (flatten({"model": MODEL, **request})[4].end if hit else 0)


def _png_block() -> dict[str, Any]:
    """A 1x1 PNG header the validator can size."""
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + ihdr + struct.pack(">I", zlib.crc32(ihdr))
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(data).decode()}
    return {"type": "image", "source": source}


def test_an_image_added_later_invalidates_the_messages_but_not_the_system(
    serve: Callable[..., Served],
) -> None:
    served = serve()
    first_turn = [{"role": "user", "content": _marked("look" + words(1200, "l"))}]
    request = {"system": _marked(SYSTEM), "messages": first_turn}
    _usage(served, **request)
    text_turn = [
        *first_turn,
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": _marked("more text")},
    ]
    assert _usage(served, system=_marked(SYSTEM), messages=text_turn)["cache_read_input_tokens"] == _total(
        request
    )
    image_turn = [*text_turn[:2], {"role": "user", "content": [_png_block(), *_marked("and this image")]}]
    usage = _usage(served, system=_marked(SYSTEM), messages=image_turn)
    assert usage["cache_read_input_tokens"] == count_text(SYSTEM)


def test_top_level_cache_control_marks_the_last_block(serve: Callable[..., Served]) -> None:
    served = serve()
    request = {"messages": [{"role": "user", "content": words(1500, "a")}]}
    auto = {**request, "extra_body": {"cache_control": EPHEMERAL}}
    assert _usage(served, **auto)["cache_creation_input_tokens"] == _total(request)
    assert _usage(served, **auto)["cache_read_input_tokens"] == _total(request)


def test_expired_entries_are_purged_when_the_cache_grows() -> None:
    clock = FakeClock()
    cache = PromptCache(clock=clock)
    for i in range(5000):
        cache.apply(flatten({"model": MODEL, "messages": [{"role": "user", "content": _marked(f"n{i}")}]}), 1)
    assert len(cache) == 5000
    clock.advance(301)
    cache.apply(flatten({"model": MODEL, "messages": [{"role": "user", "content": _marked("fresh")}]}), 1)
    assert len(cache) == 1


def _prompt(system: str, texts: list[str], marked: set[int]) -> list[Any]:
    content = [
        {"type": "text", "text": t, **({"cache_control": EPHEMERAL} if i in marked else {})}
        for i, t in enumerate(texts)
    ]
    return flatten({"model": MODEL, "system": system, "messages": [{"role": "user", "content": content}]})


def test_a_miss_says_why_the_cached_prefix_was_not_read() -> None:
    """R7.5.1: the server's own diagnosis of a drop (prompt changed, TTL, lookback); none on growth."""
    now = [0.0]
    cache = PromptCache(clock=lambda: now[0])
    texts = [words(1500, "a"), "b"]
    assert cache.apply(_prompt("sys", texts, {0}), 1024).cache_miss_reason is None  # nothing cached yet
    grown = cache.apply(_prompt("sys", [*texts, "c"], {2}), 1024)
    assert grown.cache_read_input_tokens > 0
    assert grown.cache_miss_reason is None

    changed = cache.apply(_prompt("another system", [*texts, "c"], {2}), 1024)
    assert changed.cache_read_input_tokens == 0
    assert changed.cache_miss_reason is not None
    assert "changed at system.0" in changed.cache_miss_reason

    now[0] += 301
    expired = cache.apply(_prompt("another system", [*texts, "c"], {2}), 1024)
    assert expired.cache_read_input_tokens == 0
    assert "expired" in str(expired.cache_miss_reason)

    far = [*texts, "c", *(f"x{i}" for i in range(25))]
    lookback = cache.apply(_prompt("another system", far, {len(far) - 1}), 1024)
    assert lookback.cache_read_input_tokens == 0
    assert "within 20 blocks" in str(lookback.cache_miss_reason)
    assert "usage" not in str(cache.apply(_prompt("x", ["y"], set()), 1024).as_usage(1))


def test_the_read_ceiling_counts_only_tokens_never_sent_before(serve: Callable[..., Served]) -> None:
    clock = FakeClock()
    novelty = NoveltyCount()
    served = serve(clock=clock, novelty=novelty)
    first = {"system": SYSTEM, "messages": [{"role": "user", "content": _marked("one" + words(800, "a"))}]}
    _usage(served, **first)
    assert novelty.new_tokens == novelty.prompt_tokens == _total(first)  # nothing was sent before
    clock.advance(3600)  # every entry expired: the resend is written again, yet nothing in it is new
    again = _usage(served, **first)
    assert again["cache_read_input_tokens"] == 0
    assert novelty.new_tokens == _total(first)
    assert novelty.prompt_tokens == 2 * _total(first)
    assert novelty.read_ceiling == pytest.approx(0.5)
    # a changed first message makes everything after the system prompt new, the system prompt not
    changed = {"system": SYSTEM, "messages": [{"role": "user", "content": _marked("two" + words(800, "a"))}]}
    _usage(served, **changed)
    assert novelty.new_tokens == 2 * _total(first) - count_text(SYSTEM)
