"""The strict request validator: one failing and one passing body per rule of design.md §A.

Each `Case` holds a minimal body that breaks exactly one rule, the same body with only that part
fixed, and the API's exact message and the JSON path the validator must report for it.
"""

from __future__ import annotations

import base64
import copy
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.conftest import claude_code_files, requires_claude_code_data

from foldline._json import loads
from foldline.api.validate import ValidationLimits, find_errors, validate_request
from foldline.errors import RequestValidationError, UserError

Body = dict[str, Any]

# --- tiny image and PDF builders (headers only: the validator reads nothing else) -------------


def png(width: int = 10, height: int = 10) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))


def gif(width: int = 10, height: int = 10) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def jpeg(width: int = 10, height: int = 10) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = (
        b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    )
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def webp_vp8x(width: int = 10, height: int = 10) -> bytes:
    payload = b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return _riff(b"VP8X", payload)


def webp_vp8l(width: int = 10, height: int = 10) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    return _riff(b"VP8L", b"\x2f" + struct.pack("<I", bits))


def webp_vp8(width: int = 10, height: int = 10) -> bytes:
    return _riff(b"VP8 ", b"\x00\x00\x00\x9d\x01\x2a" + struct.pack("<HH", width, height))


def _riff(chunk: bytes, payload: bytes) -> bytes:
    body = b"WEBP" + chunk + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", len(body)) + body


def pdf(pages: int) -> bytes:
    objects = b"".join(b"<< /Type /Page /Parent 2 0 R >>\n" for _ in range(pages))
    return b"%PDF-1.4\n<< /Type /Pages /Count " + str(pages).encode() + b" >>\n" + objects + b"%%EOF"


def image(raw: bytes, media_type: str = "image/png", **extra: Any) -> Body:
    data = base64.b64encode(raw).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}, **extra}


def document(raw: bytes) -> Body:
    data = base64.b64encode(raw).decode()
    return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}


# --- body builders ----------------------------------------------------------------------------


def req(*messages: Body, **params: Any) -> Body:
    return {"model": "claude-sonnet-4-5", "max_tokens": 2048, "messages": list(messages), **params}


def user(*content: Any) -> Body:
    return {
        "role": "user",
        "content": content[0] if len(content) == 1 and isinstance(content[0], str) else list(content),
    }


def assistant(*content: Any) -> Body:
    return {
        "role": "assistant",
        "content": content[0] if len(content) == 1 and isinstance(content[0], str) else list(content),
    }


def text(value: str, **extra: Any) -> Body:
    return {"type": "text", "text": value, **extra}


def tool_use(tool_id: str, name: str = "Read") -> Body:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"path": "a.py"}}


def tool_result(tool_id: str, content: Any = "ok", **extra: Any) -> Body:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, **extra}


def thinking(value: str = "Let me look.", signature: str = "sig-abc") -> Body:
    return {"type": "thinking", "thinking": value, "signature": signature}


def tool(name: str, **extra: Any) -> Body:
    return {"name": name, "description": "d", "input_schema": {"type": "object"}, **extra}


THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
EPHEMERAL = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def without(body: Body, key: str) -> Body:
    return {k: v for k, v in body.items() if k != key}


def tool_loop(first: Body, **params: Any) -> Body:
    """A user question, an assistant message `first` calling tool `t1`, and its result."""
    return req(user("Read a.py"), first, user(tool_result("t1")), **params)


# --- the cases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    bad: Body
    good: Body
    message: str
    path: str
    limits: ValidationLimits = field(default_factory=ValidationLimits)
    good_limits: ValidationLimits | None = None
    """Limits for the passing body where the fixed part is a limit, not the body."""
    status: int = 400
    error_type: str = "invalid_request_error"


EXTENDED = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
CONSIDERATIONS = f"{EXTENDED}#important-considerations-when-using-extended-thinking"
TOOL_RESULT_TAGS = "'text', 'image', 'document', 'search_result', 'tool_reference'"
MANY_SMALL = [image(png()) for _ in range(20)]


