"""The server's tokenizer: lossless, deterministic, about 4 characters per token."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from foldline.server.tokenizer import MAX_PIECE, MEDIA_TOKENS, count_block, count_text, split_tokens

PROSE = (
    "The quick brown fox jumps over the lazy dog. Prompt caching references the entire prompt: "
    "tools, system, and messages, in that order, up to and including the block designated with "
    "cache_control. Documentation, internationalization and configuration are long words."
)


@given(st.text())
def test_split_is_lossless_and_count_agrees(text: str) -> None:
    tokens = split_tokens(text)
    assert "".join(tokens) == text
    assert len(tokens) == count_text(text)
    assert all(0 < len(t) <= MAX_PIECE for t in tokens)


def test_prose_is_roughly_four_chars_per_token() -> None:
    ratio = len(PROSE) / count_text(PROSE)
    assert 3.0 <= ratio <= 5.0


def test_long_words_are_chunked() -> None:
    assert split_tokens("internationalization") == ["intern", "ationa", "lizati", "on"]
    assert count_text(" a b") == 2


def test_blocks_count_their_payload_not_their_cache_control() -> None:
    text = {"type": "text", "text": PROSE}
    marked = {**text, "cache_control": {"type": "ephemeral"}}
    assert count_block(marked) == count_block(text) == count_text(PROSE)
    assert count_block({"type": "image", "source": {"type": "base64", "data": "x"}}) == MEDIA_TOKENS
    result = {"type": "tool_result", "tool_use_id": "t", "content": [text, text]}
    assert count_block(result) == 2 * count_text(PROSE)
