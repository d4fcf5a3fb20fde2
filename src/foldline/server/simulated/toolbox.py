"""What the simulated model can do with the tools a request offers, whoever wrote them.

A coding agent offers its tools under its own names and parameter names: foldline's `Read` takes
`file_path`, Claude Code's `Read` takes an absolute `file_path`, opencode's `read` takes an
absolute `filePath`, others call it `view_file` with `path`. `Toolbox.of(request)` reads every
offered tool from its name, its description and its JSON schema and files it under one of the
kinds the model thinks in (`Kind`), with the mapping from the model's own parameter names (which
are foldline's: `file_path`, `old_string`, `output_mode`, `-i`, ...) to the tool's. Then:

- `use(kind, input)` renders a call in the tool's own terms: its name, its parameter names, an
  absolute path where the schema asks for one (joined to the working directory the request's own
  text states), parameters the tool does not have dropped;
- `canonical(name, input)` reads a call back (the turn's earlier calls) into the model's terms.

A tool is never used when its purpose cannot be told (no kind scores, or two kinds tie), when a
parameter it requires cannot be filled, or when it is deferred (`defer_loading: true`) and no
`tool_reference` in the conversation has loaded it. The classification is a pure function of the
tools and the request's text, so renaming tools and parameters consistently changes nothing but
the names in the calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal

from foldline._types import Block

__all__ = ["KINDS", "Kind", "ToolSpec", "Toolbox", "working_directory"]

Kind = Literal["Read", "Write", "Edit", "Bash", "Grep", "Glob", "List", "Snip"]
KINDS: tuple[Kind, ...] = ("Read", "Write", "Edit", "Bash", "Grep", "Glob", "List", "Snip")

_PATH = "file_path"
"""The model's own name for a tool's target path (foldline's)."""

_PARAMS: dict[Kind, tuple[str, ...]] = {
    "Read": (_PATH, "offset", "limit"),
    "Write": (_PATH, "content"),
    "Edit": (_PATH, "old_string", "new_string"),
    "Bash": ("command", "description"),
    "Grep": ("pattern", "path", "glob", "output_mode", "-i", "head_limit"),
    "Glob": ("pattern", "path"),
    "List": ("path",),
    "Snip": ("ids",),
}
"""The model's parameters per kind, in the order they are matched to a schema's."""

_REQUIRED: dict[Kind, tuple[str, ...]] = {
    "Read": (_PATH,),
    "Write": (_PATH, "content"),
    "Edit": (_PATH, "old_string", "new_string"),
    "Bash": ("command",),
    "Grep": ("pattern",),
    "Glob": ("pattern",),
    "List": (),
    "Snip": ("ids",),
}
"""What a tool of the kind must take for the model to use it at all."""

_ALIASES: dict[str, tuple[str, ...]] = {
    _PATH: ("filepath", "path", "file", "filename", "absolutepath", "targetfile", "target", "fullpath"),
    "offset": ("offset", "startline", "start", "fromline", "line"),
    "limit": ("limit", "maxlines", "lines", "count", "numlines"),
    "content": ("content", "contents", "text", "body", "data", "filetext"),
    "old_string": ("oldstring", "oldstr", "oldtext", "old", "search", "find", "before"),
    "new_string": ("newstring", "newstr", "newtext", "new", "replacement", "replace", "after"),
    "command": ("command", "cmd", "script", "shellcommand", "commandline"),
    "description": ("description", "summary", "purpose", "reason"),
    "pattern": ("pattern", "regex", "query", "glob", "globpattern", "searchpattern", "expression"),
    "path": ("path", "dir", "directory", "cwd", "root", "searchpath", "folder", "filepath"),
    "glob": ("glob", "include", "filepattern", "files", "filter", "includes"),
    "output_mode": ("outputmode", "mode"),
    "-i": ("i", "ignorecase", "caseinsensitive", "insensitive"),
    "head_limit": ("headlimit", "maxresults", "limit", "maxcount"),
    "ids": ("ids", "messageids", "tags", "entryids", "shortids", "idlist", "entries", "messages", "targets"),
}
"""Parameter names (lowercase, without `_` and `-`) that mean each of the model's parameters, best first."""

_TYPES: dict[str, str] = {
    _PATH: "string",
    "offset": "integer",
    "limit": "integer",
    "content": "string",
    "old_string": "string",
    "new_string": "string",
    "command": "string",
    "description": "string",
    "pattern": "string",
    "path": "string",
    "glob": "string",
    "output_mode": "string",
    "-i": "boolean",
    "head_limit": "integer",
    "ids": "array",
}

_NAME_WORDS: dict[Kind, frozenset[str]] = {
    "Read": frozenset({"read", "view", "cat", "open", "show"}),
    "Write": frozenset({"write", "create", "save", "put"}),
    "Edit": frozenset({"edit", "replace", "modify", "update", "strreplace"}),
    "Bash": frozenset({"bash", "shell", "sh", "exec", "execute", "run", "terminal", "command", "cmd"}),
    "Grep": frozenset({"grep", "rg", "ripgrep", "search", "find"}),
    "Glob": frozenset({"glob", "find", "files", "match"}),
    "List": frozenset({"ls", "list", "dir", "tree", "directory"}),
    "Snip": frozenset({"snip", "prune", "forget", "trim", "evict", "elide", "discard"}),
}
"""Words of a tool's name (split at case changes, `_`, `-` and `.`) that suggest each kind."""

_NOT_FILES = frozenset(
    {
        "todo",
        "todos",
        "notebook",
        "web",
        "url",
        "http",
        "tool",
        "tools",
        "task",
        "agent",
        "memory",
        "mcp",
        "slash",
        "skill",
        "plan",
        "question",
        "output",
        "kill",
    }
)
"""Name words that mean the tool acts on something other than the workspace's files and shell."""

_DESCRIBES: dict[Kind, re.Pattern[str]] = {
    "Read": re.compile(r"\b(reads?|view|display)\b[^.]{0,40}\bfiles?\b", re.I),
    "Write": re.compile(r"\b(writes?|creates?)\b[^.]{0,40}\bfiles?\b", re.I),
    "Edit": re.compile(r"\b(replace\w*|edits?)\b[^.]{0,60}\b(string|text|files?)\b", re.I),
    "Bash": re.compile(r"\b(bash|shell|terminal)\b|\bexecutes?\b[^.]{0,30}\bcommand", re.I),
    "Grep": re.compile(r"\b(search\w*|grep)\b[^.]{0,40}\b(contents?|regular expression|regex)\b", re.I),
    "Glob": re.compile(r"\bglob\b|\bfile pattern matching\b|\bfind files\b", re.I),
    "List": re.compile(r"\blists?\b[^.]{0,30}\b(files|directories|directory)\b", re.I),
    "Snip": re.compile(
        r"\b(remove|drop|delete|prune|forget|clear|discard|evict|snip|trim|cut|elide)s?\b[^.]{0,60}"
        r"\b(messages?|context|history|conversation|entries|tool (?:output|results?))\b",
        re.I,
    ),
}
"""What a tool's description says when the tool is of each kind."""

_ABSOLUTE = re.compile(r"\babsolute\b", re.I)
_RELATIVE_OK = re.compile(r"\bor relative\b|\brelative to\b|\bor absolute\b", re.I)
_SPLIT = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_CWD = re.compile(
    r"(?im)^[\s>*-]*(?:primary\s+|current\s+)?(?:working\s+directory|cwd|workspace(?:\s+root|\s+directory)?|"
    r"project\s+root)\s*(?:is)?\s*[:=]?\s*[`'\"]?(/[^\s`'\"<>]*)"
)
"""A line stating the working directory: `Working directory: /x`, `<env>\\n  Working directory: /x`,
`cwd: /x`, `Primary working directory: /x`, `The workspace root is /x`."""
_CWD_INLINE = re.compile(
    r"(?i)\b(?:working directory|cwd|current directory)\s+(?:is\s+)?[`'\"]?(/[^\s`'\"<>,;]+)"
)


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _words(name: str) -> set[str]:
    parts = re.split(r"[_\-.\s/]+", name)
    return {w.lower() for part in parts for w in _SPLIT.findall(part)} | {_norm(name)}


def working_directory(texts: Iterable[str]) -> str | None:
    """The working directory the first of `texts` to state one states (None when none does)."""
    for text in texts:
        match = _CWD.search(text) or _CWD_INLINE.search(text)
        if match:
            path = match.group(1).rstrip(".:)")
            return path.rstrip("/") or "/"
    return None


@dataclass(frozen=True)
class ToolSpec:
    """One offered tool, read as one of the model's kinds."""

    kind: Kind
    name: str
    params: Mapping[str, str]
    """The model's parameter name -> the tool's."""
    absolute: frozenset[str] = frozenset()
    """The model's path parameters the tool wants absolute."""
    enums: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The tool's allowed values, by the model's parameter name, where its schema lists them."""
    required: frozenset[str] = frozenset()
    """The tool's own required parameter names."""
    score: int = 0
    """How clearly its name and description say its kind (the clearest tool of a kind is used)."""


def _properties(schema: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return {}
    return {str(k): v if isinstance(v, Mapping) else {} for k, v in props.items()}


def _type_fits(prop: Mapping[str, Any], wanted: str) -> bool:
    kind = prop.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    if wanted == "integer":
        return bool(kinds & {"integer", "number"})
    return wanted in kinds or (kind is None and wanted == "string")


def _match_params(kind: Kind, schema: Mapping[str, Any]) -> dict[str, str] | None:
    """The model's parameters of `kind` matched to the schema's, or None when a needed one is missing
    or the tool requires one the model cannot fill."""
    props = _properties(schema)
    required = {str(r) for r in schema.get("required") or () if isinstance(r, str)}
    taken: dict[str, str] = {}
    used: set[str] = set()
    for ours in _PARAMS[kind]:
        aliases = _ALIASES[ours]
        best: tuple[int, str] | None = None
        for theirs, prop in props.items():
            if theirs in used or not _type_fits(prop, _TYPES[ours]):
                continue
            key = _norm(theirs)
            if key in aliases:
                rank = aliases.index(key)
            elif ours == _PATH and ("path" in key or key.endswith("file")):
                rank = len(aliases)
            elif ours == "ids" and ("id" in key or "tag" in key):
                rank = len(aliases)  # `snip_ids`, `message_tags`: a list of ids by any name
            else:
                continue
            if best is None or rank < best[0]:
                best = (rank, theirs)
        if best is not None:
            taken[ours] = best[1]
            used.add(best[1])
    if any(p not in taken for p in _REQUIRED[kind]):
        return None
    if required - used:
        return None  # it needs something the model would not know how to give
    return taken


def _score(kind: Kind, name: str, description: str, words: set[str]) -> int:
    """How clearly the name and the description say `kind` (0: not at all). Snip is read like any
    other kind, by purpose: a tool that removes messages from the context and takes a list of ids,
    whatever its name; the list of ids it must take (`_REQUIRED`) keeps it from being guessed."""
    score = 3 * len(words & _NAME_WORDS[kind])
    if _DESCRIBES[kind].search(description):
        score += 2
    return score


def _classify(tool: Mapping[str, Any]) -> ToolSpec | None:
    name = str(tool.get("name", ""))
    schema = tool.get("input_schema")
    if not name or not isinstance(schema, Mapping):
        return None
    words = _words(name)
    if (words | {w[:-1] for w in words if w.endswith("s")}) & _NOT_FILES:
        return None  # plurals too: `ListAgents` lists agents, not a directory
    description = str(tool.get("description", ""))
    scored: list[tuple[int, Kind, dict[str, str]]] = []
    for kind in KINDS:
        score = _score(kind, name, description, words)
        if score <= 0:
            continue
        params = _match_params(kind, schema)
        if params is not None:
            scored.append((score, kind, params))
    if not scored:
        return None
    scored.sort(key=lambda s: -s[0])
    if len(scored) > 1 and scored[0][0] == scored[1][0]:
        return None  # its purpose cannot be told apart: never guessed
    _, kind, params = scored[0]
    props = _properties(schema)
    absolute = frozenset(
        ours
        for ours, theirs in params.items()
        if ours in (_PATH, "path") and _wants_absolute(str(props[theirs].get("description", "")), description)
    )
    enums = {
        ours: tuple(str(v) for v in props[theirs]["enum"])
        for ours, theirs in params.items()
        if isinstance(props[theirs].get("enum"), list)
    }
    required = frozenset(str(r) for r in schema.get("required") or () if isinstance(r, str))
    return ToolSpec(kind, name, params, absolute, enums, required, scored[0][0])


def _wants_absolute(param_description: str, tool_description: str) -> bool:
    for text in (param_description, tool_description):
        for sentence in re.split(r"(?<=[.;\n])\s+", text):
            if (
                _ABSOLUTE.search(sentence)
                and "path" in sentence.lower()
                and not _RELATIVE_OK.search(sentence)
            ):
                return True
    return False


def loaded_tools(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """Tool names a `tool_reference` block in the conversation has loaded (deferred tools' search)."""
    names: set[str] = set()

    def visit(blocks: object) -> None:
        if not isinstance(blocks, list):
            return
        for block in blocks:
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "tool_reference":
                names.add(str(block.get("tool_name", "")))
            visit(block.get("content"))

    for message in messages:
        visit(message.get("content"))
    return names


@dataclass(frozen=True)
class Toolbox:
    """The offered tools the model can use, by kind (the first usable tool of each kind)."""

    specs: Mapping[Kind, ToolSpec]
    by_name: Mapping[str, ToolSpec]
    cwd: str | None = None

    @classmethod
    def of(
        cls,
        tools: Sequence[Mapping[str, Any]],
        messages: Sequence[Mapping[str, Any]] = (),
        texts: Iterable[str] = (),
    ) -> Toolbox:
        """Read `tools` (the request's), with `messages` for deferred-tool loads and `texts` (the
        system prompt, then the messages' texts) for the working directory."""
        loaded = loaded_tools(messages) if any(t.get("defer_loading") for t in tools) else set()
        specs: dict[Kind, ToolSpec] = {}
        by_name: dict[str, ToolSpec] = {}
        for tool in tools:
            spec = _classify(tool)
            if spec is None:
                continue
            by_name[spec.name] = spec  # earlier calls are read back even if it is deferred now
            if tool.get("defer_loading") and spec.name not in loaded:
                continue
            if spec.kind not in specs or spec.score > specs[spec.kind].score:
                specs[spec.kind] = spec  # the clearest of its kind; the first offered on a tie
        return cls(specs, by_name, working_directory(texts))

    def __contains__(self, kind: object) -> bool:
        """Whether the model can use a tool of `kind` (a path-taking one needs a usable path form)."""
        return kind in self.specs

    def absolute(self, kind: Kind) -> bool:
        """Whether the `kind` tool wants absolute paths."""
        spec = self.specs.get(kind)
        return spec is not None and bool(spec.absolute)

    def resolve(self, kind: Kind, path: str) -> str | None:
        """`path` as the `kind` tool wants it (None when it wants it absolute and no cwd is known)."""
        spec = self.specs.get(kind)
        if spec is None or not spec.absolute or path.startswith("/"):
            return path
        if self.cwd is None:
            return None
        relative = path[2:] if path.startswith("./") else path
        return str(PurePosixPath(self.cwd) / relative) if relative not in ("", ".") else self.cwd

    def relative(self, path: str) -> str:
        """`path` relative to the working directory when it lies under it (for comparing paths)."""
        if self.cwd and path.startswith(self.cwd.rstrip("/") + "/"):
            return path[len(self.cwd.rstrip("/")) + 1 :]
        return path[2:] if path.startswith("./") else path

    def use(self, kind: Kind, tool_input: Mapping[str, Any]) -> Block | None:
        """A call of the `kind` tool with the model's `tool_input`, in the tool's own terms (None when
        the kind is not offered or a path cannot be given in the form the tool wants)."""
        spec = self.specs.get(kind)
        if spec is None:
            return None
        out: dict[str, Any] = {}
        for ours, value in tool_input.items():
            theirs = spec.params.get(ours)
            if theirs is None:
                continue  # a refinement this tool does not have (case-insensitivity, a mode, ...)
            if ours in spec.absolute and isinstance(value, str):
                resolved = self.resolve(kind, value)
                if resolved is None:
                    return None
                value = resolved
            allowed = spec.enums.get(ours)
            if allowed is not None and str(value) not in allowed:
                continue
            out[theirs] = value
        if any(r not in out for r in spec.required):
            return None
        return {"type": "tool_use", "name": spec.name, "input": out}

    def canonical(self, name: str, tool_input: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """An earlier call read back: its kind (the name itself when unknown) and the model's input."""
        spec = self.by_name.get(name)
        if spec is None:
            return name, dict(tool_input)
        back = {theirs: ours for ours, theirs in spec.params.items()}
        return spec.kind, {back[k]: v for k, v in tool_input.items() if k in back}
