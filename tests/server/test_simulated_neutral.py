"""The simulated model is agent-neutral: it acts on whatever tools a request offers, read from their
names and schemas (Claude Code's, opencode's, foldline's own), and its search terms are the code the
prompt names, not its verbs."""

from __future__ import annotations

import fnmatch
import functools
import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foldline.compact.prompts import snip_nudge
from foldline.config import CacheConfig, CollapseConfig, Config, TranscriptConfig
from foldline.server.backend import BackendRequest
from foldline.server.config import SimulatedConfig
from foldline.server.simulated import SimulatedBackend, generate_workspace, output_facts_for, think_time
from foldline.server.simulated.profiles import user_prompts
from foldline.server.simulated.toolbox import Toolbox, working_directory
from foldline.session import Session
from foldline.testing import SimulatedProvider
from foldline.tools import default_tools
from foldline.tools.base import tool_specs

MODEL = "claude-sonnet-4-5"


def _tool(name: str, description: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "input_schema": {"type": "object", "properties": props, "required": required},
    }


def _s(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _n(description: str) -> dict[str, Any]:
    return {"type": "number", "description": description}


CLAUDE_CODE_LIKE = [
    _tool(
        "Task",
        "Launch a new agent to handle complex, multi-step tasks autonomously.",
        {"description": _s("A short description"), "prompt": _s("The task"), "subagent_type": _s("Agent")},
        ["description", "prompt", "subagent_type"],
    ),
    _tool(
        "Bash",
        "Executes a given bash command in a persistent shell session with optional timeout.",
        {"command": _s("The command to execute"), "timeout": _n("Timeout in ms"), "description": _s("What")},
        ["command"],
    ),
    _tool(
        "Glob",
        "Fast file pattern matching tool that works with any codebase size.",
        {"pattern": _s("The glob pattern to match files against"), "path": _s("The directory to search in")},
        ["pattern"],
    ),
    _tool(
        "Grep",
        "A powerful search tool built on ripgrep. Supports full regex syntax. Filter files with glob.",
        {
            "pattern": _s("The regular expression pattern to search for in file contents"),
            "path": _s("File or directory to search in. Defaults to current working directory."),
            "glob": _s("Glob pattern to filter files"),
            "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
            "-i": {"type": "boolean", "description": "Case insensitive search"},
            "-n": {"type": "boolean", "description": "Show line numbers"},
            "head_limit": _n("Limit output to first N lines/entries"),
        },
        ["pattern"],
    ),
    _tool(
        "Read",
        "Reads a file from the local filesystem. The file_path parameter must be an absolute path.",
        {
            "file_path": _s("The absolute path to the file to read"),
            "offset": _n("The line number to start reading from"),
            "limit": _n("The number of lines to read"),
        },
        ["file_path"],
    ),
    _tool(
        "Edit",
        "Performs exact string replacements in files. You must use your Read tool first.",
        {
            "file_path": _s("The absolute path to the file to modify"),
            "old_string": _s("The text to replace"),
            "new_string": _s("The text to replace it with"),
            "replace_all": {"type": "boolean", "description": "Replace all occurrences"},
        },
        ["file_path", "old_string", "new_string"],
    ),
    _tool(
        "Write",
        "Writes a file to the local filesystem, overwriting it if there is one.",
        {"file_path": _s("The absolute path to the file to write"), "content": _s("The content to write")},
        ["file_path", "content"],
    ),
    _tool(
        "TodoWrite",
        "Create and manage a structured task list for your current coding session.",
        {"todos": {"type": "array", "items": {"type": "object"}}},
        ["todos"],
    ),
    _tool(
        "BashOutput",
        "Retrieves output from a running or completed background bash shell.",
        {"bash_id": _s("The ID of the background shell")},
        ["bash_id"],
    ),
    _tool(
        "WebFetch",
        "Fetches content from a specified URL and processes it.",
        {"url": _s("The URL"), "prompt": _s("What to extract")},
        ["url", "prompt"],
    ),
]

OPENCODE_LIKE = [
    _tool(
        "bash",
        "Executes a given bash command in a persistent shell session.",
        {
            "command": _s("The command to execute"),
            "timeout": _n("Optional timeout in milliseconds"),
            "description": _s("Clear, concise description of what this command does in 5-10 words"),
        },
        ["command", "description"],
    ),
    _tool(
        "edit",
        "Performs exact string replacements in files. The filePath must be an absolute path.",
        {
            "filePath": _s("The absolute path to the file to modify"),
            "oldString": _s("The text to replace"),
            "newString": _s("The text to replace it with (must be different from oldString)"),
            "replaceAll": {"type": "boolean", "description": "Replace all occurrences of oldString"},
        },
        ["filePath", "oldString", "newString"],
    ),
    _tool(
        "glob",
        "Fast file pattern matching tool; returns matching file paths.",
        {"pattern": _s("The glob pattern to match files against"), "path": _s("The directory to search in")},
        ["pattern"],
    ),
    _tool(
        "grep",
        "Fast content search tool. Searches file contents using regular expressions.",
        {
            "pattern": _s("The regex pattern to search for in file contents"),
            "path": _s("The directory to search in"),
            "include": _s('File pattern to include in the search (e.g. "*.js")'),
        },
        ["pattern"],
    ),
    _tool(
        "list",
        "Lists files and directories in a given path.",
        {"path": _s("The absolute path to the directory to list"), "ignore": {"type": "array"}},
        [],
    ),
    _tool(
        "read",
        "Reads a file from the local filesystem. The filePath parameter must be an absolute path.",
        {
            "filePath": _s("The path to the file to read"),
            "offset": _n("The line number to start reading from (0-based)"),
            "limit": _n("The number of lines to read (defaults to 2000)"),
        },
        ["filePath"],
    ),
    _tool(
        "write",
        "Writes a file to the local filesystem.",
        {"filePath": _s("The absolute path to the file to write"), "content": _s("The content to write")},
        ["content", "filePath"],
    ),
    _tool(
        "todowrite",
        "Use this tool to create and manage a task list.",
        {"todos": {"type": "array"}},
        ["todos"],
    ),
    _tool(
        "webfetch",
        "Fetches content from a URL.",
        {"url": _s("The URL to fetch"), "format": _s("text, markdown or html")},
        ["url", "format"],
    ),
    _tool(
        "patch",
        "Apply a patch to files.",
        {"patchText": _s("The full patch text that describes all changes to be made")},
        ["patchText"],
    ),
]

FOLDLINE = tool_specs(default_tools())

KINDS_OF = {
    "claude-code": {
        "Bash": "Bash",
        "Glob": "Glob",
        "Grep": "Grep",
        "Read": "Read",
        "Edit": "Edit",
        "Write": "Write",
    },
    "opencode": {
        "bash": "Bash",
        "edit": "Edit",
        "glob": "Glob",
        "grep": "Grep",
        "list": "List",
        "read": "Read",
        "write": "Write",
    },
    "foldline": {t["name"]: t["name"] for t in FOLDLINE},
}
SETS = {"claude-code": CLAUDE_CODE_LIKE, "opencode": OPENCODE_LIKE, "foldline": FOLDLINE}


@pytest.mark.parametrize("agent", list(SETS))
def test_each_agents_tools_are_read_by_their_purpose_and_the_rest_are_left_alone(agent: str) -> None:
    box = Toolbox.of(SETS[agent])
    assert {kind: spec.name for kind, spec in box.specs.items()} == {k: n for n, k in KINDS_OF[agent].items()}
    absolute = agent != "foldline"  # foldline's tools take paths relative to the cwd as well
    assert box.absolute("Read") is absolute
    assert box.absolute("Edit") is absolute


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("ListAgents", "Lists the agents and other sessions you can send a message to."),
        ("ViewTasks", "Shows the tasks running in the background and their state."),
        ("ReadSkills", "Reads the skills available in this session."),
    ],
)
def test_a_tool_named_for_something_other_than_files_is_never_taken_for_a_file_tool(
    name: str, description: str
) -> None:
    tool = {"name": name, "description": description, "input_schema": {"type": "object", "properties": {}}}
    assert Toolbox.of([*CLAUDE_CODE_LIKE, tool]).specs == Toolbox.of(CLAUDE_CODE_LIKE).specs


