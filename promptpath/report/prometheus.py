"""--prom-textfile and --pushgateway: the run in Prometheus' text exposition format 0.0.4.

A pure renderer over the JSON report (a single-run object or a ``promptpath.series/1``
object). Names follow Prometheus' conventions: a ``promptpath_`` prefix, base units
(seconds, not ms), a ``stage`` label for stage durations.

Measured figures are always summaries (quantiles 0, 0.5, 0.95, 0.99, 1 with ``_sum`` and
``_count``), a single run being a series of one: a Pushgateway refuses a push whose
metric has another type than the same name already has in another group (Pushgateway
1.5.1 answers 400 "... is not a GAUGE"), so runners that repeat and runners that do not
must expose one shape to share one Pushgateway.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promptpath.core.stats import summarize
from promptpath.report.runs import is_series, runs_of, target_of

#: The labels the exporter sets itself; --label may not take them.
RESERVED_LABELS = frozenset(
    {"target", "stage", "quantile", "slo", "metric", "job", "probe", "verdict"}
)

#: (quantile label, key of an aggregate entry)
_QUANTILES = (("0", "min"), ("0.5", "p50"), ("0.95", "p95"), ("0.99", "p99"), ("1", "max"))


@dataclass(frozen=True, slots=True)
class _Measure:
    """One measured figure: its metric, the series aggregate's key, and how to read a run."""

    name: str
    help: str
    aggregate: str
    read: Callable[[Mapping[str, Any]], object]
    scale: float = 1e-3  # ms -> s


def _path(*keys: str) -> Callable[[Mapping[str, Any]], object]:
    def read(run: Mapping[str, Any]) -> object:
        value: object = run
        for key in keys:
            value = value.get(key) if isinstance(value, Mapping) else None
        return value

    return read


_MEASURES = (
    _Measure(
        "promptpath_ttft_seconds",
        "Time to first token from the start of the trace (DNS, connect and TLS included).",
        "ttft_ms",
        _path("ttft_ms", "from_start"),
    ),
    _Measure(
        "promptpath_ttft_from_request_seconds",
        "Time to first token from the last byte of the request.",
        "ttft_from_request_ms",
        _path("ttft_ms", "from_request"),
    ),
    _Measure(
        "promptpath_ttft_network_adjusted_seconds",
        "Time to first token from the last byte of the request less one round trip of the"
        " path (the kernel's minimum RTT): the server's side.",
        "ttft_network_adjusted_ms",
        _path("ttft_network_adjusted_ms"),
    ),
    _Measure(
        "promptpath_first_output_seconds",
        "Time to the first answer text a user sees (not reasoning, not a tool call), from"
        " the start of the trace.",
        "first_output_ms",
        _path("first_output_ms", "from_start"),
    ),
    _Measure(
        "promptpath_inter_token_latency_seconds",
        "Mean inter-token latency of a run.",
        "itl_mean_ms",
        _path("tokens", "mean_itl_ms"),
    ),
    _Measure(
        "promptpath_token_gap_p99_seconds",
        "99th percentile of the gaps between content events within a run.",
        "gap_p99_ms",
        _path("tokens", "gaps_ms", "p99"),
    ),
    _Measure(
        "promptpath_tokens_per_second",
        "Output tokens per second of a run.",
        "tokens_per_s",
        _path("tokens", "per_second"),
        scale=1.0,
    ),
    _Measure(
        "promptpath_duration_seconds",
        "Whole run, from the start of the trace to the end of the stream.",
        "total_ms",
        _path("milestones_ms", "end"),
    ),
)