def _shape_cases() -> list[Case]:
    return [
        Case(
            "shape-max_tokens-required",
            without(req(user("hi")), "max_tokens"),
            req(user("hi")),
            "max_tokens: Field required",
            "max_tokens",
        ),
        Case(
            "shape-model-type",
            req(user("hi"), model=3),
            req(user("hi")),
            "model: Input should be a valid string",
            "model",
        ),
        Case(
            "shape-role-enum",
            req({"role": "tool", "content": "hi"}),
            req(user("hi")),
            "messages.0.role: Input should be 'user' or 'assistant'",
            "messages.0.role",
        ),
        Case(
            "shape-unknown-block-in-tool-result",
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", [{"type": "video"}]))),
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", [text("ok")]))),
            "messages.2.content.0.tool_result.content.0: Input tag 'video' found using 'type' does not match "
            f"any of the expected tags: {TOOL_RESULT_TAGS}",
            "messages.2.content.0.content.0",
        ),
        Case(
            "shape-tool_use-in-user-message",
            req(user(text("hi"), tool_use("t1"))),
            req(user(text("hi"))),
            "messages.0.content.1: Input tag 'tool_use' found using 'type' does "
            "not match any of the expected "
            "tags: 'text', 'image', 'document', 'search_result', 'tool_result', 'container_upload', "
            "'cache_edits'",
            "messages.0.content.1",
        ),
        Case(
            "shape-extra-field-on-text",
            req(user(text("hi", id="x"))),
            req(user(text("hi"))),
            "messages.0.content.0.text.id: Extra inputs are not permitted",
            "messages.0.content.0.id",
        ),
        Case(
            "shape-system-block-type",
            req(user("hi"), system=[{"type": "image"}]),
            req(user("hi"), system=[text("be brief")]),
            "system.0: Input tag 'image' found using 'type' does not match any of the expected tags: 'text'",
            "system.0",
        ),
        Case(
            "shape-system-type",
            req(user("hi"), system=7),
            req(user("hi"), system="be brief"),
            "system: Input should be a valid string or a valid list",
            "system",
        ),
        Case(
            "shape-thinking-type",
            req(user("hi"), thinking={"type": "on"}),
            req(user("hi"), thinking={"type": "disabled"}),
            "thinking: Input tag 'on' found using 'type' does not match any of the expected tags: "
            "'enabled', 'disabled', 'adaptive'",
            "thinking",
        ),
        Case(
            "shape-tool_choice-type",
            req(user("hi"), tools=[tool("Read")], tool_choice={"type": "required"}),
            req(user("hi"), tools=[tool("Read")], tool_choice={"type": "any"}),
            "tool_choice: Input tag 'required' found using 'type' does not match any of the expected tags: "
            "'auto', 'any', 'tool', 'none'",
            "tool_choice",
        ),
        Case(
            "shape-tool_choice-tool-name",
            req(user("hi"), tools=[tool("Read")], tool_choice={"type": "tool"}),
            req(user("hi"), tools=[tool("Read")], tool_choice={"type": "tool", "name": "Read"}),
            "tool_choice.tool.name: Field required",
            "tool_choice.name",
        ),
        Case(
            "shape-temperature-range",
            req(user("hi"), temperature=1.5),
            req(user("hi"), temperature=1.0),
            "temperature: Input should be less than or equal to 1",
            "temperature",
        ),
        Case(
            "shape-cache_control-ttl",
            req(user(text("hi", cache_control={"type": "ephemeral", "ttl": "2h"}))),
            req(user(text("hi", cache_control=HOUR))),
            "messages.0.content.0.text.cache_control.ttl: Input should be '5m' or '1h'",
            "messages.0.content.0.cache_control.ttl",
        ),
        Case(
            "rule04-system-role",
            req({"role": "system", "content": "be brief"}, user("hi")),
            req(user("hi"), system="be brief"),
            'messages: Unexpected role "system". The Messages API accepts a top-level `system` parameter, '
            'not "system" as an input message role.',
            "messages.0.role",
        ),
        Case(
            "rule14-tool_use-id-pattern",
            req(user("q"), assistant(tool_use("t.1")), user(tool_result("t.1"))),
            tool_loop(assistant(tool_use("t1"))),
            "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'",
            "messages.1.content.0.id",
        ),
        Case(
            "rule15-tool-name-pattern",
            req(user("hi"), tools=[tool("Read"), tool("mcp.fs/read")]),
            req(user("hi"), tools=[tool("Read"), tool("mcp__fs__read")]),
            "tools.1.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'",
            "tools.1.name",
        ),
        Case(
            "rule15-tool-name-length",
            req(user("hi"), tools=[tool("x" * 129)]),
            req(user("hi"), tools=[tool("x" * 128)]),
            "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'",
            "tools.0.name",
        ),
        Case(
            "shape-tool-names-unique",
            req(user("hi"), tools=[tool("Read"), tool("Read")]),
            req(user("hi"), tools=[tool("Read"), tool("Write")]),
            "tools: Tool names must be unique.",
            "tools",
        ),
        Case(
            "rule25-thinking-budget",
            req(user("hi"), thinking={"type": "enabled", "budget_tokens": 1023}),
            req(user("hi"), thinking={"type": "enabled", "budget_tokens": 1024}),
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
            "thinking.budget_tokens",
        ),
        Case(
            "rule34-media-type-enum-nested",
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", [image(png(), "image/bmp")]))),
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", [image(png())]))),
            "messages.2.content.0.tool_result.content.0.image.source.base64.media_type: Input should be "
            "'image/jpeg', 'image/png', 'image/gif' or 'image/webp'",
            "messages.2.content.0.content.0.source.media_type",
        ),
        Case(
            "rule45-cache_control-on-thinking",
            req(user("q"), assistant(thinking() | {"cache_control": EPHEMERAL}, text("a")), user("more")),
            req(user("q"), assistant(thinking(), text("a", cache_control=EPHEMERAL)), user("more")),
            "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted",
            "messages.1.content.0.cache_control",
        ),
    ]