@pytest.mark.parametrize(
    ("text", "cwd"),
    [
        ("<env>\nWorking directory: /tmp/ws\nIs directory a git repo: No\n</env>", "/tmp/ws"),
        (
            "Information about the environment:\n<env>\n  Working directory: /home/u/p\n</env>",
            "/home/u/p",
        ),
        ("Primary working directory: /srv/app", "/srv/app"),
        ("cwd: /x/y/", "/x/y"),
        ("The current working directory is `/data/proj`.", "/data/proj"),
        ("You are a coding agent.", None),
    ],
)
def test_the_working_directory_is_read_from_the_requests_own_text(text: str, cwd: str | None) -> None:
    assert working_directory([text]) == cwd


# --- a tiny executor for other agents' tools (their output formats, their path rules) --------------


def _execute(kind: str, args: Mapping[str, Any], ws: Path, style: str) -> tuple[str, bool]:
    """Run one call the way an agent of `style` would (its own result formats)."""

    def path_of(value: object) -> Path:
        assert isinstance(value, str)
        assert value.startswith(str(ws) + "/"), value  # absolute, inside the workspace
        return Path(value)

    if kind == "Read":
        path = path_of(args["file_path"])
        if not path.is_file():
            return f"File does not exist: {path}", True
        lines = path.read_text().splitlines()
        start = int(args.get("offset") or 0)
        count = int(args.get("limit") or 2000)
        shown = lines[start : start + count]
        if style == "claude-code":
            return "\n".join(f"{n + start + 1:6}\u2192{line}" for n, line in enumerate(shown)), False
        if style == "cat-n":  # foldline's own Read, and Claude Code 2.1's
            return "\n".join(f"{n + start + 1:6}\t{line}" for n, line in enumerate(shown)), False
        body = "\n".join(f"{n + start + 1:05}| {line}" for n, line in enumerate(shown))
        return f"<file>\n{body}\n\n(End of file - total {len(lines)} lines)\n</file>", False
    if kind in ("Edit", "Write"):
        path = path_of(args["file_path"])
        if kind == "Write":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(args["content"])
            return f"File created successfully at: {path}", False
        text = path.read_text()
        if text.count(args["old_string"]) != 1:
            return "old_string not found exactly once", True
        path.write_text(text.replace(args["old_string"], args["new_string"]))
        return f"The file {path} has been updated.", False
    if kind == "Bash":
        done = subprocess.run(
            ["bash", "-c", args["command"]], cwd=ws, capture_output=True, text=True, timeout=60, check=False
        )
        return (done.stdout + done.stderr)[-30_000:], done.returncode != 0 and not done.stdout
    return _search(kind, args, ws, path_of)


