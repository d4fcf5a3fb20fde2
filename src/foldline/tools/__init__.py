"""Built-in tools and permissions (design.md §9).

Modules: `base` (the `Tool` protocol, `ToolContext`, `ToolResult`, `ReadRegistry`), `files` (Read,
Write, Edit), `bash` (Bash), `search` (Grep, Glob), `snip` (Snip), `permissions` (rules, modes,
`check_permission`, `authorize`), `instructions` (FOLDLINE.md / CLAUDE.md attachments), `batch`
(Batch, a composite tool run through `ToolContext.run_tool`; not in `default_tools()`).

How the engine uses them, per session and per `tool_use` block:

```python
tools = default_tools()                        # stable order: keeps the cached prefix stable
params["tools"] = tool_specs(tools)
rules = PermissionRules.from_lists(allow=[...], ask=[...], deny=[...])
session_ctx = ToolContext(                     # once per session: it holds the Read registry
    workspace=launch_dir,
    progress=emit_progress_entry,
    read_denied=read_denied_filter(rules, launch_dir),  # Grep/Glob honour Read denies too
)
ctx = session_ctx.for_turn()                   # per turn: a fresh abort event, same registry

tool = find_tool(tools, block["name"])         # None -> is_error result "unknown tool"
decision = await authorize(tool.name, block["input"], ctx, rules, mode, ask_user)
if decision.behavior == "deny":
    result = ToolResult(decision.reason, is_error=True)
else:
    result = await tool.run(block["input"], ctx)
user_content.append(result_block(block["id"], result))   # structured data stays in the UI
```

- `permission_gate(rules, mode, ask)` wraps `authorize` as a `(tool, input, ctx) -> reason | None`
  callable for an executor that wants one.
- Calls whose tools are `concurrency_safe` (Read, Grep, Glob) may run together; the others
  (Write, Edit, Bash, Snip) run one at a time, in `tool_use` order (R5.2).
- `Tool.run` never raises for the model's mistakes; it returns `is_error` results. It does raise
  for cancellation, which the engine uses besides `ctx.abort`; Bash kills its process group either way.
- Set `ctx.abort` to interrupt running tools (Bash stops its process tree, Grep/Glob stop walking);
  `for_turn()` gives each turn a fresh event so an old abort cannot leak into the next one.
- Snip has no effect of its own: its result carries `structured["snip_ids"]`; the engine maps
  the short ids to uuids and appends the `snip_boundary` record (R3.1.2).
- Keep one `ToolContext.read_files` registry per session (derive turn contexts with `for_turn`,
  never build a new `ToolContext` per turn): Write/Edit require a prior Read of an existing file,
  possibly from an earlier turn, and refuse when it changed since.
"""

from __future__ import annotations

from foldline.tools.base import (
    BaseTool,
    ReadRegistry,
    Tool,
    ToolContext,
    ToolResult,
    find_tool,
    result_block,
    tool_specs,
)
from foldline.tools.bash import BashTool
from foldline.tools.files import EditTool, ReadTool, WriteTool
from foldline.tools.instructions import load_instruction_files
from foldline.tools.permissions import (
    AskCallback,
    Decision,
    PermissionMode,
    PermissionRules,
    Rule,
    authorize,
    check_permission,
    permission_gate,
    read_denied_filter,
)
from foldline.tools.search import GlobTool, GrepTool
from foldline.tools.snip import SnipTool

__all__ = [
    "AskCallback",
    "BaseTool",
    "BashTool",
    "Decision",
    "EditTool",
    "GlobTool",
    "GrepTool",
    "PermissionMode",
    "PermissionRules",
    "ReadRegistry",
    "ReadTool",
    "Rule",
    "SnipTool",
    "Tool",
    "ToolContext",
    "ToolResult",
    "WriteTool",
    "authorize",
    "check_permission",
    "default_tools",
    "find_tool",
    "load_instruction_files",
    "permission_gate",
    "read_denied_filter",
    "result_block",
    "tool_specs",
]


def default_tools() -> list[Tool]:
    """The built-in tools in their canonical order (R9.1)."""
    return [ReadTool(), WriteTool(), EditTool(), BashTool(), GrepTool(), GlobTool(), SnipTool()]
