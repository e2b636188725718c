"""--otlp-endpoint and the OTEL_* variables: where the OTLP export goes, and sending it.

The export is OTLP/HTTP protobuf through the OpenTelemetry SDK, an optional extra
(``pip install 'promptpath[otel]'``); this module imports none of it until a run asks.
``plan_otlp`` reads the option and the environment once, before any request;
``send_otlp`` takes the finished JSON report (a run or a series, already redacted) and
pushes its spans and metrics, bounded in time: a collector that is down or never answers
costs at most the export timeout, then one warning line. The run's exit code stays what
the run earned: telemetry is a side channel, and a monitoring outage must not turn
passing CI jobs red (--pushgateway, which a CI job asks for to be read back, exits 10).

Environment (the OpenTelemetry SDK configuration specification's names):

- ``OTEL_EXPORTER_OTLP_ENDPOINT``: the base URL when --otlp-endpoint is not given; each
  signal goes to ``/v1/traces`` and ``/v1/metrics`` under it. The signal-specific
  ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``…_METRICS_ENDPOINT`` are used as they are.
- ``OTEL_RESOURCE_ATTRIBUTES`` (``key=value,…``, values percent-decoded) and
  ``OTEL_SERVICE_NAME`` (wins over a ``service.name`` there; default ``promptpath``).
- ``OTEL_EXPORTER_OTLP_TIMEOUT``: milliseconds, as the specification says (default 5000
  here, held between 100 ms and 60 s).
- ``OTEL_SDK_DISABLED=true`` turns the environment's export off (not an explicit option).
- ``OTEL_EXPORTER_OTLP_HEADERS`` and the certificate variables are read by the SDK's
  exporter itself; their values (a collector's token) are never printed.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import unquote, urlsplit, urlunsplit

from promptpath.core.errors import UsageError
from promptpath.report.otel_names import OPT_IN_VARIABLE, SEMCONVS, Semconv, semconv_from

EXTRA: Final = "pip install 'promptpath[otel]'"
#: The default bound on one export (both signals, sent side by side).
TIMEOUT_S: Final = 5.0
_TIMEOUT_RANGE_S: Final = (0.1, 60.0)
DEFAULT_SERVICE: Final = "promptpath"


@dataclass(frozen=True, slots=True, kw_only=True)
class OtlpPlan:
    """Where the spans and metrics go, with what resource, within what time."""

    traces_url: str
    metrics_url: str
    #: Resource attributes: OTEL_RESOURCE_ATTRIBUTES, service.name from OTEL_SERVICE_NAME.
    resource: tuple[tuple[str, str], ...] = ()
    timeout_s: float = TIMEOUT_S
    #: What configured it: "--otlp-endpoint" or the variable's name (for messages).
    source: str = "--otlp-endpoint"
    #: The endpoint as messages show it: no userinfo, no query.
    shown: str = field(default="", compare=False)
    #: Which GenAI conventions' names: --otel-semconv, else OTEL_SEMCONV_STABILITY_OPT_IN.
    semconv: Semconv = "default"


@dataclass(frozen=True, slots=True, kw_only=True)
class OtlpOutcome:
    """What an export did: the ``otlp`` object of the JSON report."""

    endpoint: str
    exported: bool
    spans: int
    data_points: int
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "exported": self.exported,
            "spans": self.spans,
            "data_points": self.data_points,
            "error": self.error,
        }


def otel_installed() -> bool:
    """The ``otel`` extra is there: the SDK and its OTLP/HTTP exporter."""
    try:
        return all(
            importlib.util.find_spec(name) is not None
            for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
        )
    except (ImportError, ValueError):  # a parent package missing, or a broken install
        return False


def shown_url(url: str) -> str:
    """``url`` without userinfo and query: what a message may print of an endpoint."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host, query="", fragment=""))


