"""Glob patterns as regular expressions, one dialect for Glob, Grep's filter and permission rules.

The dialect is gitignore-ish over `/`-separated paths: `*` and `?` stay inside one path segment,
`**` spans segments (`a/**/b` also matches `a/b`), `[...]` is a character class, `{x,y}` is
alternation and a backslash makes the next character literal. Matching is on whole strings (`fullmatch`).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["glob_escape", "glob_regex", "literal_prefix"]

_WILDCARDS = frozenset("*?[{")


def _brace(pattern: str, i: int) -> tuple[str, int] | None:
    """Translate `{a,b}` starting at `pattern[i]`; `None` when unbalanced (then `{` is literal)."""
    depth, j = 0, i
    while j < len(pattern):
        if pattern[j] == "{":
            depth += 1
        elif pattern[j] == "}":
            depth -= 1
            if depth == 0:
                options = _split_top(pattern[i + 1 : j])
                return "(?:" + "|".join(_translate(o) for o in options) + ")", j + 1
        j += 1
    return None


def _split_top(body: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(body):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    parts.append(body[start:])
    return parts


def _star(pattern: str, i: int) -> tuple[str, int]:
    if pattern.startswith("**", i):
        at_start = i == 0 or pattern[i - 1] == "/"
        if at_start and pattern.startswith("**/", i):
            return "(?:.*/)?", i + 3
        return ".*", i + 2
    return "[^/]*", i + 1


def _translate(pattern: str) -> str:
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            piece, i = _star(pattern, i)
        elif ch == "?":
            piece, i = "[^/]", i + 1
        elif ch == "\\" and i + 1 < len(pattern):
            piece, i = re.escape(pattern[i + 1]), i + 2
        elif ch == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            piece = "[^" + re.escape(body[1:]) + "]" if body[0] in "!^" else "[" + re.escape(body) + "]"
            i = end + 1
        elif ch == "{" and (brace := _brace(pattern, i)) is not None:
            piece, i = brace
        else:
            piece, i = re.escape(ch), i + 1
        out.append(piece)
    return "".join(out)


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """The compiled regex that fully matches the paths `pattern` names (see the module docstring)."""
    return re.compile(_translate(pattern), re.DOTALL)


def literal_prefix(pattern: str) -> tuple[str, str]:
    """Split `pattern` into its leading wildcard-free directories and the rest (`src/**/*.py` ->
    `("src", "**/*.py")`), so a walk can start as deep as possible. An absolute pattern keeps its
    root even when nothing else is fixed (`/*.py` -> `("/", "*.py")`)."""
    parts = pattern.split("/")
    fixed: list[str] = []
    for part in parts[:-1]:
        if _WILDCARDS.intersection(part):
            break
        fixed.append(part)
    rest = "/".join(parts[len(fixed) :])
    return "/".join(fixed) or ("/" if fixed else ""), rest


def glob_escape(text: str) -> str:
    """`text` with every wildcard character backslash-escaped, so it matches only itself."""
    return re.sub(r"([*?\[{\\])", r"\\\1", text)
