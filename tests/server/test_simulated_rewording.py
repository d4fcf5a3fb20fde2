"""The simulated model's settings and a client's words cannot decide a verdict: a turn's work is fixed
by the simulated user's prompt whatever compaction happens inside the turn and however the client
words its summary request, hands the summary back or asks the model to go on; a Snip tool is read by
its purpose and the nudge to use it in any wording. Same work, same facts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.server.conftest import economics

from foldline.compact.autocompact import SUMMARY_LEAD
from foldline.compact.prompts import snip_nudge, summary_prompt
from foldline.server.backend import BackendRequest
from foldline.server.simulated import SimulatedBackend, facts_for, user_prompts
from foldline.server.simulated.summary import summary_request
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

MODEL = "claude-sonnet-4-5"
FOLDLINE = tool_specs(default_tools())


ECONOMICS = economics()


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def _text(content: Sequence[dict[str, Any]]) -> str:
    return "".join(str(b.get("text", "")) for b in content if b.get("type") == "text")


def _result(kind: str) -> str:
    """A tool's output, bulky like a real one (past the size the model snips), the same every time."""
    if kind == "Read":
        return "\n".join(
            f"{n:6}\tdef step_{n}(value: int) -> int:  # helper number {n}" for n in range(1, 61)
        )
    if kind in ("Bash", "Grep", "Glob"):
        paths = [f"src/pkg/module_{n}.py" for n in range(8)]
        return "\n".join([*paths, *(f"step {n:3}/80: merge orders batch ok ({n * 7} ms)" for n in range(80))])
    if kind == "Snip":
        return "Snipped."
    return "The file was updated."


# --- the continuations: how a client hands a summary back and asks the model to go on --------------

Continuation = Callable[[str, str], tuple[list[dict[str, Any]], str]]
"""(summary, prompt) -> the messages that replace the history, and the system prompt's addition."""


def _claude_code_like(summary: str, prompt: str) -> tuple[list[dict[str, Any]], str]:
    text = (
        "This session is being continued from a previous conversation that ran out of context. The "
        f"summary below covers the earlier portion of the conversation.\n\nSummary:\n{summary}\n\nPlease "
        "continue the conversation from where we left it off without asking the user any further "
        "questions. Continue with the last task that you were asked to work on."
    )
    return [_user(text)], ""


def _foldline(summary: str, prompt: str) -> tuple[list[dict[str, Any]], str]:
    return [_user(SUMMARY_LEAD + summary)], ""


def _opencode_like(summary: str, prompt: str) -> tuple[list[dict[str, Any]], str]:
    return [
        _user("What did we do so far?"),
        _assistant(summary),
        _user("Continue if you have next steps"),
    ], ""


def _prompt_replayed(summary: str, prompt: str) -> tuple[list[dict[str, Any]], str]:
    """The summary, then the user's prompt typed again, then a nudge: the prompt is not a new turn."""
    return [_user(f"Earlier work, summarized:\n{summary}"), _assistant("Understood."), _user(prompt)], ""


def _in_the_system_prompt(summary: str, prompt: str) -> tuple[list[dict[str, Any]], str]:
    return [_user("Go on.")], f"\n\nNotes carried over from earlier in this session:\n{summary}"


CONTINUATIONS: dict[str, Continuation] = {
    "claude-code-like": _claude_code_like,
    "foldline": _foldline,
    "opencode-like": _opencode_like,
    "prompt-replayed": _prompt_replayed,
    "system-prompt": _in_the_system_prompt,
}


# --- a client loop ------------------------------------------------------------------------------------


