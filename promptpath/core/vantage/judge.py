"""Which vantage, and which of its stages, stand out from the rest of the fleet.

Prometheus gives percentiles and counts over the range, not the runs themselves, so the
diff's rank test cannot run here: each stage is judged by core/change/quantiles.py
(``judge_quantiles``: the vantage's median above the others' median p95, and beyond the
metric's practical floor in core/change/metrics.py, the diff's own table).

Only slower counts (every stage is a time: more is worse). A cell needs ``MIN_RUNS`` runs,
and a stage at least two vantages with them. The vantage that stands out is the one with
the most stages called (ties: the largest excess in all); its stages are named in
waterfall order. Failure shares are judged apart, by the diff's own error-rate judgement
(``judge_errors``: Fisher's exact test on the counts, and its floor): a vantage whose
failures against the others' come out "regressed" is called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import median

from promptpath.core.change import judge_errors, judge_quantiles
from promptpath.core.change.quantiles import floor_of
from promptpath.core.vantage.table import Row, Table

#: Fewer runs than this in a cell: a percentile of it says nothing about a spread.
MIN_RUNS = 3
#: (stage, the others' median in ms) -> the practical floor in ms, None for a stage the
#: metric table does not know (then it is shown, not judged).
Floor = Callable[[str, float], float | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One stage of one vantage, slower than the others beyond noise and floor."""

    vantage: str
    stage: str
    p50_ms: float
    others_p50_ms: float
    others_p95_ms: float
    floor_ms: float

    @property
    def excess_ms(self) -> float:
        return self.p50_ms - self.others_p50_ms


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureCall:
    vantage: str
    share: float
    others_share: float
    failed: int
    runs: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What stands out: the vantage named (None: none), its stages, and every call."""

    standout: str | None
    stages: tuple[str, ...]
    calls: tuple[Call, ...]
    failures: tuple[FailureCall, ...]
    #: Stages shown but not judged: too few vantages with enough runs, or no floor known.
    unjudged: tuple[str, ...]

    @property
    def summary(self) -> str:
        if self.standout is None:
            if self.failures:
                f = self.failures[0]
                return (
                    f"{f.vantage} fails {f.share:.0%} of its probes (the others"
                    f" {f.others_share:.0%}); no stage stands out"
                )
            return "no vantage stands out: every difference is within the others' spread or floor"
        mine = [c for c in self.calls if c.vantage == self.standout]
        said = ", ".join(
            f"{c.stage} {c.p50_ms:.1f} ms (others {c.others_p50_ms:.1f}, p95 {c.others_p95_ms:.1f})"
            for c in mine
        )
        return f"{self.standout} stands out: {said}"


def _call(row: Row, others: list[Row], stage: str, floor: Floor) -> Call | bool | None:
    """A call, None (judged: no call) or False (not judged)."""
    cell = row.cells.get(stage)
    theirs = [o.cells[stage] for o in others if stage in o.cells]
    theirs = [c for c in theirs if c.runs >= MIN_RUNS]
    if cell is None or cell.runs < MIN_RUNS or not theirs:
        return False
    others_p50 = [c.p50_ms for c in theirs]
    practical = floor(stage, median(others_p50))
    if practical is None:
        return False
    found = judge_quantiles(
        stage, cell.p50_ms, others_p50, [c.p95_ms for c in theirs], floor_ms=practical
    )
    if found is None:
        return None
    return Call(
        vantage=row.vantage,
        stage=stage,
        p50_ms=found.p50_ms,
        others_p50_ms=found.others_p50_ms,
        others_p95_ms=found.others_p95_ms,
        floor_ms=found.floor_ms,
    )


def change_floor(stage: str, reference_ms: float) -> float | None:
    """The diff's practical floor of a stage (None: a stage its metric table lacks)."""
    return floor_of(stage, reference_ms)


def _failure(row: Row, others: list[Row]) -> FailureCall | None:
    share = row.failure_share
    rest = [o for o in others if o.runs >= MIN_RUNS]
    if share is None or row.runs < MIN_RUNS or not rest:
        return None
    others_failed, others_runs = sum(o.failed for o in rest), sum(o.runs for o in rest)
    if judge_errors(others_failed, others_runs, row.failed, row.runs).verdict != "regressed":
        return None
    others_share = others_failed / others_runs
    return FailureCall(
        vantage=row.vantage,
        share=share,
        others_share=others_share,
        failed=row.failed,
        runs=row.runs,
    )


def judge(table: Table, floor: Floor = change_floor) -> Verdict:
    """The verdict over ``table``, each stage's floor from ``floor`` (the diff's table)."""
    calls: list[Call] = []
    judged: set[str] = set()
    for row in table.rows:
        others = [o for o in table.rows if o is not row]
        for stage in table.stages:
            found = _call(row, others, stage, floor)
            if found is False:
                continue
            judged.add(stage)
            if isinstance(found, Call):
                calls.append(found)
    failures = [
        f for row in table.rows if (f := _failure(row, [o for o in table.rows if o is not row]))
    ]
    failures.sort(key=lambda f: -(f.share - f.others_share))
    standout: str | None = None
    if calls:
        score: dict[str, tuple[int, float]] = {}
        for c in calls:
            n, excess = score.get(c.vantage, (0, 0.0))
            score[c.vantage] = (n + 1, excess + c.excess_ms)
        standout = max(sorted(score), key=lambda v: score[v])
    order = {stage: i for i, stage in enumerate(table.stages)}
    calls.sort(key=lambda c: (c.vantage != standout, c.vantage, order[c.stage]))
    return Verdict(
        standout=standout,
        stages=tuple(c.stage for c in calls if c.vantage == standout),
        calls=tuple(calls),
        failures=tuple(failures),
        unjudged=tuple(s for s in table.stages if s not in judged),
    )


__all__ = [
    "MIN_RUNS",
    "Call",
    "FailureCall",
    "Floor",
    "Verdict",
    "change_floor",
    "judge",
]
