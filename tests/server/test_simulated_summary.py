"""The simulated model's summaries are title-blind: which facts survive is decided from the content,
whatever the request calls its sections, orders them, or how many it asks for, and in whatever
wording it asks (foldline's, opencode-like, OpenHands-like, a bare sentence)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.server.conftest import economics

from foldline.compact.autocompact import SUMMARY_LEAD
from foldline.compact.prompts import SUMMARY_SECTIONS, parse_sections, summary_prompt
from foldline.server.backend import BackendRequest
from foldline.server.simulated import SimulatedBackend, user_prompts
from foldline.server.simulated.summary import summary_request

MODEL = "claude-sonnet-4-5"


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _conversation(
    user_facts: list[tuple[str, str]], output_facts: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """A session: the user's notes among tasks, scripts whose output states a value once, reads."""
    messages: list[dict[str, Any]] = []
    for n, (subject, value) in enumerate(user_facts):
        messages.append(_user(f"Note for later: the {subject} is {value}. Fix the parser in module {n}."))
        messages.append(_assistant(f"Noted. I looked at module {n}; the parser handles empty rows now."))
    for n, (subject, value) in enumerate(output_facts):
        messages.append(_user(f"Run `sh scripts/check_{n}.sh` and tell me whether it passes."))
        call = {
            "type": "tool_use",
            "id": f"toolu_{n}",
            "name": "Bash",
            "input": {"command": f"sh check_{n}.sh"},
        }
        messages.append({"role": "assistant", "content": [_assistant("Running it.")["content"][0], call]})
        output = "\n".join(
            [
                *(f"step {i}/20: merge orders batch ok ({i * 7} ms)" for i in range(10)),
                f"the {subject} is {value}.",
            ]
            + [f"step {i}/20: apply taxes ok" for i in range(10, 20)]
        )
        messages.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": output}],
            }
        )
        messages.append(_assistant("It passes: 20 steps passed."))
    return messages


def _summary(messages: list[dict[str, Any]], instruction: str) -> str:
    request = BackendRequest(model=MODEL, messages=[*messages, _user(instruction)], tools=[], request_key="k")
    reply = SimulatedBackend(seed=1).reply(request)
    return "".join(str(b.get("text", "")) for b in reply.content)


def _kept(summary: str, facts: list[tuple[str, str]]) -> set[str]:
    return {f"{subject}={value}" for subject, value in facts if f"the {subject} is {value}." in summary}


USER_FACTS = [
    ("staging port", "6543"),
    ("release codename", "quiet-heron"),
    ("on-call reviewer", "Ada Okafor"),
    ("database retry limit", "11"),
]
OUTPUT_FACTS = [("stress test seed", "48213"), ("preview deploy id", "dep-604211")]

OPENCODE_LIKE = """Provide a detailed prompt for continuing our conversation above. Focus on what would help \
someone carry on: what we did, what we are doing, which files we are working on, and what comes next.

Use this template:
---
## Goal
[What is the user trying to get done?]

## Instructions
- [What the user asked for that still matters]

## Discoveries
[What was learned along the way]

## Accomplished
[What is finished, what is in progress, what is left]

## Relevant files / directories
[The files that were read, edited or created]
---"""

OPENHANDS_LIKE = """You are maintaining a state summary for an interactive agent. You are given the agent's \
events and the previous summary, if there is one. Write an updated summary that lets the agent carry on.

Track:

USER_CONTEXT: (what the user needs, their goals and clarifications, in brief)
COMPLETED: (tasks done so far, with a short result each)
PENDING: (tasks still to do)
CODE_STATE: (file paths, function signatures, data structures)
TESTS: (failing cases, error messages, outputs)
CHANGES: (code edits, variable updates)
DEPS: (dependencies, imports, external calls)
VERSION_CONTROL_STATUS: (repository state, current branch, PR status, commit history)"""

BARE = "Summarize the conversation so far."

WORDINGS = {
    "foldline": summary_prompt(),
    "opencode-like": OPENCODE_LIKE,
    "openhands-like": OPENHANDS_LIKE,
    "bare": BARE,
    "claude-code-like": (
        "Your task is to create a detailed summary of the conversation so far, paying close attention "
        "to the user's explicit requests.\n\n1. Primary Request and Intent: the user's requests\n"
        "2. Key Technical Concepts: what was discussed\n3. Pending Tasks: what is left\n\n"
        "Wrap the summary in <summary></summary> tags."
    ),
}


