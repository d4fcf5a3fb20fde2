"""R3.2.5 as a property: a provider without cache_edits never sees the bytes it already cached change
while its cache is warm. Every request's messages, with the moving `cache_control` marker taken out,
extend the previous request's as a prefix, over generated sessions of tool calls of random sizes and
idle gaps under an hour, with Snip on and off. Microcompact's old results pile up well past the
cached path's trigger; without cache_edits it must leave them alone until the cache has expired.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foldline._json import dumps
from foldline.config import Config
from foldline.engine import QueryEngine
from foldline.providers.base import Capabilities
from foldline.testing import ScriptedProvider
from foldline.timeline import ResultsCleared
from foldline.tools import default_tools
from foldline.transcript import open_session

MODEL = "claude-sonnet-4-5"


@dataclass
class Clock:
    offset: float = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def _strip(value: Any) -> Any:
    """The value without any `cache_control` key: the rolling breakpoint moves by design (R4.2)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def first_rewrite(bodies: Sequence[dict[str, Any]]) -> int | None:
    """The index of the first request that changed what an earlier one sent, or None."""
    for i in range(1, len(bodies)):
        before, after = _strip(bodies[i - 1]), _strip(bodies[i])
        old, new = before["messages"], after["messages"]
        if new[: len(old)] != old or before["system"] != after["system"] or before["tools"] != after["tools"]:
            return i
    return None


Turn = tuple[float, list[int]]
"""(idle minutes before the prompt, the sizes in characters of the files it reads, one call each)."""


async def _session(
    workdir: Path, turns: Sequence[Turn], *, snip: bool, caps: Capabilities | None
) -> tuple[list[dict[str, Any]], bool]:
    """Run the session on a provider declaring `caps`: the bodies sent, and whether anything was cleared."""
    workspace = workdir / "ws"
    workspace.mkdir()
    script: list[dict[str, Any]] = []
    n = 0
    for _, sizes in turns:
        for size in sizes:
            path = workspace / f"f{n}.txt"
            path.write_text("\n".join(f"{n}:{i} " + "x" * 70 for i in range(max(1, size // 76))))
            script.append({"tool_calls": [{"name": "Read", "input": {"file_path": str(path)}}]})
            n += 1
        script.append({"text": "done"})
    provider = ScriptedProvider(script, capabilities=caps)
    clock = Clock()
    writer, timeline = open_session(workdir / "s.jsonl", session_id="s1", fsync="never")
    engine = QueryEngine(
        provider=provider,
        config=Config(model=MODEL, snip_enabled=snip),
        tools=default_tools(),
        workspace=workspace,
        timeline=timeline,
        transcript=writer,
        permission_mode="bypassPermissions",
        instructions=False,
        clock=clock,
    )
    for i, (gap, _) in enumerate(turns):
        clock.offset += gap * 60
        await engine.submit_message(f"prompt {i}")
    await engine.aclose()
    writer.close()
    provider.assert_complete()
    cleared = any(isinstance(r, ResultsCleared) for r in timeline)
    return [c.body for c in provider.calls], cleared


def run_session(
    turns: Sequence[Turn], *, snip: bool, caps: Capabilities | None = None
) -> tuple[list[dict[str, Any]], bool]:
    with tempfile.TemporaryDirectory() as d:
        return asyncio.run(_session(Path(d), turns, snip=snip, caps=caps))


turns_strategy = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=59.5),  # under the hour: the cache is still warm
        st.lists(st.integers(min_value=200, max_value=30_000), min_size=0, max_size=6),
    ),
    min_size=1,
    max_size=6,
)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=turns_strategy, snip=st.booleans())
def test_no_cached_byte_changes_while_warm_without_cache_edits(turns: list[Turn], snip: bool) -> None:
    bodies, cleared = run_session(turns, snip=snip)
    assert len(bodies) == sum(len(sizes) + 1 for _, sizes in turns)
    assert first_rewrite(bodies) is None
    assert not cleared


# A fixed session well past the cached path's trigger (14 Reads of ~5,000 tokens: ~45,000 clearable).
BULKY: list[Turn] = [(0.0, [20_000] * 7), (59.0, [20_000] * 7), (30.0, [])]


@pytest.mark.parametrize("snip", [True, False])
def test_a_bulky_warm_session_is_never_rewritten(snip: bool) -> None:
    bodies, cleared = run_session(BULKY, snip=snip)
    assert first_rewrite(bodies) is None
    assert not cleared
    # The same session on a provider with cache_edits: the cached path does act on it.
    edited, _ = run_session(BULKY, snip=snip, caps=Capabilities(name="edits", supports_cache_edits=True))
    assert any('"cache_edits"' in dumps(body).decode() for body in edited)


def test_the_check_sees_the_rewrite_once_the_cache_has_expired() -> None:
    """The same session with its last gap over the hour: the time-based path rewrites, and it shows."""
    bodies, cleared = run_session([*BULKY[:2], (61.0, [])], snip=False)
    assert cleared
    assert first_rewrite(bodies) == len(bodies) - 1
