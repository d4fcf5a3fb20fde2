"""Every tunable number of the local server (design.md §8), in one frozen dataclass.

Kept beside the server rather than in `foldline.config` because only the server reads it; the
defaults are the real API's where the API documents them (design.md §A, §P). The per-model output
limits are the one table in `foldline.config`, which the engine reads too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from foldline.config import output_limits

__all__ = ["DEFAULT_MIN_CACHEABLE", "ServerConfig"]

DEFAULT_MIN_CACHEABLE: Mapping[str, int] = MappingProxyType(
    {
        "claude-opus-4-5": 4096,
        "claude-opus-4-6": 4096,
        "claude-haiku-4-5": 4096,
        "claude-3-5-haiku": 2048,
        "claude-3-haiku": 2048,
    }
)
"""Minimum cacheable prefix per model-name prefix (prompt-caching doc, 2026-01); others get 1024."""


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """What one `foldline serve` launch allows and how its prompt cache behaves."""

    context_window: int = 200_000
    max_output_tokens: int = 64_000
    """The `max_tokens` ceiling of a model that `max_output_by_model` does not name."""
    max_output_by_model: Mapping[str, int] = field(default_factory=lambda: MappingProxyType(output_limits()))
    """Model-name prefix -> its output limit (rule A40; longest prefix wins): the same table the
    engine caps its `max_tokens` escalation with (`foldline.config.MODEL_LIMITS`)."""
    max_request_bytes: int = 32 * 1024 * 1024
    """A larger body is a 413 `request_too_large`, refused while it streams in (`guard`)."""
    max_json_values: int = 1_000_000
    """Most JSON values one body may hold (`limits.check_values`): about 31,000 per MB at the body cap,
    half again what a tool-heavy session's requests carry (about 21,000); 8 MB of `{}` is 2.7 million."""
    max_concurrent_requests: int = 32
    """Requests in flight at once (streams until their last event); one more is a 529 `overloaded_error`.
    A request takes its slot once its body has arrived whole, so a trickled body holds none."""
    max_pending_body_bytes: int = 128 * 1024 * 1024
    """Bytes of request bodies still arriving, all connections together (each body is read whole
    before its request takes a slot); a chunk past it is a 529 for its request. Bounds the memory
    bodies in transit take: four bodies at the cap (`max_request_bytes`), thousands of ordinary ones."""
    header_timeout: float = 10.0
    """Seconds a connection may take to send a complete request head before it is closed (slowloris)."""
    body_timeout: float = 60.0
    """Seconds a request's body may take to arrive after its head before the connection is closed:
    32 MB (`max_request_bytes`) at about 0.5 MB/s."""
    keep_alive_timeout: int = 5
    """Seconds an idle keep-alive connection is kept after a response (uvicorn's `timeout_keep_alive`)."""
    shutdown_timeout: float = 0.5
    """Seconds a stopping server (SIGTERM, Ctrl-C) waits for responses still being sent before it
    cancels them (uvicorn's `timeout_graceful_shutdown`). Generations are cancelled at once anyway;
    this bounds a stream to a client that stopped reading, so the server is gone within a second."""
    max_media: int = 100
    prefill_allowed: bool = True
    allow_consecutive_roles: bool = True
    """The first-party API combines consecutive same-role messages into one turn instead of refusing
    them (rule A3 is other providers' and the API's old behaviour); Claude Code sends such runs after
    it compacts."""
    api_key: str | None = None
    """When set, every request must carry it in `x-api-key` (or `Authorization: Bearer`)."""
    allowed_hosts: tuple[str, ...] = ()
    """`Host` names accepted besides loopback (port ignored; `"*"` accepts any): DNS rebinding guard."""
    allowed_origins: tuple[str, ...] = ()
    """Browser origins (`https://app.example:3000`) whose requests are served, with CORS; `"*"` any."""
    model_prefixes: tuple[str, ...] = ("claude-",)
    """A model whose name starts with none of these gets 404 `not_found_error`."""
    min_cacheable_tokens: int = 1024
    min_cacheable_by_model: Mapping[str, int] = field(default_factory=lambda: DEFAULT_MIN_CACHEABLE)
    lookback_blocks: int = 20
    """How many blocks before a breakpoint the cache lookup checks (the docs' 20-block lookback)."""
    flatten_memo_bytes: int = 64 * 1024 * 1024
    """What the flatten memo (`caching.FlattenMemo`) may hold: block JSON it has seen, plus ~512
    bytes per entry; past it the oldest entries go (they are only recomputed)."""
    stream_chunk_tokens: int = 8
    """Tokens per `text_delta` / `thinking_delta` / `input_json_delta` event."""
    window_stop_models: tuple[str, ...] = (
        "claude-sonnet-4-5",
        "claude-sonnet-4-6",
        "claude-opus-4-5",
        "claude-opus-4-6",
        "claude-haiku-4-5",
    )
    """Model-name prefixes that stop at the context window with `model_context_window_exceeded`
    instead of refusing a prompt plus `max_tokens` over it (the API's default from Sonnet 4.5 on;
    older models get it with the `model-context-window-exceeded-2025-08-26` beta)."""
    thinking_key: bytes | None = None
    """The key thinking signatures are HMACs under; None draws a fresh one per launch."""
    request_log: str | None = None
    """A file every answered HTTP request is appended to, one JSON line each (`--request-log`); an
    answered `/v1/messages` request carries its bill too (`AccessRecord.billed`)."""
    models: tuple[tuple[str, str, str], ...] = (
        ("claude-opus-4-5-20251101", "Claude Opus 4.5", "2025-11-01T00:00:00Z"),
        ("claude-sonnet-4-5-20250929", "Claude Sonnet 4.5", "2025-09-29T00:00:00Z"),
        ("claude-haiku-4-5-20251001", "Claude Haiku 4.5", "2025-10-01T00:00:00Z"),
    )
    """What `GET /v1/models` lists, newest first: (id, display name, created_at)."""

    def min_cacheable(self, model: str) -> int:
        """Minimum cacheable prefix for `model`: the longest matching prefix's value, else the default."""
        best = ""
        for prefix in self.min_cacheable_by_model:
            if model.startswith(prefix) and len(prefix) > len(best):
                best = prefix
        return self.min_cacheable_by_model[best] if best else self.min_cacheable_tokens