def check_endpoint(url: str, source: str) -> str:
    """An OTLP/HTTP endpoint: http(s)://HOST[:PORT][/PATH], no query or fragment."""
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:  # "Invalid IPv6 URL": an unclosed bracket. The URL is not
        # quoted: it may hold a password.
        raise UsageError(f"{source} is not a valid URL ({exc})", kind="bad_option") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"{source} wants http(s)://HOST:PORT (OTLP/HTTP), got {shown_url(url)!r}",
            kind="bad_option",
        )
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise UsageError(f"{source}: {exc}", kind="bad_option") from exc
    if parts.query or parts.fragment:
        raise UsageError(f"{source} takes no query or fragment", kind="bad_option")
    return url.strip()


def parse_resource_attributes(text: str) -> dict[str, str]:
    """OTEL_RESOURCE_ATTRIBUTES: ``key1=value1,key2=value2``, values percent-encoded (the
    W3C Baggage format, as the SDK specification says); a malformed pair is skipped, the
    way the SDK's own detector skips it."""
    attributes: dict[str, str] = {}
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        key = key.strip()
        if sep and key:
            attributes[key] = unquote(value.strip())
    return attributes


def _timeout(environ: Mapping[str, str]) -> float:
    raw = environ.get("OTEL_EXPORTER_OTLP_TIMEOUT", "").strip()
    try:
        seconds = float(raw) / 1000 if raw else TIMEOUT_S
    except ValueError:
        raise UsageError(
            f"OTEL_EXPORTER_OTLP_TIMEOUT wants milliseconds, got {raw!r}", kind="bad_option"
        ) from None
    low, high = _TIMEOUT_RANGE_S
    return min(max(seconds, low), high)


def _disabled(environ: Mapping[str, str]) -> bool:
    """OTEL_SDK_DISABLED=true: the environment's export is off."""
    return environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def pick_semconv(given: str | None, environ: Mapping[str, str]) -> Semconv:
    """--otel-semconv (``default`` or ``latest``) when given, else what
    OTEL_SEMCONV_STABILITY_OPT_IN says (``gen_ai_latest_experimental`` listed: latest)."""
    if given is None:
        return semconv_from(environ)
    value = given.strip().lower()
    for known in SEMCONVS:
        if value == known:
            return known
    raise UsageError(
        f"--otel-semconv wants default or latest, got {given!r}"
        f" (or set {OPT_IN_VARIABLE}=gen_ai_latest_experimental)",
        kind="bad_option",
    )


def plan_otlp(
    endpoint: str | None,
    environ: Mapping[str, str],
    say: Callable[[str], None],
    semconv: str | None = None,
) -> OtlpPlan | None:
    """The OTLP export this run makes, or None. ``endpoint`` is --otlp-endpoint; without
    it the environment decides. UsageError when --otlp-endpoint is given and cannot be
    honoured; the environment's variables only warn (``say``), since they may be set for
    every program of a machine. ``semconv`` is --otel-semconv (checked even when nothing
    is exported: a typo is a typo)."""
    chosen = pick_semconv(semconv, environ)
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    metrics = environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "").strip()
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if endpoint is not None:
        source, base, traces, metrics = "--otlp-endpoint", endpoint, "", ""
    elif not (base or traces or metrics) or _disabled(environ):
        return None
    else:
        source = "OTEL_EXPORTER_OTLP_ENDPOINT" if base else "OTEL_EXPORTER_OTLP_*_ENDPOINT"
    if not otel_installed():
        if endpoint is not None:
            raise UsageError(
                f"--otlp-endpoint needs the OpenTelemetry SDK: {EXTRA}", kind="bad_option"
            )
        say(f"promptpath: warning: {source} is set, but no OTLP export without the SDK: {EXTRA}")
        return None
    if base:
        base = check_endpoint(base, source).rstrip("/")

    def signal(specific: str, path: str) -> str:
        """The signal's own variable as it is, else the base URL's path for it ("":
        only the other signal's variable was set)."""
        if specific:
            return check_endpoint(specific, source)
        return f"{base}{path}" if base else ""

    traces_url, metrics_url = signal(traces, "/v1/traces"), signal(metrics, "/v1/metrics")
    resource = parse_resource_attributes(environ.get("OTEL_RESOURCE_ATTRIBUTES", ""))
    service = environ.get("OTEL_SERVICE_NAME", "").strip()
    resource["service.name"] = service or resource.get("service.name") or DEFAULT_SERVICE
    return OtlpPlan(
        traces_url=traces_url,
        metrics_url=metrics_url,
        resource=tuple(resource.items()),
        timeout_s=_timeout(environ),
        source=source,
        shown=shown_url(base or traces_url or metrics_url),
        semconv=chosen,
    )


