"""A series of traced prompts (--count, --concurrency): its runs aggregated.

Pure: timelines in, distributions out. Percentiles are nearest rank, as for token gaps
(core/stats.py): each one is a value some run had. Only runs that succeeded enter the
distributions; failed runs are counted by the stage they failed in.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from promptpath.core.analysis import compute
from promptpath.core.exitcodes import ExitCode
from promptpath.core.series_plan import SeriesPlan
from promptpath.core.slo import METRICS, STATS, SLOResult
from promptpath.core.stats import summarize
from promptpath.core.timeline import Timeline

__all__ = [
    "MIN_SAMPLES",
    "SPEND_ASK_REQUESTS",
    "SPEND_ASK_TOKENS",
    "MetricStats",
    "RunSample",
    "SeriesPlan",
    "SeriesSummary",
    "json_key",
    "sample_of",
    "series_exit_code",
    "single_values",
    "slo_values",
    "summarize_series",
]

#: Above either, a series against a non-loopback target needs --yes (README, "Repeats").
SPEND_ASK_REQUESTS = 20
SPEND_ASK_TOKENS = 20_000


def _min_samples(q: float) -> int:
    # Below 100/(100-q) runs no run lies above the q-th percentile: it is the maximum.
    return math.ceil(100.0 / (100.0 - q) - 1e-9)


#: Runs a nearest-rank percentile needs before it is more than the maximum.
MIN_SAMPLES = {"p50": _min_samples(50), "p95": _min_samples(95), "p99": _min_samples(99)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSample:
    """What a series keeps of one run: its metrics by short name, and how it ended."""

    values: Mapping[str, float]
    error_stage: str | None = None
    exit_code: int = 0
    tls_days_left: int | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def sample_of(timeline: Timeline, exit_code: int) -> RunSample:
    """The series metrics of one run (core/slo.py METRICS names them)."""
    metrics = compute(timeline)
    stages, ms, tok = metrics.stages_ms, metrics.milestones_ms, metrics.tokens
    candidates: dict[str, float | None] = {
        name: stages.get(name) for name in ("dns", "connect", "tls", "quic_handshake")
    }
    candidates.update(
        request=stages.get("request"),
        wait=stages.get("wait"),
        ttft=ms.get("ttft"),
        ttft_from_request=metrics.ttft_from_request_ms,
        ttft_network_adjusted=metrics.ttft_network_adjusted_ms,
        first_output=ms.get("first_output"),
        itl_mean=tok.mean_itl_ms,
        gap_p99=None if tok.gap_summary is None else tok.gap_summary.p99,
        tokens_per_s=tok.per_second,
        # To the terminal marker: what a user waits for the whole answer.
        total=ms.get("end", ms.get("last_token")),
    )
    cert = None if timeline.tls is None else timeline.tls.cert
    return RunSample(
        values={k: float(v) for k, v in candidates.items() if v is not None},
        error_stage=None if timeline.error is None else timeline.error.stage,
        exit_code=exit_code,
        tls_days_left=None if cert is None else cert.days_left,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricStats:
    """One metric across the runs that had it."""

    n: int
    min: float
    p50: float
    p95: float
    p99: float
    max: float
    unit: str
    #: Percentiles this n is too small for (each is then just the maximum).
    too_few_for: tuple[str, ...] = ()

    def stat(self, name: str) -> float:
        value: float = getattr(self, name)
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesSummary:
    runs: int
    aggregate: dict[str, MetricStats]  # short metric name → stats; absent when no run had it
    failures: dict[str, int]  # error stage → failed runs
    error_rate: float
    tls_days_left: int | None  # the smallest any run saw


def summarize_series(samples: Sequence[RunSample]) -> SeriesSummary:
    ok = [s for s in samples if s.ok]
    aggregate: dict[str, MetricStats] = {}
    for name, unit in METRICS.items():
        summary = summarize([s.values[name] for s in ok if name in s.values])
        if summary is None:
            continue
        aggregate[name] = MetricStats(
            n=summary.count,
            min=summary.min,
            p50=summary.p50,
            p95=summary.p95,
            p99=summary.p99,
            max=summary.max,
            unit=unit,
            too_few_for=tuple(q for q, need in MIN_SAMPLES.items() if summary.count < need),
        )
    failures = Counter(s.error_stage for s in samples if s.error_stage is not None)
    days = [s.tls_days_left for s in samples if s.tls_days_left is not None]
    return SeriesSummary(
        runs=len(samples),
        aggregate=aggregate,
        failures=dict(failures),
        error_rate=(len(samples) - len(ok)) / len(samples) if samples else 0.0,
        tls_days_left=min(days) if days else None,
    )


def json_key(name: str) -> str:
    """A metric's key in the series JSON: its unit in the name, as stages_ms does."""
    return name if METRICS[name] != "ms" else f"{name}_ms"


def slo_values(summary: SeriesSummary) -> dict[str, float | None]:
    """Every SLO metric name → its value for this series."""
    values: dict[str, float | None] = {
        f"{name}_{stat}": stats.stat(stat)
        for name, stats in summary.aggregate.items()
        for stat in STATS
    }
    values["error_rate"] = summary.error_rate if summary.runs else None
    values["tls_days_left"] = None if summary.tls_days_left is None else summary.tls_days_left
    return values


def single_values(sample: RunSample) -> dict[str, float | None]:
    """A single run's SLO values: each statistic of a metric is the run's own value."""
    values: dict[str, float | None] = {
        f"{name}_{stat}": value for name, value in sample.values.items() for stat in STATS
    }
    values["error_rate"] = 0.0 if sample.ok else 1.0
    values["tls_days_left"] = None if sample.tls_days_left is None else sample.tls_days_left
    return values


def series_exit_code(samples: Sequence[RunSample], slo: Sequence[SLOResult]) -> int:
    """The series' exit code (README, "Exit codes", precedence).

    Every run failed: the most common failure's code, as for a single failed run (nothing
    was measured to judge). Else a breached SLO: 9. Else failed runs, unless an
    error_rate SLO budgets for them: the most common failure's code. Else 0."""
    failed = [s.exit_code for s in samples if not s.ok]
    # most_common keeps first-seen order among equal counts: a tie goes to the earlier.
    common = Counter(failed).most_common(1)[0][0] if failed else int(ExitCode.OK)
    if failed and len(failed) == len(samples):
        return common
    if any(not r.ok for r in slo):
        return int(ExitCode.SLO)
    if failed and not any(r.slo.metric == "error_rate" for r in slo):
        return common
    return int(ExitCode.OK)
