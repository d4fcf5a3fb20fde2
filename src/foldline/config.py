"""Every tunable number of the pipeline, in one typed, frozen configuration object.

Defaults are docs/design.md's. Nothing else in the package hard-codes a threshold: stages take the
`Config` (or the sub-config they need) they were built with.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Literal

__all__ = [
    "DESIGN_WINDOW",
    "TOKEN_ESTIMATE",
    "AutoCompactConfig",
    "CacheConfig",
    "CollapseConfig",
    "Config",
    "EstimateConfig",
    "FleetConfig",
    "MechanicalFoldConfig",
    "MicrocompactConfig",
    "ModelLimits",
    "RetryConfig",
    "SessionMemoryConfig",
    "ToolsConfig",
    "TranscriptConfig",
    "default_sessions_dir",
    "model_limits",
    "output_limits",
]

FsyncPolicy = Literal["always", "boundaries", "never"]


def default_sessions_dir() -> Path:
    """`$FOLDLINE_HOME/projects` (default `~/.foldline/projects`): where sessions live (R2.4)."""
    home = os.environ.get("FOLDLINE_HOME")
    return (Path(home) if home else Path.home() / ".foldline") / "projects"


@dataclass(frozen=True, kw_only=True)
class TranscriptConfig:
    """Persistence (design.md §2)."""

    sessions_dir: Path = field(default_factory=default_sessions_dir)
    fsync: FsyncPolicy = "boundaries"
    """`boundaries`: fsync before a tool runs and before each API call; `always`: after every
    record; `never`: leave it to the OS (tests, benchmarks)."""
    named_to_model: bool = True
    """The system prompt names this transcript and says what it holds (`system_prompt.transcript_note`),
    and Read and Grep may read it without asking: a detail that a fold or a compaction summary left out
    (an exact value, a command's output, a decision) can be searched for in the session's own record
    instead of being lost (design.md §3.5). With summaries that keep each fact with probability 0.7 it
    kept 8 of 8 facts where the same sessions without it kept 2-4, for 1-2% more cost
    (docs/benchmarks.md)."""


@dataclass(frozen=True, kw_only=True)
class MicrocompactConfig:
    """Level 2 (design.md §3.2)."""

    compactable_tools: frozenset[str] = frozenset(
        {"Read", "Bash", "Grep", "Glob", "WebSearch", "WebFetch", "Edit", "Write"}
    )
    keep_recent: int = 5
    time_based_after_s: float = 60 * 60
    cached_trigger_tokens: int = 20_000
    placeholder: str = "[Old tool result content cleared]"


@dataclass(frozen=True, kw_only=True)
class CollapseConfig:
    """Level 3 (design.md §3.3)."""

    enabled: bool = True
    """Collapse runs; AutoCompact then only answers a prompt-too-long (R3.3.4)."""
    commit_at: float = 0.90
    """Share of the effective window at which staged folds are committed (R3.3.5)."""
    span_opening_chars: int = 60
    """Characters of a message's opening that name it in a span's summary instruction when the
    requests carry no `[id:…]` tags to name it by (`Config.snip_min_window`): enough to tell turns
    apart."""
    emergency_at: float = 0.95
    """Share of the effective window at which the ctx-agent folds synchronously (R3.3.5)."""
    keep_recent_turns: int = 1
    """User turns never folded, counting the one in progress: 1 keeps the current task whole and lets
    a finished turn be folded once no turn is in progress (the background run after a turn's final
    reply); 2 also keeps the finished turn before it verbatim (design.md §3.3)."""
    span_target_tokens: int = 2_000
    """A span closes once its turns reach this many estimated tokens: one fold per span. The
    background run waits until a span is this big; an emergency fold takes any finished turns.
    Smaller spans fold sooner, so fewer requests read a finished turn verbatim; a record costs no
    request, so 2K was the cheapest of 2K, 3K and 10K. With `folds="summary"` each span is a summary request:
    10K was the cheapest of 5K, 10K, 15K and 20K there (design.md §3.3, docs/benchmarks.md)."""
    max_spans_per_run: int = 4
    """Forked summary requests per ctx-agent run, so one run's cost stays bounded."""
    summary_max_tokens: int = 4_000
    """Output room of one span summary request."""
    commit_when_it_pays: bool = True
    """Also commit staged folds below `commit_at` once they pay for themselves (design.md R3.3.7):
    the cache reads a fold saves over the session's expected remaining requests exceed the cost of
    writing again the cached tokens after it. The summaries are written in the background either
    way, so holding them until `commit_at` only keeps paying to read what they replace."""
    summaries_budget_tokens: int = 3_000
    """Tokens of fold summaries in view at which AutoCompact replaces them, with the rest, by one
    summary, at the next turn's first request (design.md R3.3.8). Collapse never folds its own
    summaries, so without this they would grow with the session; every request reads them, so a
    small budget pays for the compactions it triggers (each one summary request). 3K, not 5K: once
    those compactions stopped bringing files back, it was cheaper on every profile and seed of the
    100-turn rows with every fact kept; 2K was cheaper still but lost facts (docs/benchmarks.md)."""
    expected_rest_min_requests: int = 20
    """The fewest requests a session is expected to have left: the estimate is the requests it has
    made so far (a session that has run n requests is, as likely as not, halfway), never below this."""
    folds: Literal["summary", "record"] = "record"
    """What stands in for a folded span: a record built from the entries alone, with no model call
    (`compact.mechanical.record_fold`: each prompt word for word, the assistant's words and tool
    calls with their results' first lines, the openings of its final replies, and that the
    session's transcript holds the rest), or the model's summary (a forked request, R3.3.1 as
    written). Records by default: no summarizer can drop what the user said from one and none is
    paid for; what a record leaves out the model searches the transcript for (docs/design.md,
    "Record folds")."""
    max_consecutive_failures: int = 3
    """Failed span summaries in a row after which the ctx-agent stops asking the model for the
    session (its breaker, kept across a resume as AutoCompact's is); an emergency fold is then
    mechanical (design.md R3.3.9, R3.4.11)."""


@dataclass(frozen=True, kw_only=True)
class MechanicalFoldConfig:
    """What a mechanical fold keeps when the model cannot summarize (design.md R3.4.11)."""

    prompt_chars: int = 600
    """Each user prompt, cut to this many characters."""
    result_lines: int = 3
    """The first lines of each tool result."""
    line_chars: int = 160
    """Each kept line, cut to this many characters."""
    record_prompt_chars: int = 2_000
    """Each user prompt a record fold keeps, cut to this many characters: what the user asked is the
    part a record exists to keep, so only a pasted log or file is cut (the transcript has it whole)."""
    reply_chars: int = 400
    """Each final reply a record fold keeps (`CollapseConfig.folds = "record"`), cut to this many
    characters: its opening, where a reply says what it found or did."""
    step_chars: int = 200
    """What the assistant said beside each step of its work, in a record fold, cut to this many
    characters: why it made the calls that follow."""
    max_chars: int = 6_000
    """The whole fold; past it the oldest prompts and results go first (the newest work matters)."""
    max_share: float = 0.05
    """...and at most this share of the blocking limit (at 3 characters a token), so on a small
    window the fold leaves room for the work that follows it (8K: about 1,000 characters)."""


@dataclass(frozen=True, kw_only=True)
class SessionMemoryConfig:
    """The session-memory file AutoCompact uses instead of a summary request (R3.4.2, R3.4.10)."""

    enabled: bool = True
    with_collapse: bool = False
    """Keep the memory current in the background also while Context Collapse is on. Off by default:
    with Collapse on, AutoCompact only answers a prompt-too-long, so a memory refreshed every 5,000
    tokens is paid for on every session and used on almost none (design.md R3.4.10)."""
    init_tokens: int = 10_000
    """First written once the session's context passes this."""
    update_tokens: int = 5_000
    update_tool_calls: int = 3
    """Refreshed once both this many tokens and this many tool calls came after what it covers."""
    keep_min_tokens: int = 10_000
    keep_max_tokens: int = 40_000
    keep_min_text_messages: int = 5
    """The compaction that uses it keeps the latest 10,000-40,000 tokens, at least 5 text messages."""
    keep_max_share: float = 0.25
    """...and never more than this share of the effective window, so a small window is not refilled
    by the kept tail alone (on 200K, 45,000 > 40,000: the numbers above hold)."""


@dataclass(frozen=True, kw_only=True)
class AutoCompactConfig:
    """Level 4 (design.md §3.4)."""

    buffer_tokens: int = 13_000
    warning_below_threshold: int = 20_000
    blocking_margin: int = 3_000
    estimate_error_factor: float = 3.0
    """How far the estimated part of a count may be low. The padded estimate assumes 3 characters
    per token; digits and punctuation (logs, CSV, hex, minified JSON) can come out near 1. A request
    whose estimate, with its estimated part times this, passes the blocking limit is counted exactly
    (`count_tokens`, free) before it is sent."""
    freed_error_factor: float = 2.0
    """...and how far the estimate of what pending cache_edits free may be high: the padded 3
    characters per token against the 6 of plain prose, so the near-the-limit test subtracts only
    the freed estimate divided by this."""
    max_consecutive_failures: int = 3
    thrash_turns: int = 3
    thrash_repeats: int = 3
    summary_max_tokens: int = 20_000
    ptl_max_retries: int = 3
    reattach_files: int = 5
    reattach_tokens_per_file: int = 5_000
    reattach_tokens_total: int = 50_000
    ptl_drop_fraction: float = 0.2
    """Share of API rounds dropped from a too-long summary request when the gap is unknown (R3.4.5)."""
    summary_block_max_chars: int = 40_000
    """A too-long summary request first cuts each tool result or text block past this many characters
    to its head (R3.4.5): dropping the oldest rounds can never remove the newest one, so one huge
    result there would otherwise leave `/compact` no way out."""
    keep_prompt_max_tokens: int = 10_000
    prompt_max_chars_per_token: float = 6.0
    """A prompt is refused before it is recorded when even at this many characters per token (plain
    prose; code, logs and numbers have fewer) it cannot fit one request beside the system prompt and
    tools: no compaction can shrink the prompt being sent, so saving it would only brick the session."""
    """A full compaction keeps the pending user prompt verbatim after the summary up to this size."""
    memory: SessionMemoryConfig = field(default_factory=SessionMemoryConfig)


@dataclass(frozen=True, kw_only=True)
class ModelLimits:
    """One model family's window and output limit (R3.4.1: thresholds scale with them)."""

    window: int = 200_000
    long_context_window: int | None = None
    """The window with the long-context beta; None: the model has no such beta."""
    max_output: int = 64_000


DESIGN_WINDOW = 200_000
"""The window design.md's absolute token thresholds are tuned for (`Config.reference_window`)."""

MODEL_LIMITS: tuple[tuple[str, ModelLimits], ...] = (
    ("claude-sonnet-4", ModelLimits(long_context_window=1_000_000)),
    # Opus 4.5 and later allow 64K output; Opus 4 and 4.1 32K (the API's A40 error names both).
    ("claude-opus-4-5", ModelLimits()),
    ("claude-opus-4-6", ModelLimits()),
    ("claude-opus-4-7", ModelLimits()),
    ("claude-opus-4", ModelLimits(max_output=32_000)),
    ("claude-haiku-4", ModelLimits()),
    ("claude-3-5-haiku", ModelLimits(max_output=8_192)),
    ("claude-3-7-sonnet", ModelLimits()),
)
"""Model-name prefix -> limits; the first prefix that matches wins, others get `ModelLimits()`.
The one table of model limits: the engine reads it through `Config.limits`, `foldline serve`
through `output_limits` (a more specific prefix comes before a shorter one it starts with)."""


def model_limits(model: str, table: tuple[tuple[str, ModelLimits], ...] = MODEL_LIMITS) -> ModelLimits:
    """`model`'s limits: the first prefix of `table` that matches, else `ModelLimits()`."""
    return next((lim for prefix, lim in table if model.startswith(prefix)), ModelLimits())


def output_limits(table: tuple[tuple[str, ModelLimits], ...] = MODEL_LIMITS) -> dict[str, int]:
    """Model-name prefix -> largest `max_tokens`, for the validator (longest prefix wins there, which
    picks what `model_limits` picks because specific prefixes come first); "" is the default."""
    return {"": ModelLimits().max_output} | {prefix: lim.max_output for prefix, lim in table}


@dataclass(frozen=True, kw_only=True)
class RetryConfig:
    """Transient-error retries (R5.6, R5.7): one layer, bounded in attempts and in wall time."""

    max_attempts: int = 5
    """HTTP attempts per request, the first included (the SDK's own retries are turned off)."""
    max_retries_per_turn: int = 10
    """Retries per user turn across all its requests; successful and first attempts never count."""
    refused_max_attempts: int = 2
    """Attempts per request when the connection is refused (nothing listening): fail fast."""
    max_retry_after_s: float = 60.0
    """A `retry-after` longer than this surfaces as an error instead of a silent wait."""
    base_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    stream_idle_timeout_s: float = 300.0
    fork_max_attempts: int = 3
    """HTTP attempts per forked request (AutoCompact's summary, the emergency fold, session memory,
    the ctx-agent). A fork has its own retry budget, never the user's turn's, and fewer attempts: a
    failed fork only means compacting later, while the user waits on it."""
    fork_stream_idle_timeout_s: float = 120.0
    """R5.7 for forks: a forked stream silent this long is aborted (and retried within its budget)."""


@dataclass(frozen=True, kw_only=True)
class ToolsConfig:
    """Built-in tools (design.md §9): timeouts and output caps."""

    bash_timeout_s: float = 120.0
    """Default Bash timeout when the model gives none."""
    bash_max_timeout_s: float = 600.0
    """The longest timeout the model may ask for."""
    kill_grace_s: float = 2.0
    """SIGTERM -> SIGKILL grace period for a Bash process group."""
    background_grace_s: float = 0.5
    """How long output pipes may stay open after the shell exits (background children) before the
    group is killed."""
    max_output_chars: int = 30_000
    """Bash output (stdout and stderr each) beyond this keeps its head and tail."""
    read_default_lines: int = 2_000
    read_max_line_chars: int = 2_000
    read_max_bytes: int = 10 * 1024 * 1024
    """Text files above this must be read with `offset`/`limit`; images above it are refused."""
    read_max_output_chars: int = 100_000
    """The most characters one Read returns (about 25,000 tokens, Claude Code's Read cap): lines past
    it are left for a Read with `offset`. Without it, 2,000 long lines (4 MB) are a million tokens,
    more than any window, and no compaction can take a result back. The level-0 budget moves any
    result past this (Read included) to a file."""
    search_max_results: int = 100
    """Glob paths / Grep files or lines returned before the list is cut."""
    search_max_file_bytes: int = 5 * 1024 * 1024
    """Grep skips files larger than this."""
    environment_git_timeout_s: float = 2.0
    """How long each git command gathering a new session's environment block may take; past it
    the git lines are left out (`foldline.system_prompt`)."""
    environment_status_lines: int = 20
    """Changed paths the environment block lists from `git status` before it says how many more."""
    host_read_max_bytes: int = 64 * 1024**2
    """The most foldline reads on the host of one file a sandboxed command may have written (git's
    index and configs, settings and instruction files): past it the file counts as unreadable, so a
    planted `/dev/zero` or giant file costs no memory (`containment.safe_read`)."""
    host_read_timeout_s: float = 5.0
    """How long one such read may take (a file on a stalled network or FUSE mount) before it counts
    as unreadable."""
    sandbox_probe_timeout_s: float = 10.0
    """How long the start-up check that bubblewrap can run may take before the sandbox counts as
    unavailable."""
    sandbox_rule_paths_limit: int = 200
    """Paths one rule's glob binds into the Bash sandbox (read-only or hidden) one by one; past it,
    their parent folders are bound instead (more is covered, never less)."""
    sandbox_rule_walk_entries: int = 200_000
    """Entries the walk for one rule's glob visits per call; the folders it has not reached by
    then are hidden (or bound read-only) whole, so a huge tree costs access, never a rule."""
    sandbox_tmp_bytes: int = 2 * 1024**3
    """Size of the sandbox's private `/tmp` and home (memory-backed tmpfs)."""
    sandbox_data_bytes: int = 8 * 1024**3
    """RLIMIT_DATA of a sandboxed command (its heap and private writable memory)."""
    sandbox_file_bytes: int = 8 * 1024**3
    """RLIMIT_FSIZE of a sandboxed command: the largest file it may write."""
    sandbox_processes: int = 4_096
    """RLIMIT_NPROC of a sandboxed command (not enforced by Linux for root)."""
    layer_max_entries: int = 1_000_000
    """Entries of a command's copy-on-write layer read after the call (`containment.layer`); a
    larger change cannot be seen whole and is not applied."""
    layer_read_timeout_s: float = 60.0
    """How long reading a layer's change may take before it is refused whole."""
    layer_compare_bytes: int = 64 * 1024**2
    """A file copied up but unchanged in size and mtime is compared byte for byte up to this size
    (larger ones count as changed: applied, and undoable)."""
    policy_read_bytes: int = 16 * 1024**2
    """The most of one held file (an index, a config) the policy reads to decide and to show."""
    checkpoint_max_bytes: int = 20 * 1024**3
    """The undo store's size budget (`foldline checkpoints --prune`): the oldest go first."""
    checkpoint_max_age_s: float = 14 * 24 * 3600.0
    """Checkpoints older than this are pruned: their calls can no longer be undone."""


@dataclass(frozen=True, kw_only=True)
class EstimateConfig:
    """How tokens are estimated between the API's counts (R3.0.2, `foldline.tokens`)."""

    chars_per_token: int = 4
    media_tokens: int = 2_000
    """Tokens counted for one image or document, whatever its size."""
    padding: float = 4 / 3
    """Estimates are multiplied by this so they err high: an underestimate sends a request over."""


TOKEN_ESTIMATE = EstimateConfig()
"""The one estimator setting of the process. Not per `Config`: every level (budget, snip nudge,
Microcompact, Collapse, AutoCompact) and every tool must agree on what a count means, and
`foldline.tokens`' functions are called from all of them without a `Config` at hand."""


@dataclass(frozen=True, kw_only=True)
class CacheConfig:
    """Prompt-cache breakpoints (design.md §4.2, A42-A45, §P) and how a cache break is judged (R7.3)."""

    static_ttl: Literal["5m", "1h"] = "1h"
    """TTL of the tools and system breakpoints; a 1h one never follows a 5m one (A44). 1h: written
    once an hour at 2x the input price instead of every pause past 5 minutes at 1.25x, and it lets
    the turn breakpoints below be 1h too."""
    message_ttl: Literal["5m", "1h"] = "5m"
    """TTL of the rolling message breakpoint (each request's tail)."""
    turn_ttl: Literal["5m", "1h", "auto"] = "auto"
    """TTL of the breakpoint on the prompt that opens a turn (design.md R4.2.4): `auto` chooses 1h
    when the expected saving (a pause of 5 to 60 minutes would otherwise make the next turn write
    again what only that entry holds, unless a fold or a snip changed it first) beats the extra
    price of writing at the 1h rate; `5m` never."""
    pause_share_prior: float = 0.25
    """Prior share of pauses before a prompt that outlast the 5-minute TTL, before the session has
    shown its own; an assumption (a person reads, thinks, leaves for a meeting; a script never
    pauses), updated with every pause the session records."""
    long_pause_share_prior: float = 0.05
    """Prior share of pauses that outlast the 1-hour TTL too (part of `pause_share_prior`): after one
    a 1h entry is gone as well, and writing at the 1h rate bought nothing."""
    pause_prior_weight: float = 4.0
    """How many observed pauses the prior counts as."""
    write_5m_price: float = 1.25
    write_1h_price: float = 2.0
    """Cache write prices as multiples of the input price (the API's list prices)."""
    max_breakpoints: int = 4
    lookback_blocks: int = 20
    """The API looks back this many blocks from a breakpoint for an earlier cache entry."""
    ttl_seconds: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType({"5m": 5 * 60.0, "1h": 60 * 60.0})
    )
    """Seconds each `cache_control.ttl` keeps an entry; a request's shortest decides whether a break
    after a pause is the TTL passing or the server evicting early (`cachebreak`)."""
    break_min_fraction: float = 0.05
    break_min_tokens: int = 2_000
    """R7.3: a cache break is cache reads falling by more than both of these (share and tokens)."""


