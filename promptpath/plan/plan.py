"""The Plan: everything a run was asked to do, checked, frozen, split by who reads it.

``resolve.resolve()`` builds it from the command line, the profile and the environment;
nothing after that re-checks an option. Who reads what:

- ``trace``: the tracer's spec (options.RunOptions): the request (dialect, model, prompt,
  headers, client shape, key), the path (URL, --resolve/--connect-to pins, proxy, TLS,
  family) and the limits (timeout, max tokens). Kept as one value because the tracer
  reads it by these field names; probes derive their own requests from it with
  ``RunOptions.derive``.
- ``probes`` and ``probe_settings``: which probes run, and each probe's typed settings.
- ``series``: --count, --interval, --reuse, --concurrency, --connections.
- ``compare_runs``: --compare-http's runs per protocol (None: not comparing).
- ``outputs``: --json, --fail-on, the SLOs, the exports, the OTLP export, --baseline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from promptpath.core.series_plan import SeriesPlan
from promptpath.options import RunOptions
from promptpath.outputs.deliver import ExportPlan
from promptpath.outputs.otlp import OtlpPlan
from promptpath.probes.settings import ProbeSettings

if TYPE_CHECKING:
    from promptpath.core.slo import SLO
    from promptpath.probes.base import Probe

FailOn = Literal["warn", "fail"]
ModeName = Literal["single", "compare", "series", "load"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Baseline:
    """``--baseline FILE``: the runs a series is held to, and their SLO values."""

    source: str
    kind: str
    runs: tuple[Mapping[str, Any], ...]
    #: SLO metric name → the baseline's value (core/change/baseline.py).
    values: Mapping[str, float | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Outputs:
    """Where the report goes and what decides its exit code besides the run itself."""

    json_out: bool = False
    fail_on: FailOn = "fail"
    slos: tuple[SLO, ...] = ()
    exports: ExportPlan = field(default_factory=ExportPlan)
    #: --otlp-endpoint or the OTEL_* variables: spans and metrics to a collector.
    otlp: OtlpPlan | None = None
    #: --baseline FILE: what the series is compared with (its SLOs resolved against it).
    baseline: Baseline | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    trace: RunOptions
    probes: tuple[type[Probe], ...] = ()
    probe_settings: ProbeSettings = field(default_factory=ProbeSettings)
    series: SeriesPlan = field(default_factory=SeriesPlan)
    compare_runs: int | None = None
    outputs: Outputs = field(default_factory=Outputs)

    @property
    def mode(self) -> ModeName:
        """single (with --warm, its second request), compare, series (one after another)
        or load (--concurrency)."""
        if self.compare_runs is not None:
            return "compare"
        if self.series.concurrency:
            return "load"
        if self.series.is_series:
            return "series"
        return "single"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExporterPlan:
    """`promptpath exporter`: where its config is, where it listens, how it stops."""

    config: Path
    host: str
    port: int
    drain_timeout_s: float = 10.0
    check_only: bool = False
    #: --web.enable-lifecycle: POST /-/reload answers (as Prometheus' flag of that name).
    enable_lifecycle: bool = False
