"""Has anything changed between two samples of a path? The one judgement every command
uses (diff, run --baseline, watch, vantage, the exporter's baseline ratio). Pure.

- metrics.py: the metrics judged, where each sits in a run document, floor, direction;
- samples.py: one metric's two samples judged against their noise (``judge``,
  ``judge_many`` with Holm's correction, ``judge_errors``);
- facts.py: the facts compared (address, resolver, TLS, certificate, Via, edge, ...);
- documents.py: which documents hold which runs;
- ranks.py: the rank test and intervals underneath, in pure Python.
"""

from promptpath.core.change.documents import SCHEMAS, runs_of, schema_of
from promptpath.core.change.facts import FACTS, FactChange, compare_facts
from promptpath.core.change.metrics import METRICS, STAGES, Metric, metric, value_of, values_of
from promptpath.core.change.samples import (
    ALPHA,
    CONFIDENCE,
    MIN_REPEATS,
    MetricChange,
    judge,
    judge_errors,
    judge_many,
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
    "FactChange",
    "Metric",
    "MetricChange",
    "compare_facts",
    "judge",
    "judge_errors",
    "judge_many",
    "metric",
    "repeats_to_settle",
    "runs_of",
    "schema_of",
    "value_of",
    "values_of",
]
