"""Earlier work the user refers back to (`simulated/earlier.py`): the model resolves it from what the
request holds, pays to recover a file or a result it lost, misses a decision it lost, and the
harness scores each referring turn against the profile's true referent."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foldline.server.backend import BackendRequest
from foldline.server.config import SimulatedConfig
from foldline.server.simulated import SimulatedBackend, earlier
from foldline.server.simulated.profiles import (
    Reference,
    facts_for,
    planted_facts,
    reference_positions,
    references_for,
    user_prompts,
)
from foldline.server.simulated.toolbox import Toolbox
from foldline.simulation import SimulationReport, score_references, simulate
from foldline.testing import SimulatedProvider
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

SEED = 3
FILE, RESULT, DECISION, _ = references_for(SEED)
FAILING = f"FAIL: {RESULT.referent}"
RUN_OUTPUT = "\n".join(
    [*(f"test_{n}_ok (tests.test_money.TestMoney) ... ok" for n in range(30)), FAILING, "FAILED (failures=1)"]
)

RENAMES = {"Bash": "run_shell_command", "Read": "read_file", "Edit": "edit_file"}


def _tools(renamed: bool) -> list[dict[str, Any]]:
    specs = tool_specs(default_tools())
    return [{**s, "name": RENAMES.get(s["name"], s["name"])} if renamed else s for s in specs]


def _use(id_: str, name: str, tool_input: dict[str, Any], renamed: bool) -> dict[str, Any]:
    named = RENAMES.get(name, name) if renamed else name
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": id_, "name": named, "input": tool_input}],
    }


def _result(id_: str, text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id_, "content": text}]}


def _said(text: str, role: str = "assistant") -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": text}]}


def _earlier_turns(renamed: bool) -> list[dict[str, Any]]:
    """The three early turns as a client would have sent them: a fix, a check run, a decision."""
    edit = {
        "file_path": FILE.referent,
        "old_string": "def f(value: int) -> int:",
        "new_string": f"x  # fixed: {FILE.topic}",
    }
    return [
        _said(FILE.statement, "user"),
        _use("t1", "Edit", edit, renamed),
        _result("t1", "The file was edited."),
        _said("Done."),
        _said(RESULT.statement, "user"),
        _use("t2", "Bash", {"command": f"sh {RESULT.script}"}, renamed),
        _result("t2", RUN_OUTPUT),
        _said("It finished with an error: FAILED (failures=1)."),
        _said(DECISION.statement, "user"),
        _said("Agreed."),
    ]


def _summary(wording: str) -> list[dict[str, Any]]:
    """The early turns as a summary holds them: the answer lines that name the work, in any wording."""
    lines = (
        f"Fixed the {FILE.topic} in `f`: changed {FILE.referent}.\n"
        f"`sh {RESULT.script}` failed:\n{FAILING}\n"
        f"The user said: {DECISION.statement}"
    )
    return [_said(f"{wording}\n\n{lines}", "user"), _said("Understood.")]


MODULE = DECISION.question.split(" to the ")[1].split()[0]


def _asked(reference: Reference, renamed: bool) -> list[dict[str, Any]]:
    """The referring prompt; for a decision, with the module found and read (its next call is the
    edit that applies the decision)."""
    asked = [_said(reference.question, "user")]
    if reference.kind != "decision":
        return asked
    find = f"find . -name '{MODULE}.py' -not -path '*/.*'"
    return [
        *asked,
        _use("d1", "Bash", {"command": find, "description": "Find it"}, renamed),
        _result("d1", f"./src/pkg/{MODULE}.py"),
        _use("d2", "Read", {"file_path": f"src/pkg/{MODULE}.py"}, renamed),
        _result("d2", '     1\t"""A module."""\n     2\tSETTING_VERSION = 6\n'),
    ]


def _calls(system: str, messages: list[dict[str, Any]], renamed: bool) -> list[tuple[str, dict[str, Any]]]:
    """The calls the model makes next, in its own terms (tool names and paths read back)."""
    tools = _tools(renamed)
    request = BackendRequest(model="m", messages=messages, system=system, tools=tools)
    reply = SimulatedBackend(seed=SEED).reply(request)
    toolbox = Toolbox.of(tools, messages, [])
    return [toolbox.canonical(b["name"], b["input"]) for b in reply.content if b.get("type") == "tool_use"]


DISTRACTORS = (
    f"When we fixed the {FILE.topic} we changed src/elsewhere/other.py.",
    f"The test that failed in the {RESULT.topic}: test_other (tests.test_other.TestOther).",
    f"Let's keep the {DECISION.topic} as something else entirely, not {DECISION.referent}.",
)


def _history(kind: str, wording: str, renamed: bool) -> list[dict[str, Any]]:
    if kind == "raw":
        return _earlier_turns(renamed)
    return _summary(wording) if kind == "summary" else []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # a system prompt that states other referents, or any text: never where a referent is read from
    system=st.one_of(st.just("\n".join(DISTRACTORS)), st.text(max_size=40)),
    wording=st.sampled_from(("Summary of the conversation so far:", "Here is where we are.", "CONTEXT")),
    renamed=st.booleans(),
    history=st.sampled_from(("raw", "summary", "none")),
    reference=st.sampled_from((FILE, RESULT, DECISION)),
)
def test_a_referring_turns_work_depends_only_on_the_prompts_and_what_the_request_holds(
    system: str, wording: str, renamed: bool, history: str, reference: Reference
) -> None:
    messages = [*_history(history, wording, renamed), *_asked(reference, renamed)]
    # the same visible conversation under foldline's tool names, with no system prompt and the
    # summary in one wording
    plain = [*_history(history, "Summary:", False), *_asked(reference, False)]
    calls = _calls(system, messages, renamed)
    assert calls == _calls("", plain, False)
    if history != "none":  # and whether raw or summarized, the work found the referent
        [(_, work)] = calls
        assert reference.target in " ".join(map(str, work.values()))


def test_a_request_that_holds_the_referent_goes_straight_to_it() -> None:
    for reference in (FILE, RESULT):
        [(kind, tool_input)] = _calls("", [*_earlier_turns(False), _said(reference.question, "user")], False)
        assert kind == "Bash"
        assert reference.target in tool_input["command"]


def test_a_request_that_lost_the_referent_pays_a_search_or_cannot_know_the_decision() -> None:
    [(_, search)] = _calls("", [_said(FILE.question, "user")], False)
    assert search["command"] == f"grep -rl -- '{FILE.recovery}' src"
    [(_, find)] = _calls("", [_said(RESULT.question, "user")], False)
    assert find["command"].startswith("find . -name '*customers_check*'")
    # a decision cannot be recovered: the module is marked without it
    [(kind, edit)] = _calls("", _asked(DECISION, False), False)
    assert kind == "Edit"
    assert DECISION.referent not in edit["new_string"]
    assert "no decision found" in edit["new_string"]


def test_references_are_deterministic_per_seed_and_never_share_a_turn_with_a_fact() -> None:
    assert references_for(11) == references_for(11)
    assert references_for(11) != references_for(12)
    prompts = user_prompts("debug", 100, 11, output_facts=True, references=True)
    assert prompts == user_prompts("debug", 100, 11, output_facts=True, references=True)
    for reference in references_for(11):
        early, late = prompts.index(reference.statement), prompts.index(reference.question)
        assert 0 < early < late
        assert late - early >= 50, "referred to about 60% of the session later"
    asked = [p for p in prompts if p.startswith("What is the")]
    assert len(asked) == len(facts_for(11)) + 3, "every fact still asked"
    assert reference_positions(40, 4, {2, 26}) == [(4, 28), (6, 30), (8, 32), (10, 34)]
    for turns, at_end in itertools.product((40, 45, 57, 100), (False, True)):
        typed = user_prompts("swe", turns, 11, output_facts=True, facts_at_end=at_end, references=True)
        for fact in planted_facts(11, output_facts=True):
            assert fact.question in typed, (turns, at_end)
            assert any(p.startswith(fact.statement) for p in typed), (turns, at_end)
        # a reference that would land on a fact's turn moves on, or is left out where none is free
        referred = [r for r in references_for(11) if r.question in typed]
        assert len(referred) >= 3, (turns, at_end)
        assert all(r.statement in typed for r in referred)


def test_sessions_without_references_are_unchanged() -> None:
    assert user_prompts("feature", 40, 5, output_facts=True) == user_prompts(
        "feature", 40, 5, output_facts=True, references=False
    )
    assert not any(p.startswith("Rerun") for p in user_prompts("feature", 40, 5))


def test_other_prompts_never_meet_the_reference_work_or_its_round_cap() -> None:
    capped = SimulatedBackend(seed=SEED, config=SimulatedConfig(max_reference_rounds=0))
    for prompt in user_prompts("swe", 12, SEED, output_facts=True):
        request = BackendRequest(model="m", messages=[_said(prompt, "user")], tools=_tools(False))
        assert capped.reply(request) == SimulatedBackend(seed=SEED).reply(request), prompt


def _session(tmp_path: Path, *, levels: bool) -> SimulationReport:
    return asyncio.run(
        simulate(
            SimulatedProvider(seed=SEED, profile="debug"),
            profile="debug",
            turns=24,
            seed=SEED,
            workspace=tmp_path / "ws",
            sessions_dir=tmp_path / "sessions",
            references=True,
            levels=levels,
        )
    )


def test_a_session_scores_each_referring_turn_against_the_true_referent(tmp_path: Path) -> None:
    report = _session(tmp_path, levels=False)
    assert report.references == 4
    outcomes = {kind: (recovered, missed) for kind, _, recovered, missed in report.reference_outcomes}
    # nothing compacted away: the file and the decision are in view; the check's bulky output is the
    # one thing the model itself snipped, so it runs the check again (a paid recovery, not a miss)
    assert outcomes["file"] == (False, False)
    assert outcomes["decision"] == (False, False)
    assert report.quality_misses == 0
    # the harness, not the model, knows the referent: a turn that ran another module's tests misses
    prompt, calls = next(t for t in report.reference_turns if t[0] == FILE.question)
    report.reference_turns = [(prompt, [c.replace(FILE.target, "tests.test_elsewhere") for c in calls])]
    score_references(report)
    assert (report.references, report.quality_misses) == (1, 1)


def _reply_text(messages: list[dict[str, Any]]) -> str:
    request = BackendRequest(model="m", messages=messages, tools=_tools(False))
    return "".join(
        b["text"] for b in SimulatedBackend(seed=SEED).reply(request).content if b["type"] == "text"
    )


def _reminded(text: str) -> str:
    """A tool's output as Claude Code hands it back after a Bash run: a reminder of its own appended."""
    return (
        f"{text}\n\n<system-reminder>\n<total_tokens>14970109 tokens left</total_tokens>\n</system-reminder>"
    )


