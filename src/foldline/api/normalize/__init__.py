"""`normalize_messages_for_api`: projected timeline in, valid Messages API messages out (design.md §4.1).

The input is `project_view(records)` (entries after snip, collapse and compact projection). The
output is a list of `{role, content}` messages the strict validator accepts. The work is a fixed
pipeline of small pure steps, one per step of design.md §4.1, composed in `STEPS` in the documented order:

```
lift entries -> S0 filter -> S1 attachments -> S2 media -> S3 merge ids -> S4 merge users
  -> S5 snip tags -> S6.a .. S6.g edge cleanup -> S6.h tool pairing -> S7 media limits -> final shape
```

`IncrementalNormalizer` gives the same messages for a timeline that grows by appending, redoing only
the open tail each turn (the engine's per-turn path); `run_steps` runs any subset of `STEPS`, so
tests can show the 400 each step prevents.

Invariants:
- `IncrementalNormalizer.messages(entries)` equals `normalize_messages_for_api(entries)`, errors
  included; whenever it cannot prove the frozen head unaffected it normalizes from scratch.
- Nothing is mutated: entries are frozen, and every block a step changes is copied first. Blocks a
  step does not change are passed through as the same objects, so thinking blocks and signatures
  reach the wire byte-exact (A21, A22).
- Text the user typed (non-meta user text) is never dropped; only whitespace-only text is.
- The result starts with a user message, alternates roles, has no empty content and no
  whitespace-only text, pairs every `tool_use` with a `tool_result` at the start of the next message,
  and never ends with an assistant message unless a prefill was asked for.

The package follows those steps: `_base` (messages, options, steps), `_lift`, `_s0_s5`, `_s6_edges`,
`_s7_media`, `_final` (`STEPS`, `run_steps`, `normalize_messages_for_api`) and `_incremental`.
Import from `foldline.api.normalize`; the submodules are private. The step functions
(`s0_filter` .. `s7_check_media`, `final_shape`) stay importable from here too.
"""

from __future__ import annotations

from foldline.api.normalize._base import EMPTY_ASSISTANT_TEXT as EMPTY_ASSISTANT_TEXT
from foldline.api.normalize._base import EMPTY_ERROR_TEXT as EMPTY_ERROR_TEXT
from foldline.api.normalize._base import (
    INTERRUPTED_RESULT_TEXT,
    MediaLimits,
    MessageParam,
    NormalizeOptions,
    NormalizeStep,
)
from foldline.api.normalize._base import LEADING_USER_TEXT as LEADING_USER_TEXT
from foldline.api.normalize._base import Role as Role
from foldline.api.normalize._base import Step as Step
from foldline.api.normalize._final import STEPS, normalize_messages_for_api, run_steps
from foldline.api.normalize._final import final_shape as final_shape
from foldline.api.normalize._incremental import FrozenHead, IncrementalNormalizer
from foldline.api.normalize._s0_s5 import media_types_to_strip as media_types_to_strip
from foldline.api.normalize._s0_s5 import s0_filter as s0_filter
from foldline.api.normalize._s0_s5 import s1_reorder_attachments as s1_reorder_attachments
from foldline.api.normalize._s0_s5 import s2_strip_failed_media as s2_strip_failed_media
from foldline.api.normalize._s0_s5 import s3_merge_assistant_pieces as s3_merge_assistant_pieces
from foldline.api.normalize._s0_s5 import s4_merge_users as s4_merge_users
from foldline.api.normalize._s0_s5 import s5_snip_tags as s5_snip_tags
from foldline.api.normalize._s6_edges import s6a_drop_orphan_thinking as s6a_drop_orphan_thinking
from foldline.api.normalize._s6_edges import s6b_strip_trailing_thinking as s6b_strip_trailing_thinking
from foldline.api.normalize._s6_edges import s6c_drop_whitespace as s6c_drop_whitespace
from foldline.api.normalize._s6_edges import s6d_fill_empty_assistant as s6d_fill_empty_assistant
from foldline.api.normalize._s6_edges import s6e_merge_adjacent as s6e_merge_adjacent
from foldline.api.normalize._s6_edges import s6f_fold_reminders as s6f_fold_reminders
from foldline.api.normalize._s6_edges import s6g_text_only_errors as s6g_text_only_errors
from foldline.api.normalize._s6_edges import s6h_pair_tools as s6h_pair_tools
from foldline.api.normalize._s7_media import s7_check_media as s7_check_media

__all__ = [
    "INTERRUPTED_RESULT_TEXT",
    "STEPS",
    "FrozenHead",
    "IncrementalNormalizer",
    "MediaLimits",
    "MessageParam",
    "NormalizeOptions",
    "NormalizeStep",
    "normalize_messages_for_api",
    "run_steps",
]
