"""On any window, no single tool result bricks a session, and `/compact` succeeds or says why (R3.0).

An ordinary 43,000-character Read on an 8K window used to leave every later turn failing: Read's
100,000-character cap and its exemption from the level-0 budget were not scaled to the window, nor
was the summary request's block cut, so automatic, reactive and manual compaction all failed. Now
every per-result cap is `Config.result_cap_chars`: scaled, and never more than a share of the room
the blocking limit leaves beside the system prompt and tools, counted at one token per character
(the dense digits and commas these tests feed every tool are about that at the server's tokenizer).

Each case runs the chat path's compaction levels (`Session.open`) against an in-process model that
answers a prompt too long for its window with the API's 400, and checks, at the model, that every
request the conversation sent was within the blocking limit.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foldline.compact.prompts import requested_sections
from foldline.config import DESIGN_WINDOW, Config, RetryConfig
from foldline.errors import PromptTooLongError
from foldline.server.caching import flatten, total_tokens
from foldline.session import Session
from foldline.testing import FunctionProvider
from foldline.timeline import CompactBoundary, SystemEntry
from foldline.tools import default_tools

DENSE_LINE = "1," * 999 + "1\n"
"""2,000 characters, one token each at the server's tokenizer: the worst case for a character cap."""

CALLS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "Read": [("Read", {"file_path": "dense.txt"})],
    "Bash": [("Bash", {"command": "python3 -c \"print('1,' * 300000)\"", "description": "print numbers"})],
    "Grep": [("Grep", {"pattern": "1", "output_mode": "content"})],
    "Glob": [("Glob", {"pattern": "**/*"})],
    "Write": [("Write", {"file_path": "new.txt", "content": "1," * 50})],
    # three results in one reply: together past the room, so the summary request cuts them harder
    "Read x3": [("Read", {"file_path": "dense.txt", "offset": n}) for n in (1, 9, 17)],
}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = (str(b.get("text", "")) for b in content if b.get("type") == "text")
    return " ".join(t for t in texts if not t.startswith("[id:"))  # Snip's tags are not the prompt


def _prompt(content: Any) -> str:
    """The user's newest words: a fold (`<collapsed-context ...>`) or a reminder merged into the same
    user message is not what the user asked now (a record of an earlier turn quotes its prompt)."""
    if isinstance(content, str):
        return content
    texts = [str(b.get("text", "")) for b in content if b.get("type") == "text"]
    said = [t for t in texts if not t.startswith(("[id:", "<collapsed-context", "<system-reminder>"))]
    return said[-1] if said else ""


