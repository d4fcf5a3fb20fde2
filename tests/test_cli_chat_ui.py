"""The chat's pieces without a terminal: `/context`'s categories, the recap, markdown splitting, and
`-p` with `--output-format json` / `stream-json` against the real local server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from foldline.cli import cli
from foldline.cli._slash import CATEGORIES, context_breakdown, context_grid
from foldline.cli._ui import Renderer, clip_words, recap, result_preview, split_markdown, status_line
from foldline.config import Config
from foldline.events import CompactionEvent, RecordEvent, TextDeltaEvent, ThinkingDeltaEvent
from foldline.executor import INTERRUPTED_WHILE_RUNNING
from foldline.server.app import create_app
from foldline.server.backend import ScriptedBackend
from foldline.server.testing import run_server
from foldline.timeline import (
    AssistantEntry,
    AssistantMessage,
    CollapseCommit,
    CompactBoundary,
    ProgressEntry,
    Usage,
    UserEntry,
    UserMessage,
)
from foldline.tokens import estimate_blocks, estimate_text
from foldline.transcript import list_session_files, load_transcript

WINDOW = 200_000
STAMP = "2026-03-01T10:00:00.000Z"


def _user(uuid: str, content: object, **kw: object) -> UserEntry:
    return UserEntry(uuid=uuid, timestamp=STAMP, message=UserMessage(content=content), **kw)  # type: ignore[arg-type]


def _assistant(uuid: str, *blocks: dict[str, object]) -> AssistantEntry:
    return AssistantEntry(
        uuid=uuid, timestamp=STAMP, message=AssistantMessage(id=f"m{uuid}", model="m", content=list(blocks))
    )


def test_context_breakdown_of_an_empty_session_is_system_tools_and_free() -> None:
    tools = [{"name": "Read", "description": "read a file", "input_schema": {"type": "object"}}]
    got = dict(context_breakdown([], "you are helpful", tools, WINDOW))
    assert list(got) == list(CATEGORIES)
    assert got["system"] == estimate_text("you are helpful") > 0
    assert got["tools"] > 0
    assert got["messages"] == got["tool results"] == got["summaries"] == 0
    assert got["free"] == WINDOW - got["system"] - got["tools"]


def test_context_breakdown_puts_each_block_in_its_category() -> None:
    output = "line of output\n" * 200
    tool_use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}}
    records = [
        _user("old", "an old prompt that the compaction summarized away " * 20),
        CompactBoundary(uuid="cb", timestamp=STAMP, trigger="manual", pre_tokens=5000),
        _user("sum", "Summary: the user asked for a build.", is_compact_summary=True),
        _user("u1", "build it"),
        _assistant("a1", {"type": "text", "text": "Building."}, tool_use),
        _user("r1", [{"type": "tool_result", "tool_use_id": "t1", "content": output}]),
        _user("u2", "and the span to fold"),
        _assistant("a2", {"type": "text", "text": "folded away soon"}),
        CollapseCommit(
            uuid="c1",
            timestamp=STAMP,
            collapse_id="0001",
            first_uuid="u2",
            last_uuid="a2",
            summary="the user asked about a span",
        ),
    ]
    got = dict(context_breakdown(records, "", [], WINDOW))
    result = {"type": "tool_result", "tool_use_id": "t1", "content": output}
    assert got["tool results"] == estimate_blocks([result])
    assert got["summaries"] > estimate_text("Summary: the user asked for a build.")  # the fold counts too
    # the prompt before the boundary is gone; the folded span's own text is not counted as messages
    assert got["messages"] == (
        estimate_blocks("build it")
        + estimate_blocks([{"type": "text", "text": "Building."}])
        + estimate_blocks([tool_use])
    )
    assert got["free"] == WINDOW - sum(v for k, v in got.items() if k != "free")


def test_context_grid_never_hides_a_category_and_never_overflows() -> None:
    breakdown = [("system", 10), ("tools", 150_000), ("messages", 120_000), ("tool results", 0)]
    breakdown += [("summaries", 0), ("free", 0)]
    console = Console(width=100, record=True, color_system=None)
    console.print(context_grid(breakdown, WINDOW))
    text = console.export_text()
    assert "■" in text
    assert text.count("■") + text.count("□") == 100 + len(breakdown)  # 100 cells, one mark per legend row
    for name in CATEGORIES:
        assert name in text


@pytest.mark.parametrize("width", [40, 32])
def test_context_on_a_narrow_terminal_cuts_no_number(width: int) -> None:
    """At 40 columns the legend used to be cut beside the grid: every number lost its digits."""
    breakdown = [("system", 1_234), ("tools", 15_678), ("messages", 120_000), ("tool results", 9_876)]
    breakdown += [("summaries", 543), ("free", 52_669)]
    console = Console(width=width, record=True, color_system=None)
    console.print(context_grid(breakdown, WINDOW, width))
    text = console.export_text()
    for name, tokens in breakdown:
        assert f"{tokens:,}" in text, (name, text)
        assert f"{tokens / WINDOW:.1%}" in text
    assert all(len(line) <= width for line in text.splitlines())
    grid_shown = len(text.splitlines()) > len(breakdown)  # the grid's rows above the legend
    assert grid_shown is (width >= 40)  # the grid stays where it fits


def test_recap_names_the_last_prompt_answer_and_interrupted_call() -> None:
    tool_use = {"type": "tool_use", "id": "t9", "name": "Bash", "input": {"command": "sleep 100"}}
    records = [
        _user("u1", "first question"),
        _assistant("a1", {"type": "text", "text": "first answer"}),
        _user("u2", "run the slow thing"),
        _assistant("a2", {"type": "text", "text": "Running it. " * 100}, tool_use),
        _user("r2", [{"type": "tool_result", "tool_use_id": "t9", "content": INTERRUPTED_WHILE_RUNNING}]),
    ]
    lines = [line.plain for line in recap(records, limit=80)]
    assert lines[0] == "last prompt: run the slow thing"
    assert lines[1].startswith("last answer: Running it.")
    assert len(lines[1]) <= len("last answer: ") + 80
    assert lines[2].startswith("interrupted: Bash(sleep 100)")
    assert recap([])[0].plain == "(no earlier prompt in this session)"


@pytest.mark.parametrize(
    ("text", "finished"),
    [
        ("one paragraph still going", ""),
        ("done.\n\nnext", "done.\n\n"),
        ("```py\nx = 1\n\ny = 2\n", ""),  # a blank line inside an open code block is no cut
        ("```py\nx = 1\n```\nafter", "```py\nx = 1\n```\n"),
    ],
)
def test_split_markdown_cuts_only_where_the_text_is_finished(text: str, finished: str) -> None:
    assert split_markdown(text) == (finished, text[len(finished) :])


# --- -p with --output-format -----------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[str]:
    reply = {
        "when": {"last_user_contains": "list"},
        "tool_calls": [{"name": "Glob", "input": {"pattern": "*"}}],
    }
    with run_server(create_app(backend=ScriptedBackend(replies=[reply]))) as url:
        yield url


def _run(url: str, tmp_path: Path, *args: str) -> str:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "a.txt").write_text("a")
    base = ["chat", "--base-url", url, "--api-key", "k", "--workspace", str(workspace)]
    base += ["--sessions-dir", str(tmp_path / "s"), "--permission-mode", "bypassPermissions"]
    result = CliRunner().invoke(cli, [*base, *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_json_output_is_one_object_with_the_result(server: str, tmp_path: Path) -> None:
    out = _run(server, tmp_path, "-p", "hello json", "--output-format", "json")
    [line] = out.strip().splitlines()
    got = json.loads(line)
    assert got["type"] == "result"
    assert got["is_error"] is False
    assert got["result"].startswith("You said: hello json")
    assert got["num_turns"] == 1
    [path] = list_session_files(tmp_path / "s")
    assert got["session_id"] == load_transcript(path).header.session_id
    usage = got["usage"]
    assert usage["output_tokens"] > 0
    assert usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"] > 0
    assert got["total_cost_usd"] > 0


def test_stream_json_is_one_line_per_event_then_the_result(server: str, tmp_path: Path) -> None:
    out = _run(server, tmp_path, "-p", "list the files", "--output-format", "stream-json")
    events = [json.loads(line) for line in out.strip().splitlines()]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "result"
    assert events[-1]["num_turns"] == 2  # the Glob call, then the answer
    records = [e["record"] for e in events if e["type"] == "record"]
    assert [r["kind"] for r in records].count("assistant") == 2
    tool_uses = [b for r in records if r["kind"] == "assistant" for b in r["message"]["content"]]
    assert any(b.get("name") == "Glob" for b in tool_uses)
    assert "tool_input_delta" in kinds
    streamed = "".join(e["text"] for e in events if e["type"] == "text_delta")
    assert streamed == events[-1]["result"]  # the final answer is exactly what streamed last


def test_stdin_with_json_output(server: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    args = ["chat", "--base-url", server, "--api-key", "k", "--workspace", str(workspace)]
    args += ["--sessions-dir", str(tmp_path / "s"), "--output-format", "json"]
    result = CliRunner().invoke(cli, args, input="from a pipe\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["result"].startswith("You said: from a pipe")


def test_the_renderer_collapses_thinking_and_shows_calls_results_and_receipts() -> None:
    console = Console(width=100, record=True, color_system=None)
    renderer = Renderer(console, live=False)
    tool_use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls -la\n/tmp"}}
    events = [
        ThinkingDeltaEvent("secret chain of thought " * 50),
        TextDeltaEvent("Let me look."),
        RecordEvent(_assistant("a1", {"type": "text", "text": "Let me look."}, tool_use)),
        RecordEvent(ProgressEntry(uuid="p1", timestamp=STAMP, text="Running ls…", tool_use_id="t1")),
        RecordEvent(_user("r1", [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt\nb.txt"}])),
        CompactionEvent("microcompact", "cleared 3 old tool results (12,000 tokens)", 12_000),
    ]
    renderer.begin_turn()
    for event in events:
        renderer(event)
    renderer.end_turn()
    text = console.export_text()
    assert "secret chain" not in text
    assert "✻ thought for" in text
    assert "(1,200 chars)" in text
    assert "Let me look." in text
    assert "⏺ Bash(ls -la /tmp)" in text  # the input on one line
    assert "⎿ a.txt" in text
    assert "    b.txt" in text  # the next line under it
    assert "⎯ microcompact: cleared 3 old tool results" in text


def test_the_status_line_turns_yellow_past_the_warning_line() -> None:
    config = Config(context_window=100_000)
    quiet = status_line([], config)
    usage = Usage(input_tokens=config.warning_threshold + 10, output_tokens=5)
    busy = [
        AssistantEntry(
            uuid="a",
            timestamp=STAMP,
            message=AssistantMessage(id="m", model="m", content=[{"type": "text", "text": "x"}], usage=usage),
        )
    ]
    loud = status_line(busy, config)
    assert config.model in quiet.plain
    assert "100,000" in quiet.plain
    assert "past the warning line" in loud.plain
    assert "past the warning line" not in quiet.plain
    assert "$0.0000" in quiet.plain
    assert "$0.0000" not in loud.plain


def _result(content: object, **kw: object) -> dict[str, object]:
    return {"type": "tool_result", "tool_use_id": "t", "content": content, **kw}


def test_a_read_result_shows_its_first_lines_as_code_not_one_escaped_line() -> None:
    read = "".join(f"{n:>6}\tline {n} of the file\n" for n in range(1, 41))
    assert result_preview(_result(read)) == [
        "     1  line 1 of the file",
        "     2  line 2 of the file",
        "     3  line 3 of the file",
        "     4  line 4 of the file",
        "… +36 lines",
    ]


def test_a_command_with_only_stderr_shows_the_error_not_just_the_marker() -> None:
    grep = "[stderr]\ngrep: src/: Is a directory\nExit code: 2"
    assert result_preview(_result(grep, is_error=True)) == [
        "[stderr]",
        "grep: src/: Is a directory",
        "Exit code: 2",
    ]


def test_an_image_result_shows_its_type_dimensions_and_size() -> None:
    import base64
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 640, 480, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(b"\0" * 2000)) + chunk(b"IEND", b"")
    block = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png).decode()},
    }
    [line] = result_preview(_result([block]))
    assert line.startswith("[image: image/png, 640x480, ")
    assert line.endswith(" KB]")
    assert result_preview(_result([])) == ["(no output)"]


def test_long_lines_are_cut_at_a_word_boundary() -> None:
    text = "alpha beta gamma delta epsilon"
    assert clip_words(text, 17) == "alpha beta gamma…"
    assert clip_words(text, 100) == text
    assert clip_words("x" * 50, 10) == "x" * 9 + "…"  # one long word: cut inside it
    [line] = result_preview(_result("word " * 100), width=40)
    assert line.endswith("word…")
    assert len(line) <= 40
    assert not any("wor…" in r.plain or "wo…" in r.plain for r in recap([_user("u", "prompt " * 200)]))


def test_the_status_line_prices_each_call_at_its_model() -> None:
    usage = Usage(input_tokens=10_000, output_tokens=1_000)

    def session(model: str) -> list[AssistantEntry]:
        message = AssistantMessage(id="m", model=model, content=[{"type": "text", "text": "x"}], usage=usage)
        return [AssistantEntry(uuid="a", timestamp=STAMP, message=message)]

    opus = status_line(session("claude-opus-4-1-20250805"), Config()).plain
    haiku = status_line(session("claude-haiku-4-5"), Config()).plain
    assert opus.endswith(f"${(10_000 * 15 + 1_000 * 75) / 1e6:.4f}")
    assert haiku.endswith(f"${(10_000 * 1 + 1_000 * 5) / 1e6:.4f}")


def test_a_local_model_is_shown_without_made_up_dollars() -> None:
    """A model with no list price used to be priced as Sonnet in the status line and /cost."""
    usage = Usage(input_tokens=10_000, output_tokens=1_000)
    message = AssistantMessage(id="m", model="smollm2-135m-instruct", content=[], usage=usage)
    records = [AssistantEntry(uuid="a", timestamp=STAMP, message=message)]
    local = status_line(records, Config(model="smollm2-135m-instruct", context_window=8_192)).plain
    assert "$" not in local
    assert "$" in status_line(records, Config()).plain  # a Claude model keeps its list price


def test_the_spinner_says_compacting_while_a_turn_waits_on_a_summary() -> None:
    """It used to keep saying "waiting for the model" through a synchronous summary."""
    from foldline.events import NoticeEvent

    console = Console(width=100, record=True, color_system=None)
    renderer = Renderer(console, live=False)
    renderer.begin_turn()
    renderer(NoticeEvent("Compacting the conversation (auto): writing a summary…", "progress"))
    assert renderer.phase == "Compacting the conversation (auto)"
    renderer(CompactionEvent("autocompact", "compacted the conversation (auto): 170,000 -> 9,000 tokens", 0))
    assert renderer.phase == "waiting for the model"  # the main request goes out now
    renderer(NoticeEvent("Compacting the conversation (reactive): writing a summary…", "progress"))
    renderer(NoticeEvent("compaction failed (reactive): the summary was empty", "warning"))
    assert renderer.phase == "waiting for the model"
    renderer.end_turn()
    assert "Compacting the conversation (auto)" in console.export_text()


async def _compaction_events() -> list[object]:
    from foldline.compact.autocompact import install_autocompact
    from foldline.compact.prompts import SUMMARY_SECTIONS
    from foldline.config import AutoCompactConfig
    from foldline.engine import QueryEngine
    from foldline.testing import FunctionProvider
    from foldline.timeline import Timeline

    seen: list[object] = []

    def answer(body: dict[str, object], betas: tuple[str, ...]) -> dict[str, object]:
        if "detailed summary" in str(body["messages"][-1]):
            seen.append("summary request")
            return {"text": "\n\n".join(f"## {t}\nx" for t in SUMMARY_SECTIONS)}
        return {"text": "ok"}

    config = Config(
        context_window=20_000,
        output_reserve=2_000,
        max_output_tokens=500,
        snip_enabled=False,
        autocompact=AutoCompactConfig(
            buffer_tokens=12_000, warning_below_threshold=2_000, summary_max_tokens=1_000
        ),
    )
    engine = QueryEngine(provider=FunctionProvider(answer), config=config, timeline=Timeline(session_id="s"))
    install_autocompact(engine)
    engine.events.subscribers.append(seen.append)
    for turn in range(20):
        await engine.submit_message(f"step {turn}: " + "word " * 600)
        if "summary request" in seen:
            break
    await engine.aclose()
    return seen


def test_autocompact_announces_the_summary_before_it_is_requested() -> None:
    import asyncio

    from foldline.events import NoticeEvent

    seen = asyncio.run(_compaction_events())
    assert "summary request" in seen
    notices = [i for i, e in enumerate(seen) if isinstance(e, NoticeEvent) and e.level == "progress"]
    assert notices
    assert notices[0] < seen.index("summary request")
    assert "Compacting the conversation (auto)" in seen[notices[0]].text  # type: ignore[union-attr]


def _activity_text(renderer: Renderer) -> str:
    from foldline.cli._ui import _Activity

    out = Console(width=120, record=True, color_system=None)
    out.print(_Activity(renderer))
    return out.export_text()


def test_compact_shows_its_phase_and_the_seconds_since_it_began(tmp_path: Path) -> None:
    """/compact on a local model ran 75 s behind one static line: the spinner now says what runs
    and for how long, from the start of /compact, and the time it took is printed at the end."""
    import asyncio

    from foldline.cli._slash import compact_command
    from foldline.compact.prompts import SUMMARY_SECTIONS
    from foldline.session import Session
    from foldline.testing import FunctionProvider

    console = Console(width=120, record=True, color_system=None)
    renderer = Renderer(console, live=False)
    seen: list[tuple[str, bool, str]] = []
    summary = "\n\n".join(f"## {title}\nthe port is 6543" for title in SUMMARY_SECTIONS)

    def answer(body: dict[str, object], betas: tuple[str, ...]) -> dict[str, object]:
        if "write a detailed summary" not in json.dumps(body["messages"]):
            return {"text": "noted"}
        renderer.phase_since -= 75  # the local model takes 75 s over the summary
        seen.append((renderer.phase, renderer._in_turn, _activity_text(renderer)))
        return {"text": summary}

    async def run() -> None:
        async with Session.open(
            tmp_path / "s.jsonl", provider=FunctionProvider(answer), workspace=tmp_path, on_event=renderer
        ) as session:
            await session.submit_message("the port is 6543" + " and more" * 2_000)
            await compact_command(session, "", console, renderer)

    asyncio.run(run())
    [(phase, in_work, label)] = seen
    assert phase == "Compacting the conversation (manual)"
    assert in_work
    assert "Compacting the conversation (manual)… 75s" in label
    assert not renderer._in_turn  # the spinner is gone once it ended
    shown = console.export_text()
    assert "compacted the conversation (manual" in shown
    assert "/compact took" in shown


def test_a_note_after_a_tool_result_wraps_at_the_terminal_width_whole() -> None:
    note = (
        "Note: Bash runs in foldline's OS sandbox. The sandbox has no network, so the command could "
        "not reach any host. The user can turn it on in ~/.foldline/settings.json."
    )
    output = "\n".join(f"line {n}" for n in range(1, 11))
    console = Console(width=60, record=True, color_system=None)
    renderer = Renderer(console, live=False)
    renderer(
        RecordEvent(
            _user("r1", [{"type": "tool_result", "tool_use_id": "t1", "content": f"{output}\n{note}"}])
        )
    )
    text = console.export_text()
    assert "⎿ line 1" in text
    assert "… +6 lines" in text  # the output is cut; the note after it is not
    assert "…" not in text.split("… +6 lines")[1]
    lines = text.splitlines()
    assert all(len(line) <= 60 for line in lines)
    note_lines = lines[lines.index("    … +6 lines") + 1 :]
    assert len(note_lines) > 1  # wrapped, each under the result's indent
    assert all(line.startswith("    ") for line in note_lines)
    assert " ".join(" ".join(line.split()) for line in note_lines) == note
    assert result_preview(_result(f"ok\n{note}"), width=40) == ["ok", note]  # among the first lines too
