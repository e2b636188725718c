"""A whole diff: every metric and fact of two samples of runs judged, with one headline. Pure.

``diff_runs(before, after)`` takes the run objects of each side (documents.runs_of gives
them from any document) and returns a ``Diff``: the metrics judged together (samples.py,
Holm-corrected over the diff), the error rate, the facts that differ, the headline
(headline.py) and whether anything regressed — what `promptpath diff` exits 1 on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promptpath.core.change.facts import FactChange, compare_facts
from promptpath.core.change.headline import headline
from promptpath.core.change.metrics import METRICS, run_failed, values_of
from promptpath.core.change.samples import (
    ALPHA,
    MIN_REPEATS,
    MetricChange,
    judge_errors,
    judge_many,
    not_judged,
    repeats_to_settle,
)

__all__ = ["Diff", "Side", "diff_runs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    """One side of a diff: where its runs came from and how many failed."""

    source: str
    kind: str  # "run" | "series" | "compare" | "history" | "runs"
    runs: int
    failed: int
    #: A history's time range (``--before``/``--after``), as given.
    range: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Diff:
    """Two samples of a path compared."""

    before: Side
    after: Side
    #: Every metric with a value on at least one side, in metrics.METRICS order.
    metrics: tuple[MetricChange, ...]
    errors: MetricChange
    facts: tuple[FactChange, ...]
    headline: str
    #: Sentences about the diff as a whole (single runs, one run against a series).
    notes: tuple[str, ...]
    alpha: float

    @property
    def regressed(self) -> bool:
        """A metric (or the error rate) regressed beyond its noise: exit 1."""
        return self.errors.verdict == "regressed" or any(
            m.verdict == "regressed" for m in self.metrics
        )

    def metric(self, name: str) -> MetricChange | None:
        return next((m for m in self.metrics if m.name == name), None)


def _notes(metrics: Sequence[MetricChange], before: Side, after: Side, alpha: float) -> list[str]:
    methods = {m.method for m in metrics}
    tested = sum(1 for m in metrics if m.n_before and m.n_after)
    need = repeats_to_settle(tested, alpha)
    notes: list[str] = []
    if "single" in methods:
        notes.append(
            "Single runs can only show large changes (the wider single-run floors); "
            f"{need} runs a side (--count {need}) would settle smaller ones."
        )
    elif "few" in methods:
        notes.append(
            f"{before.runs - before.failed} vs {after.runs - after.failed} runs are too few "
            f"for the rank test at {1 - alpha:.0%} over {tested} metrics: only large changes "
            f"show; {need} runs a side would settle it."
        )
    if "spread" in methods:
        notes.append(
            "One run against a series is judged against the series' spread: only a run "
            "outside its range, and far beyond its floor, is called."
        )
    if "rank" in methods:
        notes.append(
            f"A change is called when the rank test (Mann–Whitney, Holm-corrected over "
            f"{tested} metrics) says so at {1 - alpha:.0%} and the median moved beyond the "
            "metric's floor."
        )
    return notes


def _thin(have: int, runs: int) -> bool:
    """A series whose metric only some runs have (tokens/s needs two content events apart):
    fewer than MIN_REPEATS of them, or under half the runs that finished."""
    return runs >= MIN_REPEATS and (have < MIN_REPEATS or 2 * have < runs)


def diff_runs(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    *,
    before_side: Side | None = None,
    after_side: Side | None = None,
    alpha: float = ALPHA,
) -> Diff:
    """Judge every metric and fact of ``before`` against ``after`` (run objects)."""
    sides = []
    for runs, given in ((before, before_side), (after, after_side)):
        failed = sum(1 for r in runs if run_failed(r))
        sides.append(given or Side(source="", kind="runs", runs=len(runs), failed=failed))
    b_side, a_side = sides
    samples: dict[str, tuple[list[float], list[float]]] = {}
    sparse: dict[str, MetricChange] = {}
    ok_b, ok_a = b_side.runs - b_side.failed, a_side.runs - a_side.failed
    for item in METRICS:
        b, a = values_of(item, before), values_of(item, after)
        if not (b or a):
            continue
        thin = _thin(len(b), ok_b) or _thin(len(a), ok_a)
        if b and a and thin:
            sparse[item.name] = not_judged(
                item.name, b, a,
                f"in {len(b)} of {ok_b} runs before and {len(a)} of {ok_a} after: the runs "
                "that have it are not a sample of the others",
            )  # fmt: skip
            continue
        samples[item.name] = (b, a)
    judged = {c.name: c for c in judge_many(samples, alpha=alpha)} | sparse
    metrics = tuple(judged[m.name] for m in METRICS if m.name in judged)
    errors = judge_errors(
        sum(1 for r in before if run_failed(r)),
        len(before),
        sum(1 for r in after if run_failed(r)),
        len(after),
        alpha=alpha,
    )
    facts = tuple(compare_facts(list(before), list(after)))
    return Diff(
        before=b_side,
        after=a_side,
        metrics=metrics,
        errors=errors,
        facts=facts,
        headline=headline(metrics, errors, facts),
        notes=tuple(_notes(metrics, b_side, a_side, alpha)),
        alpha=alpha,
    )
