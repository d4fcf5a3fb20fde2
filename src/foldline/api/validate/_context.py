"""Semantic rules: the context window (rules A38, A39), and the API's exact texts for them."""

from __future__ import annotations

from collections.abc import Iterator

from foldline.api.validate._errors import _ROOT, _bare
from foldline.api.validate._semantic import _Request
from foldline.errors import RequestValidationError


def _check_context(request: _Request) -> Iterator[RequestValidationError]:
    window, prompt = request.limits.context_window, request.limits.input_tokens
    if window is None or prompt is None:
        return
    max_tokens = request.body["max_tokens"]
    if prompt > window:
        yield _bare(prompt_too_long_message(prompt, window), _ROOT.at("messages"))
    elif prompt + max_tokens > window:
        yield _bare(output_too_long_message(prompt, max_tokens, window), _ROOT.at("max_tokens"))


def prompt_too_long_message(prompt: int, window: int) -> str:
    """The API's exact 400 message (rule 38) for a prompt of `prompt` tokens in a `window`-token context."""
    return f"prompt is too long: {prompt} tokens > {window} maximum"


def output_too_long_message(prompt: int, max_tokens: int, window: int) -> str:
    """The API's exact 400 message (rule 39) when the prompt fits but prompt + `max_tokens` does not."""
    return (
        f"input length and `max_tokens` exceed context limit: {prompt} + {max_tokens} > {window}, "
        "decrease input length or `max_tokens` and try again"
    )