ECONOMICS = economics()
WORDINGS |= {
    # the benchmark's own: not recognised once, so opencode's "summary" was an 85-character
    # non-answer and OpenHands' a list of "Noted: ..." lines (the cheapest row, for no work)
    "benchmark-opencode": ECONOMICS.OPENCODE_INSTRUCTION,
    "benchmark-openhands": ECONOMICS.OPENHANDS_INSTRUCTION,
    # held out: wordings no recogniser was written against
    "state-keeping": (
        "Keep the agent's state up to date from the events below, section by section.\n"
        "USER_CONTEXT: (what the user needs)\nCOMPLETED: (done, with results)\nPENDING: (still to do)\n"
        "CODE_STATE: (files and signatures)"
    ),
    "bare-sections": (
        "Track:\nUSER_CONTEXT: (what the user needs)\nCOMPLETED: (done)\nPENDING: (left)\n"
        "CODE_STATE: (files)\nTESTS: (failing cases)"
    ),
    "checkpoint": "Context checkpoint. Create a hand-off summary for another model that will resume.",
    "memento": "Stop coding and write a short memento for the next agent: what you finished, what is left.",
    "briefly": "*Briefly* summarize this partial conversation. Give more detail about recent parts.",
    "component": "You are the component that distills the chat history into a structured snapshot.",
}


@pytest.mark.parametrize("wording", list(WORDINGS))
def test_a_summary_request_is_recognised_in_any_wording(wording: str) -> None:
    assert summary_request(WORDINGS[wording]) is not None


def test_the_benchmarks_openhands_request_with_the_events_in_it_keeps_the_facts() -> None:
    """OpenHands' form: the instruction, the previous summary and the forgotten events as one text."""
    events = "".join(
        f"<EVENT id={i}>\n{ECONOMICS._event_text(m)}\n</EVENT>\n"
        for i, m in enumerate(_conversation(USER_FACTS, OUTPUT_FACTS))
    )
    text = f"{ECONOMICS.OPENHANDS_INSTRUCTION}\n<PREVIOUS SUMMARY>\n\n</PREVIOUS SUMMARY>\n{events}"
    summary = _summary([], text)
    assert "Noted:" not in summary
    assert summary.startswith("## USER_CONTEXT")
    assert _kept(summary, USER_FACTS + OUTPUT_FACTS) == {f"{s}={v}" for s, v in USER_FACTS + OUTPUT_FACTS}


def test_a_summary_handed_back_is_no_summary_request_whoever_hands_it_back() -> None:
    """A summary of a real profile session, handed back the way clients do, asks for nothing: its
    lines are the session's, and they may start with any verb."""
    prompts = user_prompts("feature", 24, 7, output_facts=True)
    messages = [m for p in prompts for m in (_user(p), _assistant(f"Done: {p}"))]
    for wording in WORDINGS.values():
        summary = _summary(messages, wording)
        for handed in (
            SUMMARY_LEAD + summary,
            "This session is being continued from a previous conversation that ran out of context. The "
            f"summary below covers the earlier portion of the conversation.\n\nSummary:\n{summary}\n\n"
            "Please continue the conversation from where we left it off without asking the user any "
            "further questions. Continue with the last task that you were asked to work on.",
        ):
            assert summary_request(handed) is None, handed[:400]


def test_ordinary_prompts_are_not_summary_requests() -> None:
    prompts = [p for profile in ("feature", "debug", "refactor", "swe") for p in user_prompts(profile, 60, 3)]
    prompts += ["Summarize what calc.py does.", "Where is add defined and is it tested?"]
    # a summary handed back after a compaction presents one; it asks for none
    prompts += [SUMMARY_LEAD + "## Primary Request and Intent\nFix the parser.", SUMMARY_LEAD]
    prompts += ["This session is being continued from a previous conversation. The summary below covers it."]
    prompts += ["Continue if you have next steps", "What did we do so far?", "Go on."]
    # near misses: a state machine, a memory leak, an overview of code, a prompt template
    prompts += [
        "Update the state machine in the scheduler so tasks retry.",
        "Track down the memory leak in the scheduler task.",
        "Give me an overview of the parser module.",
        "Write a prompt template for the login page.",
    ]
    assert [p for p in prompts if summary_request(p) is not None] == []


def test_the_same_conversation_keeps_the_same_facts_under_every_wording() -> None:
    messages = _conversation(USER_FACTS, OUTPUT_FACTS)
    kept = {
        name: _kept(_summary(messages, text), USER_FACTS + OUTPUT_FACTS) for name, text in WORDINGS.items()
    }
    everything = {f"{s}={v}" for s, v in USER_FACTS + OUTPUT_FACTS}
    assert kept == dict.fromkeys(WORDINGS, everything), kept  # the user's own notes included
    # foldline's own reader still parses its summary, every section present
    parsed = parse_sections(_summary(messages, WORDINGS["foldline"]), SUMMARY_SECTIONS)
    assert parsed is not None
    assert "<summary>" in _summary(messages, WORDINGS["claude-code-like"])


