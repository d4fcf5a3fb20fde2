"""Every exception foldline raises, split by whose fault it is.

```
FoldlineError
├── UserError                       caller misuse: bad arguments, bad configuration
│   └── RequestValidationError      a request body the Messages API would reject (status, type, path)
├── TranscriptError                 a session file we cannot read or write
│   ├── TranscriptLockedError       another live process holds the session
│   ├── TranscriptWriteError        write/fsync failed (disk full, EIO); the writer is poisoned
│   └── TranscriptFormatError       not a transcript at all (bad header, unknown format version)
├── TrustStoreError                 the confirmed-settings store cannot be written (a read-only home)
├── ModelAPIError                   the model endpoint failed
│   ├── ModelHTTPError              ... with an HTTP status and error body
│   │   ├── PromptTooLongAPIError   the prompt does not fit the window (with the gap, when given)
│   │   ├── OutputRoomError         the prompt fits, but not with the max_tokens asked for
│   │   ├── OverloadedError         529 / 503 / overloaded_error: try again later
│   │   └── BadOutputError          the server could not parse the model's output (a botched tool call)
│   ├── ModelConnectionError        no answer: refused, dropped, or an idle stream
│   │   └── StreamCutError          the server answered, then the reply broke off mid-stream
│   └── RetriesExhaustedError       the retry layer gave up
├── GenerationCancelled             a local model's generation stopped: its client left, or the server stops
├── UnexpectedModelBehavior         the model returned something we cannot use
└── ToolError                       a tool call cannot be carried out (becomes an is_error result)
```
"""

from __future__ import annotations

__all__ = [
    "BadOutputError",
    "ClientRunError",
    "ClientUnavailableError",
    "FoldlineError",
    "GenerationCancelled",
    "ModelAPIError",
    "ModelConnectionError",
    "ModelHTTPError",
    "OutputRoomError",
    "OverloadedError",
    "PromptTooLongAPIError",
    "PromptTooLongError",
    "RequestValidationError",
    "RetriesExhaustedError",
    "SessionsFolderError",
    "StreamCutError",
    "ToolError",
    "TranscriptError",
    "TranscriptFormatError",
    "TranscriptLockedError",
    "TranscriptWriteError",
    "TrustStoreError",
    "UnexpectedModelBehavior",
    "UserError",
]


class FoldlineError(Exception):
    """Base class of every foldline error."""


class UserError(FoldlineError):
    """The caller asked for something that cannot be done as asked."""


class RequestValidationError(UserError):
    """A Messages API request body breaks one of the API's validation rules.

    Carries what the real API would answer: `status` (400, 413, ...), `error_type`
    (`invalid_request_error`, `request_too_large`), the API's `message` text, and the JSON
    `path` of the offending element (`messages.3.content.1`), empty when the whole body is at fault.
    """

    def __init__(
        self, message: str, *, path: str = "", status: int = 400, error_type: str = "invalid_request_error"
    ):
        super().__init__(message)
        self.message = message
        self.path = path
        self.status = status
        self.error_type = error_type


class TranscriptError(FoldlineError):
    """A session transcript could not be read or written."""


class TranscriptLockedError(TranscriptError):
    """Another live process is appending to this session."""

    def __init__(self, path: str, holder_pid: int | None):
        who = f"process {holder_pid}" if holder_pid else "another process"
        super().__init__(
            f"{path}: session is open in {who}; close it there, or resume a fork of it "
            "(a dead holder's lock is released automatically)"
        )
        self.path = path
        self.holder_pid = holder_pid


class TranscriptWriteError(TranscriptError):
    """Appending or syncing failed; nothing further is written through this writer."""


class SessionsFolderError(TranscriptWriteError):
    """The folder a new transcript goes in cannot be created (a read-only home, a file in the way)."""

    def __init__(self, folder: str, reason: str) -> None:
        super().__init__(f"cannot create the sessions folder {folder}: {reason}")
        self.folder = folder


class TranscriptFormatError(TranscriptError):
    """The file is not a transcript foldline can read (bad header, newer format version)."""


class TrustStoreError(FoldlineError):
    """The trust store (`containment.trust`) cannot be written: a read-only home, a file in the way,
    a full disk. Nothing was confirmed; the settings files stay ignored."""

    def __init__(self, store: str, reason: str) -> None:
        super().__init__(
            f"cannot record the confirmation in {store}: {reason}. Nothing was trusted, so the settings "
            "files stay ignored; make that folder writable (or set $HOME to a home you can write) and "
            "run `foldline trust` again"
        )
        self.store = store


class ModelAPIError(FoldlineError):
    """The model endpoint failed to answer usefully."""

    def __init__(self, model: str, message: str):
        super().__init__(f"{model}: {message}")
        self.model = model
        self.message = message


