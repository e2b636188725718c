"""Pure statistics over stamps and intervals: percentiles, summaries, terminal sparklines.

No clock, no I/O, no numpy: inputs are plain sequences of numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

__all__ = [
    "Summary",
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
    """The smallest observed value with at least q % of the values at or below it
    (numpy's ``method="inverted_cdf"``).

    What we report for latencies: with a few dozen gaps, interpolation makes up a p99
    that no gap had (7027 ms between a 10 s pause and 20 ms gaps)."""
    k = max(1, math.ceil(q / 100.0 * len(ordered)))
    return float(ordered[k - 1])


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
