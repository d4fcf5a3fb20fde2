"""A model's window and output limit, asked of the server that serves it (any model, any window).

Claude's limits come from `Config.model_limits`; any other model's come from the `foldline chat`
flags (`--context-window`, `--max-output-tokens`) or from here. Servers say it in different places,
so each known form is read and the first that gives a window wins:

- `foldline serve`: `GET /v1/models/{id}` with `context_window` and `max_output_tokens` (a foldline
  field, not part of the public Models API);
- the Models API's `max_input_tokens` / `max_tokens` on the same object, where a server has them;
- vLLM and SGLang (OpenAI-compatible `GET /v1/models`): `max_model_len` on the model's entry;
- llama.cpp's server: `meta.n_ctx_train` on the model's entry (the trained window; the server may
  run a smaller `--ctx-size`, which it does not report there).

Nothing here is required: a server that answers none of them leaves the limits as they were, and a
failed lookup is never an error (the chat still runs on the configured or default window).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from foldline._json import loads

__all__ = ["ServedLimits", "limits_from_entry", "server_limits"]


@dataclass(frozen=True, slots=True)
class ServedLimits:
    """What a server reported for one model; None where it said nothing."""

    context_window: int | None
    max_output: int | None


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def limits_from_entry(entry: Mapping[str, Any]) -> ServedLimits:
    """The limits one model object states, in any of the known forms (see the module docstring)."""
    meta = entry.get("meta")
    window = (
        _positive(entry.get("context_window"))
        or _positive(entry.get("max_input_tokens"))
        or _positive(entry.get("max_model_len"))
        or (_positive(meta.get("n_ctx_train")) if isinstance(meta, Mapping) else None)
    )
    output = _positive(entry.get("max_output_tokens")) or _positive(entry.get("max_tokens"))
    return ServedLimits(window, output)


def _get(client: httpx2.Client, url: str) -> Any:
    try:
        response = client.get(url)
    except httpx2.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        return loads(response.content)
    except ValueError:
        return None


def server_limits(
    base_url: str, model: str, *, api_key: str | None = None, timeout: float = 10.0
) -> ServedLimits | None:
    """The limits the server at `base_url` reports for `model`, or None when it reports none."""
    root = base_url.rstrip("/")
    root = root[: -len("/v1")] if root.endswith("/v1") else root
    headers = {"x-api-key": api_key, "authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx2.Client(timeout=timeout, headers=headers) as client:
        one = _get(client, f"{root}/v1/models/{model}")
        if isinstance(one, Mapping):
            found = limits_from_entry(one)
            if found.context_window is not None:
                return found
        listing = _get(client, f"{root}/v1/models")
    entries = listing.get("data") if isinstance(listing, Mapping) else None
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, Mapping) and entry.get("id") == model:
            found = limits_from_entry(entry)
            if found.context_window is not None:
                return found
    return None
