"""Prometheus' answers to queries.py's queries, as one vantage × stage table.

Every answer is untrusted: a result that is not the vector Prometheus' HTTP API documents
(``[{"metric": {label: value}, "value": [unix, "number"]}]``) is a ``BadAnswer``; sizes
are bounded (``MAX_ROWS`` rows, ``MAX_SERIES`` series in all) so a huge fleet or a hostile
server costs bounded memory. Label values are kept as sent: reports escape them.

When several series fall in one cell (two exporters with one vantage label, several
targets or modules not narrowed by --target/--module), the cell's percentiles are the
count-weighted medians of the series' own percentiles, and the cell says how many series
it merged: an approximation, exact with one series a cell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The stages in waterfall order; a stage not named here follows, in name order.
STAGE_ORDER = (
    "proxy_dns",
    "proxy_connect",
    "proxy_tls",
    "tunnel",
    "dns",
    "connect",
    "tls",
    "quic_handshake",
    "upgrade",
    "request",
    "wait",
    "first_token",
    "streaming",
)
MAX_ROWS = 500
MAX_SERIES = 20_000
MAX_STAGES = 32


class BadAnswer(ValueError):
    """An answer that is not a Prometheus instant vector (or one past the bounds)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One vantage's percentiles of one stage over the range, in ms."""

    p50_ms: float
    p95_ms: float
    runs: int
    series: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One vantage (one value of the ``by`` label)."""

    vantage: str
    cells: Mapping[str, Cell]
    #: Probes answered over the range (samples of promptpath_success), and those that failed.
    runs: int
    failed: int
    #: The edges this vantage reached, most often first: (edge label, samples).
    edges: tuple[tuple[str, int], ...] = ()

    @property
    def failure_share(self) -> float | None:
        return None if self.runs == 0 else self.failed / self.runs

    @property
    def edge(self) -> str | None:
        """The edge reached most often (None: no promptpath_edge samples)."""
        return self.edges[0][0] if self.edges else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Table:
    by: str
    stages: tuple[str, ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class _Sample:
    labels: Mapping[str, str]
    value: float


def vector(result: object) -> list[_Sample]:
    """A ``resultType: vector`` result's samples, checked."""
    if not isinstance(result, list):
        raise BadAnswer("the result is not a list")
    if len(result) > MAX_SERIES:
        raise BadAnswer(f"over {MAX_SERIES} series in one answer")
    out: list[_Sample] = []
    for item in result:
        if not isinstance(item, Mapping):
            raise BadAnswer("a series is not an object")
        labels, value = item.get("metric"), item.get("value")
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise BadAnswer("a series' labels are not strings")
        if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
            raise BadAnswer('a sample is not [time, "value"]')
        try:
            number = float(value[1])
        except ValueError:
            raise BadAnswer(f"a sample's value is not a number: {value[1][:40]!r}") from None
        out.append(_Sample(dict(labels), number))
    return out


def _weighted_median(pairs: Sequence[tuple[float, int]]) -> float:
    ordered = sorted(pairs)
    half = sum(w for _, w in ordered) / 2
    seen = 0
    for value, weight in ordered:
        seen += weight
        if seen >= half:
            return value
    return ordered[-1][0]


def _stage_key(stage: str) -> tuple[int, str]:
    return (STAGE_ORDER.index(stage), "") if stage in STAGE_ORDER else (len(STAGE_ORDER), stage)


def build(answers: Mapping[str, Any], by: str) -> Table:
    """The table from the answers to queries.py's queries (``p50``, ``p95``, ``count``,
    ``runs``, ``ok``, ``edges``), rows by the ``by`` label."""

    def keyed(name: str, *labels: str) -> dict[tuple[str, ...], float]:
        out: dict[tuple[str, ...], float] = {}
        for sample in vector(answers.get(name, [])):
            if not math.isfinite(sample.value):
                continue
            key = tuple(sample.labels.get(label, "") for label in (by, *labels))
            # Several series to one key: keep each (the whole label set tells them apart).
            series = tuple(sorted(sample.labels.items()))
            out[(*key, *(str(p) for p in series))] = sample.value
        return out

    p50, p95, count = keyed("p50", "stage"), keyed("p95", "stage"), keyed("count", "stage")
    per_cell: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for key, median in p50.items():
        vantage, stage = key[0], key[1]
        if key not in p95 or key not in count:
            continue
        per_cell.setdefault((vantage, stage), []).append((median, p95[key], int(count[key])))
    stages = sorted({stage for _, stage in per_cell}, key=_stage_key)
    if len(stages) > MAX_STAGES:
        raise BadAnswer(f"over {MAX_STAGES} stages")
    runs: dict[str, int] = {}
    failed: dict[str, int] = {}
    ok = keyed("ok")
    for key, n in keyed("runs").items():
        vantage = key[0]
        good = ok.get(key, n)
        runs[vantage] = runs.get(vantage, 0) + int(n)
        failed[vantage] = failed.get(vantage, 0) + max(0, round(n - good))
    edges: dict[str, dict[str, int]] = {}
    for key, n in keyed("edges", "edge").items():
        counts = edges.setdefault(key[0], {})
        counts[key[1] or "unknown"] = counts.get(key[1] or "unknown", 0) + int(n)
    names = sorted({v for v, _ in per_cell} | set(runs))
    if len(names) > MAX_ROWS:
        raise BadAnswer(f"over {MAX_ROWS} values of the {by!r} label")
    rows = []
    for name in names:
        cells = {}
        for stage in stages:
            found = per_cell.get((name, stage))
            if not found:
                continue
            cells[stage] = Cell(
                p50_ms=_weighted_median([(m * 1000, n) for m, _, n in found]),
                p95_ms=_weighted_median([(q * 1000, n) for _, q, n in found]),
                runs=sum(n for _, _, n in found),
                series=len(found),
            )
        reached = sorted(edges.get(name, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        rows.append(
            Row(
                vantage=name,
                cells=cells,
                runs=runs.get(name, 0),
                failed=failed.get(name, 0),
                edges=tuple(reached),
            )
        )
    return Table(by=by, stages=tuple(stages), rows=tuple(rows))


__all__ = ["MAX_ROWS", "MAX_SERIES", "STAGE_ORDER", "BadAnswer", "Cell", "Row", "Table", "build"]
