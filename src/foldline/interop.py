"""Real coding agents, installed from npm, driven through their own interfaces against `foldline serve`.

Owns: installing a pinned client into a cache folder (`installed`), starting `foldline serve` as a
subprocess on a free port with a request log (`serve`), a client's private HOME and trusted
workspace, and one turn of each client with the answer's text: `ClaudeCode.turn` runs
`claude -p PROMPT --output-format json` (`--continue` after the first); `OpenCode.turn` posts the
prompt to a long-lived `opencode serve` (its TUI's HTTP API). `events`, `finished` and `answer` read
the JSON events of `opencode run --format json`, the command line a test types turns through.
The interop tests (tests/interop) check the clients' side of this; the peers benchmark
(benchmarks/peers.py) prices them from the server's request log, where every answered request
carries its `usage` (`AccessRecord.billed`).

Nothing of the clients is kept in the repository: they are installed on first use, and their
prompts and transcripts exist only in the caller's folders.
"""

from __future__ import annotations

import base64
import os
import platform
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foldline._json import dumps, loads
from foldline._process import stop
from foldline.errors import ClientRunError, ClientUnavailableError

__all__ = [
    "CACHE",
    "CLAUDE_CODE",
    "MODEL",
    "OPENCODE",
    "ClaudeCode",
    "OpenCode",
    "OpenCodeReply",
    "Package",
    "Server",
    "answer",
    "client_path",
    "events",
    "finished",
    "foldline_command",
    "installed",
    "opencode_config",
    "serve",
]

CACHE = Path(os.environ.get("FOLDLINE_INTEROP_CACHE", Path.home() / ".cache" / "foldline-interop"))
"""Where pinned clients are installed once and reused (override with $FOLDLINE_INTEROP_CACHE)."""

_GRACE_S = 15.0
"""How long a server or client is given to exit before it is killed."""

_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ETIMEDOUT", "ECONNREFUSED", "ECONNRESET", "ENETUNREACH", "network")
"""npm error words that mean the registry could not be reached."""

_FOLDLINE = ["-c", "import sys; from foldline.cli import main; sys.argv[0] = 'foldline'; main()"]

MODEL = "claude-sonnet-4-5"
"""The model both clients are told to use (what `foldline serve` prices them at)."""


@dataclass(frozen=True)
class Package:
    """A pinned npm package and the native binary inside it that is run."""

    name: str
    version: str
    binary: str

    @property
    def folder(self) -> Path:
        return CACHE / f"{self.name.replace('/', '-').lstrip('@')}-{self.version}"


CLAUDE_CODE = Package(
    "@anthropic-ai/claude-code", "2.1.328", "node_modules/@anthropic-ai/claude-code-linux-x64/claude"
)
OPENCODE = Package("opencode-ai", "1.18.33", "node_modules/opencode-linux-x64/bin/opencode")


def installed(package: Package, *, timeout: float = 900) -> Path:
    """The package's binary, installed into the cache with npm on first use.

    Raises:
        ClientUnavailableError: npm is missing, the registry cannot be reached, or the package ships
            no binary for this machine.
        ClientRunError: any other install failure.
    """
    binary = package.folder / package.binary
    if binary.exists():
        return binary
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise ClientUnavailableError(
            f"{package.name} is run here through its linux-x64 binary; this is {platform.platform()}"
        )
    npm = shutil.which("npm")
    if npm is None:
        raise ClientUnavailableError(
            f"npm is not installed, so {package.name}@{package.version} cannot be installed"
        )
    package.folder.mkdir(parents=True, exist_ok=True)
    spec = f"{package.name}@{package.version}"
    command = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(package.folder), spec]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        output = done.stdout + done.stderr
        if any(word in output for word in _OFFLINE):
            raise ClientUnavailableError(
                f"the npm registry is unreachable, so {spec} cannot be installed:\n{output[-800:]}"
            )
        raise ClientRunError(f"npm install {spec} failed ({done.returncode}):\n{output[-2000:]}")
    if not binary.exists():
        raise ClientRunError(f"npm installed {spec} but {binary} is missing")
    return binary


