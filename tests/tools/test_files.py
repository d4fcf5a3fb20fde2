"""Read, Write and Edit against real files in a temporary workspace."""

from __future__ import annotations

import base64
import os
import struct
import zlib
from pathlib import Path

import pytest

from foldline.config import ToolsConfig
from foldline.tools import EditTool, ReadTool, ToolContext, WriteTool

pytestmark = pytest.mark.anyio


JPEG_1PX = base64.b64decode(
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAx"
    "NDQ0Hyc5PTgyPC4zNDL/2wBDAQkJCQwLDBgNDRgyIRwhMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIyMjIy"
    "MjIyMjIyMjL/wAARCAABAAEDASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUF"
    "BAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVW"
    "V1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi"
    "4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREAAgECBAQDBAcFBAQAAQJ3AAEC"
    "AxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVm"
    "Z2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq"
    "8vP09fb3+Pn6/9oADAMBAAIRAxEAPwD5/ooooA//2Q=="
)
"""A real 1x1 JPEG (written by an image library), so Read's whole-file check has a real one to pass."""
GIF_1PX = base64.b64decode("R0lGODdhAQABAIAAAAAAAAAAACwAAAAAAQABAAAIBAABBAQAOw==")
WEBP_1PX = base64.b64decode("UklGRiQAAABXRUJQVlA4IBgAAAAwAQCdASoBAAEAAUAmJaQAA3AA/v02aAA=")


def _png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0\0\0\0"))
        + chunk(b"IEND", b"")
    )


def _temporaries(directory: Path) -> list[Path]:
    """Files an atomic write could have left behind."""
    return list(directory.glob("*.tmp"))


async def read(ctx: ToolContext, path: str | Path, **extra: object) -> str:
    result = await ReadTool().run({"file_path": str(path), **extra}, ctx)
    assert not result.is_error, result.content
    assert isinstance(result.content, str)
    return result.content


# --- Read -------------------------------------------------------------------------------------


async def test_read_numbers_lines_like_cat_n(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "a.py").write_text("first\nsecond\n\tthird\n")
    assert await read(ctx, workspace / "a.py") == "     1\tfirst\n     2\tsecond\n     3\t\tthird"


async def test_read_counts_lines_on_newlines_only(ctx: ToolContext, workspace: Path) -> None:
    # form feed and U+2028 are not line breaks for cat -n, grep -n or Edit; CRLF shows without \r
    (workspace / "odd.txt").write_bytes("a\fb\u2028c\r\nd".encode())
    assert await read(ctx, workspace / "odd.txt") == "     1\ta\fb\u2028c\n     2\td"


async def test_read_relative_path_resolves_against_cwd(workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "x.txt").write_text("hi\n")
    ctx = ToolContext(workspace=workspace, cwd=Path("sub"))
    assert await read(ctx, "x.txt") == "     1\thi"


async def test_read_offset_and_limit_select_a_window(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    text = await read(ctx, workspace / "n.txt", offset=4, limit=2)
    assert text.splitlines()[:2] == ["     4\tline 4", "     5\tline 5"]
    assert "continue with offset=6" in text


async def test_read_offset_past_end_says_how_long_the_file_is(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "n.txt").write_text("a\nb\n")
    assert "only 2 lines" in await read(ctx, workspace / "n.txt", offset=9)


async def test_read_empty_file_says_so(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "e.txt").write_text("")
    assert "exists but is empty" in await read(ctx, workspace / "e.txt")


async def test_read_truncates_very_long_lines(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, limits=ToolsConfig(read_max_line_chars=10))
    (workspace / "long.txt").write_text("x" * 50 + "\n")
    assert await read(ctx, workspace / "long.txt") == "     1\t" + "x" * 10 + "… [line truncated]"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        pytest.param("missing.txt", None, "File does not exist", id="missing"),
        pytest.param("dir", "DIR", "is a directory", id="directory"),
        pytest.param("blob.bin", b"\x7fELF\x00\x01\x02", "binary file", id="binary"),
    ],
)
async def test_read_errors_are_clear(
    ctx: ToolContext, workspace: Path, name: str, content: bytes | str | None, message: str
) -> None:
    if content == "DIR":
        (workspace / name).mkdir()
    elif isinstance(content, bytes):
        (workspace / name).write_bytes(content)
    result = await ReadTool().run({"file_path": str(workspace / name)}, ctx)
    assert result.is_error
    assert message in str(result.content)


