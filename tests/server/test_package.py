"""The server package's public surface: sorted `__all__`, importable without the `server` extra."""

from __future__ import annotations

import subprocess
import sys

import foldline.server


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's `__all__` order (RUF022): CONSTANTS, then Classes, then functions."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_resolves() -> None:
    assert foldline.server.__all__ == sorted(foldline.server.__all__, key=_isort_key)
    assert all(hasattr(foldline.server, name) for name in foldline.server.__all__)


def test_package_does_not_import_starlette_or_uvicorn() -> None:
    code = "import sys, foldline.server, foldline.cli\n"
    code += "print(sorted({'starlette', 'uvicorn'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
