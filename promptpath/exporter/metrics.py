"""What the exporter answers, as Prometheus text: a probe's metrics, and its own health.

A probe's answer is the textfile export of its JSON report (--prom-textfile's writer in
the formats table, outputs/formats.py: the same metric names) followed by
blackbox_exporter's ``probe_success`` and ``probe_duration_seconds`` and the exporter's
own account of that answer (cached or not, its age, the deadline, where a deadline cut
it). ``Health`` counts what the exporter did;
``health_text`` renders it with the guard's state and the process' own figures for
``GET /metrics``. Pure: the numbers come in, text goes out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from promptpath.exporter.http import CLOSE_REASONS, ConnectionStats
from promptpath.exporter.probe import Outcome
from promptpath.outputs.deliver import ExportPlan
from promptpath.outputs.formats import BY_DEST
from promptpath.report.prometheus import Exposition

#: probe_duration buckets in seconds: a fast stream to a scrape timeout's worth.
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: Why a scrape was refused (the ``reason`` label).
REFUSALS = (
    "unknown_target",
    "url_target",
    "unknown_module",
    "module_not_allowed",
    "over_capacity",
    "still_running",
    "over_budget",
    "draining",
    "bad_request",
    "too_many_scrapes",
    "cross_origin",
    "wrong_host",
)
RESULTS = ("success", "failure", "timeout")


@dataclass(frozen=True, slots=True, kw_only=True)
class Served:
    """One /probe answer: the outcome, and whether it is a cached one (and how old)."""

    outcome: Outcome
    cached: bool
    age_s: float = 0.0
    #: The module's baseline (SLO metric name → value), for promptpath_baseline_ratio.
    baseline: Mapping[str, float | None] | None = None


def probe_text(served: Served) -> str:
    """The /probe answer's body."""
    outcome = served.outcome
    out = Exposition({})
    out.family("probe_success", "gauge", "1 when the probe succeeded (the run exited 0), else 0.")
    out.sample("probe_success", 1 if outcome.success else 0)
    out.family("probe_duration_seconds", "gauge", "How long the probe took, in seconds.")
    out.sample("probe_duration_seconds", round(outcome.duration_s, 6))
    out.family(
        "promptpath_exporter_cached",
        "gauge",
        "1 when this answer is the last probe's result, served again (the cost guard).",
    )
    out.sample("promptpath_exporter_cached", 1 if served.cached else 0)
    out.family(
        "promptpath_exporter_result_age_seconds",
        "gauge",
        "Seconds since the probe this answer reports began.",
    )
    out.sample("promptpath_exporter_result_age_seconds", round(served.age_s, 3))
    out.family(
        "promptpath_exporter_deadline_seconds",
        "gauge",
        "The deadline the probe ran under (the scrape timeout less the offset, or the"
        " module's timeout).",
    )
    out.sample("promptpath_exporter_deadline_seconds", outcome.deadline_s)
    out.family(
        "promptpath_exporter_timed_out",
        "gauge",
        "1 when the deadline cut the probe, with the stage (or probe:NAME) it stalled in.",
    )
    out.sample(
        "promptpath_exporter_timed_out",
        0 if outcome.timed_out_in is None else 1,
        stage=outcome.timed_out_in or "",
    )
    if served.baseline is not None:
        _ratios(out, outcome, served.baseline)
    # No --label here: the scrape's own target labels are Prometheus' to add.
    return BY_DEST["prom_textfile"].render(outcome.report, ExportPlan()) + out.text()


#: The metrics a baseline ratio is given for (a bounded label: the SLO grammar's names).
RATIO_METRICS = ("dns", "connect", "tls", "quic_handshake", "request", "wait", "ttft",
                 "first_output", "gap_p99", "tokens_per_s", "total")  # fmt: skip