@dataclass
class Server:
    """A running `foldline serve` subprocess and its request log."""

    url: str
    log: Path
    process: subprocess.Popen[bytes]

    def requests(self) -> list[dict[str, Any]]:
        """Every request the server answered so far: method, path, status (and a bill when answered)."""
        if not self.log.exists():
            return []
        return [loads(line) for line in self.log.read_bytes().splitlines() if line.strip()]

    def non_2xx(self) -> list[dict[str, Any]]:
        return [r for r in self.requests() if not 200 <= r["status"] < 300]


def client_path() -> str:
    """`PATH` for a client: this interpreter's bin folder first, where the `rg` opencode's grep runs
    comes from (the `ripgrep` dev dependency), then the system's."""
    return os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])


def foldline_command(*args: str) -> list[str]:
    """`foldline ARGS` run by this interpreter (so the checkout in use is what runs)."""
    return [sys.executable, *_FOLDLINE, *args]


@contextmanager
def serve(folder: Path, *args: str, start_timeout: float = 60) -> Iterator[Server]:
    """`foldline serve --backend simulated ARGS` on a free loopback port, stopped on exit.

    Its request log is `folder/requests.jsonl`, its output `folder/server.log`.

    Raises:
        ClientRunError: the server did not start.
    """
    log, output = folder / "requests.jsonl", folder / "server.log"
    command = foldline_command(
        "serve", "--backend", "simulated", "--port", "0", "--request-log", str(log), *args
    )
    with output.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        url = _listening_url(output, process, start_timeout, "foldline serve")
        _wait_until_answering(url, start_timeout)
        yield Server(url, log, process)
    finally:
        stop(process, _GRACE_S)


def _listening_url(output: Path, process: subprocess.Popen[bytes], timeout: float, banner: str) -> str:
    """The URL a server prints on the line starting with `banner` (`... on http://HOST:PORT`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in output.read_text(errors="replace").splitlines():
            if " on http://" in line and line.startswith(banner):
                return line.split(" on ", 1)[1].split()[0]
        if process.poll() is not None:
            break
        time.sleep(0.1)
    name = banner.split()[0]
    raise ClientRunError(f"{name} did not start:\n{output.read_text(errors='replace')[-2000:]}")


def _wait_until_answering(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/v1/models", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError) as e:
            if time.monotonic() > deadline:
                raise ClientRunError(f"foldline serve at {url} does not answer: {e}") from e
        time.sleep(0.2)


@dataclass
class _Client:
    """A client's folders: the workspace `root/ws` and a private HOME `root/home`."""

    binary: Path
    root: Path
    url: str
    model: str = MODEL
    turn_timeout: float = 300

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def workspace(self) -> Path:
        return self.root / "ws"


@dataclass
class ClaudeCode(_Client):
    """Claude Code in `root/ws` (the workspace, which must exist) under a private HOME `root/home`.

    `prepare` trusts the workspace and allows the tools (Claude Code refuses to skip permissions as
    root); `turn` plays one `claude -p` turn, `--continue` after the first.
    """

    results: list[dict[str, Any]] = field(default_factory=list)
    """Each turn's JSON result, as Claude Code printed it."""
    extra_env: dict[str, str] = field(default_factory=dict)
    """Settings passed to the client through its environment, over the defaults `env` sets (e.g.
    `CLAUDE_CODE_AUTO_COMPACT_WINDOW`, the window its auto-compact manages to)."""

    def prepare(self) -> None:
        settings = {"permissions": {"allow": ["Read", "Edit", "Write", "Glob", "Grep", "Bash"]}}
        (self.workspace / ".claude").mkdir(exist_ok=True)
        (self.workspace / ".claude" / "settings.json").write_bytes(dumps(settings))
        self.home.mkdir(exist_ok=True)
        trust = {
            "hasCompletedOnboarding": True,
            "projects": {str(self.workspace): {"hasTrustDialogAccepted": True}},
        }
        (self.home / ".claude.json").write_bytes(dumps(trust))

    def env(self) -> dict[str, str]:
        return {
            "PATH": client_path(),
            "HOME": str(self.home),
            "PWD": str(self.workspace),
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "foldline-interop",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            **self.extra_env,
        }

    def turn(self, prompt: str) -> dict[str, Any]:
        """One turn; its JSON result (`result` is the answer's text, `is_error` whether it failed).

        Raises:
            ClientRunError: Claude Code printed no JSON result.
        """
        command = [str(self.binary), "-p", prompt, "--output-format", "json", "--model", self.model]
        if self.results:
            command.append("--continue")
        done = subprocess.run(
            command,
            cwd=self.workspace,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=self.turn_timeout,
            check=False,
        )
        try:
            result = loads(done.stdout)
        except ValueError:
            output = f"{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
            raise ClientRunError(
                f"claude printed no JSON result (exit {done.returncode}):\n{output}"
            ) from None
        if not isinstance(result, dict):
            raise ClientRunError(f"claude printed {type(result).__name__}, not a result object")
        self.results.append(result)
        return result

    def transcripts(self) -> list[Path]:
        return sorted((self.home / ".claude" / "projects").glob("*/*.jsonl"))