def _play(
    prompts: Sequence[str],
    *,
    tools: Sequence[dict[str, Any]] = FOLDLINE,
    compact: dict[int, Sequence[int]] | None = None,
    instruction: str = "",
    continuation: Continuation | Sequence[Continuation] = _foldline,
    nudge: tuple[int, str] | None = None,
    seed: int = 7,
) -> tuple[list[int], list[str], list[list[str]]]:
    """Play `prompts` as an agent loop would: each turn's main requests, its answer, and the ids of
    every Snip call. `compact` maps a turn to the rounds after which the client compacts (its
    summary request worded `instruction`, the summary handed back by `continuation`, or by the next
    of them at each compaction); `nudge` puts a reminder on one prompt."""
    backend = SimulatedBackend(seed=seed)
    kinds = {t["name"]: t["name"] for t in FOLDLINE if t["name"] != "Snip"}
    kinds.update({t["name"]: "Snip" for t in tools if t["name"] not in kinds})
    styles = [continuation] if callable(continuation) else list(continuation)
    messages: list[dict[str, Any]] = []
    system = "You are a coding agent.\n<env>\nWorking directory: /w\n</env>"
    requests: list[int] = []
    answers: list[str] = []
    snips: list[list[str]] = []
    compactions = 0
    for turn, prompt in enumerate(prompts):
        text = prompt + ("\n" + nudge[1] if nudge is not None and nudge[0] == turn else "")
        messages.append(_user(text))
        count, rounds = 0, 0
        while True:
            if compact is not None and rounds in compact.get(turn, ()) and rounds > 0 and count == rounds:
                ask = [*messages, _user(instruction)]
                summary = _text(
                    backend.reply(
                        BackendRequest(model=MODEL, messages=ask, tools=tools, system=system)
                    ).content
                )
                messages, extra = styles[compactions % len(styles)](summary, prompt)
                system += extra
                compactions += 1
            request = BackendRequest(model=MODEL, messages=messages, tools=tools, system=system)
            content = [dict(b) for b in backend.reply(request).content]
            count += 1
            uses = [b for b in content if b["type"] == "tool_use"]
            for n, block in enumerate(uses):
                block["id"] = f"toolu_{turn}_{count}_{n}"
            messages.append({"role": "assistant", "content": content})
            if not uses:
                answers.append(_text(content))
                break
            rounds += 1
            results: list[dict[str, Any]] = []
            for block in uses:
                kind = kinds[block["name"]]
                if kind == "Snip":
                    snips.append(sorted(str(i) for v in block["input"].values() for i in v))
                results.append({"type": "tool_result", "tool_use_id": block["id"], "content": _result(kind)})
            results.append({"type": "text", "text": f"[id:r{turn}x{count}]"})  # as foldline tags them
            messages.append({"role": "user", "content": results})
        requests.append(count)
    return requests, answers, snips


def _prompts(seed: int) -> list[str]:
    """Work with planted facts, then the questions for them."""
    work = [p for p in user_prompts("feature", 30, seed) if not p.startswith("What is")][:8]
    return [*work, *(f.question for f in facts_for(seed)[:2])]


PROMPTS = _prompts(7)
PLAIN_REQUESTS, PLAIN_ANSWERS, _ = _play(PROMPTS)
LONG = [n for n, r in enumerate(PLAIN_REQUESTS) if r >= 4]
NUDGED = 2
"""The turn whose prompt carries the nudge to snip: two turns of bulky output lie before it."""


def test_the_reference_session_has_turns_long_enough_to_compact_inside() -> None:
    assert len(LONG) >= 2, PLAIN_REQUESTS
    assert _facts(PLAIN_ANSWERS) == [f"The {f.subject} is {f.value}." for f in facts_for(7)[:2]]


