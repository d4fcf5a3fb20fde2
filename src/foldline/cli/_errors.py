"""How the CLI words a library error: one line that says what went wrong and what to do next.

The library's errors are precise but speak in library terms ("claude-x: model: gpt-4"). A person at
a terminal needs the endpoint that failed and the flag that fixes it, so the few failures a new user
meets first (nothing listening, unknown model, wrong key) get a sentence of their own here; anything
else keeps the library's message.
"""

from __future__ import annotations

import html
import re

from foldline.errors import (
    FoldlineError,
    ModelConnectionError,
    ModelHTTPError,
    SessionsFolderError,
    StreamCutError,
    TranscriptWriteError,
)

__all__ = ["explain", "web_page_summary"]

_TAG = re.compile(r"<(script|style)\b.*?</\1>|<[^>]*>", re.IGNORECASE | re.DOTALL)
_PAGE_CHARS = 200
"""Characters of a web page's text quoted in an error: enough for its title and first sentence."""


def web_page_summary(body: object) -> str | None:
    """The text of an HTML error page on one line (tags dropped, entities decoded, clipped), or
    None when `body` is not a web page (an API error object, JSON, plain text)."""
    if not isinstance(body, str) or not re.search(
        r"<(!doctype html|html|body|h1|title)\b", body, re.IGNORECASE
    ):
        return None
    text = " ".join(html.unescape(_TAG.sub(" ", body)).split())
    return text if len(text) <= _PAGE_CHARS else text[: _PAGE_CHARS - 1] + "…"


def explain(error: FoldlineError, base_url: str | None = None, *, repl: bool = False) -> str:
    """One line for the terminal; the retry layer's wrapper is looked through to the failure itself.

    `base_url` names the server in the message where the error itself does not. `repl`: the error
    came up in the chat's REPL, where the fix is a slash command (`/model`), not a flag.
    """
    cause = _root(error)
    if isinstance(cause, ModelHTTPError) and (page := web_page_summary(cause.body)) is not None:
        where = f"the server at {base_url}" if base_url else "the server"
        return (
            f"{where} answered HTTP {cause.status} with a web page, not the Messages API ({page}). "
            "Point --base-url (or $ANTHROPIC_BASE_URL) at a server that speaks the Messages API, "
            "e.g. one started with `foldline serve`."
        )
    if isinstance(cause, StreamCutError):
        where = cause.url or base_url or "the model server"
        return (
            f"the model server at {where} answered, then its reply broke off mid-stream: {cause.message}. "
            "The server was reached, so this is no address or key problem: it stopped or closed the "
            "connection while answering (see its log); send the prompt again once it is up."
        )
    if isinstance(cause, ModelConnectionError) and cause.url:
        what = "nothing is listening there" if cause.refused else cause.message
        return (
            f"cannot reach the model server at {cause.url}: {what}. Start a local one with "
            "`foldline serve`, or point --base-url (or $ANTHROPIC_BASE_URL) at a server that speaks "
            "the Messages API."
        )
    if isinstance(cause, ModelHTTPError) and cause.status == 404 and "model" in cause.message:
        fix = "Switch with /model NAME" if repl else "Pass --model with one it serves, e.g. --model"
        return (
            f"the server does not serve the model {cause.model!r} (it answered 404: {cause.message}). "
            f"{fix} claude-sonnet-4-5."
        )
    if isinstance(cause, SessionsFolderError):
        return (
            f"{cause}. foldline keeps sessions in $FOLDLINE_HOME/projects (default ~/.foldline/projects): "
            "pass --sessions-dir DIR, or set $FOLDLINE_HOME, to a folder you can write"
        )
    if isinstance(cause, TranscriptWriteError) and "No space left" in str(cause):
        return f"{cause}. Free some disk space, then continue this session with `foldline chat --continue`"
    if isinstance(cause, ModelHTTPError) and cause.status in (401, 403):
        return (
            f"the server refused the API key (HTTP {cause.status}: {cause.message}). "
            "Pass --api-key or set $ANTHROPIC_API_KEY."
        )
    return str(error)


def _root(error: BaseException) -> BaseException:
    """The innermost foldline error in the cause chain: what actually failed, not who gave up."""
    found = error
    seen = error.__cause__
    while seen is not None:
        if isinstance(seen, FoldlineError):
            found = seen
        seen = seen.__cause__
    return found
