"""`normalize_messages_for_api`: behaviour beyond the 400s (tests/api/test_normalize_steps.py)."""

from __future__ import annotations

import copy

import msgspec
import pytest
from tests.api.strategies import image_block, pdf_block
from tests.api.test_normalize_steps import body, reply, result, text, thinking, tool_use, user
from tests.conftest import claude_code_files, requires_claude_code_data

from foldline.api.normalize import (
    INTERRUPTED_RESULT_TEXT,
    IncrementalNormalizer,
    MediaLimits,
    media_types_to_strip,
    normalize_messages_for_api,
)
from foldline.api.validate import find_errors
from foldline.errors import UserError
from foldline.projection import project_view
from foldline.sessions import load_session
from foldline.timeline import (
    ApiErrorInfo,
    AssistantEntry,
    AssistantMessage,
    Entry,
    ProgressEntry,
    UserEntry,
)


def _api_error(message: str) -> AssistantEntry:
    return AssistantEntry(
        uuid="e0000000-0000-4000-8000-000000000000",
        timestamp="2026-01-01T00:00:00.000Z",
        message=AssistantMessage(id="err", content=[text("API Error")]),
        is_api_error_message=True,
        api_error=ApiErrorInfo(status=400, message=message),
    )


@pytest.mark.parametrize(
    ("error", "kinds"),
    [
        ("image exceeds 5 MB maximum: 6500712 bytes > 5242880 bytes", {"image"}),
        ("At least one of the image dimensions exceed max allowed size: 8000 pixels", {"image"}),
        ("Could not process image", {"image"}),
        ("A maximum of 100 PDF pages may be provided.", {"document"}),
        ("The PDF specified was not valid.", {"document"}),
        ("too many images and documents: 120 + 0 > 100", {"image", "document"}),
        ("Too much media: 0 document pages + 103 images > 100", {"image", "document"}),
        ("Request exceeds the maximum allowed number of bytes.", {"image", "document"}),
        (
            '413 {"error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}',
            {"image", "document"},
        ),
        ("prompt is too long: 204452 tokens > 200000 maximum", set()),
        ("Overloaded", set()),
    ],
)
def test_media_error_texts_map_to_block_types(error: str, kinds: set[str]) -> None:
    assert media_types_to_strip(error) == kinds


def test_inputs_are_never_mutated_and_thinking_passes_through_as_is() -> None:
    thought = thinking("sig-keep")
    use = {**tool_use("t1"), "caller": {"type": "direct"}, "cache_control": {"type": "ephemeral"}}
    entries: list[Entry] = [
        user([text("go"), {**text("x"), "cache_control": {"type": "ephemeral"}}]),
        reply("m1", text("\n\n"), thought),
        reply("m1", use),
        user([result("t1", [text("a"), text("")], is_error=True)]),
    ]
    before = [msgspec.json.encode(e) for e in entries]
    snapshot = copy.deepcopy(thought)
    out = normalize_messages_for_api(entries, snip_enabled=True)
    assert [msgspec.json.encode(e) for e in entries] == before
    assert out[1]["content"][0] is thought
    assert thought == snapshot
    assert out[1]["content"][1] == tool_use("t1")  # caller and stale cache_control stripped
    assert "cache_control" not in out[0]["content"][1]
    assert out[2]["content"][0]["content"] == [text("a")]
    assert find_errors(body(out)) == []


def test_streaming_tool_execution_results_follow_in_tool_use_order() -> None:
    entries: list[Entry] = [
        user("run both"),
        reply("m1", thinking()),
        reply("m1", tool_use("t1")),
        user([result("t1", "one")]),
        reply("m1", tool_use("t2")),
        user([result("t2", "two")]),
        reply("m2", tool_use("t3"), tool_use("t4")),
        user([result("t4", "four")]),
        user([result("t3", "three")]),
    ]
    out = normalize_messages_for_api(entries)
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant", "user"]
    assert [b["type"] for b in out[1]["content"]] == ["thinking", "tool_use", "tool_use"]
    assert [b["content"] for b in out[2]["content"]] == ["one", "two"]
    assert [b["content"] for b in out[4]["content"]] == ["three", "four"]
    assert find_errors(body(out, thinking_on=True)) == []


