"""The package's public surface: a sorted `__all__` whose names all resolve."""

from __future__ import annotations

import foldline


def test_all_is_sorted_and_resolves() -> None:
    assert foldline.__all__ == sorted(foldline.__all__)
    for name in foldline.__all__:
        assert getattr(foldline, name) is not None, name


def test_the_library_does_not_need_the_server_extra() -> None:
    import subprocess
    import sys

    code = "import sys, foldline; sys.exit(any(m in sys.modules for m in ('starlette', 'uvicorn')))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
