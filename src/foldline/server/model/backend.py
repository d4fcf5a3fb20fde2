"""`TransformersBackend`: a local Hugging Face causal LM answering the server's requests.

One request: wait for the model (one generation at a time), render through the chat template
(`render`), look up the longest cached token prefix (`kvcache`), prefill only the suffix over the
cached K/V with the 4D mask that hides cache_edits deletions (`masking`), in chunks, store K/V at the
request's breakpoints, decode greedily up to `max_tokens`, parse tool calls (`toolcalls`: tagged,
bare JSON, botched), and bill `usage` in the model's own tokens.

`generate` yields the reply as it is made (`server.backend.Generated`): the input usage once the
prompt is read, then the text a client may already see, token by token, then the whole reply. The
server runs it in a worker thread and streams the text as it comes. Text that may yet turn out to
be a tool call (from `<tool_call>` on, a partial tag at the end, a reply that opens like bare JSON)
and trailing whitespace the parser would strip are held back until the reply ends, so what was
streamed is always a prefix of the final text block. The generation polls its `cancelled` flag
while it waits for the model, between prefill chunks and between tokens, so a client that leaves
(or a server that stops) frees the model within one token or one chunk.

Semantics of a deletion: queries computed by this request never attend a deleted span; K/V that
were cached before the edit are reused as they are, which is the point of cache_edits (the prefix
is not recomputed). On a miss the span is hidden from every query after it. The deleted tokens are
billed nowhere and reported as `cache_deleted_input_tokens`, as the scripted server does.

Nothing here touches the network: the model and tokenizer load with `local_files_only`.
"""

from __future__ import annotations

import hashlib
import inspect
import threading
import time
from collections.abc import Callable, Collection, Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from foldline._types import Block
from foldline.errors import GenerationCancelled, UserError
from foldline.server.backend import BackendRequest, Generated, Prefilled, Reply, StopReason, TextDelta
from foldline.server.model.kvcache import KVEntry, LayerKV, PrefixKVCache
from foldline.server.model.masking import Hide, additive_mask
from foldline.server.model.render import Breakpoint, RenderedPrompt, render_prompt
from foldline.server.model.toolcalls import TOOL_CALL_END, parse_tool_calls

__all__ = ["Prefill", "TransformersBackend", "shown_text"]


@dataclass(frozen=True, slots=True)
class Prefill:
    """One prefill: what was reused, what was computed, and the cache to decode from."""

    length: int
    """Prompt tokens."""
    reused: int
    """Tokens whose K/V came from the prefix cache (0 on a miss)."""
    hides: tuple[Hide, ...]
    """The masks the computed rows were under."""
    written: tuple[Breakpoint, ...]
    """Breakpoints whose K/V were stored."""
    logits: torch.Tensor
    """(computed positions, vocab) when all were kept, else (1, vocab): the last position."""
    cache: Any
    """The transformers cache object holding the whole prompt's K/V."""
    attentions: tuple[torch.Tensor, ...] | None = None
    """Per layer (1, heads, computed, length) weights, when asked for (eager attention only)."""


def _layers_of(cache: Any) -> list[LayerKV]:
    """(keys, values) per layer of a transformers cache, old (key_cache lists) or new (layers) API."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache, strict=True))


def _span_union(spans: Collection[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


_LOCK_POLL_SECONDS = 0.05
"""How often a generation queued behind another checks whether its client is still waiting."""

_TOOL_CALL_START = "<tool_call>"


def _never() -> bool:
    return False


def shown_text(text: str, *, tools: bool) -> str:
    """How much of a reply's raw text, so far, a client may see before the reply ends.

    Without tools the text is the reply's text as it is. With tools the final text is what
    `parse_tool_calls` leaves, so the part shown stops where a call could begin: at `<tool_call>`,
    before a partial tag at the end, and nowhere at all while the reply opens like bare JSON (`{`,
    `[`, a code fence); leading and trailing whitespace, which the parser strips, are held back.
    As `text` grows the result only grows, and it is always a prefix of the final text.
    """
    if not tools:
        return text
    body = text.lstrip()
    if body.startswith(("{", "[", "`")):
        return ""
    cut = body.find(_TOOL_CALL_START)
    if cut < 0:
        cut = len(body)
        # The longest partial tag at the end starts earliest: hold back from there.
        for size in range(min(len(_TOOL_CALL_START) - 1, len(body)), 0, -1):
            if _TOOL_CALL_START.startswith(body[-size:]):
                cut = len(body) - size
                break
    return body[:cut].rstrip()


class _Detokenizer:
    """The text of a growing token list, piece by piece: a piece is only given once it is final (a
    character split over tokens waits for its last byte), and the pieces joined are the text."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self._prefix = 0
        self._read = 0

    def _piece(self, *, final: bool) -> str:
        # Decoding a window that starts one emitted piece back keeps tokenizers that drop a
        # token's leading space at the start of a decode (SentencePiece) right.
        before = str(self.tokenizer.decode(self.ids[self._prefix : self._read], skip_special_tokens=True))
        after = str(self.tokenizer.decode(self.ids[self._prefix :], skip_special_tokens=True))
        if len(after) <= len(before) or (after.endswith("\ufffd") and not final):
            return ""
        self._prefix, self._read = self._read, len(self.ids)
        return after[len(before) :]

    def add(self, token: int) -> str:
        """The text `token` completes (often empty mid-character)."""
        self.ids.append(token)
        return self._piece(final=False)

    def flush(self) -> str:
        """What is held back at the end (an incomplete character, as the tokenizer decodes it)."""
        return self._piece(final=True)


