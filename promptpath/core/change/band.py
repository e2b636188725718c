"""The rolling band `watch` holds each metric to: median ± k·MAD over the last window.

Pure: values in (one per trace, in the order they were measured), crossings out; no clock.

A value is *out of band* when it lies further from the window's median than the band's
half-width: the larger of ``k`` times the window's robust σ, an absolute floor in the
metric's unit, and a share of the median. The robust σ is 1.4826·MAD (the median absolute
deviation ignores the outliers a mean would chase; × 1.4826 it estimates σ for normal
noise), or the spread of the window's middle 80 % ((p90 − p10) / 2.563, σ for normal
noise too) when that is larger: a bimodal metric collapses the MAD. Measured on this
machine under load: a loopback connect of 0.1 ms half the time and 5-12 ms the other half
(the client's event loop waiting for the CPU) has a MAD of ~0.3 ms, and a band of
median ± 4 MADs called two slow connects in a row a change in 3 of 20 steady runs of 100
traces. The floors exist because a quiet metric has a spread near zero: on loopback a
stage of 0.4 ms with a MAD of 0.02 ms would call a 0.5 ms trace a change that no user
could ever feel.

Only the worse side may be asked for (``BandRule.worse``): a time that drops or a
throughput that rises is good news, and on a loaded client it is also the side the
noise reaches (four tokens read in one go read as 20,000 tokens/s).

An event is called only when ``hold`` traces in a row (two by default) lie out of band on
the same side: one slow trace is noise (a lost segment, a GC pause, a busy core), two in a
row is a pattern. Once called, the band the metric left is kept: the metric is *back*
when ``hold`` traces in a row lie inside that band again, or it has *settled* at a new
level when it stayed out for a whole window (the window then holds only the new level,
and the band follows it). Every value enters the window, out of band or not: the window
is the metric's recent past, not a filtered one.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

#: MAD × this estimates the standard deviation of normally distributed noise.
MAD_TO_SIGMA = 1.4826
#: p90 − p10 of normally distributed noise, in standard deviations.
P10_P90_SIGMAS = 2.5631

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
    #: 1: only leaving above the band is a change (a time: higher is worse); -1: only below
    #: (a throughput); 0: both. A stage that gets faster is good news, not an event.
    worse: Side = 0

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
    sigma: float  # the robust σ the half-width is k of (when no floor is wider)
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


def _rank(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile by nearest rank."""
    return ordered[max(1, math.ceil(q / 100.0 * len(ordered))) - 1]


def band_of(values: Iterable[float], rule: BandRule) -> Band | None:
    """The band of these values (None: fewer than ``rule.min_samples``)."""
    ordered = sorted(values)
    if len(ordered) < rule.min_samples:
        return None
    median = _median(ordered)
    mad = _median(sorted(abs(v - median) for v in ordered))
    sigma = max(MAD_TO_SIGMA * mad, (_rank(ordered, 90) - _rank(ordered, 10)) / P10_P90_SIGMAS)
    half = max(rule.k * sigma, rule.floor, rule.share * abs(median))
    return Band(median=median, mad=mad, sigma=sigma, low=median - half, high=median + half)


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
        #: The band the pending run's first value left: the run's later values are judged
        #: against it, not against a window their own first value already widened.
        self._run_band: Band | None = None

    @property
    def state(self) -> Side:
        """-1 or 1 while a called change holds, else 0."""
        return self._state

    @property
    def values(self) -> Sequence[float]:
        return self._values

    def band(self) -> Band | None:
        """The band a new value is judged against now: the one the metric left while a
        change holds, the one the first value of a pending run left, else the window's."""
        if self._left is not None:
            return self._left
        if self._run_band is not None:
            return self._run_band
        return band_of(self._values, self.rule)

    def reset(self) -> None:
        self._values.clear()
        self._state, self._left, self._out_for = 0, None, 0
        self._run, self._pending, self._run_band = [], 0, None

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
        if self.rule.worse and side == -self.rule.worse:
            side = 0  # the better side counts as inside
        if self._state != 0:
            self._out_for += 1
        if side == self._state:
            self._run, self._pending, self._run_band = [], 0, None
            if self._state != 0 and self._out_for >= self.window:
                return self._settle(value)
            return None
        if side != self._pending:
            self._run, self._pending, self._run_band = [], side, band
        self._run.append(value)
        if len(self._run) < self.rule.hold:
            if self._state != 0 and self._out_for >= self.window:
                return self._settle(value)
            return None
        held = tuple(self._run)
        self._run, self._pending, self._run_band = [], 0, None
        if side == 0:  # back inside the band it left
            self._state, self._left, self._out_for = 0, None, 0
            return Crossing(change="back", value=value, band=band, held=held)
        self._state, self._left, self._out_for = side, band, 0
        return Crossing(change="above" if side > 0 else "below", value=value, band=band, held=held)

    def _settle(self, value: float) -> Crossing | None:
        # Out for a whole window: the window now holds the new level, and so does the band.
        self._state, self._left, self._out_for = 0, None, 0
        self._run, self._pending, self._run_band = [], 0, None
        band = band_of([*self._values, value], self.rule)
        if band is None:
            return None
        return Crossing(change="settled", value=value, band=band, held=(value,))


__all__ = [
    "MAD_TO_SIGMA",
    "P10_P90_SIGMAS",
    "Band",
    "BandRule",
    "BandTracker",
    "Change",
    "Crossing",
    "band_of",
]
