"""The cost guard, sans-IO: whether a scrape runs a probe, gets the last result, or is refused.

Three limits, each visible as a metric:

- a per-target minimum interval: a scrape of (target, module) sooner than
  ``min_interval_s`` after the last probe of it began gets that probe's result, marked
  cached (so does a scrape that arrives while one is running: it waits for it);
- a cap on probes in flight over every target: past it a scrape is refused (503);
- a token budget per target per UTC day: each probe is charged the most it may spend
  (its token cap plus its probes' declared tokens) when it starts; once a probe would
  go over, scrapes of that target are refused (429) until the day turns.

Time comes in as arguments (``now``: a monotonic clock in seconds, ``day``: the UTC
date); nothing here reads a clock or touches a socket.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

R = TypeVar("R")

Key = tuple[str, str]  # (target, module)


class Action(Enum):
    RUN = "run"  # start a probe
    CACHED = "cached"  # answer with the last result
    JOIN = "join"  # a probe of this pair is running: wait for its result
    OVER_CAPACITY = "over_capacity"  # max_in_flight reached
    OVER_BUDGET = "over_budget"  # the target's daily token budget would be exceeded


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    #: Seconds since the last probe of the pair began (CACHED), else None.
    age_s: float | None = None


@dataclass(slots=True, eq=False)
class _Last(Generic[R]):
    started: float
    result: R | None  # None while it runs


#: A running probe's entry, handed back when it ends (compared by identity).
Ticket = _Last[Any]


class CostGuard(Generic[R]):
    """The guard's state: the last probe of each pair, what is in flight, what was spent."""

    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self._last: dict[Key, _Last[R]] = {}
        self._spent: dict[str, tuple[Hashable, int]] = {}  # target -> (day, tokens)

    def decide(
        self,
        key: Key,
        *,
        now: float,
        day: Hashable,
        min_interval_s: float,
        budget: int,
        cost: int,
    ) -> Decision:
        last = self._last.get(key)
        if last is not None:
            if last.result is None:
                return Decision(Action.JOIN)
            age = now - last.started
            if age < min_interval_s:
                return Decision(Action.CACHED, age_s=age)
        if self.in_flight >= self.max_in_flight:
            return Decision(Action.OVER_CAPACITY)
        if budget and self.spent(key[0], day) + cost > budget:
            return Decision(Action.OVER_BUDGET)
        return Decision(Action.RUN)

    def started(self, key: Key, *, now: float, day: Hashable, cost: int) -> Ticket:
        """A probe of ``key`` began: in flight, and its cost charged to the target's day.
        The ticket it returns is what ``finished`` and ``abandoned`` are handed back."""
        self.in_flight += 1
        ticket: _Last[R] = _Last(started=now, result=None)
        self._last[key] = ticket
        self._spent[key[0]] = (day, self.spent(key[0], day) + cost)
        return ticket

    def finished(self, key: Key, result: R, *, ticket: Ticket) -> bool:
        """The probe of ``ticket`` ended with ``result``: kept for the next scrapes, unless
        a reload dropped the pair meanwhile (False: its result is about a config gone)."""
        self.in_flight -= 1
        if self._last.get(key) is not ticket:
            return False
        ticket.result = result
        return True

    def abandoned(self, key: Key, *, ticket: Ticket) -> None:
        """A probe that ended without a result (cancelled): the next scrape runs one."""
        self.in_flight -= 1
        if self._last.get(key) is ticket:
            del self._last[key]

    def last(self, key: Key) -> R | None:
        entry = self._last.get(key)
        return None if entry is None else entry.result

    def age(self, key: Key, *, now: float) -> float | None:
        """Seconds since the last probe of ``key`` began (None: none yet)."""
        entry = self._last.get(key)
        return None if entry is None else now - entry.started

    def spent(self, target: str, day: Hashable) -> int:
        entry = self._spent.get(target)
        return entry[1] if entry is not None and entry[0] == day else 0

    def left(self, target: str, day: Hashable, budget: int) -> int | None:
        """Tokens left today (None: no budget)."""
        return None if not budget else max(0, budget - self.spent(target, day))

    def forget(self, keep: set[Key]) -> None:
        """After a reload: drop every pair not in ``keep`` (gone, or probing something else
        now), a running one included. Its probe still counts in flight until it ends, but
        its result is not kept, and the next scrape of the pair runs a probe of the new
        config rather than wait for the old one."""
        for key in [k for k in self._last if k not in keep]:
            del self._last[key]


__all__ = ["Action", "CostGuard", "Decision", "Key", "Ticket"]