@dataclass(frozen=True)
class OpenCodeReply:
    """How one opencode turn ended: the last assistant message of the turn, as its server returns it."""

    text: str
    """The message's text parts, in order (a reply's earlier steps, "Running it now." before a tool
    call, are earlier messages and not the answer)."""
    finish: str | None
    """Why the message's step ended: `stop` when the reply came to its end; `tool-calls`, `length`
    or none when the loop left without one."""
    error: dict[str, Any] | None
    """The error opencode recorded on the message (a refused request, a provider failure), if any."""

    @property
    def finished(self) -> bool:
        return self.finish == "stop"


@dataclass
class OpenCode(_Client):
    """opencode in `root/ws` (which must exist) under a private HOME `root/home`, through its
    `anthropic` provider pointed at the server (the workspace's `opencode.json`).

    opencode runs as its TUI runs it: one long-lived `opencode serve` process for the session, the
    TUI's own HTTP API in front of it. `turn` posts the prompt to the session
    (`POST /session/{id}/message`, which answers once the turn's loop has finished) and reads the
    reply from the answer. The server is bound to loopback and locked with a password made for this
    session (`OPENCODE_SERVER_PASSWORD`), since it runs commands without asking. `close` stops it.

    Booting `opencode run --continue` afresh for every turn, as this class did before, costs opencode
    a reload of the whole session each turn: a 100-turn `feature` session took 562 s that way on this
    2-core machine and 98 s posted to one server, for the same bill within 0.3%. The server offers
    the model one tool more than `opencode run` does (11, as the TUI has them). `opencode run
    --attach URL` is not used: in 1.18.33 it exits 0 after the reply's first step while the server
    goes on with the turn.
    """

    compaction: dict[str, Any] = field(default_factory=dict)
    """The `compaction` section of its `opencode.json` (`auto`, `prune`, `tail_turns`,
    `preserve_recent_tokens`, `reserved`); empty: opencode's defaults."""
    start_timeout: float = 60
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _base: str = field(default="", init=False, repr=False)
    _auth: str = field(default="", init=False, repr=False)
    _session: str = field(default="", init=False, repr=False)

    def prepare(self) -> None:
        config = opencode_config(self.url, self.model, compaction=self.compaction)
        (self.workspace / "opencode.json").write_bytes(dumps(config))
        self.home.mkdir(exist_ok=True)

    def env(self) -> dict[str, str]:
        return {"PATH": client_path(), "HOME": str(self.home), "PWD": str(self.workspace)}

    def start(self) -> None:
        """Start `opencode serve` in the workspace and open the session the turns go to.

        Raises:
            ClientRunError: opencode did not start or refused to open a session.
        """
        if self._process is not None:
            return
        password = secrets.token_urlsafe(24)
        self._auth = "Basic " + base64.b64encode(f"opencode:{password}".encode()).decode()
        output = self.root / "opencode-serve.log"
        command = [str(self.binary), "serve", "--port", "0", "--hostname", "127.0.0.1"]
        env = {**self.env(), "OPENCODE_SERVER_PASSWORD": password}
        with output.open("wb") as sink:
            self._process = subprocess.Popen(
                command, cwd=self.workspace, env=env, stdout=sink, stderr=subprocess.STDOUT
            )
        try:
            self._base = _listening_url(
                output, self._process, self.start_timeout, "opencode server listening"
            )
            session = self._post("/session", {}, timeout=self.start_timeout)
        except BaseException:
            self.close()
            raise
        self._session = str(session["id"])

    @property
    def serve_url(self) -> str | None:
        """Where the running opencode server listens (None: not running)."""
        return self._base if self._process is not None and self._process.poll() is None else None

    def close(self) -> None:
        """Stop the opencode server (its session stays in `root/home`)."""
        process, self._process = self._process, None
        if process is not None:
            stop(process, _GRACE_S)

    def turn(self, prompt: str) -> OpenCodeReply:
        """One turn: the prompt posted to the session, answered when opencode's loop has finished.

        Raises:
            ClientRunError: opencode failed the request or answered something that is not a message.
        """
        self.start()
        body = {
            "parts": [{"type": "text", "text": prompt}],
            "model": {"providerID": "anthropic", "modelID": self.model},
        }
        message = self._post(f"/session/{self._session}/message", body, timeout=self.turn_timeout)
        info, parts = message.get("info"), message.get("parts")
        if not isinstance(info, dict) or not isinstance(parts, list):
            raise ClientRunError(f"opencode answered no message: {dumps(message).decode()[:500]}")
        text = "".join(
            str(p.get("text", "")) for p in parts if isinstance(p, dict) and p.get("type") == "text"
        )
        finish = info.get("finish")
        error = info.get("error")
        return OpenCodeReply(
            text=text,
            finish=str(finish) if finish is not None else None,
            error=error if isinstance(error, dict) else None,
        )

    def _post(self, path: str, body: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        request = urllib.request.Request(
            self._base + path,
            data=dumps(body),
            headers={"content-type": "application/json", "authorization": self._auth},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                found = loads(answer.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:1500]
            raise ClientRunError(f"opencode answered {path} with HTTP {e.code}: {detail}") from e
        except (urllib.error.URLError, OSError) as e:
            raise ClientRunError(f"opencode did not answer {path}: {e}") from e
        if not isinstance(found, dict):
            raise ClientRunError(f"opencode answered {path} with {type(found).__name__}, not an object")
        return found


def opencode_config(
    url: str, model: str = MODEL, *, compaction: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A workspace's `opencode.json`: the `anthropic` provider at `url`, edits and commands allowed,
    and `compaction` settings when given (none: opencode's defaults)."""
    config: dict[str, Any] = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"anthropic": {"options": {"baseURL": f"{url}/v1", "apiKey": "foldline-interop"}}},
        "model": f"anthropic/{model}",
        "permission": {"edit": "allow", "bash": "allow"},
    }
    if compaction:
        config["compaction"] = dict(compaction)
    return config


def events(output: str) -> list[dict[str, Any]]:
    """opencode's `--format json` events, one JSON object per line."""
    out = []
    for line in output.splitlines():
        if line.startswith("{"):
            event = loads(line)
            if isinstance(event, dict):
                out.append(event)
    return out


def finished(turn_events: list[dict[str, Any]]) -> bool:
    """Whether the turn's reply came to its end (a step that finished with reason `stop`)."""
    return any(
        e.get("type") == "step_finish"
        and isinstance(e.get("part"), dict)
        and e["part"].get("reason") == "stop"
        for e in turn_events
    )


def answer(turn_events: list[dict[str, Any]]) -> str:
    """The text of a turn's last assistant message: its text parts, in order (a reply's earlier
    steps, "Running it now." before a tool call, are not the answer)."""
    texts = [e["part"] for e in turn_events if e.get("type") == "text" and isinstance(e.get("part"), dict)]
    if not texts:
        return ""
    last = texts[-1].get("messageID")
    return "".join(str(p.get("text", "")) for p in texts if p.get("messageID") == last)
