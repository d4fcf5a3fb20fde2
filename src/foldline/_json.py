"""The one JSON encoder/decoder pair used for transcripts and wire bodies.

msgspec decodes JSONL lines straight into the typed record union (resume speed is a goal);
orjson serializes wire bodies. Both escape nothing exotic by default, so the transcript encoder
escapes U+2028/U+2029 itself: a raw line separator inside a string breaks JSONL readers that split
on Unicode line boundaries (design.md F6).
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from foldline.timeline import Record

__all__ = ["decode_json", "decode_record", "dumps", "encode_line", "loads"]

_record_decoder = msgspec.json.Decoder(Record)
_any_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


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


def dumps(obj: object, *, sort_keys: bool = False) -> bytes:
    """Serialize a wire body (request/response JSON) compactly."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS if sort_keys else 0)


def loads(data: bytes | str) -> Any:
    """Parse a wire body."""
    return orjson.loads(data)
