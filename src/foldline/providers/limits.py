"""A model's window and output limit, asked of the server that serves it (any model, any window).

Claude's limits come from `Config.model_limits`; any other model's come from the `foldline chat`
flags (`--context-window`, `--max-output-tokens`) or from here. Servers say it in different places,
so each known form is read and the first that gives a window wins:

- `foldline serve`: `GET /v1/models/{id}` with `context_window` and `max_output_tokens` (a foldline
  field, not part of the public Models API);
- the Models API's `max_input_tokens` / `max_tokens` on the same object, where a server has them;
- vLLM and SGLang (OpenAI-compatible `GET /v1/models`): `max_model_len` on the model's entry;
- llama.cpp's server: `GET /props` with the running window, `default_generation_settings.n_ctx`
  (or a top-level `n_ctx`): its `--ctx-size`, which is what it refuses beyond. It serves one model
  whatever its `--alias`, so this is asked before the model lists; `meta.n_ctx_train` on its
  `/v1/models` entry is only the trained window, the last resort. The same answer says whether its
  chat template renders tools (`template_drops_tools`).

A server that serves one model answers for it whatever name foldline asks by, so when the listing
has exactly one entry, that entry's limits are taken even if its id differs (a vLLM
`--served-model-name`, a llama.cpp GGUF path).

Nothing here is required: a server that answers none of them leaves the limits as they were, and a
failed lookup is never an error (the chat still runs on the configured or default window).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx2

from foldline._json import loads
from foldline.api.validate import MIN_THINKING_BUDGET
from foldline.config import Config
from foldline.errors import UserError

__all__ = [
    "ServedLimits",
    "fit_thinking",
    "limits_from_entry",
    "running_window",
    "server_limits",
    "template_drops_tools",
]


@dataclass(frozen=True, slots=True)
class ServedLimits:
    """What a server reported for one model; None where it said nothing."""

    context_window: int | None
    max_output: int | None
    drops_tools: bool = False
    """Its chat template has no place for tools (llama.cpp's `/props`): `Config.tools_in_prompt`."""


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


def template_drops_tools(props: object) -> bool:
    """llama.cpp's `GET /props` says its chat template renders no tools: `chat_template_caps` with
    `supports_tools` false (an object, or in the pinned build its Python repr, `'supports_tools': False`)."""
    caps = props.get("chat_template_caps") if isinstance(props, Mapping) else None
    if isinstance(caps, Mapping):
        return caps.get("supports_tools") is False
    return isinstance(caps, str) and "'supports_tools': False" in caps


def running_window(props: object) -> int | None:
    """The window a llama.cpp server runs with, from its `GET /props` answer (None if not one)."""
    if not isinstance(props, Mapping):
        return None
    settings = props.get("default_generation_settings")
    nested = _positive(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    return nested or _positive(props.get("n_ctx"))


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
        props = _get(client, f"{root}/props")
        if (window := running_window(props)) is not None:
            return ServedLimits(window, None, template_drops_tools(props))
        listing = _get(client, f"{root}/v1/models")
    entries = listing.get("data") if isinstance(listing, Mapping) else None
    models = [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []
    named = [e for e in models if e.get("id") == model]
    for entry in named or (models if len(models) == 1 else []):
        found = limits_from_entry(entry)
        if found.context_window is not None:
            return found
    return None


def fit_thinking(config: Config) -> Config:
    """`config` with its thinking budget fitted to the window it runs on.

    A budget must be at least `MIN_THINKING_BUDGET` and below `max_tokens` (the API's rule), in
    the main loop's requests and in compaction's alike. On a window design.md's numbers are tuned
    for it already is; on a small one the reply's room is scaled down with the window (819 tokens
    of 8K), below any budget. There the budget is scaled the same way (never below the minimum)
    and the reply's room grows to hold it plus the usual answer, provided the prompt keeps at
    least half the window.

    Raises:
        UserError: the window cannot hold the smallest budget, an answer and half a window of prompt.
    """
    budget = config.thinking_budget_tokens
    if budget is None or not config.below_reference:
        return config
    if budget < config.output_tokens and budget < config.summary_tokens:
        return config
    fitted = max(MIN_THINKING_BUDGET, min(budget, config.scaled(budget)))
    room = fitted + min(config.output_tokens, config.summary_tokens)
    if room > config.window // 2 or room > config.limits.max_output:
        raise UserError(
            f"--thinking does not fit a {config.window:,}-token window: the smallest thinking budget "
            f"({MIN_THINKING_BUDGET:,} tokens) and an answer need {room:,} tokens of output, more than "
            f"half the window (or the model's output limit, {config.limits.max_output:,}); "
            "use a model with a larger window, or --no-thinking"
        )
    # the summary's room is the reserve, and compaction's requests carry the budget too
    reference = config.reference_window or config.window
    summary = -(-room * reference // config.window)  # scaled back down, it gives `room` again
    return replace(
        config,
        thinking_budget_tokens=fitted,
        max_output_tokens=room,
        output_reserve=room,
        autocompact=replace(config.autocompact, summary_max_tokens=summary),
    )
