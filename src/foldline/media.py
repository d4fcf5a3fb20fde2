"""Image and PDF facts read from bytes: which format, how big, how many pages.

One implementation shared by the validator (what the API would reject), normalization's S7 (fail
before sending) and the Read tool (which media type to declare), so all three agree.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from collections.abc import Callable

__all__ = ["decode_base64", "decode_image", "image_size", "pdf_pages", "sniff_image_type"]


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
