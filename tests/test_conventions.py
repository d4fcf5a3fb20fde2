"""Conventions the code keeps, checked rather than hoped for: every `match` is exhaustive.

A `match` over a union ends in `case _: assert_never(x)`, so mypy rejects a new variant that no arm
handles instead of letting it fall through silently. (Chains of `if isinstance` are not checked.)
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "foldline"


def _ends_in_assert_never(node: ast.Match) -> bool:
    last = node.cases[-1]
    if not (isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None and last.guard is None):
        return False
    call = last.body[-1]
    return (
        isinstance(call, ast.Expr)
        and isinstance(call.value, ast.Call)
        and isinstance(call.value.func, ast.Name)
        and call.value.func.id == "assert_never"
    )


def test_every_match_ends_in_assert_never() -> None:
    matches = [
        (path, node)
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Match)
    ]
    assert matches, "no match statement found: the check is looking in the wrong place"
    loose = [f"{p.relative_to(PACKAGE)}:{n.lineno}" for p, n in matches if not _ends_in_assert_never(n)]
    assert loose == []
