"""Pure statistics over stamps and intervals: percentiles, bursts, terminal sparklines.

No clock, no I/O, no numpy: inputs are plain sequences of numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

__all__ = [
    "Burst",
    "Summary",
    "find_bursts",
    "histogram",
    "intervals_ms",
    "percentile",
    "sparkline",
    "summarize",
]

_BLOCKS = "▁▂▃▄▅▆▇█"


def _percentile_sorted(ordered: Sequence[float], q: float) -> float:
    rank = (len(ordered) - 1) * q / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(ordered) - 1)
    frac = rank - lo
    low = float(ordered[lo])
    return low if frac == 0 else low + (float(ordered[hi]) - low) * frac


def _nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The smallest observed value with at least q % of the values at or below it."""
    k = max(1, math.ceil(q / 100.0 * len(ordered)))
    return float(ordered[k - 1])


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-th percentile as an observed value (numpy's ``method="inverted_cdf"``).

    What we report for latencies: with a few dozen gaps, interpolation makes up a p99
    that no gap had (7027 ms between a 10 s pause and 20 ms gaps)."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within [0, 100], got {q}")
    return _nearest_rank(sorted(values), q)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), interpolating linearly between closest ranks.

    Same as numpy's default ``method="linear"``.
    """
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within [0, 100], got {q}")
    return _percentile_sorted(sorted(values), q)


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """Distribution of one series (e.g. inter-chunk gaps in ms)."""

    count: int
    min: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    mean: float


def summarize(values: Sequence[float]) -> Summary | None:
    """Count, extremes, mean and the usual percentiles (nearest rank: each one is a value
    that was observed); ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return Summary(
        count=len(ordered),
        min=float(ordered[0]),
        p50=_nearest_rank(ordered, 50),
        p90=_nearest_rank(ordered, 90),
        p95=_nearest_rank(ordered, 95),
        p99=_nearest_rank(ordered, 99),
        max=float(ordered[-1]),
        mean=math.fsum(ordered) / len(ordered),
    )


def intervals_ms(stamps_ns: Sequence[int]) -> list[float]:
    """Differences between consecutive stamps, in milliseconds."""
    return [(b - a) / 1e6 for a, b in pairwise(stamps_ns)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Burst:
    """Arrivals with no silence of ``silence_ns`` or more between them."""

    start_ns: int  # first arrival
    end_ns: int  # last arrival
    nbytes: int
    nreads: int
    nevents: int  # events stamped within [start_ns, end_ns] (0 when none were given)

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def find_bursts(
    stamps_ns: Sequence[int],
    sizes: Sequence[int],
    *,
    silence_ns: int,
    events_ns: Sequence[int] = (),
) -> list[Burst]:
    """Group reads (``stamps_ns[i]`` carrying ``sizes[i]`` bytes) into bursts.

    A read joins the current burst when it arrived less than ``silence_ns`` after the
    previous read.  ``events_ns`` (event stamps, optional) are counted per burst:
    a smooth stream is many one-read bursts; a buffering proxy makes a few big ones.
    """
    if len(stamps_ns) != len(sizes):
        raise ValueError(f"{len(stamps_ns)} stamps but {len(sizes)} sizes")
    if silence_ns <= 0:
        raise ValueError(f"silence_ns must be positive, got {silence_ns}")
    reads = sorted(zip(stamps_ns, sizes, strict=True), key=lambda r: r[0])
    groups: list[list[tuple[int, int]]] = []
    for stamp, size in reads:
        if groups and stamp - groups[-1][-1][0] < silence_ns:
            groups[-1].append((stamp, size))
        else:
            groups.append([(stamp, size)])
    events = sorted(events_ns)
    bursts: list[Burst] = []
    cursor = 0
    for group in groups:
        start, end = group[0][0], group[-1][0]
        while cursor < len(events) and events[cursor] < start:
            cursor += 1
        first = cursor
        while cursor < len(events) and events[cursor] <= end:
            cursor += 1
        bursts.append(
            Burst(
                start_ns=start,
                end_ns=end,
                nbytes=sum(size for _, size in group),
                nreads=len(group),
                nevents=cursor - first,
            )
        )
    return bursts


def sparkline(values: Sequence[float], width: int) -> str:
    """Unicode block sparkline at most ``width`` characters wide.

    With more values than columns, each column shows the largest value it covers, so a
    single long stall stays visible.  The scale starts at 0 (or the minimum, if
    negative): equal positive gaps draw as full bars, not as an arbitrary middle.
    """
    if width <= 0 or not values:
        return ""
    n = len(values)
    if n <= width:
        columns = [float(v) for v in values]
    else:
        # n > width, so every column covers at least one value.
        columns = [float(max(values[i * n // width : (i + 1) * n // width])) for i in range(width)]
    lo = min(0.0, *columns)
    hi = max(columns)
    if hi <= lo:
        return _BLOCKS[0] * len(columns)
    top = len(_BLOCKS) - 1
    return "".join(_BLOCKS[round((v - lo) / (hi - lo) * top)] for v in columns)


def histogram(values: Sequence[float], bins: int) -> list[tuple[float, float, int]]:
    """``bins`` equal-width ``(low, high, count)`` bins from min to max.

    Like numpy: every bin is half-open except the last, which includes the maximum;
    when all values are equal the range is widened by 0.5 on both sides.
    """
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    if not values:
        return []
    lo = float(min(values))
    hi = float(max(values))
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    span = hi - lo
    step = span / bins  # may underflow to 0 for a subnormal span: never divide by it
    edges = [lo + i * step for i in range(bins)] + [hi]
    counts = [0] * bins
    for v in values:
        i = min(int((v - lo) / span * bins), bins - 1)
        # Float rounding can put a value on the wrong side of an edge; trust the edges.
        while i > 0 and v < edges[i]:
            i -= 1
        while i < bins - 1 and v >= edges[i + 1]:
            i += 1
        counts[i] += 1
    return [(edges[i], edges[i + 1], counts[i]) for i in range(bins)]