def _structure_cases() -> list[Case]:
    return [
        Case(
            "rule01-no-messages",
            req(),
            req(user("hi")),
            "messages: at least one message is required",
            "messages",
        ),
        Case(
            "rule02-first-user",
            req(assistant("Hello."), user("hi")),
            req(user("(session start)"), assistant("Hello."), user("hi")),
            'messages: first message must use the "user" role',
            "messages.0",
        ),
        Case(
            "rule03-consecutive-user",
            req(user("hi"), user("again")),
            req(user(text("hi"), text("again"))),
            'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles '
            "in a row",
            "messages.1",
        ),
        Case(
            "rule03-consecutive-assistant",
            req(user("hi"), assistant("a"), assistant("b"), user("c")),
            req(user("hi"), assistant(text("a"), text("b")), user("c")),
            'messages: roles must alternate between "user" and "assistant", but found multiple "assistant" '
            "roles in a row",
            "messages.2",
        ),
        Case(
            "rule05-empty-content",
            req(user("hi"), {"role": "assistant", "content": []}, user("again")),
            req(user("hi"), assistant("ok"), user("again")),
            "messages.1: all messages must have non-empty content except for the optional final assistant "
            "message",
            "messages.1",
        ),
        Case(
            "rule05-empty-string",
            req(user("")),
            req(user("x")),
            "messages.0: all messages must have non-empty content except for the optional final assistant "
            "message",
            "messages.0",
        ),
        Case(
            "rule06-empty-text-block",
            req(user(image(png()), text(""))),
            req(user(image(png()), text("what is this?"))),
            "messages: text content blocks must be non-empty",
            "messages.0.content.1",
        ),
        Case(
            "rule06-empty-text-in-tool-result",
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", [text("")]))),
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", [text("\n")]))),
            "messages: text content blocks must be non-empty",
            "messages.2.content.0.content.0",
        ),
        Case(
            "rule07-whitespace-text-block",
            req(user("hi"), assistant(text("\n\n"), text("Sure.")), user("go")),
            req(user("hi"), assistant(text("Sure.")), user("go")),
            "messages: text content blocks must contain non-whitespace text",
            "messages.1.content.0",
        ),
        Case(
            "rule07-whitespace-string",
            req(user(" ")),
            req(user(".")),
            "messages: text content blocks must contain non-whitespace text",
            "messages.0.content",
        ),
        Case(
            "rule06-empty-system-block",
            req(user("hi"), system=[text("You are terse."), text("")]),
            req(user("hi"), system=[text("You are terse."), text("Be kind.")]),
            "system: text content blocks must be non-empty",
            "system.1",
        ),
        Case(
            "rule07-whitespace-system-block",
            req(user("hi"), system=[text("\n")]),
            req(user("hi"), system=[text("You are terse.")]),
            "system: text content blocks must contain non-whitespace text",
            "system.0",
        ),
        Case(
            "rule08-final-assistant-trailing-whitespace",
            req(user("hi"), assistant("The answer is ")),
            req(user("hi"), assistant("The answer is")),
            "messages: final assistant content cannot end with trailing whitespace",
            "messages.1.content",
        ),
        Case(
            "rule09-prefill-not-supported",
            req(user("hi"), assistant("{")),
            req(user("hi"), assistant("{"), user("Continue")),
            "This model does not support assistant message prefill. The conversation must end with a user "
            "message.",
            "messages.1",
            limits=ValidationLimits(prefill_allowed=False),
        ),
    ]


def _tool_cases() -> list[Case]:
    return [
        Case(
            "rule10-missing-tool-result",
            req(user("q"), assistant(tool_use("t1"), tool_use("t2")), user(tool_result("t1"))),
            req(
                user("q"),
                assistant(tool_use("t1"), tool_use("t2")),
                user(tool_result("t1"), tool_result("t2")),
            ),
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t2. Each "
            "`tool_use` block must have a corresponding `tool_result` block in the next message.",
            "messages.1",
        ),
        Case(
            "rule10-tool-use-last",
            req(user("q"), assistant(tool_use("t1"))),
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1"))),
            "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: t1. Each "
            "`tool_use` block must have a corresponding `tool_result` block in the next message.",
            "messages.1",
        ),
        Case(
            "rule11-results-not-first",
            req(
                user("q"),
                assistant(tool_use("t1")),
                user(text("<system-reminder>x</system-reminder>"), tool_result("t1")),
            ),
            req(
                user("q"),
                assistant(tool_use("t1")),
                user(tool_result("t1"), text("<system-reminder>x</system-reminder>")),
            ),
            "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. Messages "
            "following `tool_use` blocks must begin with a matching number of `tool_result` blocks.",
            "messages.2",
        ),
        Case(
            "rule12-orphan-result",
            req(user(tool_result("toolu_gone"), text("continue"))),
            req(user(text("continue"))),
            "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_gone. Each "
            "`tool_result` block must have a corresponding `tool_use` block in the previous message.",
            "messages.0.content.0",
        ),
        Case(
            "rule12-duplicate-result",
            req(
                user("q"),
                assistant(tool_use("t1")),
                user(tool_result("t1"), tool_result("t1", "Sibling errored")),
            ),
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1"))),
            "messages.2.content.1: each tool_use must have a single result. Found multiple `tool_result` "
            "blocks with id: t1",
            "messages.2.content.1",
        ),
        Case(
            "rule13-duplicate-tool-use-id",
            req(
                user("q"),
                assistant(tool_use("t1")),
                user(tool_result("t1")),
                assistant(tool_use("t1")),
                user(tool_result("t1")),
            ),
            req(
                user("q"),
                assistant(tool_use("t1")),
                user(tool_result("t1")),
                assistant(tool_use("t2")),
                user(tool_result("t2")),
            ),
            "messages.3.content.0: `tool_use` ids must be unique",
            "messages.3.content.0",
        ),
        Case(
            "rule16-error-result-text-only",
            req(
                user("q"),
                assistant(tool_use("t1")),
                user(tool_result("t1", [text("failed"), image(png())], is_error=True)),
            ),
            req(
                user("q"), assistant(tool_use("t1")), user(tool_result("t1", [text("failed")], is_error=True))
            ),
            "messages.2.content.0.tool_result: all content must be type 'text' if 'is_error' is true",
            "messages.2.content.0",
        ),
        Case(
            "rule17-error-result-not-empty",
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", "", is_error=True))),
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", "interrupted", is_error=True))),
            "messages.2.content.0.tool_result: content cannot be empty if `is_error` is true",
            "messages.2.content.0",
        ),
    ]


