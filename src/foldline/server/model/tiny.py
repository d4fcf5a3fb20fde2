"""A small randomly initialised chat model directory, built offline (tests and benchmarks).

The directory is a real Hugging Face causal-LM directory (config.json, safetensors weights,
tokenizer.json with a chat template), loaded through the same `TransformersBackend.load` path as a
downloaded model. The tokenizer is byte-level BPE with no merges: every byte is one token, so any
text encodes and token counts are byte counts, which tests can check independently. The chat
template is ChatML with Qwen-style tools (`<tools>` in the system turn, `<tool_call>` JSON replies,
`<tool_response>` results).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import torch

__all__ = ["CHAT_TEMPLATE", "write_tiny_model"]

CHAT_TEMPLATE = (
    "{% if tools %}<|im_start|>system\n"
    "{% if messages and messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n\n<tools>\n{% for tool in tools %}{{ tool | tojson }}\n{% endfor %}</tools>\n\n"
    "For each function call, return a json object within <tool_call></tool_call> tags.<|im_end|>\n"
    "{% elif messages and messages[0].role == 'system' %}<|im_start|>system\n"
    "{{ messages[0].content }}<|im_end|>\n"
    "{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'system' %}"
    "{% elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content }}"
    "{% for call in m.tool_calls or [] %}\n<tool_call>\n"
    '{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}'
    "\n</tool_call>{% endfor %}<|im_end|>\n"
    "{% elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n"
    "</tool_response><|im_end|>\n"
    "{% else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def write_tiny_model(
    directory: str | Path,
    *,
    family: Literal["llama", "qwen2"] = "llama",
    layers: int = 2,
    hidden: int = 32,
    heads: int = 2,
    kv_heads: int = 1,
    intermediate: int = 64,
    max_positions: int = 8192,
    seed: int = 0,
) -> Path:
    """Write a randomly initialised `family` model and its tokenizer to `directory`; returns it."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForCausalLM,
    )

    transformers.utils.logging.disable_progress_bar()
    path = Path(directory)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(["<|im_start|>", "<|im_end|>", "<|endoftext|>"])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(path)
    config_cls, model_cls = (
        (LlamaConfig, LlamaForCausalLM) if family == "llama" else (Qwen2Config, Qwen2ForCausalLM)
    )
    config = config_cls(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model_cls(config).save_pretrained(path)
    return path
