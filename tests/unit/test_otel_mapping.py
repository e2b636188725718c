"""The OTLP export's pure parts: the report mapped to spans and recordings, the plan read
from --otlp-endpoint and the OTEL_* variables, and the stream facts they need."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from promptpath.core.errors import UsageError
from promptpath.core.timeline import StreamEvent, Timeline, Usage
from promptpath.dialects.plugins import decoder_for
from promptpath.outputs.otlp import otel_installed, parse_resource_attributes, plan_otlp
from promptpath.report import otel
from promptpath.streams.sse import SSEMessage


def _decode(provider: Any, data: str, event: str = "") -> list[StreamEvent]:
    return decoder_for(provider).decode(
        SSEMessage(event=event, data=data, id=None, retry=None, t_ns=1)
    )


@pytest.mark.parametrize(
    ("provider", "data", "model"),
    [
        ("openai", '{"model":"gpt-4o-1","choices":[{"delta":{"content":"a"}}]}', "gpt-4o-1"),
        ("anthropic", '{"type":"message_start","message":{"model":"claude-x"}}', "claude-x"),
        ("responses", '{"type":"response.created","response":{"model":"gpt-5"}}', "gpt-5"),
        ("gemini", '{"candidates":[],"modelVersion":"gemini-2.5-flash"}', "gemini-2.5-flash"),
        # Azure's filter chunks carry "model": "": no name.
        ("azure", '{"model":"","choices":[],"prompt_filter_results":[]}', None),
        ("openai", '{"model":"' + "m" * 300 + '","choices":[]}', None),
    ],
)  # fmt: skip
def test_decoders_keep_the_model_a_stream_names(
    provider: str, data: str, model: str | None
) -> None:
    assert {e.model for e in _decode(provider, data)} == {model}


def _timeline(*events: StreamEvent) -> Timeline:
    timeline = Timeline(t0_ns=0, t0_unix_ns=0)
    timeline.events.extend(events)
    return timeline


def test_reported_usage_joins_anthropics_two_events() -> None:
    from promptpath.core.analysis import reported_usage, response_model

    start = StreamEvent(t_ns=1, kind="meta", usage=Usage(input_tokens=12), model="claude-x")
    delta = StreamEvent(t_ns=2, kind="meta", usage=Usage(output_tokens=40))
    timeline = _timeline(start, delta)
    assert reported_usage(timeline) == Usage(input_tokens=12, output_tokens=40)
    assert response_model(timeline) == "claude-x"
    assert reported_usage(_timeline()) is None


def _run(**over: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "schema": "promptpath.run/1",
        "target": {
            "url": "https://u:p@api.example/v1/chat/completions?api_key=[redacted]&x=1",
            "host": "api.example",
            "port": 443,
            "provider": "openai",
            "model": "gpt-4o",
        },
        "started_unix_ns": 1_700_000_000_000_000_000,
        "http_version": "HTTP/2",
        "status": 200,
        "response_model": "gpt-4o-2024-08-06",
        "request": {"method": "POST"},
        "spans_ms": [
            {"stage": "dns", "start": 0.0, "end": 1.5},
            {"stage": "connect", "start": 1.5, "end": 3.25},
            {"stage": "streaming", "start": 10.0, "end": 20.125},
        ],
        "milestones_ms": {"end": 20.5},
        "ttft_ms": {"from_start": 10.0},
        "tokens": {
            "count": 3,
            "usage": {"input_tokens": 7, "output_tokens": 5},
            "gaps": [4.0, 6.0],
        },
        "error": None,
        "findings": [{"probe": "tls", "verdict": "warn", "summary": "x" * 2000}],
    }
    run.update(over)
    return run


def test_span_instants_are_the_reports_offsets_on_its_anchor() -> None:
    (tele,) = otel.telemetry(_run())
    anchor = 1_700_000_000_000_000_000
    assert tele.root.start_unix_ns == anchor
    assert tele.root.end_unix_ns == anchor + 20_500_000  # the terminal marker came last
    assert [(s.name, s.start_unix_ns - anchor, s.end_unix_ns - anchor) for s in tele.stages] == [
        ("dns", 0, 1_500_000),
        ("connect", 1_500_000, 3_250_000),
        ("streaming", 10_000_000, 20_125_000),
    ]
    assert tele.root.name == "chat gpt-4o" and tele.root.kind == "client"
    (event,) = tele.root.events
    assert (
        event.name == "promptpath.finding"
        and len(str(event.attributes["promptpath.summary"])) == 512
    )


def test_attributes_follow_the_conventions() -> None:
    attrs = otel.telemetry(_run())[0].root.attributes
    assert attrs["url.full"] == (
        "https://REDACTED:REDACTED@api.example/v1/chat/completions?api_key=REDACTED&x=1"
    )
    assert attrs["network.protocol.version"] == "2"
    assert attrs["gen_ai.usage.input_tokens"] == 7 and attrs["gen_ai.usage.output_tokens"] == 5
    assert attrs["gen_ai.response.model"] == "gpt-4o-2024-08-06"
    assert attrs["gen_ai.response.time_to_first_chunk"] == 0.01
    assert "error.type" not in attrs
    assert "promptpath.response.time_to_first_output" not in attrs  # no text: none


def test_the_first_output_is_an_attribute_of_its_own_beside_the_first_chunk() -> None:
    run = _run(first_output_ms={"from_start": 250.0, "after": "reasoning"})
    attrs = otel.telemetry(run)[0].root.attributes
    assert attrs["gen_ai.response.time_to_first_chunk"] == 0.01  # the first reasoning
    assert attrs["promptpath.response.time_to_first_output"] == 0.25


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"status": 401, "error": {"kind": "http_401", "message": "x"}}, "401"),
        ({"status": None, "error": {"kind": "refused", "message": "x"}}, "refused"),
        ({"status": 200, "error": {"kind": "truncated", "message": "x"}}, "truncated"),
    ],
)  # fmt: skip
def test_error_type_is_the_status_else_the_kind(over: dict[str, Any], expected: str) -> None:
    tele = otel.telemetry(_run(**over))[0]
    assert tele.root.attributes["error.type"] == expected
    assert tele.root.error == "x"  # the span's status description: the error's message
    assert all(r.attributes["error.type"] == expected for r in tele.recordings)


def test_recordings_follow_the_metric_definitions() -> None:
    recs = otel.telemetry(_run())[0].recordings
    by_name: dict[str, list[Any]] = {}
    for r in recs:
        by_name.setdefault(r.instrument.name, []).append(r)
    assert [r.value for r in by_name["gen_ai.client.operation.duration"]] == [0.0205]
    assert [r.value for r in by_name["gen_ai.client.operation.time_per_output_chunk"]] == [
        0.004,
        0.006,
    ]
    tokens = {
        r.attributes["gen_ai.token.type"]: r.value for r in by_name["gen_ai.client.token.usage"]
    }
    assert tokens == {"input": 7, "output": 5}  # billable counts as the provider reported
    stages = {
        r.attributes["promptpath.stage"]: r.value for r in by_name["promptpath.stage.duration"]
    }
    assert stages == pytest.approx({"dns": 0.0015, "connect": 0.00175, "streaming": 0.010125})


def test_output_tokens_are_counted_when_the_provider_reports_none() -> None:
    run = _run(tokens={"count": 4, "usage": None, "gaps": []})
    recs = otel.telemetry(run)[0].recordings
    tokens = {
        r.attributes["gen_ai.token.type"]: r.value for r in recs if r.instrument is otel.TOKEN_USAGE
    }
    assert tokens == {"output": 4}  # no input count is invented


@pytest.mark.parametrize(
    ("provider", "path", "operation"),
    [
        ("openai", "/v1/chat/completions", "chat"),
        ("openai", "/v1/completions", "text_completion"),
        ("ollama", "/api/generate", "text_completion"),
        ("anthropic", "/v1/messages", "chat"),
        ("vertex", "/v1/x:streamGenerateContent", "generate_content"),
    ],
)
def test_operation_names(provider: str, path: str, operation: str) -> None:
    assert otel.operation_name(provider, path) == operation


def test_series_runs_are_one_trace_each() -> None:
    series = {"schema": "promptpath.series/1", "runs": [_run(), _run()]}
    assert len(otel.telemetry(series)) == 2


# -- the plan ---------------------------------------------------------------------------
def _plan(endpoint: str | None, **environ: str) -> Any:
    said: list[str] = []
    return plan_otlp(endpoint, environ, said.append), said


def test_the_option_wins_over_the_variable_and_gets_the_signal_paths() -> None:
    plan, _ = _plan("http://127.0.0.1:4318/", OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert (plan.traces_url, plan.metrics_url) == (
        "http://127.0.0.1:4318/v1/traces",
        "http://127.0.0.1:4318/v1/metrics",
    )
    assert plan.source == "--otlp-endpoint"


def test_signal_variables_are_used_as_they_are() -> None:
    plan, _ = _plan(None, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="http://127.0.0.1:1/t")
    assert (plan.traces_url, plan.metrics_url) == ("http://127.0.0.1:1/t", "")


def test_resource_attributes_and_service_name() -> None:
    assert parse_resource_attributes("a=1, b=x%2Cy,broken,=v") == {"a": "1", "b": "x,y"}
    plan, _ = _plan(
        "http://127.0.0.1:4318",
        OTEL_RESOURCE_ATTRIBUTES="service.name=ignored,vantage=eu",
        OTEL_SERVICE_NAME="probe-eu",
    )
    assert dict(plan.resource) == {"service.name": "probe-eu", "vantage": "eu"}
    plan, _ = _plan("http://127.0.0.1:4318")
    assert dict(plan.resource) == {"service.name": "promptpath"}


def test_timeout_is_milliseconds_and_bounded() -> None:
    assert _plan("http://h:1", OTEL_EXPORTER_OTLP_TIMEOUT="1500")[0].timeout_s == 1.5
    assert _plan("http://h:1", OTEL_EXPORTER_OTLP_TIMEOUT="1")[0].timeout_s == 0.1
    assert _plan("http://h:1")[0].timeout_s == 5.0
    with pytest.raises(UsageError, match="milliseconds"):
        _plan("http://h:1", OTEL_EXPORTER_OTLP_TIMEOUT="5s")


def test_sdk_disabled_turns_the_environment_off_only() -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:1", "OTEL_SDK_DISABLED": "true"}
    assert _plan(None, **env)[0] is None
    assert _plan("http://h:2", **env)[0] is not None


@pytest.mark.parametrize(
    "url",
    [
        "127.0.0.1:4318",
        "ftp://h:1",
        "http://h:1/?a=b",
        "http://h:x",
        "http://[::1",
    ],
)
def test_bad_endpoints_are_usage_errors(url: str) -> None:
    with pytest.raises(UsageError, match="--otlp-endpoint"):
        _plan(url)


@pytest.mark.parametrize(
    "variable",
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    ],
)
def test_an_unclosed_ipv6_bracket_is_a_usage_error_naming_where_not_the_password(
    variable: str,
) -> None:
    # urlsplit raises ValueError ("Invalid IPv6 URL"): exit 70 before.
    with pytest.raises(UsageError, match="not a valid URL") as caught:
        _plan(None, **{variable: "http://user:s3cr3tpw@[::1"})
    assert "OTEL_EXPORTER_OTLP" in caught.value.message
    assert "s3cr3tpw" not in caught.value.message
    with pytest.raises(UsageError, match=r"--otlp-endpoint is not a valid URL"):
        _plan("http://user:s3cr3tpw@[::1")


def test_userinfo_never_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    plan, _ = _plan("https://user:tok3n@collector.example:4318")
    assert "tok3n" not in plan.shown and plan.shown == "https://collector.example:4318"
    with pytest.raises(UsageError) as caught:
        _plan("ftp://user:tok3n@collector.example")
    assert "tok3n" not in caught.value.message


def test_without_the_extra_the_option_is_a_usage_error_and_the_variable_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An import of opentelemetry fails as it does where the extra is not installed.
    for name in ("opentelemetry", "opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"):
        monkeypatch.setitem(sys.modules, name, None)
    assert not otel_installed()
    with pytest.raises(UsageError, match=r"promptpath\[otel\]"):
        _plan("http://127.0.0.1:4318")
    plan, said = _plan(None, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318")
    assert plan is None and len(said) == 1 and "promptpath[otel]" in said[0]


def test_the_warning_names_what_the_sdk_kept_retrying_on() -> None:
    import logging
    import threading

    from promptpath.outputs.otlp_sdk import _CAPTURE

    # The SDK's two records when it retried a refused connection until its deadline
    # (otlp.common.http, 1.45): a transient warning with the error, then the give-up.
    log = logging.getLogger("opentelemetry.exporter.otlp.common.http")
    error = (
        "HTTPConnectionPool(...): Max retries exceeded (Caused by"
        ' NewConnectionError("...: [Errno 111] Connection refused"))'
    )
    log.warning(
        "Transient error %s encountered while exporting %s batch, retrying in %.2fs.",
        error,
        "spans",
        1.0,
    )
    log.error("Failed to export %s batch due to timeout, max retries or shutdown.", "spans")
    assert _CAPTURE.failure("none") == (
        "Failed to export spans batch due to timeout, max retries or shutdown:"
        " [Errno 111] Connection refused"
    )
    assert _CAPTURE.failure("none") == "none"  # taken once, per thread
    assert threading.get_ident() not in _CAPTURE.records


# The values the dialect table of report/otel.py held before each plug-in held its own:
# gen-ai-metrics.md's well-known names, Ollama's custom, and the provider as it is (or
# _OTHER) when no plug-in has it.
@pytest.mark.parametrize(
    ("provider", "name"),
    [
        ("openai", "openai"),
        ("responses", "openai"),
        ("realtime", "openai"),
        ("azure", "azure.ai.openai"),
        ("anthropic", "anthropic"),
        ("gemini", "gcp.gemini"),
        ("vertex", "gcp.vertex_ai"),
        ("ollama", "ollama"),
        ("bedrock", "aws.bedrock"),
        ("bedrock-invoke", "aws.bedrock"),
        ("cohere", "cohere"),
        ("mistral", "mistral"),
        ("", "_OTHER"),
    ],
)
def test_provider_names(provider: str, name: str) -> None:
    assert otel.provider_name(provider) == name


def test_gemini_and_vertex_generate_content_whatever_the_path() -> None:
    assert otel.operation_name("gemini", "/v1beta/models/m:streamGenerateContent") == (
        "generate_content"
    )
    assert otel.operation_name("mistral", "/v1/completions") == "text_completion"


def test_ttft_less_one_round_trip_and_the_round_trip_are_attributes_of_their_own() -> None:
    attrs = otel.telemetry(_run(ttft_network_adjusted_ms=912.0, rtt_ms=38.0))[0].root.attributes
    assert attrs["promptpath.response.time_to_first_chunk_network_adjusted"] == 0.912
    assert attrs["promptpath.network.rtt"] == 0.038
    assert attrs["gen_ai.response.time_to_first_chunk"] == 0.01  # unchanged beside them
    older = otel.telemetry(_run())[0].root.attributes  # a report from before the fields
    assert "promptpath.network.rtt" not in older
    assert "promptpath.response.time_to_first_chunk_network_adjusted" not in older
