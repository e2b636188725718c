"""The labels a fleet compares by: the exporter's own (``vantage``, ``--label``) and the edge.

Static labels come from the config's ``[exporter] vantage`` and the command line's
``--label NAME=VALUE`` (which wins over the config's vantage) and go on every sample the
exporter answers, /probe and /metrics alike.

The edge a probe reached is the run document's ``server.edge_name`` (``{"name": "FRA",
"cdn": "cloudflare", ...}``, null when no known header named it): it becomes the ``edge``
and ``cdn`` labels of one info metric, ``promptpath_edge``, not a label on every sample.
An edge that changes from one probe to the next then splits no stage or TTFT series (a
``quantile_over_time`` over a stage stays one series per vantage), and a query that wants
the edge joins it in (``* on(instance) group_left(edge) promptpath_edge``).

Its cardinality is bounded: a name that is not a short token (``[A-Za-z0-9][A-Za-z0-9._-]``,
at most 32 characters: a PoP code, a region) is ``other``; so is every (edge, cdn) pair past
the first ``max_edges`` the process has seen (default 16; kept across reloads); no name is
``unknown``. The set of label values is therefore at most ``max_edges`` + 2.

Pure: a report in, label values out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from promptpath.core.errors import UsageError

UNKNOWN = "unknown"
OTHER = "other"
DEFAULT_MAX_EDGES = 16
MAX_EDGES_LIMIT = 1000
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")

#: Labels the exporter sets on some sample itself: a --label of the same name would be
#: lost on those samples (or make one sample carry the name twice), so it is refused.
EXPORTER_LABELS = frozenset(
    {"edge", "cdn", "module", "result", "reason", "path", "le", "version", "instance"}
)


def edge_of(report: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``server.edge_name``'s name and CDN in a run document (None for each when absent:
    an older document, or no known header named the edge)."""
    server = report.get("server")
    named = server.get("edge_name") if isinstance(server, Mapping) else None
    if not isinstance(named, Mapping):
        return None, None
    name, cdn = named.get("name"), named.get("cdn")
    return (
        name if isinstance(name, str) and name else None,
        cdn if isinstance(cdn, str) and cdn else None,
    )


class EdgeLabels:
    """The ``edge`` and ``cdn`` label values, at most ``cap`` distinct pairs named."""

    def __init__(self, cap: int = DEFAULT_MAX_EDGES) -> None:
        self.cap = cap
        self._seen: dict[tuple[str, str], None] = {}

    def labels(self, report: Mapping[str, Any]) -> dict[str, str]:
        """``{"edge": ..., "cdn": ...}`` for the probe that made ``report``."""
        name, cdn = edge_of(report)
        if name is None:
            return {"edge": UNKNOWN, "cdn": UNKNOWN}
        pair = (_token(name), UNKNOWN if cdn is None else _token(cdn))
        if OTHER in pair:
            return {"edge": OTHER, "cdn": OTHER}
        if pair not in self._seen:
            if len(self._seen) >= self.cap:
                return {"edge": OTHER, "cdn": OTHER}
            self._seen[pair] = None
        return {"edge": pair[0], "cdn": pair[1]}

    @property
    def named(self) -> int:
        """How many distinct (edge, cdn) pairs have a label of their own."""
        return len(self._seen)


def _token(value: str) -> str:
    return value if _TOKEN.fullmatch(value) else OTHER


def static_labels(
    vantage: str | None, given: Sequence[tuple[str, str]]
) -> tuple[tuple[str, str], ...]:
    """The labels on every sample: ``vantage`` from the config, then ``--label``'s (already
    checked by ``check_labels``), which win."""
    labels: dict[str, str] = {}
    if vantage is not None:
        labels["vantage"] = vantage
    labels.update(given)
    return tuple(labels.items())


def check_labels(labels: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The exporter's --label values (already NAME=VALUE, Prometheus names, none of
    run's reserved): none of the labels the exporter sets itself either."""
    for name, _value in labels:
        if name in EXPORTER_LABELS:
            raise UsageError(
                f"--label {name}: the exporter sets that label itself"
                f" (reserved: {', '.join(sorted(EXPORTER_LABELS))})",
                kind="bad_option",
            )
    return tuple(labels)


__all__ = [
    "DEFAULT_MAX_EDGES",
    "EXPORTER_LABELS",
    "OTHER",
    "UNKNOWN",
    "EdgeLabels",
    "check_labels",
    "edge_of",
    "static_labels",
]