def test_missing_results_are_synthesized_as_interrupted() -> None:
    out = normalize_messages_for_api(
        [user("go"), reply("m1", tool_use("t1"), tool_use("t2")), user([result("t2")])]
    )
    assert out[-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": INTERRUPTED_RESULT_TEXT},
        result("t2"),
    ]


def test_s2_never_touches_what_the_user_typed() -> None:
    typed = user([text("see"), image_block(9000, 9000)])
    entries: list[Entry] = [typed, _api_error("At least one of the image dimensions exceed max allowed size")]
    with pytest.raises(UserError, match=typed.uuid):
        normalize_messages_for_api(entries)


def test_s2_walks_back_past_earlier_errors_and_drops_an_emptied_entry() -> None:
    entries: list[Entry] = [
        user("read the spec"),
        user([pdf_block(150)], meta=True),
        _api_error("A maximum of 100 PDF pages may be provided."),
        _api_error("A maximum of 100 PDF pages may be provided."),
        ProgressEntry(uuid="p0000000-0000-4000-8000-000000000000", timestamp="t", text="retrying"),
    ]
    out = normalize_messages_for_api(entries)
    assert out == [{"role": "user", "content": [text("read the spec")]}]


def test_s7_checks_type_count_and_many_image_dimensions() -> None:
    mislabeled = image_block()
    mislabeled["source"] = {**mislabeled["source"], "media_type": "image/jpeg"}
    with pytest.raises(UserError, match="declared image/jpeg but its bytes are image/png"):
        normalize_messages_for_api([user([text("a"), mislabeled])])
    many = [image_block(3000, 10) for _ in range(21)]
    with pytest.raises(UserError, match="over the 2000 px limit"):
        normalize_messages_for_api([user([text("a"), *many])])
    normalize_messages_for_api([user([text("a"), *many[:20]])])  # 20 images may still be 3000 px
    with pytest.raises(UserError, match="3 images \\+ 0 document pages > 2"):
        normalize_messages_for_api(
            [user([text("a"), *[image_block()] * 3])], media=MediaLimits(max_media_items=2)
        )


def test_non_block_items_in_a_tool_result_are_dropped_like_top_level_ones() -> None:
    # a decodable but malformed transcript line: it crashed with AttributeError before
    entries: list[Entry] = [
        user("go"),
        reply("m1", tool_use("toolu_1")),
        user([result("toolu_1", ["plain string", 3, text("kept")]), "stray", text("next")]),  # type: ignore[list-item]
    ]
    out = normalize_messages_for_api(entries)
    assert out[-1]["content"] == [result("toolu_1", [text("kept")]), text("next")]
    assert find_errors(body(out)) == []


def test_s7_paths_index_the_messages_as_sent() -> None:
    broken = image_block()
    broken["source"] = {**broken["source"], "data": "AAAA"}
    entries: list[Entry] = [
        user("go"),
        reply("m1", text("a")),
        user([result("toolu_orphan")]),  # dropped by S6.h: the two replies become one message
        reply("m2", text("b")),
        user([broken, text("look")]),
    ]
    assert _s7_paths(entries) == ["messages.2.content.0", "messages.2.content.0"]
    starts_with_a_reply: list[Entry] = [reply("m1", text("hello")), user([text("look"), broken])]
    # sent as [leading user turn, reply, user]: the image is in the third message
    assert _s7_paths(starts_with_a_reply) == ["messages.2.content.1", "messages.2.content.1"]


def _s7_paths(entries: list[Entry]) -> list[str]:
    """The message path S7 names, from the pure and then the incremental normalizer."""
    paths = []
    for normalize in (normalize_messages_for_api, IncrementalNormalizer().messages):
        with pytest.raises(UserError, match="not a recognisable") as raised:
            normalize(entries)
        paths.append(str(raised.value).split(" ")[0])
    return paths


