"""The simulated model behind `foldline serve --backend simulated` (design.md §8, R8.7).

- `model`: `SimulatedBackend`, a deterministic coding model that acts only on the request.
- `summary`: extractive answers to compaction instructions.
- `profiles`: the generated workspace and the user prompts of each profile, planted facts included.
"""

from __future__ import annotations

from foldline.server.simulated.model import SimulatedBackend, draw_rounds, think_time
from foldline.server.simulated.profiles import (
    PROFILES,
    Fact,
    facts_for,
    generate_workspace,
    output_facts_for,
    planted_facts,
    user_prompts,
)

__all__ = [
    "PROFILES",
    "Fact",
    "SimulatedBackend",
    "draw_rounds",
    "facts_for",
    "generate_workspace",
    "output_facts_for",
    "planted_facts",
    "think_time",
    "user_prompts",
]