def _thinking_cases() -> list[Case]:
    rule19 = (
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{}`. When "
        "`thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
        "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from "
        "previous turns. To avoid this requirement, disable `thinking`. Please "
        f"consult our documentation at {EXTENDED}"
    )
    return [
        Case(
            "rule19-tool-loop-starts-with-thinking",
            tool_loop(assistant(tool_use("t1")), **THINKING),
            tool_loop(assistant(thinking(), tool_use("t1")), **THINKING),
            rule19.format("tool_use"),
            "messages.1.content.0",
        ),
        Case(
            "rule19-prefill-with-thinking",
            req(user("hi"), assistant("Sure"), **THINKING),
            req(user("hi"), assistant(thinking(), text("Sure")), **THINKING),
            rule19.format("text"),
            "messages.1.content",
        ),
        Case(
            "rule20-thinking-first",
            req(user("hi"), assistant(text("Hm."), thinking(), text("a")), user("b")),
            req(user("hi"), assistant(thinking(), text("Hm."), text("a")), user("b")),
            "messages.1.content.0: If an assistant message contains any thinking "
            "blocks, the first block must "
            "be thinking or redacted_thinking. Found text.",
            "messages.1.content.0",
        ),
        Case(
            "rule22-empty-signature",
            req(user("hi"), assistant(thinking(signature=""), text("a")), user("b"), **THINKING),
            req(user("hi"), assistant(thinking(), text("a")), user("b"), **THINKING),
            "messages.1.content.0: Invalid `signature` in `thinking` block",
            "messages.1.content.0",
        ),
        Case(
            "rule23-final-thinking-when-disabled",
            req(user("hi"), assistant(thinking(), text("a"))),
            req(user("hi"), assistant(thinking(), text("a")), **THINKING),
            "messages.1.content.0: When thinking is disabled, an `assistant` message in the final position "
            "cannot contain `thinking`. To use thinking blocks, enable `thinking` in your request.",
            "messages.1.content.0",
        ),
        Case(
            "rule24-final-block-thinking",
            req(user("hi"), assistant(thinking()), user("again")),
            req(user("hi"), assistant(thinking(), text("a")), user("again")),
            "messages.1: The final block in an assistant message cannot be `thinking`.",
            "messages.1",
        ),
        Case(
            "rule26-max_tokens-above-budget",
            req(user("hi"), max_tokens=1024, **THINKING),
            req(user("hi"), max_tokens=1025, **THINKING),
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at "
            f"{EXTENDED}#max-tokens-and-context-window-size",
            "max_tokens",
        ),
        Case(
            "rule27-temperature-with-thinking",
            req(user("hi"), temperature=0.2, **THINKING),
            req(user("hi"), temperature=1, **THINKING),
            "temperature may only be set to 1 when thinking is enabled or in adaptive mode",
            "temperature",
        ),
        Case(
            "rule27-top_k-with-thinking",
            req(user("hi"), top_k=40, thinking={"type": "adaptive"}),
            req(user("hi"), thinking={"type": "adaptive"}),
            "`top_k` must be unset when thinking is enabled. Please consult our "
            f"documentation at {CONSIDERATIONS}",
            "top_k",
        ),
        Case(
            "rule27-top_p-with-thinking",
            req(user("hi"), top_p=0.9, **THINKING),
            req(user("hi"), top_p=0.95, **THINKING),
            "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. Please consult "
            f"our documentation at {CONSIDERATIONS}",
            "top_p",
        ),
        Case(
            "rule28-forced-tool-with-thinking",
            req(user("hi"), tools=[tool("Read")], tool_choice={"type": "tool", "name": "Read"}, **THINKING),
            req(user("hi"), tools=[tool("Read")], tool_choice={"type": "auto"}, **THINKING),
            "Thinking may not be enabled when tool_choice forces tool use.",
            "tool_choice",
        ),
    ]


