"""Both settings of the GenAI names, read back with opentelemetry-proto: `run` against the
reference endpoint on loopback sends to the loopback OTLP receiver, once with
OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental and once with that variable and
--otel-semconv default; the names decoded are exactly those docs/otel.md's table gives
each setting (report/otel_names.py, held to the table by tests/unit/test_otel_names_doc.py).

Facts checked by hand first (promptpath serve, the receiver, `run … --otlp-endpoint`):
with ``x-promptpath-reasoning: 2`` the reference endpoint's usage chunk carries
``completion_tokens_details.reasoning_tokens: 2`` beside prompt_tokens 11 and
completion_tokens 5; the SDK sends a counter as a monotonic cumulative Sum of ints.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from promptpath.report.otel_names import INSTRUMENTS
from tests.helpers.cli import run_cli
from tests.helpers.otlpreceiver import OtlpReceiver, attributes, otlp_receiver
from tests.helpers.refserver import RefServer

pytest.importorskip("opentelemetry.sdk")

KEY = "sk-semconv-never-sent-0123456789abcdef"
FAST = (
    *("-H", "x-promptpath-ttft-ms: 40", "-H", "x-promptpath-tokens: 5"),
    *("-H", "x-promptpath-reasoning: 2", "--http", "2"),
)
OPT_IN = {"OTEL_SEMCONV_STABILITY_OPT_IN": "http,gen_ai_latest_experimental"}
CUMULATIVE = 2
# From the conventions' pages (client-inference.md, gen-ai-token-metrics.md), not from ours.
SECONDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
          67108864]  # fmt: skip


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with otlp_receiver() as r:
        yield r


def _export(
    server: RefServer, receiver: OtlpReceiver, *args: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, object]]:
    """(report, metrics by name, root span attributes) of one run sent to ``receiver``."""
    receiver.clear()
    assert server.ca is not None
    result = run_cli(
        *("run", server.path("/v1/chat/completions"), "--cacert", server.ca, "--json"),
        *(*FAST, "--otlp-endpoint", receiver.url, *args),
        environ={"OPENAI_API_KEY": KEY, **OPT_IN},
    )
    assert result.exit_code == 0, result.stderr
    (metrics_request,) = receiver.of("/v1/metrics")
    (resource_metrics,) = metrics_request.message.resource_metrics
    metrics = {m.name: m for s in resource_metrics.scope_metrics for m in s.metrics}
    (traces_request,) = receiver.of("/v1/traces")
    spans = [
        span
        for rs in traces_request.message.resource_spans
        for scope in rs.scope_spans
        for span in scope.spans
    ]
    (root,) = [s for s in spans if s.kind == 3]  # SPAN_KIND_CLIENT
    for received in receiver.received:
        assert KEY.encode() not in received.body
    return json.loads(result.stdout), metrics, attributes(root.attributes)


def test_the_opt_in_variable_sends_the_latest_names_only(
    refserver_tls: RefServer, receiver: OtlpReceiver
) -> None:
    report, metrics, span = _export(refserver_tls, receiver)
    assert report["tokens"]["usage"]["reasoning_tokens"] == 2
    latest = {i.name for i in INSTRUMENTS["latest"].values()}
    # Everything but the cache counters: its chat completions stream reports no cache count.
    assert set(metrics) == latest - {
        "gen_ai.client.inference.usage.cache_read.input_tokens",
        "gen_ai.client.inference.usage.cache_write.input_tokens",
    }
    for name in ("duration", "time_to_first_chunk", "time_per_output_chunk"):
        metric = metrics[f"gen_ai.client.inference.{name}"]
        assert metric.unit == "s"
        (point,) = metric.histogram.data_points
        assert list(point.explicit_bounds) == SECONDS
    sums = {}
    for name in ("input_tokens", "output_tokens", "reasoning.output_tokens"):
        metric = metrics[f"gen_ai.client.inference.usage.{name}"]
        assert metric.unit == "{token}"
        assert metric.WhichOneof("data") == "sum"
        assert metric.sum.is_monotonic and metric.sum.aggregation_temporality == CUMULATIVE
        (point,) = metric.sum.data_points
        assert attributes(point.attributes)["gen_ai.token.modality"] == "unknown"
        sums[name] = point.as_int
    assert sums == {"input_tokens": 11, "output_tokens": 5, "reasoning.output_tokens": 2}
    for name, value in (("input_tokens", 11), ("output_tokens", 5)):
        (point,) = metrics[f"gen_ai.client.inference.operation.{name}"].histogram.data_points
        assert list(point.explicit_bounds) == TOKENS
        assert point.sum == value
    assert span["gen_ai.usage.reasoning.output_tokens"] == 2
    assert span["gen_ai.request.stream"] is True
    assert span["gen_ai.response.time_to_first_chunk"] == pytest.approx(
        report["ttft_ms"]["from_start"] / 1000
    )


def test_the_option_default_wins_over_the_variable(
    refserver_tls: RefServer, receiver: OtlpReceiver
) -> None:
    _report, metrics, span = _export(refserver_tls, receiver, "--otel-semconv", "default")
    assert set(metrics) == {i.name for i in INSTRUMENTS["default"].values()}
    tokens = {
        attributes(p.attributes)["gen_ai.token.type"]: p.sum
        for p in metrics["gen_ai.client.token.usage"].histogram.data_points
    }
    assert tokens == {"input": 11, "output": 5}
    assert "gen_ai.usage.reasoning.output_tokens" not in span


def test_a_bad_setting_is_exit_2_naming_the_option(refserver_tls: RefServer) -> None:
    result = run_cli(
        "run", refserver_tls.path("/v1/chat/completions"), "--otel-semconv", "newest",
        environ={"OPENAI_API_KEY": KEY},
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--otel-semconv wants default or latest" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_prompt_caches_counts_reach_the_report_and_the_latest_counters(
    refserver_tls: RefServer, receiver: OtlpReceiver
) -> None:
    """The reference endpoint's Messages stream says cache_creation_input_tokens 0 and
    cache_read_input_tokens 0 in message_start (as Anthropic's API does without caching):
    counts reported, so the cache counters are sent, with those zeros."""
    receiver.clear()
    assert refserver_tls.ca is not None
    result = run_cli(
        *("run", refserver_tls.path("/v1/messages"), "--cacert", refserver_tls.ca, "--json"),
        *("-H", "x-promptpath-tokens: 5", "--http", "2", "--otlp-endpoint", receiver.url),
        environ={"ANTHROPIC_API_KEY": KEY, **OPT_IN},
    )
    assert result.exit_code == 0, result.stderr
    usage = json.loads(result.stdout)["tokens"]["usage"]
    assert usage["cached_input_tokens"] == 0 and usage["cache_write_input_tokens"] == 0
    assert usage["cached_apart"] is True
    (request,) = receiver.of("/v1/metrics")
    sums = {
        m.name: m.sum.data_points[0].as_int
        for rm in request.message.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.WhichOneof("data") == "sum"
    }
    assert sums["gen_ai.client.inference.usage.cache_read.input_tokens"] == 0
    assert sums["gen_ai.client.inference.usage.cache_write.input_tokens"] == 0
    assert sums["gen_ai.client.inference.usage.input_tokens"] == usage["input_tokens"]
    assert "gen_ai.client.inference.usage.reasoning.output_tokens" not in sums
