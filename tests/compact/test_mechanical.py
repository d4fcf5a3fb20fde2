"""The mechanical fold (design.md R3.4.11): what stands in for a summary the model could not write."""

from __future__ import annotations

from foldline.compact.mechanical import MECHANICAL_HEADING, mechanical_fold
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
