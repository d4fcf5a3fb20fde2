"""The default system prompt and the session's environment block (design.md R4.3.2).

The prompt used to be two sentences (37 tokens) with no working directory, date, platform or git
state. Now a new session records its environment once and every request carries it after the static
guidance; a resume sends the same bytes even when the repository changed in between.
"""

from __future__ import annotations

import asyncio
import subprocess
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from foldline.config import Config, ToolsConfig, TranscriptConfig
from foldline.server.tokenizer import count_text
from foldline.session import Session
from foldline.system_prompt import DEFAULT_SYSTEM_PROMPT, environment_block, transcript_note
from foldline.testing import FunctionProvider
from foldline.timeline import SystemEntry
from foldline.tools import default_tools


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "feature/login")
    (root / "app.py").write_text("print('hi')\n")
    _git(root, "add", "app.py")
    _git(root, "commit", "-q", "-m", "add the app")
    (root / "app.py").write_text("print('hello')\n")  # modified
    (root / "notes.txt").write_text("todo\n")  # untracked
    return root


def test_the_static_prompt_guides_the_tools_in_its_own_words() -> None:
    assert count_text(DEFAULT_SYSTEM_PROMPT) > 300  # was 37 tokens
    for tool in ("Read", "Edit", "Write", "Grep", "Glob", "Bash"):
        assert tool in DEFAULT_SYSTEM_PROMPT
    assert "foldline" in DEFAULT_SYSTEM_PROMPT


def test_the_environment_block_names_directory_date_platform_and_git_state(repo: Path) -> None:
    block = environment_block(repo, today=date(2026, 12, 4))
    assert f"Working directory: {repo}" in block
    assert "Date: 2026-12-04" in block
    assert "Platform: " in block
    assert "Git branch: feature/login" in block
    assert " M app.py" in block
    assert "?? notes.txt" in block
    assert "2 changed paths" in block
    assert "add the app" in block  # recent commits


def test_outside_a_repository_or_past_the_status_cap_it_says_so(tmp_path: Path, repo: Path) -> None:
    assert "Git repository: no" in environment_block(tmp_path / "repo" / "..")  # tmp_path is no repo
    for i in range(5):
        (repo / f"new{i}.txt").write_text("x")
    capped = environment_block(repo, limits=ToolsConfig(environment_status_lines=3))
    assert "... and 4 more (run `git status`)" in capped


def _answer(body: dict[str, Any], betas: tuple[str, ...]) -> dict[str, Any]:
    return {"text": "ok"}


async def _first_system(
    path: Path, workspace: Path, provider: FunctionProvider, config: Config | None = None, **kw: Any
) -> Any:
    async with Session.open(
        path, provider=provider, workspace=workspace, config=config or Config(), tools=default_tools(), **kw
    ) as session:
        await session.submit_message("hello")
        return session


def test_a_session_records_its_environment_once_and_a_resume_sends_the_same_bytes(repo: Path) -> None:
    path = repo.parent / "sessions" / "s.jsonl"
    first = FunctionProvider(_answer)
    session = asyncio.run(_first_system(path, repo, first))
    system = first.calls[0].body["system"]
    text = "".join(b["text"] for b in system)
    assert text.startswith(DEFAULT_SYSTEM_PROMPT)  # the static part first: a shared prefix
    assert "Git branch: feature/login" in text
    assert "<environment>" not in str(first.calls[0].body["messages"])  # never a message (S0)
    envs = [r for r in session.engine.timeline if isinstance(r, SystemEntry) and r.subtype == "environment"]
    assert len(envs) == 1

    # The repository changes before the resume: the resumed session still sends what it recorded.
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "second commit")
    again = FunctionProvider(_answer)
    resumed = asyncio.run(_first_system(path, repo, again))
    assert again.calls[0].body["system"] == system
    assert "second commit" not in str(again.calls[0].body["system"])
    envs = [r for r in resumed.engine.timeline if isinstance(r, SystemEntry) and r.subtype == "environment"]
    assert len(envs) == 1  # recorded once, not again on resume