async def test_read_refuses_a_huge_file_without_a_window(workspace: Path) -> None:
    ctx = ToolContext(workspace=workspace, limits=ToolsConfig(read_max_bytes=100))
    (workspace / "big.txt").write_text("y\n" * 200)
    refused = await ReadTool().run({"file_path": "big.txt"}, ctx)
    assert refused.is_error
    assert "offset and limit" in str(refused.content)
    assert (await read(ctx, "big.txt", offset=1, limit=3)).count("\n") == 3


async def test_read_caps_its_total_output_and_says_where_to_go_on(ctx: ToolContext, workspace: Path) -> None:
    """2,000 lines of 2,000 characters (4 MB) are about a million tokens: Read stops at its cap."""
    cap = ctx.limits.read_max_output_chars
    (workspace / "wide.txt").write_text(("z" * 1_999 + "\n") * 2_000)
    text = await read(ctx, "wide.txt")
    assert len(text) <= cap
    shown = text.count("\t")  # one tab per numbered line
    assert 0 < shown < 2_000
    assert f"output capped at {cap:,} characters" in text
    assert text.endswith(f"{2_000 - shown} more lines; continue with offset={shown + 1}]")
    following = await read(ctx, "wide.txt", offset=shown + 1)
    assert following.startswith(f"{shown + 1:6}\t")


async def test_read_of_a_single_4mb_line_stays_small(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "one.json").write_text("[" + "1," * 2_000_000 + "1]")
    text = await read(ctx, "one.json")
    assert len(text) < ctx.limits.read_max_line_chars + 100
    assert text.endswith("… [line truncated]")


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        pytest.param(_png(), "image/png", id="png"),
        pytest.param(JPEG_1PX, "image/jpeg", id="jpeg"),
        pytest.param(GIF_1PX, "image/gif", id="gif"),
        pytest.param(WEBP_1PX, "image/webp", id="webp"),
    ],
)
async def test_read_returns_images_with_sniffed_media_type(
    ctx: ToolContext, workspace: Path, data: bytes, media_type: str
) -> None:
    # the extension lies on purpose: the media type must come from the bytes
    (workspace / "picture.txt").write_bytes(data)
    result = await ReadTool().run({"file_path": "picture.txt"}, ctx)
    assert not result.is_error
    assert isinstance(result.content, list)
    [block] = result.content
    assert block["type"] == "image"
    assert block["source"]["media_type"] == media_type
    assert base64.b64decode(block["source"]["data"]) == data


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        pytest.param({}, "`file_path` is missing", id="missing-key"),
        pytest.param({"file_path": 3}, "`file_path` must be of type string", id="wrong-type"),
        pytest.param({"file_path": "a", "offset": 0}, "`offset` must be at least 1", id="offset-zero"),
        pytest.param({"file_path": "a", "limit": True}, "`limit` must be of type integer", id="bool-as-int"),
    ],
)
async def test_read_rejects_bad_input(ctx: ToolContext, tool_input: dict[str, object], message: str) -> None:
    result = await ReadTool().run(tool_input, ctx)
    assert result.is_error
    assert message in str(result.content)


# --- Write ------------------------------------------------------------------------------------


async def test_write_creates_parents_and_file(ctx: ToolContext, workspace: Path) -> None:
    result = await WriteTool().run({"file_path": "deep/er/new.txt", "content": "fresh\n"}, ctx)
    assert not result.is_error
    assert (workspace / "deep/er/new.txt").read_text() == "fresh\n"
    assert result.structured is not None
    assert result.structured["action"] == "created"


@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
async def test_a_new_file_follows_the_umask_as_an_editors_would(
    ctx: ToolContext, workspace: Path, umask: int, expected: int
) -> None:
    """New files used to be 0600 whatever the umask (the temporary file's own mode)."""
    old = os.umask(umask)
    try:
        result = await WriteTool().run({"file_path": "made.txt", "content": "x\n"}, ctx)
        edited = await EditTool().run(
            {"file_path": "made.txt", "old_string": "x", "new_string": "y"}, ctx
        )  # an edit keeps the mode the file has
    finally:
        os.umask(old)
    assert not result.is_error
    assert not edited.is_error
    assert (workspace / "made.txt").stat().st_mode & 0o777 == expected
    assert _temporaries(workspace) == []


