"""The simulated model (`--backend simulated`): determinism, planted facts, summaries, Snip, the round
distribution, and whole sessions through the real engine and tools."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foldline._json import dumps
from foldline.compact.prompts import (
    SPAN_SECTIONS,
    SUMMARY_SECTIONS,
    parse_sections,
    snip_nudge,
    span_prompt,
    summary_prompt,
)
from foldline.config import Config, TranscriptConfig
from foldline.providers.anthropic import AnthropicProvider
from foldline.server.app import create_app
from foldline.server.backend import BackendRequest
from foldline.server.config import ServerConfig, SimulatedConfig
from foldline.server.simulated import (
    PROFILES,
    SimulatedBackend,
    draw_rounds,
    facts_for,
    generate_workspace,
    output_facts_for,
    planted_facts,
    user_prompts,
)
from foldline.server.simulated.summary import items_of
from foldline.server.testing import run_server
from foldline.simulation import SimulationReport, quantile, simulate
from foldline.testing import SimulatedProvider
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

MODEL = "claude-sonnet-4-5"
TOOLS = [
    t for t in tool_specs(default_tools()) if t["name"] in ("Read", "Edit", "Bash", "Grep", "Glob", "Snip")
]


def _request(messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None) -> BackendRequest:
    return BackendRequest(
        model=MODEL,
        messages=messages,
        tools=TOOLS if tools is None else tools,
        request_key="k",
        max_tokens=8192,
    )


def _user(text: str, tag: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    if tag:
        content.append({"type": "text", "text": f"[id:{tag}]"})
    return {"role": "user", "content": content}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _read_call(call_id: str, path: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}


def _result(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


def _text_of(request: BackendRequest) -> str:
    reply = SimulatedBackend(seed=1).reply(request)
    return "".join(str(b.get("text", "")) for b in reply.content)


def _config(tmp_path: Path, **overrides: Any) -> Config:
    transcript = TranscriptConfig(sessions_dir=tmp_path / "sessions", fsync="never")
    return Config(transcript=transcript, **{"context_window": 10**9, **overrides})


async def _run(
    tmp_path: Path, profile: str, turns: int, seed: int = 3, levels: bool = True, **config: Any
) -> SimulationReport:
    return await simulate(
        SimulatedProvider(seed=seed, profile=profile),
        profile=profile,
        turns=turns,
        seed=seed,
        workspace=tmp_path / "ws",
        sessions_dir=tmp_path / "sessions",
        config=_config(tmp_path, **config),
        levels=levels,
    )


# --- the world ------------------------------------------------------------------------------------


def test_the_same_seed_writes_the_same_workspace_and_its_tests_pass(tmp_path: Path) -> None:
    import subprocess
    import sys

    a, b = generate_workspace(tmp_path / "a", 5), generate_workspace(tmp_path / "b", 5)
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)
    assert (a / "data" / "measurements.csv").stat().st_size > 1_000_000  # the large data file
    assert (a / "logs" / "worker.log").stat().st_size > 200_000
    run = subprocess.run(
        [sys.executable, "-m", "unittest", "discover", "-s", "tests", "-q"],
        cwd=a,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert re.search(r"Ran [1-9]\d+ tests", run.stderr)


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_states_facts_early_and_asks_much_later(profile: str) -> None:
    prompts = user_prompts(profile, 100, seed=9)
    assert len(prompts) == 100
    for fact in facts_for(9):
        stated = next(i for i, p in enumerate(prompts) if fact.statement in p)
        asked = prompts.index(fact.question)
        assert stated < 12
        assert asked - stated >= 50


def test_facts_at_end_asks_the_first_fact_in_the_last_turn_and_every_other_just_before() -> None:
    prompts = user_prompts("feature", 1_000, seed=9, output_facts=True, facts_at_end=True)
    facts = planted_facts(9, output_facts=True)
    assert prompts[-1] == facts[0].question
    assert [prompts.index(f.question) for f in facts] == [999 - i for i in range(len(facts))]
    assert all(prompts.index(f.question) > 900 for f in facts)
    assert facts[0].statement in prompts[1]


def test_output_facts_are_run_early_asked_late_and_only_their_scripts_state_them(tmp_path: Path) -> None:
    import subprocess

    assert not any(p.startswith("Run `") for p in user_prompts("swe", 300, seed=9))  # opt-in
    prompts = user_prompts("swe", 300, seed=9, output_facts=True)
    workspace = generate_workspace(tmp_path / "ws", 9)
    for fact in output_facts_for(9):
        assert fact.script is not None
        ran = prompts.index(fact.statement)
        assert prompts.index(fact.question) - ran >= 150
        assert not any(fact.value in p for p in prompts)  # no prompt ever states the value
        out = subprocess.run(["sh", fact.script], cwd=workspace, capture_output=True, text=True, check=True)
        lines = out.stdout.splitlines()
        assert len(lines) > 50
        assert lines.count(fact.line) == 1  # once, in passing
    for fact in facts_for(9):  # the user's own facts are planted as before
        assert any(p.startswith(fact.statement) for p in prompts)


def test_rounds_per_turn_follow_the_measured_distribution() -> None:
    quantiles = SimulatedConfig().round_quantiles
    draws = [draw_rounds(i / 20_000, quantiles) for i in range(20_000)]
    assert quantile(draws, 0.5) == 1
    assert quantile(draws, 0.75) == 3
    assert quantile(draws, 0.9) == 8
    assert quantile(draws, 0.99) == 36
    assert max(draws) <= 75


# --- determinism ----------------------------------------------------------------------------------


def test_the_same_seed_and_request_give_byte_identical_replies_over_http() -> None:
    body = {
        "model": MODEL,
        "max_tokens": 1024,
        "tools": TOOLS,
        "messages": [_user("Explain how pricing and taxes interact.")],
    }
    replies = []
    for _ in range(2):
        with run_server(create_app(backend=SimulatedBackend(seed=4))) as url:
            with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client:
                replies.append(client.messages.with_raw_response.create(**body).http_response.content)
    assert replies[0] == replies[1]
    assert b'"tool_use"' in replies[0]  # it explores rather than echoing


def test_replies_depend_on_the_seed() -> None:
    prompts = [f"Look at module number {i} and explain it." for i in range(12)]
    first = [dumps(SimulatedBackend(seed=1).reply(_request([_user(p)])).content) for p in prompts]
    second = [dumps(SimulatedBackend(seed=2).reply(_request([_user(p)])).content) for p in prompts]
    assert first != second


# --- planted facts ----------------------------------------------------------------------------------


def test_a_planted_fact_in_view_is_answered() -> None:
    messages = [
        _user("Note for later: the staging port is 6543. Explain the parser.", "a1"),
        _assistant("Noted."),
        _user("What is the staging port?", "a2"),
    ]
    assert "The staging port is 6543." in _text_of(_request(messages))


def test_a_planted_fact_removed_from_the_request_is_not_known() -> None:
    messages = [
        _user("Explain the parser.", "a1"),
        _assistant("The parser reads rows."),
        _user("What is the staging port?", "a2"),
    ]
    answer = _text_of(_request(messages))
    assert answer.startswith("I don't know the staging port")
    assert not re.search(r"\d{4}", answer)


def test_the_latest_statement_of_a_fact_wins_and_the_question_itself_is_no_statement() -> None:
    messages = [
        _user("Note for later: the staging port is 6543.", "a1"),
        _assistant("Noted."),
        _user("Correction: the staging port is 7000. Thanks.", "a2"),
        _assistant("Noted."),
        _user("What is the staging port?", "a3"),
    ]
    assert "The staging port is 7000." in _text_of(_request(messages))


def test_a_fact_in_a_summary_sharing_the_questions_message_is_answered() -> None:
    """A client may hand a summary back in the same user message as the next prompt (its own text
    block before the prompt's): what it states is in view; only the question itself is no statement."""
    summary = "<collapsed-context id=c1>\n## Facts to Keep\nThe staging port is 6543.\n</collapsed-context>"
    question = "What is the staging port?"
    blocks = [{"type": "text", "text": summary}, {"type": "text", "text": question}]
    message = {"role": "user", "content": blocks}
    assert "The staging port is 6543." in _text_of(_request([message]))
    apart = [{"role": "user", "content": summary}, _assistant("Noted."), _user(question, "a1")]
    assert "The staging port is 6543." in _text_of(_request(apart))


def test_a_run_request_runs_the_command_and_the_answer_leaves_its_incidental_lines_out() -> None:
    prompt = "Run `sh scripts/stress_check.sh` and tell me whether it passes."
    reply = SimulatedBackend(seed=1).reply(_request([_user(prompt, "a1")]))
    calls = [b for b in reply.content if b.get("type") == "tool_use"]
    assert [(c["name"], c["input"]["command"]) for c in calls] == [("Bash", "sh scripts/stress_check.sh")]
    output = "step 1/3: ok\nthe stress test seed is 48213.\nstep 2/3: ok\n3 steps passed"
    messages = [
        _user(prompt, "a1"),
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Running it now."}, {**calls[0], "id": "t1"}],
        },
        {"role": "user", "content": [_result("t1", output), {"type": "text", "text": "[id:a2]"}]},
    ]
    answer = _text_of(_request(messages))
    assert "3 steps passed" in answer
    assert "48213" not in answer  # only the tool result holds the value


