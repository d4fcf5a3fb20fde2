"""End to end: the official SDK over real HTTP against `foldline serve` with a real (tiny) model.

The second request of a conversation must report, as `cache_read_input_tokens`, exactly the number
of prompt tokens whose K/V the model reused, counted independently with the model's tokenizer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from foldline.server.app import create_app
from foldline.server.config import ServerConfig
from foldline.server.model.backend import TransformersBackend
from foldline.server.model.tiny import write_tiny_model
from foldline.server.testing import run_server

SYSTEM_TEXT = "You are a careful coding agent working in a small repository. " * 3


def test_second_request_reads_the_real_cached_token_count(tmp_path: Path) -> None:
    backend = TransformersBackend.load(write_tiny_model(tmp_path / "model"), min_cache_tokens=32)
    app = create_app(ServerConfig(model_prefixes=("",)), backend=backend)
    system: Any = [{"type": "text", "text": SYSTEM_TEXT, "cache_control": {"type": "ephemeral"}}]
    first_messages: Any = [{"role": "user", "content": "What does main.py do?"}]
    with run_server(app) as url:
        client = anthropic.Anthropic(base_url=url, api_key="k", max_retries=0)
        first = client.messages.create(model="tiny", max_tokens=3, system=system, messages=first_messages)
        second_messages: Any = [
            *first_messages,
            {"role": "assistant", "content": [b.model_dump() for b in first.content] or "ok"},
            {"role": "user", "content": "And utils.py?"},
        ]
        with client.messages.stream(
            model="tiny", max_tokens=3, system=system, messages=second_messages
        ) as stream:
            second = stream.get_final_message()

    # Independent count: the tokens of the rendered prompt up to the end of the system text.
    prompt = backend.render(backend.calls[0])
    system_end = prompt.text.index(SYSTEM_TEXT) + len(SYSTEM_TEXT)
    cached = len(backend.tokenizer(prompt.text[:system_end], add_special_tokens=False)["input_ids"])
    assert cached >= 32

    assert first.usage.cache_read_input_tokens == 0
    assert first.usage.cache_creation_input_tokens == cached
    assert first.usage.input_tokens + cached == len(prompt.token_ids)
    assert second.usage.cache_read_input_tokens == cached
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens == len(backend.render(backend.calls[1]).token_ids) - cached
    assert 0 < second.usage.output_tokens <= 3
    assert second.stop_reason in ("end_turn", "max_tokens")
    assert len(backend.cache) == 1