@dataclass(frozen=True, kw_only=True)
class SimulatedConfig:
    """How the simulated model (`--backend simulated`) behaves: its calibration, in one place.

    The rounds-per-turn quantiles are the measured shape of real Claude Code sessions (median 1,
    p75 3, p90 8, p99 36, max 75 tool rounds per typed prompt); see docs/server.md.
    """

    round_quantiles: tuple[tuple[float, int], ...] = (
        (0.0, 0),
        (0.3, 0),
        (0.3, 1),
        (0.5, 1),
        (0.75, 3),
        (0.9, 8),
        (0.99, 36),
        (1.0, 75),
    )
    """(cumulative share, rounds) anchors; between two anchors the count grows geometrically."""
    max_parallel_reads: int = 3
    """Most Read calls one round makes at once."""
    max_reference_rounds: int = 8
    """Most rounds a turn that makes or refers back to earlier work takes (a fix, a rerun, a decision
    applied; `earlier.py`): past it the model answers, so a turn whose calls keep being compacted away
    cannot go round for ever. Above the five rounds the longest of them (a result recovered) takes."""
    bulky_result_chars: int = 2_000
    """A tool-result message at least this long is one the model snips when told it may. Below the
    output of the profiles' scripts (about 2,800 characters), so a result that states a planted fact
    is as snippable as any other bulky output: the model's Snip knows nothing of facts."""
    max_snips: int = 12
    """Most messages one Snip call removes."""
    keep_recent_messages: int = 6
    """Messages at the end of the request the model never snips (its current work)."""
    full_log_read_share: float = 0.0
    """Share of log and data reads done without a limit. Read is exempt from the level-0 budget, so
    such a read puts its whole raw result in the context; a real model pages big files instead."""
    verbosity: Mapping[str, tuple[int, int]] = field(
        default_factory=lambda: {"default": (50, 200), "swe": (8, 20)}
    )
    """Per profile: lines of the previous round's results the model notes before its next calls, and
    lines of the turn's results its final answer quotes. The default makes tool results about 55% of
    a session's tokens, as in real Claude Code sessions; `swe` about 80%, as on SWE-agent trajectories."""
    verbosity_scale: float = 1.0
    """Multiplies both `verbosity` numbers (rounded, at least one line each while it is above 0): the
    reply-length knob a benchmark sweeps to show that its verdict does not hang on one setting. 1.0
    is the calibration above, and leaves every reply as it is."""
    read_window_lines: int = 300
    """Lines a windowed read of a log or data file asks for."""
    big_grep_lines: int = 2_000
    """`head_limit` of the occasional grep over a whole log (raw output well over 100,000 characters)."""
    summary_line_chars: int = 300
    summary_lines_per_section: int = 60
    """Most lines a summary keeps of each kind of content (statements, requests, files, errors, recent
    and earlier answers), however many sections the request asks for: what survives never depends
    on the section titles."""
    summary_fidelity: float = 1.0
    """q: the probability that each statement the summary rules keep as a fact ("the X is Y.")
    survives one summary request, drawn independently per statement from a hash of (seed,
    statement, the summarized content: `summary.summary_key`), never from the request's wording. A
    lost statement is gone from the whole summary, every line that carried it included; a fact
    carried through k summaries survives with about q**k. 1.0 keeps every one: summaries exactly as
    before the knob."""
    summary_fact_budget: int = 40
    """Most distinct statements one summary keeps (after `summary_fidelity`), the oldest lost first,
    from every line of the summary. Measured at q = 1: a 100-turn `debug` session's summaries hold at
    most 16 (seeds 7 and 8, `claude-code-design` and `foldline-no-edits`, 47 summary requests each: the
    8 planted facts and 8 of the user's own "the tests to see whether the X timeout is covered"), a
    300-turn one 20 (seed 7, 148 requests). They stop there: the profiles' prompts state at most 17
    distinct statements however long the session (12 to 19 with the scripts' 3 by turn 100 over seeds
    1-30, 20 from turn 1,000), so no budget that spares 100 turns binds in a longer session unless
    it sits at 17-19 and so singles out the planted facts, the oldest statements. 40 binds in no
    profile session; it is a setting for sweeps and for content that keeps stating new things."""
    think_time_quantiles: tuple[tuple[float, float], ...] = (
        (0.0, 5.0),
        (0.5, 60.0),
        (0.75, 300.0),
        (0.9, 900.0),
        (0.95, 3_600.0),
        (1.0, 14_400.0),
    )
    """(cumulative share, seconds) anchors of the simulated user's pause before each prompt after the
    first (reading the answer, thinking, a meeting), geometric between anchors. An assumption, not a
    measurement (the 14 pauses in the sample transcripts are too few to fit): a quarter of the pauses
    outlast the 5-minute cache TTL and one in twenty the 60-minute time-based Microcompact, so both
    matter in a simulated session as they do in real use. See docs/server.md."""

    def __post_init__(self) -> None:
        if not self.verbosity_scale >= 0:  # also refuses NaN
            raise ValueError(f"SimulatedConfig.verbosity_scale must be 0 or more, not {self.verbosity_scale}")
        if not 0.0 <= self.summary_fidelity <= 1.0:  # also refuses NaN
            raise ValueError(
                f"SimulatedConfig.summary_fidelity must be between 0 and 1, not {self.summary_fidelity}"
            )
        if self.summary_fact_budget < 0:
            raise ValueError(
                f"SimulatedConfig.summary_fact_budget must be 0 or more, not {self.summary_fact_budget}"
            )

    def reply_lines(self, profile: str) -> tuple[int, int]:
        """`verbosity` of `profile` (the default's where it has none), scaled by `verbosity_scale`:
        (lines noted between rounds, lines the final answer quotes)."""
        lines, answer = self.verbosity.get(profile, self.verbosity["default"])
        return self._scaled(lines), self._scaled(answer)

    def _scaled(self, lines: int) -> int:
        if self.verbosity_scale == 1.0 or lines <= 0:
            return lines
        if self.verbosity_scale == 0:
            return 0
        return max(1, round(lines * self.verbosity_scale))
