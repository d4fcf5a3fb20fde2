"""`foldline request SESSION`: the printed body is what the next turn would send, and it validates."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from tests.conftest import claude_code_files, requires_claude_code_data

from foldline._json import encode_line
from foldline.api.validate import find_errors
from foldline.cli import cli
from foldline.cli.request import PROVIDERS
from foldline.timeline import AssistantEntry, AssistantMessage, UserEntry, UserMessage
from foldline.transcript import TranscriptHeader


def _run(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["request", *args])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


@requires_claude_code_data
@pytest.mark.parametrize("path", claude_code_files(), ids=lambda p: p.name)
@pytest.mark.parametrize(
    "options", [[], ["--provider", "local", "--thinking-budget", "2048"]], ids=["anthropic", "local"]
)
def test_every_real_transcript_gives_a_valid_request(path: Path, options: list[str]) -> None:
    out = _run(str(path), *options)
    body = out["body"]
    assert isinstance(body, dict)
    assert [e.message for e in find_errors(body)] == []
    assert body["messages"][-1]["role"] == "user"
    assert out["betas"] == (["cache-edits-2025-06-01"] if options else [])


def _foldline_session(tmp_path: Path, *, ends_with_reply: bool) -> Path:
    path = tmp_path / "s.jsonl"
    user = UserEntry(
        uuid="00000001-4444-4000-8000-000000000001", timestamp="t", message=UserMessage(content="hi")
    )
    use = {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}
    reply = AssistantEntry(
        uuid="00000002-4444-4000-8000-000000000002",
        timestamp="t",
        message=AssistantMessage(
            id="m1", content=[{"type": "text", "text": "hello"}] if ends_with_reply else [use]
        ),
    )
    header = TranscriptHeader(session_id="s1", created_at="2026-01-01T00:00:00.000Z")
    path.write_bytes(b"".join(encode_line(r) for r in (header, user, reply)))
    return path


def test_a_reply_at_the_end_gets_the_prompt_as_next_input(tmp_path: Path) -> None:
    path = _foldline_session(tmp_path, ends_with_reply=True)
    body = _run(str(path), "--format", "foldline")["body"]
    assert isinstance(body, dict)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][-1]["content"][0] == {"type": "text", "text": "Continue."}
    custom = _run(str(path), "--prompt", "Now add tests.")["body"]
    assert isinstance(custom, dict)
    assert custom["messages"][-1]["content"][0]["text"] == "Now add tests."
    assert _run(str(path)) == _run(str(path))  # reproducible: the appended entry's id is derived


def test_an_open_tool_call_is_answered_not_prompted(tmp_path: Path) -> None:
    body = _run(str(_foldline_session(tmp_path, ends_with_reply=False)))["body"]
    assert isinstance(body, dict)
    last = body["messages"][-1]["content"]
    assert last[0]["tool_use_id"] == "toolu_1"
    assert last[0]["is_error"] is True
    assert all(b.get("text") != "Continue." for b in last)
    assert find_errors(body) == []


def test_body_only_prints_the_exact_bytes(tmp_path: Path) -> None:
    path = _foldline_session(tmp_path, ends_with_reply=True)
    result = CliRunner().invoke(cli, ["request", str(path), "--body-only"])
    assert result.exit_code == 0
    assert orjson.loads(result.stdout) == _run(str(path))["body"]
    assert result.stdout.strip() == orjson.dumps(orjson.loads(result.stdout)).decode()


def test_unreadable_input_is_a_clean_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json at all\n")
    result = CliRunner().invoke(cli, ["request", str(bad), "--format", "foldline"])
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    assert "Error" in result.output


def test_the_local_provider_sends_the_beta_the_local_server_expects() -> None:
    caching = pytest.importorskip("foldline.server.caching")  # the optional server extra
    assert PROVIDERS["local"].cache_edits_beta == caching.CACHE_EDITS_BETA


def test_request_takes_a_session_id_as_show_does(tmp_path: Path) -> None:
    folder = tmp_path / "projects" / "-w"
    folder.mkdir(parents=True)
    _foldline_session(tmp_path, ends_with_reply=True).rename(folder / "by-id.jsonl")
    result = CliRunner().invoke(cli, ["request", "by-id"], env={"FOLDLINE_HOME": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert find_errors(orjson.loads(result.stdout)["body"]) == []


def test_request_names_an_unknown_session_id(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["request", "nope"], env={"FOLDLINE_HOME": str(tmp_path)})
    assert result.exit_code == 1
    assert "nope: no such session file" in result.output


def test_a_session_with_nothing_to_send_names_the_file(tmp_path: Path) -> None:
    # A Claude Code file holding only metadata lines loads fine but has no conversation.
    path = tmp_path / "meta-only.jsonl"
    path.write_bytes(orjson.dumps({"type": "summary", "summary": "t", "leafUuid": "x"}) + b"\n")
    result = CliRunner().invoke(cli, ["request", str(path)])
    assert result.exit_code == 1
    assert f"Error: {path}: nothing to send" in result.output


@pytest.mark.parametrize("window", [None, 8_192], ids=["claude-window", "small-window"])
def test_the_printed_body_carries_the_system_prompt_and_tools_chat_sends(
    tmp_path: Path, window: int | None
) -> None:
    """It was documented as the exact body yet left out `system` and `tools`. A session run on a
    small window is printed with the same `--context-window` (it picks the short prompt)."""
    import asyncio

    from foldline.config import DESIGN_WINDOW, Config
    from foldline.session import Session
    from foldline.testing import FunctionProvider
    from foldline.tools import default_tools

    provider = FunctionProvider(lambda body, betas: {"text": "ok"})
    path = tmp_path / "s.jsonl"
    config = Config(context_window=window, reference_window=DESIGN_WINDOW)

    async def one_turn() -> None:
        async with Session.open(
            path, provider=provider, workspace=tmp_path, config=config, tools=default_tools()
        ):
            pass  # a session that recorded its environment block

    asyncio.run(one_turn())

    async def then_send() -> None:
        async with Session.open(
            path, provider=provider, workspace=tmp_path, config=config, tools=default_tools()
        ) as s:
            await s.submit_message("Continue.")

    window_args = ["--context-window", str(window)] if window else []
    printed = _run(str(path), "--body-only", "--prompt", "Continue.", *window_args)
    asyncio.run(then_send())
    sent = provider.calls[-1].body
    assert printed["system"] == sent["system"]
    assert printed["tools"] == sent["tools"]
    assert printed["max_tokens"] == sent["max_tokens"]
    assert "<environment>" in str(printed["system"])
