"""Fault injection for reliability tests (R8.5): what goes wrong, and on which request.

Grammar of `--faults` (also `parse_faults`), documented in docs/server.md:

```
SPEC    := ITEM ("," ITEM)*
ITEM    := "seed=" INT | TRIGGER ":" FAULT
TRIGGER := N | N "-" M | P "%"            request number(s), 1-based, or a seeded rate
FAULT   := "429" ["/" SECONDS] | "529" | "500"
         | "cut/" EVENTS | "error/" EVENTS | "stall/" SECONDS ["/" EVENTS]
```

Examples: `1:529` (first request overloaded), `2-3:429/0.5` (rate limited, `retry-after: 0.5`),
`4:cut/5` (stream closed after 5 events), `5:error/3` (an `overloaded_error` event after 3 events,
inside a 200 stream), `6:stall/2` (2 s before the first byte), `7:stall/2/4` (2 s after 4 events),
`10%:500,seed=7` (each request has a 10 % chance, decided by a hash of seed and request number).

Invariants: request numbers count every authenticated `/v1/messages` request the server receives (retries
included; count_tokens is not counted); the first rule that fires wins; the same spec, seed and request
number always give the same decision, whatever order requests arrive in.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from foldline.errors import UserError

__all__ = ["Fault", "FaultPlan", "FaultRule", "parse_faults"]

FaultKind = Literal["429", "529", "500", "cut", "error", "stall"]


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One injected failure."""

    kind: FaultKind
    retry_after: float = 1.0
    """For 429: the `retry-after` header, in seconds."""
    after_events: int = 0
    """For cut / error / mid-stream stall: how many SSE events go out first."""
    seconds: float = 0.0
    """For stall: how long."""


@dataclass(frozen=True, kw_only=True)
class FaultRule:
    """A fault and when it fires: on the listed request numbers, or at a rate."""

    fault: Fault
    requests: frozenset[int] = frozenset()
    rate: float = 0.0


@dataclass(frozen=True, kw_only=True)
class FaultPlan:
    """The faults of one server launch."""

    rules: tuple[FaultRule, ...] = ()
    seed: int = 0

    def for_request(self, number: int) -> Fault | None:
        """The fault for the `number`-th request (1-based), or None."""
        for i, rule in enumerate(self.rules):
            if number in rule.requests:
                return rule.fault
            if rule.rate and random.Random(f"{self.seed}:{i}:{number}").random() < rule.rate:
                return rule.fault
        return None


def _number(text: str, what: str, item: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"--faults {item!r}: {what} must be a number, got {text!r}") from None
    if value < 0:
        raise UserError(f"--faults {item!r}: {what} must not be negative")
    return value


def _count(text: str, what: str, item: str) -> int:
    if not text.isdigit():
        raise UserError(f"--faults {item!r}: {what} must be a whole number, got {text!r}")
    return int(text)


def _parse_fault(text: str, item: str) -> Fault:
    kind, *args = text.split("/")
    if kind in ("529", "500") and not args:
        return Fault(kind=kind)  # type: ignore[arg-type]
    if kind == "429" and len(args) <= 1:
        return Fault(kind="429", retry_after=_number(args[0], "retry-after", item) if args else 1.0)
    if kind in ("cut", "error") and len(args) == 1:
        return Fault(kind=kind, after_events=_count(args[0], "event count", item))  # type: ignore[arg-type]
    if kind == "stall" and len(args) in (1, 2):
        after = _count(args[1], "event count", item) if len(args) == 2 else 0
        return Fault(kind="stall", seconds=_number(args[0], "stall seconds", item), after_events=after)
    raise UserError(
        f"--faults {item!r}: unknown fault {text!r}; expected 429[/S], 529, 500, cut/N, error/N, stall/S[/N]"
    )


def _parse_trigger(text: str, item: str) -> tuple[frozenset[int], float]:
    if text.endswith("%"):
        rate = _number(text[:-1], "rate", item) / 100
        if rate > 1:
            raise UserError(f"--faults {item!r}: a rate is at most 100%")
        return frozenset(), rate
    first, _, last = text.partition("-")
    lo = _count(first, "request number", item)
    hi = _count(last, "request number", item) if last else lo
    if lo < 1 or hi < lo:
        raise UserError(f"--faults {item!r}: request numbers start at 1 and ranges go up")
    return frozenset(range(lo, hi + 1)), 0.0


def parse_faults(spec: str) -> FaultPlan:
    """Parse a `--faults` spec (grammar in the module docstring); raises `UserError` when malformed."""
    rules: list[FaultRule] = []
    seed = 0
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        if item.startswith("seed="):
            seed = _count(item[5:], "seed", item)
            continue
        trigger, sep, fault = item.partition(":")
        if not sep:
            raise UserError(f"--faults {item!r}: expected TRIGGER:FAULT, e.g. 1:529 or 10%:500")
        requests, rate = _parse_trigger(trigger.strip(), item)
        rules.append(FaultRule(fault=_parse_fault(fault.strip(), item), requests=requests, rate=rate))
    return FaultPlan(rules=tuple(rules), seed=seed)
