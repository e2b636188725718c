"""The rolling band `watch` holds each metric to: median ± k·MAD over the last window.

Pure: values in (one per trace, in the order they were measured), crossings out; no clock.

A value is *out of band* when it lies further from the window's median than the band's
half-width: the larger of ``k`` scaled MADs (1.4826·MAD estimates σ for normal noise, and
the median absolute deviation ignores the outliers a mean would chase), an absolute floor
in the metric's unit, and a share of the median. The floors exist because a quiet metric
has a MAD near zero: on loopback a stage of 0.4 ms with a MAD of 0.02 ms would call a
0.5 ms trace a change that no user could ever feel.

An event is called only when ``hold`` traces in a row (two by default) lie out of band on
the same side: one slow trace is noise (a lost segment, a GC pause, a busy core), two in a
row is a pattern. Once called, the band the metric left is kept: the metric is *back*
when ``hold`` traces in a row lie inside that band again, or it has *settled* at a new
level when it stayed out for a whole window (the window then holds only the new level,
and the band follows it). Every value enters the window, out of band or not: the window
is the metric's recent past, not a filtered one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

#: MAD × this estimates the standard deviation of normally distributed noise.
MAD_TO_SIGMA = 1.4826

Side = Literal[-1, 0, 1]
Change = Literal["above", "below", "back", "settled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BandRule:
    """How wide a band is and how long a value must stay out of it."""

    k: float = 4.0  # scaled MADs either side of the median
    floor: float = 10.0  # the least half-width, in the metric's unit
    share: float = 0.1  # the least half-width as a share of the median
    hold: int = 2  # values out of band in a row before a crossing is called
    min_samples: int = 8  # the window needs this many values before a band exists

    def __post_init__(self) -> None:
        if self.k <= 0 or self.floor < 0 or self.share < 0:
            raise ValueError("a band needs k > 0 and floors >= 0")
        if self.hold < 1 or self.min_samples < 3:
            raise ValueError("a band needs hold >= 1 and min_samples >= 3")


@dataclass(frozen=True, slots=True, kw_only=True)
class Band:
    """One window's band: its median, its MAD, and the edges."""

    median: float
    mad: float
    low: float
    high: float

    def side(self, value: float) -> Side:
        """-1 below the band, 1 above it, 0 inside (the edges are inside)."""
        if value > self.high:
            return 1
        if value < self.low:
            return -1
        return 0


def _median(ordered: Sequence[float]) -> float:
    n = len(ordered)
    mid = n // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def band_of(values: Iterable[float], rule: BandRule) -> Band | None:
    """The band of these values (None: fewer than ``rule.min_samples``)."""
    ordered = sorted(values)
    if len(ordered) < rule.min_samples:
        return None
    median = _median(ordered)
    mad = _median(sorted(abs(v - median) for v in ordered))
    half = max(rule.k * MAD_TO_SIGMA * mad, rule.floor, rule.share * abs(median))
    return Band(median=median, mad=mad, low=median - half, high=median + half)


@dataclass(frozen=True, slots=True, kw_only=True)
class Crossing:
    """A change called on one metric: which way, the value that made it, the band."""

    change: Change
    value: float
    band: Band  # the band it left (above/below/back), or the new one (settled)
    #: The values in a row that made the call (the last of them is ``value``).
    held: tuple[float, ...]


class BandTracker:
    """One metric's window and state; ``feed`` each value as it is measured.

    Memory is bounded by the window: a deque of at most ``window`` floats and, while a
    change is held, at most ``rule.hold`` more."""

    def __init__(self, rule: BandRule | None = None, *, window: int = 30) -> None:
        self.rule = rule or BandRule()
        if window < self.rule.min_samples:
            raise ValueError(f"a window of {window} is shorter than min_samples")
        self.window = window
        self._values: deque[float] = deque(maxlen=window)
        self._state: Side = 0
        self._left: Band | None = None  # the band the metric left, while out
        self._out_for = 0  # values since the crossing was called
        self._run: list[float] = []  # values in a row on the pending side
        self._pending: Side = 0

    @property
    def state(self) -> Side:
        """-1 or 1 while a called change holds, else 0."""
        return self._state

    @property
    def values(self) -> Sequence[float]:
        return self._values

    def band(self) -> Band | None:
        """The band a new value is judged against now."""
        if self._left is not None:
            return self._left
        return band_of(self._values, self.rule)

    def reset(self) -> None:
        self._values.clear()
        self._state, self._left, self._out_for = 0, None, 0
        self._run, self._pending = [], 0

    def feed(self, value: float) -> Crossing | None:
        """Judge ``value`` against the band, then add it to the window."""
        try:
            return self._judge(value)
        finally:
            self._values.append(value)

    def _judge(self, value: float) -> Crossing | None:
        band = self.band()
        if band is None:
            return None
        side = band.side(value)
        if self._state != 0:
            self._out_for += 1
        if side == self._state:
            self._run, self._pending = [], 0
            if self._state != 0 and self._out_for >= self.window:
                return self._settle(value)
            return None
        if side != self._pending:
            self._run, self._pending = [], side
        self._run.append(value)
        if len(self._run) < self.rule.hold:
            if self._state != 0 and self._out_for >= self.window:
                return self._settle(value)
            return None
        held = tuple(self._run)
        self._run, self._pending = [], 0
        if side == 0:  # back inside the band it left
            self._state, self._left, self._out_for = 0, None, 0
            return Crossing(change="back", value=value, band=band, held=held)
        self._state, self._left, self._out_for = side, band, 0
        return Crossing(change="above" if side > 0 else "below", value=value, band=band, held=held)

    def _settle(self, value: float) -> Crossing | None:
        # Out for a whole window: the window now holds the new level, and so does the band.
        self._state, self._left, self._out_for = 0, None, 0
        self._run, self._pending = [], 0
        band = band_of([*self._values, value], self.rule)
        if band is None:
            return None
        return Crossing(change="settled", value=value, band=band, held=(value,))


__all__ = [
    "MAD_TO_SIGMA",
    "Band",
    "BandRule",
    "BandTracker",
    "Change",
    "Crossing",
    "band_of",
]
