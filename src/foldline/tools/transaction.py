"""A tool call's change to the workspace as one transaction: read whole, held to the policy, applied
with its undo, and said in one line (§9.6).

Owns `apply_change` (a Bash command's layer) and `write_file` (the one file Write or Edit makes,
staged on a layer of its own so that it goes through the same policy and checkpoint as a
command). Both ask the user (`ToolContext.confirm`) before a held path is applied and say in the
result what was applied, what was held back and why, and how to undo it: the model reads it, and
the REPL and `-p` show `structured["workspace"]` whatever the length of the output.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from foldline._types import JSONObject
from foldline.containment import git_state
from foldline.containment.checkpoints import Applied
from foldline.containment.layer import Change, Diff, Layer, read_diff
from foldline.containment.paths import own_install
from foldline.containment.policy import Held, describe, review
from foldline.errors import ToolError
from foldline.tools.base import ToolContext, ToolResult
from foldline.tools.permissions import AskCallback, Decision

__all__ = ["HELD_CHANGES", "apply_change", "confirm_through", "write_file"]

HELD_CHANGES = "HeldChanges"
"""The name a held change is asked about under (`confirm_through`): no tool has it, so no rule or
earlier answer can approve it in advance."""
_HELD_TITLE = "The call changed what runs or is trusted outside the sandbox later. Apply these too?"


async def apply_change(
    ctx: ToolContext, layer: Layer, gitdirs: list[Path], *, tool: str, what: str, result: ToolResult
) -> ToolResult:
    """Read `layer`'s change, hold what the policy holds (asking the user), apply the rest into
    a checkpoint, and return `result` with what happened said after it."""
    store = ctx.checkpoints
    assert store is not None, "a layer needs a checkpoint store"
    if _empty(layer.upper):  # most commands change nothing: no walk, no review, no thread
        store.discard(layer)
        nothing: JSONObject = {"workspace": "no change", "held_back": [], "conflicts": []}
        return _said(result, "Workspace: no change", nothing, error=False)
    limits = ctx.limits
    try:
        diff = await anyio.to_thread.run_sync(
            lambda: read_diff(
                layer,
                ctx.workspace,
                max_entries=limits.layer_max_entries,
                timeout_s=limits.layer_read_timeout_s,
                max_compare=limits.layer_compare_bytes,
            )
        )
    except ToolError as e:
        store.discard(layer)
        return _said(result, f"Workspace: {e}", {"workspace": str(e)}, error=True)
    held = await anyio.to_thread.run_sync(lambda: _review(ctx, diff, layer.upper, gitdirs))
    approved = await _approval(ctx, diff, held, layer.upper)
    applied = await anyio.to_thread.run_sync(
        lambda: store.apply(layer, diff, approved=approved, tool=tool, what=what, turn=ctx.turn)
    )
    return _report(result, applied, held)


async def write_file(ctx: ToolContext, path: Path, data: bytes, *, tool: str) -> Applied | None:
    """Write `data` to `path` (inside the workspace) through the checkpoint store, under the same
    policy as a command; None when the session has no store (the caller writes directly).

    Raises:
        ToolError: the policy held the path and the user did not approve it.
    """
    store = ctx.checkpoints
    if store is None or not path.is_relative_to(ctx.workspace):
        return None
    rel = path.relative_to(ctx.workspace).as_posix()
    layer = store.new_layer()
    try:
        diff, held = _stage(ctx, layer, path, rel, data)
        approved = await _approval(ctx, diff, held, layer.upper)
        if approved is not None and rel not in approved:
            raise ToolError(
                f"{tool} to {rel} was not applied: "
                + "; ".join(h.reason for h in held)
                + ". The user did not approve it."
            )
        return await anyio.to_thread.run_sync(
            lambda: store.apply(layer, diff, approved=approved, tool=tool, what=rel, turn=ctx.turn)
        )
    except BaseException:
        store.discard(layer)
        raise


def _stage(ctx: ToolContext, layer: Layer, path: Path, rel: str, data: bytes) -> tuple[Diff, list[Held]]:
    """Put `data` on `layer` as the new `rel` (with the mode the file has, or a new file's), and
    review that one-file change."""
    staged = layer.upper / rel
    staged.parent.mkdir(parents=True, exist_ok=True)
    exists = os.path.lexists(path)
    mode = os.lstat(path).st_mode & 0o7777 if exists else 0o666 & ~_umask()
    staged.write_bytes(data)
    os.chmod(staged, mode)
    diff = Diff([Change(rel, "modified" if exists else "created", "file", 1, None, mode)])
    gitdirs = git_state.git_dirs(ctx.workspace, git_state.snapshot(ctx.workspace))
    return diff, _review(ctx, diff, layer.upper, gitdirs)


def confirm_through(ask: AskCallback) -> Callable[[str, str], Awaitable[bool]]:
    """`ToolContext.confirm` over the session's permission prompt (`ask`), as `HELD_CHANGES`."""

    async def confirm(title: str, details: str) -> bool:
        return await ask(HELD_CHANGES, {"changes": details}, Decision("ask", title))

    return confirm


def _empty(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return next(entries, None) is None


def _umask() -> int:
    """This process's umask, read without changing it (a new file is made as an editor makes one)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _review(ctx: ToolContext, diff: Diff, upper: Path, gitdirs: list[Path]) -> list[Held]:
    return review(
        diff,
        ctx.workspace,
        upper,
        gitdirs=gitdirs,
        executed=git_state.executed_files(ctx.workspace, gitdirs),
        own=own_install(ctx.workspace),
        max_entries=ctx.limits.layer_max_entries,
        max_bytes=ctx.limits.policy_read_bytes,
    )


async def _approval(ctx: ToolContext, diff: Diff, held: list[Held], upper: Path) -> frozenset[str] | None:
    """None (apply everything) when nothing is held or the user approved it; else the paths to apply."""
    if not held:
        return None
    if ctx.confirm is not None and await ctx.confirm(_HELD_TITLE, describe(held, ctx.workspace, upper)):
        return None
    refused = {h.change for h in held}
    return frozenset(c.path for c in diff.changes if c.path not in refused)


def _report(result: ToolResult, applied: Applied, held: list[Held]) -> ToolResult:
    lines = [f"Workspace: {applied.line()}"]
    if applied.refused:
        reasons: dict[str, Held] = {}
        for h in held:
            reasons.setdefault(h.change, h)
        lines.append("Held back, not applied (nobody approved them):")
        lines += [f"- {p}: {reasons[p].reason}" if p in reasons else f"- {p}" for p in applied.refused]
    if applied.conflicts:
        lines.append(
            "Changed by someone else while the command ran, so left as they are (the command's version"
        )
        lines.append(f"is kept in {applied.checkpoint}/conflict): " + ", ".join(applied.conflicts[:10]))
    extra: JSONObject = {
        "workspace": applied.line(),
        "held_back": list(applied.refused),
        "conflicts": list(applied.conflicts),
        "checkpoint": str(applied.checkpoint) if applied.checkpoint is not None else None,
    }
    return _said(result, "\n".join(lines), extra, error=False)


def _said(result: ToolResult, text: str, extra: JSONObject, *, error: bool) -> ToolResult:
    content = result.content if isinstance(result.content, str) else ""
    structured = {**(result.structured or {}), **extra}
    return ToolResult(f"{content}\n{text}" if content else text, result.is_error or error, structured)
