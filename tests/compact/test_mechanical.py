"""The mechanical fold (design.md R3.4.11): what stands in for a summary the model could not write."""

from __future__ import annotations

from foldline.compact.mechanical import MECHANICAL_HEADING, RECORD_HEADING, mechanical_fold, record_fold
from foldline.config import Config, MechanicalFoldConfig
from foldline.timeline import AssistantEntry, AssistantMessage, Entry, UserEntry, UserMessage, new_uuid

T = "2026-01-01T00:00:00Z"


def _user(content: str | list[dict[str, object]], **flags: bool) -> UserEntry:
    return UserEntry(uuid=new_uuid(), timestamp=T, message=UserMessage(content=content), **flags)


def _read(n: int, path: str) -> list[Entry]:
    use = {"type": "tool_use", "id": f"toolu_{n}", "name": "Read", "input": {"file_path": path}}
    reply = AssistantEntry(
        uuid=new_uuid(), timestamp=T, message=AssistantMessage(id=f"m{n}", model="m", content=[use])
    )
    lines = "\n".join(f"result {n} line {i}" for i in range(10))
    return [reply, _user([{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": lines}])]


def test_prompts_files_and_first_lines_under_a_heading_that_says_it_is_not_a_summary() -> None:
    entries = [
        _user("fix the parser in src/parse.py"),
        *_read(1, "src/parse.py"),
        *_read(2, "src/parse.py"),
        _user("reminder", is_meta=True),
    ]
    text = mechanical_fold(entries, Config())
    assert text.startswith(MECHANICAL_HEADING)
    assert "- fix the parser in src/parse.py" in text
    assert "reminder" not in text  # injected text is not the user's
    assert text.count("src/parse.py") == 4  # the prompt, files touched once, two results
    assert "result 1 line 2 (+7 more lines)" in text
    assert "result 1 line 3" not in text


def test_past_its_budget_the_oldest_results_go_first() -> None:
    entries: list[Entry] = [_user("the task")]
    for n in range(40):
        entries += _read(n, f"f{n}.py")
    config = Config(mechanical_fold=MechanicalFoldConfig(max_chars=1_500))
    text = mechanical_fold(entries, config)
    assert len(text) <= 1_500
    assert "result 39 line 0" in text  # the newest work is kept
    assert "result 0 line 0" not in text
    assert "- the task" in text


def _step(n: int, said: str, command: str, output: str) -> list[Entry]:
    use = {"type": "tool_use", "id": f"toolu_s{n}", "name": "Bash", "input": {"command": command}}
    content: list[dict[str, object]] = [{"type": "text", "text": said}, use]
    reply = AssistantEntry(
        uuid=new_uuid(), timestamp=T, message=AssistantMessage(id=f"s{n}", model="m", content=content)
    )
    return [reply, _user([{"type": "tool_result", "tool_use_id": f"toolu_s{n}", "content": output}])]


def _final(text: str) -> AssistantEntry:
    content: list[dict[str, object]] = [{"type": "text", "text": text}]
    return AssistantEntry(
        uuid=new_uuid(), timestamp=T, message=AssistantMessage(id="f", model="m", content=content)
    )


def test_a_record_keeps_each_turn_in_order_with_what_the_assistant_said_and_did() -> None:
    """A record fold masks the tool output and keeps the agent's words and actions, turn by turn:
    which result belongs to which call, and why it was made, stay readable."""
    entries: list[Entry] = [
        _user("the deploy script fails on staging"),
        *_step(1, "The log should say why; reading it.", "tail deploy.log", "ERROR: port 8443 in use\n" * 30),
        *_step(2, "Port 8443 is taken by the old worker, so stop it first.", "systemctl stop w", ""),
        _final("Fixed: the old worker held port 8443; I stop it before the deploy now."),
        _user("now add a retry"),
        *_read(3, "deploy.sh"),
        _final("Added three retries to deploy.sh."),
    ]
    text = record_fold(entries, Config())
    assert text.startswith(RECORD_HEADING)
    lines = text.splitlines()
    order = [
        "- prompt: the deploy script fails on staging",
        "  - said: The log should say why; reading it.",
        "  - Bash `tail deploy.log` -> ERROR: port 8443 in use",
        "  - said: Port 8443 is taken by the old worker, so stop it first.",
        "  - Bash `systemctl stop w` -> (no output)",
        "- reply: Fixed: the old worker held port 8443",
        "- prompt: now add a retry",
        "  - Read deploy.sh -> result 3 line 0",
        "- reply: Added three retries",
    ]
    found = [next(i for i, line in enumerate(lines) if line.startswith(want)) for want in order]
    assert found == sorted(found), "the record follows the turns in order"
    assert "(+27 more lines)" in text  # the observation is masked down to its first lines
    assert lines[-1] == "Files touched: deploy.sh"


def test_past_its_budget_a_record_drops_the_oldest_results_then_words_then_turns() -> None:
    entries: list[Entry] = [_user("the first task")]
    for n in range(30):
        entries += _step(n, f"step {n} because of reason {n}", f"run {n}", f"output {n}\nmore")
    entries += [_final("first done"), _user("the second task"), _final("second done")]
    roomy = record_fold(entries, Config(mechanical_fold=MechanicalFoldConfig(max_chars=2_400)))
    assert len(roomy) <= 2_400
    assert "run 29` -> output 29" in roomy
    assert "run 0` -> output 0" not in roomy
    assert "step 0 because" in roomy  # the words stay while results can go
    tight = record_fold(entries, Config(mechanical_fold=MechanicalFoldConfig(max_chars=1_100)))
    assert len(tight) <= 1_100
    assert "step 0 because" not in tight
    assert "Bash `run 0`" in tight
    tiny = record_fold(entries, Config(mechanical_fold=MechanicalFoldConfig(max_chars=400)))
    assert "- prompt: the second task" in tiny
    assert "the first task" not in tiny


def test_a_record_keeps_a_long_prompt_that_a_mechanical_fold_cuts() -> None:
    ask = "Keep these rules: " + " ".join(f"rule {n} says the limit is {n * 7}." for n in range(40))
    entries: list[Entry] = [_user(ask), _final("Understood.")]
    assert 600 < len(ask) < Config().mechanical_fold.record_prompt_chars
    assert f"- prompt: {ask}" in record_fold(entries, Config())
    assert "rule 39 says" not in mechanical_fold(entries, Config())