def _search(
    kind: str, args: Mapping[str, Any], ws: Path, path_of: Callable[[object], Path]
) -> tuple[str, bool]:
    def root_of(value: object) -> Path:
        # a search path may be relative to the working directory (both agents' search tools say so)
        return path_of(value) if str(value).startswith("/") else ws / str(value)

    if kind == "Glob":
        root = root_of(args["path"]) if "path" in args else ws
        found = sorted(str(p) for p in root.glob(str(args["pattern"])) if p.is_file())
        return "\n".join(found[:100]) or "No files found", False
    if kind == "Grep":
        root = root_of(args["path"]) if "path" in args else ws
        flags = re.IGNORECASE if args.get("-i") else 0
        regex = re.compile(str(args["pattern"]), flags)
        include = args.get("glob") or args.get("include")
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        hits = []
        for f in files:
            if include and not fnmatch.fnmatch(f.name, str(include)):
                continue
            if f.suffix in (".log", ".csv"):
                continue  # keep the test fast; the model greps logs through its own calls
            for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
                if regex.search(line):
                    hits.append(f"{f}:{n}:{line}")
        return "\n".join(hits[:100]) or "No files found", False
    if kind == "List":
        root = root_of(args["path"]) if "path" in args else ws
        return "\n".join(sorted(f"{p}" for p in root.iterdir())), False
    raise AssertionError(f"unexpected kind {kind}")


def _system(ws: Path) -> str:
    return f"You are an agent.\n<env>\nWorking directory: {ws}\nPlatform: linux\n</env>"


def _play(
    tools: list[dict[str, Any]],
    kinds: Mapping[str, str],
    ws: Path,
    prompts: list[str],
    *,
    style: str,
    seed: int = 5,
    rename: Callable[[str, Mapping[str, Any]], tuple[str, dict[str, Any]]] | None = None,
    canon: Mapping[str, str] | None = None,
    history: list[dict[str, Any]] | None = None,
    answers: list[str] | None = None,
    shell: bool = True,
    rounds: list[int] | None = None,
    preface: str | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """Play `prompts` as `style`'s agent loop would; every call, read back in the model's terms (and
    each prompt's tool rounds appended to `rounds`; `preface`, a text block before the first prompt in
    its message)."""
    backend = SimulatedBackend(seed=seed)
    messages: list[dict[str, Any]] = list(history or [])
    calls: list[tuple[str, dict[str, Any]]] = []
    schemas = {t["name"]: t["input_schema"] for t in tools}
    for prompt in prompts:
        before = [{"type": "text", "text": preface}] if preface and not calls else []
        messages.append({"role": "user", "content": [*before, {"type": "text", "text": prompt}]})
        for done in range(100):
            request = BackendRequest(model=MODEL, messages=messages, tools=tools, system=_system(ws))
            content = [dict(b) for b in backend.reply(request).content]
            uses = [b for b in content if b["type"] == "tool_use"]
            for n, block in enumerate(uses):
                block["id"] = f"toolu_{len(messages)}_{n}"
            messages.append({"role": "assistant", "content": content})
            if not uses:
                if rounds is not None:
                    rounds.append(done)
                if answers is not None:
                    answers.append("".join(str(b.get("text", "")) for b in content))
                break
            results = []
            for block in uses:
                name, args = block["name"], block["input"]
                schema = schemas[name]
                assert set(args) <= set(schema["properties"]), (name, args)
                assert set(schema.get("required", [])) <= set(args), (name, args)
                kind = kinds[name]
                if rename is not None:
                    name, args = rename(name, args)
                calls.append((kind, dict(args)))
                names = _CANON if canon is None else canon
                canonical = {names.get(k, k): v for k, v in block["input"].items()}
                if kind == "Bash" and not shell:  # fast and deterministic: the files, as `find` lists them
                    text, error = "\n".join(sorted(f"./{p.relative_to(ws)}" for p in ws.rglob("*.py"))), False
                else:
                    text, error = _execute(kind, canonical, ws, style)
                assert not error, (name, args, text[:300])
                results.append({"type": "tool_result", "tool_use_id": block["id"], "content": text})
            messages.append({"role": "user", "content": results})
    return calls


_CANON = {"filePath": "file_path", "oldString": "old_string", "newString": "new_string", "include": "glob"}

PROMPTS = [
    "Add a bulk discount to the pricing module: look at how pricing computes its values first.",
    "Where is check_total_3 defined and is it tested?",
    "Review src/ledgerly/orders.py for edge cases with negative values and fix what you find.",
    "Write more tests for shipping and run the whole test suite.",
    "Review src/ledgerly/taxes.py for edge cases with negative values and fix what you find.",
    "Explain how taxes and reports interact.",
]
"""Prompts for the workspace of seed 4 (package `ledgerly`)."""


@pytest.mark.parametrize("agent", ["claude-code", "opencode"])
def test_another_agents_tools_are_used_with_their_names_params_and_absolute_paths(
    agent: str, tmp_path: Path
) -> None:
    ws = generate_workspace(tmp_path / "ws", seed=4, data_rows=200, log_lines=300)
    calls = _play(SETS[agent], KINDS_OF[agent], ws, PROMPTS, style=agent)
    used = {kind for kind, _ in calls}
    assert {"Read", "Edit"} <= used, used  # it reads and edits through the agent's own tools
    assert len(calls) >= 10
    # an edit really applied: the workspace's sources carry the model's mark
    assert any("# checked:" in p.read_text() for p in (ws / "src").rglob("*.py"))


def test_a_tool_whose_purpose_cannot_be_told_or_deferred_and_not_loaded_is_never_called(
    tmp_path: Path,
) -> None:
    ws = generate_workspace(tmp_path / "ws", seed=4, data_rows=200, log_lines=300)
    mystery = _tool("frob", "Does the thing.", {"target": _s("What to frob")}, ["target"])
    deferred = {**CLAUDE_CODE_LIKE[4], "name": "ReadLater", "defer_loading": True}
    tools = [mystery, deferred, CLAUDE_CODE_LIKE[1]]  # frob, a deferred reader, Bash
    box = Toolbox.of(tools)
    assert set(box.specs) == {"Bash"}
    calls = _play(tools, {"Bash": "Bash"}, ws, PROMPTS[:2], style="claude-code")
    assert calls
    assert all(kind == "Bash" for kind, _ in calls)
    # once a tool search has loaded it (a tool_reference), the deferred reader is used
    loaded = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "ToolSearch", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "tool_reference", "tool_name": "ReadLater"}],
                }
            ],
        },
    ]
    assert "Read" in Toolbox.of(tools, loaded)


