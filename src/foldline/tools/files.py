"""The file tools: Read, Write and Edit (R9.1).

Invariants:
- Read numbers lines like `cat -n` (1-based, tab after the number), so Edit's `old_string` can be
  copied from its output minus the prefix. Images come back as `image` blocks whose `media_type` is
  sniffed from magic bytes, never guessed from the file name.
- Write and Edit touch an existing file only after the model has Read it and only if it is
  unchanged since (`ReadRegistry.check_fresh`); every successful write refreshes the registry.
- Edit changes exactly one occurrence unless `replace_all`; an absent or ambiguous `old_string`
  changes nothing.
- Writes go through a temporary file and `os.replace`, so a crash never leaves a half-written file.
"""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from foldline._types import Block, JSONObject
from foldline.errors import ToolError
from foldline.media import image_problem, sniff_image_type
from foldline.tokens import MEDIA_TOKENS
from foldline.tools.base import BaseTool, ToolContext, ToolResult
from foldline.tools.transaction import write_file

__all__ = ["EditTool", "ReadTool", "WriteTool", "is_binary", "split_lines"]

_BINARY_SNIFF_BYTES = 8192


_NOTE_ROOM = 200
"""Characters kept free under Read's cap for the note that says where to continue."""
_LINE_MARKS = 40
"""Characters a listed line adds around its text: the line number, the tab, the truncation mark."""


def _existing_file(ctx: ToolContext, file_path: str) -> Path:
    path = ctx.resolve(file_path)
    if not path.exists():
        raise ToolError(f"File does not exist: {file_path}")
    if path.is_dir():
        raise ToolError(f"{file_path} is a directory, not a file; use Glob or `ls` to list it")
    if not path.is_file():
        # a FIFO would block the turn until a writer comes, a device never ends (/dev/zero)
        raise ToolError(f"{file_path} is not a regular file (a FIFO, socket or device); it cannot be read")
    return path


def is_binary(data: bytes) -> bool:
    """Whether `data` looks binary: a NUL byte in its first 8 KiB, the test grep and git use."""
    return b"\x00" in data[:_BINARY_SNIFF_BYTES]


LEGACY_ENCODING = "latin-1"
"""How a text file that is not valid UTF-8 is read and written back. Latin-1 maps every byte to one
character and back, so an Edit keeps the bytes of every line it does not touch (é stays 0xE9; it is
never rewritten as U+FFFD), and Read shows the model the same characters Edit matches against."""


def _decode_text(data: bytes, file_path: str) -> str:
    return _decode(data, file_path)[0]


def _decode(data: bytes, file_path: str) -> tuple[str, str]:
    """The file's text and the encoding to write it back in: UTF-8, else `LEGACY_ENCODING`."""
    if is_binary(data):
        raise ToolError(f"{file_path} is a binary file; Read shows text files and images only")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return data.decode(LEGACY_ENCODING), LEGACY_ENCODING


def _encode(text: str, encoding: str, file_path: str) -> bytes:
    """`text` in the file's own encoding; refused (the file untouched) when it cannot hold it."""
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as e:
        bad = "".join(dict.fromkeys(text[e.start : e.end]))
        raise ToolError(
            f"{file_path} is not UTF-8 (read as {encoding}, so its other bytes are kept exactly); the new "
            f"text has characters it cannot hold ({bad!r}). Use characters {encoding} has, or convert the "
            "file to UTF-8 first (e.g. `iconv -f latin1 -t utf-8`) and Read it again. Nothing was written."
        ) from e


