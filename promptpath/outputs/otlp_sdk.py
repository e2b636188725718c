"""The OpenTelemetry SDK side of the OTLP export: telemetry in, two OTLP/HTTP requests out.

Imported only by ``otlp.send_otlp``'s worker thread, once a run asked for an export (the
``otel`` extra). Spans are built with the instants the report measured (the SDK takes
explicit start and end times), collected in memory, and exported in one request; the
histograms get the conventions' bucket boundaries through Views, are read once from an
in-memory reader (cumulative temporality, the SDK's default: what Prometheus' OTLP
receiver takes) and exported in one request. No global provider is set: a library caller's
own OpenTelemetry set-up is left alone.

The SDK logs its failures (``Failed to export spans batch …``) through ``logging``; with no
handler configured Python would print them on stderr as extra lines. A handler on the
``opentelemetry`` logger keeps them, per thread, and they become the one-line warning.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.version import __version__ as SDK_VERSION
from opentelemetry.trace import SpanKind, Status, StatusCode, set_span_in_context

from promptpath.report.otel import RunTelemetry, Span
from promptpath.report.otel_names import Semconv, instruments

SCOPE = "promptpath"


class _Captured(logging.Handler):
    """Keeps the SDK's warnings and errors per thread (the last few); prints nothing."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: dict[int, list[logging.LogRecord]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        kept = self.records.setdefault(threading.get_ident(), [])
        kept.append(record)
        del kept[:-8]

    def failure(self, fallback: str) -> str:
        """Why this thread's export failed: the SDK's last word and, when it gave up
        retrying, the error it kept retrying on (refused, timed out)."""
        records = self.records.pop(threading.get_ident(), [])
        if not records:
            return fallback
        last = _message(records[-1])
        cause = next(
            (
                r.args[0]
                for r in records
                if isinstance(r.args, tuple) and r.args and "Transient" in str(r.msg)
            ),
            None,
        )
        if cause is None:
            return last
        return f"{last.rstrip('.')}: {_cause(str(cause))}"


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except (TypeError, ValueError):  # a malformed record is not worth a traceback
        return str(record.msg)


_ERRNO = re.compile(r"\[Errno -?\d+\][^\"')]*|[Rr]ead timed out|timed out")


def _cause(text: str) -> str:
    """``[Errno 111] Connection refused`` out of requests' nested exception text."""
    found = _ERRNO.search(text)
    return found.group(0).strip() if found else text


_CAPTURE = _Captured()
_LOGGER = logging.getLogger("opentelemetry")
_LOGGER.addHandler(_CAPTURE)
_LOGGER.propagate = False


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("promptpath")
    except PackageNotFoundError:
        return "0"


def resource_for(resource: Mapping[str, str]) -> Resource:
    """The SDK's own telemetry.sdk.* attributes, service.version, then the plan's (from
    OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, already read from the run's environment:
    ``Resource.create`` would read os.environ again)."""
    attributes: dict[str, Any] = {
        "telemetry.sdk.language": "python",
        "telemetry.sdk.name": "opentelemetry",
        "telemetry.sdk.version": SDK_VERSION,
        "service.version": _version(),
    }
    attributes.update(resource)
    return Resource(attributes)


def _start(tracer: Any, span: Span, parent: Any | None) -> Any:
    kind = SpanKind.CLIENT if span.kind == "client" else SpanKind.INTERNAL
    context = None if parent is None else set_span_in_context(parent)
    return tracer.start_span(
        span.name,
        context=context,
        kind=kind,
        attributes=span.attributes,
        start_time=span.start_unix_ns,
    )


def _finish(otel_span: Any, span: Span) -> None:
    for event in span.events:
        otel_span.add_event(event.name, attributes=event.attributes, timestamp=event.time_unix_ns)
    if span.error is not None:
        otel_span.set_status(Status(StatusCode.ERROR, span.error))
    otel_span.end(end_time=span.end_unix_ns)