def _ratios(out: Exposition, outcome: Outcome, baseline: Mapping[str, float | None]) -> None:
    """This probe's value of each metric over the baseline's median of it: 1.0 is the
    baseline's typical run, 2.0 twice as slow (tokens/s: half the throughput is 0.5). A
    metric this run or the baseline lacks (or a baseline median of 0) has no sample."""
    from promptpath.core.change.metrics import metric, value_of

    out.family(
        "promptpath_baseline_ratio",
        "gauge",
        "This probe's value over the module's baseline median (1 = as the baseline).",
    )
    for name in RATIO_METRICS:
        base = baseline.get(f"{name}_p50")
        value = value_of(metric(name), outcome.report)
        if base is None or value is None or base <= 0:
            continue
        out.sample("promptpath_baseline_ratio", round(value / base, 6), metric=name)


@dataclass(slots=True)
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, value: float) -> None:
        for i, le in enumerate(DURATION_BUCKETS):
            if value <= le:
                self.counts[i] += 1
        self.total += value
        self.count += 1


@dataclass(slots=True)
class Health:
    """The exporter's own counters, kept for the life of the process (reloads included)."""

    probes: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # module, target, result
    cache_hits: Counter[tuple[str, str]] = field(default_factory=Counter)  # module, target
    refused: Counter[str] = field(default_factory=Counter)
    durations: dict[str, _Histogram] = field(default_factory=dict)  # by module
    reloads: Counter[str] = field(default_factory=Counter)  # success / failure
    last_reload_ok: bool = True
    last_reload_success_unix: float = 0.0
    scrapes: Counter[str] = field(default_factory=Counter)  # by path
    otlp: Counter[str] = field(default_factory=Counter)  # exported / failed / dropped

    def probed(self, module: str, target: str, outcome: Outcome) -> None:
        self.probes[(module, target, outcome.result)] += 1
        self.durations.setdefault(module, _Histogram()).observe(outcome.duration_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class GuardState:
    in_flight: int
    max_in_flight: int
    #: target -> (budget per day, tokens left today); targets without a budget absent.
    budgets: Mapping[str, tuple[int, int]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessState:
    open_fds: int | None
    max_fds: int | None
    resident_bytes: int | None
    cpu_seconds: float
    start_unix: float
    tasks: int


def health_text(
    health: Health,
    guard: GuardState,
    process: ProcessState,
    *,
    version: str,
    pairs: Sequence[tuple[str, str]],
    connections: ConnectionStats | None = None,
) -> str:
    """The body of GET /metrics; every configured (target, module) pair has its counters
    from the start (0), so a rate() over them never begins with a missing series."""
    modules = sorted({module for _target, module in pairs})
    out = Exposition({})
    out.family("promptpath_exporter_build_info", "gauge", "The exporter's version.")
    out.sample("promptpath_exporter_build_info", 1, version=version)
    name = "promptpath_exporter_probes_total"
    out.family(name, "counter", "Probes run, by module, target and result.")
    # dict's |, not Counter's: Counter's union drops the zeros.
    probes = {(m, t, r): 0 for t, m in pairs for r in RESULTS} | dict(health.probes)
    for (module, target, result), n in sorted(probes.items()):
        out.sample(name, n, module=module, target=target, result=result)
    name = "promptpath_exporter_cache_hits_total"
    out.family(name, "counter", "Scrapes answered with the last result (the minimum interval).")
    hits = {(m, t): 0 for t, m in pairs} | dict(health.cache_hits)
    for (module, target), n in sorted(hits.items()):
        out.sample(name, n, module=module, target=target)
    name = "promptpath_exporter_scrapes_refused_total"
    out.family(name, "counter", "Scrapes refused without a probe, by reason.")
    for reason in REFUSALS:
        out.sample(name, health.refused[reason], reason=reason)
    name = "promptpath_exporter_probe_duration_seconds"
    out.family(name, "histogram", "How long probes took, by module.")
    for module in modules:
        hist = health.durations.get(module, _Histogram())
        cumulative = list(zip(DURATION_BUCKETS, hist.counts, strict=True))
        out.histogram(name, cumulative, round(hist.total, 6), hist.count, module=module)
    out.family("promptpath_exporter_probes_in_flight", "gauge", "Probes running now.")
    out.sample("promptpath_exporter_probes_in_flight", guard.in_flight)
    out.family("promptpath_exporter_max_in_flight", "gauge", "The cap on probes in flight.")
    out.sample("promptpath_exporter_max_in_flight", guard.max_in_flight)
    if guard.budgets:
        out.family(
            "promptpath_exporter_budget_tokens", "gauge", "A target's token budget per UTC day."
        )
        for target, (budget, _left) in sorted(guard.budgets.items()):
            out.sample("promptpath_exporter_budget_tokens", budget, target=target)
        out.family(
            "promptpath_exporter_budget_tokens_left",
            "gauge",
            "Tokens a target may still spend today (each probe charged its most).",
        )
        for target, (_budget, left) in sorted(guard.budgets.items()):
            out.sample("promptpath_exporter_budget_tokens_left", left, target=target)
    name = "promptpath_exporter_config_reloads_total"
    out.family(name, "counter", "Config reloads (SIGHUP, POST /-/reload), by result.")
    for result in ("success", "failure"):
        out.sample(name, health.reloads[result], result=result)
    out.family(
        "promptpath_exporter_config_last_reload_successful",
        "gauge",
        "1 when the last reload loaded the config, 0 when it kept the old one.",
    )
    out.sample("promptpath_exporter_config_last_reload_successful", int(health.last_reload_ok))
    out.family(
        "promptpath_exporter_config_last_reload_success_timestamp_seconds",
        "gauge",
        "When the config in use was loaded (Unix time).",
    )
    out.sample(
        "promptpath_exporter_config_last_reload_success_timestamp_seconds",
        round(health.last_reload_success_unix, 3),
    )
    name = "promptpath_exporter_http_requests_total"
    out.family(name, "counter", "HTTP requests answered, by path.")
    for path, n in sorted(health.scrapes.items()):
        out.sample(name, n, path=path)
    name = "promptpath_exporter_otlp_exports_total"
    out.family(name, "counter", "Fresh probes sent to otlp_endpoint, by result.")
    for result in ("exported", "failed", "dropped"):
        out.sample(name, health.otlp[result], result=result)
    if connections is not None:
        out.family("promptpath_exporter_http_connections", "gauge", "HTTP connections open now.")
        out.sample("promptpath_exporter_http_connections", connections.open)
        name = "promptpath_exporter_http_connections_closed_total"
        out.family(
            name,
            "counter",
            "HTTP connections the exporter closed itself, by reason (a request too slow,"
            " an idle keep-alive, an answer not taken, the longest waiting one closed to"
            " make room, one past a peer's limit).",
        )
        for reason in CLOSE_REASONS:
            out.sample(name, connections.closed[reason], reason=reason)
    out.family("promptpath_exporter_asyncio_tasks", "gauge", "asyncio tasks alive.")
    out.sample("promptpath_exporter_asyncio_tasks", process.tasks)
    # The process_* names every Prometheus client library uses.
    if process.open_fds is not None:
        out.family("process_open_fds", "gauge", "Number of open file descriptors.")
        out.sample("process_open_fds", process.open_fds)
    if process.max_fds is not None:
        out.family("process_max_fds", "gauge", "Maximum number of open file descriptors.")
        out.sample("process_max_fds", process.max_fds)
    if process.resident_bytes is not None:
        out.family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
        out.sample("process_resident_memory_bytes", process.resident_bytes)
    out.family("process_cpu_seconds_total", "counter", "User and system CPU time in seconds.")
    out.sample("process_cpu_seconds_total", round(process.cpu_seconds, 3))
    out.family(
        "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch."
    )
    out.sample("process_start_time_seconds", round(process.start_unix, 3))
    return out.text()


__all__ = ["GuardState", "Health", "ProcessState", "Served", "health_text", "probe_text"]
