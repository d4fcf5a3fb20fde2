"""`foldline serve`: a local server that speaks the Anthropic Messages API (design.md §8).

Modules, one concern each:

- `tokenizer`: the deterministic tokenizer every count comes from.
- `caching`: flattening (tools -> system -> messages), the prompt cache, usage billing, cache_edits.
- `backend`: the scripted backend and scenario files.
- `thinking`: thinking blocks in replies, their per-launch signatures, and the check on return.
- `context_edits`: the request's `context_management` edits, applied before the model sees it.
- `faults`: fault plans (`--faults`).
- `sse`: a finished message as the API's SSE event sequence.
- `config`: `ServerConfig`, every number the server uses.
- `guard`: Host, Origin, Content-Type and the body cap, in front of every route; needs the extra.
- `app`: the Starlette app (`create_app`); needs the `server` extra.
- `testing`: `run_server(app)`, the real uvicorn on a loopback port for tests; needs the extra.

This package imports neither starlette nor uvicorn, so the names below work without the extra.
Format details (scenario files, the fault grammar, the tokenizer rule) are in docs/server.md.
"""

from __future__ import annotations

from foldline.server.backend import Backend, BackendRequest, Predicate, Reply, ScriptedBackend, load_scenario
from foldline.server.caching import CACHE_EDITS_BETA, PromptCache
from foldline.server.config import ServerConfig
from foldline.server.faults import Fault, FaultPlan, FaultRule, parse_faults

__all__ = [
    "CACHE_EDITS_BETA",
    "Backend",
    "BackendRequest",
    "Fault",
    "FaultPlan",
    "FaultRule",
    "Predicate",
    "PromptCache",
    "Reply",
    "ScriptedBackend",
    "ServerConfig",
    "load_scenario",
    "parse_faults",
]
