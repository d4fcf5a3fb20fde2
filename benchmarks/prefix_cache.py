"""Time to first token with a cached ~4K-token prefix vs cold, on a real (random) transformer.

A model directory is built offline (`write_tiny_model`, sized so that prefill dominates: a 4K-token
prefill is the bulk of a cold first token) and loaded through `TransformersBackend.load`. The
prompt is a ~4,000-token system prompt carrying `cache_control` plus a short user turn. Cold: an
empty prefix cache, so the whole prompt is prefilled. Cached: the same system prompt with a new
user turn, so only the suffix is prefilled over the stored K/V. Each case asks for one token
(`max_tokens=1`), which is what the SSE writer sends first; the median of `--repeat` runs is kept.
Target (issue "real-model"): cold / cached >= 5x.

`--real` runs the same on real pretrained weights instead: SmolLM2-135M-Instruct (`foldline model
fetch`, fetched and converted on first use into `--models-dir`), its own tokenizer sizing the
prefix (`--tokens 2000` for a 2K-token cached prefix), one torch thread.

Run: `.venv/bin/python benchmarks/prefix_cache.py [--repeat N] [--tokens N] [--layers N] [--hidden N]`
     `.venv/bin/python benchmarks/prefix_cache.py --real --tokens 2000 [--models-dir DIR]`
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from foldline.server.backend import BackendRequest
from foldline.server.model.backend import TransformersBackend
from foldline.server.model.tiny import write_tiny_model

_LINE = "Rule {n}: keep every change small, tested, and explained in the commit message.\n"


def _system(tokens: int, count: Callable[[str], int] = lambda line: len(line.encode())) -> str:
    """A system prompt of about `tokens` tokens as `count` counts them (default: bytes, the tiny
    tokenizer's tokens)."""
    lines: list[str] = []
    size = 0
    while size < tokens:
        lines.append(_LINE.format(n=len(lines)))
        size += count(lines[-1])
    return "".join(lines)


def _request(system: str, question: str) -> BackendRequest:
    return BackendRequest(
        model="local",
        system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": question}],
        max_tokens=1,
    )


def _timed(backend: TransformersBackend, request: BackendRequest) -> tuple[float, int, int]:
    """Seconds to the first token, prompt tokens, tokens read from the cache."""
    start = time.perf_counter()
    reply = backend.reply(request)
    elapsed = time.perf_counter() - start
    assert reply.usage is not None
    prompt = reply.usage["input_tokens"] + reply.usage["cache_read_input_tokens"]
    prompt += reply.usage["cache_creation_input_tokens"]
    return elapsed, prompt, int(reply.usage["cache_read_input_tokens"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=4000, help="system prompt tokens (the cached prefix)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--real", action="store_true", help="SmolLM2-135M-Instruct instead of a tiny model")
    parser.add_argument("--models-dir", type=Path, default=None)
    args = parser.parse_args()

    if args.real:
        from foldline.server.model.fetch import fetch_model

        torch.set_num_threads(1)
        backend = TransformersBackend.load(fetch_model(models_dir=args.models_dir), min_cache_tokens=1024)
        tokenizer = backend.tokenizer
        system = _system(
            args.tokens, lambda line: len(tokenizer(line, add_special_tokens=False)["input_ids"])
        )
    else:
        with tempfile.TemporaryDirectory() as tmp:
            path = write_tiny_model(
                Path(tmp) / "model",
                layers=args.layers,
                hidden=args.hidden,
                heads=max(1, args.hidden // 64),
                kv_heads=max(1, args.hidden // 64),
                intermediate=4 * args.hidden,
            )
            backend = TransformersBackend.load(path, min_cache_tokens=1024)
        system = _system(args.tokens)
    backend.reply(_request(system[:2000], "warm up"))  # first-call allocations out of the timings

    cold: list[float] = []
    cached: list[float] = []
    rows: list[tuple[str, int, int, float]] = []
    for i in range(args.repeat):
        backend.cache = type(backend.cache)(budget_bytes=backend.cache.budget_bytes)
        seconds, prompt, read = _timed(backend, _request(system, f"Question {i}: what is rule 3?"))
        assert read == 0
        cold.append(seconds)
        rows.append(("cold", prompt, read, seconds))
        seconds, prompt, read = _timed(backend, _request(system, f"Question {i}: and rule 7, briefly?"))
        assert read > 0, "the second request should read the cached prefix"
        cached.append(seconds)
        rows.append(("cached", prompt, read, seconds))

    params = sum(p.numel() for p in backend.model.parameters())
    config = backend.model.config
    print(
        f"model: {'SmolLM2-135M-Instruct, ' if args.real else ''}{config.num_hidden_layers} layers, "
        f"hidden {config.hidden_size}, {params / 1e6:.1f}M params, "
        f"{torch.get_num_threads()} CPU threads, torch {torch.__version__}"
    )
    print(f"{'run':<8} {'prompt tokens':>14} {'cache read':>11} {'prefilled':>10} {'TTFT ms':>9}")
    for name, prompt, read, seconds in rows:
        print(f"{name:<8} {prompt:>14} {read:>11} {prompt - read:>10} {seconds * 1000:>9.1f}")
    cold_ms, cached_ms = statistics.median(cold) * 1000, statistics.median(cached) * 1000
    ratio = cold_ms / cached_ms
    print(f"median   cold {cold_ms:.1f} ms, cached {cached_ms:.1f} ms, ratio {ratio:.1f}x (target >= 5x)")


if __name__ == "__main__":
    main()
