"""The tool interface: the `Tool` protocol, the context a call runs in, and the result it returns.

Owns `Tool`, `ToolContext`, `ToolResult`, `ReadRegistry` (which files the model has read, so Write
and Edit can insist on a prior Read), `BaseTool` (the shared `run` wrapper), input validation against
a tool's JSON schema, and the mapping from a result to an API `tool_result` block.

Invariants:
- `ToolContext.workspace` is canonical (`os.path.realpath`) and fixed at launch; `cwd` may move
  (the model can `cd`), the workspace boundary never does (CVE-2025-59532).
- `Tool.run` never raises for a problem the model caused: bad input, a missing file, an ambiguous
  edit all come back as `ToolResult(is_error=True)` with a message the model can act on.
- `ToolResult.structured` is UI-only data; `result_block` never puts it on the wire.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio

from foldline._types import Block, JSONObject
from foldline.config import ToolsConfig
from foldline.containment.checkpoints import CheckpointStore
from foldline.containment.sandbox import Sandbox
from foldline.errors import ToolError

__all__ = [
    "BaseTool",
    "FileState",
    "ReadRegistry",
    "Tool",
    "ToolContext",
    "ToolResult",
    "find_tool",
    "input_error",
    "result_block",
    "tool_specs",
    "validate_input",
]


@dataclass(frozen=True)
class ToolResult:
    """What a tool call produced."""

    content: str | list[Block]
    """Text, or content blocks (`text`, `image`) for the API `tool_result`."""
    is_error: bool = False
    structured: JSONObject | None = None
    """Data for the UI and the engine (exit codes, snip ids); never sent to the model."""


@dataclass(frozen=True)
class FileState:
    """A file as the model last saw it through Read (or last wrote it)."""

    mtime_ns: int
    sha256: str


def file_digest(data: bytes) -> str:
    """The sha256 hex digest used to recognise an unchanged file."""
    return hashlib.sha256(data).hexdigest()


class ReadRegistry:
    """Which files the model has read in this session: canonical path -> `FileState`.

    Write and Edit refuse to touch an existing file the model has not read, or one that changed on
    disk since it did (the model would be editing a stale picture), as Claude Code does.
    """

    def __init__(self) -> None:
        self._files: dict[str, FileState] = {}

    def record(self, path: Path, data: bytes) -> None:
        """Remember `path` as seen with contents `data` (call after a Read or a successful write)."""
        self._files[str(path)] = FileState(path.stat().st_mtime_ns, file_digest(data))

    def get(self, path: Path) -> FileState | None:
        """The state recorded for `path`, if it was read."""
        return self._files.get(str(path))

    def check_fresh(self, path: Path) -> None:
        """Raise `ToolError` unless `path` was read and is unchanged since (mtime, else content)."""
        seen = self.get(path)
        if seen is None:
            raise ToolError(f"File has not been read yet: {path}. Read it first before writing to it.")
        if path.stat().st_mtime_ns != seen.mtime_ns and file_digest(path.read_bytes()) != seen.sha256:
            raise ToolError(
                f"File has been modified since read, either by the user or by a linter: {path}. "
                "Read it again before writing to it."
            )


def _ignore_progress(_text: str) -> None:
    return None


def _nothing_denied(_path: Path) -> bool:
    return False


@dataclass(frozen=True)
class ToolContext:
    """Everything a tool call may use besides its input.

    `workspace` is canonicalised on construction. `abort` is set by the engine on Ctrl-C; long tools
    watch it. `progress` receives one-line status texts the engine turns into `progress` entries.
    """

    workspace: Path
    cwd: Path | None = None
    """Where relative paths and commands start; defaults to `workspace`. May leave the workspace."""
    abort: anyio.Event = field(default_factory=anyio.Event)
    progress: Callable[[str], None] = _ignore_progress
    read_files: ReadRegistry = field(default_factory=ReadRegistry)
    limits: ToolsConfig = field(default_factory=ToolsConfig)
    read_denied: Callable[[Path], bool] = _nothing_denied
    """Files Grep and Glob must neither search nor list (build it with
    `permissions.read_denied_filter`); Read itself is stopped earlier, by the permission check."""
    run_tool: Callable[[str, Mapping[str, Any]], Awaitable[ToolResult]] | None = None
    """Runs another tool by name under the same permissions, recording it as a virtual pair
    (R1.6); set by the engine, used by composite tools such as Batch."""
    snip_ids: Callable[[Sequence[str]], tuple[tuple[str, ...], tuple[str, ...], int]] | None = None
    """Resolves Snip's short ids on the session's records: (ids naming an entry still in the
    conversation, ids naming nothing there, tool-pair partners removed with them); set by the engine
    (`compact.snipping.resolve_snip`), so Snip's answer counts only what it really removes."""
    own_output_dirs: tuple[Path, ...] = ()
    """Folders foldline itself writes for the model to read back (the session's saved oversized
    results, R3.0): reading there is allowed without asking, even outside the workspace (deny and ask
    rules still apply). Canonicalised on construction."""
    sandbox: Sandbox | None = None
    """The OS sandbox Bash runs in (`sandbox.detect_sandbox`); None runs Bash unsandboxed."""
    checkpoints: CheckpointStore | None = None
    """Where a call's change is applied with its undo (`containment.checkpoints`); None: tools
    write the workspace directly and nothing can be undone."""
    turn: int = 0
    """The session's user turn the call belongs to (what `/rewind` counts)."""
    confirm: Callable[[str, str], Awaitable[bool]] | None = None
    """`await confirm(title, details)`: the user's yes for a change the policy holds
    (`containment.policy`); None (nobody to ask) refuses it."""

    def __post_init__(self) -> None:
        workspace = Path(os.path.realpath(self.workspace))
        object.__setattr__(self, "workspace", workspace)
        own = tuple(Path(os.path.realpath(d)) for d in self.own_output_dirs)
        object.__setattr__(self, "own_output_dirs", own)
        cwd = workspace if self.cwd is None else Path(os.path.realpath(workspace / self.cwd))
        object.__setattr__(self, "cwd", cwd)

    def for_turn(self, abort: anyio.Event | None = None) -> ToolContext:
        """This context with a fresh abort event (or `abort`), sharing everything else.

        Make one context per session and derive one per turn: the `read_files` registry must
        outlive the turn (a Read in one turn licenses an Edit in the next), an abort must not.
        """
        return replace(self, abort=abort if abort is not None else anyio.Event())

    @property
    def current_dir(self) -> Path:
        """`cwd`, typed as always set (it is, after construction)."""
        assert self.cwd is not None
        return self.cwd

    def resolve(self, path: str) -> Path:
        """`path` (absolute, `~`, or relative to `cwd`) with symlinks and `..` resolved."""
        return Path(os.path.realpath(self.current_dir / os.path.expanduser(path)))


