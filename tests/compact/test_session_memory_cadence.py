"""When the session memory is refreshed (R3.4.10): the first extraction at `init_tokens` of context,
then each update once `update_tokens` AND `update_tool_calls` have accrued since what it covers."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.compact.test_autocompact import conversation

from foldline.compact.session_memory import MemoryState, SessionMemory
from foldline.config import AutoCompactConfig, Config, SessionMemoryConfig
from foldline.projection import context_tokens_of, project_view
from foldline.testing import ScriptedProvider
from foldline.timeline import AnyRecord, AssistantEntry, api_filter
from foldline.tokens import estimate_entry, padded

RECORDS = conversation(6, words=100)  # six rounds: each a reply with one tool call, a result, a prompt


def _memory(tmp_path: Path, **cadence: int | bool) -> SessionMemory:
    config = Config(autocompact=AutoCompactConfig(memory=SessionMemoryConfig(**cadence)))  # type: ignore[arg-type]
    return SessionMemory(tmp_path / "session-memory.md", ScriptedProvider([]), "sys", [], config)


def _since(records: list[AnyRecord], covered: str) -> tuple[int, int]:
    """(padded tokens, tool calls) of the API view after the entry `covered`."""
    view = api_filter(project_view(records))
    after = view[[e.uuid for e in view].index(covered) + 1 :]
    replies = [e for e in after if isinstance(e, AssistantEntry)]
    calls = sum(1 for e in replies for b in e.message.content if b.get("type") == "tool_use")
    return padded(sum(estimate_entry(e) for e in after)), calls


def test_the_first_extraction_waits_for_init_tokens(tmp_path: Path) -> None:
    context = context_tokens_of(RECORDS)
    assert _memory(tmp_path, init_tokens=context).due(RECORDS)
    assert not _memory(tmp_path, init_tokens=context + 1).due(RECORDS)


def test_nothing_is_due_when_memory_is_off(tmp_path: Path) -> None:
    assert not _memory(tmp_path, enabled=False, init_tokens=0).due(RECORDS)


@pytest.mark.parametrize("rounds_covered", [1, 3])
def test_an_update_needs_both_the_tokens_and_the_tool_calls(tmp_path: Path, rounds_covered: int) -> None:
    covered = RECORDS[3 * rounds_covered].uuid  # the prompt that ends round `rounds_covered`
    tokens, calls = _since(RECORDS, covered)
    assert calls == 6 - rounds_covered
    for tokens_needed, calls_needed, due in [
        (tokens, calls, True),
        (tokens + 1, calls, False),  # the tool calls alone are not enough
        (tokens, calls + 1, False),  # nor the tokens alone
        (0, 0, True),
    ]:
        memory = _memory(
            tmp_path, init_tokens=10**9, update_tokens=tokens_needed, update_tool_calls=calls_needed
        )
        memory.save(MemoryState(covered, "## Current state\nworking"))
        assert memory.due(RECORDS) is due, (tokens_needed, calls_needed)