_READ_NAMES = ["Read", "read", "view_file", "ReadFile", "open_file", "cat"]
_EDIT_NAMES = ["Edit", "edit", "str_replace", "EditFile", "replace_in_file"]
_BASH_NAMES = ["Bash", "bash", "shell", "run_command", "execute_command", "terminal"]
_GREP_NAMES = ["Grep", "grep", "search_content", "ripgrep", "rg"]
_GLOB_NAMES = ["Glob", "glob", "find_files", "glob_files"]
_PATH_NAMES = ["file_path", "filePath", "path", "file", "target_file", "absolute_path"]
_OLD_NAMES = ["old_string", "oldString", "old_str", "old_text", "search"]
_NEW_NAMES = ["new_string", "newString", "new_str", "new_text", "replacement"]
_CMD_NAMES = ["command", "cmd", "shell_command"]


@pytest.mark.slow
@given(
    st.sampled_from(_READ_NAMES),
    st.sampled_from(_EDIT_NAMES),
    st.sampled_from(_BASH_NAMES),
    st.sampled_from(_GREP_NAMES),
    st.sampled_from(_GLOB_NAMES),
    st.sampled_from(_PATH_NAMES),
    st.sampled_from(_OLD_NAMES),
    st.sampled_from(_NEW_NAMES),
    st.sampled_from(_CMD_NAMES),
    st.permutations(range(5)),
)
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
def test_renaming_tools_and_parameters_consistently_changes_nothing_but_the_names(
    tmp_path_factory: pytest.TempPathFactory,
    read: str,
    edit: str,
    bash: str,
    grep: str,
    glob: str,
    path: str,
    old: str,
    new: str,
    cmd: str,
    order: list[int],
) -> None:
    names = {"Read": read, "Edit": edit, "Bash": bash, "Grep": grep, "Glob": glob}
    params = {"file_path": path, "old_string": old, "new_string": new, "command": cmd}
    back = {v: k for k, v in params.items()}
    base = [t for t in CLAUDE_CODE_LIKE if t["name"] in names]
    renamed = []
    for tool in base:
        schema = tool["input_schema"]
        renamed.append(
            {
                **tool,
                "name": names[tool["name"]],
                "input_schema": {
                    **schema,
                    "properties": {params.get(k, k): v for k, v in schema["properties"].items()},
                    "required": [params.get(k, k) for k in schema["required"]],
                },
            }
        )
    renamed = [renamed[i] for i in order]  # the order they are offered in does not matter either
    kinds = {names[k]: k for k in names}

    def undo(name: str, args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        return kinds[name], {back.get(k, k): v for k, v in args.items()}

    ws1 = generate_workspace(tmp_path_factory.mktemp("a") / "ws", seed=4, data_rows=200, log_lines=300)
    ws2 = generate_workspace(tmp_path_factory.mktemp("b") / "ws", seed=4, data_rows=200, log_lines=300)
    plain = _play(base, {n: n for n in names}, ws1, PROMPTS[:3], style="claude-code", shell=False)
    other = _play(renamed, kinds, ws2, PROMPTS[:3], style="claude-code", rename=undo, canon=back, shell=False)

    def relative(calls: list[tuple[str, dict[str, Any]]], ws: Path) -> list[tuple[str, str]]:
        return [(k, repr(sorted(a.items())).replace(str(ws), "WS")) for k, a in calls]

    assert relative(other, ws2) == relative(plain, ws1)


# --- item 19: search terms are the code the prompt names ---------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
async def test_where_is_add_defined_greps_for_add_and_finds_its_definition_and_test(
    tmp_path: Path, seed: int
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    (ws / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    config = Config(transcript=TranscriptConfig(sessions_dir=tmp_path / "s", fsync="never"))
    async with Session.open(
        tmp_path / "s" / "x.jsonl",
        provider=SimulatedProvider(seed=seed),
        workspace=ws,
        config=config,
        tools=default_tools(),
        permission_mode="bypassPermissions",
        fsync="never",
    ) as session:
        result = await session.submit_message("Where is add defined and is it tested?")
        records = list(session.engine.timeline)
    searched = [
        str(b["input"].get("pattern") or b["input"].get("command"))
        for r in records
        for b in getattr(getattr(r, "message", None), "content", None) or []
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") in ("Grep", "Bash")
    ]
    assert searched
    assert "add" in searched[0]
    assert not any(verb in s for s in searched for verb in ("defined", "tested"))
    assert "calc.py" in result.text
    assert "test_calc.py" in result.text
    assert "nothing matching" not in result.text


# --- Snip knows nothing of facts ------------------------------------------------------------------


def test_snip_takes_an_old_result_that_states_a_planted_fact_like_any_bulky_output(tmp_path: Path) -> None:
    ws = generate_workspace(tmp_path / "ws", seed=3, data_rows=100, log_lines=100)
    fact = output_facts_for(3)[0]
    assert fact.script is not None
    output = subprocess.run(["sh", fact.script], cwd=ws, capture_output=True, text=True, check=True).stdout
    assert fact.line in output
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": fact.statement}]}]
    messages.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "x"}}],
        }
    )
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": output},
                {"type": "text", "text": "[id:r1]"},
            ],
        }
    )
    messages += [{"role": "assistant", "content": [{"type": "text", "text": "It passes."}]}]
    for n in range(4):
        messages += [
            {"role": "user", "content": [{"type": "text", "text": f"Tell me about module {n}."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        ]
    nudge = "<system-reminder>The context is 85% full. You may call the Snip tool.</system-reminder>"
    messages.append(
        {"role": "user", "content": [{"type": "text", "text": "Now explain the parser.\n" + nudge}]}
    )
    reply = SimulatedBackend(seed=1).reply(BackendRequest(model=MODEL, messages=messages, tools=FOLDLINE))
    snips = [b for b in reply.content if b.get("type") == "tool_use" and b["name"] == "Snip"]
    assert [s["input"]["ids"] for s in snips] == [["r1"]]


def _snip_history(tmp_path: Path) -> list[dict[str, Any]]:
    """A session whose first result is bulky (tagged `[id:r1]`), then small turns."""
    ws = generate_workspace(tmp_path / "ws", seed=3, data_rows=100, log_lines=100)
    fact = output_facts_for(3)[0]
    assert fact.script is not None
    output = subprocess.run(["sh", fact.script], cwd=ws, capture_output=True, text=True, check=True).stdout
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": fact.statement}]}]
    messages.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "x"}}],
        }
    )
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": output},
                {"type": "text", "text": "[id:r1]"},
            ],
        }
    )
    messages += [{"role": "assistant", "content": [{"type": "text", "text": "It passes."}]}]
    for n in range(4):
        messages += [
            {"role": "user", "content": [{"type": "text", "text": f"Tell me about module {n}."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        ]
    return messages


def _snipped(messages: list[dict[str, Any]], reminder: str, tools: list[dict[str, Any]]) -> list[Any]:
    """The ids of every Snip-purpose call the model makes for a prompt carrying `reminder`."""
    prompt = {"role": "user", "content": [{"type": "text", "text": "Now explain the parser.\n" + reminder}]}
    box = Toolbox.of(tools)
    reply = SimulatedBackend(seed=1).reply(
        BackendRequest(model=MODEL, messages=[*messages, prompt], tools=tools)
    )
    snip = box.specs.get("Snip")
    return [list(b["input"].values()) for b in reply.content if snip and b.get("name") == snip.name]


def _remover(name: str, param: str, description: str) -> dict[str, Any]:
    items = {"type": "array", "items": {"type": "string"}, "description": "Which ones"}
    return _tool(name, description, {param: items}, [param])


_NO_SNIP = [t for t in FOLDLINE if t["name"] != "Snip"]


@pytest.mark.parametrize(
    ("name", "param", "description"),
    [
        ("Snip", "ids", "Remove messages you no longer need from the conversation context."),
        ("prune_context", "message_ids", "Prunes old tool output from the conversation by id."),
        ("DropMessages", "tags", "Drops messages from the context window, by the ids in their tags."),
        ("context_editor", "entry_ids", "Deletes entries from the context you are done with."),
        ("x7", "snip_ids", "Remove earlier messages from the conversation history to free room."),
    ],
)
def test_a_snip_tool_is_read_by_its_purpose_whatever_its_name(
    tmp_path: Path, name: str, param: str, description: str
) -> None:
    """Snip was recognised only by a name holding "snip": a client offering the same purpose under
    another name got no snipping, and the verdict moved with a name."""
    tools = [*_NO_SNIP, _remover(name, param, description)]
    assert Toolbox.of(tools).specs["Snip"].name == name
    assert _snipped(_snip_history(tmp_path), snip_nudge(85), tools) == [[["r1"]]]


@pytest.mark.parametrize(
    ("name", "param", "description"),
    [
        ("drop_table", "columns", "Drops columns from a table in the database."),  # not the context
        ("prune_context", "count", "Prunes the oldest messages from the conversation."),  # no ids to give
        ("fetch_issues", "issue_ids", "Fetches the issues with these ids from the tracker."),
    ],
)
def test_a_tool_that_does_not_remove_context_by_id_is_never_taken_for_snip(
    name: str, param: str, description: str
) -> None:
    tool = _remover(name, param, description)
    if param == "count":
        tool["input_schema"]["properties"][param] = {"type": "integer"}
    assert "Snip" not in Toolbox.of([*_NO_SNIP, tool])


_INNER = snip_nudge(85).removeprefix("<system-reminder>").removesuffix("</system-reminder>")


@pytest.mark.parametrize(
    "text",
    [
        _INNER,
        _INNER.lower(),  # "snip tool": once it changed feature seed 7 from $15.72 to $13.51
        _INNER.upper(),
        "Context window 85% used. Drop tool output you no longer need.",
        "You are running out of context space: please prune old tool results.",
        "Remember that snip can remove stale messages.",
        "the conversation is nearly full; clear bulky entries you are done with",
    ],
)
def test_the_nudge_to_snip_is_read_in_any_wording_and_case(tmp_path: Path, text: str) -> None:
    tools = [*_NO_SNIP, _remover("Snip", "ids", "Remove messages from the conversation context.")]
    assert _snipped(_snip_history(tmp_path), f"<system-reminder>{text}</system-reminder>", tools) == [
        [["r1"]]
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Today's date is 2026-12-04.",
        "The file src/parser.py was modified by the user since you last read it.",
        "The TodoWrite tool hasn't been used recently.",
    ],
)
def test_a_reminder_that_does_not_invite_removing_context_never_makes_the_model_snip(
    tmp_path: Path, text: str
) -> None:
    tools = [*_NO_SNIP, _remover("Snip", "ids", "Remove messages from the conversation context.")]
    assert _snipped(_snip_history(tmp_path), f"<system-reminder>{text}</system-reminder>", tools) == []


# --- the workload is the user's ---------------------------------------------------------------------


def test_a_turns_work_is_the_same_whatever_the_strategy_left_of_the_session(tmp_path: Path) -> None:
    """The rounds a prompt takes depend on the prompt, not on how many earlier prompts are visible."""
    prompt = PROMPTS[0]
    seen: list[list[str]] = []
    for shown in (0, 1, 5):
        ws = generate_workspace(tmp_path / f"ws{shown}", seed=4, data_rows=200, log_lines=300)
        earlier = [
            m
            for n in range(shown)
            for m in (
                {
                    "role": "user",
                    "content": [{"type": "text", "text": f"Earlier request {n}: what is in reports?"}],
                },
                {"role": "assistant", "content": [{"type": "text", "text": "Reports renders totals."}]},
            )
        ]
        calls = _play(
            CLAUDE_CODE_LIKE, KINDS_OF["claude-code"], ws, [prompt], style="claude-code", history=earlier
        )
        seen.append([kind for kind, _ in calls])
    assert seen[0]
    assert seen[1] == seen[0]
    assert seen[2] == seen[0]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    summary=st.sampled_from(
        [
            "This session continues an earlier conversation that was compacted. Summary:\n"
            "## Files\n{ws}/src/app.py\n## Next Step\n{prompt}",
            "Context so far: we read {ws}/README.md and ran the tests; all passed.",
            "<summary>Earlier work: nothing pending.</summary>",
        ]
    ),
    folder=st.from_regex(r"tmp[a-z0-9_]{8}", fullmatch=True),
)
def test_text_a_client_puts_before_the_prompt_in_its_message_does_not_change_the_turns_work(
    tmp_path_factory: pytest.TempPathFactory, summary: str, folder: str
) -> None:
    """foldline merges a turn-boundary summary's message with the next prompt's: the turn's work was
    drawn from the summary's text with the prompt, so a folder's random name (which the summary quotes)
    or a summary's wording re-drew it. The prompt is the message's last typed block."""
    ws = generate_workspace(tmp_path_factory.mktemp("ws"), seed=4, data_rows=200, log_lines=300)
    prompts = user_prompts("debug", 3, 4)
    play = functools.partial(
        _play, CLAUDE_CODE_LIKE, KINDS_OF["claude-code"], ws, prompts, style="claude-code"
    )
    alone = play()
    preface = summary.format(ws=f"/tmp/{folder}/ws", prompt=prompts[0])
    assert alone
    assert play(preface=preface) == alone


@pytest.mark.parametrize("placeholder", ["[Old tool result content cleared]", "[tool result cleared]"])
def test_a_cleared_read_is_read_again_and_the_extra_round_costs_work_not_progress(placeholder: str) -> None:
    prompt = "Review src/ledgerly/orders.py for edge cases with negative values and fix what you find."
    read = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "src/ledgerly/orders.py"}}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": prompt}]},
        {"role": "assistant", "content": [read]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": placeholder}]},
    ]
    backend = SimulatedBackend(seed=0)  # a turn of 10 planned rounds for this prompt
    reply = backend.reply(BackendRequest(model=MODEL, messages=messages, tools=FOLDLINE))
    again = [b for b in reply.content if b.get("type") == "tool_use"]
    assert [(b["name"], b["input"]) for b in again] == [("Read", {"file_path": "src/ledgerly/orders.py"})]
    # the re-read round is not counted against the turn's planned rounds: with it answered, the
    # model carries on as if the first read had never been lost (the same next call)
    listing = "\n".join(f"{n:6}\tline {n} = {n}" for n in range(1, 30))
    again[0]["id"] = "t2"
    reread = [
        *messages,
        {"role": "assistant", "content": again},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": listing}]},
    ]
    kept = [
        messages[0],
        messages[1],
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": listing}]},
    ]
    after_reread = backend.reply(BackendRequest(model=MODEL, messages=reread, tools=FOLDLINE)).content
    never_lost = backend.reply(BackendRequest(model=MODEL, messages=kept, tools=FOLDLINE)).content
    uses = [(b["name"], b["input"]) for b in after_reread if b.get("type") == "tool_use"]
    assert uses
    assert uses == [(b["name"], b["input"]) for b in never_lost if b.get("type") == "tool_use"]