def _media_cases() -> list[Case]:
    oversized = png() + b"\x00" * (5 * 1024 * 1024 * 3 // 4)
    fits = png() + b"\x00" * (5 * 1024 * 1024 * 3 // 4 - 40)
    assert len(base64.b64encode(fits)) <= 5 * 1024 * 1024 < len(base64.b64encode(oversized))
    return [
        Case(
            "rule29-image-bytes",
            req(user(image(oversized))),
            req(user(image(fits))),
            f"messages.0.content.0.image.source.base64: image exceeds 5 MB maximum: "
            f"{len(base64.b64encode(oversized))} bytes > 5242880 bytes",
            "messages.0.content.0.source",
        ),
        *[
            Case(
                f"rule30-dimensions-{name}",
                req(user(text("see"), image(build(8001, 30), media_type))),
                req(user(text("see"), image(build(8000, 30), media_type))),
                "messages.0.content.1.image.source.base64.data: At least one of the "
                "image dimensions exceed max "
                "allowed size: 8000 pixels",
                "messages.0.content.1.source.data",
            )
            for name, build, media_type in IMAGE_FORMATS
        ],
        Case(
            "rule30-dimensions-height",
            req(user(image(png(30, 8001)))),
            req(user(image(png(30, 8000)))),
            "messages.0.content.0.image.source.base64.data: At least one of the image dimensions exceed max "
            "allowed size: 8000 pixels",
            "messages.0.content.0.source.data",
        ),
        Case(
            "rule31-many-images",
            req(user(*MANY_SMALL, image(png(2001, 10)))),
            req(user(*MANY_SMALL[1:], image(png(2001, 10)))),
            "messages.0.content.20.image.source.base64.data: At least one of the image dimensions exceed max "
            "allowed size for many-image requests: 2000 pixels",
            "messages.0.content.20.source.data",
        ),
        Case(
            "rule32-too-many-images",
            req(user(*[image(gif(), "image/gif") for _ in range(101)])),
            req(user(*[image(gif(), "image/gif") for _ in range(100)])),
            "too many images and documents: 101 + 0 > 100",
            "messages",
        ),
        Case(
            "rule32-images-plus-pages",
            req(user(document(pdf(30)), *[image(gif(), "image/gif") for _ in range(71)])),
            req(user(document(pdf(30)), *[image(gif(), "image/gif") for _ in range(70)])),
            "too many images and documents: 71 + 30 > 100",
            "messages",
        ),
        Case(
            "rule33-pdf-pages",
            req(user(document(pdf(60)), document(pdf(41)), text("summarize"))),
            req(user(document(pdf(60)), document(pdf(40)), text("summarize"))),
            "A maximum of 100 PDF pages may be provided.",
            "messages",
        ),
        Case(
            "rule35-media-type-mismatch",
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", [image(png(), "image/jpeg")]))),
            req(user("q"), assistant(tool_use("t1")), user(tool_result("t1", [image(jpeg(), "image/jpeg")]))),
            "messages.2.content.0.tool_result.content.0.image.source.base64: The "
            "image was specified using the "
            "image/jpeg media type, but the image appears to be a image/png image",
            "messages.2.content.0.content.0.source",
        ),
        Case(
            "rule36-empty-image",
            req(user(text("see"), image(b""))),
            req(user(text("see"), image(png()))),
            "messages.0.content.1.image.source.base64: image cannot be empty",
            "messages.0.content.1.source",
        ),
        Case(
            "rule37-undecodable-image",
            req(user(image(b"not an image at all"))),
            req(user(image(gif(), "image/gif"))),
            "Could not process image",
            "messages.0.content.0.source.data",
        ),
        Case(
            "rule37-invalid-base64",
            req(
                user(
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "@@@"}}
                )
            ),
            req(user(image(png()))),
            "Could not process image",
            "messages.0.content.0.source.data",
        ),
    ]


IMAGE_FORMATS: list[tuple[str, Callable[[int, int], bytes], str]] = [
    ("png", png, "image/png"),
    ("jpeg", jpeg, "image/jpeg"),
    ("gif", gif, "image/gif"),
    ("webp-vp8x", webp_vp8x, "image/webp"),
    ("webp-vp8l", webp_vp8l, "image/webp"),
    ("webp-vp8", webp_vp8, "image/webp"),
]


def _size_cases() -> list[Case]:
    window = ValidationLimits(context_window=200_000, input_tokens=219_898)
    return [
        Case(
            "rule38-prompt-too-long",
            req(user("hi")),
            req(user("hi")),
            "prompt is too long: 219898 tokens > 200000 maximum",
            "messages",
            limits=window,
            good_limits=ValidationLimits(context_window=200_000, input_tokens=150_000),
        ),
        Case(
            "rule39-input-plus-max_tokens",
            req(user("hi"), max_tokens=8192),
            req(user("hi"), max_tokens=241),
            "input length and `max_tokens` exceed context limit: 199759 + 8192 > "
            "200000, decrease input length "
            "or `max_tokens` and try again",
            "max_tokens",
            limits=ValidationLimits(context_window=200_000, input_tokens=199_759),
        ),
        Case(
            "rule40-max_tokens-over-model-maximum",
            req(user("hi"), model="claude-opus-4-5-20251101", max_tokens=128_001),
            req(user("hi"), model="claude-opus-4-5-20251101", max_tokens=64_000),
            "max_tokens: 128001 > 64000, which is the maximum allowed number of output tokens for "
            "claude-opus-4-5-20251101",
            "max_tokens",
            limits=ValidationLimits(max_output_tokens={"claude-opus-4": 32_000, "claude-opus-4-5": 64_000}),
        ),
    ]


