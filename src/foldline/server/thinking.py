"""Extended thinking as the local server speaks it: which replies think, signatures, and their check.

The API's rules (design.md §A, rules A19-A24) decide what a client must send back, so the server
produces exactly what those rules accept:

- When a request enables thinking (`enabled` or `adaptive`), a reply that opens an assistant turn
  starts with a `thinking` block: the turn opens after a user message that holds anything besides
  tool results, the same boundary the validator's rule A19 uses. Without the
  `interleaved-thinking-2025-05-14` beta the rest of the turn's tool loop does not think again (the
  API's behaviour); with it, every reply of the loop starts with thinking, so thinking comes
  between tool calls. A backend that thinks on its own (a scenario's `thinking`) keeps its text.
- Every thinking block the server sends is signed: `signature` is an HMAC-SHA256 of the block's
  text under a key drawn once per launch (`ServerConfig.thinking_key` fixes it). With
  `thinking.display: "omitted"` the text is sent empty and the signature covers that empty text,
  as the API returns a signature-only block a client sends back unchanged.
- A prompt containing `REDACTED_THINKING_TRIGGER` (the API's documented test string) is answered
  with a `redacted_thinking` block whose `data` is opaque and signed the same way.
- `check_signatures` refuses, with the API's texts, a request whose thinking blocks were altered:
  in the latest assistant message rule A21's text, elsewhere rule A22's. The check runs only when
  the request enables thinking; with thinking off the API ignores earlier thinking blocks.

Invariant: any reply the server produced, sent back verbatim with the history it answered, passes
both the validator and `check_signatures` (tests/server/test_thinking.py plays sessions to show it).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from foldline._types import Block
from foldline.errors import RequestValidationError
from foldline.server.backend import BackendRequest, Reply

__all__ = [
    "INTERLEAVED_THINKING_BETA",
    "REDACTED_THINKING_TRIGGER",
    "ThinkingSigner",
    "check_signatures",
    "display_omitted",
    "opens_turn",
    "thinking_on",
    "with_thinking",
]

INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
"""The beta under which every reply of a tool loop may think, not only the first."""

REDACTED_THINKING_TRIGGER = (
    "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E193C177646C7398A98432ECCCE4C1253"
)
"""The API's documented test string: a prompt containing it gets a `redacted_thinking` block."""

_THINKING_TYPES = ("thinking", "redacted_thinking")
_SIGNATURE_BYTES = 32
_NONCE_BYTES = 16


def thinking_on(thinking: Mapping[str, Any] | None) -> bool:
    """Whether a request's `thinking` parameter turns thinking on."""
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