async def test_write_refuses_existing_file_not_read(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "keep.txt").write_text("precious")
    result = await WriteTool().run({"file_path": "keep.txt", "content": "clobbered"}, ctx)
    assert result.is_error
    assert "has not been read" in str(result.content)
    assert (workspace / "keep.txt").read_text() == "precious"


async def test_write_after_read_overwrites_and_keeps_mode(ctx: ToolContext, workspace: Path) -> None:
    target = workspace / "run.sh"
    target.write_text("echo old\n")
    target.chmod(0o755)
    await read(ctx, target)
    result = await WriteTool().run({"file_path": str(target), "content": "echo new\n"}, ctx)
    assert not result.is_error
    assert target.read_text() == "echo new\n"
    assert target.stat().st_mode & 0o777 == 0o755
    assert _temporaries(workspace) == []


async def test_write_refuses_file_changed_since_read(ctx: ToolContext, workspace: Path) -> None:
    target = workspace / "f.txt"
    target.write_text("v1")
    await read(ctx, target)
    target.write_text("v2 by the user")
    os.utime(target, ns=(1, 1))  # a different mtime, whatever the clock resolution
    result = await WriteTool().run({"file_path": str(target), "content": "v3"}, ctx)
    assert result.is_error
    assert "modified since read" in str(result.content)
    assert target.read_text() == "v2 by the user"


async def test_write_to_a_directory_is_an_error(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "d").mkdir()
    result = await WriteTool().run({"file_path": "d", "content": "x"}, ctx)
    assert result.is_error
    assert "is a directory" in str(result.content)


# --- Edit -------------------------------------------------------------------------------------


async def test_read_edit_read_round_trip(ctx: ToolContext, workspace: Path) -> None:
    target = workspace / "m.py"
    target.write_text("def f():\n    return 1\n")
    await read(ctx, target)
    edit = await EditTool().run(
        {"file_path": str(target), "old_string": "return 1", "new_string": "return 2"}, ctx
    )
    assert not edit.is_error, edit.content
    assert "     2\t    return 2" in str(edit.content)
    assert await read(ctx, target) == "     1\tdef f():\n     2\t    return 2"
    # the registry was refreshed by the edit, so a second edit needs no new Read
    again = await EditTool().run({"file_path": str(target), "old_string": "f()", "new_string": "g()"}, ctx)
    assert not again.is_error
    assert target.read_text() == "def g():\n    return 2\n"


@pytest.mark.parametrize(
    ("old", "new", "replace_all", "message"),
    [
        pytest.param("absent", "x", False, "String to replace not found", id="not-found"),
        pytest.param("a", "b", False, "Found 3 matches", id="ambiguous"),
        pytest.param("a", "a", False, "No changes to make", id="same-string"),
        pytest.param("", "x", False, "old_string is empty", id="empty-old-on-existing"),
    ],
)
async def test_edit_errors_leave_file_untouched(
    ctx: ToolContext, workspace: Path, old: str, new: str, replace_all: bool, message: str
) -> None:
    target = workspace / "abc.txt"
    target.write_text("a1 a2 a3\n")
    await read(ctx, target)
    tool_input = {"file_path": str(target), "old_string": old, "new_string": new, "replace_all": replace_all}
    result = await EditTool().run(tool_input, ctx)
    assert result.is_error
    assert message in str(result.content)
    assert target.read_text() == "a1 a2 a3\n"


async def test_edit_crlf_file_with_lf_strings_keeps_crlf(ctx: ToolContext, workspace: Path) -> None:
    target = workspace / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await read(ctx, target)
    tool_input = {"file_path": str(target), "old_string": "one\ntwo", "new_string": "1\n2"}
    result = await EditTool().run(tool_input, ctx)
    assert not result.is_error, result.content
    assert target.read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_edit_replace_all(ctx: ToolContext, workspace: Path) -> None:
    target = workspace / "abc.txt"
    target.write_text("a1 a2 a3\n")
    await read(ctx, target)
    tool_input = {"file_path": str(target), "old_string": "a", "new_string": "b", "replace_all": True}
    result = await EditTool().run(tool_input, ctx)
    assert not result.is_error
    assert target.read_text() == "b1 b2 b3\n"
    assert result.structured == {"file_path": str(target), "replacements": 3}