def test_a_fact_only_a_tool_result_states_is_known_while_the_result_is_in_view() -> None:
    def asked(result: str) -> str:
        return _text_of(
            _request(
                [
                    _user("Run `sh scripts/stress_check.sh` and tell me whether it passes.", "a1"),
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Running it now."},
                            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "sh x"}},
                        ],
                    },
                    {"role": "user", "content": [_result("t1", result), {"type": "text", "text": "[id:a2]"}]},
                    _assistant("It passes: 3 steps passed."),
                    _user("What is the stress test seed?", "a3"),
                ]
            )
        )

    assert "The stress test seed is 48213." in asked("step 1/3: ok\nthe stress test seed is 48213.\nok")
    assert asked("[Old tool result content cleared]").startswith("I don't know the stress test seed")


def test_a_summary_keeps_a_plain_statement_from_a_tool_result() -> None:
    messages = [
        _user("Run `sh scripts/stress_check.sh` and tell me whether it passes.", "t0"),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Running it now."},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "sh x"}},
            ],
        },
        {
            "role": "user",
            "content": [
                _result(
                    "t1", "step 1/2: ok\nthe stress test seed is 48213.\nthe value is clamped, then scaled"
                ),
                {"type": "text", "text": "[id:t1]"},
            ],
        },
        _assistant("It passes."),
    ]
    parsed = parse_sections(_text_of(_request([*messages, _user(summary_prompt())])), SUMMARY_SECTIONS)
    assert parsed is not None
    text = "\n".join(parsed.values())
    assert "the stress test seed is 48213." in text
    assert "the value is clamped" not in text  # a line that is no plain statement stays out