# --- time passes between turns ------------------------------------------------------------------------


def test_the_users_pauses_follow_the_documented_distribution_and_depend_on_seed_and_turn_only() -> None:
    anchors = SimulatedConfig().think_time_quantiles
    pauses = sorted(think_time(7, turn, anchors) for turn in range(1, 4001))
    assert think_time(7, 0, anchors) == 0.0
    assert [think_time(7, t, anchors) for t in range(1, 50)] == [
        think_time(7, t, anchors) for t in range(1, 50)
    ]
    assert [think_time(7, t, anchors) for t in range(1, 50)] != [
        think_time(8, t, anchors) for t in range(1, 50)
    ]
    for share, seconds in anchors[1:-1]:
        at = pauses[int(share * len(pauses))]
        assert seconds * 0.8 <= at <= seconds * 1.25, (share, seconds, at)
    over_ttl = sum(p > 300 for p in pauses) / len(pauses)
    assert 0.2 <= over_ttl <= 0.3  # a quarter of the pauses outlast the 5-minute cache TTL


@pytest.mark.anyio
async def test_a_simulated_session_runs_on_virtual_time_and_the_server_cache_expires_on_it(
    tmp_path: Path,
) -> None:
    from foldline.providers.anthropic import AnthropicProvider
    from foldline.server.app import create_app
    from foldline.server.config import ServerConfig
    from foldline.server.testing import run_server
    from foldline.simulation import SimulatedClock, simulate

    seed, turns = 2, 8
    boundaries: list[int] = [0]
    clock = SimulatedClock()
    start = clock.now
    app = create_app(ServerConfig(), backend=SimulatedBackend(seed=seed), clock=clock)
    # every breakpoint for 5 minutes, so any pause past them is a miss (design.md R4.2.4 keeps
    # the prefix through the previous prompt for an hour by default)
    five_minutes = CacheConfig(static_ttl="5m", turn_ttl="5m")
    config = Config(
        transcript=TranscriptConfig(sessions_dir=tmp_path / "s", fsync="never"), cache=five_minutes
    )
    with run_server(app) as url:
        report = await simulate(
            AnthropicProvider(base_url=url, api_key="k"),
            profile="feature",
            turns=turns,
            seed=seed,
            workspace=tmp_path / "ws",
            sessions_dir=tmp_path / "s",
            config=config,
            clock=clock,
            on_turn=lambda turn, r: boundaries.append(len(r.requests)),
        )
    assert report.turns_done == turns
    pauses = [think_time(seed, t, SimulatedConfig().think_time_quantiles) for t in range(turns)]
    assert clock.now == pytest.approx(start + sum(pauses))  # only the user's pauses moved it
    # the first request of a turn after a pause longer than the TTL reads nothing from the cache
    first_of_turn = {t: report.requests[boundaries[t]] for t in range(1, turns)}
    expired = [t for t in range(1, turns) if pauses[t] > 300]
    warm = [t for t in range(1, turns) if pauses[t] < 240]
    assert expired
    assert warm
    assert [first_of_turn[t].cache_read for t in expired] == [0] * len(expired)
    assert all(first_of_turn[t].cache_read > 0 for t in warm), [first_of_turn[t] for t in warm]