def test_a_previous_summary_is_read_like_any_other_text() -> None:
    first = _summary(_conversation(USER_FACTS[:2], OUTPUT_FACTS[:1]), OPENCODE_LIKE)
    # opencode-like: the summary comes back as an assistant message; foldline-like: as a user message
    for carried in (
        [_user("What did we do so far?"), _assistant(first)],
        [_user(f"This session is being continued from a previous conversation. Summary:\n\n{first}")],
    ):
        later = [*carried, *_conversation(USER_FACTS[2:], [])]
        for wording in WORDINGS.values():
            assert _kept(_summary(later, wording), USER_FACTS + OUTPUT_FACTS[:1]) == {
                f"{s}={v}" for s, v in USER_FACTS + OUTPUT_FACTS[:1]
            }


_TITLE_WORDS = [
    "User",
    "Facts",
    "Files",
    "Errors",
    "Notes",
    "Goal",
    "Misc",
    "Current",
    "Next",
    "Context",
    "Decisions",
    "Intent",
    "Outcome",
    "Zebra",
    "Requests",
    "Discoveries",
]
_titles = st.lists(
    st.lists(st.sampled_from(_TITLE_WORDS), min_size=1, max_size=3).map(" ".join), max_size=10, unique=True
)
_leads = st.sampled_from(
    [
        "Write a summary of the conversation so far with these sections:",
        "Condense this session into the sections below.",
        "Please recap the work so far. Use exactly these headings:",
        "Summarize the conversation above.",
    ]
)
_forms = st.sampled_from(["markdown", "numbered", "keys"])


def _instruction(lead: str, titles: list[str], form: str) -> str:
    if form == "markdown":
        listing = [f"## {t}" for t in titles]
    elif form == "numbered":
        listing = [f"{n}. {t}: what belongs here" for n, t in enumerate(titles, 1)]
    else:
        listing = [f"{t.upper().replace(' ', '_')}: (what belongs here)" for t in titles]
    return lead + "\n\n" + "\n".join(listing)


_facts = st.lists(
    st.tuples(
        st.sampled_from(["port", "codename", "reviewer", "limit", "flag", "seed", "region"]),
        st.integers(10, 99999),
    ),
    min_size=1,
    max_size=90,
)


@given(_facts, st.integers(0, 3), _leads, _titles, _forms, st.randoms(use_true_random=False))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_renaming_reordering_or_rewording_sections_never_changes_which_facts_survive(
    facts: list[tuple[str, int]], outputs: int, lead: str, titles: list[str], form: str, rng: Any
) -> None:
    # numbered subjects so that every planted fact is its own; up to 90 of them, past the cap of what a
    # summary keeps, so that the facts dropped for room must be the same ones too
    user = [(f"{name} {n}", str(value)) for n, (name, value) in enumerate(facts)]
    output = [(f"output {name} {n}", str(value)) for n, (name, value) in enumerate(facts[:outputs])]
    messages = _conversation(user, output)
    planted = user + output
    reference = _kept(_summary(messages, summary_prompt()), planted)
    shuffled = list(titles)
    rng.shuffle(shuffled)
    for variant in (titles, shuffled, titles[:1], []):
        assert _kept(_summary(messages, _instruction(lead, variant, form)), planted) == reference
    if len(planted) <= 40:
        assert reference == {f"{s}={v}" for s, v in planted}  # within the caps, every one survives


def test_over_http_every_wording_keeps_the_users_own_note() -> None:
    import anthropic

    from foldline.server.app import create_app
    from foldline.server.testing import run_server

    messages = _conversation(USER_FACTS, OUTPUT_FACTS)
    kept = {}
    with (
        run_server(create_app(backend=SimulatedBackend(seed=1))) as url,
        anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as client,
    ):
        for name, wording in WORDINGS.items():
            reply = client.messages.create(
                model=MODEL,
                max_tokens=8192,
                messages=[*messages, _user(wording)],  # type: ignore[list-item]
            )
            text = "".join(b.text for b in reply.content if b.type == "text")
            kept[name] = _kept(text, USER_FACTS + OUTPUT_FACTS)
    everything = frozenset(f"{s}={v}" for s, v in USER_FACTS + OUTPUT_FACTS)
    assert kept == dict.fromkeys(WORDINGS, everything)