def _cache_cases() -> list[Case]:
    def marked(count: int) -> Body:
        blocks = [text(f"part {i}", cache_control=EPHEMERAL) for i in range(count - 1)]
        return req(user(*blocks, text("q")), tools=[tool("Read", cache_control=EPHEMERAL)])

    return [
        Case(
            "rule42-too-many-breakpoints",
            marked(5),
            marked(4),
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
            "",
        ),
        Case(
            "rule42-automatic-caching-counts",
            marked(4) | {"cache_control": EPHEMERAL},
            marked(3) | {"cache_control": EPHEMERAL},
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
            "",
        ),
        Case(
            "rule43-cache_control-on-empty-text",
            req(user(text("q"), text("", cache_control=EPHEMERAL))),
            req(user(text("q"), text(".", cache_control=EPHEMERAL))),
            "messages.0.content.1.text: cache_control cannot be set for empty text blocks",
            "messages.0.content.1",
        ),
        Case(
            "rule44-ttl-order",
            req(user(text("q", cache_control=HOUR)), system=[text("sys", cache_control=EPHEMERAL)]),
            req(user(text("q", cache_control=EPHEMERAL)), system=[text("sys", cache_control=HOUR)]),
            "messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a "
            "ttl='5m' cache_control block. Note that blocks are processed in the following order: `tools`, "
            "`system`, `messages`.",
            "messages.0.content.0.cache_control.ttl",
        ),
        Case(
            "rule44-automatic-caching-comes-last",
            req(user(text("q", cache_control=EPHEMERAL)), cache_control=HOUR),
            req(user(text("q", cache_control=HOUR)), cache_control=HOUR),
            "cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
            "cache_control block. Note that blocks are processed in the following order: `tools`, `system`, "
            "`messages`.",
            "cache_control.ttl",
        ),
        Case(
            "rule44-ttl-order-tools-before-system",
            req(
                user("q"),
                tools=[tool("Read", cache_control=EPHEMERAL)],
                system=[text("s", cache_control=HOUR)],
            ),
            req(
                user("q"),
                tools=[tool("Read", cache_control=HOUR)],
                system=[text("s", cache_control=EPHEMERAL)],
            ),
            "system.0.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
            "cache_control block. Note that blocks are processed in the following order: `tools`, `system`, "
            "`messages`.",
            "system.0.cache_control.ttl",
        ),
    ]


CASES = [
    *_shape_cases(),
    *_structure_cases(),
    *_tool_cases(),
    *_thinking_cases(),
    *_media_cases(),
    *_size_cases(),
    *_cache_cases(),
]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_rule_rejects_the_breaking_body(case: Case) -> None:
    with pytest.raises(RequestValidationError) as caught:
        validate_request(case.bad, case.limits)
    error = caught.value
    assert (error.status, error.error_type, error.message, error.path) == (
        case.status,
        case.error_type,
        case.message,
        case.path,
    )


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_rule_accepts_the_fixed_body(case: Case) -> None:
    assert find_errors(case.good, case.good_limits or case.limits) == []


# --- valid complex bodies ---------------------------------------------------------------------


def _parallel_tool_calls() -> Body:
    return req(
        user("Read both files"),
        assistant(text("Reading both."), tool_use("toolu_01A"), tool_use("toolu_01B")),
        user(
            tool_result("toolu_01A", "a"), tool_result("toolu_01B", [text("b")]), text("<system-reminder>x")
        ),
        assistant("Done."),
        user("thanks"),
        tools=[tool("Read")],
    )


def _thinking_tool_loop() -> Body:
    return req(
        user("Fix the bug"),
        assistant(thinking(), text("Looking."), tool_use("t1")),
        user(tool_result("t1", "source")),
        assistant(tool_use("t2")),
        user(tool_result("t2", "more source", is_error=True)),
        tools=[tool("Read")],
        tool_choice={"type": "auto"},
        max_tokens=16_000,
        temperature=1,
        thinking={"type": "enabled", "budget_tokens": 8_000},
    )


def _images_in_tool_results() -> Body:
    return req(
        user(text("Compare these"), image(jpeg(1200, 800), "image/jpeg")),
        assistant(tool_use("shot")),
        user(tool_result("shot", [text("screenshot"), image(webp_vp8x(1920, 1080), "image/webp")])),
        assistant("They match."),
        user("ok"),
    )


def _cache_ttls_in_order() -> Body:
    return req(
        user(text("context", cache_control=HOUR), text("question")),
        assistant("answer"),
        user(text("follow-up", cache_control=EPHEMERAL)),
        system=[text("You are terse.", cache_control=HOUR)],
        tools=[tool("Read", cache_control=HOUR), tool("Write")],
    )


def _long_lookback() -> Body:
    # The 20-block lookback window only limits cache hits; a breakpoint 30 blocks on is legal.
    return req(user(*[text(f"block {i}") for i in range(29)], text("last", cache_control=EPHEMERAL)))


def _claude_code_shaped() -> Body:
    return req(
        user(text("<command-name>/review</command-name>"), text("Review a.py")),
        assistant(thinking(signature="EqQBCkYIBxgCKkB"), tool_use("toolu_01Q", "ToolSearch")),
        user(tool_result("toolu_01Q", [{"type": "tool_reference", "tool_name": "ExitPlanMode"}])),
        assistant(thinking(value=""), text("Plan ready.")),
        user("(no content)"),
        system="You are Claude Code.",
        thinking={"type": "adaptive"},
        metadata={"user_id": "u"},
        stream=True,
    )


