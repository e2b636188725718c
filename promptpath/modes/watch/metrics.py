"""What watch reads from each trace's run document: its metrics, by the one metric table
every command shares (core/change/metrics.py), each with its band rule. Pure.

Watch reads the ``promptpath.run/1`` document exactly as ``run --json`` prints it (the
line its history keeps), so a trace measured now and one read back from a history file
are read by the same code. A band's floors are the metric's practical floor in that
table (the larger of an absolute part and a share of the median): what diff would not
call a change, watch does not call one either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promptpath.core.change import metrics as change
from promptpath.core.change.band import BandRule

#: The rows of the watch table, in order: the waterfall's stages, then TTFT and the gaps.
ROWS = (
    *change.STAGES,
    "ttft",
    "ttft_network_adjusted",
    "gap_p50",
    "gap_p95",
    "gap_p99",
    "tokens_per_s",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """One row of the watch table."""

    name: str  # the short name (history, events): the metric table's
    label: str
    unit: str
    #: the stage a failure in which counts against this row ("" for derived rows)
    stage: str
    rule: BandRule
    #: 1 when a higher value is worse (durations), -1 when lower is (tokens/s).
    worse: int
    source: change.Metric

    def read(self, doc: Mapping[str, Any]) -> float | None:
        return change.value_of(self.source, doc)


def _row(name: str) -> Metric:
    source = change.metric(name)
    return Metric(
        name=name,
        label=source.label,
        unit=source.unit,
        stage=name if source.stage else "",
        rule=BandRule(
            floor=source.floor_abs * change.SINGLE_FACTOR,
            share=source.floor_rel,
            worse=1 if source.higher_is_worse else -1,
        ),
        worse=1 if source.higher_is_worse else -1,
        source=source,
    )


METRICS: tuple[Metric, ...] = tuple(_row(name) for name in ROWS)
BY_NAME: Mapping[str, Metric] = {m.name: m for m in METRICS}


def failure_of(doc: Mapping[str, Any]) -> tuple[str, str] | None:
    """(stage, message) of a failed trace, or None."""
    error = doc.get("error")
    if not isinstance(error, Mapping):
        return None if doc.get("ok", True) or not change.run_failed(doc) else ("unknown", "failed")
    stage, message = error.get("stage"), error.get("message")
    return (str(stage or "unknown"), str(message or error.get("kind") or "failed"))


__all__ = ["BY_NAME", "METRICS", "ROWS", "Metric", "failure_of"]