@pytest.mark.anyio
async def test_planted_facts_are_answered_through_a_real_session(tmp_path: Path) -> None:
    report = await _run(tmp_path, "debug", 12, seed=11)
    assert report.errors == []
    assert report.stopped is None
    facts = {f.question: f.value for f in facts_for(11)}
    asked = [(prompt, answer) for prompt, answer in report.answers if prompt in facts]
    assert asked
    for prompt, answer in asked:
        assert facts[prompt] in answer


# --- summaries --------------------------------------------------------------------------------------

_words = st.text(alphabet="abcdefghij klmnop.:-_/\n0123456789", min_size=1, max_size=120)


@st.composite
def _conversation(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for n in range(draw(st.integers(1, 6))):
        messages.append(_user(draw(_words), f"t{n}"))
        uses = [
            {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": "Read", "input": {"file_path": draw(_words)}}
            for i in range(draw(st.integers(0, 2)))
        ]
        messages.append({"role": "assistant", "content": [{"type": "text", "text": draw(_words)}, *uses]})
        if uses:
            results = [{"type": "tool_result", "tool_use_id": u["id"], "content": draw(_words)} for u in uses]
            messages.append({"role": "user", "content": [*results, {"type": "text", "text": f"[id:r{n}]"}]})
            messages.append(_assistant(draw(_words)))
    return messages


@given(_conversation(), st.booleans())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_summary_holds_only_text_from_its_request(messages: list[dict[str, Any]], span: bool) -> None:
    instruction = span_prompt("t0", f"t{len(messages) // 4}") if span else summary_prompt("keep paths")
    sections = SPAN_SECTIONS if span else SUMMARY_SECTIONS
    request = _request([*messages, _user(instruction)])
    reply = _text_of(request)
    texts = [i.text for i in items_of(request.messages)]
    titles = [line[3:] for line in reply.splitlines() if line.startswith("## ")]
    assert titles == list(sections)
    for line in reply.splitlines():
        if line.strip() and not line.startswith("## "):
            assert any(line in text for text in texts), line


def test_summaries_parse_with_the_client_reader_and_keep_the_planted_facts() -> None:
    messages = [
        _user("Note for later: the staging port is 6543. Fix the parser.", "t0"),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading it."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Read",
                    "input": {"file_path": "src/parser.py"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "1\tdef parse():\n2\t    raise ValueError",
                },
                {"type": "text", "text": "[id:t1]"},
            ],
        },
        _assistant("The parser raises ValueError on empty rows."),
        _user("Then run the tests.", "t2"),
        _assistant("Ran 12 tests: OK."),
    ]
    for instruction, sections in (
        (summary_prompt(), SUMMARY_SECTIONS),
        (span_prompt("t0", "t2"), SPAN_SECTIONS),
    ):
        parsed = parse_sections(_text_of(_request([*messages, _user(instruction)])), sections)
        assert parsed is not None
        assert any("the staging port is 6543" in text for text in parsed.values())
    full = parse_sections(_text_of(_request([*messages, _user(summary_prompt())])), SUMMARY_SECTIONS)
    assert full is not None
    assert "src/parser.py" in full["Files and Code Sections"]
    assert "raise ValueError" in full["Errors and Fixes"]