@dataclass(frozen=True, kw_only=True)
class ApprovalConfig:
    """How the terminal's approval prompt shows a tool call (`cli/_prompt.py`)."""

    diff_limit_bytes: int = 200_000
    """An existing file (or new content) larger than this is not diffed: its new content is shown
    as head and tail, with the sizes."""
    head_tail_lines: int = 20
    """Lines of new content shown at each end when it is not diffed."""
    space_run: int = 24
    """A run of at least this many spaces is shown as one `␣×N` marker (and a warning)."""
    blank_run: int = 2
    """A run of at least this many blank lines is shown as one marker line (and a warning)."""


@dataclass(frozen=True, kw_only=True)
class FleetConfig:
    """How `foldline.fleet` runs many whole sessions on Ray (not a session's setting)."""

    unit_cpus: float = 1.0
    """CPUs one unit declares to Ray: an engine and its own `foldline serve` (or a real client and
    the server), which take turns on the wire, so together they keep about one core busy."""
    unit_memory_mb: int = 1_024
    """Memory one unit declares to Ray, so a node is not given more sessions than it can hold (a
    300-turn simulated session peaks near 400 MB for engine and server together; docs/fleet.md)."""
    retries: int = 2
    """Times a unit that raised is submitted again before its last error becomes its row."""
    node_retries: int = 3
    """Times Ray itself reruns a unit whose worker or node died (`max_retries`), apart from `retries`."""
    progress_interval_s: float = 0.5
    """How often the live display is redrawn while no unit finishes."""
    record_interval_s: float = 30.0
    """How often a running fleet rewrites its record (`fleets/<run>.json`) while no unit finishes, so
    a fleet that is killed leaves its wall time to within this much (one small write to the store)."""