def escape_label_value(value: str) -> str:
    """A label value as the text format wants it: backslash, quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    # Our figures are ms with three decimals: nanoseconds are all there is, and rounding
    # there keeps float noise (0.0015509999999999999) out of the text.
    return repr(round(value, 9))


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    body = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())
    return "{" + body + "}"


class Exposition:
    """Families in order, each with its HELP and TYPE once and its samples together."""

    def __init__(self, base: Mapping[str, str]) -> None:
        self.base = dict(base)
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {_escape_help(help_text)}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, value: float, **labels: str) -> None:
        self.lines.append(f"{name}{_labels({**self.base, **labels})} {_number(value)}")

    def summary(
        self,
        name: str,
        quantiles: Mapping[str, float],
        values: list[float],
        **labels: str,
    ) -> None:
        for q, key in _QUANTILES:
            if key in quantiles:
                self.sample(name, quantiles[key], **labels, quantile=q)
        self.sample(f"{name}_sum", math.fsum(values), **labels)
        self.sample(f"{name}_count", len(values), **labels)

    def histogram(
        self,
        name: str,
        buckets: Sequence[tuple[float, int]],
        total: float,
        count: int,
        **labels: str,
    ) -> None:
        """Cumulative ``(le, count)`` buckets (+Inf added), ``_sum`` and ``_count``."""
        for le, n in buckets:
            self.sample(f"{name}_bucket", n, **labels, le=_number(le))
        self.sample(f"{name}_bucket", count, **labels, le="+Inf")
        self.sample(f"{name}_sum", total, **labels)
        self.sample(f"{name}_count", count, **labels)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _values(
    runs: list[Mapping[str, Any]], read: Callable[[Mapping[str, Any]], object]
) -> list[float]:
    found = (read(run) for run in runs)
    return [float(v) for v in found if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _quantiles(
    report: Mapping[str, Any], key: str, values: list[float], scale: float
) -> dict[str, float]:
    """The series aggregate's figures for ``key`` (what its JSON and terminal show), else
    nearest-rank figures of ``values`` (a single run, or a stage the aggregate leaves out)."""
    entry = (report.get("aggregate") or {}).get(key) if is_series(report) else None
    if isinstance(entry, Mapping):
        return {k: float(entry[k]) * scale for _, k in _QUANTILES if entry.get(k) is not None}
    summary = summarize(values)
    if summary is None:
        return {}
    return {k: getattr(summary, k) for _, k in _QUANTILES}


def _stages(runs: list[Mapping[str, Any]]) -> Iterator[str]:
    seen: dict[str, None] = {}
    for run in runs:
        seen.update(dict.fromkeys(run.get("stages_ms") or {}))
    yield from seen


def _failures(report: Mapping[str, Any], runs: list[Mapping[str, Any]]) -> dict[str, int]:
    if is_series(report):
        return {str(k): int(v) for k, v in (report.get("failures") or {}).items()}
    error = report.get("error")
    return {str(error.get("stage")): 1} if isinstance(error, Mapping) else {}


def _unix(run: Mapping[str, Any]) -> float | None:
    """The certificate's notAfter as Unix time: Prometheus wants seconds, not days left."""
    from datetime import datetime

    not_after = _path("tls", "cert", "not_after")(run)
    if not isinstance(not_after, str):
        return None
    try:
        return datetime.fromisoformat(not_after).timestamp()
    except ValueError:
        return None


def render(report: Mapping[str, Any], *, labels: Mapping[str, str] | None = None) -> str:
    """The exposition text of ``report``; ``labels`` (--label) go on every sample."""
    runs = runs_of(report)
    out = Exposition({"target": target_of(report), **(labels or {})})
    exit_code = int(report.get("exit_code") or 0)
    out.family("promptpath_success", "gauge", "1 when the run exited 0, else 0.")
    out.sample("promptpath_success", 1 if exit_code == 0 else 0)
    out.family("promptpath_exit_code", "gauge", "The run's exit code (see the README's table).")
    out.sample("promptpath_exit_code", exit_code)
    out.family("promptpath_runs", "gauge", "Traced prompts in this report.")
    out.sample("promptpath_runs", len(runs))
    failures = _failures(report, runs)
    out.family("promptpath_error_rate", "gauge", "Share of the runs that failed (0 to 1).")
    rate = report.get("error_rate") if is_series(report) else None
    if not isinstance(rate, (int, float)):
        rate = sum(failures.values()) / len(runs) if runs else 0
    out.sample("promptpath_error_rate", rate)
    if failures:
        out.family("promptpath_failed_runs", "gauge", "Failed runs by the stage they failed in.")
        for stage, n in failures.items():
            out.sample("promptpath_failed_runs", n, stage=stage)

    stage_names = list(_stages(runs))
    if stage_names:
        name = "promptpath_stage_duration_seconds"
        out.family(name, "summary", "Duration of each network stage of a run.")
        for stage in stage_names:
            values = [v / 1000 for v in _values(runs, _path("stages_ms", stage))]
            out.summary(name, _quantiles(report, f"{stage}_ms", values, 1e-3), values, stage=stage)
    for measure in _MEASURES:
        values = [v * measure.scale for v in _values(runs, measure.read)]
        if not values:
            continue
        out.family(measure.name, "summary", measure.help)
        out.summary(
            measure.name, _quantiles(report, measure.aggregate, values, measure.scale), values
        )

    expiries = [_unix(run) for run in runs]
    known = [e for e in expiries if e is not None]
    if known:
        name = "promptpath_tls_cert_expiry_timestamp_seconds"
        out.family(name, "gauge", "When the server certificate expires (Unix time; earliest).")
        out.sample(name, min(known))
    findings = [f for f in report.get("findings") or [] if isinstance(f, Mapping)]
    if findings:
        name = "promptpath_finding"
        out.family(name, "gauge", "1 for each probe's verdict (pass, warn, fail, skip, error).")
        for finding in findings:
            out.sample(
                name, 1, probe=str(finding.get("probe")), verdict=str(finding.get("verdict"))
            )
    slos = [s for s in report.get("slo") or [] if isinstance(s, Mapping)]
    if slos:
        out.family("promptpath_slo_ok", "gauge", "1 when the SLO expression held, else 0.")
        for slo in slos:
            out.sample(
                "promptpath_slo_ok",
                1 if slo.get("ok") else 0,
                slo=str(slo.get("expr")),
                metric=str(slo.get("metric")),
            )
    return out.text()
