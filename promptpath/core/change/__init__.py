"""Has anything changed between two samples of a path? The one judgement every command
uses (diff, run --baseline, watch, vantage, the exporter's baseline ratio). Pure.

- metrics.py: the metrics judged, where each sits in a run document, floor, direction;
- samples.py: one metric's two samples judged against their noise (``judge``,
  ``judge_many`` with Holm's correction, ``judge_errors``);
- facts.py: the facts compared (address, resolver, TLS, certificate, Via, edge, ...);
- documents.py: which documents hold which runs; history.py: a watch history's lines and
  time ranges;
- compose.py: a whole diff (``diff_runs``) and headline.py its one line;
- baseline.py: a baseline's values for the SLO grammar;
- quantiles.py: one metric of one place against others' percentiles (``judge_quantiles``:
  vantage, where a store kept percentiles, not runs);
- ranks.py: the rank test and intervals underneath, in pure Python.
"""

from promptpath.core.change.band import Band, BandRule, BandTracker, Crossing, band_of
from promptpath.core.change.compose import Diff, Side, diff_runs
from promptpath.core.change.documents import SCHEMAS, runs_of, schema_of
from promptpath.core.change.facts import FACTS, FactChange, compare_facts
from promptpath.core.change.history import History, TimeRange, parse_history, parse_range
from promptpath.core.change.metrics import METRICS, STAGES, Metric, metric, value_of, values_of
from promptpath.core.change.quantiles import QuantileCall, judge_quantiles
from promptpath.core.change.samples import (
    ALPHA,
    CONFIDENCE,
    MIN_REPEATS,
    MetricChange,
    judge,
    judge_errors,
    judge_many,
    not_judged,
    repeats_to_settle,
)

__all__ = [
    "ALPHA",
    "CONFIDENCE",
    "FACTS",
    "METRICS",
    "MIN_REPEATS",
    "SCHEMAS",
    "STAGES",
    "Band",
    "BandRule",
    "BandTracker",
    "Crossing",
    "Diff",
    "FactChange",
    "History",
    "Metric",
    "MetricChange",
    "QuantileCall",
    "Side",
    "TimeRange",
    "band_of",
    "compare_facts",
    "diff_runs",
    "judge",
    "judge_errors",
    "judge_many",
    "judge_quantiles",
    "metric",
    "not_judged",
    "parse_history",
    "parse_range",
    "repeats_to_settle",
    "runs_of",
    "schema_of",
    "value_of",
    "values_of",
]