def build_spans(runs: Sequence[RunTelemetry], resource: Resource) -> tuple[ReadableSpan, ...]:
    """Each run's CLIENT span with its stages as INTERNAL children, finished and kept."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer(SCOPE, _version())
    for run in runs:
        root = _start(tracer, run.root, None)
        for stage in run.stages:
            _finish(_start(tracer, stage, root), stage)
        _finish(root, run.root)
    provider.shutdown()
    return memory.get_finished_spans()


def build_metrics(
    runs: Sequence[RunTelemetry], resource: Resource, semconv: Semconv = "default"
) -> Any:
    """The runs' recordings in the setting's instruments (report/otel_names.py): the
    histograms with the conventions' buckets, the token counters monotonic sums; read once."""
    reader = InMemoryMetricReader()
    table = instruments(semconv)
    views = [
        View(
            instrument_name=i.name,
            aggregation=ExplicitBucketHistogramAggregation(boundaries=i.buckets),
        )
        for i in table
        if i.kind == "histogram"
    ]
    provider = MeterProvider(
        resource=resource, metric_readers=[reader], views=views, shutdown_on_exit=False
    )
    meter = provider.get_meter(SCOPE, _version())
    made: dict[str, Any] = {}
    for i in table:
        create = meter.create_counter if i.kind == "counter" else meter.create_histogram
        made[i.name] = create(i.name, unit=i.unit, description=i.description)
    for run in runs:
        for recording in run.recordings:
            instrument = made[recording.instrument.name]
            if recording.instrument.kind == "counter":
                instrument.add(recording.value, attributes=recording.attributes)
            else:
                instrument.record(recording.value, attributes=recording.attributes)
    data = reader.get_metrics_data()
    provider.shutdown()
    return data


class _Answers:
    """The HTTP answers one exporter's requests got, seen through its own requests
    session (a public argument of both exporters). The SDK counts any status below 400
    as accepted (1.45: ``200 <= status < 400``, redirects not followed; older versions
    followed them with requests' defaults); OTLP/HTTP says a collector that took the data
    answers 200, so anything else delivered nothing."""

    def __init__(self) -> None:
        import requests

        self.statuses: list[tuple[int, str]] = []
        self.session = requests.Session()
        # Never followed: a redirect would send the telemetry (and the userinfo's Basic
        # credentials) to wherever the answer points.
        self.session.max_redirects = 0
        self.session.hooks["response"].append(self._seen)

    def _seen(self, response: Any, *args: Any, **kwargs: Any) -> None:
        self.statuses.append((int(response.status_code), str(response.reason or "")))

    def not_delivered(self) -> str | None:
        """Why an export the SDK called a success delivered nothing, or None."""
        if not self.statuses:
            return None
        status, reason = self.statuses[-1]
        if 200 <= status < 300:
            return None
        if 300 <= status < 400:
            return (
                f"the collector answered {status} {reason} (a redirect, not followed):"
                " nothing delivered"
            )
        return f"the collector answered {status} {reason}: nothing delivered"

    def verdict(self, sdk_ok: bool, fallback: str) -> str | None:
        """None when the data was delivered, else why not: a redirect in our words (the
        SDK's, with requests' redirect limit at 0, is "Exceeded 0 redirects"), any other
        failure in the SDK's."""
        said = None if sdk_ok else _CAPTURE.failure(fallback)
        ours = self.not_delivered()
        redirected = bool(self.statuses) and 300 <= self.statuses[-1][0] < 400
        if said is None or redirected:
            return ours or said
        return said

    def close(self) -> None:
        self.session.close()


def _send_spans(spans: tuple[ReadableSpan, ...], url: str, timeout_s: float) -> str | None:
    answers = _Answers()
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout_s, session=answers.session)
    try:
        ok = exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
        answers.close()
    return answers.verdict(ok, "traces not accepted")


def _send_metrics(data: Any, url: str, timeout_s: float) -> str | None:
    answers = _Answers()
    exporter = OTLPMetricExporter(endpoint=url, timeout=timeout_s, session=answers.session)
    try:
        result = exporter.export(data, timeout_millis=timeout_s * 1000)
    finally:
        exporter.shutdown()
        answers.close()
    return answers.verdict(result == MetricExportResult.SUCCESS, "metrics not accepted")


def export(
    runs: Sequence[RunTelemetry],
    *,
    traces_url: str,
    metrics_url: str,
    resource: Mapping[str, str],
    timeout_s: float,
    semconv: Semconv = "default",
) -> str | None:
    """Send the spans and the metrics side by side (a URL that is "" is skipped); None,
    or what went wrong (the first signal's failure, naming the signal)."""
    sdk_resource = resource_for(resource)
    jobs: list[tuple[str, Any]] = []
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="promptpath-otlp") as pool:
        if traces_url:
            spans = build_spans(runs, sdk_resource)
            jobs.append(("traces", pool.submit(_send_spans, spans, traces_url, timeout_s)))
        if metrics_url:
            data = build_metrics(runs, sdk_resource, semconv)
            jobs.append(("metrics", pool.submit(_send_metrics, data, metrics_url, timeout_s)))
        for signal, job in jobs:
            error = job.result()
            if error is not None:
                return f"{signal}: {error}"
    return None