@pytest.mark.parametrize("agent", ["claude-code", "opencode"])
def test_with_only_a_shell_to_search_with_the_question_still_greps_for_the_identifier(
    agent: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    (ws / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    tools = [t for t in SETS[agent] if KINDS_OF[agent].get(t["name"]) in ("Bash", "Read")]
    answers: list[str] = []
    calls = _play(
        tools,
        KINDS_OF[agent],
        ws,
        ["Where is add defined and is it tested?"],
        style=agent,
        seed=1,
        answers=answers,
    )
    assert calls[0][0] == "Bash"
    assert "grep" in calls[0][1]["command"]
    assert "'add'" in calls[0][1]["command"]
    assert "calc.py" in answers[-1]
    assert "test_calc.py" in answers[-1]


@pytest.mark.parametrize("profile", ["feature", "debug"])
@pytest.mark.parametrize("agent", ["claude-code", "opencode"])
def test_a_prompts_rounds_do_not_depend_on_which_search_tools_a_client_offers(
    agent: str, profile: str, tmp_path: Path
) -> None:
    """Claude Code in `-p` mode offers no Glob or Grep: a turn must take the rounds it takes with them,
    through the shell (a turn that drew a glob once started no work at all without one)."""
    prompts = user_prompts(profile, 14, 3)
    searchless = [t for t in SETS[agent] if KINDS_OF[agent].get(t["name"]) not in ("Glob", "Grep")]
    seen: dict[str, list[int]] = {}
    for label, tools in (("all", SETS[agent]), ("searchless", searchless)):
        ws = generate_workspace(tmp_path / label, seed=3, data_rows=200, log_lines=300)
        rounds: list[int] = []
        calls = _play(tools, KINDS_OF[agent], ws, prompts, style=agent, seed=3, shell=False, rounds=rounds)
        seen[label] = rounds
        if label == "searchless":
            assert {kind for kind, _ in calls} <= {"Bash", "Read", "Edit", "Write"}
    assert len(seen["all"]) == len(prompts)
    assert sum(seen["all"]) >= len(prompts)
    assert seen["searchless"] == seen["all"]


def test_the_working_directory_is_found_where_a_client_moved_it_after_compacting() -> None:
    """After its compaction Claude Code states its environment in a reminder riding on a tool result;
    the model still knows where it works and reads files by their absolute paths."""
    env = "<system-reminder>\n# Environment\n - Primary working directory: /srv/ws\n</system-reminder>"
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Summary of the conversation so far: ..."}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": f"src\nlogs\n{env}"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Listed."}]},
        {"role": "user", "content": [{"type": "text", "text": "Read logs/worker.log: what failed?"}]},
    ]
    request = BackendRequest(model=MODEL, messages=messages, tools=CLAUDE_CODE_LIKE, system="An agent.")
    reply = SimulatedBackend(seed=2).reply(request)
    reads = [b["input"] for b in reply.content if b.get("type") == "tool_use" and b["name"] == "Read"]
    assert reads
    assert reads[0]["file_path"] == "/srv/ws/logs/worker.log"


def test_an_answer_reports_the_same_lines_whatever_the_clients_listing_format(tmp_path: Path) -> None:
    """opencode numbers a Read listing `00012| code`; the model once stripped only `cat -n`'s tab, so
    it quoted no file line to opencode and answered it in a fraction of the tokens (its output was a
    sixth of foldline's over a session)."""
    answers: dict[str, list[str]] = {}
    for style in ("cat-n", "claude-code", "opencode"):
        ws = generate_workspace(tmp_path / style, seed=4, data_rows=200, log_lines=300)
        said: list[str] = []
        _play(CLAUDE_CODE_LIKE, KINDS_OF["claude-code"], ws, PROMPTS, style=style, answers=said, shell=False)
        answers[style] = [a.replace(str(ws), "WS") for a in said]
    assert sum("py: `def " in a or "py: `class " in a for a in answers["cat-n"]) >= 2
    assert answers["claude-code"] == answers["cat-n"]
    assert answers["opencode"] == answers["cat-n"]


def test_bytecode_a_search_lists_is_never_read_as_a_source() -> None:
    """Clients whose shell writes `__pycache__` list bytecode beside the sources; opencode's read of
    a `.pyc` ended its session in the benchmark. The model reads sources only."""
    listing = "\n".join(
        [
            "./src/app/__pycache__/parser.cpython-311.pyc",
            "./src/app/parser.py",
            "./tests/__pycache__/test_parser.cpython-311.pyc",
            "./tests/test_parser.py",
        ]
    )
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "How does the parser treat negative values?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Bash",
                    "input": {"command": "find . -name '*parser*'"},
                }
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": listing}]},
    ]
    read: list[str] = []
    for seed in range(12):
        request = BackendRequest(
            model=MODEL, messages=messages, tools=CLAUDE_CODE_LIKE, system=_system(Path("/w"))
        )
        content = SimulatedBackend(seed=seed).reply(request).content
        read += [
            b["input"]["file_path"] for b in content if b.get("type") == "tool_use" and b["name"] == "Read"
        ]
    assert "/w/src/app/parser.py" in read
    assert not [p for p in read if p.endswith(".pyc")]