def test_every_request_of_a_session_shares_one_system_prompt_forks_included(repo: Path) -> None:
    provider = FunctionProvider(
        lambda body, betas: {"text": "\n\n".join(f"## {t}\nx" for t in _sections(body)) or "ok"}
    )

    async def run() -> None:
        async with Session.open(
            repo.parent / "s2.jsonl", provider=provider, workspace=repo, tools=default_tools()
        ) as session:
            await session.submit_message("hello")
            await session.submit_message("again")
            await session.engine.compact()

    asyncio.run(run())
    systems = {str(c.body["system"]) for c in provider.calls}
    assert len(provider.calls) >= 3
    assert len(systems) == 1


def _sections(body: dict[str, Any]) -> list[str]:
    from foldline.compact.prompts import requested_sections

    last = body["messages"][-1]["content"]
    text = last if isinstance(last, str) else " ".join(str(b.get("text", "")) for b in last)
    return requested_sections(text)


def test_opting_out_sends_the_prompt_alone(tmp_path: Path) -> None:
    provider = FunctionProvider(_answer)
    unnamed = Config(transcript=TranscriptConfig(named_to_model=False))
    asyncio.run(
        _first_system(
            tmp_path / "s.jsonl", tmp_path, provider, unnamed, environment=False, system="Be brief."
        )
    )
    assert "".join(b["text"] for b in provider.calls[0].body["system"]) == "Be brief."


def test_the_transcript_line_comes_last_and_names_the_session_file(tmp_path: Path) -> None:
    """After the environment block (the path is the session's own: the shared prefix stays shared)."""
    provider = FunctionProvider(_answer)
    path = tmp_path / "sessions" / "s.jsonl"
    asyncio.run(_first_system(path, tmp_path, provider, system="Be brief."))
    text = "".join(b["text"] for b in provider.calls[0].body["system"])
    assert text.startswith("Be brief.\n\n<environment>")
    assert text.endswith(transcript_note(path.resolve()))
    assert text.index("</environment>") < text.index(str(path.resolve()))


def test_a_stated_host_and_no_git_make_the_block_the_same_bytes_on_every_machine(repo: Path) -> None:
    """A simulated session states a fixed platform and shell, and asks no git about a generated
    workspace, which may sit inside anyone's repository."""
    block = environment_block(repo, today=date(2026, 1, 1), host=("linux", "/bin/bash"), git=False)
    assert block == (
        f"<environment>\nWorking directory: {repo}\nDate: 2026-01-01\nPlatform: linux\n"
        "Shell: /bin/bash\nGit repository: no\n</environment>"
    )


def test_a_block_given_as_text_is_recorded_and_sent_instead_of_gathered(repo: Path) -> None:
    provider = FunctionProvider(_answer)
    block = "<environment>\nWorking directory: /elsewhere\n</environment>"
    session = asyncio.run(_first_system(repo.parent / "s.jsonl", repo, provider, environment=block))
    text = "".join(b["text"] for b in provider.calls[0].body["system"])
    assert text.endswith(f"\n\n{block}\n\n{transcript_note((repo.parent / 's.jsonl').resolve())}")
    assert "Git branch" not in text  # nothing gathered beside it
    envs = [r for r in session.engine.timeline if isinstance(r, SystemEntry) and r.subtype == "environment"]
    assert [e.content for e in envs] == [block]


def test_a_small_window_gets_the_short_prompt_a_large_one_the_guidance(tmp_path: Path) -> None:
    """On 8K the guidance would take a twelfth of the room, and a 135M model stops calling tools
    under it (tests/server/test_real_model.py): below the configured window the prompt is short."""
    from foldline.system_prompt import COMPACT_SYSTEM_PROMPT

    sent: dict[int, str] = {}
    for window in (8_192, 32_000, 200_000):
        provider = FunctionProvider(_answer)
        config = Config(model="local-model", context_window=window, reference_window=200_000)

        async def turn(path: Path, provider: FunctionProvider, config: Config) -> None:
            async with Session.open(path, provider=provider, workspace=tmp_path, config=config) as session:
                await session.submit_message("hello")

        asyncio.run(turn(tmp_path / f"{window}.jsonl", provider, config))
        sent[window] = "".join(b["text"] for b in provider.calls[0].body["system"])
    assert sent[8_192].startswith(COMPACT_SYSTEM_PROMPT)
    assert sent[32_000].startswith(DEFAULT_SYSTEM_PROMPT)
    assert sent[200_000].startswith(DEFAULT_SYSTEM_PROMPT)
    assert "<environment>" in sent[8_192]  # the environment block is kept on every window