def split_lines(text: str) -> list[str]:
    """Lines as `cat -n` and `grep -n` count them: split on `\n` only, a CRLF's `\r` dropped.

    Not `str.splitlines`, which also breaks on form feeds, U+2028 and friends and would number
    lines differently from every other tool.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def number_lines(
    text: str, offset: int, limit: int, max_line_chars: int, max_chars: int | None = None
) -> tuple[str, int]:
    """`cat -n` style listing of lines `offset`..`offset+limit-1` (1-based); also the total line count.

    With `max_chars`, the listing stops before the line that would take it past that many characters
    (at least one line is shown).
    """
    lines = split_lines(text)
    total = len(lines)
    out: list[str] = []
    size = 0
    for number in range(offset, min(offset + limit - 1, total) + 1):
        line = lines[number - 1]
        if len(line) > max_line_chars:
            line = line[:max_line_chars] + "… [line truncated]"
        numbered = f"{number:6}\t{line}"
        size += len(numbered) + 1
        if max_chars is not None and out and size > max_chars:
            break
        out.append(numbered)
    return "\n".join(out), total


def _atomic_write(path: Path, text: str, encoding: str = "utf-8") -> bytes:
    """Write `text` (in `encoding`) through a temporary sibling and `os.replace`; return the bytes."""
    data = _encode(text, encoding, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    if mode is None:  # a new file is made as an editor makes one: 0666 less the umask (the kernel's)
        fd, tmp = _create_exclusive(path, 0o666)
    else:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return data


async def _write(
    path: Path, text: str, ctx: ToolContext, tool: str, encoding: str = "utf-8"
) -> tuple[bytes, JSONObject]:
    """Write `text` to `path`: through the session's checkpoint store when it has one (held to the
    policy, undoable with `/undo`), else `_atomic_write`. Returns the bytes, and what the UI shows."""
    if ctx.checkpoints is None or not path.is_relative_to(ctx.workspace):
        return _atomic_write(path, text, encoding), {}
    data = _encode(text, encoding, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    applied = await write_file(ctx, path, data, tool=tool)
    return data, ({"workspace": applied.line()} if applied is not None else {})


def _create_exclusive(path: Path, mode: int) -> tuple[int, str]:
    """A new temporary sibling of `path` opened for writing with `mode` (the umask applies)."""
    while True:
        tmp = path.with_name(f".{path.name}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), str(tmp)
        except FileExistsError:
            continue


def _unread(tool_input: Mapping[str, Any], ctx: ToolContext) -> str | None:
    """Write's and Edit's precheck: the read-before-write rule, for an existing regular file."""
    raw = tool_input.get("file_path")
    if not isinstance(raw, str) or not raw:
        return None  # the call's own checks answer a missing path
    try:
        path = ctx.resolve(raw)
        if not path.is_file():
            return None
    except (ToolError, OSError, ValueError):
        return None  # whatever this is, the call itself (or the permission check) reports it
    try:
        ctx.read_files.check_fresh(path)
    except ToolError as e:
        return str(e)
    except OSError:
        return None
    return None


def _positive_int(tool_input: Mapping[str, Any], key: str, default: int) -> int:
    value = tool_input.get(key, default)
    if value < 1:
        raise ToolError(f"Invalid input: `{key}` must be at least 1, got {value}")
    return int(value)


class ReadTool(BaseTool):
    """Read a text file (line-numbered) or an image (as an image block)."""

    name = "Read"
    description = (
        "Read a file from the local filesystem. Text comes back line-numbered like `cat -n` "
        "(number, tab, line); use offset (1-based line) and limit for long files. Images (PNG, JPEG, "
        "GIF, WebP) come back as images. Directories and binary files are refused."
    )
    input_schema: JSONObject = {  # noqa: RUF012 - read-only class constant
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Absolute path (or relative to the cwd)"},
            "offset": {"type": "integer", "description": "First line to show, 1-based"},
            "limit": {"type": "integer", "description": "Number of lines to show"},
        },
        "required": ["file_path"],
        "additionalProperties": False,
    }
    concurrency_safe = True

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        file_path = str(tool_input["file_path"])
        offset = _positive_int(tool_input, "offset", 1)
        limit = _positive_int(tool_input, "limit", ctx.limits.read_default_lines)
        path = _existing_file(ctx, file_path)
        size = path.stat().st_size
        windowed = "offset" in tool_input or "limit" in tool_input
        if size > ctx.limits.read_max_bytes and not windowed:
            raise ToolError(
                f"{file_path} is {size} bytes, over the {ctx.limits.read_max_bytes}-byte limit; "
                "read it in parts with offset and limit"
            )
        data = await anyio.Path(path).read_bytes()
        media_type = sniff_image_type(data[:16])
        if media_type is not None:
            if MEDIA_TOKENS > ctx.limits.read_max_output_chars:  # R3.0.6: no room on a tiny window
                raise ToolError(
                    f"{file_path} is an image, counted as {MEDIA_TOKENS:,} tokens: more than one result "
                    f"may take on this context window (about {ctx.limits.read_max_output_chars:,}); "
                    "describe what you need from it to the user instead"
                )
            problem = image_problem(data)
            if problem is not None:  # sent, it would be refused on every later request too
                raise ToolError(
                    f"{file_path} starts like a {media_type.split('/')[1].upper()} image but cannot be "
                    f"decoded: {problem}. It was not added to the conversation"
                )
            return self._image(path, data, media_type)
        text = _decode_text(data, file_path)
        ctx.read_files.record(path, data)
        room = max(1, ctx.limits.read_max_output_chars - _NOTE_ROOM)  # the continuation note fits
        # On a small window one long line alone can pass the cap (R3.0.6): it is cut to fit too.
        line_chars = min(ctx.limits.read_max_line_chars, max(1, room - _LINE_MARKS))
        listing, total = number_lines(text, offset, limit, line_chars, room)
        if total == 0:
            return ToolResult(f"<system-reminder>{file_path} exists but is empty</system-reminder>")
        if offset > total:
            return ToolResult(f"{file_path} has only {total} lines; offset {offset} is past the end")
        shown_to = offset + listing.count("\n")
        if shown_to < min(offset + limit - 1, total):
            listing += (
                f"\n… [output capped at {ctx.limits.read_max_output_chars:,} characters: "
                f"{total - shown_to} more lines; continue with offset={shown_to + 1}]"
            )
        elif shown_to < total:
            listing += f"\n… [{total - shown_to} more lines; continue with offset={shown_to + 1}]"
        structured: JSONObject = {"file_path": str(path), "total_lines": total, "offset": offset}
        return ToolResult(listing, structured=structured)

    @staticmethod
    def _image(path: Path, data: bytes, media_type: str) -> ToolResult:
        block: Block = {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()},
        }
        structured: JSONObject = {"file_path": str(path), "media_type": media_type, "bytes": len(data)}
        return ToolResult([block], structured=structured)


class WriteTool(BaseTool):
    """Create or overwrite a file; parents are created; an existing file must have been Read."""

    name = "Write"
    description = (
        "Write a file to the local filesystem, creating parent directories. Overwrites an existing "
        "file, which you must have Read first in this session. Prefer Edit for changing files."
    )
    input_schema: JSONObject = {  # noqa: RUF012 - read-only class constant
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Absolute path (or relative to the cwd)"},
            "content": {"type": "string", "description": "The complete new file contents"},
        },
        "required": ["file_path", "content"],
        "additionalProperties": False,
    }

    def precheck(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> str | None:
        """An existing file not read (or changed since): refused before the approval question."""
        return _unread(tool_input, ctx)

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        file_path = str(tool_input["file_path"])
        path = ctx.resolve(file_path)
        if path.is_dir():
            raise ToolError(f"{file_path} is a directory; give a file path")
        existed = path.exists()
        encoding = "utf-8"
        if existed:
            ctx.read_files.check_fresh(path)
            old_data = path.read_bytes()
            if not is_binary(old_data):  # an overwrite keeps a text file's encoding
                encoding = _decode(old_data, file_path)[1]
        data, shown = await _write(path, str(tool_input["content"]), ctx, self.name, encoding)
        ctx.read_files.record(path, data)
        verb = "updated" if existed else "created"
        text = f"File {verb} successfully at: {path}"
        return ToolResult(
            text, structured={"file_path": str(path), "action": verb, "bytes": len(data), **shown}
        )


class EditTool(BaseTool):
    """Replace an exact string in a file the model has Read."""

    name = "Edit"
    description = (
        "Replace exact text in a file you have Read. old_string must match exactly once (copy it "
        "from Read's output without the line-number prefix, with enough context to be unique), "
        "unless replace_all is true. An empty old_string creates a new file with new_string."
    )
    input_schema: JSONObject = {  # noqa: RUF012 - read-only class constant
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Absolute path (or relative to the cwd)"},
            "old_string": {"type": "string", "description": "The exact text to replace"},
            "new_string": {"type": "string", "description": "The text to put in its place"},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)"},
        },
        "required": ["file_path", "old_string", "new_string"],
        "additionalProperties": False,
    }

    def precheck(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> str | None:
        """An existing file not read (or changed since): refused before the approval question."""
        return _unread(tool_input, ctx)

    async def _run(self, tool_input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        file_path = str(tool_input["file_path"])
        old, new = str(tool_input["old_string"]), str(tool_input["new_string"])
        if old == new:
            raise ToolError("No changes to make: old_string and new_string are exactly the same.")
        path = ctx.resolve(file_path)
        if old == "" and not path.exists():
            data, shown = await _write(path, new, ctx, self.name)
            ctx.read_files.record(path, data)
            return ToolResult(
                f"File created successfully at: {path}", structured={"file_path": str(path), **shown}
            )
        path = _existing_file(ctx, file_path)
        ctx.read_files.check_fresh(path)
        text, encoding = _decode(path.read_bytes(), file_path)
        updated, count = self._replace(text, old, new, bool(tool_input.get("replace_all", False)))
        data, shown = await _write(path, updated, ctx, self.name, encoding)
        ctx.read_files.record(path, data)
        snippet = self._snippet(updated, new, ctx.limits.read_max_line_chars)
        structured: JSONObject = {"file_path": str(path), "replacements": count, **shown}
        return ToolResult(
            f"The file {path} has been updated. Edited region:\n{snippet}", structured=structured
        )

    @staticmethod
    def _replace(text: str, old: str, new: str, replace_all: bool) -> tuple[str, int]:
        if old == "":
            raise ToolError("old_string is empty but the file exists; give the text to replace")
        if "\n" in old and "\r\n" in text and old not in text:
            # Read shows CRLF lines without their \r: match, and write back, in the file's own endings
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"String to replace not found in file.\nString: {old}")
        if count > 1 and not replace_all:
            raise ToolError(
                f"Found {count} matches of the string to replace, but replace_all is false. To replace "
                "all occurrences, set replace_all to true. To replace only one, give more surrounding "
                f"context so it matches exactly once.\nString: {old}"
            )
        return text.replace(old, new) if replace_all else text.replace(old, new, 1), count

    @staticmethod
    def _snippet(text: str, new: str, max_line_chars: int, context: int = 3) -> str:
        """The first edited region with a few lines around it, numbered like Read."""
        at = max(text.find(new), text.find(new.replace("\n", "\r\n"))) if new else -1
        first = text.count("\n", 0, at) + 1 if at >= 0 else 1
        last = first + new.count("\n")
        start = max(1, first - context)
        listing, _ = number_lines(text, start, last + context - start + 1, max_line_chars)
        return listing
