"""How the CLI words a library error: one line that says what went wrong and what to do next.

The library's errors are precise but speak in library terms ("claude-x: model: gpt-4"). A person at
a terminal needs the endpoint that failed and the flag that fixes it, so the few failures a new user
meets first (nothing listening, unknown model, wrong key) get a sentence of their own here; anything
else keeps the library's message.
"""

from __future__ import annotations

from foldline.errors import FoldlineError, ModelConnectionError, ModelHTTPError

__all__ = ["explain"]


def explain(error: FoldlineError) -> str:
    """One line for the terminal; the retry layer's wrapper is looked through to the failure itself."""
    cause = _root(error)
    if isinstance(cause, ModelConnectionError) and cause.url:
        what = "nothing is listening there" if cause.refused else cause.message
        return (
            f"cannot reach the model server at {cause.url}: {what}. Start a local one with "
            "`foldline serve`, or point --base-url (or $ANTHROPIC_BASE_URL) at a server that speaks "
            "the Messages API."
        )
    if isinstance(cause, ModelHTTPError) and cause.status == 404 and "model" in cause.message:
        return (
            f"the server does not serve the model {cause.model!r} (it answered 404: {cause.message}). "
            "Pass --model with one it serves, e.g. --model claude-sonnet-4-5."
        )
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
