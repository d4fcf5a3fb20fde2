"""One test per normalization step: the 400 it prevents (design.md §4.1).

Each case runs the pipeline with the step left out and shows the strict validator rejecting the
result with the API's error, then runs the whole pipeline and shows the validator accepting it.
Some steps have a deliberate backup later in the pipeline (S6.e merges again what S4 merged; S6.h
and `final` re-check trailing thinking and adjacency); for those the backup is left out too and
named in the case id, so the test still shows what the step itself guards against.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from tests.api.strategies import image_block

from foldline._types import Block
from foldline.api.normalize import STEPS, NormalizeOptions, run_steps
from foldline.api.validate import ValidationLimits, find_errors
from foldline.compact.snip import short_id
from foldline.errors import UserError
from foldline.timeline import (
    ApiErrorInfo,
    AssistantEntry,
    AssistantMessage,
    AttachmentEntry,
    Entry,
    SystemEntry,
    UserEntry,
    UserMessage,
)

_ids = itertools.count(1)


def _env() -> dict[str, Any]:
    n = next(_ids)
    return {"uuid": f"{n:08x}-1111-4000-8000-{n:012x}", "timestamp": "2026-01-01T00:00:00.000Z"}


def user(content: str | list[Block], *, meta: bool = False) -> UserEntry:
    return UserEntry(**_env(), message=UserMessage(content=content), is_meta=meta)


def reply(msg_id: str, *blocks: Block) -> AssistantEntry:
    return AssistantEntry(**_env(), message=AssistantMessage(id=msg_id, content=list(blocks)))


def text(value: str) -> Block:
    return {"type": "text", "text": value}


def thinking(sig: str = "sig-1") -> Block:
    return {"type": "thinking", "thinking": "hmm", "signature": sig}


def tool_use(tid: str) -> Block:
    return {"type": "tool_use", "id": tid, "name": "Read", "input": {"path": "a"}}


def result(tid: str, content: str | list[Block] = "ok", **extra: Any) -> Block:
    return {"type": "tool_result", "tool_use_id": tid, "content": content, **extra}


def body(messages: list[Any], *, thinking_on: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 4096, "messages": messages}
    if thinking_on:
        out["thinking"] = {"type": "enabled", "budget_tokens": 2048}
    return out


@dataclass(frozen=True)
class Case:
    id: str
    entries: Callable[[], list[Entry]]
    without: frozenset[str]
    error: str
    thinking_on: bool = False
    limits: ValidationLimits = field(default_factory=ValidationLimits)


CASES = [
    Case(
        "S0 system notice",
        lambda: [user("hi"), SystemEntry(**_env(), content="context compacted"), user("more")],
        frozenset({"S0"}),
        'Unexpected role "system"',
    ),
    Case(
        "S3 split reply with a user line between thinking and tool_use",
        lambda: [
            user("fix it"),
            reply("m1", thinking()),
            AttachmentEntry(**_env(), attachment_type="hook_success", content="hook ran"),
            reply("m1", tool_use("t1")),
            user([result("t1")]),
        ],
        frozenset({"S3"}),
        "Expected `thinking` or `redacted_thinking`, but found `tool_use`",
        thinking_on=True,
    ),
    Case(
        "S4 consecutive users (+S6.e, final backups)",
        lambda: [user("hi"), user("<local-command-caveat>c</local-command-caveat>", meta=True)],
        frozenset({"S4", "S6.e", "final"}),
        'multiple "user" roles in a row',
    ),
    Case(
        "S6.a stream cut after thinking (+S6.b, S6.h backups)",
        lambda: [user("a"), reply("mcut", thinking()), user("again"), reply("m2", text("done")), user("ok")],
        frozenset({"S6.a", "S6.b", "S6.h"}),
        "The final block in an assistant message cannot be `thinking`",
    ),
    Case(
        "S6.b trailing thinking (+S6.h backup)",
        lambda: [user("a"), reply("m1", text("so"), thinking()), user("go on")],
        frozenset({"S6.b", "S6.h"}),
        "The final block in an assistant message cannot be `thinking`",
    ),
    Case(
        "S6.c whitespace-only reply",
        lambda: [user("a"), reply("m1", text("\n\n")), user("b")],
        frozenset({"S6.c"}),
        "text content blocks must contain non-whitespace text",
    ),
    Case(
        "S6.c whitespace before thinking",
        lambda: [user("a"), reply("m1", text("\n\n"), thinking(), text("answer")), user("b")],
        frozenset({"S6.c"}),
        "text content blocks must contain non-whitespace text",
    ),
    Case(
        "S6.d empty non-final reply",
        lambda: [user("a"), reply("m1"), user("b")],
        frozenset({"S6.d"}),
        "all messages must have non-empty content",
    ),
    Case(
        "S6.e replies made adjacent by dropping a blank user (+final backup)",
        lambda: [user("a"), reply("m1", text("x")), user("   "), reply("m2", text("y")), user("b")],
        frozenset({"S6.e", "final"}),
        'multiple "assistant" roles in a row',
    ),
    Case(
        "S6.f reminder between parallel results (+S6.h backup)",
        lambda: [
            user("a"),
            reply("m1", tool_use("t1"), tool_use("t2")),
            user([result("t1")]),
            user("<system-reminder>file changed</system-reminder>", meta=True),
            user([result("t2")]),
        ],
        frozenset({"S6.f", "S6.h"}),
        "Did not find 2 `tool_result` block(s) at the beginning",
    ),
    Case(
        "S6.g is_error result with an image",
        lambda: [
            user("a"),
            reply("m1", tool_use("t1")),
            user([result("t1", [text("boom"), image_block()], is_error=True)]),
        ],
        frozenset({"S6.g"}),
        "all content must be type 'text' if 'is_error' is true",
    ),
    Case(
        "S6.g empty is_error result",
        lambda: [user("a"), reply("m1", tool_use("t1")), user([result("t1", "", is_error=True)])],
        frozenset({"S6.g"}),
        "content cannot be empty if `is_error` is true",
    ),
    Case(
        "S6.h tool_use without result",
        lambda: [user("a"), reply("m1", tool_use("t1")), user("never mind")],
        frozenset({"S6.h"}),
        "`tool_use` ids were found without `tool_result` blocks immediately after: t1",
    ),
    Case(
        "S6.h orphan result",
        lambda: [user("a"), reply("m1", text("x")), user([result("t9")])],
        frozenset({"S6.h"}),
        "unexpected `tool_use_id` found in `tool_result` blocks: t9",
    ),
    Case(
        "S6.h duplicate tool_use ids",
        lambda: [
            user("a"),
            reply("m1", tool_use("t1")),
            user([result("t1")]),
            reply("m2", tool_use("t1")),
            user([result("t1")]),
        ],
        frozenset({"S6.h"}),
        "`tool_use` ids must be unique",
    ),
    Case(
        "S6.h malformed tool id",
        lambda: [user("a"), reply("m1", tool_use("call.1")), user([result("call.1")])],
        frozenset({"S6.h"}),
        "String should match pattern",
    ),
    Case(
        "final trailing assistant on a no-prefill model",
        lambda: [user("a"), reply("m1", text("done"))],
        frozenset({"final"}),
        "does not support assistant message prefill",
        limits=ValidationLimits(prefill_allowed=False),
    ),
    Case(
        "final history starting with an assistant",
        lambda: [reply("m1", text("hello")), user("a")],
        frozenset({"final"}),
        'first message must use the "user" role',
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_step_prevents_the_400(case: Case) -> None:
    entries = case.entries()
    assert case.without <= {s.name for s in STEPS}
    reduced = [s for s in STEPS if s.name not in case.without]
    broken = find_errors(body(run_steps(entries, reduced), thinking_on=case.thinking_on), case.limits)
    assert any(case.error in e.message for e in broken), [e.message for e in broken]
    fixed = run_steps(entries, STEPS)
    assert find_errors(body(fixed, thinking_on=case.thinking_on), case.limits) == []


def _oversized_image() -> Block:
    return image_block(9000, 10)


def test_s2_strips_media_the_api_rejected() -> None:
    entries: list[Entry] = [
        user("look at this"),
        user([text("[Image: source: /tmp/big.png]"), _oversized_image()], meta=True),
        AssistantEntry(
            **_env(),
            message=AssistantMessage(id="e1", content=[text("API Error")]),
            is_api_error_message=True,
            api_error=ApiErrorInfo(
                status=400,
                message="messages.1.content.1.image.source.base64.data: At least one of the image "
                "dimensions exceed max allowed size: 8000 pixels",
            ),
        ),
    ]
    without_s2_and_s7 = [s for s in STEPS if s.name not in ("S2", "S7")]
    broken = find_errors(body(run_steps(entries, without_s2_and_s7)))
    assert any("image dimensions exceed max allowed size: 8000 pixels" in e.message for e in broken)
    with pytest.raises(UserError, match="9000x10 px"):
        run_steps(entries, [s for s in STEPS if s.name != "S2"])  # S7 catches it instead, clearly
    fixed = run_steps(entries, STEPS)
    assert find_errors(body(fixed)) == []
    assert fixed == [
        {"role": "user", "content": [text("look at this"), text("[Image: source: /tmp/big.png]")]}
    ]


def test_s7_names_the_entry_instead_of_a_400() -> None:
    typed = user([text("what is in this?"), _oversized_image()])
    entries: list[Entry] = [typed]
    broken = find_errors(body(run_steps(entries, [s for s in STEPS if s.name != "S7"])))
    assert any("exceed max allowed size" in e.message for e in broken)
    with pytest.raises(UserError, match=typed.uuid) as raised:
        run_steps(entries, STEPS)
    assert "messages.0.content.1" in str(raised.value)
    assert "8000 px limit" in str(raised.value)


def test_s1_moves_a_hook_attachment_beside_its_tool_result() -> None:
    hook = AttachmentEntry(**_env(), attachment_type="hook_success", content="lint passed", tool_use_id="t1")
    entries: list[Entry] = [
        user("edit"),
        hook,  # written before the tool's result arrived
        reply("m1", tool_use("t1")),
        user([result("t1", "edited")]),
        reply("m2", text("done")),
        user("thanks"),
    ]
    moved = run_steps(entries, STEPS)
    assert find_errors(body(moved)) == []
    assert [m["role"] for m in moved] == ["user", "assistant", "user", "assistant", "user"]
    folded = moved[2]["content"][0]
    assert folded["tool_use_id"] == "t1"
    assert folded["content"][-1]["text"] == "<system-reminder>\nlint passed\n</system-reminder>"
    assert moved[0]["content"] == [text("edit")]


def test_s5_tags_every_user_message_with_its_entries_short_ids() -> None:
    first, second = user("a"), user("b")
    entries: list[Entry] = [first, second, reply("m1", text("x")), user("c")]
    tagged = run_steps(entries, STEPS, NormalizeOptions(snip_enabled=True))
    untagged = run_steps(entries, STEPS, NormalizeOptions(snip_enabled=False))
    assert find_errors(body(tagged)) == []
    assert tagged[0]["content"][-1] == text(f"[id:{short_id(first.uuid)}] [id:{short_id(second.uuid)}]")
    assert tagged[2]["content"][-1]["text"].startswith("[id:")
    assert all(not b["text"].startswith("[id:") for m in untagged for b in m["content"])


def test_s6f_folds_each_reminder_into_the_nearest_result_before_it() -> None:
    """Not always the first: a reminder that followed t2's result belongs to t2 (the file t2 read)."""
    entries: list[Entry] = [
        user("a"),
        reply("m1", tool_use("t1"), tool_use("t2"), tool_use("t3")),
        user(
            [
                text("<system-reminder>before any</system-reminder>"),
                result("t1", "one"),
                result("t2", "two"),
                text("<system-reminder>after two</system-reminder>"),
                result("t3", "three"),
            ]
        ),
    ]
    out = run_steps(entries, STEPS)
    assert find_errors(body(out)) == []
    folded = {b["tool_use_id"]: b["content"] for b in out[2]["content"]}
    assert "before any" in str(folded["t1"])  # before the first result: into the first
    assert "after two" in str(folded["t2"])
    assert "after two" not in str(folded["t1"])
    assert "reminder" not in str(folded["t3"])
