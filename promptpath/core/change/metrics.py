"""The table of metrics a change is judged on: where each sits in a run document, its unit,
its practical floor, and which way is worse.

A metric is read from one ``promptpath.run/1`` object (``run --json``; each run of a
series, of a compare's results, of a watch history line). A path that is absent, null or
not a number gives no value: older documents without the optional fields of CONTRACTS.md
§3 (``rtt_ms``, ``ttft_network_adjusted_ms``, ``server.edge_name``) are skipped, not zero.

The practical floor
-------------------
A change is called only when it is beyond noise (samples.py's rank test) **and** larger
than the metric's practical floor: ``max(absolute, relative × the before median)``.

- The absolute part keeps machine noise out: on loopback a DNS lookup of 0.1 ms that
  doubles is client CPU, not the path; no one acts on a 2 ms connect change.
- The relative part scales with the metric: +50 ms on a 3 s TTFT is 1.7 %, within what
  one backend's load moves from hour to hour; +50 ms on a 60 ms TTFT is the news.
- Single runs (one a side) have no spread to test, so the floor is all there is, and it is
  wider (``SINGLE_FACTOR`` times the absolute part, at least ``SINGLE_RELATIVE`` of the
  before value): a single run can only show a large change, and the report says so.

The figures are a network engineer's "worth a look": a round trip within a region is
1–10 ms (connect, DNS), TLS adds one to two of them, and a user notices TTFT changes of
about a tenth of a second. Gaps are per token, so their floor is small in ms but wide in
share: one GC pause in a server moves a p99 gap by tens of percent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "METRICS",
    "SINGLE_FACTOR",
    "SINGLE_RELATIVE",
    "STAGES",
    "Metric",
    "metric",
    "run_failed",
    "value_of",
    "values_of",
]

#: Single runs: the absolute floor times this, and at least this share of the before value.
SINGLE_FACTOR = 3.0
SINGLE_RELATIVE = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """One metric of a run document, judged on its own."""

    name: str
    label: str
    #: Keys from the run object's root to the number (``("stages_ms", "dns")``).
    path: tuple[str, ...]
    unit: str
    #: Practical floor: max(absolute, relative × before median), in ``unit``.
    floor_abs: float
    floor_rel: float
    #: True for times (more is worse); False for throughput (tokens/s).
    higher_is_worse: bool = True
    #: A stage of the waterfall: the headline attributes a total change to these.
    stage: bool = False
    #: When set, the value is path / per (a share, e.g. coalesced events / events).
    per: tuple[str, ...] | None = None

    @property
    def where(self) -> str:
        """The document path, dotted (``stages_ms.dns``), as the docs and JSON name it."""
        dotted = ".".join(self.path)
        return dotted if self.per is None else f"{dotted} / {'.'.join(self.per)}"

    def floor(self, before: float) -> float:
        """The practical floor against a before value (its median for a series)."""
        return max(self.floor_abs, self.floor_rel * abs(before))

    def single_floor(self, before: float) -> float:
        """The wider floor single runs are judged against."""
        return max(
            self.floor_abs * SINGLE_FACTOR, max(self.floor_rel, SINGLE_RELATIVE) * abs(before)
        )


def _m(
    name: str, label: str, path: str, unit: str, floor_abs: float, floor_rel: float, **kw: Any
) -> Metric:
    return Metric(
        name=name,
        label=label,
        path=tuple(path.split(".")),
        unit=unit,
        floor_abs=floor_abs,
        floor_rel=floor_rel,
        **kw,
    )


#: Every metric a diff judges, in the order reports list them (the waterfall's stages first).
METRICS: tuple[Metric, ...] = (
    _m("dns", "DNS", "stages_ms.dns", "ms", 5.0, 0.25, stage=True),
    _m("connect", "TCP connect", "stages_ms.connect", "ms", 5.0, 0.25, stage=True),
    _m("tls", "TLS", "stages_ms.tls", "ms", 10.0, 0.25, stage=True),
    _m(
        "quic_handshake", "QUIC handshake", "stages_ms.quic_handshake", "ms", 10.0, 0.25, stage=True
    ),
    _m("request", "request", "stages_ms.request", "ms", 10.0, 0.25, stage=True),
    _m("wait", "wait (TTFB)", "stages_ms.wait", "ms", 20.0, 0.2, stage=True),
    _m("first_token", "first token", "stages_ms.first_token", "ms", 50.0, 0.15, stage=True),
    _m("streaming", "streaming", "stages_ms.streaming", "ms", 100.0, 0.15, stage=True),
    _m("ttft", "TTFT", "ttft_ms.from_start", "ms", 50.0, 0.15),
    _m("ttft_from_request", "TTFT from request", "ttft_ms.from_request", "ms", 50.0, 0.15),
    _m("first_output", "first output", "first_output_ms.from_start", "ms", 50.0, 0.15),
    _m(
        "ttft_network_adjusted",
        "TTFT net-adjusted",
        "ttft_network_adjusted_ms",
        "ms",
        50.0,
        0.15,
    ),
    _m(
        "first_output_network_adjusted",
        "first output net-adj.",
        "first_output_network_adjusted_ms",
        "ms",
        50.0,
        0.15,
    ),
    _m("itl_mean", "mean ITL", "tokens.mean_itl_ms", "ms", 5.0, 0.25),
    _m("gap_p50", "gap p50", "tokens.gaps_ms.p50", "ms", 5.0, 0.25),
    _m("gap_p95", "gap p95", "tokens.gaps_ms.p95", "ms", 10.0, 0.3),
    _m("gap_p99", "gap p99", "tokens.gaps_ms.p99", "ms", 20.0, 0.3),
    _m("tokens_per_s", "tokens/s", "tokens.per_second", "tok/s", 2.0, 0.15, higher_is_worse=False),
    # Events that came in the same socket read as the one before: a rise is a buffer
    # somewhere on the path holding the stream back. A share, so its floor is absolute.
    _m(
        "coalesced",
        "coalesced share",
        "tokens.coalesced",
        "share",
        0.2,
        0.0,
        per=("tokens", "events"),
    ),
    _m("server_time", "server time", "server.time.ms", "ms", 50.0, 0.2),
    _m("rtt", "RTT (kernel)", "rtt_ms", "ms", 5.0, 0.25),
    _m("total", "total", "milestones_ms.end", "ms", 100.0, 0.15),
)

_BY_NAME = {m.name: m for m in METRICS}

#: The stages of the waterfall, in order.
STAGES: tuple[str, ...] = tuple(m.name for m in METRICS if m.stage)


def metric(name: str) -> Metric:
    """The metric called ``name`` (KeyError for an unknown one)."""
    return _BY_NAME[name]


def _walk(doc: Mapping[str, Any], path: Sequence[str]) -> float | None:
    node: Any = doc
    try:
        for key in path:
            node = node[key]
    except (KeyError, TypeError, IndexError):
        return None  # absent, or a list/string/null where an object was expected
    # bool is an int in Python; a true/false is never a measurement.
    if node.__class__ is bool or not isinstance(node, int | float):
        return None
    value = float(node)
    return value if math.isfinite(value) else None


def value_of(item: Metric, run: Mapping[str, Any]) -> float | None:
    """The metric's value in one run object; None when the document has none."""
    value = _walk(run, item.path)
    if value is None or item.per is None:
        return value
    per = _walk(run, item.per)
    if per is None or per <= 0:
        return None
    return value / per


def run_failed(run: Mapping[str, Any]) -> bool:
    """The run ended in an error (its ``error`` object is set): its times are the time to
    fail, not a measurement to compare. A run that only breached an SLO or a finding
    (exit code ≠ 0, no error) measured everything and counts."""
    return run.get("error") is not None


def values_of(item: Metric, runs: Sequence[Mapping[str, Any]]) -> list[float]:
    """The metric's values over the runs that did not fail, in order."""
    out: list[float] = []
    for run in runs:
        if run_failed(run):
            continue
        value = value_of(item, run)
        if value is not None:
            out.append(value)
    return out
