"""What third-party Messages API servers mean by their error answers (llama.cpp, vLLM, SGLang).

`http_error` asks here before it falls back to the API's own wording, so a window overflow from
any of these servers becomes the same `PromptTooLongAPIError` (or `OutputRoomError`) Anthropic's
"prompt is too long" does, and recovery compacts the same way. Each form is the server's own
documented body or message text (docs/deploy.md lists them and which were seen from a running
server; vLLM's and SGLang's were read from their sources, not run here):

- llama.cpp `llama-server`: `400 {"error": {"type": "exceed_context_size_error", "message":
  "request (N tokens) exceeds the available context size (C tokens), try increasing it",
  "n_prompt_tokens": N, "n_ctx": C}}`; no structured fields in older builds, only the message.
- vLLM, three wordings over its versions, all `400` with the type `BadRequestError`:
  "This model's maximum context length is C tokens. However, you requested T tokens (N in the
  messages, M in the completion)", "... However, you requested M output tokens and your prompt
  contains at least N input tokens, for a total of at least T tokens", and "You passed N input
  tokens and requested M output tokens. However, the model's context length is only C tokens".
- SGLang: "The input (N tokens) is longer than the model's context length (C tokens)." and
  "Requested token count exceeds the model's maximum context length of C tokens. You requested a
  total of T tokens: N tokens from the input messages and M tokens for the completion."

A refusal that names the output (M) is an `OutputRoomError` when the prompt alone fits (N < C),
so the reply is shrunk rather than the conversation compacted; otherwise the prompt is too long.

A model's output the server could not parse into a tool call (llama.cpp: `500 "The model produced
output that does not match the expected peg-native format"`) is `BadOutputError`: sampling again
may well produce a valid call, so it is retried like any 5xx, and said for what it is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ContextRefusal", "bad_output", "context_refusal", "error_object", "window_refused"]


@dataclass(frozen=True, slots=True)
class ContextRefusal:
    """The numbers a server's window refusal names."""

    prompt_tokens: int
    limit: int
    output_tokens: int | None = None
    """The `max_tokens` the server counted, when it named it (then the prompt may fit alone)."""

    @property
    def prompt_fits(self) -> bool:
        """Whether the prompt alone fits and only the output room is missing."""
        return self.output_tokens is not None and self.prompt_tokens < self.limit


_N = r"(?P<{}>\d[\d,]*)"


def _pattern(text: str) -> re.Pattern[str]:
    """`text` with `{prompt}`, `{output}` and `{limit}` standing for the numbers."""
    return re.compile(
        text.format(prompt=_N.format("prompt"), output=_N.format("output"), limit=_N.format("limit")),
        re.IGNORECASE,
    )


_REFUSALS = (
    # llama.cpp
    _pattern(r"request \({prompt} tokens\) exceeds the available context size \({limit} tokens\)"),
    # vLLM, newest first
    _pattern(
        r"You passed {prompt} input tokens and requested {output} output tokens\. "
        r"However, the model's context length is only {limit} tokens"
    ),
    _pattern(
        r"maximum context length is {limit} tokens\. However, you requested {output} output tokens "
        r"and your prompt contains at least {prompt} input tokens"
    ),
    _pattern(
        r"maximum context length is {limit} tokens\. However, you requested \d[\d,]* tokens "
        r"\({prompt} in the messages, {output} in the completion\)"
    ),
    _pattern(
        r"maximum context length is {limit} tokens\. However, "
        r"(?:you requested|your messages resulted in|your prompt contains at least) "
        r"{prompt} (?:input )?tokens"
    ),
    # SGLang
    _pattern(r"The input \({prompt} tokens\) is longer than the model's context length \({limit} tokens\)"),
    _pattern(
        r"exceeds the model's maximum context length of {limit} tokens\. You requested a total of "
        r"\d[\d,]* tokens: {prompt} tokens from the input messages and {output} tokens for the completion"
    ),
)

_BAD_OUTPUT = re.compile(
    r"does not match the expected [\w-]+ format|failed to parse (?:tool call|the model output)", re.IGNORECASE
)


def error_object(body: object) -> Mapping[str, object]:
    """The `error` object of an error body (`{"error": {...}}`, with or without `"type": "error"`)."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping):
            return inner
    return {}


def _number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def context_refusal(message: str, body: object) -> ContextRefusal | None:
    """The window refusal `message` (and `body`) state, or None when it is no window refusal.

    llama.cpp's structured `n_prompt_tokens` / `n_ctx` win over its text; a refusal of the
    window that gives no numbers (`exceed_context_size_error` alone) is one with unknown numbers.
    """
    detail = error_object(body)
    prompt, limit = _number(detail.get("n_prompt_tokens")), _number(detail.get("n_ctx"))
    if prompt is not None and limit is not None:
        return ContextRefusal(prompt, limit)
    for pattern in _REFUSALS:
        if found := pattern.search(message):
            numbers = {k: int(v.replace(",", "")) for k, v in found.groupdict().items() if v is not None}
            return ContextRefusal(numbers["prompt"], numbers["limit"], numbers.get("output"))
    return None


def window_refused(body: object, error_type: str) -> bool:
    """Whether the answer's error type refuses the window, even where it names no numbers."""
    kind = error_type or str(error_object(body).get("type") or "")
    return kind in {"exceed_context_size_error", "context_length_exceeded"}


def bad_output(message: str) -> bool:
    """Whether the server says the model's output could not be parsed (a botched tool call)."""
    return _BAD_OUTPUT.search(message) is not None
