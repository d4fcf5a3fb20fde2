"""Semantic rules: media (rules A29-A37).

Deliberate approximations (a body alone cannot tell more):
- PDF pages are counted as the occurrences of `/Type /Page` (not `/Pages`) in the decoded bytes,
  at least 1 per document; PDFs whose page objects sit in compressed object streams count as 1.
  Non-PDF documents (text, content, URL or file sources) count as 1 page each.
- Image size (rule A29) is measured on the base64 text, which is what the 5 MB limit applies to.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from foldline.api.validate._errors import _ROOT, _bare, _Loc
from foldline.api.validate._limits import ValidationLimits
from foldline.api.validate._semantic import (
    _Request,
    _tool_result_items,
)
from foldline.errors import RequestValidationError
from foldline.media import decode_base64, decode_image, pdf_pages


@dataclass(frozen=True)
class _Media:
    loc: _Loc
    block: Mapping[str, Any]


def _media(request: _Request) -> list[_Media]:
    """Every image and document block, including those nested in tool results, in body order."""
    found: list[_Media] = []
    for loc, block in request.all_blocks():
        for item_loc, item in [(loc, block), *_tool_result_items(block, loc)]:
            if item["type"] in ("image", "document"):
                found.append(_Media(item_loc, item))
    return found


def _check_media(request: _Request) -> Iterator[RequestValidationError]:
    """Rules A36, A29, A37, A35, A30, A31 per image; then A33 and A32 over the whole request."""
    media = _media(request)
    images = [item for item in media if item.block["type"] == "image"]
    limits = request.limits
    many = len(images) > limits.many_images_threshold
    for image in images:
        yield from _image_rules(image, limits, many=many)
    documents = [
        (item.block, _document_pages(item.block)) for item in media if item.block["type"] == "document"
    ]
    pages = sum(count for _, count in documents)
    pdf_pages = sum(count for block, count in documents if _is_pdf(block))
    if pdf_pages > limits.max_pdf_pages:
        yield _bare(f"A maximum of {limits.max_pdf_pages} PDF pages may be provided.", _ROOT.at("messages"))
    if len(images) + pages > limits.max_media:
        yield _bare(
            f"too many images and documents: {len(images)} + {pages} > {limits.max_media}",
            _ROOT.at("messages"),
        )


def _image_rules(image: _Media, limits: ValidationLimits, *, many: bool) -> Iterator[RequestValidationError]:
    source = image.block["source"]
    if source["type"] != "base64":
        return
    here = image.loc.at("source").tag("base64")
    data: str = source["data"]
    if not data:
        yield _bare(f"{here.api}: image cannot be empty", here)
        return
    if len(data) > limits.max_image_bytes:
        yield _bare(
            f"{here.api}: image exceeds {limits.max_image_bytes / 1048576:g} MB maximum: "
            f"{len(data)} bytes > {limits.max_image_bytes} bytes",
            here,
        )
        return
    header = decode_image(data)
    if header is None:
        yield _bare("Could not process image", here.at("data"))
        return
    actual, (width, height) = header
    if actual != source["media_type"]:
        yield _bare(
            f"{here.api}: The image was specified using the {source['media_type']} media type, "
            f"but the image appears to be a {actual} image",
            here,
        )
        return
    limit = limits.many_images_pixels if many else limits.max_image_pixels
    if max(width, height) > limit:
        qualifier = " for many-image requests" if many else ""
        yield _bare(
            f"{here.at('data').api}: At least one of the image dimensions exceed max allowed "
            f"size{qualifier}: {limit} pixels",
            here.at("data"),
        )


def _is_pdf(block: Mapping[str, Any]) -> bool:
    source = block.get("source")
    return (
        isinstance(source, Mapping)
        and source.get("type") == "base64"
        and source.get("media_type") == "application/pdf"
    )


def _document_pages(block: Mapping[str, Any]) -> int:
    """Pages of one document block: `/Type /Page` objects in a base64 PDF, else 1 (module docstring)."""
    if not _is_pdf(block):
        return 1
    raw = decode_base64(str(block["source"].get("data", "")))
    return pdf_pages(raw) if raw is not None else 1