async def test_edit_requires_prior_read(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "x.txt").write_text("hello")
    result = await EditTool().run({"file_path": "x.txt", "old_string": "hello", "new_string": "bye"}, ctx)
    assert result.is_error
    assert "has not been read" in str(result.content)
    assert (workspace / "x.txt").read_text() == "hello"


async def test_edit_with_empty_old_string_creates_a_new_file(ctx: ToolContext, workspace: Path) -> None:
    result = await EditTool().run({"file_path": "new/file.txt", "old_string": "", "new_string": "body"}, ctx)
    assert not result.is_error
    assert (workspace / "new/file.txt").read_text() == "body"


async def test_edit_missing_file(ctx: ToolContext) -> None:
    result = await EditTool().run({"file_path": "nope.txt", "old_string": "a", "new_string": "b"}, ctx)
    assert result.is_error
    assert "File does not exist" in str(result.content)


# --- files that are not UTF-8 ----------------------------------------------------------------------


LATIN1 = "café\nnaïve\nüber\n".encode("latin-1")


async def test_edit_of_a_latin1_file_keeps_the_bytes_of_untouched_lines(
    ctx: ToolContext, workspace: Path
) -> None:
    """Edit used to rewrite é, ï, ü as U+FFFD (EF BF BD) on every line, silently."""
    (workspace / "legacy.txt").write_bytes(LATIN1)
    listing = await read(ctx, "legacy.txt")
    assert "naïve" in listing  # Read shows the characters Edit will match
    result = await EditTool().run(
        {"file_path": "legacy.txt", "old_string": "über", "new_string": "over"}, ctx
    )
    assert not result.is_error, result.content
    assert (workspace / "legacy.txt").read_bytes() == "café\nnaïve\nover\n".encode("latin-1")


async def test_edit_refuses_text_a_latin1_file_cannot_hold(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "legacy.txt").write_bytes(LATIN1)
    await read(ctx, "legacy.txt")
    result = await EditTool().run({"file_path": "legacy.txt", "old_string": "café", "new_string": "☕"}, ctx)
    assert result.is_error
    assert "is not UTF-8" in str(result.content)
    assert "Nothing was written" in str(result.content)
    assert (workspace / "legacy.txt").read_bytes() == LATIN1


async def test_write_over_a_latin1_file_keeps_its_encoding(ctx: ToolContext, workspace: Path) -> None:
    (workspace / "legacy.txt").write_bytes(LATIN1)
    await read(ctx, "legacy.txt")
    result = await WriteTool().run({"file_path": "legacy.txt", "content": "déjà vu\n"}, ctx)
    assert not result.is_error, result.content
    assert (workspace / "legacy.txt").read_bytes() == "déjà vu\n".encode("latin-1")


def _damaged_png() -> bytes:
    raw = bytearray(_png())
    raw[raw.index(b"IDAT") + 6] ^= 0xFF  # one byte of the image data flipped: the chunk's CRC fails
    return bytes(raw)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        pytest.param(_damaged_png(), "checksum of its 'IDAT' chunk is wrong", id="png-flipped-byte"),
        pytest.param(_png()[:-20], "cut short", id="png-truncated"),
        pytest.param(_png()[:33] + b"\x00" * 40, "chunk header is damaged", id="png-body-zeroed"),
        pytest.param(JPEG_1PX[:-40], "no end-of-image marker", id="jpeg-truncated"),
        pytest.param(GIF_1PX[:-1], "no trailer", id="gif-truncated"),
        pytest.param(WEBP_1PX[:-10], "shorter than its RIFF header", id="webp-truncated"),
    ],
)
async def test_read_refuses_an_image_it_cannot_decode(
    ctx: ToolContext, workspace: Path, data: bytes, why: str
) -> None:
    """A valid header over a damaged body used to be sent, and every later request was refused."""
    (workspace / "shot.png").write_bytes(data)
    result = await ReadTool().run({"file_path": "shot.png"}, ctx)
    assert result.is_error
    assert why in str(result.content)
    assert "not added to the conversation" in str(result.content)