class ModelHTTPError(ModelAPIError):
    """The model endpoint answered with an HTTP error status, or an `error` event inside a 200 stream.

    `error_type` is the API's `error.type` (`overloaded_error`, `rate_limit_error`, ...);
    `retry_after` is the server's `retry-after` in seconds, when it sent one; `in_stream` is true
    for an `error` event that arrived after a 200 status.
    """

    def __init__(
        self,
        model: str,
        status: int,
        body: object,
        message: str = "",
        *,
        error_type: str = "",
        retry_after: float | None = None,
        in_stream: bool = False,
    ):
        super().__init__(model, message or f"HTTP {status}: {body!r}")
        self.status = status
        self.body = body
        self.error_type = error_type
        self.retry_after = retry_after
        self.in_stream = in_stream

    @property
    def transient(self) -> bool:
        """Whether retrying the same request may succeed (R5.6)."""
        if self.in_stream:
            # `unavailable_error` and `server_error` are llama.cpp's words for the same two states
            kinds = {"overloaded_error", "api_error", "rate_limit_error", "unavailable_error", "server_error"}
            return self.error_type in kinds
        # 501 Not Implemented and 505 are what the server is, not how it is doing: a plain web
        # server answers every POST with 501, and asking again only prints its page again.
        return self.status in {408, 409, 429, 529} or (self.status >= 500 and self.status not in {501, 505})

    @property
    def prompt_too_long(self) -> bool:
        """The API said the prompt does not fit the context window (R5.4)."""
        return isinstance(self, PromptTooLongAPIError)


class PromptTooLongAPIError(ModelHTTPError):
    """The API refused the prompt as larger than the context window (a 400 or 413).

    `prompt_tokens` and `limit` are the numbers the API named, when it named them; `gap` is how many
    tokens must go for the prompt to fit (None when unknown: then recovery must guess).
    """

    prompt_tokens: int | None = None
    limit: int | None = None

    @property
    def gap(self) -> int | None:
        """Tokens over the limit, when the API said both numbers."""
        if self.prompt_tokens is None or self.limit is None:
            return None
        return self.prompt_tokens - self.limit


class OutputRoomError(ModelHTTPError):
    """The prompt fits the window, but the prompt plus `max_tokens` does not."""

    prompt_tokens: int = 0
    max_tokens: int = 0
    limit: int = 0

    @property
    def room(self) -> int:
        """The largest `max_tokens` that would fit beside this prompt."""
        return self.limit - self.prompt_tokens


class OverloadedError(ModelHTTPError):
    """The API is overloaded (529, a 503, or an `overloaded_error` / `unavailable_error`): transient
    by nature."""


class BadOutputError(ModelHTTPError):
    """The server refused its own model's output: it could not parse it into the tool call it
    expected (llama.cpp's 500 "does not match the expected peg-native format"). A 5xx, so it is
    retried: sampling again usually gives a call the server can parse."""


class ModelConnectionError(ModelAPIError):
    """The connection failed or dropped, or the stream produced no event for too long (R5.7).

    `refused` is true when nothing was listening: retrying with backoff will not start a server.
    `url` is the endpoint that could not be reached, when the provider knows it.
    """

    def __init__(self, model: str, message: str, *, refused: bool = False, url: str = ""):
        super().__init__(model, message)
        self.refused = refused
        self.url = url


class StreamCutError(ModelConnectionError):
    """The connection was made and the server began its answer (status 200), then the stream broke
    off before the message ended: the server died or closed it mid-reply. Retried like any drop;
    told apart so nobody is sent looking for a server that is not running."""


class RetriesExhaustedError(ModelAPIError):
    """The retry layer gave up: too many attempts this turn, or a `retry-after` beyond the cap.

    Deliberately not transient: no layer above retries it again (design.md F11).
    """


class PromptTooLongError(FoldlineError):
    """The conversation does not fit the context window and recovery could not shrink it (R5.4)."""


class GenerationCancelled(FoldlineError):
    """A local model stopped generating because nobody waits for the answer any more (the client
    disconnected, or the server is shutting down); `foldline serve` raises it between prefill chunks
    and catches it itself, so it never reaches a client."""


class UnexpectedModelBehavior(FoldlineError):
    """The model returned something the pipeline cannot use (an empty summary, say)."""


class ToolError(FoldlineError):
    """A tool call the model made cannot be carried out (missing file, ambiguous edit, bad input).

    Tools raise it internally; `Tool.run` turns it into an `is_error` tool result whose text is the
    message, so the model reads the reason and can correct itself.
    """


class ClientUnavailableError(FoldlineError):
    """A pinned real client (`foldline.interop`) or server (`foldline.llama_server`) cannot be had on
    this machine: no npm, the registry unreachable, or no build for this platform. The one reason a
    run of a real client or server is skipped."""


class ClientRunError(FoldlineError):
    """A real client (`foldline.interop`) or a server it talks to (`foldline.llama_server`)
    misbehaved: an install that failed, a server that did not start, a turn that printed no result."""
