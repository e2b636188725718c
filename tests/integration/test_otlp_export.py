"""The OTLP export read back: `run` against the reference endpoint on loopback sends its
spans and metrics to a loopback OTLP/HTTP receiver (tests/helpers/otlpreceiver.py), which
decodes them with opentelemetry-proto's ExportTraceServiceRequest and
ExportMetricsServiceRequest; each is checked against the run's own --json report.

Facts checked by hand first (promptpath serve on loopback, the receiver, python -m
promptpath run … --otlp-endpoint): the reference endpoint echoes the requested model in
every chunk ("model": "gpt-4o-mini"), so gen_ai.response.model equals the request's; it
reports usage with prompt_tokens 11 for the default prompt; an answer with
x-promptpath-status: 401 exits 6; the SDK sends cumulative histograms (temporality 2).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.otlpreceiver import OtlpReceiver, attributes, otlp_receiver
from tests.helpers.refserver import RefServer

pytest.importorskip("opentelemetry.sdk")

KEY = "sk-otel-never-sent-0123456789abcdef"
QUERY_SECRET = "qs3cretQ42"
FAST = ("-H", "x-promptpath-ttft-ms: 60", "-H", "x-promptpath-tokens: 5", "--http", "2")
CLIENT, INTERNAL = 3, 1  # opentelemetry.proto.trace.v1.Span.SpanKind
STATUS_ERROR = 2  # Status.StatusCode.STATUS_CODE_ERROR
CUMULATIVE = 2  # AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
# gen-ai-metrics.md's ExplicitBucketBoundaries, copied from the conventions (not from ours).
GENAI_SECONDS = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
]  # fmt: skip
GENAI_TOKENS = [
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
]  # fmt: skip


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as r:
        yield r


def _run(server: RefServer, receiver: OtlpReceiver, *args: str, **environ: str) -> CliResult:
    receiver.clear()
    assert server.ca is not None
    return run_cli(
        "run",
        server.path("/v1/chat/completions"),
        *("--cacert", server.ca, "--json", *args),
        environ={"OPENAI_API_KEY": KEY, **environ},
    )


def _spans(receiver: OtlpReceiver) -> tuple[dict[str, object], list[Any]]:
    """The resource attributes and every span of the one traces request received."""
    (request,) = receiver.of("/v1/traces")
    (resource_spans,) = request.message.resource_spans
    spans = [s for scope in resource_spans.scope_spans for s in scope.spans]
    return attributes(resource_spans.resource.attributes), spans


def _metrics(receiver: OtlpReceiver) -> dict[str, Any]:
    (request,) = receiver.of("/v1/metrics")
    (resource_metrics,) = request.message.resource_metrics
    return {m.name: m for scope in resource_metrics.scope_metrics for m in scope.metrics}


@pytest.fixture(scope="module")
def healthy(refserver_tls: RefServer, receiver: OtlpReceiver) -> dict[str, Any]:
    """One healthy run, configured by the standard variables alone (no option)."""
    url = refserver_tls.path(f"/v1/chat/completions?api_token={QUERY_SECRET}")
    receiver.clear()
    assert refserver_tls.ca is not None
    result = run_cli(
        *("run", url, "--cacert", refserver_tls.ca, "--json", *FAST),
        environ={
            "OPENAI_API_KEY": KEY,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=lab,vantage=eu%2Cwest",
            "OTEL_SERVICE_NAME": "probe-eu",
        },
    )
    assert result.exit_code == 0, result.stderr
    resource, spans = _spans(receiver)
    return {
        "report": json.loads(result.stdout),
        "resource": resource,
        "spans": spans,
        "metrics": _metrics(receiver),
        "bodies": [r.body for r in receiver.received],
        "stderr": result.stderr,
    }


def test_span_tree_is_one_client_span_with_a_child_per_stage(healthy: dict[str, Any]) -> None:
    report, spans = healthy["report"], healthy["spans"]
    (root,) = [s for s in spans if s.kind == CLIENT]
    assert root.name == f"chat {report['target']['model']}"
    children = [s for s in spans if s is not root]
    assert all(s.kind == INTERNAL and s.parent_span_id == root.span_id for s in children)
    assert all(s.trace_id == root.trace_id for s in children)
    # The waterfall's own stages (core/analysis.stage_spans), in its order.
    assert [s.name for s in children] == [s["stage"] for s in report["spans_ms"]]
    assert [s.name for s in children] == [
        "dns", "connect", "tls", "request", "wait", "first_token", "streaming",
    ]  # fmt: skip


def test_span_instants_are_the_reports_own(healthy: dict[str, Any]) -> None:
    report, spans = healthy["report"], healthy["spans"]
    (root,) = [s for s in spans if s.kind == CLIENT]
    t0 = report["started_unix_ns"]
    assert root.start_time_unix_nano == t0
    # The same data: the report's µs-rounded offsets on t0's anchor, 1 µs of rounding.
    for span, expected in zip((s for s in spans if s is not root), report["spans_ms"], strict=True):
        assert abs(span.start_time_unix_nano - t0 - expected["start"] * 1e6) <= 1000
        assert abs(span.end_time_unix_nano - t0 - expected["end"] * 1e6) <= 1000
    milestones = report["milestones_ms"]
    wait = next(s for s in spans if s.name == "wait")
    assert abs(wait.start_time_unix_nano - t0 - milestones["request_sent"] * 1e6) <= 1000
    assert abs(wait.end_time_unix_nano - t0 - milestones["ttfb"] * 1e6) <= 1000
    assert abs(root.end_time_unix_nano - t0 - milestones["end"] * 1e6) <= 1000


def test_span_attributes_follow_the_conventions(healthy: dict[str, Any]) -> None:
    report = healthy["report"]
    (root,) = [s for s in healthy["spans"] if s.kind == CLIENT]
    attrs = attributes(root.attributes)
    target = report["target"]
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == target["model"]
    assert attrs["gen_ai.response.model"] == target["model"]  # the endpoint echoes it
    assert attrs["gen_ai.usage.output_tokens"] == 5
    assert attrs["gen_ai.usage.input_tokens"] == report["tokens"]["usage"]["input_tokens"] == 11
    assert attrs["server.address"] == target["host"] and attrs["server.port"] == target["port"]
    assert attrs["network.protocol.version"] == "2"
    assert attrs["http.response.status_code"] == 200
    assert attrs["url.full"].endswith("/v1/chat/completions?api_token=REDACTED")
    assert attrs["gen_ai.response.time_to_first_chunk"] == pytest.approx(
        report["ttft_ms"]["from_start"] / 1000
    )
    assert "error.type" not in attrs and root.status.code != STATUS_ERROR


def test_resource_attributes_come_from_the_environment(healthy: dict[str, Any]) -> None:
    resource = healthy["resource"]
    assert resource["service.name"] == "probe-eu"  # OTEL_SERVICE_NAME
    assert resource["deployment.environment.name"] == "lab"
    assert resource["vantage"] == "eu,west"  # percent-decoded
    assert resource["telemetry.sdk.language"] == "python"


def test_neither_the_key_nor_the_query_secret_is_sent(healthy: dict[str, Any]) -> None:
    for body in healthy["bodies"]:
        assert KEY.encode() not in body and QUERY_SECRET.encode() not in body
        assert KEY[:16].encode() not in body


def test_metrics_have_the_conventions_names_units_and_buckets(healthy: dict[str, Any]) -> None:
    metrics, report = healthy["metrics"], healthy["report"]
    expected = {
        "gen_ai.client.operation.duration": ("s", GENAI_SECONDS),
        "gen_ai.client.operation.time_to_first_chunk": ("s", GENAI_SECONDS),
        "gen_ai.client.operation.time_per_output_chunk": ("s", GENAI_SECONDS),
        "gen_ai.client.token.usage": ("{token}", GENAI_TOKENS),
    }
    for name, (unit, buckets) in expected.items():
        metric = metrics[name]
        assert metric.unit == unit, name
        assert metric.histogram.aggregation_temporality == CUMULATIVE
        for point in metric.histogram.data_points:
            assert list(point.explicit_bounds) == buckets, name
            assert attributes(point.attributes)["gen_ai.provider.name"] == "openai"
    # One value per chunk after the first: the report's gaps.
    (chunks,) = metrics["gen_ai.client.operation.time_per_output_chunk"].histogram.data_points
    assert chunks.count == len(report["tokens"]["gaps"]) == 4
    assert chunks.sum == pytest.approx(sum(report["tokens"]["gaps"]) / 1000)
    (first,) = metrics["gen_ai.client.operation.time_to_first_chunk"].histogram.data_points
    assert first.sum == pytest.approx(report["ttft_ms"]["from_start"] / 1000)
    tokens = {
        attributes(p.attributes)["gen_ai.token.type"]: p.sum
        for p in metrics["gen_ai.client.token.usage"].histogram.data_points
    }
    assert tokens == {"input": 11, "output": 5}


def test_stage_histograms_carry_each_stage(healthy: dict[str, Any]) -> None:
    metric = healthy["metrics"]["promptpath.stage.duration"]
    assert metric.unit == "s"
    stages = {
        attributes(p.attributes)["promptpath.stage"]: p.sum for p in metric.histogram.data_points
    }
    expected = {s["stage"]: (s["end"] - s["start"]) / 1000 for s in healthy["report"]["spans_ms"]}
    assert stages == pytest.approx(expected, abs=1e-6)


def test_the_report_says_the_export_went_through(healthy: dict[str, Any]) -> None:
    otlp = healthy["report"]["otlp"]
    assert otlp["exported"] is True and otlp["error"] is None
    assert otlp["spans"] == len(healthy["spans"])
    assert "warning" not in healthy["stderr"]


def test_an_unauthorised_answer_is_error_type_401(
    refserver_tls: RefServer, receiver: OtlpReceiver
) -> None:
    result = _run(
        refserver_tls, receiver, "--otlp-endpoint", receiver.url,
        "-H", "x-promptpath-status: 401",
    )  # fmt: skip
    assert result.exit_code == 6, result.stderr  # the run's own code, export or not
    _, spans = _spans(receiver)
    (root,) = [s for s in spans if s.kind == CLIENT]
    attrs = attributes(root.attributes)
    assert attrs["error.type"] == "401" and attrs["http.response.status_code"] == 401
    assert root.status.code == STATUS_ERROR and "401" in root.status.message
    (duration,) = _metrics(receiver)["gen_ai.client.operation.duration"].histogram.data_points
    assert attributes(duration.attributes)["error.type"] == "401"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_connection_is_error_type_refused(receiver: OtlpReceiver) -> None:
    receiver.clear()
    url = f"http://127.0.0.1:{_closed_port()}/v1/chat/completions"
    result = run_cli("run", url, "--json", "--otlp-endpoint", receiver.url)
    assert result.exit_code == 4, result.stderr
    _, spans = _spans(receiver)
    (root,) = [s for s in spans if s.kind == CLIENT]
    assert attributes(root.attributes)["error.type"] == "refused"
    connect = next(s for s in spans if s.name == "connect")
    assert connect.status.code == STATUS_ERROR  # the stage it failed in


def test_a_series_is_one_trace_per_run(refserver_tls: RefServer, receiver: OtlpReceiver) -> None:
    result = _run(refserver_tls, receiver, "--otlp-endpoint", receiver.url, "--count", "2", *FAST)
    assert result.exit_code == 0, result.stderr
    _, spans = _spans(receiver)
    roots = [s for s in spans if s.kind == CLIENT]
    assert len(roots) == 2 and roots[0].trace_id != roots[1].trace_id
    assert json.loads(result.stdout)["otlp"]["exported"] is True


@pytest.mark.parametrize("collector", ["down", "silent"])
def test_a_dead_collector_costs_the_timeout_and_one_warning(
    refserver_tls: RefServer, collector: str
) -> None:
    stall = threading.Event()
    with otlp_receiver() as silent:
        silent.stall = stall
        endpoint = f"http://127.0.0.1:{_closed_port()}" if collector == "down" else silent.url
        started = time.monotonic()
        assert refserver_tls.ca is not None
        result = run_cli(
            *("run", refserver_tls.path("/v1/chat/completions"), "--cacert", refserver_tls.ca),
            *("--json", "--otlp-endpoint", endpoint, *FAST),
            environ={"OTEL_EXPORTER_OTLP_TIMEOUT": "1000"},
        )
        elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.stderr  # the run passed: its code, not the export's
    warnings = [line for line in result.stderr.splitlines() if "OTLP export" in line]
    assert len(warnings) == 1 and "(the exit code is the run's)" in warnings[0]
    otlp = json.loads(result.stdout)["otlp"]
    assert otlp["exported"] is False and otlp["error"]
    assert otlp["error"] in warnings[0]
    # 1 s of export timeout and 2 s of hard bound at most, on top of a run of well under
    # a second here; generous for a loaded machine, far below a hang.
    assert elapsed < 10, elapsed


def test_a_redirect_is_not_a_delivery(refserver_tls: RefServer) -> None:
    """A collector (or a load balancer before it) that answers 307 took nothing: the
    OpenTelemetry SDK 1.45 counts any status below 400 as exported and does not follow
    the redirect (checked by hand: OTLPSpanExporter.export returned SUCCESS for a 307
    and nothing reached the Location), so the report said ``exported: true``."""
    with otlp_receiver() as moved:
        moved.status = 307
        moved.location = f"{moved.url}/elsewhere/v1/traces"
        result = _run(refserver_tls, moved, "--otlp-endpoint", moved.url, *FAST)
    assert result.exit_code == 0, result.stderr  # the run's own code
    otlp = json.loads(result.stdout)["otlp"]
    assert otlp["exported"] is False
    assert "307" in otlp["error"] and "nothing delivered" in otlp["error"]
    # Not followed: the redirect's target never saw a request.
    assert not [p for p in moved.posted if p.startswith("/elsewhere")], moved.posted
    assert "OTLP export" in result.stderr


def test_compare_http_takes_no_otlp_endpoint(refserver_tls: RefServer) -> None:
    result = run_cli(
        "run", refserver_tls.path("/v1/chat/completions"), "--compare-http",
        "--otlp-endpoint", "http://127.0.0.1:4318",
    )  # fmt: skip
    assert result.exit_code == 2 and "--otlp-endpoint" in result.stderr


@pytest.mark.parametrize("environ", [False, True])
def test_an_unclosed_ipv6_bracket_is_exit_2_naming_the_option_in_json_too(
    environ: bool, refserver_tls: RefServer
) -> None:
    # urlsplit's ValueError ("Invalid IPv6 URL") ended the run with exit 70 before.
    url = "http://collector:pw0tlp@[::1"
    if environ:
        args, env = (), {"OTEL_EXPORTER_OTLP_ENDPOINT": url}
    else:
        args, env = ("--otlp-endpoint", url), {}
    target = refserver_tls.path("/v1/chat/completions")
    result = run_cli("run", target, "--json", *args, environ=env)
    assert result.exit_code == 2, result.stderr
    error = json.loads(result.stdout)["error"]
    said = "OTEL_EXPORTER_OTLP_ENDPOINT" if environ else "--otlp-endpoint"
    assert error["stage"] == "config" and f"{said} is not a valid URL" in error["message"]
    assert "pw0tlp" not in result.stdout + result.stderr


def test_send_report_exports_a_finished_report_for_other_callers(
    healthy: dict[str, Any], receiver: OtlpReceiver
) -> None:
    from promptpath.outputs.otlp import send_report

    receiver.clear()
    outcome = send_report(healthy["report"], receiver.url, resource={"vantage": "fleet-1"})
    assert outcome.exported and outcome.spans == len(healthy["spans"])
    resource, spans = _spans(receiver)
    assert resource["vantage"] == "fleet-1" and resource["service.name"] == "promptpath"
    assert [s.name for s in spans] == [s.name for s in healthy["spans"]]
