"""The strict Messages API request validator (R8.2, R4.1.1).

Owns `ValidationLimits`, `find_errors()`, `validate_request()`, `validate_window()` and
`request_too_large()`: given a request body as JSON values, report every rule of design.md §A
(A1-A45) that the body breaks, each as a `RequestValidationError` carrying the API's own message
text, status and error type.

Invariants:
- Pure: no I/O, no mutation of the body, same input -> same errors in the same order.
- Order is the order the API reports in: request bytes (413, answered before any parsing), then the
  schema ("shape": required fields, types, enums, patterns, extra inputs), then the semantic rules.
  A body with shape errors gets only those: the API's schema layer stops before its semantic checks,
  and the semantic checks may then assume a well-formed body. Within the semantic rules the order
  is `_SEMANTIC_CHECKS` (parameters, cache_control, list structure, text, tool pairing, thinking,
  media, context window): the API's own order between families is not public, except that
  cache_control errors are seen before the empty-text error a bad breakpoint also causes.
- `RequestValidationError.message` is the text the API sends, with the API's prefix (its pydantic
  location carries discriminator tags: `messages.1.content.1.tool_use.id`); `.path` is the plain JSON
  path of the offending element (`messages.1.content.1.id`), `""` when the whole body is at fault.
- Stricter than today's first-party API where another provider or an older API version rejects:
  consecutive same-role messages (rule A3) and an assistant-first list (rule A2) are errors; rule A24
  (no trailing thinking block) applies to every assistant message, not only the last; empty and
  whitespace-only system text blocks are rejected like message text blocks.
- `cache_edits` user blocks (R3.2.3) are accepted and invisible to the pairing and turn rules:
  the server strips them before the model sees the prompt.

Deliberate approximations (a body alone cannot tell more):
- Rule A21 (thinking blocks unmodified) and A22 (signature validity) reduce to "signature is a
  non-empty string".
- PDF pages are counted as the occurrences of `/Type /Page` (not `/Pages`) in the decoded bytes,
  at least 1 per document; PDFs whose page objects sit in compressed object streams count as 1.
  Non-PDF documents (text, content, URL or file sources) count as 1 page each.
- Image size (rule A29) is measured on the base64 text, which is what the 5 MB limit applies to.
- Rules A6/A7 (empty / whitespace-only text) apply to message-level text blocks; inside `tool_result`
  content only the empty-text rule applies (tool output that is just a newline is legal).
- Messages the API has no public text for (rule A16's prefix, `top_p` with thinking, wrong block type
  for a role) follow the neighbouring rules' wording and are marked where they are built.

The package follows those layers: `_limits` (`ValidationLimits`), `_errors` (locations), `_bytes`
(rule A41), `_shape` (the schema layer), `_semantic` (`_Request` and the general rules), one module
per rule family (`_pairing`, `_thinking`, `_media`, `_cache_control`, `_context`) and `_find`
(`find_errors`, `validate_request`, the order of the checks). Import from `foldline.api.validate`;
the submodules are private.
"""

from __future__ import annotations

from foldline.api.validate._bytes import request_too_large
from foldline.api.validate._context import output_too_long_message, prompt_too_long_message
from foldline.api.validate._find import find_errors, validate_request, validate_window
from foldline.api.validate._limits import MIN_THINKING_BUDGET as MIN_THINKING_BUDGET
from foldline.api.validate._limits import ValidationLimits

__all__ = [
    "ValidationLimits",
    "find_errors",
    "output_too_long_message",
    "prompt_too_long_message",
    "request_too_large",
    "validate_request",
    "validate_window",
]
