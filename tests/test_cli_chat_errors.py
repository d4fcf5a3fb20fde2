"""`foldline chat`'s first failures, each one clear line: a deleted working directory, a base URL that
is a plain web server, an empty file given to --resume."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from click.testing import CliRunner

from foldline.cli import cli
from foldline.cli._errors import explain, web_page_summary
from foldline.errors import ModelHTTPError, RetriesExhaustedError

PAGE = """<!DOCTYPE HTML>
<html lang="en">
    <head><title>Error response</title></head>
    <body>
        <h1>Error response</h1>
        <p>Message: Unsupported method (&#x27;POST&#x27;).</p>
    </body>
</html>
"""


class _PlainWebServer(http.server.BaseHTTPRequestHandler):
    """What `python -m http.server` does with a POST: a 501 HTML page."""

    posts: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        type(self).posts.append(self.path)
        body = PAGE.encode()
        self.send_response(501)
        self.send_header("Content-Type", "text/html;charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[str]:
    _PlainWebServer.posts = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _PlainWebServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _chat(tmp_path: Path, *args: str) -> tuple[int, str]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    argv = ["chat", "--api-key", "k", "--workspace", str(workspace), "--sessions-dir", str(tmp_path / "s")]
    result = CliRunner().invoke(cli, [*argv, *args])
    return result.exit_code, result.output


def test_a_plain_web_server_is_asked_once_and_named_plainly(web_server: str, tmp_path: Path) -> None:
    code, out = _chat(tmp_path, "--base-url", web_server, "-p", "hi")
    assert code == 1
    assert len(_PlainWebServer.posts) == 1  # a 501 is what the server is: not retried
    assert "retrying" not in out
    assert f"the server at {web_server} answered HTTP 501 with a web page, not the Messages API" in out
    assert "Unsupported method ('POST')" in out  # the page's text, entities decoded
    assert "<html" not in out
    assert "foldline serve" in out


def test_a_retried_web_page_is_explained_by_its_text() -> None:
    page = ModelHTTPError("m", 502, PAGE, PAGE)
    wrapped = RetriesExhaustedError("m", "gave up after 5 attempts")
    wrapped.__cause__ = page
    line = explain(wrapped, "http://proxy.example")
    assert "\n" not in line
    assert "answered HTTP 502 with a web page" in line
    assert web_page_summary({"type": "error"}) is None
    assert web_page_summary("plain text, not a page") is None


@pytest.mark.slow  # a fresh interpreter that imports the chat: several seconds on a busy machine
def test_chat_from_a_deleted_directory_says_so(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        f"import os; os.chdir({str(gone)!r}); os.rmdir({str(gone)!r}); from foldline.cli import main; main()"
    )
    env = {**os.environ, "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, "-c", script, "chat", "-p", "hi"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "the current directory no longer exists" in result.stderr
    assert "--workspace" in result.stderr


@pytest.mark.parametrize("content", ["", "\n\n  \n"], ids=["empty", "blank-lines"])
def test_an_empty_file_is_not_resumed(tmp_path: Path, content: str) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text(content)
    code, out = _chat(tmp_path, "--base-url", "http://127.0.0.1:9", "--resume", str(empty), "-p", "hi")
    assert code == 1
    assert f"{empty} is empty" in out.replace("\n", "")
    assert "Imported" not in out
    assert not (tmp_path / "s").exists()  # no session was started


def test_a_retry_after_a_web_page_prints_one_line_not_the_page() -> None:
    from rich.console import Console

    from foldline.cli._ui import Renderer
    from foldline.events import RetryEvent

    console = Console(width=300, record=True, color_system=None)
    Renderer(console, live=False)(RetryEvent(1, 2.0, PAGE))
    shown = console.export_text()
    assert shown.count("\n") == 1
    assert "retrying in 2.0s: Error response Error response Message: Unsupported method ('POST')." in shown


def test_a_home_foldline_cannot_write_is_one_line_with_the_way_out(tmp_path: Path) -> None:
    """It used to be a 56-line OSError traceback with no word of --sessions-dir."""
    blocked = tmp_path / "home"
    blocked.write_text("a file where the home folder should be")  # mkdir under it fails, even as root
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "FOLDLINE_HOME"} | {"HOME": str(blocked)}
    argv = [
        sys.executable, "-c", "from foldline.cli import main; main()", "chat", "-p", "hi",
        "--workspace", str(workspace), "--base-url", "http://127.0.0.1:9", "--api-key", "k",
    ]  # fmt: skip
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "cannot create the sessions folder" in result.stderr
    assert "--sessions-dir" in result.stderr


def test_a_full_disk_under_the_transcript_says_how_to_go_on() -> None:
    from foldline.errors import TranscriptWriteError

    error = TranscriptWriteError("/s/x.jsonl: append failed: [Errno 28] No space left on device")
    line = explain(error)
    assert "No space left on device" in line
    assert "foldline chat --continue" in line
