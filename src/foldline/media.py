"""Image and PDF facts read from bytes: which format, how big, how many pages.

One implementation shared by the validator (what the API would reject), normalization's S7 (fail
before sending) and the Read tool (which media type to declare), so all three agree.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
import zlib
from collections.abc import Callable

__all__ = ["decode_base64", "decode_image", "image_problem", "image_size", "pdf_pages", "sniff_image_type"]


def decode_base64(data: str) -> bytes | None:
    """Strict base64 decoding; `None` for data that is not valid base64."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def sniff_image_type(head: bytes) -> str | None:
    """The media type of an image the Messages API accepts, from its first bytes; `None` if not one."""
    for media_type, magic in _MAGIC.items():
        if head.startswith(magic) and (media_type != "image/webp" or head[8:12] == b"WEBP"):
            return media_type
    return None


def image_size(raw: bytes) -> tuple[str, tuple[int, int]] | None:
    """The sniffed media type and (width, height) of image bytes, or `None` if unreadable."""
    media_type = sniff_image_type(raw)
    if media_type is None:
        return None
    size = _PARSERS[media_type](raw)
    return (media_type, size) if size else None


def decode_image(data: str) -> tuple[str, tuple[int, int]] | None:
    """`image_size` of base64 image data."""
    raw = decode_base64(data)
    return image_size(raw) if raw is not None else None


def image_problem(raw: bytes) -> str | None:
    """What makes image bytes undecodable, or None when their structure holds end to end.

    `image_size` reads only the header; a file with a valid header and a damaged body passes it and
    is then refused by the API ("Could not process image") on every request that carries it. This
    walks the whole file: PNG chunks with their CRCs, the image data inflated to the size the header
    promises; JPEG segments through to the end-of-image marker; GIF's trailer; WebP's RIFF length.
    """
    media_type = sniff_image_type(raw)
    if media_type is None:
        return "not a PNG, JPEG, GIF or WebP file"
    if image_size(raw) is None:
        return "its header is damaged or cut short"
    return _CHECKS[media_type](raw)


def _png_problem(raw: bytes) -> str | None:
    pos, idat, names = 8, [], []
    while pos < len(raw):
        if pos + 12 > len(raw):
            return "it is cut short inside a chunk"
        (length,) = struct.unpack(">I", raw[pos : pos + 4])
        name, body = raw[pos + 4 : pos + 8], raw[pos + 8 : pos + 8 + length]
        if not name.isalpha() or not name.isascii():
            return "a chunk header is damaged"
        if len(body) < length or pos + 12 + length > len(raw):
            return f"it is cut short inside its {name.decode('latin-1')!r} chunk"
        (crc,) = struct.unpack(">I", raw[pos + 8 + length : pos + 12 + length])
        if zlib.crc32(name + body) != crc:
            return f"the checksum of its {name.decode('latin-1')!r} chunk is wrong (damaged data)"
        names.append(name)
        if name == b"IDAT":
            idat.append(body)
        pos += 12 + length
        if name == b"IEND":
            break
    if not names or names[0] != b"IHDR" or b"IEND" not in names or not idat:
        return "it lacks a required chunk (IHDR, IDAT or IEND)"
    try:
        pixels = zlib.decompress(b"".join(idat))
    except zlib.error as e:
        return f"its image data does not inflate ({e})"
    width, height = struct.unpack(">II", raw[16:24])
    depth, color, interlace = raw[24], raw[25], raw[28]
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}.get(color)
    if channels is None:
        return f"its colour type {color} is not one PNG defines"
    if interlace == 0 and len(pixels) != height * (1 + (width * channels * depth + 7) // 8):
        return "its image data is not the size its header promises (damaged or cut short)"
    return None


def _jpeg_problem(raw: bytes) -> str | None:
    if not raw.rstrip(b"\x00").endswith(b"\xff\xd9"):
        return "it has no end-of-image marker (cut short or damaged)"
    pos = 2
    while pos + 4 <= len(raw):
        if raw[pos] != 0xFF:
            return "a segment marker is missing (damaged data)"
        marker = raw[pos + 1]
        if marker == 0xFF or marker in (0x01, *range(0xD0, 0xD8)):
            pos += 1 if marker == 0xFF else 2
            continue
        (length,) = struct.unpack(">H", raw[pos + 2 : pos + 4])
        if length < 2 or pos + 2 + length > len(raw):
            return "a segment runs past the end of the file"
        if marker == 0xDA:  # start of scan: entropy-coded data runs to the end-of-image marker
            return None
        pos += 2 + length
    return "it has no image data (no start-of-scan segment)"


def _gif_problem(raw: bytes) -> str | None:
    return None if raw.rstrip(b"\x00").endswith(b";") else "it has no trailer (cut short or damaged)"


def _webp_problem(raw: bytes) -> str | None:
    (size,) = struct.unpack("<I", raw[4:8])
    return None if size + 8 <= len(raw) else "it is shorter than its RIFF header says (cut short)"


def pdf_pages(raw: bytes) -> int:
    """Pages of a PDF, counted as `/Type /Page` objects (at least 1): cheap, and close enough for limits."""
    return max(1, len(_PDF_PAGE.findall(raw)))


def _png_size(raw: bytes) -> tuple[int, int] | None:
    if len(raw) < 24 or raw[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


def _gif_size(raw: bytes) -> tuple[int, int] | None:
    if len(raw) < 10:
        return None
    width, height = struct.unpack("<HH", raw[6:10])
    return width, height


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    """Walk the JPEG segments to the first start-of-frame marker, which holds the dimensions."""
    pos = 2
    while pos + 4 <= len(raw):
        if raw[pos] != 0xFF:
            return None
        marker = raw[pos + 1]
        if marker == 0xFF:  # fill byte before a marker
            pos += 1
            continue
        if marker in (0x01, *range(0xD0, 0xDA)):  # standalone markers have no length
            pos += 2
            continue
        (length,) = struct.unpack(">H", raw[pos + 2 : pos + 4])
        if marker in _JPEG_FRAME_MARKERS and pos + 9 <= len(raw):
            height, width = struct.unpack(">HH", raw[pos + 5 : pos + 9])
            return width, height
        pos += 2 + length
    return None


_JPEG_FRAME_MARKERS = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)


def _webp_size(raw: bytes) -> tuple[int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8 " and len(raw) >= 30 and raw[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", raw[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(raw) >= 25 and raw[20] == 0x2F:
        (bits,) = struct.unpack("<I", raw[21:25])
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8X" and len(raw) >= 30:
        return 1 + int.from_bytes(raw[24:27], "little"), 1 + int.from_bytes(raw[27:30], "little")
    return None


_MAGIC = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff",
    "image/gif": b"GIF8",
    "image/webp": b"RIFF",
}
_PARSERS: dict[str, Callable[[bytes], tuple[int, int] | None]] = {
    "image/png": _png_size,
    "image/jpeg": _jpeg_size,
    "image/gif": _gif_size,
    "image/webp": _webp_size,
}
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_CHECKS: dict[str, Callable[[bytes], str | None]] = {
    "image/png": _png_problem,
    "image/jpeg": _jpeg_problem,
    "image/gif": _gif_problem,
    "image/webp": _webp_problem,
}