VALID_BODIES: dict[str, Callable[[], Body]] = {
    "parallel-tool-calls": _parallel_tool_calls,
    "thinking-tool-loop": _thinking_tool_loop,
    "images-in-tool-results": _images_in_tool_results,
    "cache-ttl-1h-then-5m": _cache_ttls_in_order,
    "cache-lookback-beyond-20": _long_lookback,
    "claude-code-shaped": _claude_code_shaped,
    "cache-edits-before-results": lambda: req(
        user("q"),
        assistant(thinking(), tool_use("t1")),
        user(
            {"type": "cache_edits", "edits": [{"type": "delete", "cache_reference": "r1"}]}, tool_result("t1")
        ),
        **THINKING,
    ),
    "final-assistant-empty": lambda: req(user("hi"), {"role": "assistant", "content": []}),
    "url-and-file-sources": lambda: req(
        user(
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
            {"type": "document", "source": {"type": "file", "file_id": "file_1"}},
            text("describe"),
        )
    ),
}


@pytest.mark.parametrize("build", VALID_BODIES.values(), ids=VALID_BODIES.keys())
def test_valid_complex_body_passes(build: Callable[[], Body]) -> None:
    body = build()
    snapshot = copy.deepcopy(body)
    assert find_errors(body) == []
    validate_request(body)
    assert body == snapshot, "the validator must not mutate the body"


# --- behaviour across rules -------------------------------------------------------------------


def test_request_bytes_are_checked_before_anything_else() -> None:
    errors = find_errors({"messages": "not even a list"}, body_bytes=32 * 1024 * 1024 + 1)
    assert [(e.status, e.error_type, e.message, e.path) for e in errors] == [
        (
            413,
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes. The maximum request size is 32 MB for "
            "standard API endpoints.",
            "",
        )
    ]
    assert find_errors(req(user("hi")), body_bytes=32 * 1024 * 1024) == []


def test_request_bytes_are_measured_when_not_given() -> None:
    limits = ValidationLimits(max_request_bytes=2 * 1024 * 1024)
    small, large = req(user("x" * 1000)), req(user("x" * (2 * 1024 * 1024)))
    assert find_errors(small, limits) == []
    assert [e.status for e in find_errors(large, limits)] == [413]


def test_unencodable_body_is_a_clear_user_error() -> None:
    with pytest.raises(UserError, match="not JSON-encodable"):
        find_errors(req(user("hi"), metadata={"user_id": {1, 2}}))


def test_non_object_body() -> None:
    errors = find_errors([1, 2])  # type: ignore[arg-type]
    assert [(e.message, e.path) for e in errors] == [("Input should be a valid dictionary", "")]


def test_shape_errors_hide_semantic_ones() -> None:
    body = req(assistant("first"), user({"type": "text"}))
    assert [(e.message, e.path) for e in find_errors(body)] == [
        ("messages.1.content.0.text.text: Field required", "messages.1.content.0.text"),
    ]


def test_every_broken_rule_is_reported_in_api_order() -> None:
    body = req(
        assistant("Hello"),
        user(text(" "), tool_result("orphan")),
        temperature=0.5,
        **THINKING,
    )
    messages = [e.message.split(":")[0] for e in find_errors(body)]
    assert messages == [
        "temperature may only be set to 1 when thinking is enabled or in adaptive mode",
        "messages",  # rule 2
        "messages",  # rule 7
        "messages.1.content.1",  # rule 12
    ]


def test_consecutive_roles_can_be_allowed() -> None:
    body = req(user("a"), user("b"))
    assert len(find_errors(body)) == 1
    assert find_errors(body, ValidationLimits(allow_consecutive_roles=True)) == []


def test_interleaved_thinking_lifts_the_budget_rule() -> None:
    body = req(user("hi"), max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 4000})
    assert len(find_errors(body)) == 1
    assert find_errors(body, ValidationLimits(interleaved_thinking=True)) == []


def test_prefill_is_allowed_by_default() -> None:
    assert find_errors(req(user("hi"), assistant('{"a":'))) == []


def test_thinking_loop_after_a_new_user_turn_needs_no_thinking() -> None:
    # A fresh user message ends the previous turn: its thinking may be stripped (rule 19 scope).
    body = req(
        user("q"),
        assistant(tool_use("t1")),
        user(tool_result("t1"), text("and now something else")),
        **THINKING,
    )
    assert find_errors(body) == []


def test_url_images_count_toward_the_media_limit() -> None:
    url_image = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    body = req(user(*[url_image] * 3))
    assert find_errors(body, ValidationLimits(max_media=3)) == []
    [error] = find_errors(body, ValidationLimits(max_media=2))
    assert error.message == "too many images and documents: 3 + 0 > 2"


@pytest.mark.parametrize(("name", "build", "media_type"), IMAGE_FORMATS, ids=[f[0] for f in IMAGE_FORMATS])
def test_each_format_is_sniffed_from_its_bytes(
    name: str, build: Callable[[int, int], bytes], media_type: str
) -> None:
    declared = "image/gif" if media_type != "image/gif" else "image/png"
    [error] = find_errors(req(user(image(build(5, 7), declared))))
    assert error.message.endswith(
        f"specified using the {declared} media type, but the image appears to be a {media_type} image"
    )


