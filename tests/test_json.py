"""`foldline._json`, the package's one JSON module: the helpers that keep exact semantics."""

from __future__ import annotations

import json
from datetime import date

import pytest

from foldline._json import JSONDecodeError, JSONEncodeError, dumps, dumps_readable, loads, raw_decode


def test_dumps_is_compact_sorted_or_indented_on_request() -> None:
    body = {"b": [1, {"y": 2, "x": 1}], "a": "é\u2028"}
    assert dumps(body) == json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    assert dumps(body, sort_keys=True).startswith(b'{"a":')
    assert loads(dumps(body, indent=True)) == body
    assert dumps(body, indent=True).splitlines()[1] == b'  "b": ['


def test_dumps_readable_is_the_standard_librarys_sorted_indent_1() -> None:
    body = {"z": [1, 2], "a": {"when": date(2026, 1, 2)}, "t": "é"}
    assert dumps_readable(body) == json.dumps(body, indent=1, sort_keys=True, default=str)
    assert '"when": "2026-01-02"' in dumps_readable(body)


def test_raw_decode_finds_one_value_and_where_it_ends() -> None:
    text = 'junk{"kind":"user"}{"kind":"x"}'
    assert raw_decode(text, 4) == ({"kind": "user"}, 19)
    assert raw_decode(text, 19) == ({"kind": "x"}, len(text))
    with pytest.raises(ValueError, match="Expecting value"):
        raw_decode(text, 0)


def test_errors_are_the_standard_kinds() -> None:
    with pytest.raises(JSONDecodeError):
        loads(b"{")
    with pytest.raises(JSONEncodeError):
        dumps({"x": object()})
    assert issubclass(JSONDecodeError, ValueError)
    assert issubclass(JSONEncodeError, TypeError)
