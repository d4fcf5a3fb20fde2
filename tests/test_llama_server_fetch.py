"""The pinned llama.cpp server wheel: checked by its SHA-256, unpacked once, and skipped only when the
registry cannot be reached. pip runs for real, against a local folder or a dead index."""

from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import pytest

from foldline import llama_server
from foldline.errors import ClientRunError, ClientUnavailableError
from foldline.llama_server import ServerWheel, installed

VERSION = "2026.10.11549"
FILENAME = f"xllamacpp-{VERSION}-cp310-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"


def _wheel(folder: Path) -> Path:
    """A minimal wheel with the pinned name and version (pip reads its metadata)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILENAME
    info = f"xllamacpp-{VERSION}.dist-info"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("xllamacpp/__init__.py", "SERVER = True\n")
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: xllamacpp\nVersion: {VERSION}\n")
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\nTag: cp310-abi3-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    return path


@pytest.fixture
def local_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip sees only `tmp_path/index` (no registry), and the cache is `tmp_path/cache`."""
    monkeypatch.setattr(llama_server, "CACHE", tmp_path / "cache")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    return tmp_path / "index"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_wheel_with_the_pinned_checksum_is_unpacked_once(local_index: Path) -> None:
    wheel = ServerWheel("xllamacpp", VERSION, FILENAME, _sha(_wheel(local_index)))
    folder = installed(wheel)
    assert (folder / "xllamacpp" / "__init__.py").read_text() == "SERVER = True\n"
    (local_index / FILENAME).unlink()  # pip would fail now: the second call must not run it
    assert installed(wheel) == folder


def test_a_wheel_that_is_not_the_pinned_one_is_refused_and_removed(local_index: Path) -> None:
    _wheel(local_index)
    wheel = ServerWheel("xllamacpp", VERSION, FILENAME, "0" * 64)
    with pytest.raises(ClientRunError, match=r"sha256 \w+, pinned 0000"):
        installed(wheel)
    assert not (llama_server.CACHE / ".downloads" / FILENAME).exists()
    assert not wheel.folder.exists()


def test_an_unreachable_registry_is_the_one_reason_to_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_server, "CACHE", tmp_path / "cache")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens on port 9
    monkeypatch.setenv("PIP_TIMEOUT", "5")
    with pytest.raises(ClientUnavailableError, match="registry is unreachable"):
        installed(ServerWheel("xllamacpp", VERSION, FILENAME, "0" * 64))


def test_a_package_the_registry_does_not_have_is_a_failure(local_index: Path) -> None:
    local_index.mkdir()  # reachable, and empty
    with pytest.raises(ClientRunError, match=r"pip download xllamacpp==9\.9 failed"):
        installed(ServerWheel("xllamacpp", "9.9", "xllamacpp-9.9-py3-none-any.whl", "0" * 64))
