"""The transformers backend on a tiny random model: prefix K/V reuse and cache_edits as masking.

The model is a 2-layer Llama built from a config in the test (no download), loaded through the
same `TransformersBackend.load` path as a real model directory, with eager attention so the
attention weights can be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from foldline.server.backend import BackendRequest  # noqa: E402
from foldline.server.model.backend import TransformersBackend  # noqa: E402
from foldline.server.model.kvcache import PrefixKVCache  # noqa: E402
from foldline.server.model.masking import Hide, additive_mask  # noqa: E402
from foldline.server.model.tiny import write_tiny_model  # noqa: E402

SYSTEM = [
    {"type": "text", "text": "You are a careful coding agent. " * 4, "cache_control": {"type": "ephemeral"}}
]
TOOLS = [{"name": "Read", "description": "Read a file.", "input_schema": {"type": "object"}}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture
def backend(model_dir: Path) -> TransformersBackend:
    return TransformersBackend.load(model_dir, attn_implementation="eager", min_cache_tokens=16)


def _turn_one() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Please read a.py"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": "a"}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "def f():\n    return 42  # a long file body the agent later deletes\n",
                    "cache_reference": "r1",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
        },
    ]


def _turn_two() -> list[dict[str, Any]]:
    return [
        *_turn_one(),
        {"role": "assistant", "content": "It returns 42."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "Now explain why.", "cache_control": {"type": "ephemeral"}}],
        },
    ]


def _request(messages: list[dict[str, Any]], **extra: Any) -> BackendRequest:
    return BackendRequest(model="tiny", messages=messages, system=SYSTEM, tools=TOOLS, max_tokens=4, **extra)


def _full_logits(backend: TransformersBackend, ids: list[int], mask: Any = None) -> Any:
    with torch.inference_mode():
        return backend.model(input_ids=torch.tensor([ids]), attention_mask=mask).logits[0]


def test_suffix_over_a_cached_prefix_equals_a_full_forward(backend: TransformersBackend) -> None:
    first = backend.render(_request(_turn_one()))
    cold = backend.prefill(first)
    assert cold.reused == 0
    assert [bp.position for bp in cold.written] == [bp.position for bp in first.breakpoints]

    second = backend.render(_request(_turn_two()))
    assert second.token_ids[: cold.length] == first.token_ids
    warm = backend.prefill(second, keep_all=True)
    # The longest breakpoint of the first request is the whole first prompt's tool_result end.
    assert warm.reused == max(bp.position for bp in first.breakpoints) > 0
    full = _full_logits(backend, second.token_ids)
    assert warm.logits.shape == full[warm.reused :].shape
    torch.testing.assert_close(warm.logits, full[warm.reused :], atol=1e-4, rtol=0)


def test_a_deleted_span_is_masked_at_every_layer(backend: TransformersBackend) -> None:
    backend.prefill(backend.render(_request(_turn_one())))
    prompt = backend.render(_request(_turn_two()))
    start, end = prompt.references["r1"]
    assert "return 42" in backend.tokenizer.decode(prompt.token_ids[start:end])

    edited = backend.prefill(prompt, {"r1"}, keep_all=True, attentions=True)
    assert edited.reused >= end  # the span is inside the cached prefix and stays there
    assert edited.hides == (Hide(start, end, edited.reused),)

    n = len(prompt.token_ids)
    masked = _full_logits(backend, prompt.token_ids, additive_mask(0, n, n, edited.hides))
    torch.testing.assert_close(edited.logits, masked[edited.reused :], atol=1e-4, rtol=0)
    unmasked = _full_logits(backend, prompt.token_ids)[edited.reused :]
    assert (edited.logits - unmasked).abs().max() > 1e-3

    assert edited.attentions is not None
    assert len(edited.attentions) == backend.model.config.num_hidden_layers
    for weights in edited.attentions:
        assert weights.shape[-2:] == (n - edited.reused, n)
        assert torch.all(weights[..., start:end] == 0)
        assert torch.all(weights[..., :start].sum(-1) > 0)  # positions before the span still attended
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


def test_on_a_miss_the_span_is_hidden_from_every_later_query(backend: TransformersBackend) -> None:
    prompt = backend.render(_request(_turn_two()))
    start, end = prompt.references["r1"]
    edited = backend.prefill(prompt, {"r1"}, keep_all=True, attentions=True)
    assert edited.reused == 0
    assert edited.hides == (Hide(start, end, end),)
    assert edited.attentions is not None
    for weights in edited.attentions:
        assert torch.all(weights[0, :, end:, start:end] == 0)
        assert torch.all(weights[0, :, start:end, start:end].sum(-1) > 0)  # the span's own rows see it


def test_kv_computed_under_a_mask_never_serves_an_unedited_request(backend: TransformersBackend) -> None:
    prompt = backend.render(_request(_turn_two()))
    backend.prefill(prompt, {"r1"})  # cold, stores every breakpoint; the last one under the hide
    plain = backend.prefill(prompt, keep_all=True)
    # The last breakpoint's K/V were computed with the span hidden: a request showing it must not reuse them.
    assert plain.reused < max(bp.position for bp in prompt.breakpoints)
    assert plain.hides == ()
    full = _full_logits(backend, prompt.token_ids)
    torch.testing.assert_close(plain.logits, full[plain.reused :], atol=1e-4, rtol=0)


def test_no_row_is_fully_masked_and_sdpa_stays_finite(model_dir: Path) -> None:
    sdpa = TransformersBackend.load(model_dir, attn_implementation="sdpa", min_cache_tokens=16)
    prompt = sdpa.render(_request(_turn_two()))
    n = len(prompt.token_ids)
    everything = [Hide(0, n, 0)]  # would blank every row but for the guard
    mask = additive_mask(0, n, n, everything)
    assert torch.all((mask[0, 0] == 0).any(-1))
    out = sdpa.forward(prompt.token_ids, 0, sdpa._new_cache(None, 0), everything, keep_all=True)
    assert torch.isfinite(out.logits).all()


def test_usage_is_in_model_tokens_and_deleted_tokens_are_billed_nowhere(backend: TransformersBackend) -> None:
    first = backend.reply(_request(_turn_one()))
    assert first.usage is not None
    n1 = len(backend.render(_request(_turn_one())).token_ids)
    assert first.usage["cache_read_input_tokens"] == 0
    assert first.usage["input_tokens"] + first.usage["cache_creation_input_tokens"] == n1

    prompt = backend.render(_request(_turn_two()))
    start, end = prompt.references["r1"]
    second = backend.reply(
        _request(_turn_two(), deleted_references=frozenset({"r1"}), unedited_messages=_turn_two())
    )
    usage = second.usage
    assert usage is not None
    assert usage["cache_deleted_input_tokens"] == end - start
    billed = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert billed + usage["cache_deleted_input_tokens"] == len(prompt.token_ids)
    assert 0 < usage["output_tokens"] <= 4


def test_prefix_cache_lru_budget_and_ttl() -> None:
    now = [0.0]
    cache = PrefixKVCache(budget_bytes=3 * 2 * 4 * 8, clock=lambda: now[0])
    layer = [(torch.zeros(1, 1, 8, 1), torch.zeros(1, 1, 8, 1))]  # 64 bytes per 8-token entry
    for first in (1, 2, 3):
        assert cache.store([first] * 3 + [0] * 5, layer, (), "5m")
    assert len(cache) == 3
    assert cache.nbytes == 3 * 64
    assert cache.lookup([1] * 3 + [0] * 5 + [9]) is not None  # now most recently used
    assert cache.store([4] * 8, layer, (), "5m")
    assert cache.lookup([2] * 3 + [0] * 5) is None  # the least recently used one went
    assert cache.lookup([1] * 3 + [0] * 5) is not None
    assert not cache.store(list(range(40)), [(torch.zeros(1, 1, 40, 1), torch.zeros(1, 1, 40, 1))], (), "5m")

    now[0] += 299.0
    assert cache.lookup([1] * 3 + [0] * 5) is not None  # read refreshes the TTL
    now[0] += 299.0
    assert cache.lookup([1] * 3 + [0] * 5) is not None
    assert cache.lookup([4] * 8) is None  # not read for 598 s: expired

    masked = [(torch.zeros(1, 1, 8, 1), torch.zeros(1, 1, 8, 1))]
    cache.store([7] * 8, masked, [Hide(2, 4, 6)], "1h")
    assert cache.lookup([7] * 9) is None
    assert cache.lookup([7] * 9, deleted={(2, 4)}) is not None


def test_render_maps_breakpoints_and_references_to_token_positions(backend: TransformersBackend) -> None:
    prompt = backend.render(_request(_turn_one()))
    tok = backend.tokenizer
    # Byte tokens do not merge, so the prefix's own encoding is exactly the first tokens.
    system_end = prompt.text.index(SYSTEM[0]["text"]) + len(SYSTEM[0]["text"])
    before = tok(prompt.text[:system_end], add_special_tokens=False)["input_ids"]
    assert prompt.breakpoints[0].position == len(before)
    assert prompt.token_ids[: len(before)] == before
    start, end = prompt.references["r1"]
    assert tok.decode(prompt.token_ids[start:end]) == _turn_one()[2]["content"][0]["content"]
    assert "\ue000" not in prompt.text
    assert "<tool_call>" in prompt.text
    assert '"name": "Read"' in prompt.text


def test_qwen2_reuses_its_prefix_exactly_too(tmp_path: Path) -> None:
    qwen = TransformersBackend.load(
        write_tiny_model(tmp_path / "qwen2", family="qwen2"), attn_implementation="eager", min_cache_tokens=16
    )
    qwen.prefill(qwen.render(_request(_turn_one())))
    second = qwen.render(_request(_turn_two()))
    warm = qwen.prefill(second, keep_all=True)
    assert warm.reused > 0
    full = _full_logits(qwen, second.token_ids)
    torch.testing.assert_close(warm.logits, full[warm.reused :], atol=1e-4, rtol=0)


def test_a_tool_call_in_the_model_text_becomes_a_tool_use_block(
    backend: TransformersBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    said = 'Checking.<tool_call>{"name": "Read", "arguments": {"path": "b.py"}}</tool_call>'
    ids = backend.tokenizer(said, add_special_tokens=False)["input_ids"]
    monkeypatch.setattr(backend, "_tokens", lambda prefill, max_tokens, cancelled: iter(ids))
    reply = backend.reply(_request(_turn_two()))
    assert reply.stop_reason == "tool_use"
    assert reply.content[0] == {"type": "text", "text": "Checking."}
    assert reply.content[1]["type"] == "tool_use"
    assert (reply.content[1]["name"], reply.content[1]["input"]) == ("Read", {"path": "b.py"})
    assert reply.content[1]["id"].startswith("toolu_")
    assert reply.usage is not None
    assert reply.usage["output_tokens"] == len(ids)


# SmolLM2-135M-Instruct's chat template (from its GGUF): no place for tools or tool calls.
SMOLLM2_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)


def test_a_template_without_tools_gets_them_in_the_system_prompt_and_sees_its_calls(
    backend: TransformersBackend,
) -> None:
    tools = [
        {
            "name": "Read",
            "description": "Read a file.",
            "input_schema": {
                "type": "object",
                "properties": {"file_path": {"type": "string"}},
                "required": ["file_path"],
            },
        }
    ]
    backend.tokenizer.chat_template = SMOLLM2_TEMPLATE
    request = BackendRequest(
        model="m",
        messages=_turn_one(),
        system=SYSTEM,
        tools=tools,
        max_tokens=8,
        thinking=None,
        request_key="k",
    )
    text = backend.render(request).text
    system = text.split("<|im_end|>")[0]
    assert SYSTEM[0]["text"] in system
    assert '"name":"Read"' in system
    assert "<tools>" in system
    assert '<tool_call>[{"name": "Read", "arguments": {"file_path": "a.txt"}}]</tool_call>' in system
    # The assistant's earlier call is in the prompt as the text it would have written.
    assert '<|im_start|>assistant\n<tool_call>\n{"name":"Read","arguments":{"p":"a"}}\n</tool_call>' in text
    # Without tools offered nothing is added.
    bare = BackendRequest(
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        system=None,
        tools=[],
        max_tokens=8,
        thinking=None,
        request_key="k",
    )
    assert "<tools>" not in backend.render(bare).text
