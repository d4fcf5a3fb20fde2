"""Lossy summaries (`SimulatedConfig.summary_fidelity`, `summary_fact_budget`): at full fidelity the
summaries are what they always were; below it each statement survives one summary with probability
q, drawn from the content alone (never the request's wording), is gone from every line of the
summary when lost, and compounds over recursive summaries."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.server.summary_cases import digest, in_progress
from tests.server.test_simulated_rewording import _instructions
from tests.server.test_simulated_summary import ECONOMICS, WORDINGS

from foldline.compact.autocompact import SUMMARY_LEAD
from foldline.compact.prompts import summary_prompt
from foldline.server.backend import BackendRequest
from foldline.server.config import SimulatedConfig
from foldline.server.simulated import SimulatedBackend
from foldline.server.simulated import summary as summary_module
from foldline.server.simulated.summary import read_progress
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

MODEL = "claude-sonnet-4-5"


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _backend(
    q: float = 1.0, budget: int = SimulatedConfig().summary_fact_budget, seed: int = 1
) -> SimulatedBackend:
    return SimulatedBackend(seed=seed, config=SimulatedConfig(summary_fidelity=q, summary_fact_budget=budget))


def _summary(
    backend: SimulatedBackend,
    messages: list[dict[str, Any]],
    instruction: str,
    *,
    system: str = "",
    tools: list[dict[str, Any]] | None = None,
) -> str:
    request = BackendRequest(
        model=MODEL, messages=[*messages, _user(instruction)], tools=tools or [], system=system or None
    )
    return "".join(str(b.get("text", "")) for b in backend.reply(request).content)


def _session(facts: list[tuple[str, str]], tag: str = "") -> list[dict[str, Any]]:
    """Facts said every way a session says them: in a typed prompt with a task after it (and the
    model's "Noted:" answer), as the one statement of a script's output line, in an assistant's text."""
    messages: list[dict[str, Any]] = []
    for n, (subject, value) in enumerate(facts):
        statement = f"the {subject} is {value}."
        if n % 3 == 0:
            messages.append(_user(f"Note for later: {statement} Fix the parser in module {tag}{n}."))
            messages.append(_assistant(f"Noted: {statement}\nI fixed the parser in module {tag}{n}."))
        elif n % 3 == 1:
            messages.append(_user(f"Run the check script {tag}{n} and tell me whether it passes."))
            call = {
                "type": "tool_use",
                "id": f"toolu_{n}",
                "name": "Bash",
                "input": {"command": f"sh c{n}.sh"},
            }
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "Running it."}, call]})
            output = f"step 1/2: batch ok\n{statement}\nstep 2/2: batch ok"
            result = {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": output}
            messages.append({"role": "user", "content": [result]})
            messages.append(_assistant(f"It passes: check {tag}{n} is green."))
        else:
            messages.append(_user(f"Look at the config of service {tag}{n}."))
            messages.append(_assistant(f"I read the config of service {tag}{n}; {statement}"))
    return messages


FACTS = [
    ("staging port", "6543"),
    ("stress test seed", "48213"),
    ("release codename", "quiet-heron"),
    ("on-call reviewer", "Ada Okafor"),
    ("preview deploy id", "dep-604211"),
    ("retry limit", "90817"),
]


def _kept(summary: str, facts: list[tuple[str, str]]) -> list[str]:
    return [subject for subject, value in facts if f"the {subject} is {value}" in summary]


def test_at_full_fidelity_summaries_are_byte_identical_to_summaries_that_lose_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """q = 1 under a budget that does not bind is the summarizer with no loss step at all."""
    full = digest(_backend(1.0, budget=10**6))
    budgeted = digest(_backend(1.0))  # the 91-statement case is past the default budget
    lossy = digest(_backend(0.9, budget=10**6))
    monkeypatch.setattr(summary_module, "dropped_statements", lambda *args, **kwargs: frozenset())
    assert digest(_backend(1.0, budget=10**6)) == full
    assert budgeted != full
    assert lossy != full


@pytest.mark.parametrize(
    "wording", ["foldline", "bare", "opencode-like", "openhands-like", "claude-code-like"]
)
def test_at_zero_fidelity_no_value_of_the_content_is_left_anywhere_in_the_summary(wording: str) -> None:
    messages = _session(FACTS)
    full = _summary(_backend(1.0), messages, WORDINGS[wording])
    assert _kept(full, FACTS) == [s for s, _ in FACTS]
    lossy = _summary(_backend(0.0), messages, WORDINGS[wording])
    assert [v for _, v in FACTS if re.search(rf"\b{re.escape(v)}\b", lossy, re.I)] == []
    # the rest of each line stays: the prompt's task, the assistant's work, the tool call
    assert "Fix the parser in module 0." in lossy
    assert "I fixed the parser in module 0." in lossy
    assert "sh c1.sh" in lossy


def test_a_lost_fact_in_the_request_still_being_worked_on_states_nothing_but_reads_back_whole() -> None:
    messages = in_progress()
    lossy = _summary(_backend(0.0), messages, summary_prompt())
    assert "6543" not in lossy
    assert "staging port" not in lossy
    assert read_progress(lossy) == (messages[0]["content"][0]["text"], 1)  # the same turn goes on
    assert "Fix the parser in calc.py" in lossy  # the line shows what is still readable of it


def test_the_budget_keeps_the_most_recent_statements_and_loses_the_oldest_everywhere() -> None:
    messages = _session(FACTS)
    kept = _kept(_summary(_backend(1.0, budget=2), messages, summary_prompt()), FACTS)
    assert kept == ["preview deploy id", "retry limit"]
    summary = _summary(_backend(1.0, budget=2), messages, summary_prompt())
    assert "6543" not in summary  # the oldest, said in a prompt and in the answer, gone from both


def _tagged(message: dict[str, Any], index: int) -> dict[str, Any]:
    """`message` as a client may send it: an id tag in a prompt's text and as a block of its own,
    a system reminder in a tool result's text and as a block of its own."""
    if message["role"] != "user":
        return message
    blocks = []
    for block in message["content"]:
        if block["type"] == "text":
            blocks.append({**block, "text": f"{block['text']} [id:m{index}]"})
        else:
            reminder = "\n<system-reminder>Context 40% used; results may be cleared.</system-reminder>"
            blocks.append({**block, "content": block["content"] + reminder})
    extra = [
        {"type": "text", "text": f"[id:n{index}]"},
        {"type": "text", "text": "<system-reminder>Plan mode is off.</system-reminder>"},
    ]
    return {**message, "content": [*blocks, *extra]}


def test_the_draw_ignores_tags_reminders_the_system_prompt_and_the_tools() -> None:
    messages = _session(FACTS)
    tagged = [_tagged(m, index) for index, m in enumerate(messages)]
    tool = {"name": "Frobnicate", "description": "Does things.", "input_schema": {"type": "object"}}
    backend = _backend(0.5)
    plain = _kept(_summary(backend, messages, summary_prompt()), FACTS)
    other = _summary(backend, tagged, summary_prompt(), system="You are a terse agent.", tools=[tool])
    assert _kept(other, FACTS) == plain
    assert 0 < len(plain) < len(FACTS)  # some lost and some kept: the comparison can fail


def test_the_seed_changes_which_facts_are_lost() -> None:
    messages = _session(FACTS)
    by_seed = {
        tuple(_kept(_summary(_backend(0.5, seed=s), messages, summary_prompt()), FACTS)) for s in range(6)
    }
    assert len(by_seed) > 1


# --- neutrality properties --------------------------------------------------------------------------

_subjects = st.lists(
    st.sampled_from(["port", "codename", "reviewer", "limit", "flag", "seed", "region"]),
    min_size=1,
    max_size=12,
)


@given(_subjects, st.integers(1000, 99999), _instructions(), st.floats(0.2, 0.8))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_wording_of_the_request_keeps_the_same_facts_of_the_same_content(
    names: list[str], base: int, instruction: str, q: float
) -> None:
    facts = [(f"{name} {n}", str(base + n)) for n, name in enumerate(names)]
    messages = _session(facts)
    backend = _backend(q)
    reference = _kept(_summary(backend, messages, summary_prompt()), facts)
    assert _kept(_summary(backend, messages, instruction), facts) == reference
    for wording in WORDINGS.values():
        assert _kept(_summary(backend, messages, wording), facts) == reference


def _within(kept: int, draws: int, p: float) -> bool:
    """Whether `kept` of `draws` is within 4.5 standard deviations of `p` (binomial): a chance of
    about 7 in a million of a false alarm; q ignored (p = 1) or inverted (1 - p) falls far outside
    for p between 0.1 and 0.9 at the draw counts used here."""
    return abs(kept - draws * p) <= 4.5 * math.sqrt(draws * p * (1 - p))


@given(st.floats(0.1, 0.9), st.integers(0, 10**6))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_over_many_contents_the_share_of_facts_kept_is_q(q: float, salt: int) -> None:
    backend = _backend(q)
    kept = draws = 0
    for n in range(150):
        facts = [(f"port {k}", f"{salt}-{n}-{k}") for k in range(3)]
        kept += len(_kept(_summary(backend, _session(facts, tag=f"{salt}x{n}x"), summary_prompt()), facts))
        draws += len(facts)
    assert _within(kept, draws, q), (kept, draws, q)
    assert not _within(kept, draws, 1 - q) or abs(q - 0.5) < 0.15  # the bound tells q from 1 - q


@given(st.floats(0.5, 0.9), st.integers(0, 10**6))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_fact_carried_through_k_summaries_survives_with_about_q_to_the_k(q: float, salt: int) -> None:
    backend = _backend(q)
    chains, depth = 200, 3
    alive = [0] * (depth + 1)
    for n in range(chains):
        fact = [("staging port", f"{salt}-{n}")]
        messages = _session(fact, tag=f"{salt}x{n}x")
        for k in range(1, depth + 1):
            summary = _summary(backend, messages, summary_prompt())
            if not _kept(summary, fact):
                break
            alive[k] += 1
            # handed back, then more work: the next summary is of new content
            messages = [_user(f"Summary of earlier work:\n{summary}"), *_session([], tag=f"{salt}x{n}x{k}")]
            messages += [_user(f"Refactor module {salt}x{n}x{k}."), _assistant(f"Done with {salt}x{n}x{k}.")]
    for k in range(1, depth + 1):
        assert _within(alive[k], chains, q**k), (k, alive, q)


# --- settings ---------------------------------------------------------------------------------------


def test_the_settings_refuse_values_out_of_range() -> None:
    for q in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="summary_fidelity must be between 0 and 1"):
            SimulatedConfig(summary_fidelity=q)
    with pytest.raises(ValueError, match="summary_fact_budget must be 0 or more"):
        SimulatedConfig(summary_fact_budget=-1)