def test_a_span_summary_covers_only_its_span() -> None:
    messages = [
        _user("Note for later: the staging port is 6543.", "t0"),
        _assistant("Noted."),
        _user("Note for later: the release codename is iron-lynx.", "t1"),
        _assistant("Noted."),
    ]
    reply = _text_of(_request([*messages, _user(span_prompt("t1", "t1"))]))
    assert "iron-lynx" in reply
    assert "6543" not in reply


# --- Snip -----------------------------------------------------------------------------------------------


def _bulky_history() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [_user("Read the logs.", "p0")]
    for n in range(4):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"file_path": "x.log"}}
                ],
            }
        )
        size = 9_000 if n < 2 else 100
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": "x" * size},
                    {"type": "text", "text": f"[id:r{n}]"},
                ],
            }
        )
    messages.append(_assistant("Done reading."))
    return messages


def test_told_it_may_the_model_snips_old_bulky_results() -> None:
    history = _bulky_history()
    nudged = _request([*history, _user("Now explain the parser.\n" + snip_nudge(85), "p1")])
    reply = SimulatedBackend(seed=1).reply(nudged)
    snips = [b for b in reply.content if b.get("type") == "tool_use" and b["name"] == "Snip"]
    assert len(snips) == 1
    assert snips[0]["input"]["ids"] == ["r0", "r1"]  # the two bulky ones, never the small ones


