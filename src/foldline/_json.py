"""Every JSON encode and decode in the package (a ruff rule bans `json`, `orjson` and
`msgspec.json` everywhere else).

msgspec decodes JSONL lines straight into the typed record union (resume speed is a goal);
orjson serializes wire bodies. Both escape nothing exotic by default, so the transcript encoder
escapes U+2028/U+2029 itself: a raw line separator inside a string breaks JSONL readers that split
on Unicode line boundaries (design.md F6). The standard library serves the two places that need
its exact semantics: `raw_decode` (salvaging records from a damaged transcript line) and
`dumps_readable` (the line-by-line request diffs written on a cache break).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from foldline.timeline import Record

__all__ = [
    "JSONDecodeError",
    "JSONEncodeError",
    "decode_json",
    "decode_record",
    "dumps",
    "dumps_readable",
    "encode_line",
    "loads",
    "raw_decode",
]

JSONDecodeError = orjson.JSONDecodeError
"""What `loads` raises on invalid JSON (a `ValueError`)."""
JSONEncodeError = orjson.JSONEncodeError
"""What `dumps` raises on a value JSON cannot express (a `TypeError`)."""

_record_decoder = msgspec.json.Decoder(Record)
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
_raw_decoder = json.JSONDecoder()


def encode_line(obj: object) -> bytes:
    """Serialize one transcript record (or header) as a complete JSONL line ending in `\\n`."""
    data = _encoder.encode(obj)
    if b"\xe2\x80\xa8" in data or b"\xe2\x80\xa9" in data:
        data = data.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
    return data + b"\n"


def decode_record(line: bytes) -> Record:
    """Decode one JSONL line into its typed record; raises `msgspec.DecodeError`/`ValidationError`."""
    return _record_decoder.decode(line)


def decode_json(data: bytes | str) -> Any:
    """Decode arbitrary JSON into plain Python values."""
    return _any_decoder.decode(data)


def dumps(
    obj: object, *, sort_keys: bool = False, indent: bool = False, default: Callable[[Any], Any] | None = None
) -> bytes:
    """Serialize a wire body (request/response JSON): compact, or indented by 2 with `indent`.

    `default` turns a value JSON cannot express into one it can (e.g. `str`), as in `json.dumps`.
    """
    option = (orjson.OPT_SORT_KEYS if sort_keys else 0) | (orjson.OPT_INDENT_2 if indent else 0)
    return orjson.dumps(obj, option=option, default=default)


def dumps_readable(obj: object) -> str:
    """Sorted keys, one value per line, indent 1, anything unknown as `str()`: for line diffs."""
    return json.dumps(obj, indent=1, sort_keys=True, default=str)


def raw_decode(text: str, start: int) -> tuple[Any, int]:
    """Decode the one JSON value that starts at `text[start]`; returns it and the index after it.

    Raises:
        ValueError: no valid JSON value starts there.
        RecursionError: the value nests too deeply.
    """
    return _raw_decoder.raw_decode(text, start)


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse a wire body (a memoryview parses a slice without copying it)."""
    return orjson.loads(data)