def test_foldline_serve_takes_the_summary_settings_for_the_simulated_model_only() -> None:
    from click.testing import CliRunner

    from foldline.cli import cli
    from foldline.cli.serve import _simulated

    backend = _simulated(None, None, 4, "swe", 1.0, 0.7, 12)
    assert isinstance(backend, SimulatedBackend)
    assert (backend.config.summary_fidelity, backend.config.summary_fact_budget) == (0.7, 12)
    default = _simulated(None, None, 4, "swe")
    assert isinstance(default, SimulatedBackend)
    assert default.config == SimulatedConfig()
    for flags, error in (
        (
            ["--backend", "scripted", "--summary-fidelity", "0.5"],
            "--summary-fidelity: a setting of --backend simulated",
        ),
        (["--backend", "scripted", "--summary-fact-budget", "3"], "--summary-fact-budget: a setting of"),
        (["--backend", "simulated", "--summary-fidelity", "1.5"], "--summary-fidelity"),
        (["--backend", "simulated", "--summary-fact-budget", "-1"], "--summary-fact-budget"),
    ):
        result = CliRunner().invoke(cli, ["serve", *flags])
        assert result.exit_code != 0, flags
        assert error in result.output, result.output


def test_the_in_process_provider_takes_the_models_config() -> None:
    from foldline.testing import SimulatedProvider

    config = SimulatedConfig(summary_fidelity=0.25)
    assert SimulatedProvider(seed=2, config=config).backend.config is config
    assert SimulatedProvider(seed=2).backend.config == SimulatedConfig()


