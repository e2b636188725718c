"""A watch history (CONTRACTS.md §2) read as samples: its lines parsed, and the runs of a
time range picked out. Pure: text in, run objects out.

Time ranges are ``HH:MM-HH:MM`` in **UTC**, the zone of the history's ``at`` stamps, so a
range means the same thing on every machine that reads the file. A range selects the
traces whose time of day lies in [start, end) on every day the history covers; an end
before the start wraps past midnight (``22:00-02:00``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["HISTORY_SCHEMA", "History", "TimeRange", "parse_history", "parse_range"]

HISTORY_SCHEMA = "promptpath.watch/1"
_RANGE = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeRange:
    """A time-of-day range in UTC minutes since midnight, [start, end)."""

    text: str
    start: int
    end: int

    def holds(self, minute: int) -> bool:
        if self.start <= self.end:
            return self.start <= minute < self.end
        return minute >= self.start or minute < self.end  # wraps past midnight


def parse_range(text: str) -> TimeRange:
    """``HH:MM-HH:MM`` (UTC); ValueError naming the expected form otherwise."""
    match = _RANGE.match(text.strip())
    if match is None:
        raise ValueError(f"time range {text!r} is not HH:MM-HH:MM (UTC, 24-hour)")
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if start == end:
        raise ValueError(f"time range {text!r} is empty")
    return TimeRange(text=text.strip(), start=start, end=end)


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    """A history's lines: each trace's UTC minute of day and its run object."""

    lines: tuple[tuple[int, Mapping[str, Any]], ...]
    #: A last line cut short (a crash mid-write): skipped, and said.
    truncated_tail: bool = False

    def runs(self, within: TimeRange | None = None) -> list[Mapping[str, Any]]:
        return [run for minute, run in self.lines if within is None or within.holds(minute)]


def _minute(stamp: object) -> int:
    if not isinstance(stamp, str):
        raise ValueError("its 'at' is not a string")
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if when.utcoffset() is None:
        raise ValueError(f"its 'at' {stamp[:40]!r} names no time zone")
    offset = when.utcoffset()
    utc = when - offset if offset is not None else when
    return utc.hour * 60 + utc.minute


def parse_history(lines: Sequence[str]) -> History:
    """Parse JSON Lines of ``promptpath.watch/1`` objects; ValueError naming the first bad
    line. A last line that is not JSON is a write cut short and is skipped."""
    out: list[tuple[int, Mapping[str, Any]]] = []
    truncated = False
    numbered = [(i, line) for i, line in enumerate(lines, 1) if line.strip()]
    for index, (number, line) in enumerate(numbered):
        try:
            item = json.loads(line)
        except ValueError:
            if index == len(numbered) - 1:
                truncated = True
                break
            raise ValueError(f"line {number} is not JSON") from None
        if not isinstance(item, Mapping) or item.get("schema") != HISTORY_SCHEMA:
            raise ValueError(f"line {number} is not a {HISTORY_SCHEMA} object")
        run = item.get("run")
        if not isinstance(run, Mapping):
            raise ValueError(f"line {number} has no run object")
        try:
            minute = _minute(item.get("at"))
        except ValueError as exc:
            raise ValueError(f"line {number}: {exc}") from None
        out.append((minute, run))
    return History(lines=tuple(out), truncated_tail=truncated)