# --- robustness: any JSON-shaped body yields errors, never an exception -----------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3000)
    | st.sampled_from(["", " ", "user", "assistant", "text", "x"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "role",
                    "content",
                    "text",
                    "id",
                    "tool_use_id",
                    "name",
                    "input",
                    "is_error",
                    "signature",
                    "thinking",
                    "source",
                    "data",
                    "media_type",
                    "cache_control",
                    "ttl",
                    "budget_tokens",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=_json,
    extra=st.dictionaries(st.sampled_from(["system", "tools", "thinking", "tool_choice"]), _json),
)
def test_arbitrary_bodies_never_crash(messages: Any, extra: dict[str, Any]) -> None:
    errors = find_errors({"model": "m", "max_tokens": 5000, "messages": messages, **extra})
    assert all(isinstance(e, RequestValidationError) and e.status == 400 for e in errors)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_mutated_valid_bodies_never_crash(data: st.DataObject) -> None:
    # A deep copy: the bodies share module-level dicts (THINKING, HOUR, ...) with CASES, and a
    # mutation here used to corrupt the cases for every test that ran later in the process.
    body = copy.deepcopy(data.draw(st.sampled_from(list(VALID_BODIES.values())))())
    target: Any = body
    for _ in range(data.draw(st.integers(1, 6))):
        if isinstance(target, dict) and target:
            key = data.draw(st.sampled_from(sorted(target)))
            if data.draw(st.booleans()):
                target[key] = data.draw(_json)
                break
            target = target[key]
        elif isinstance(target, list) and target:
            target = target[data.draw(st.integers(0, len(target) - 1))]
    errors = find_errors(body)
    assert all(isinstance(e, RequestValidationError) for e in errors)


# --- real Claude Code transcripts: blocks the API accepted pass the schema layer ---------------

SCHEMA_WORDING = ("Field required", "Input should", "Input tag", "Extra inputs", "String should", "Unable to")


def _sent_messages(path: Any) -> list[Body]:
    """The user/assistant payloads of one transcript that were really sent (no synthetic errors)."""
    found = []
    for line in path.read_bytes().splitlines():
        try:
            record = loads(line)
        except ValueError:
            continue
        message = record.get("message") if isinstance(record, dict) else None
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            continue
        if record.get("isApiErrorMessage") or message.get("model") == "<synthetic>":
            continue
        found.append({"role": message["role"], "content": message["content"]})
    return found


@requires_claude_code_data
def test_real_transcript_blocks_pass_the_schema_layer() -> None:
    checked = 0
    for path in claude_code_files():
        for message in _sent_messages(path):
            errors = find_errors(req(message))
            assert not [e.message for e in errors if any(w in e.message for w in SCHEMA_WORDING)], path.name
            assert "Could not process image" not in [e.message for e in errors], path.name
            checked += 1
    assert checked >= len(claude_code_files()), "every transcript holds sent messages"


MAGICS = {
    "image/png": png()[:16],
    "image/jpeg": b"\xff\xd8\xff",
    "image/gif": b"GIF89a",
    "image/webp": webp_vp8()[:16],
}


@settings(max_examples=300, deadline=None)
@given(media_type=st.sampled_from(sorted(MAGICS)), tail=st.binary(max_size=64))
def test_truncated_or_corrupt_image_headers_never_crash(media_type: str, tail: bytes) -> None:
    errors = find_errors(req(user(image(MAGICS[media_type] + tail, media_type))))
    assert all(e.status == 400 and e.path.startswith("messages.0.content.0.source") for e in errors)


def _typed_body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
        **extra,
    }


_TOOL = {"name": "Read", "input_schema": {"type": "object"}}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"tools": [{**_TOOL, "description": ["not", "a", "string"]}]},
            "tools.0.custom.description: Input should be a valid string",
        ),
        (
            {"tools": [{**_TOOL, "description": 7}]},
            "tools.0.custom.description: Input should be a valid string",
        ),
        ({"metadata": {"user_id": 5}}, "metadata.user_id: Input should be a valid string"),
        ({"temperature": True}, "temperature: Input should be a valid number"),
        ({"top_p": False}, "top_p: Input should be a valid number"),
        ({"top_k": True}, "top_k: Input should be a valid integer"),
        ({"max_tokens": True}, "max_tokens: Input should be a valid integer"),
        ({"stop_sequences": [1]}, "stop_sequences.0: Input should be a valid string"),
    ],
    ids=[
        "description-list",
        "description-int",
        "metadata-user-id",
        "temperature-bool",
        "top_p-bool",
        "top_k-bool",
        "max_tokens-bool",
        "stop-sequence-int",
    ],
)
def test_wrongly_typed_fields_are_rejected(extra: dict[str, Any], message: str) -> None:
    errors = find_errors(_typed_body(**extra))
    assert [e.message for e in errors] == [message]


def test_string_description_and_user_id_pass() -> None:
    body = _typed_body(tools=[{**_TOOL, "description": "reads"}], metadata={"user_id": "u1"})
    assert find_errors(body) == []