@pytest.mark.parametrize("style", list(CONTINUATIONS))
def test_a_compaction_inside_a_turn_leaves_the_turns_work_as_it_was(style: str) -> None:
    """Claude Code at a 100K window once made 372 main requests for a workload of 420: the rest of
    a turn was drawn again from the text of the summary it handed back."""
    compact = {n: (PLAIN_REQUESTS[n] // 2,) for n in LONG}
    requests, answers, _ = _play(
        PROMPTS, compact=compact, instruction=summary_prompt(), continuation=CONTINUATIONS[style]
    )
    assert requests == PLAIN_REQUESTS
    assert _facts(answers) == _facts(PLAIN_ANSWERS)


@pytest.mark.parametrize(
    "instruction", [summary_prompt(), ECONOMICS.OPENCODE_INSTRUCTION, "Summarize the conversation so far."]
)
def test_several_compactions_in_one_turn_each_worded_and_handed_back_differently(instruction: str) -> None:
    """A summary of a conversation that starts with an earlier summary carries the work on: the
    rounds before both compactions count."""
    compact = {n: tuple(range(1, PLAIN_REQUESTS[n] - 1)) for n in LONG}
    requests, answers, _ = _play(
        PROMPTS, compact=compact, instruction=instruction, continuation=list(CONTINUATIONS.values())
    )
    assert requests == PLAIN_REQUESTS
    assert _facts(answers) == _facts(PLAIN_ANSWERS)


def _facts(answers: Sequence[str]) -> list[str]:
    """The answers to the fact questions (the only answers that recall, not report)."""
    return [a for a in answers if a.startswith(("The ", "I don't know"))]


# --- reworded everything: same work, same facts -----------------------------------------------------

_VERBS = [
    "Summarize",
    "Condense",
    "Recap",
    "Distill",
    "Please summarise",
    "Now condense",
    "*Briefly* summarize",
]
_OBJECTS = [
    "the conversation so far",
    "this session",
    "our chat up to now",
    "the work done so far",
    "the events above",
    "everything above",
    "the history of this task session",
]
_PRODUCTS = [
    "Write a detailed summary of {o}",
    "Create a hand-off summary of {o} for another agent that will resume the task",
    "Write a prompt that lets a fresh agent continue {o}",
    "Produce a checkpoint of {o} so the next model can carry on",
    "You keep a state summary for an agent, updated from {o}",
    "Maintain the agent's running state from {o}",
]
_AFTER = ["", " Be concise.", " Keep every fact and file name.", "\n\nWrap it in <summary></summary> tags."]
_SECTIONS = [
    "",
    "\n\n## Goal\n## Discoveries\n## Accomplished\n## Relevant files",
    "\n\nUSER_CONTEXT: (what the user needs)\nCOMPLETED: (done)\nPENDING: (left)\nCODE_STATE: (files)",
    "\n\n1. Primary Request: the asks\n2. Key Facts: what was learned\n3. Next Steps: what is left",
]


@st.composite
def _instructions(draw: st.DrawFn) -> str:
    obj = draw(st.sampled_from(_OBJECTS))
    if draw(st.booleans()):
        lead = f"{draw(st.sampled_from(_VERBS))} {obj}."
    else:
        lead = draw(st.sampled_from(_PRODUCTS)).format(o=obj) + "."
    case = draw(st.sampled_from([str, str.lower, str.upper]))
    return case(lead) + draw(st.sampled_from(_AFTER)) + draw(st.sampled_from(_SECTIONS))


_INNER = snip_nudge(85).removeprefix("<system-reminder>").removesuffix("</system-reminder>")
_NUDGES = [
    f"<system-reminder>{text}</system-reminder>"
    for text in (
        _INNER,
        _INNER.lower(),
        _INNER.upper(),
        "Context window 85% used. Drop tool output you no longer need.",
        "You are running out of context space: please prune old tool results.",
        "Reminder: {tool} is available to remove stale messages by id.",
        "the conversation is nearly full; clear bulky entries you are done with",
    )
]
"""foldline's nudge in its own words and case, and in others' (a client's tags stay as they are)."""
_SNIP_NAMES = [
    "Snip",
    "snip",
    "prune_context",
    "DropMessages",
    "context_trim",
    "forget_entries",
    "remove_messages",
]
_SNIP_PARAMS = ["ids", "message_ids", "tags", "snip_ids", "entry_ids"]
_SNIP_DESCRIPTIONS = [
    "Remove messages you no longer need from the conversation context, by their [id:...] tags.",
    "Drops entries from the context window. Give the ids shown in their tags.",
    "Prune stale tool output from the history to free room.",
    "Deletes old messages from the conversation by id.",
]


def _snip_tool(name: str, param: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {param: {"type": "array", "items": {"type": "string"}, "description": "The ids"}},
            "required": [param],
        },
    }


def _tools_with(snip: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(t for t in FOLDLINE if t["name"] != "Snip"), snip]


@given(
    _instructions(),
    st.sampled_from(list(CONTINUATIONS)),
    st.sampled_from(_NUDGES),
    st.sampled_from(_SNIP_NAMES),
    st.sampled_from(_SNIP_PARAMS),
    st.sampled_from(_SNIP_DESCRIPTIONS),
    st.floats(0.2, 0.8),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_reworded_instructions_renamed_tools_and_reworded_reminders_give_the_same_work_and_facts(
    instruction: str, style: str, nudge: str, name: str, param: str, description: str, at: float
) -> None:
    assert summary_request(instruction) is not None, instruction
    nudged = NUDGED
    compact = {n: (max(1, int(PLAIN_REQUESTS[n] * at)),) for n in LONG if n > nudged}
    reference = _play(
        PROMPTS,
        compact=compact,
        instruction=summary_prompt(),
        continuation=_foldline,
        nudge=(nudged, snip_nudge(85)),
        tools=_tools_with(_snip_tool("Snip", "ids", _SNIP_DESCRIPTIONS[0])),
    )
    reworded = _play(
        PROMPTS,
        compact=compact,
        instruction=instruction,
        continuation=CONTINUATIONS[style],
        nudge=(nudged, nudge.replace("{tool}", name)),
        tools=_tools_with(_snip_tool(name, param, description)),
    )
    assert reference[2], "the reference session snips"
    assert reworded[0] == reference[0]  # the same work, turn by turn
    assert reworded[2] == reference[2]  # the same old output snipped
    assert _facts(reference[1]) == _facts(PLAIN_ANSWERS)
    assert _facts(reworded[1]) == _facts(PLAIN_ANSWERS)  # the same facts recalled


def test_with_compactions_the_same_seed_still_plays_the_same_session() -> None:
    compact = {n: (1, PLAIN_REQUESTS[n] // 2) for n in LONG}
    styles = list(CONTINUATIONS.values())
    first = _play(PROMPTS, compact=compact, instruction=summary_prompt(), continuation=styles)
    assert _play(PROMPTS, compact=compact, instruction=summary_prompt(), continuation=styles) == first
    other = _play(PROMPTS, compact=compact, instruction=summary_prompt(), continuation=styles, seed=8)
    assert other[1] != first[1]  # the seed decides the work's details