def test_without_the_reminder_or_the_tool_the_model_never_snips() -> None:
    history = _bulky_history()
    plain = SimulatedBackend(seed=1).reply(_request([*history, _user("Now explain the parser.", "p1")]))
    no_tool = SimulatedBackend(seed=1).reply(
        _request([*history, _user("Now explain the parser.\n" + snip_nudge(85), "p1")], tools=TOOLS[:-1])
    )
    for reply in (plain, no_tool):
        assert not any(b.get("type") == "tool_use" and b["name"] == "Snip" for b in reply.content)


# --- whole sessions -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_session_explores_reads_edits_and_runs_the_tests(tmp_path: Path) -> None:
    report = await _run(tmp_path, "refactor", 16, seed=0)
    assert report.errors == []
    assert report.stopped is None
    assert report.turns_done == 16
    for tool in ("Glob", "Grep", "Read", "Bash", "Edit"):
        assert report.tool_calls.get(tool, 0) > 0, report.tool_calls
    assert report.tool_errors == 0  # every Edit's old_string came from a visible Read, so it applied
    edited = [p for p in (tmp_path / "ws").rglob("*.py") if "# checked:" in p.read_text()]
    assert edited
    assert all(answer for _, answer in report.answers)


@pytest.mark.anyio
async def test_a_small_window_without_compaction_stops_at_the_blocking_limit(tmp_path: Path) -> None:
    report = await _run(tmp_path, "debug", 40, seed=3, levels=False, context_window=60_000)
    assert report.errors == []
    assert report.stopped is not None
    assert "over the blocking limit" in report.stopped
    assert "run /compact" in report.stopped
    assert report.turns_done < 40


@pytest.mark.anyio
async def test_a_session_runs_against_foldline_serve_over_http(tmp_path: Path) -> None:
    backend = SimulatedBackend(seed=5, profile="feature")
    config = ServerConfig(context_window=10**9)
    with run_server(create_app(config, backend=backend)) as url:
        report = await simulate(
            AnthropicProvider(base_url=url, api_key="k"),
            profile="feature",
            turns=6,
            seed=5,
            workspace=tmp_path / "ws",
            sessions_dir=tmp_path / "sessions",
            config=_config(tmp_path),
            levels=False,  # every request is the main loop's: no ctx-agent or memory forks
        )
    assert report.errors == []
    assert report.turns_done == 6
    assert backend.answered == len(report.request_tokens) >= 6
    assert all(tokens > 0 for tokens in report.request_tokens)