@pytest.mark.anyio
async def test_the_work_a_turn_leaves_in_the_background_runs_before_the_users_pause(
    tmp_path: Path,
) -> None:
    """Collapse's summary forks start as a turn ends and take seconds; the user's pause comes after.
    A simulated session that let the pause pass first would send them to an expired cache and bill
    cold writes no real session pays."""
    from foldline.providers.anthropic import AnthropicProvider
    from foldline.server.app import create_app
    from foldline.server.config import ServerConfig
    from foldline.server.testing import run_server
    from foldline.simulation import SimulatedClock, simulate

    clock = SimulatedClock()
    sent: list[tuple[float, int]] = []  # (the clock, max_tokens) of every request, in order

    class Stamped(AnthropicProvider):
        def stream(self, body: dict[str, Any], *, betas: Any = ()) -> Any:
            sent.append((clock.now, int(body["max_tokens"])))
            return super().stream(body, betas=betas)

    seed, turns = 7, 12
    app = create_app(ServerConfig(), backend=SimulatedBackend(seed=seed, profile="debug"), clock=clock)
    # span summaries (a record fold makes no request to time)
    collapse = CollapseConfig(folds="summary")
    transcript = TranscriptConfig(sessions_dir=tmp_path / "s", fsync="never")
    config = Config(transcript=transcript, collapse=collapse)
    with run_server(app) as url:
        report = await simulate(
            Stamped(base_url=url, api_key="k"),
            profile="debug",
            turns=turns,
            seed=seed,
            workspace=tmp_path / "ws",
            sessions_dir=tmp_path / "s",
            config=config,
            clock=clock,
        )
    assert report.turns_done == turns
    main = max({m for _, m in sent}, key=[m for _, m in sent].count)
    forks = [i for i, (_, m) in enumerate(sent) if m != main and i > 0]
    assert forks  # the session folded some finished turns
    # each fork is sent at the moment of the request before it, not a pause later
    assert [sent[i][0] for i in forks] == [sent[i - 1][0] for i in forks]
    assert clock.now > sent[0][0] + 300  # and the session did pause, past the 5-minute TTL


def test_a_fact_is_never_read_from_the_environment_block() -> None:
    """The block states the client's machine, not the conversation: a commit message that reads like
    a stated fact is not one the user stated."""
    block = (
        "<environment>\nWorking directory: /w\nRecent commits:\nabc1234 the retry limit is 7.\n</environment>"
    )
    backend = SimulatedBackend(seed=1)
    question = [{"role": "user", "content": "What is the retry limit?"}]
    reply = backend.reply(BackendRequest(model=MODEL, messages=question, system=f"Be brief.\n\n{block}"))
    assert "I don't know" in str(reply.content[0].get("text"))
    stated = BackendRequest(model=MODEL, messages=question, system="Notes: the retry limit is 7.")
    assert backend.reply(stated).content[0].get("text") == "The retry limit is 7."
