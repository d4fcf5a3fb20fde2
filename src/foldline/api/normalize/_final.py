"""The final shape and the pipeline: `STEPS`, `run_steps`, `normalize_messages_for_api` (design.md §4.1).

`STEPS` composes the steps in the documented order; `run_steps` runs any subset of them, so tests
can show the 400 each step prevents. The result starts with a user message, alternates roles, and
never ends with an assistant message unless a prefill was asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

from foldline._types import Block
from foldline.api.normalize._base import (
    _BOTH_ROLES,
    MediaLimits,
    MessageParam,
    NormalizeOptions,
    NormalizeStep,
    _Msg,
)
from foldline.api.normalize._lift import _lift
from foldline.api.normalize._s0_s5 import (
    _merge_adjacent,
    s0_filter,
    s1_reorder_attachments,
    s2_strip_failed_media,
    s3_merge_assistant_pieces,
    s4_merge_users,
    s5_snip_tags,
)
from foldline.api.normalize._s6_edges import (
    _is_blank_text,
    _is_thinking,
    _thinking_first,
    s6a_drop_orphan_thinking,
    s6b_strip_trailing_thinking,
    s6c_drop_whitespace,
    s6d_fill_empty_assistant,
    s6e_merge_adjacent,
    s6f_fold_reminders,
    s6g_text_only_errors,
    s6h_pair_tools,
)
from foldline.api.normalize._s7_media import (
    _leading_user,
    s7_check_media,
)
from foldline.errors import UserError
from foldline.timeline import Entry


def _rstrip_last_text(content: list[Block]) -> list[Block]:
    for i in range(len(content) - 1, -1, -1):
        b = content[i]
        if b.get("type") == "text":
            return [*content[:i], b | {"text": str(b.get("text", "")).rstrip()}, *content[i + 1 :]]
        if not _is_thinking(b):
            break
    return content


def _finish(msgs: list[_Msg], opts: NormalizeOptions, *, at_start: bool) -> list[_Msg]:
    merged = _merge_adjacent(msgs, _BOTH_ROLES)
    msgs = [_with_thinking_first(m) for m in merged] if len(merged) != len(msgs) else merged
    if msgs and msgs[-1].role == "assistant":
        last = msgs[-1]
        if not opts.allow_prefill:
            msgs = msgs[:-1]
        else:
            content = (
                last.content if opts.thinking_enabled else [b for b in last.content if not _is_thinking(b)]
            )
            msgs = [*msgs[:-1], last.with_content(_rstrip_last_text(content))]
            if not msgs[-1].content or all(_is_blank_text(b) for b in msgs[-1].content):
                msgs = msgs[:-1]
    if not at_start:
        return msgs
    if not msgs:
        raise UserError("nothing to send: the session has no user or assistant content after normalization")
    if msgs[0].role != "user":
        msgs = [_leading_user(), *msgs]
    return msgs


def _with_thinking_first(m: _Msg) -> _Msg:
    """A20 again after the last merge: dropping an orphan result between two replies (S6.h) can
    join one without thinking to one with it, and the thinking must lead the joined message."""
    if m.role != "assistant":
        return m
    content = _thinking_first(m.content)
    return m if content is m.content else m.with_content(content)


def final_shape(msgs: list[_Msg], opts: NormalizeOptions) -> list[_Msg]:
    """Start with a user message, alternate roles, and end with a user message (A1-A3, A8, A9).

    A trailing assistant message is dropped unless a prefill was asked for; a kept prefill loses
    trailing whitespace, and its thinking when thinking is off (A23).

    Raises:
        UserError: when nothing is left to send.
    """
    return _finish(msgs, opts, at_start=True)


STEPS: tuple[NormalizeStep, ...] = (
    NormalizeStep("S0", s0_filter),
    NormalizeStep("S1", s1_reorder_attachments),
    NormalizeStep("S2", s2_strip_failed_media),
    NormalizeStep("S3", s3_merge_assistant_pieces),
    NormalizeStep("S4", s4_merge_users),
    NormalizeStep("S5", s5_snip_tags),
    NormalizeStep("S6.a", s6a_drop_orphan_thinking),
    NormalizeStep("S6.b", s6b_strip_trailing_thinking),
    NormalizeStep("S6.c", s6c_drop_whitespace),
    NormalizeStep("S6.d", s6d_fill_empty_assistant),
    NormalizeStep("S6.e", s6e_merge_adjacent),
    NormalizeStep("S6.f", s6f_fold_reminders),
    NormalizeStep("S6.g", s6g_text_only_errors),
    NormalizeStep("S6.h", s6h_pair_tools),
    NormalizeStep("S7", s7_check_media),
    NormalizeStep("final", final_shape),
)
"""The pipeline, in design.md §4.1 order. Tests leave one step out to show the 400 that step prevents."""


def _wire(msgs: list[_Msg]) -> list[MessageParam]:
    """The messages as sent; `error` markers (only left when S2 did not run) are never sent."""
    return [{"role": m.role, "content": m.content} for m in msgs if m.role != "error"]  # type: ignore[typeddict-item]


def run_steps(
    entries: Sequence[Entry], steps: Sequence[NormalizeStep] = STEPS, options: NormalizeOptions | None = None
) -> list[MessageParam]:
    """Lift `entries` into messages and run `steps` over them in order.

    Messages whose role is not user/assistant (what S0 would have filtered) come out as
    `{"role": "system", ...}`, which is what sending them unfiltered would look like.
    """
    opts = options or NormalizeOptions()
    msgs = [_lift(e) for e in entries]
    for step in steps:
        msgs = step.run(msgs, opts)
    return _wire(msgs)


def normalize_messages_for_api(
    entries: Sequence[Entry],
    *,
    snip_enabled: bool = False,
    thinking_enabled: bool = True,
    allow_prefill: bool = False,
    media: MediaLimits | None = None,
) -> list[MessageParam]:
    """The Messages API `messages` for the API projection `entries` (design.md §4.1, steps S0-S7).

    Args:
        entries: `project_view(records)`: the projected timeline, oldest first.
        snip_enabled: append `[id:<short>]` tags to user messages (S5).
        thinking_enabled: whether the request enables extended thinking.
        allow_prefill: keep a trailing assistant message as a prefill instead of dropping it.
        media: image/document limits for S7 (the API's by default).

    Returns:
        Messages that start with a user turn, alternate, and pass the strict validator.

    Raises:
        UserError: media over the API's limits (S7), or nothing left to send.
    """
    options = NormalizeOptions(
        snip_enabled=snip_enabled,
        thinking_enabled=thinking_enabled,
        allow_prefill=allow_prefill,
        media=media or MediaLimits(),
    )
    return run_steps(entries, STEPS, options)
