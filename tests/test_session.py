"""`foldline.Session`: open-or-resume, dangling calls answered, notices kept, closed in order.

The README's own example is run, twice in a row, against the real local server.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.test_cli_chat import _claude_code_session

from foldline import Session
from foldline.errors import UserError
from foldline.providers.anthropic import AnthropicProvider
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.testing import run_server
from foldline.timeline import AssistantEntry, AssistantMessage, UserEntry, UserMessage
from foldline.transcript import TranscriptWriter, load_transcript

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[tuple[str, ScriptedBackend]]:
    backend = ScriptedBackend()  # echoes the last user message
    with run_server(create_app(backend=backend)) as url:
        yield url, backend


def _readme_example() -> str:
    match = re.search(r"```python\n(import asyncio.*?)```", README.read_text(), re.DOTALL)
    assert match is not None, "the README lost its Python example"
    return match[1]


def test_the_readme_example_runs_twice_in_a_row(server: tuple[str, ScriptedBackend], tmp_path: Path) -> None:
    url, backend = server
    code = _readme_example().replace("http://127.0.0.1:8765", url)
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "end_turn You said: Add a docstring to calc.py" in done.stdout
    assert len(backend.calls[-1].messages) == 3  # the second run resumed the first exchange


@pytest.mark.anyio
async def test_open_answers_a_dangling_tool_call_instead_of_running_it(
    server: tuple[str, ScriptedBackend], tmp_path: Path
) -> None:
    url, _ = server
    path = tmp_path / "s.jsonl"
    use = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "touch ran"}}
    with TranscriptWriter.create(path, session_id="s", cwd=str(tmp_path)) as writer:
        writer.append(UserEntry(uuid="u1", timestamp="t", message=UserMessage(content="go")))
        writer.append(
            AssistantEntry(
                uuid="a1", parent_uuid="u1", timestamp="t", message=AssistantMessage(id="m1", content=[use])
            )
        )
    async with Session.open(path, provider=AnthropicProvider(base_url=url, api_key="k")) as session:
        last = session.engine.timeline.snapshot()[-1]
        assert isinstance(last, UserEntry)
        assert isinstance(last.message.content, list)
        assert last.message.content[0]["tool_use_id"] == "toolu_1"
        assert last.message.content[0]["is_error"] is True
    assert not (tmp_path / "ran").exists()
    assert load_transcript(path).records[-1] == last  # written through to the disk


@pytest.mark.anyio
async def test_open_keeps_the_notices_of_a_damaged_transcript(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with TranscriptWriter.create(path, session_id="s", cwd=str(tmp_path)) as writer:
        writer.append(UserEntry(uuid="u1", timestamp="t", message=UserMessage(content="go")))
    with path.open("ab") as f:
        f.write(b"\x00garbage\n")
        f.write(path.read_bytes().splitlines(keepends=True)[1].replace(b'"u1"', b'"u2"'))
    seen: list[str] = []
    session = Session.open(path, provider=AnthropicProvider(api_key="k"), on_notice=seen.append)
    await session.aclose()
    await session.aclose()  # idempotent
    assert len(session.notices) == 1
    assert seen == list(session.notices)
    assert "line 3" in seen[0]


def test_open_refuses_another_tools_transcript_and_writes_nothing_beside_it(tmp_path: Path) -> None:
    source = _claude_code_session(tmp_path / "cc" / "cc-1.jsonl")
    with pytest.raises(UserError, match="foldline never appends to another tool's file"):
        Session.open(source, provider=AnthropicProvider(api_key="k"))
    assert [p.name for p in source.parent.iterdir()] == ["cc-1.jsonl"]


@pytest.mark.anyio
async def test_close_leaves_the_normalized_head_and_the_resume_builds_from_it(tmp_path: Path) -> None:
    from foldline.api.frozen_head import HEAD_FILE
    from foldline.engine import AssemblingBuilder, request_builder
    from foldline.testing import FunctionProvider

    def echo(body: dict[str, Any], betas: object) -> dict[str, str]:
        return {"text": f"reply {len(body['messages'])}"}

    path = tmp_path / "s.jsonl"
    async with Session.open(path, provider=FunctionProvider(echo), workspace=tmp_path) as session:
        for n in range(4):
            await session.submit_message(f"message {n}")
        config, system, tools = session.engine.config, session.engine.system, session.engine.tools
    head_file = path.with_suffix("") / HEAD_FILE
    assert head_file.is_file()
    provider = FunctionProvider(echo)
    async with Session.open(path, provider=provider, workspace=tmp_path) as session:
        builder = session.engine.build_request
        assert isinstance(builder, AssemblingBuilder)
        assert builder.assembler._thaw is not None  # handed over, not yet used
        await session.submit_message("after the resume")
        assert builder.assembler._normalizer._tail_start > 0
        records = session.engine.timeline.snapshot()
    fresh = request_builder(config, system, tools, provider.capabilities)
    want = fresh(records[: len(records) - 1], max_tokens=config.max_output_tokens).body["messages"]
    assert provider.calls[0].body["messages"] == want
    head_file.write_bytes(b"{damaged")  # a damaged cache is ignored, never an error
    async with Session.open(path, provider=FunctionProvider(echo), workspace=tmp_path) as session:
        await session.submit_message("once more")


@pytest.mark.anyio
@pytest.mark.parametrize("with_snip", [False, True], ids=["no-tools", "default-tools"])
async def test_ids_are_tagged_only_when_the_model_has_the_snip_tool(
    server: tuple[str, ScriptedBackend], tmp_path: Path, with_snip: bool
) -> None:
    from foldline.config import Config
    from foldline.tools import default_tools

    url, backend = server
    tools = default_tools() if with_snip else ()
    # A nudge at 0% of the window: it would fire on the first prompt, if it fired at all.
    config = Config(snip_nudge_share=0.0)
    provider = AnthropicProvider(base_url=url, api_key="k")
    async with Session.open(tmp_path / "s.jsonl", provider=provider, tools=tools, config=config) as session:
        await session.submit_message("hello")
    sent = str(backend.calls[-1].messages)
    assert ("[id:" in sent) is with_snip
    assert ("Snip" in sent) is with_snip  # the nudge names the tool


@pytest.mark.anyio
async def test_with_snip_off_the_snip_tool_is_not_offered(tmp_path: Path) -> None:
    from foldline.config import Config
    from foldline.testing import FunctionProvider
    from foldline.tools import default_tools

    offered: list[list[str]] = []

    def record(body: dict[str, Any], betas: object) -> dict[str, str]:
        offered.append([tool["name"] for tool in body.get("tools", [])])
        return {"text": "ok"}

    config = Config(snip_enabled=False, snip_nudge_share=0.0)
    provider = FunctionProvider(record)
    path = tmp_path / "s.jsonl"
    async with Session.open(path, provider=provider, tools=default_tools(), config=config) as session:
        await session.submit_message("hello")
    assert offered
    assert "Read" in offered[-1]
    assert "Snip" not in offered[-1]
