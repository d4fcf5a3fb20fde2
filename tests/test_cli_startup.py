"""Startup stays cheap: `import foldline` and `foldline --help` load no SDK, server or model."""

from __future__ import annotations

import subprocess
import sys

import click

from foldline.cli import COMMANDS, cli

HEAVY = ("anthropic", "starlette", "uvicorn", "httpx", "httpx2", "torch", "transformers")
CHAT_HEAVY = (*HEAVY, "prompt_toolkit", "rich.markdown", "tokenizers", "foldline.session")
"""What the chat's body needs, and its `--help` must not load."""


def _loaded_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    probe = f"{code}\nimport sys\nprint(','.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    return [m for m in out.strip().split(",") if m]


def test_import_foldline_loads_no_sdk_or_server() -> None:
    assert _loaded_after("import foldline") == []


def test_help_loads_no_sdk_or_server() -> None:
    code = (
        "from click.testing import CliRunner\n"
        "from foldline.cli import cli\n"
        "result = CliRunner().invoke(cli, ['--help'])\n"
        "assert result.exit_code == 0 and 'chat' in result.output, result.output"
    )
    assert _loaded_after(code) == []


def test_chat_help_loads_no_sdk_editor_or_markdown() -> None:
    code = (
        "from click.testing import CliRunner\n"
        "from foldline.cli import cli\n"
        "result = CliRunner().invoke(cli, ['chat', '--help'])\n"
        "assert result.exit_code == 0 and '--permission-mode' in result.output, result.output"
    )
    assert _loaded_after(code, CHAT_HEAVY) == []


def test_the_probe_sees_what_a_chat_loads() -> None:
    # the check above could pass by looking for the wrong names: running the body loads them all
    loaded = _loaded_after("import foldline.cli.chat", CHAT_HEAVY)
    assert {"anthropic", "prompt_toolkit", "rich.markdown", "foldline.session"} <= set(loaded)


def test_stored_short_help_matches_each_command() -> None:
    ctx = click.Context(cli)
    for name, (_, text) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is not None, name
        assert command.get_short_help_str(200) == click.Command(name, help=text).get_short_help_str(200), name


def test_the_profile_choice_is_the_simulators_profiles() -> None:
    from foldline.cli import PROFILE_CHOICE
    from foldline.server.simulated import PROFILES

    assert tuple(PROFILE_CHOICE.choices) == PROFILES