def test_prefill_is_dropped_unless_asked_and_then_trimmed() -> None:
    entries: list[Entry] = [user("start"), reply("m1", thinking(), text("Sure:  \n"))]
    assert normalize_messages_for_api(entries)[-1]["role"] == "user"
    kept = normalize_messages_for_api(entries, allow_prefill=True)
    assert kept[-1]["content"] == [thinking(), text("Sure:")]
    no_thinking = normalize_messages_for_api(entries, allow_prefill=True, thinking_enabled=False)
    assert no_thinking[-1]["content"] == [text("Sure:")]
    assert find_errors({**body(no_thinking), "thinking": {"type": "disabled"}}) == []


def test_an_empty_view_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="nothing to send"):
        normalize_messages_for_api([ProgressEntry(uuid="p1", timestamp="t", text="x")])


def test_a_history_starting_with_a_reply_gets_a_leading_user_turn() -> None:
    out = normalize_messages_for_api([reply("m1", text("hello")), user("hi")])
    assert out[0]["role"] == "user"
    assert find_errors(body(out)) == []


@requires_claude_code_data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
def test_real_transcripts_normalize_to_valid_messages(path: object) -> None:
    loaded = load_session(str(path))
    entries = project_view(loaded.records)
    out = normalize_messages_for_api(entries, snip_enabled=True)
    assert [e.message for e in find_errors(body(out))] == []
    typed = [
        b["text"]
        for e in entries
        if isinstance(e, UserEntry) and not e.is_meta and not e.is_sidechain and not e.is_virtual
        for b in ([text(e.message.content)] if isinstance(e.message.content, str) else e.message.content)
        if b.get("type") == "text" and b["text"].strip()
    ]
    sent = "".join(b.get("text", "") for m in out for b in m["content"])
    assert all(t in sent for t in typed)


def test_a_reply_without_thinking_joined_to_one_with_it_leads_with_the_thinking() -> None:
    """Dropping an orphan tool_result between two replies joins them at the very end; with no Snip
    tags to keep that user message alive, the joined reply must still lead with its thinking (A20)."""
    from foldline.api.params import build_request
    from foldline.api.validate import find_errors
    from foldline.config import Config
    from foldline.providers.base import Capabilities
    from foldline.timeline import AssistantEntry, AssistantMessage, UserEntry, UserMessage

    stamp = "2026-01-01T00:00:01.000Z"

    def uid(n: int) -> str:
        return f"00000000-0000-4000-8000-{n:012d}"

    def reply(n: int, *blocks: dict[str, str]) -> AssistantEntry:
        message = AssistantMessage(id=f"m{n}", model="", content=list(blocks))
        return AssistantEntry(uuid=uid(n), timestamp=stamp, session_id="", message=message)

    def user(n: int, content: object) -> UserEntry:
        return UserEntry(uuid=uid(n), timestamp=stamp, session_id="", message=UserMessage(content=content))

    orphan = [{"type": "tool_result", "tool_use_id": "toolu_orphan", "content": "late"}]
    thinking = {"type": "thinking", "thinking": "", "signature": "sig-1"}
    entries = [
        user(1, "typed X"),
        reply(2, {"type": "text", "text": "says X"}),
        user(3, orphan),
        reply(4, thinking, {"type": "text", "text": "more X"}),
        user(5, "next"),
    ]
    read_only = [{"name": "Read", "description": "r", "input_schema": {"type": "object"}}]
    plan = build_request(
        entries, Config(thinking_budget_tokens=2048), ["s"], read_only, Capabilities(name="local")
    )
    assert [e.message for e in find_errors(plan.body)] == []
    [reply] = [m for m in plan.body["messages"] if m["role"] == "assistant"]
    assert reply["content"][0]["type"] == "thinking"
    assert "says X" in str(reply["content"])  # both replies are there, joined