def send_otlp(report: Mapping[str, Any], plan: OtlpPlan) -> OtlpOutcome:
    """Export ``report``'s spans and metrics; never raises, never waits past the bound.

    The SDK work runs in a daemon thread joined with the deadline: its exporters stop
    retrying at their own timeout, and a collector that dribbles its answer is left to
    the thread (a CLI run exits; the thread's socket times out)."""
    from promptpath.report.otel import count_points, telemetry

    runs = telemetry(report, plan.semconv)
    spans, points = count_points(runs)
    box: dict[str, str | None] = {}

    def work() -> None:
        from promptpath.outputs.otlp_sdk import export

        try:
            box["error"] = export(
                runs,
                traces_url=plan.traces_url,
                metrics_url=plan.metrics_url,
                resource=dict(plan.resource),
                timeout_s=plan.timeout_s,
                semconv=plan.semconv,
            )
        except Exception as exc:  # the SDK's failure is the export's, never the run's
            box["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=work, name="promptpath-otlp", daemon=True)
    worker.start()
    # The exporters' own deadline, plus the SDK's set-up and encoding.
    worker.join(plan.timeout_s + 2.0)
    if "error" not in box:
        error: str | None = f"no answer within {plan.timeout_s:g} s"
    else:
        error = box["error"]
    return OtlpOutcome(
        endpoint=plan.shown,
        exported=error is None,
        spans=spans,
        data_points=points,
        error=None if error is None else _scrub(error, plan),
    )


def send_plan(
    endpoint: str,
    *,
    resource: Mapping[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
    semconv: Semconv = "default",
) -> OtlpPlan:
    """The plan for a caller with an endpoint of its own (``promptpath exporter``'s
    ``otlp_endpoint``): the collector's base URL, the resource attributes
    (``service.name`` defaults to promptpath), the conventions' setting (the caller's
    OTEL_SEMCONV_STABILITY_OPT_IN: ``pick_semconv(None, environ)``). UsageError for an
    endpoint that is not http(s)://HOST[:PORT][/PATH]."""
    base = check_endpoint(endpoint, "otlp_endpoint").rstrip("/")
    attrs = {"service.name": DEFAULT_SERVICE, **(resource or {})}
    return OtlpPlan(
        traces_url=f"{base}/v1/traces",
        metrics_url=f"{base}/v1/metrics",
        resource=tuple(attrs.items()),
        timeout_s=timeout_s,
        source="otlp_endpoint",
        shown=shown_url(base),
        semconv=semconv,
    )


def send_report(
    report: Mapping[str, Any],
    endpoint: str,
    *,
    resource: Mapping[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
    semconv: Semconv = "default",
) -> OtlpOutcome:
    """``send_otlp`` of the JSON report of a finished run or series to ``endpoint``
    (``send_plan``'s)."""
    plan = send_plan(endpoint, resource=resource, timeout_s=timeout_s, semconv=semconv)
    return send_otlp(report, plan)


def _scrub(message: str, plan: OtlpPlan) -> str:
    """One line of at most 300 characters, the endpoints shown without userinfo, and no
    spelling of the credentials the userinfo holds (the SDK sends them as Basic)."""
    from promptpath.core.redaction import Redactor
    from promptpath.core.urlsafe import url_credentials

    credentials: list[str] = []
    for url in (plan.traces_url, plan.metrics_url):
        if url:
            message = message.replace(url, shown_url(url))
            credentials.extend(url_credentials(url))
    line = " ".join(Redactor.of(credentials).text(message).split())
    return line if len(line) <= 300 else line[:299] + "…"


__all__ = [
    "EXTRA",
    "OtlpOutcome",
    "OtlpPlan",
    "check_endpoint",
    "otel_installed",
    "parse_resource_attributes",
    "pick_semconv",
    "plan_otlp",
    "send_otlp",
    "send_plan",
    "send_report",
]
