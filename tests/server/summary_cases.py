"""Summary requests whose replies at full fidelity are pinned by digest: the conversations of
`test_simulated_summary` under every wording, one past the cap of kept statements, and one that
ends inside a turn whose prompt states a fact (its summary ends with the progress line).

Uses only what predates `SimulatedConfig.summary_fidelity`, so the digest can be recomputed from an
older checkout: `PYTHONPATH=<old>/src:. python -c "from tests.server.summary_cases import digest;
print(digest())"`.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tests.server.test_simulated_summary import BARE, OUTPUT_FACTS, USER_FACTS, WORDINGS, _conversation

from foldline.compact.prompts import summary_prompt
from foldline.server.backend import BackendRequest
from foldline.server.simulated import SimulatedBackend

MODEL = "claude-sonnet-4-5"


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def in_progress() -> list[dict[str, Any]]:
    """A turn whose prompt notes a fact, one tool round done, no answer yet."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "calc.py"}}
    return [
        _user("Note for later: the staging port is 6543. Fix the parser in calc.py, please."),
        {"role": "assistant", "content": [{"type": "text", "text": "Reading it."}, call]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "1\tdef parse(row):\n2\t    return row",
                }
            ],
        },
    ]


def cases() -> list[tuple[list[dict[str, Any]], str]]:
    """(conversation, instruction) pairs."""
    plain = _conversation(USER_FACTS, OUTPUT_FACTS)
    many = _conversation([(f"port {n}", str(1000 + n)) for n in range(90)], [("output seed 1", "777")])
    out = [(plain, wording) for wording in WORDINGS.values()]
    out += [(many, summary_prompt()), (many, BARE)]
    out += [(in_progress(), summary_prompt()), (in_progress(), BARE)]
    return out


def summaries(backend: SimulatedBackend) -> list[str]:
    """`backend`'s reply text to each case."""
    texts = []
    for messages, instruction in cases():
        request = BackendRequest(
            model=MODEL, messages=[*messages, _user(instruction)], tools=[], request_key="k"
        )
        texts.append("".join(str(b.get("text", "")) for b in backend.reply(request).content))
    return texts


def digest(backend: SimulatedBackend | None = None) -> str:
    """SHA-256 of every case's reply, in order."""
    joined = "\0".join(summaries(backend or SimulatedBackend(seed=1)))
    return hashlib.sha256(joined.encode()).hexdigest()
