"""Image and PDF facts from bytes, shared by the validator, S7 and the Read tool."""

from __future__ import annotations

import base64
import struct

from tests.api.strategies import png_bytes

from foldline.media import decode_image, image_size, pdf_pages, sniff_image_type


def test_image_size_reads_png_gif_jpeg_and_webp_headers() -> None:
    assert image_size(png_bytes(640, 480)) == ("image/png", (640, 480))
    assert image_size(b"GIF89a\x10\x00\x20\x00rest") == ("image/gif", (16, 32))
    jpeg = b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x11\x08\x01\x00\x02\x00\x03"
    assert image_size(jpeg) == ("image/jpeg", (512, 256))
    vp8x = (
        b"RIFF\x00\x00\x00\x00WEBPVP8X"
        + b"\x00" * 8
        + (99).to_bytes(3, "little")
        + (49).to_bytes(3, "little")
    )
    assert image_size(vp8x) == ("image/webp", (100, 50))
    assert image_size(base64.b64decode("AAAA")) is None
    assert image_size(b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13)) is None  # a PNG cut before IHDR


def test_sniffing_needs_the_whole_magic() -> None:
    assert sniff_image_type(b"RIFF\x00\x00\x00\x00WAVE") is None
    assert sniff_image_type(b"GIF87a") == "image/gif"
    assert sniff_image_type(b"%PDF-1.7") is None


def test_decode_image_rejects_bad_base64() -> None:
    assert decode_image("not base64!") is None
    assert decode_image(base64.b64encode(png_bytes(3, 4)).decode()) == ("image/png", (3, 4))


def test_pdf_pages_counts_page_objects_not_the_pages_tree() -> None:
    pdf = b"%PDF-1.4 /Type /Pages /Type /Page /Type/Page /Type /Page"
    assert pdf_pages(pdf) == 3
    assert pdf_pages(b"%PDF-1.4 nothing") == 1
