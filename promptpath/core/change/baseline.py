"""A baseline's values for the SLO grammar: what ``ttft_p95 < 1.5x baseline`` multiplies.
Pure: run objects in, ``<metric>_<stat>`` values out, as core/series.py computes them for
a live series (nearest-rank percentiles over the runs that did not fail), so a baseline
saved from ``run --count N --json`` gives the same figures its run printed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promptpath.core.change.metrics import metric, run_failed, values_of
from promptpath.core.slo import METRICS as SLO_METRICS
from promptpath.core.slo import STATS
from promptpath.core.stats import summarize

__all__ = ["baseline_values"]


def baseline_values(runs: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Every SLO metric name → the baseline's value (None: no run of it had one)."""
    out: dict[str, float | None] = {}
    for name in SLO_METRICS:
        summary = summarize(values_of(metric(name), runs))
        for stat in STATS:
            out[f"{name}_{stat}"] = None if summary is None else float(getattr(summary, stat))
    out["error_rate"] = sum(1 for r in runs if run_failed(r)) / len(runs) if runs else None
    days = [
        r["tls"]["cert"]["days_left"]
        for r in runs
        if isinstance(r.get("tls"), Mapping)
        and isinstance(r["tls"].get("cert"), Mapping)
        and isinstance(r["tls"]["cert"].get("days_left"), int)
    ]
    out["tls_days_left"] = float(min(days)) if days else None
    return out