def test_foldline_simulate_prints_the_sessions_statistics(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from foldline.cli import cli

    args = [
        "simulate",
        "--profile",
        "swe",
        "--turns",
        "3",
        "--seed",
        "1",
        "--workspace",
        str(tmp_path / "ws"),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "turns completed        3 of 3" in result.output
    assert "API/engine errors      0" in result.output
    assert (tmp_path / "ws" / "data" / "measurements.csv").is_file()


@pytest.mark.anyio
async def test_through_the_engine_a_snip_removes_old_bulky_results(tmp_path: Path) -> None:
    from foldline.session import Session
    from foldline.timeline import SnipBoundary, UserEntry
    from foldline.tools import default_tools

    workspace = generate_workspace(tmp_path / "ws", seed=4)
    provider = SimulatedProvider(seed=4, profile="debug")
    async with Session.open(
        tmp_path / "s.jsonl",
        provider=provider,
        workspace=workspace,
        config=_config(tmp_path),
        tools=default_tools(),
        permission_mode="bypassPermissions",
        fsync="never",
    ) as session:
        await session.submit_message("Read logs/worker.log and logs/app.log and find the errors.")
        await session.submit_message("Explain the parser module.\n" + snip_nudge(85))
        records = session.engine.timeline.snapshot()
    boundaries = [r for r in records if isinstance(r, SnipBoundary)]
    assert len(boundaries) == 1
    removed = set(boundaries[0].removed_uuids)
    removed_entries = [r for r in records if isinstance(r, UserEntry) and r.uuid in removed]
    assert removed_entries
    assert all(isinstance(e.message.content, list) for e in removed_entries)  # tool results, not prompts
    results = [
        b
        for r in records
        if isinstance(r, UserEntry) and isinstance(r.message.content, list)
        for b in r.message.content
        if b.get("type") == "tool_result"
    ]
    assert not any(b.get("is_error") for b in results)
    from foldline.compact.snip import short_id

    sent = dumps(provider.calls[-1].body).decode()
    assert not any(f"[id:{short_id(uuid)}]" in sent for uuid in removed)  # gone from the next request


@pytest.mark.anyio
async def test_a_managed_session_reports_its_economics_facts_and_receipts(tmp_path: Path) -> None:
    report = await _run(tmp_path, "debug", 20, seed=3, levels=True, context_window=60_000)
    assert report.errors == []
    assert report.stopped is None
    assert report.turns_done == 20
    # every request is metered: the main loop's are the timeline's replies, the rest are forks
    assert report.api_calls == report.main_requests + report.fork_requests + report.http_400s
    assert report.main_requests >= report.turns_done
    assert report.fork_requests > 0  # levels on: ctx-agent, session memory or summary requests ran
    usage = report.usage
    assert usage.requests == report.main_requests + report.fork_requests
    assert report.peak_request == max(r.prompt for r in report.requests) > 0
    assert 0.0 <= usage.read_share <= 1.0
    assert usage.cost() > 0
    # planted facts: stated early, asked later, each answer scored against the fact's value
    assert report.facts_planted > 0
    assert 0 < report.facts_asked == len(report.fact_answers)
    assert report.facts_retained <= report.facts_asked
    assert report.facts_retained == sum(1 for *_, kept in report.fact_answers if kept)
    # the window is small: some level beyond the level-0 budget acted and left its receipt
    acted = {k: v for k, v in report.receipts.items() if k != "receipt:tool_result_budget"}
    assert sum(acted.values()) > 0, report.receipts
    assert any(line.startswith("planted facts") for line in report.lines())


@pytest.mark.anyio
async def test_two_runs_of_one_seed_draw_the_same_ids_and_do_the_same_work_through_folds(
    tmp_path: Path,
) -> None:
    """Entry ids reach the model (every user message's tag, every collapse id): drawn from the OS,
    they made reruns of one benchmark row differ by up to 10%. Drawn from the seed, they cannot. The
    workspace's folder name reaches it too (tool results and summaries quote absolute paths): two
    random names of one length must not change the work either.

    Not byte for byte: real commands run, and `ls -la`'s times and unittest's "Ran 12 tests in
    0.004s" follow the clock. Those bytes feed the hashes that name simulated tool calls and saved
    outputs, and a summary quoting a name of other tokens moves a request by a few tokens (one run
    in three under load). So the ids themselves are compared, entry by entry, over the first turns
    (the same until that drift could move a fold), and the whole runs within bounds that hold it."""
    folders = ("tmpaaaaaaaa", "tmpq_3zk9x1")
    runs = [await _run(tmp_path / name, "debug", 60, context_window=60_000) for name in folders]
    assert runs[0].turns_done == runs[1].turns_done == 60
    assert runs[0].receipts.get("collapse_commit", 0) > 0  # ids of folds were drawn and sent
    assert runs[0].receipts.get("receipt:autocompact:compacted", 0) > 0  # summaries quote the folder
    ids = [
        [uuid for line in path.read_text().splitlines() if (uuid := json.loads(line).get("uuid"))]
        for path in (tmp_path / name / "sessions" / "simulated-debug-3.jsonl" for name in folders)
    ]
    assert len(ids[0]) > 100
    assert ids[0][:100] == ids[1][:100]  # drawn from the OS, not even the first would match
    assert runs[0].fact_answers == runs[1].fact_answers
    first, second = (run.usage for run in runs)
    assert abs(runs[0].api_calls - runs[1].api_calls) <= runs[0].api_calls // 100
    assert abs(first.cost() - second.cost()) <= 0.005 * first.cost()
