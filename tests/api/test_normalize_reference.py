"""The optimized steps give what their plain definitions give (issue 17: the cold build's hot paths).

S3 keeps the open reply as parts instead of merging piece by piece, and S1, S6.g and S6.h skip work
or keep messages as they are when nothing changes. Each is checked here against a straightforward
version of its definition, on the messy timelines of `tests/api/strategies.py` (replayed pieces,
duplicate tool ids, attachments, errors).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from tests.api.strategies import Generated, messy_timelines

from foldline._types import Block
from foldline.api.normalize import STEPS, NormalizeOptions
from foldline.api.normalize._base import _Msg
from foldline.api.normalize._lift import _lift
from foldline.compact.snip import short_id

_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_BY_NAME = {step.name: step for step in STEPS}


def _identity(block: Block) -> tuple[str, str] | None:
    kind = block.get("type")
    key = {"tool_use": "id", "thinking": "signature", "redacted_thinking": "data"}.get(str(kind))
    return (str(kind), str(block.get(key))) if key else None


def _reference_s3(msgs: list[_Msg]) -> list[_Msg]:
    """S3 as first written: merge each piece into the open reply, skipping blocks it already holds."""
    out: list[_Msg] = []
    open_at: int | None = None
    for m in msgs:
        if m.role != "assistant":
            out.append(m)
            continue
        if open_at is not None and m.msg_id and out[open_at].msg_id == m.msg_id:
            a = out[open_at]
            if not set(m.uuids) <= set(a.uuids):
                known = {_identity(b) for b in a.content} - {None}
                kept = [b for b in m.content if _identity(b) not in known]
                out[open_at] = _Msg(
                    a.role, [*a.content, *kept], a.uuids + m.uuids, a.msg_id, a.is_meta and m.is_meta,
                    None, a.attach_to, a.error_text,
                )  # fmt: skip
            continue
        out.append(m)
        open_at = len(out) - 1
    return out


def _until(name: str, generated: Generated) -> list[_Msg]:
    """The lifted entries after every step before `name`."""
    opts = NormalizeOptions(snip_enabled=True)
    msgs = [_lift(e) for e in generated.entries]
    for step in STEPS[: [s.name for s in STEPS].index(name)]:
        msgs = step.run(msgs, opts)
    return msgs


@dataclass(frozen=True)
class _View:
    """A message's fields, blocks compared by value."""

    role: str
    content: list[Block]
    uuids: tuple[str, ...]
    msg_id: str
    is_meta: bool
    entry_uuid: str | None


def _view(msgs: list[_Msg]) -> list[_View]:
    return [
        _View(m.role, m.content, m.uuids, m.msg_id, m.is_meta, m.entry.uuid if m.entry else None)
        for m in msgs
    ]


@_SETTINGS
@given(messy_timelines(max_actions=20))
def test_s3_matches_piece_by_piece_merging(generated: Generated) -> None:
    msgs = _until("S3", generated)
    got = _BY_NAME["S3"].run(msgs, NormalizeOptions())
    assert _view(got) == _view(_reference_s3(msgs))


@_SETTINGS
@given(messy_timelines(max_actions=20))
def test_unchanged_messages_are_kept_as_the_same_objects_only_when_equal(generated: Generated) -> None:
    # S1, S6.g and S6.h hand a message through untouched when nothing changes; whatever they hand
    # through must be exactly what a rebuild would have produced, so compare against a deep copy.
    for name in ("S1", "S6.g", "S6.h"):
        msgs = _until(name, generated)
        got = _BY_NAME[name].run(msgs, NormalizeOptions())
        rebuilt = _BY_NAME[name].run(
            [m.with_content([dict(b) for b in m.content]) for m in msgs], NormalizeOptions()
        )
        assert _view(got) == _view(rebuilt), name


def _reference_short_id(hex_head: str) -> str:
    value = int(hex_head, 16)
    digits = []
    while value:
        value, rem = divmod(value, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[rem])
    return "".join(reversed(digits)) or "0"


def test_short_id_matches_one_digit_at_a_time_around_every_digit_boundary() -> None:
    values = [36**k + d for k in range(8) for d in (-1, 0, 1)] + [16**10 - 1, 1296 * 1296 - 1]
    for value in values:
        head = f"{value:010x}"
        assert short_id(head + "-5555") == _reference_short_id(head), head