@dataclass(frozen=True, kw_only=True)
class Config:
    """The whole pipeline's configuration (docs/design.md's defaults)."""

    model: str = "claude-sonnet-4-5"
    context_window: int | None = None
    """The model's window; None: from `model_limits` (and `long_context`). A model not in the table
    (any non-Claude model: `foldline chat --context-window`, or what the server reports) sets it."""
    model_max_output: int | None = None
    """The model's output limit; None: from `model_limits`. Caps every request's `max_tokens`."""
    reference_window: int | None = None
    """The window the absolute token thresholds are tuned for; on a smaller window each of them
    shrinks in proportion (`scaled`), so an 8K model compacts at the same share of its window as
    Claude does of 200K instead of at a negative threshold. `foldline chat` sets `DESIGN_WINDOW`
    (design.md's numbers are for 200K). None: the thresholds are taken as given (a caller that tuned
    them for its own small window, as tests and the economics benchmark do)."""
    long_context: bool = False
    """Use the model's long-context window (1M) and send `long_context_beta` with every request."""
    long_context_beta: str = "context-1m-2025-08-07"
    model_limits: tuple[tuple[str, ModelLimits], ...] = MODEL_LIMITS
    output_reserve: int | None = None
    """Room kept for the reply; None: min(model max output, the summary reserve) (R3.4.9: 20K)."""
    max_output_tokens: int = 8_192
    escalated_max_output_tokens: int = 64_000
    max_output_recoveries: int = 3
    tool_result_budget_chars: int = 50_000
    tool_result_preview_chars: int = 2_000
    """Characters of an oversized result kept in the context as its preview (R3.0)."""
    max_result_share: float = 0.6
    """The most of a window's room (blocking limit less the system prompt and tools) one tool
    result, or one block of a summary request, may take, counted at one token per character: digits
    and punctuation come close to that at a real tokenizer. Caps Read's output, the level-0 budget
    and the summary request's block cut (`result_cap_chars`), so on any window one result leaves
    room for the prompt and call beside it (design.md R3.0). On 200K it changes none of them."""
    snip_enabled: bool = True
    snip_nudge_share: float = 0.5
    """Past this share of the effective window the model is reminded it can Snip (R3.1, *default*)."""
    snip_renudge_turns: int | None = None
    """...and reminded again after this many user prompts without a snip; None: only after a snip or
    a compaction. Off by default: each snip rewrites the prompt after the first snipped message, and
    repeated every 5 prompts on a 200K window that cost 0.47x of no management against 0.28x without
    (benchmarks/simulator.py, 300 turns), the cache-read share falling from 99.0% to 94.2%."""
    snip_min_window: int = 32_000
    """Windows below this offer no Snip tool, so requests carry no `[id:…]` tags: on an 8K window a
    small model echoes the tags (a whole answer was one) and has little to snip. The same line as
    `full_system_prompt_min_window`."""
    tools_in_prompt: bool = False
    """Write the tools into the system prompt and read a call back from the reply's text
    (`providers.prompted_tools`), for a server whose chat template drops the `tools` parameter;
    `foldline chat` turns it on when llama.cpp's `/props` says its template has no tools."""
    tools_in_prompt_temperature: float | None = 0.0
    """The temperature those requests go with, unless they set one (None: the server's default,
    llama.cpp's 0.8): sampled at 0.8, SmolLM2-135M slipped out of the call form where greedy
    decoding, what benchmarks/local_tool_calls.py measures, wrote the call."""
    summary_format: Literal["sections", "free"] = "sections"
    """`sections`: a compaction summary without the requested `## ` sections is a failure (R3.4.9).
    `free`: such a reply is kept whole, even one cut at the output limit, for a model too small to
    follow the format (`foldline chat --summary-format free`); an empty reply is still a failure."""
    max_turns: int | None = None
    """Model rounds per user turn before it stops with `stop_reason="max_turns"`; `None`: no limit."""
    thinking_budget_tokens: int | None = None
    """Extended thinking budget per request; `None` sends no thinking configuration."""
    default_thinking_budget_tokens: int = 8_000
    """The budget `foldline chat --thinking` turns on when no `--thinking-budget` is given."""
    full_system_prompt_min_window: int = 32_000
    """Windows from this size up get foldline's full system prompt (about 500 tokens of guidance);
    smaller ones a two-sentence one (`foldline.system_prompt`): on an 8K window the full one would
    take a twelfth of the room, and the 135M model the real-model path tests stops calling tools
    under it."""
    capability_probe_timeout_s: float = 5.0
    """How long `foldline chat` waits for a server to say what it supports (`GET /v1/models/{id}`)."""
    transcript: TranscriptConfig = field(default_factory=TranscriptConfig)
    microcompact: MicrocompactConfig = field(default_factory=MicrocompactConfig)
    collapse: CollapseConfig = field(default_factory=CollapseConfig)
    autocompact: AutoCompactConfig = field(default_factory=AutoCompactConfig)
    mechanical_fold: MechanicalFoldConfig = field(default_factory=MechanicalFoldConfig)
    retry: RetryConfig = field(default_factory=RetryConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)

    @property
    def limits(self) -> ModelLimits:
        """The configured model's limits (`ModelLimits()` for a model not in the table), with the
        explicit `model_max_output` in place of the table's."""
        found = model_limits(self.model, self.model_limits)
        if self.model_max_output is not None:
            return replace(found, max_output=self.model_max_output)
        return found

    @property
    def below_reference(self) -> bool:
        """Whether the window is smaller than the one the thresholds were tuned for (they scale)."""
        return self.reference_window is not None and self.window < self.reference_window

    def scaled(self, tokens: int) -> int:
        """An absolute token threshold for this window: as is on `reference_window` or more,
        proportionally smaller below it (never below 1)."""
        if self.reference_window is None or not self.below_reference:
            return tokens
        return max(1, tokens * self.window // self.reference_window)

    def result_cap_chars(self, chars: int, fixed_tokens: int, share: float | None = None) -> int:
        """A per-result character cap (`chars` as tuned for 200K) for this window: scaled like the
        token thresholds, and never more than `share` (default `max_result_share`) of the room the
        blocking limit leaves beside `fixed_tokens` (system prompt and tools), one token a character.
        At least 1, so a window too small for anything still truncates rather than divides by zero."""
        room = self.blocking_limit - fixed_tokens
        part = self.max_result_share if share is None else share
        return max(1, min(self.scaled(chars), int(room * part)))

    @property
    def output_tokens(self) -> int:
        """`max_tokens` of an ordinary request: the configured one, capped by the model's limit and,
        on a window below `reference_window`, by the reserve, so a prompt under the blocking limit
        plus its `max_tokens` always fits the window (no 400 for the output room)."""
        return self._output_cap(self.max_output_tokens)

    @property
    def escalated_output_tokens(self) -> int:
        """`max_tokens` after a max-output stop, capped as `output_tokens` is (on a small window the
        two are equal: there is no room to escalate into)."""
        return self._output_cap(self.escalated_max_output_tokens)

    def _output_cap(self, wanted: int) -> int:
        most = min(wanted, self.limits.max_output)
        return min(most, self.reserve) if self.below_reference else most

    @property
    def summary_tokens(self) -> int:
        """`max_tokens` of a compaction summary request: the summary reserve, scaled to the window."""
        return min(self.limits.max_output, self.scaled(self.autocompact.summary_max_tokens))

    @property
    def names_transcript(self) -> bool:
        """Whether the system prompt names the session's transcript (`TranscriptConfig.named_to_model`):
        only where the full system prompt goes too, since on a small window the line would take room
        a small model needs more (about 80 tokens: 8% of a 1K window)."""
        return self.transcript.named_to_model and self.window >= self.full_system_prompt_min_window

    @property
    def window(self) -> int:
        """The context window in use: the explicit one, else the model's (long-context when asked)."""
        if self.context_window is not None:
            return self.context_window
        limits = self.limits
        if self.long_context and limits.long_context_window is not None:
            return limits.long_context_window
        return limits.window

    @property
    def reserve(self) -> int:
        """Output tokens kept free: the explicit reserve, else min(model max output, 20,000)."""
        if self.output_reserve is not None:
            return self.output_reserve
        return self.summary_tokens

    @property
    def effective_window(self) -> int:
        """Context window minus the output reserve (R3.4.1: 200K -> 180K)."""
        return self.window - self.reserve

    @property
    def autocompact_threshold(self) -> int:
        """Effective window minus the AutoCompact buffer (167K for a 200K window)."""
        return self.effective_window - self.scaled(self.autocompact.buffer_tokens)

    @property
    def warning_threshold(self) -> int:
        """Where the UI turns yellow (147K for a 200K window)."""
        return self.autocompact_threshold - self.scaled(self.autocompact.warning_below_threshold)

    @property
    def blocking_limit(self) -> int:
        """Above this the request is refused with an error telling the user to compact (177K)."""
        return self.effective_window - self.scaled(self.autocompact.blocking_margin)
