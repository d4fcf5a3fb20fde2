"""The package's public surface: a sorted `__all__` whose names all resolve."""

from __future__ import annotations

import foldline


def test_all_is_sorted_and_resolves() -> None:
    assert foldline.__all__ == sorted(foldline.__all__)
    for name in foldline.__all__:
        assert getattr(foldline, name) is not None, name
