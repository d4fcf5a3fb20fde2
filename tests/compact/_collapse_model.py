"""A small in-process model for Context Collapse tests: big turns with planted facts, span summaries.

`CollapseModel.answer` is a `FunctionProvider` function. A main-loop request is answered with a
short acknowledgement (or a Read call when the prompt asks for one); a ctx-agent request (its last
user message is a `span_prompt`) is answered with a well-formed span summary that keeps every
`FACT-n = value` found between the span's two `[id:...]` tags (outside already collapsed context),
optionally after waiting on `gate`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from foldline._json import dumps
from foldline.api.params import build_request
from foldline.compact.prompts import SPAN_SECTIONS
from foldline.config import AutoCompactConfig, CollapseConfig, Config, RetryConfig
from foldline.engine import DEFAULT_SYSTEM_PROMPT
from foldline.testing import FunctionProvider
from foldline.timeline import AnyRecord
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

WORDS = 3_000


def collapse_config(**collapse: Any) -> Config:
    """The rigs' config: span summaries (R3.3.1; record folds are the default, and a test asks for
    them with `folds="record"`). Folds commit only at the 90% line unless a test asks for R3.3.7's rule
    (`commit_when_it_pays=True`): the threshold tests place the context against that line."""
    collapse = {"commit_when_it_pays": False, "folds": "summary", "span_target_tokens": 6_000, **collapse}
    return Config(
        model="claude-sonnet-4-5",
        context_window=40_000,
        output_reserve=4_000,
        max_output_tokens=1_024,
        autocompact=AutoCompactConfig(blocking_margin=500),
        collapse=CollapseConfig(**collapse),
        retry=RetryConfig(base_backoff_s=0.01, max_backoff_s=0.05),
    )


def request_for(records: Sequence[AnyRecord]) -> bytes:
    """The body a session over `records` sends next with `collapse_config()` and the default tools."""
    config = collapse_config()
    plan = build_request(
        records,
        config,
        DEFAULT_SYSTEM_PROMPT,
        tool_specs(default_tools()),
        FunctionProvider(lambda body, betas: {"text": ""}).capabilities,
        max_tokens=config.max_output_tokens,
    )
    return dumps(plan.body)


SPAN_MARK = "Summarize only the finished part"
FACT = re.compile(r"FACT-\d+ = \w+")
COLLAPSED = re.compile(r"<collapsed-context id=\w+>.*?</collapsed-context>", re.DOTALL)
TAGS = re.compile(r"\[id:(\w+)\] and ends at the message tagged \[id:(\w+)\]")


def prompt(n: int, words: int) -> str:
    """Turn `n`'s prompt: one planted fact and `words` four-character words (about one token each)."""
    return f"Turn {n}: remember FACT-{n} = value{n}. " + " ".join(["abc"] * words)


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or ():
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else str(inner))
    return "\n".join(parts)


def summary_for(body: dict[str, Any]) -> str:
    """The span summary a careful model writes: the facts between the span's tags."""
    messages = body["messages"]
    instruction = _text(messages[-1])
    match = TAGS.search(instruction)
    assert match is not None, instruction
    first, last = f"[id:{match.group(1)}]", f"[id:{match.group(2)}]"
    inside, facts = False, []
    for message in messages[:-1]:
        # Folded context already summarized is not summarized again (it shares an API message with
        # the prompt after it, so it sits inside the span's first tagged message).
        text = COLLAPSED.sub("", _text(message))
        if first in text:
            inside = True
        if inside:
            facts.extend(FACT.findall(text))
        if last in text:
            break
    body_text = {"Task": "earlier turns", "Outcome": "acknowledged", "Facts to Keep": "; ".join(facts)}
    return "\n\n".join(f"## {title}\n{body_text[title]}" for title in SPAN_SECTIONS)


@dataclass
class CollapseModel:
    """Answers main requests and span requests; `spans` counts span requests, `gate` holds them."""

    gate: asyncio.Event | None = None
    malformed: bool = False
    read_path: str = "notes.txt"
    """The file a prompt saying "please read notes.txt" makes the model Read."""
    main: list[dict[str, Any]] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)

    async def answer(self, body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        last = _text(body["messages"][-1])
        if SPAN_MARK in last:
            self.spans.append(body)
            if self.gate is not None:
                await self.gate.wait()
            if self.malformed:
                return {"text": "I summarized it."}
            return {"text": summary_for(body)}
        self.main.append(body)
        if "please read notes.txt" in last:
            return {"tool_calls": [{"name": "Read", "input": {"file_path": self.read_path}}]}
        return {"text": "Noted."}