def opens_turn(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the reply to `messages` opens an assistant turn (rule A19's boundary).

    A turn opens after a user message with anything but tool results; a user message of tool
    results only continues the tool loop of the turn before it.
    """
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if not isinstance(content, list):
            return True
        return any(isinstance(b, Mapping) and b.get("type") != "tool_result" for b in content)
    return True


@dataclass(frozen=True)
class ThinkingSigner:
    """Signs and checks thinking blocks with one launch's key."""

    key: bytes

    def _mac(self, kind: bytes, payload: bytes) -> bytes:
        return hmac.new(self.key, kind + b"\0" + payload, hashlib.sha256).digest()

    def signature(self, thinking: str) -> str:
        """The signature of a thinking block whose text (as sent) is `thinking`."""
        return base64.b64encode(self._mac(b"thinking", thinking.encode())).decode()

    def redacted_data(self, thinking: str) -> str:
        """Opaque `redacted_thinking` data for `thinking`: a digest of it, signed."""
        nonce = hashlib.sha256(thinking.encode()).digest()[:_NONCE_BYTES]
        return base64.b64encode(nonce + self._mac(b"redacted", nonce)).decode()

    def valid(self, block: Mapping[str, Any]) -> bool:
        """Whether a thinking or redacted_thinking block is one this launch signed, unchanged."""
        if block.get("type") == "thinking":
            expected = self.signature(str(block.get("thinking", "")))
            return hmac.compare_digest(str(block.get("signature", "")).encode(), expected.encode())
        try:
            raw = base64.b64decode(str(block.get("data", "")), validate=True)
        except ValueError:
            return False
        nonce, mac = raw[:_NONCE_BYTES], raw[_NONCE_BYTES:]
        return len(mac) == _SIGNATURE_BYTES and hmac.compare_digest(mac, self._mac(b"redacted", nonce))

    def seal(self, content: Sequence[Block], *, omitted: bool) -> list[Block]:
        """`content` with every thinking block signed (its text emptied when display is omitted)."""
        out: list[Block] = []
        for block in content:
            if block.get("type") == "thinking":
                text = "" if omitted else str(block.get("thinking", ""))
                block = {"type": "thinking", "thinking": text, "signature": self.signature(text)}
            elif block.get("type") == "redacted_thinking":
                block = {"type": "redacted_thinking", "data": self.redacted_data(str(block.get("data", "")))}
            out.append(block)
        return out


def _plan(content: Sequence[Block], prompt: str) -> str:
    """A short, deterministic line of reasoning for a reply: what it was asked and what it does."""
    asked = " ".join(prompt.split())[:160]
    calls = [
        f"{b.get('name')}({', '.join(sorted(map(str, (b.get('input') or {}).keys())))})"
        for b in content
        if b.get("type") == "tool_use"
    ]
    does = f"call {', '.join(calls)}" if calls else "answer from what I can see"
    return f"The request: {asked or 'tool results to look at'}. Next I {does}."


def with_thinking(reply: Reply, request: BackendRequest, *, interleaved: bool) -> Reply:
    """`reply` as it must come back under the request's thinking settings.

    Unchanged when thinking is off, or when the reply continues a tool loop without the interleaved
    beta (a thinking block the backend gave is then dropped: the API does not think there). Else the
    reply starts with thinking: the backend's own, or a plan line made from the reply and prompt.
    """
    if not thinking_on(request.thinking):
        return reply
    content = list(reply.content)
    own = [b for b in content if b.get("type") in _THINKING_TYPES]
    rest = [b for b in content if b.get("type") not in _THINKING_TYPES]
    if not opens_turn(request.messages) and not interleaved:
        return replace(reply, content=tuple(rest)) if own else reply
    if not rest:
        rest = [{"type": "text", "text": "Done."}]  # rule A24: a reply never ends in thinking
    prompt = request.last_user_text()
    if own:
        head = own
    elif REDACTED_THINKING_TRIGGER in prompt:
        head = [{"type": "redacted_thinking", "data": _plan(rest, "")}]
    else:
        head = [{"type": "thinking", "thinking": _plan(rest, prompt), "signature": ""}]
    return replace(reply, content=(*head, *rest))


def _latest_assistant(messages: Sequence[Mapping[str, Any]]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            return index
    return -1


def check_signatures(body: Mapping[str, Any], signer: ThinkingSigner) -> None:
    """Raise the API's error for the first thinking block this launch did not sign as it is now.

    Runs on a body the validator accepted, only when the request enables thinking.
    """
    if not thinking_on(body.get("thinking")):
        return
    messages = [m for m in body.get("messages") or () if isinstance(m, Mapping)]
    latest = _latest_assistant(messages)
    for m, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        for c, block in enumerate(content):
            if not isinstance(block, Mapping) or block.get("type") not in _THINKING_TYPES:
                continue
            if signer.valid(block):
                continue
            path = f"messages.{m}.content.{c}"
            if m == latest:
                raise RequestValidationError(
                    f"{path}: `thinking` or `redacted_thinking` blocks in the latest assistant message "
                    "cannot be modified. These blocks must remain as they were in the original response.",
                    path=path,
                )
            raise RequestValidationError(f"{path}: Invalid `signature` in `thinking` block", path=path)


def display_omitted(thinking: Mapping[str, Any] | None) -> bool:
    """Whether a request asks for thinking text to be omitted (`display: "omitted"`)."""
    return isinstance(thinking, Mapping) and thinking.get("display") == "omitted"
