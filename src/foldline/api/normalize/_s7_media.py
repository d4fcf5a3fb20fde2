"""Step S7 of design.md §4.1, media limits: image bytes, type, dimensions and the media count (A29-A35).

Checked here, before sending, rather than discovered through a 400.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from foldline._types import Block
from foldline.api.normalize._base import (
    _BOTH_ROLES,
    LEADING_USER_TEXT,
    MediaLimits,
    NormalizeOptions,
    _Msg,
)
from foldline.api.normalize._s0_s5 import _merge_adjacent
from foldline.errors import UserError
from foldline.media import decode_base64, image_size, pdf_pages

_MEDIA = frozenset({"image", "document"})


def _iter_media(msgs: list[_Msg]) -> Iterable[tuple[str, _Msg, Block]]:
    for i, m in enumerate(msgs):
        for b in m.content:  # a plain test first: most messages hold no media and need no indexing
            kind = b.get("type")
            if kind in _MEDIA or (kind == "tool_result" and isinstance(b.get("content"), list)):
                break
        else:
            continue
        for j, b in enumerate(m.content):
            kind = b.get("type")
            if kind in _MEDIA:
                yield f"messages.{i}.content.{j}", m, b
            elif kind != "tool_result":
                continue
            inner = b.get("content")
            if kind == "tool_result" and isinstance(inner, list):
                for k, c in enumerate(inner):
                    if c.get("type") in _MEDIA:
                        yield f"messages.{i}.content.{j}.content.{k}", m, c


@functools.lru_cache(maxsize=4096)
def _image_facts(data: str) -> tuple[str, tuple[int, int]] | str:
    """(media type, size) of base64 image data, or what is wrong with it; cached because the
    incremental normalizer sees the same images every turn (results are small, unlike the bytes)."""
    raw = decode_base64(data)
    if not raw:
        return "image data is empty or not valid base64"
    return image_size(raw) or "image data is not a recognisable jpeg, png, gif or webp"


def _media_error(path: str, m: _Msg, problem: str) -> UserError:
    source = ", ".join(m.uuids) or "a synthesized message"
    # /compact cannot help: its summary request carries the same media. /rewind drops whole turns
    # from what is sent (newest first), so the way out is to rewind past the turn that added it.
    where = "a tool's result" if path.count(".content.") > 1 else "a message"
    return UserError(
        f"{path} (entry {source}): {problem}. The API would reject every request that carries it "
        f"(HTTP 400), so nothing was sent. It came from {where}: run /rewind, once per turn, until the "
        "turn that added it is gone (`foldline show` lists the turns), or /clear to start over"
    )


def _check_image(path: str, m: _Msg, block: Block, px_limit: int, limits: MediaLimits) -> int:
    """The image's longer side, after checking it against the limits."""
    source = block.get("source") or {}
    if source.get("type") != "base64":
        return 0  # url / file sources are fetched and checked by the API itself
    media_type, data = source.get("media_type"), str(source.get("data", ""))
    if media_type not in limits.image_media_types:
        raise _media_error(path, m, f"image media type {media_type!r} is not one of jpeg, png, gif, webp")
    if len(data) > limits.max_image_bytes:  # the API measures the base64 text
        raise _media_error(
            path, m, f"image is {len(data)} bytes, over the {limits.max_image_bytes} byte limit"
        )
    facts = _image_facts(data)
    if isinstance(facts, str):
        raise _media_error(path, m, facts)
    actual, (width, height) = facts
    if actual != media_type:
        raise _media_error(path, m, f"image is declared {media_type} but its bytes are {actual}")
    if max(width, height) > px_limit:
        raise _media_error(path, m, f"image is {width}x{height} px, over the {px_limit} px limit")
    return max(width, height)


@dataclass(frozen=True)
class _MediaTotals:
    images: int = 0
    pages: int = 0
    max_px: int = 0


def _check_media(msgs: list[_Msg], limits: MediaLimits, before: _MediaTotals | None = None) -> _MediaTotals:
    """Check every image in `msgs`; `before` counts media in messages ahead of them (already checked)."""
    before = before or _MediaTotals()
    media = list(_iter_media(msgs))
    images = before.images + sum(1 for x in media if x[2].get("type") == "image")
    px_limit = limits.many_images_px if images > limits.many_images_threshold else limits.max_image_px
    if before.max_px > px_limit:
        raise UserError(f"an earlier image is over the {px_limit} px limit for requests with {images} images")
    pages, max_px = before.pages, before.max_px
    for path, m, block in media:
        if block.get("type") == "image":
            max_px = max(max_px, _check_image(path, m, block, px_limit, limits))
            continue
        source = block.get("source") or {}
        raw = decode_base64(str(source.get("data", ""))) if source.get("type") == "base64" else None
        pages += pdf_pages(raw) if raw else 1
    if images + pages > limits.max_media_items:
        path, m, _ = media[-1] if media else ("messages", _Msg("user", [], ()), {})
        raise _media_error(
            path, m, f"the request holds {images} images + {pages} document pages > {limits.max_media_items}"
        )
    return _MediaTotals(images, pages, max_px)


def s7_check_media(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """S7: check image bytes, type, dimensions and the media count here, not by a 400 (A29-A35).

    Raises:
        UserError: naming the message path and the entries it came from.
    """
    _check_media(_as_sent(msgs), opts.media)
    return msgs


def _as_sent(msgs: list[_Msg]) -> list[_Msg]:
    """The messages as `final_shape` will index them, so that S7's error paths name the right one.

    S6.h can leave two replies adjacent (they merge), and a history that starts with a reply gets a
    leading user message. Dropping a trailing reply moves no earlier message, so it is left to `final`.
    """
    msgs = _merge_adjacent(msgs, _BOTH_ROLES)
    return [_leading_user(), *msgs] if msgs and msgs[0].role != "user" else msgs


def _leading_user() -> _Msg:
    return _Msg("user", [{"type": "text", "text": LEADING_USER_TEXT}], ())
