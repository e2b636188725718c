"""Has a metric changed between two samples of runs, beyond its own noise? Pure.

How a change is called (``judge_many``; ``judge`` is one metric of it):

- **Repeats on both sides** (at least ``MIN_REPEATS`` each, and enough that the rank test
  can reach the confidence at all, see ``repeats_to_settle``): the two-sided Mann–Whitney
  rank test (ranks.py) says the sides differ, *and* the difference of the medians exceeds
  the metric's practical floor (metrics.py). The confidence is ``CONFIDENCE`` (99 %) for
  the whole diff, not per metric: a diff judges ~20 metrics at once, and at 95 % each an
  unchanged path would show at least one false change in 1 − 0.95²⁰ ≈ 64 % of diffs. Holm's
  step-down correction over the metrics tested keeps the chance of any false call ≤ 1 %
  (and is never weaker than Bonferroni). The interval of the median difference
  (Bonett–Price, ranks.py) is reported at the same confidence, beside the p-value.
- **Three** is the least a side may have for its spread to count: with fewer, a median is
  one or two values. Three is not enough for the rank test to answer at 99 % (its smallest
  p-value with 3 against 3 is 0.1; with ~20 metrics tested Holm's strictest step needs 8 a
  side, ``repeats_to_settle``).
- **Too few repeats for the test** (method ``few``): only a large change is called — beyond
  the wider single-run floor (metrics.py) *and* beyond both sides' ranges added together
  (the two sides apart with a gap wider than their own noise); the reason says how many
  runs a side would settle it.
- **One run against a series** (``spread``): the single value against the series' spread:
  called when it lies outside the series' whole range *and* further from the series'
  median than both the single-run floor and the range's width (one run is one sample of
  the after path: only a large change shows).
- **Single runs** (``single``): only the wider single-run floor; the reason says that
  single runs can only show large changes and how many runs a side would settle it.

Identical inputs never show a change: their median difference is 0, below every floor,
and their rank test gives p = 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from promptpath.core.change.metrics import Metric, metric
from promptpath.core.change.ranks import (
    fisher_exact,
    mann_whitney,
    median,
    median_difference_ci,
    smallest_p,
)

__all__ = [
    "ALPHA",
    "CONFIDENCE",
    "MIN_REPEATS",
    "MetricChange",
    "Verdict",
    "judge",
    "judge_errors",
    "judge_many",
    "not_judged",
    "repeats_to_settle",
]

#: Family-wise confidence of one diff (see the module docstring for why 99 %).
CONFIDENCE = 0.99
ALPHA = 1.0 - CONFIDENCE
#: Runs a side needs before its spread counts (see the module docstring).
MIN_REPEATS = 3
#: One run against a series: how far from the series' median, in robust standard
#: deviations (MAD × 1.4826, the normal's), a run must lie to be called (with the floor
#: and the range's width; see the module docstring).
SPREAD_MADS = 5.0
MAD_TO_SD = 1.4826
#: Error rate: a change smaller than 5 points is not called (one failure in 20 runs).
ERROR_RATE_FLOOR = 0.05

Verdict = Literal["regressed", "improved", "unchanged", "unknown"]
Method = Literal["rank", "few", "spread", "single", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricChange:
    """One metric judged between a before and an after sample."""

    name: str
    label: str
    unit: str
    n_before: int
    n_after: int
    #: Medians of each side (a single run: its value); None when a side has no value.
    before_p50: float | None
    after_p50: float | None
    #: after_p50 − before_p50.
    delta: float | None
    #: Interval of the median difference at ``CONFIDENCE`` (rank method only).
    delta_ci: tuple[float, float] | None
    #: Two-sided Mann–Whitney p-value, and Holm-adjusted over the diff (rank method only).
    p_value: float | None
    p_adjusted: float | None
    #: rank: the rank test and the floor; few: too few repeats for the test, the wider
    #: floor and both sides' spread; spread: one run against a series' range; single: one
    #: run a side, the wider floor only; none: nothing to compare.
    method: Method
    floor: float | None
    verdict: Verdict
    #: Why, in one sentence a network engineer can act on.
    reason: str
    higher_is_worse: bool = True
    #: The rank test called the sides different (Holm-adjusted p below α), whatever the
    #: floor said; None when no rank test judged it.
    significant: bool | None = None

    @property
    def changed(self) -> bool:
        return self.verdict in ("regressed", "improved")


def repeats_to_settle(tests: int = 1, alpha: float = ALPHA) -> int:
    """Runs a side needs before the rank test can call a change among ``tests`` metrics:
    the least n with n against n able to give a p-value below alpha / tests (the strictest
    step of Holm's correction)."""
    n = MIN_REPEATS
    while smallest_p(n, n) >= alpha / max(1, tests):
        n += 1
    return n


def _fmt(value: float, unit: str) -> str:
    return f"{value:.3f} {unit}" if unit == "share" else f"{value:.1f} {unit}"


def _direction(item: Metric, delta: float) -> Verdict:
    worse = delta > 0 if item.higher_is_worse else delta < 0
    return "regressed" if worse else "improved"


def _method(n_before: int, n_after: int, tests: int, alpha: float) -> Method:
    if n_before == 0 or n_after == 0:
        return "none"
    if n_before >= MIN_REPEATS and n_after >= MIN_REPEATS:
        if smallest_p(n_before, n_after) < alpha / max(1, tests):
            return "rank"
        return "few"
    if min(n_before, n_after) == 1 and max(n_before, n_after) >= MIN_REPEATS:
        return "spread"
    return "single" if max(n_before, n_after) == 1 else "few"


def _unknown(item: Metric, before: Sequence[float], after: Sequence[float]) -> MetricChange:
    side = "before" if not before else "after"
    if not before and not after:
        side = "either side"
    return MetricChange(
        name=item.name,
        label=item.label,
        unit=item.unit,
        n_before=len(before),
        n_after=len(after),
        before_p50=median(before) if before else None,
        after_p50=median(after) if after else None,
        delta=None,
        delta_ci=None,
        p_value=None,
        p_adjusted=None,
        method="none",
        floor=None,
        verdict="unknown",
        reason=f"no value {'in ' if side != 'either side' else 'on '}{side} "
        "(absent from the document, or every run failed)",
        higher_is_worse=item.higher_is_worse,
    )


def not_judged(
    name: str, before: Sequence[float], after: Sequence[float], reason: str
) -> MetricChange:
    """A metric left unjudged (verdict ``unknown``) for ``reason``, its medians shown."""
    item = metric(name)
    return replace(_unknown(item, before, after), reason=reason)


def _first_pass(
    item: Metric, before: Sequence[float], after: Sequence[float], tests: int, alpha: float
) -> MetricChange:
    method = _method(len(before), len(after), tests, alpha)
    if method == "none":
        return _unknown(item, before, after)
    b50, a50 = median(before), median(after)
    delta = a50 - b50
    base = MetricChange(
        name=item.name,
        label=item.label,
        unit=item.unit,
        n_before=len(before),
        n_after=len(after),
        before_p50=b50,
        after_p50=a50,
        delta=delta,
        delta_ci=None,
        p_value=None,
        p_adjusted=None,
        method=method,
        floor=None,
        verdict="unchanged",
        reason="",
        higher_is_worse=item.higher_is_worse,
    )
    if method == "rank":
        test = mann_whitney(before, after)
        ci = median_difference_ci(before, after, 1.0 - alpha)
        return replace(base, p_value=test.p_value, delta_ci=ci, floor=item.floor(b50))
    if method == "spread":
        return _spread(item, base, before, after)
    return _few(item, base, before, after, tests, alpha)


def _spread(
    item: Metric, base: MetricChange, before: Sequence[float], after: Sequence[float]
) -> MetricChange:
    series, single, side = (
        (before, after[0], "after") if len(after) == 1 else (after, before[0], "before")
    )
    centre = median(series)
    lo, hi = min(series), max(series)
    # One run has no spread of its own, and no rank test over one run can reach 99 % for a
    # whole diff before the series is ~2,000 long (its smallest p is 1/(n + 1)): so only a
    # large change is called, beyond the wider single-run floor *and* a whole width of the
    # series from its median (a run from a series' own tail lies outside its range 2 in
    # n + 1 times, but rarely that far out).
    mad = median([abs(v - centre) for v in series])
    floor = max(item.single_floor(centre), hi - lo, SPREAD_MADS * MAD_TO_SD * mad)
    outside = single < lo or single > hi
    beyond = abs(single - centre) > floor
    # delta stays after − before: the single run's side decides the sign.
    delta = single - centre if side == "after" else centre - single
    where = (
        f"the {side} run's {_fmt(single, item.unit)} against {len(series)} runs "
        f"({_fmt(lo, item.unit)}–{_fmt(hi, item.unit)})"
    )
    if outside and beyond:
        verdict = _direction(item, delta)
        reason = f"{where}: outside their range, and beyond {_fmt(floor, item.unit)} of its median"
    elif not outside:
        verdict, reason = "unchanged", f"{where}: within their range"
    else:
        verdict = "unchanged"
        reason = (
            f"{where}: outside their range but within {_fmt(floor, item.unit)} of its "
            "median (the floor or the range's width)"
        )
    return replace(base, delta=delta, floor=floor, verdict=verdict, reason=reason)


def _few(
    item: Metric,
    base: MetricChange,
    before: Sequence[float],
    after: Sequence[float],
    tests: int,
    alpha: float,
) -> MetricChange:
    b50, delta = base.before_p50 or 0.0, base.delta or 0.0
    # Seen spread, when a side has more than one run: the medians must differ by more than
    # both sides' ranges together (the sides apart, with a gap wider than their noise).
    spread = (max(before) - min(before)) + (max(after) - min(after))
    floor = max(item.single_floor(b50), spread)
    need = repeats_to_settle(tests, alpha)
    few = (
        "single runs"
        if base.n_before == 1 and base.n_after == 1
        else f"{base.n_before} vs {base.n_after} runs"
    )
    settle = f"{need} runs a side would settle it"
    if abs(delta) > floor:
        verdict = _direction(item, delta)
        reason = (
            f"{few}: beyond the large-change floor {_fmt(floor, item.unit)} "
            f"(only large changes show; {settle})"
        )
    else:
        verdict = "unchanged"
        reason = (
            f"{few}: within the large-change floor {_fmt(floor, item.unit)}; "
            f"{few} can only show large changes ({settle})"
        )
    return replace(base, floor=floor, verdict=verdict, reason=reason)


def _holm(changes: list[MetricChange], alpha: float) -> list[MetricChange]:
    """Holm's step-down adjustment over the rank-tested metrics, then each verdict."""
    tested = sorted(
        (i for i, c in enumerate(changes) if c.method == "rank"),
        key=lambda i: (changes[i].p_value or 0.0, i),
    )
    k = len(tested)
    running = 0.0
    out = list(changes)
    for step, i in enumerate(tested):
        change = changes[i]
        p = change.p_value if change.p_value is not None else 1.0
        running = max(running, min(1.0, (k - step) * p))
        delta, floor = change.delta or 0.0, change.floor or 0.0
        significant = running < alpha
        beyond = abs(delta) > floor
        item = metric(change.name)
        stats = f"p = {p:.2g}, Holm-adjusted {running:.2g} over {k} metrics"
        floor_text = _fmt(floor, change.unit)
        if significant and beyond:
            verdict: Verdict = _direction(item, delta)
            reason = f"beyond noise ({stats}) and beyond the floor {floor_text}"
        elif significant:
            verdict = "unchanged"
            reason = f"a real but small difference ({stats}), within the floor {floor_text}"
        else:
            verdict = "unchanged"
            reason = f"within noise ({stats})"
        out[i] = replace(
            change, p_adjusted=running, verdict=verdict, reason=reason, significant=significant
        )
    return out


def judge_many(
    samples: Mapping[str, tuple[Sequence[float], Sequence[float]]], *, alpha: float = ALPHA
) -> list[MetricChange]:
    """Judge several metrics of one diff together (metric name → (before, after) values),
    Holm-corrected over those the rank test judges; the result keeps the input's order."""
    # Every metric with values on both sides counts as a test: the rank method is chosen
    # only when it can answer at Holm's strictest step, and single runs are told how many
    # repeats would settle the whole diff.
    tests = sum(1 for b, a in samples.values() if b and a)
    first = [
        _first_pass(metric(name), list(b), list(a), tests, alpha)
        for name, (b, a) in samples.items()
    ]
    return _holm(first, alpha)


def judge(
    name: str, before: Sequence[float], after: Sequence[float], *, alpha: float = ALPHA
) -> MetricChange:
    """One metric (a name of metrics.METRICS) judged on its own, at ``1 − alpha``."""
    return judge_many({name: (before, after)}, alpha=alpha)[0]


def judge_errors(
    failed_before: int,
    runs_before: int,
    failed_after: int,
    runs_after: int,
    *,
    alpha: float = ALPHA,
) -> MetricChange:
    """The error rate (failed runs / runs) judged: Fisher's exact test at ``1 − alpha`` and
    a floor of ``ERROR_RATE_FLOOR``; single runs: a run that succeeded and one that failed
    (or the reverse) is called, since a failure is the largest change there is."""
    base = MetricChange(
        name="error_rate",
        label="error rate",
        unit="share",
        n_before=runs_before,
        n_after=runs_after,
        before_p50=None,
        after_p50=None,
        delta=None,
        delta_ci=None,
        p_value=None,
        p_adjusted=None,
        method="none",
        floor=None,
        verdict="unknown",
        reason="no runs on one side",
    )
    if runs_before == 0 or runs_after == 0:
        return base
    before, after = failed_before / runs_before, failed_after / runs_after
    delta = after - before
    base = replace(base, before_p50=before, after_p50=after, delta=delta, floor=ERROR_RATE_FLOOR)
    counts = f"{failed_before}/{runs_before} failed before, {failed_after}/{runs_after} after"
    if runs_before < MIN_REPEATS or runs_after < MIN_REPEATS:
        called = abs(delta) >= 0.5
        verdict: Verdict = ("regressed" if delta > 0 else "improved") if called else "unchanged"
        return replace(
            base,
            method="single",
            verdict=verdict,
            reason=f"{counts} (too few runs for a test: only a failure shows)",
        )
    p = fisher_exact(failed_before, runs_before, failed_after, runs_after)
    if p < alpha and abs(delta) > ERROR_RATE_FLOOR:
        verdict = "regressed" if delta > 0 else "improved"
        reason = f"{counts}: beyond chance (Fisher p = {p:.2g})"
    else:
        verdict = "unchanged"
        reason = f"{counts}: within chance (Fisher p = {p:.2g}) or within 5 points"
    return replace(base, method="rank", p_value=p, p_adjusted=p, verdict=verdict, reason=reason)