class TransformersBackend:
    """A real model behind `foldline serve`, with a prefix K/V cache and cache_edits masking.

    Args:
        model: a transformers causal LM (eager or SDPA attention).
        tokenizer: its tokenizer, with a chat template.
        cache: the prefix K/V cache (default: 2 GiB budget on `clock`).
        min_cache_tokens: breakpoints before this many tokens are not stored (the API's minimum
            cacheable prefix; small models may want less).
        clock: seconds, monotonic, for the cache's TTLs.
        prefill_chunk_tokens: prompt tokens computed per forward pass; a cancelled generation
            stops between chunks, so this bounds how long a long prompt holds the model after its
            client has gone (256 tokens of a 135M model take a fraction of a second on 2 cores).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        cache: PrefixKVCache | None = None,
        min_cache_tokens: int = 1024,
        clock: Callable[[], float] = time.monotonic,
        prefill_chunk_tokens: int = 256,
    ) -> None:
        if prefill_chunk_tokens < 1:
            raise UserError(f"prefill_chunk_tokens must be at least 1, not {prefill_chunk_tokens}")
        self.model = model.eval()
        self.prefill_chunk_tokens = prefill_chunk_tokens
        self.tokenizer = tokenizer
        self.cache = cache if cache is not None else PrefixKVCache(clock=clock)
        self.min_cache_tokens = min_cache_tokens
        self.calls: list[BackendRequest] = []
        self._lock = threading.Lock()
        parameters = inspect.signature(model.forward).parameters
        # transformers 5 renamed `past_key_values` to `cache`, and 4.45 `num_logits_to_keep`.
        self._cache_kwarg = "cache" if "cache" in parameters else "past_key_values"
        self._keep_kwarg = next(
            (k for k in ("logits_to_keep", "num_logits_to_keep") if k in parameters), None
        )
        self._eos = self._eos_ids()

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        attn_implementation: Literal["sdpa", "eager"] = "sdpa",
        dtype: Literal["float32", "bfloat16", "float16"] = "float32",
        cache_bytes: int = 2 * 1024**3,
        min_cache_tokens: int = 1024,
        clock: Callable[[], float] = time.monotonic,
        prefill_chunk_tokens: int = 256,
    ) -> TransformersBackend:
        """Load a local Hugging Face causal-LM directory (config, weights, tokenizer, chat template).

        Raises:
            UserError: the directory is missing, or its tokenizer has no chat template.
        """
        import transformers

        directory = Path(path)
        if not (directory / "config.json").is_file():
            raise UserError(f"--model {directory}: not a model directory (no config.json)")
        transformers.utils.logging.disable_progress_bar()
        tokenizer = transformers.AutoTokenizer.from_pretrained(directory, local_files_only=True)
        if not getattr(tokenizer, "chat_template", None):
            raise UserError(f"--model {directory}: the tokenizer has no chat template")
        dtype_key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
        model = transformers.AutoModelForCausalLM.from_pretrained(
            directory,
            local_files_only=True,
            attn_implementation=attn_implementation,
            **{dtype_key: getattr(torch, dtype)},
        )
        return cls(
            model,
            tokenizer,
            cache=PrefixKVCache(budget_bytes=cache_bytes, clock=clock),
            min_cache_tokens=min_cache_tokens,
            clock=clock,
            prefill_chunk_tokens=prefill_chunk_tokens,
        )

    def _eos_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        for value in (
            self.tokenizer.eos_token_id,
            getattr(self.model.generation_config, "eos_token_id", None),
        ):
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list):
                ids.update(v for v in value if isinstance(v, int))
        end_of_turn = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        if isinstance(end_of_turn, int) and end_of_turn != self.tokenizer.unk_token_id:
            ids.add(end_of_turn)
        return frozenset(ids)

    def render(self, request: BackendRequest) -> RenderedPrompt:
        """The request's prompt, deleted tool_results still in when the server passed them."""
        messages = request.unedited_messages if request.unedited_messages is not None else request.messages
        return render_prompt(self.tokenizer, system=request.system, messages=messages, tools=request.tools)

    def _new_cache(self, entry: KVEntry | None, length: int) -> Any:
        from transformers import DynamicCache

        cache = DynamicCache()
        if entry is not None:
            for i, (keys, values) in enumerate(entry.layers):
                cache.update(keys[..., :length, :], values[..., :length, :], i)
        return cache

    def forward(
        self,
        token_ids: Sequence[int],
        start: int,
        cache: Any,
        hides: Collection[Hide] = (),
        *,
        keep_all: bool = False,
        attentions: bool = False,
    ) -> Any:
        """Run `token_ids` at positions start.. over `cache` (which grows by them) under the hides."""
        q = len(token_ids)
        kwargs: dict[str, Any] = {
            self._cache_kwarg: cache,
            "use_cache": True,
            "attention_mask": additive_mask(start, q, start + q, hides, dtype=self.model.dtype),
            "position_ids": torch.arange(start, start + q).unsqueeze(0),
        }
        if not keep_all and self._keep_kwarg is not None:
            kwargs[self._keep_kwarg] = 1  # the vocabulary projection of only the last position
        if attentions:
            kwargs["output_attentions"] = True
        with torch.inference_mode():
            return self.model(input_ids=torch.tensor([list(token_ids)]), **kwargs)

    def prefill(
        self,
        prompt: RenderedPrompt,
        deleted: Collection[str] = (),
        *,
        keep_all: bool = False,
        attentions: bool = False,
        cancelled: Callable[[], bool] = _never,
    ) -> Prefill:
        """Reuse the longest cached prefix, compute the rest under the deletion masks, store breakpoints.

        The rest is computed `prefill_chunk_tokens` at a time (in one pass when `attentions` are
        asked for), each chunk over the cache the ones before it filled, exactly as a cache hit's
        suffix is computed over the stored prefix.

        Raises:
            GenerationCancelled: `cancelled()` became true between two chunks (nothing is stored).
        """
        ids = prompt.token_ids
        spans = {prompt.references[name] for name in deleted if name in prompt.references}
        entry = self.cache.lookup(ids, spans)
        # The last prompt position must be computed to have logits to decode from.
        reused = min(entry.length, len(ids) - 1) if entry is not None else 0
        inherited = {(h.start, h.end): h for h in (entry.hides if entry is not None else ())}
        hides = tuple(
            sorted(inherited.get(span) or Hide(span[0], span[1], max(span[1], reused)) for span in spans)
        )
        cache = self._new_cache(entry, reused)
        step = len(ids) if attentions else self.prefill_chunk_tokens
        logits: list[torch.Tensor] = []
        for begin in range(reused, len(ids), step):
            if cancelled():
                raise GenerationCancelled("the prefill was cancelled")
            chunk = ids[begin : begin + step]
            out = self.forward(chunk, begin, cache, hides, keep_all=keep_all, attentions=attentions)
            logits.append(out.logits[0])
        written = self._store(ids, reused, cache, hides, prompt.breakpoints)
        return Prefill(
            length=len(ids),
            reused=reused,
            hides=hides,
            written=written,
            logits=torch.cat(logits) if keep_all else logits[-1],
            cache=cache,
            attentions=tuple(out.attentions) if attentions else None,
        )

    def _store(
        self,
        ids: Sequence[int],
        reused: int,
        cache: Any,
        hides: Sequence[Hide],
        breakpoints: Sequence[Breakpoint],
    ) -> tuple[Breakpoint, ...]:
        ttl_at: dict[int, str] = {}
        for bp in breakpoints:
            if reused < bp.position <= len(ids) and bp.position >= self.min_cache_tokens:
                # Two breakpoints on one position: the longer TTL wins.
                ttl_at[bp.position] = "1h" if "1h" in (bp.ttl, ttl_at.get(bp.position)) else bp.ttl
        layers = _layers_of(cache)
        written: list[Breakpoint] = []
        for position, ttl in sorted(ttl_at.items()):
            under = [h for h in hides if h.from_row < position]
            if self.cache.store(ids[:position], layers, under, ttl):
                written.append(Breakpoint(position, ttl))
        return tuple(written)

    def _tokens(self, prefill: Prefill, max_tokens: int, cancelled: Callable[[], bool]) -> Iterator[int]:
        """Greedy tokens after the prompt: at most `max_tokens`, until the end of turn or `cancelled()`.

        The next token is computed only when asked for, so a caller that stops early (at its stop
        text) costs no extra forward pass.
        """
        next_id = int(prefill.logits[-1].argmax())
        count = 0
        while next_id not in self._eos and not cancelled():
            yield next_id
            count += 1
            if count >= max_tokens:
                return
            position = prefill.length + count - 1
            out = self.forward([next_id], position, prefill.cache, prefill.hides)
            next_id = int(out.logits[0, -1].argmax())

    @contextmanager
    def _model(self, cancelled: Callable[[], bool]) -> Iterator[None]:
        """Hold the model for one generation; a cancelled waiter leaves the queue (`GenerationCancelled`)."""
        while not self._lock.acquire(timeout=_LOCK_POLL_SECONDS):
            if cancelled():
                raise GenerationCancelled("cancelled while waiting for the model")
        try:
            yield
        finally:
            self._lock.release()

    def generate(
        self, request: BackendRequest, cancelled: Callable[[], bool] = _never
    ) -> Generator[Generated, None, None]:
        """Answer `request` piece by piece (`server.backend.GeneratingBackend`): `Prefilled` with
        the input usage, `TextDelta`s of the text as it is decoded, the `Reply` last.

        Returns early, without a `Reply`, once `cancelled()` is true; the model is free again then.
        """
        try:
            with self._model(cancelled):
                self.calls.append(request)
                prompt = self.render(request)
                deleted = request.deleted_references
                prefill = self.prefill(prompt, deleted, cancelled=cancelled)
                yield Prefilled(_usage(prompt, prefill, deleted, 0))
                tools = bool(request.tools)
                stop_text = TOOL_CALL_END if tools else None
                pieces = _Detokenizer(self.tokenizer)
                raw, shown, count, ended = "", "", 0, False
                for token in self._tokens(prefill, request.max_tokens, cancelled):
                    count += 1
                    piece = pieces.add(token)
                    raw += piece
                    # The closing tag ends the turn: a small model otherwise goes on after its call,
                    # repeating the prompt's example; the call is the turn.
                    if stop_text is not None and stop_text in raw[-(len(piece) + len(stop_text)) :]:
                        ended = True
                        break
                    visible = shown_text(raw, tools=tools)
                    if len(visible) > len(shown):
                        yield TextDelta(visible[len(shown) :])
                        shown = visible
                else:
                    if cancelled():
                        return
                    ended = count < request.max_tokens
                raw += pieces.flush()
        except GenerationCancelled:
            return
        yield self._reply(request, raw, ended, _usage(prompt, prefill, deleted, count))

    def _reply(self, request: BackendRequest, raw: str, ended: bool, usage: dict[str, Any]) -> Reply:
        names = {str(t.get("name")) for t in request.tools}
        text, calls = parse_tool_calls(raw, names) if names else (raw, [])
        content: list[Block] = [{"type": "text", "text": text}] if text else []
        for i, call in enumerate(calls):
            digest = hashlib.sha256(f"{request.request_key}:{i}".encode()).hexdigest()[:24]
            content.append(
                {"type": "tool_use", "id": "toolu_" + digest, "name": call.name, "input": call.input}
            )
        stop: StopReason = ("tool_use" if calls else "end_turn") if ended else "max_tokens"
        return Reply(content=tuple(content), stop_reason=stop, usage=usage)

    def reply(self, request: BackendRequest) -> Reply:
        """Answer `request` with the model in one piece; `usage` counts the model's tokens."""
        for item in self.generate(request):
            if isinstance(item, Reply):
                return item
        raise AssertionError("a generation nobody cancelled ended without its reply")


def _usage(
    prompt: RenderedPrompt, prefill: Prefill, deleted: Collection[str], output_tokens: int
) -> dict[str, Any]:
    """The response usage in real tokens, split as the scripted server splits it (A, B, C positions)."""
    spans = _span_union([prompt.references[n] for n in deleted if n in prompt.references])

    def billed(position: int) -> int:
        return position - sum(max(0, min(end, position) - start) for start, end in spans)

    read = billed(prefill.reused)
    one_hour = [bp.position for bp in prefill.written if bp.ttl == "1h"]
    b_end = billed(one_hour[-1]) if one_hour else read
    c_end = billed(prefill.written[-1].position) if prefill.written else read
    usage: dict[str, Any] = {
        "input_tokens": billed(prefill.length) - c_end,
        "cache_creation_input_tokens": c_end - read,
        "cache_read_input_tokens": read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": c_end - b_end,
            "ephemeral_1h_input_tokens": b_end - read,
        },
        "output_tokens": output_tokens,
    }
    deleted_count = prefill.length - billed(prefill.length)
    if deleted_count:
        usage["cache_deleted_input_tokens"] = deleted_count
    return usage