def _finish(backend: SimulatedBackend, messages: list[dict[str, Any]], rounds: int = 40) -> tuple[str, int]:
    """Play the turn `messages` leave open to its answer (every tool call answered "ok"): the answer
    and the rounds it took."""
    tools = tool_specs(default_tools())
    messages = list(messages)
    for done in range(rounds):
        request = BackendRequest(model=MODEL, messages=messages, tools=tools, system="Working directory: /w")
        content = [dict(b) for b in backend.reply(request).content]
        uses = [b for b in content if b["type"] == "tool_use"]
        if not uses:
            return "".join(str(b.get("text", "")) for b in content), done
        for n, block in enumerate(uses):
            block["id"] = f"toolu_{done}_{n}"
        messages.append({"role": "assistant", "content": content})
        results = [{"type": "tool_result", "tool_use_id": b["id"], "content": "ok"} for b in uses]
        messages.append({"role": "user", "content": results})
    raise AssertionError("the turn did not end")


def test_a_turn_carried_on_from_a_lossy_summary_does_not_recall_what_the_summary_lost() -> None:
    for q, recalled in ((1.0, True), (0.0, False)):
        backend = _backend(q)
        first = _summary(backend, in_progress(), summary_prompt())
        handed = [_user(SUMMARY_LEAD + first)]
        answer, _ = _finish(backend, handed)
        assert ("Noted: the staging port is 6543." in answer) is recalled, answer
        # a second summary inside the same turn: what the first lost stays lost, the turn the same
        call = {"type": "tool_use", "id": "toolu_9", "name": "Bash", "input": {"command": "ls"}}
        more = [
            *handed,
            {"role": "assistant", "content": [call]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "calc.py"}],
            },
        ]
        second = _summary(backend, more, summary_prompt())
        assert ("6543" in second) is recalled
        assert read_progress(second) == (in_progress()[0]["content"][0]["text"], 2)


def test_a_request_that_carries_its_events_as_text_is_keyed_by_them() -> None:
    """OpenHands' form: no messages to summarize, the events inside the instruction. The same
    statement among different events is drawn afresh each time; at q = 0 none is left."""
    openhands = ECONOMICS.OPENHANDS_INSTRUCTION
    fact = [("staging port", "6543")]
    kept = []
    for n in range(40):
        events = f"<EVENT id={n}>\nNote for later: the staging port is 6543. Fix module {n}.\n</EVENT>\n"
        text = f"{openhands}\n<PREVIOUS SUMMARY>\n\n</PREVIOUS SUMMARY>\n{events}"
        kept.append(bool(_kept(_summary(_backend(0.5), [], text), fact)))
        assert "6543" not in _summary(_backend(0.0), [], text)
    assert 5 < sum(kept) < 35, kept
