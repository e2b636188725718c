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
from typing import Generic, TypeVar

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


@dataclass(slots=True)
class _Last(Generic[R]):
    started: float
    result: R | None  # None while it runs


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

    def started(self, key: Key, *, now: float, day: Hashable, cost: int) -> None:
        """A probe of ``key`` began: in flight, and its cost charged to the target's day."""
        self.in_flight += 1
        self._last[key] = _Last(started=now, result=None)
        self._spent[key[0]] = (day, self.spent(key[0], day) + cost)

    def finished(self, key: Key, result: R, *, started: float) -> None:
        self.in_flight -= 1
        self._last[key] = _Last(started=started, result=result)

    def abandoned(self, key: Key) -> None:
        """A probe that ended without a result (cancelled): the next scrape runs one."""
        self.in_flight -= 1
        self._last.pop(key, None)

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
        """After a reload: drop the pairs the new config no longer has (not one in flight)."""
        for key in [k for k, v in self._last.items() if k not in keep and v.result is not None]:
            del self._last[key]


__all__ = ["Action", "CostGuard", "Decision", "Key"]
