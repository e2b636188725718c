"""One metric judged from percentiles alone: what a place compared with other places gets
when a store (Prometheus) kept each one's p50 and p95 over a range, not its runs. Pure.

The rank test of samples.py needs the runs; here the same two conditions take the form
percentiles allow:

- **beyond noise**: the place's median is above the *others'* 95th percentile (the median
  of their p95s): its typical run is slower than nearly every run elsewhere. A place whose
  runs overlap the others' spread is not called, however its median sits.
- **beyond the practical floor**: its median exceeds the others' (the median of their
  p50s) by more than the metric's floor (metrics.py), so a difference no one would act on
  is not news.

Only slower counts: the metrics judged this way are times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

from promptpath.core.change.metrics import metric


@dataclass(frozen=True, slots=True, kw_only=True)
class QuantileCall:
    """One metric of one place, slower than the others beyond their spread and the floor."""

    name: str
    p50_ms: float
    others_p50_ms: float
    others_p95_ms: float
    floor_ms: float

    @property
    def excess_ms(self) -> float:
        return self.p50_ms - self.others_p50_ms


def floor_of(name: str, reference_ms: float) -> float | None:
    """The practical floor of metric ``name`` at ``reference_ms`` (None: not in the table)."""
    try:
        return metric(name).floor(reference_ms)
    except KeyError:
        return None


def judge_quantiles(
    name: str,
    p50_ms: float,
    others_p50_ms: Sequence[float],
    others_p95_ms: Sequence[float],
    floor_ms: float | None = None,
) -> QuantileCall | None:
    """A call when ``p50_ms`` is above the others' median p95 and beyond the floor (the
    metric table's unless ``floor_ms`` is given); None when not (or nothing to judge by)."""
    if not others_p50_ms or not others_p95_ms:
        return None
    ref_p50, ref_p95 = median(others_p50_ms), median(others_p95_ms)
    practical = floor_of(name, ref_p50) if floor_ms is None else floor_ms
    if practical is None or not (p50_ms > ref_p95 and p50_ms - ref_p50 > practical):
        return None
    return QuantileCall(
        name=name,
        p50_ms=p50_ms,
        others_p50_ms=ref_p50,
        others_p95_ms=ref_p95,
        floor_ms=practical,
    )


__all__ = ["QuantileCall", "floor_of", "judge_quantiles"]
