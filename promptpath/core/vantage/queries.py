"""The selection `promptpath vantage` makes, as PromQL instant queries.

Each probe the exporter answers is one run, so its summaries' ``quantile="0.5"`` sample
is that run's value (report/prometheus.py: a single run is a series of one). Over a
range, ``quantile_over_time`` of those samples is the percentile over the runs, and
``count_over_time`` how many there were: per series, so per vantage and stage when one
exporter per vantage probes the target (the edge is an info metric of its own, labels.py,
and splits no series).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from promptpath.core.errors import UsageError

STAGE_METRIC = "promptpath_stage_duration_seconds"
SUCCESS_METRIC = "promptpath_success"
EDGE_METRIC = "promptpath_edge"
DEFAULT_BY = "vantage"
#: The longest --since: a range past Prometheus' usual retention asks for nothing kept.
MAX_SINCE_S = 90 * 86400
MIN_SINCE_S = 1
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str) -> int:
    """``--since``'s value (Prometheus' duration syntax: ``90s``, ``15m``, ``1h30m``,
    ``2d``) in whole seconds."""
    given = text.strip()
    pos, total = 0, 0.0
    for match in _DURATION.finditer(given):
        if match.start() != pos:
            break
        total += int(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if not given or pos != len(given):
        raise UsageError(
            f"--since {text!r}: not a duration (e.g. 90s, 15m, 1h, 1h30m, 2d)", kind="bad_option"
        )
    seconds = int(total)
    if not MIN_SINCE_S <= seconds <= MAX_SINCE_S:
        raise UsageError(
            f"--since {text!r}: must be 1s to {MAX_SINCE_S // 86400}d", kind="bad_option"
        )
    return seconds


def check_label(name: str, option: str) -> str:
    """A label name PromQL takes (``[a-zA-Z_][a-zA-Z0-9_]*``, not ``__``-prefixed)."""
    if not _LABEL.fullmatch(name) or name.startswith("__"):
        raise UsageError(
            f"{option} {name!r}: not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)",
            kind="bad_option",
        )
    return name


def quote(value: str, option: str) -> str:
    """A label value as a PromQL double-quoted string (a control character: refused)."""
    if any(not ch.isprintable() for ch in value):
        raise UsageError(f"{option}: control characters are not allowed", kind="bad_option")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True, kw_only=True)
class Selection:
    """What to compare: rows by the ``by`` label, over ``since_s`` seconds, of the series
    of one target (a name: the ``instance`` label the exporter's scrape job sets; a URL:
    the ``target`` label the export itself carries) and one module, when given."""

    by: str = DEFAULT_BY
    target: str | None = None
    module: str | None = None
    since_s: int = 3600

    @property
    def range(self) -> str:
        return f"{self.since_s}s"

    def matchers(self, *extra: str) -> str:
        """The label matchers every query shares: the ``by`` label set, and the filters."""
        found = [f'{self.by}!=""', *extra]
        if self.target is not None:
            label = "target" if "://" in self.target else "instance"
            found.append(f"{label}={quote(self.target, '--target')}")
        if self.module is not None:
            found.append(f"module={quote(self.module, '--module')}")
        return "{" + ",".join(found) + "}"

    def queries(self) -> dict[str, str]:
        """Name -> PromQL: each an instant query, evaluated at one ``time``."""
        median = 'quantile="0.5"'
        stage = f"{STAGE_METRIC}{self.matchers(median)}[{self.range}]"
        success = f"{SUCCESS_METRIC}{self.matchers()}[{self.range}]"
        edge = f"{EDGE_METRIC}{self.matchers()}[{self.range}]"
        return {
            "p50": f"quantile_over_time(0.5, {stage})",
            "p95": f"quantile_over_time(0.95, {stage})",
            "count": f"count_over_time({stage})",
            "runs": f"count_over_time({success})",
            "ok": f"sum_over_time({success})",
            "edges": f"count_over_time({edge})",
        }

    def describe(self) -> str:
        """The selection in words, for an error that found nothing."""
        parts = [f'{self.by}!=""']
        if self.target is not None:
            parts.append(f"target {self.target!r}")
        if self.module is not None:
            parts.append(f"module {self.module!r}")
        return ", ".join(parts) + f", over the last {self.range}"


__all__ = [
    "DEFAULT_BY",
    "EDGE_METRIC",
    "STAGE_METRIC",
    "SUCCESS_METRIC",
    "Selection",
    "check_label",
    "parse_since",
    "quote",
]