@runtime_checkable
class Tool(Protocol):
    """A built-in tool as the engine sees it."""

    @property
    def name(self) -> str:
        """The API tool name (`Read`, `Bash`, ...)."""
        ...

    @property
    def description(self) -> str:
        """What the model is told the tool does."""
        ...

    @property
    def input_schema(self) -> JSONObject:
        """JSON schema of the input, as sent in the API `tools` list."""
        ...

    @property
    def concurrency_safe(self) -> bool:
        """May run in parallel with other concurrency-safe calls (R5.2)."""
        ...

    @property
    def compactable(self) -> bool:
        """Its old results may be cleared by microcompact (R3.2)."""
        ...

    async def run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Carry out one call; problems the model caused come back as `is_error` results."""
        ...


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def validate_input(schema: JSONObject, tool_input: Mapping[str, Any]) -> None:
    """Check `tool_input` against the top level of an object `schema`: required keys and types.

    Raises:
        ToolError: naming the missing or mistyped key, in words the model can act on.
    """
    if not isinstance(tool_input, Mapping):
        raise ToolError(f"Invalid input: expected an object, got {type(tool_input).__name__}")
    for key in schema.get("required", []):
        if key not in tool_input:
            raise ToolError(f"Invalid input: the required parameter `{key}` is missing")
    properties: dict[str, JSONObject] = schema.get("properties", {})
    if schema.get("additionalProperties") is False:
        for key in tool_input:
            if key not in properties:
                raise ToolError(f"Invalid input: an unexpected parameter `{key}` was provided")
    for key, value in tool_input.items():
        expected = properties.get(key, {}).get("type")
        if expected is None:
            continue
        types = _JSON_TYPES[expected]
        # bool is an int subclass in Python but not a JSON integer
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ToolError(f"Invalid input: `{key}` must be of type {expected}, got {value!r}")


def input_error(tool: Tool, tool_input: Mapping[str, Any]) -> str | None:
    """The `InputValidationError` text (Claude Code's wording) for a call that breaks `tool`'s schema,
    or `None`; checked before permissions, so a malformed call is never reported as a denial."""
    try:
        validate_input(tool.input_schema, tool_input)
    except ToolError as exc:
        issue = str(exc).removeprefix("Invalid input: ")
        return (
            f"<tool_use_error>InputValidationError: {tool.name} failed due to the following issue:\n"
            f"{issue}</tool_use_error>"
        )
    return None


class BaseTool:
    """Shared behaviour: validate the input, run `_run`, turn a `ToolError` into an error result."""

    name: str
    description: str
    input_schema: JSONObject
    concurrency_safe: bool = False
    compactable: bool = True

    async def run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """Validate `tool_input`, then carry out the call (see `Tool.run`)."""
        try:
            validate_input(self.input_schema, tool_input)
            return await self._run(tool_input, ctx)
        except ToolError as exc:
            return ToolResult(content=str(exc), is_error=True)

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raise NotImplementedError

    def precheck(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> str | None:
        """Why the call would fail whatever the answer, checked before anyone is asked to approve it
        (a Write to a file not read yet), or None. Side-effect free; `run` checks again."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def tool_specs(tools: list[Tool]) -> list[JSONObject]:
    """The Messages API `tools` parameter entries for `tools`, in the given (stable) order."""
    return [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools]


def find_tool(tools: list[Tool], name: str) -> Tool | None:
    """The tool called `name`, or `None` (the engine answers unknown names with an error result)."""
    return next((t for t in tools if t.name == name), None)


def result_block(tool_use_id: str, result: ToolResult) -> Block:
    """The API `tool_result` block for `result` (structured data stays behind)."""
    block: Block = {"type": "tool_result", "tool_use_id": tool_use_id, "content": result.content}
    if result.is_error:
        block["is_error"] = True
    return block