def test_a_client_reminder_appended_to_a_tool_result_is_no_line_of_the_output() -> None:
    messages = [
        _said(f"<system-reminder>\nToday is Sunday.\n</system-reminder>\n{RESULT.statement}", "user"),
        _use("t1", "Bash", {"command": f"sh {RESULT.script}", "description": "Run it"}, False),
        _result("t1", _reminded(RUN_OUTPUT)),
    ]
    answer = _reply_text(messages)
    assert f"`sh {RESULT.script}` finished: FAILED (failures=1), failing {RESULT.referent}." in answer
    assert "</system-reminder>" not in answer


def _compacted(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`history` compacted the way Claude Code does it: the simulated model's summary of it, handed
    back as the first user message behind a notice and a reminder."""
    summary = _reply_text([*history, _said("Summarize the conversation so far.", "user")])
    notice = (
        "This session is being continued from a previous conversation. The summary below covers it.\n\n"
        "<system-reminder>\n<tools-used-before-summary>Bash, Edit</tools-used-before-summary>\n"
        f"</system-reminder>\nSummary:\n{summary}"
    )
    return [_said(notice, "user"), _said("Understood.")]


def test_earlier_work_survives_a_summary_of_a_summary() -> None:
    raw = _earlier_turns(False)
    # the answers in the model's own words: the fix names its file, the check run its failing test
    fixed = _said(f"Fixed the {FILE.topic} in `f`: changed {FILE.referent}. Its tests: OK.")
    history = [*raw[:3], fixed, *raw[4:7], _said(_reply_text(raw[4:7])), *raw[8:]]
    once = _compacted(history)
    later = [_said(f"Look at module {n} and tell me what it does.", "user") for n in range(3)]
    twice = _compacted([*once, *(m for prompt in later for m in (prompt, _said("It scales values.")))])
    for reference in (FILE, RESULT):
        [(kind, tool_input)] = _calls("", [*twice, _said(reference.question, "user")], False)
        assert (kind, reference.target in tool_input["command"]) == ("Bash", True), reference.kind
    [(kind, edit)] = _calls("", [*twice, *_asked(DECISION, False)], False)
    assert (kind, DECISION.referent in edit["new_string"]) == ("Edit", True)


def test_a_summary_of_several_failing_runs_still_names_each_checks_test() -> None:
    other = "test_other (tests.test_other.TestOther)"
    summary = (
        f"`sh {RESULT.script}` finished: FAILED (failures=1), failing {RESULT.referent}.\n"
        f"`sh scripts/other_check.sh` finished: FAILED (failures=1), failing {other}."
    )
    messages = [_said(summary, "user"), _said("Understood."), _said(RESULT.question, "user")]
    assert earlier.failed_test(messages, RESULT.topic, RESULT.question, lambda n, i: (n, dict(i))) == (
        RESULT.referent
    )


def test_a_transcript_line_quoted_by_a_search_is_read_with_its_escapes() -> None:
    """A search of a JSON-lines transcript quotes a stored line whole: several answers joined by
    `\\n` escapes, cut after the match. The answer before the referent's must not lend it its file
    (a debug session reran the wrong module's tests this way)."""
    other = "src/pkg/other.py"
    said = f"Fixed the drift bug in `g`: changed {other}.\nAgreed.\nFixed the {FILE.topic} in `f"
    stored = json.dumps({"message": {"content": said}})
    search = {"pattern": "keep the", "path": "/sessions/s.jsonl", "output_mode": "content"}
    messages = [
        *_summary("Summary of the earlier conversation:"),
        _use("g1", "Grep", search, False),
        _result("g1", f"/sessions/s.jsonl:12:{stored[:-3]}…"),
        _said("Found it."),
        _said(FILE.question, "user"),
    ]
    assert "\\n" in messages[-3]["content"][0]["content"]  # the line as stored, its escapes unread
    canonical = Toolbox.of(_tools(False), messages, []).canonical
    assert earlier.changed_file(messages, FILE.topic, FILE.question, canonical) == FILE.referent
    [(kind, tool_input)] = _calls("", messages, False)
    assert (kind, FILE.target in tool_input["command"]) == ("Bash", True)