def _model(tool: str) -> Any:
    def answer(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
        last = body["messages"][-1]["content"]
        text = _text(last)
        sections = requested_sections(text)
        if sections:  # a summary or a span summary: the sections it asks for
            return {"text": "\n\n".join(f"## {title}\nThe user ran {tool}." for title in sections)}
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return {"text": "done"}
        if "run the tool" in _prompt(last):
            return {"tool_calls": [{"name": name, "input": args} for name, args in CALLS[tool]]}
        return {"text": "ok"}

    return answer


def _workspace(root: Path) -> Path:
    workspace = root / "ws"
    (workspace / "many").mkdir(parents=True)
    (workspace / "dense.txt").write_text(DENSE_LINE * 2_000)  # 4 MB
    for i in range(150):  # more paths than Glob lists
        (workspace / "many" / f"{i:04d}-{'x' * 120}.txt").write_text("1\n")
    return workspace


async def _session(window: int, tool: str, fill: float, root: Path) -> None:
    config = Config(
        model="local-model",
        context_window=window,
        reference_window=DESIGN_WINDOW,  # as `foldline chat` sets it
        retry=RetryConfig(base_backoff_s=0.01, max_backoff_s=0.05),
    )
    provider = FunctionProvider(_model(tool), context_window=window)
    async with Session.open(
        root / "s.jsonl",
        provider=provider,
        workspace=_workspace(root),
        config=config,
        tools=default_tools(),
        permission_mode="bypassPermissions",
    ) as session:
        # Earlier conversation filling `fill` of the blocking limit, a prompt at a time.
        words = int(config.blocking_limit * fill)
        while words > 0:
            size = min(words, config.blocking_limit // 4)
            assert (await session.submit_message("note " * size)).text == "ok"
            words -= size
        if len(CALLS[tool]) == 1:
            result = await session.submit_message("run the tool")
            assert result.text in ("done", "ok")  # "ok": compacted mid-turn, the model saw the summary
        else:
            # Several results together may pass the room (Collapse's drain can look like enough and
            # not be); then the turn says to /compact, and /compact must work.
            try:
                await session.submit_message("run the tool")
            except PromptTooLongError as e:
                failed_turn = str(e)
            else:
                failed_turn = ""
            if failed_turn:
                assert "run /compact" in failed_turn
                assert any(isinstance(r, CompactBoundary) for r in await session.engine.compact())
        assert (await session.submit_message("and after it?")).text == "ok"
        main = [c for c in provider.calls if not requested_sections(_text(c.body["messages"][-1]["content"]))]
        sizes = [total_tokens(flatten(c.body)) for c in main]
        assert max(sizes) <= config.blocking_limit, (sizes, config.blocking_limit)
        assert all(c.status in (None, 200) for c in provider.calls)
        if tool.startswith("Read"):  # Read keeps under its own cap: never a preview to Read again
            moved = [r for r in session.engine.timeline if getattr(r, "subtype", "") == "tool_result_budget"]
            assert not moved

        added = await session.engine.compact()
        receipts = [r for r in session.engine.timeline if isinstance(r, SystemEntry)]
        failed = [r.content for r in receipts if r.subtype == "compaction" and "failed (manual)" in r.content]
        # /compact compacts, or its receipt says why it did not (a conversation already small).
        assert any(isinstance(r, CompactBoundary) for r in added) or failed, receipts
        if failed:
            assert "would not make the context smaller" in failed[-1] or "nothing to compact" in failed[-1], (
                failed
            )
        assert (await session.submit_message("go on")).text == "ok"


def _run(window: int, tool: str, fill: float) -> None:
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(_session(window, tool, fill, Path(root)))


@pytest.mark.parametrize("tool", sorted(CALLS))
@pytest.mark.parametrize("window", [4_096, 8_192, 200_000, 1_000_000])
def test_the_largest_result_of_each_tool_fits_the_next_request(window: int, tool: str) -> None:
    _run(window, tool, 0.0)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # log-uniform: as many small windows (where the caps bite) as large ones
    window=st.floats(min_value=math.log(4_096), max_value=math.log(1_000_000)).map(
        lambda x: int(math.exp(x))
    ),
    tool=st.sampled_from(sorted(CALLS)),
    fill=st.floats(min_value=0.0, max_value=0.8),
)
def test_no_single_result_on_any_window_pushes_a_request_over_the_blocking_limit(
    window: int, tool: str, fill: float
) -> None:
    _run(window, tool, fill)


def test_read_cap_budget_and_summary_cut_scale_to_the_window() -> None:
    small = Config(context_window=8_192, reference_window=DESIGN_WINDOW, model="local-model")
    fixed = 1_500
    room = small.blocking_limit - fixed
    assert small.result_cap_chars(100_000, fixed) == int(room * small.max_result_share)
    assert small.result_cap_chars(50_000, fixed) == 50_000 * 8_192 // 200_000  # scaled is smaller
    # design.md's 200K numbers are what they were.
    assert Config().result_cap_chars(100_000, fixed) == 100_000
    assert Config().result_cap_chars(50_000, fixed) == 50_000


def test_an_image_is_refused_where_the_window_has_no_room_for_it(tmp_path: Path) -> None:
    import base64

    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )

    async def read_image(window: int) -> Any:
        (tmp_path / "ws").mkdir(exist_ok=True)
        (tmp_path / "ws" / "dot.png").write_bytes(png)
        calls = {"Read": {"file_path": "dot.png"}}

        def answer(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
            last = body["messages"][-1]["content"]
            if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
                return {"text": "done"}
            return {"tool_calls": [{"name": "Read", "input": calls["Read"]}]}

        config = Config(model="local-model", context_window=window, reference_window=DESIGN_WINDOW)
        provider = FunctionProvider(answer, context_window=window)
        async with Session.open(
            tmp_path / f"{window}.jsonl",
            provider=provider,
            workspace=tmp_path / "ws",
            config=config,
            tools=default_tools(),
            permission_mode="bypassPermissions",
        ) as session:
            await session.submit_message("look at dot.png")
            return provider.calls[-1].body["messages"][-1]["content"][0]

    small, large = asyncio.run(read_image(4_096)), asyncio.run(read_image(200_000))
    assert small["is_error"]
    assert "more than one result may take" in str(small["content"])
    assert not large.get("is_error")
    assert large["content"][0]["type"] == "image"
