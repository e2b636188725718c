"""The JSON report as OpenTelemetry data: spans and histogram recordings, no SDK.

Pure: it reads the JSON report (a run or a series, already redacted by structure) and
returns plain dataclasses; ``promptpath/outputs/otlp.py`` hands them to the OpenTelemetry SDK.
Nothing here imports opentelemetry, so the mapping is tested without the ``otel`` extra.

Names and units follow the OpenTelemetry semantic conventions for generative AI, which
live in their own repository (open-telemetry/semantic-conventions-genai, status
Development):

- ``docs/gen-ai/gen-ai-spans.md`` (Inference): the span is named
  ``{gen_ai.operation.name} {gen_ai.request.model}``, kind CLIENT; ``gen_ai.provider.name``
  (it replaced the deprecated ``gen_ai.system``), ``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.usage.input_tokens``/``output_tokens``,
  ``gen_ai.request.stream``, ``gen_ai.response.time_to_first_chunk`` (s), ``server.address``,
  ``server.port`` and ``error.type``.
- ``docs/gen-ai/gen-ai-metrics.md``: ``gen_ai.client.operation.duration``,
  ``…time_to_first_chunk`` and ``…time_per_output_chunk`` in ``s`` with the explicit bucket
  boundaries [0.01, 0.02, …, 81.92]; ``gen_ai.client.token.usage`` in ``{token}`` with
  [1, 4, 16, …, 67108864] and ``gen_ai.token.type`` ``input`` / ``output``. A provider that
  reports billable tokens is used as reported; else the output tokens are the content
  events counted ("if GenAI system returns each token independently, instrumentation
  SHOULD count").
- From open-telemetry/semantic-conventions, the HTTP client span's attributes
  (``docs/http/http-spans.md``): ``url.full`` with userinfo and the query values of
  credential-like keys replaced by ``REDACTED``, ``http.request.method``,
  ``http.response.status_code``, ``network.protocol.name``/``version`` (``1.1``, ``2``,
  ``3``), and ``error.type``: the status code as a string for an answer >= 400, else a
  low-cardinality name (``docs/general/recording-errors.md``): ours are the closed set of
  error kinds in core/errors.py (``refused``, ``timeout``, ``truncated``, …).

A chunk, for the ``*_chunk`` metrics, is a content-bearing event (text, reasoning or a
tool-call delta): OpenAI's role-only first chunk carries no output, and timing it would
time the server's header flush. The first chunk is timed from t0, when the client began
the request (connection set-up included), as an SDK instrumentation times its call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from promptpath.dialects.plugins import dialect
from promptpath.dialects.registry import NAMES
from promptpath.report.runs import runs_of

AttrValue = str | int | float | bool
Attributes = dict[str, AttrValue]

#: What an attribute or event text from the network may grow to: a hostile server's
#: 1 MiB error message is not a span attribute.
TEXT_MAX: Final = 512
REDACTED: Final = "REDACTED"  # semantic-conventions url.full: the word, not our "[redacted]"

#: gen-ai-metrics.md's ExplicitBucketBoundaries for every client duration (s).
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
#: gen-ai-metrics.md's ExplicitBucketBoundaries for gen_ai.client.token.usage.
TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
#: Ours for the network stages: a loopback DNS answer takes 0.1 ms, a TLS handshake over an
#: ocean 300 ms; the GenAI buckets start at 10 ms and would put every set-up stage in one.
STAGE_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class Instrument:
    """One histogram: its name, unit, description and bucket boundaries (a View)."""

    name: str
    unit: str
    description: str
    buckets: tuple[float, ...]


OPERATION_DURATION: Final = Instrument(
    name="gen_ai.client.operation.duration",
    unit="s",
    description="GenAI operation duration.",
    buckets=DURATION_BUCKETS,
)
TIME_TO_FIRST_CHUNK: Final = Instrument(
    name="gen_ai.client.operation.time_to_first_chunk",
    unit="s",
    description="Time to receive the first chunk, from when the client issues the request.",
    buckets=DURATION_BUCKETS,
)
TIME_PER_OUTPUT_CHUNK: Final = Instrument(
    name="gen_ai.client.operation.time_per_output_chunk",
    unit="s",
    description="Time per output chunk, recorded for each chunk after the first one.",
    buckets=DURATION_BUCKETS,
)
TOKEN_USAGE: Final = Instrument(
    name="gen_ai.client.token.usage",
    unit="{token}",
    description="Number of input and output tokens used.",
    buckets=TOKEN_BUCKETS,
)
STAGE_DURATION: Final = Instrument(
    name="promptpath.stage.duration",
    unit="s",
    description="Duration of each stage of a traced prompt (promptpath.stage: dns, connect, tls,"
    " quic_handshake, proxy stages, request, wait, first_token, streaming).",
    buckets=STAGE_BUCKETS,
)
INSTRUMENTS: Final = (
    OPERATION_DURATION,
    TIME_TO_FIRST_CHUNK,
    TIME_PER_OUTPUT_CHUNK,
    TOKEN_USAGE,
    STAGE_DURATION,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanEvent:
    name: str
    time_unix_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """One span, its instants in ns since the Unix epoch."""

    name: str
    kind: Literal["client", "internal"]
    start_unix_ns: int
    end_unix_ns: int
    attributes: Attributes
    events: tuple[SpanEvent, ...] = ()
    #: The status description when the span ended in an error (None: status unset, OK).
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Recording:
    """One value recorded into one histogram."""

    instrument: Instrument
    value: float
    attributes: Attributes


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTelemetry:
    """One traced prompt: its span, its stages' child spans, its recordings."""

    root: Span
    stages: tuple[Span, ...]
    recordings: tuple[Recording, ...]


def bounded(text: object, limit: int = TEXT_MAX) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis says so)."""
    value = str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def url_full(url: str) -> str:
    """The URL with userinfo and every redacted query value spelled ``REDACTED``.

    The report's URL comes with credential-like query values already replaced (our own
    ``[redacted]``): those values, and any userinfo, become the conventions' word."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}:{REDACTED}@{netloc.rpartition('@')[2]}"
    query = parts.query
    if query:
        pairs = [
            (k, REDACTED if v == "[redacted]" else v)
            for k, v in parse_qsl(query, keep_blank_values=True)
        ]
        query = urlencode(pairs)
    # The fragment is never sent (and may hold a pasted #token=…): never exported.
    return urlunsplit(parts._replace(netloc=netloc, query=query, fragment=""))


def provider_name(provider: str) -> str:
    """gen_ai.provider.name: the dialect's (its plug-in's ``otel_provider``); a provider no
    plug-in has (a report from another version) as it is, or ``_OTHER``."""
    if provider in NAMES:
        return dialect(provider).otel_provider
    return provider or "_OTHER"


def operation_name(provider: str, path: str) -> str:
    """gen_ai.operation.name: the dialect's own when it has one (``generate_content`` for
    Gemini/Vertex), ``text_completion`` for the legacy completions paths (/v1/completions,
    Ollama's /api/generate), else ``chat`` (chat completions, Messages, Responses, Ollama's
    /api/chat)."""
    own = dialect(provider).otel_operation if provider in NAMES else None
    if own is not None:
        return own
    tail = path.rstrip("/")
    if tail.endswith("/api/generate") or (
        tail.endswith("/completions") and not tail.endswith("/chat/completions")
    ):
        return "text_completion"
    return "chat"


def error_type(run: Mapping[str, Any]) -> str | None:
    """error.type: the status code of an answer >= 400, else the error's kind."""
    error = run.get("error")
    if not isinstance(error, Mapping):
        return None
    status = run.get("status")
    if isinstance(status, int) and status >= 400:
        return str(status)
    kind = error.get("kind")
    return str(kind) if kind else "_OTHER"


def _anchor_ns(run: Mapping[str, Any]) -> int:
    """t0 on the wall clock: the report's own nanoseconds, else its ISO date (ms)."""
    exact = run.get("started_unix_ns")
    if isinstance(exact, int) and not isinstance(exact, bool):
        return exact
    started = run.get("started_at")
    if isinstance(started, str):
        try:
            return round(datetime.fromisoformat(started).timestamp() * 1e9)
        except ValueError:
            pass
    return 0


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _end_ms(run: Mapping[str, Any]) -> float:
    """Where the operation ended on the t0 axis: the last stage's end, the terminal
    marker, or the error (a timeout: the deadline), whichever came last."""
    ends = [_number(span.get("end")) for span in run.get("spans_ms") or []]
    ends.append(_number((run.get("milestones_ms") or {}).get("end")))
    ends.append(_number((run.get("error") or {}).get("at_ms")))
    return max([e for e in ends if e is not None], default=0.0)


def _protocol_version(http_version: object) -> str | None:
    """``HTTP/1.1`` → ``1.1``, ``HTTP/2`` → ``2``: network.protocol.version's spelling."""
    if not isinstance(http_version, str) or not http_version:
        return None
    return http_version.removeprefix("HTTP/")


def _tokens(run: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(input, output) tokens: the provider's own counts, else output counted from the
    content events; input only when the provider reported it."""
    tokens = run.get("tokens") or {}
    usage = tokens.get("usage") or {}
    reported_in = usage.get("input_tokens")
    reported_out = usage.get("output_tokens")
    input_tokens = reported_in if isinstance(reported_in, int) else None
    if isinstance(reported_out, int):
        return input_tokens, reported_out
    counted = tokens.get("count")
    return input_tokens, counted if isinstance(counted, int) and counted > 0 else None


def _common(run: Mapping[str, Any]) -> Attributes:
    """The attributes the span and every metric share (the metrics' own list)."""
    target = run.get("target") or {}
    provider = str(target.get("provider") or "")
    path = urlsplit(str(target.get("url") or "")).path
    attrs: Attributes = {
        "gen_ai.operation.name": operation_name(provider, path),
        "gen_ai.provider.name": provider_name(provider),
    }
    model = target.get("model")
    if model:
        attrs["gen_ai.request.model"] = bounded(model, 200)
    response_model = run.get("response_model")
    if isinstance(response_model, str) and response_model:
        attrs["gen_ai.response.model"] = bounded(response_model, 200)
    if target.get("host"):
        attrs["server.address"] = str(target["host"])
    if isinstance(target.get("port"), int):
        attrs["server.port"] = int(target["port"])
    return attrs


def run_telemetry(run: Mapping[str, Any]) -> RunTelemetry:
    """One run object of the report (the shape `run --json` prints) as telemetry."""
    anchor = _anchor_ns(run)

    def at(ms: float) -> int:
        return anchor + round(ms * 1e6)

    common = _common(run)
    failure = error_type(run)
    metric_attrs = dict(common)
    if failure is not None:
        metric_attrs["error.type"] = failure
    attrs: Attributes = {**metric_attrs, "gen_ai.request.stream": True}
    target = run.get("target") or {}
    if target.get("url"):
        attrs["url.full"] = url_full(str(target["url"]))
    request = run.get("request") or {}
    if request.get("method"):
        attrs["http.request.method"] = str(request["method"])
    if isinstance(run.get("status"), int):
        attrs["http.response.status_code"] = int(run["status"])
    version = _protocol_version(run.get("http_version"))
    if version is not None:
        attrs["network.protocol.name"] = "http"
        attrs["network.protocol.version"] = version
    address = run.get("address") or {}
    if address.get("ip"):
        attrs["network.peer.address"] = str(address["ip"])
    input_tokens, output_tokens = _tokens(run)
    if input_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = input_tokens
    if output_tokens is not None:
        attrs["gen_ai.usage.output_tokens"] = output_tokens
    ttft_ms = _number((run.get("ttft_ms") or {}).get("from_start"))
    if ttft_ms is not None:
        attrs["gen_ai.response.time_to_first_chunk"] = ttft_ms / 1000
    # No convention names the first text a user sees (after any reasoning): ours.
    first_output_ms = _number((run.get("first_output_ms") or {}).get("from_start"))
    if first_output_ms is not None:
        attrs["promptpath.response.time_to_first_output"] = first_output_ms / 1000
    # TTFT from the request less one round trip, and that round trip (core/rtt.py): ours.
    adjusted_ms = _number(run.get("ttft_network_adjusted_ms"))
    if adjusted_ms is not None:
        attrs["promptpath.response.time_to_first_chunk_network_adjusted"] = adjusted_ms / 1000
    rtt_ms = _number(run.get("rtt_ms"))
    if rtt_ms is not None:
        attrs["promptpath.network.rtt"] = rtt_ms / 1000
    end_ms = _end_ms(run)
    error = run.get("error") if isinstance(run.get("error"), Mapping) else None
    root = Span(
        name=f"{common['gen_ai.operation.name']} {target.get('model') or ''}".rstrip(),
        kind="client",
        start_unix_ns=anchor,
        end_unix_ns=at(end_ms),
        attributes=attrs,
        events=tuple(_finding_events(run, at(end_ms))),
        error=None if error is None else bounded(error.get("message") or failure),
    )
    stages = tuple(_stage_span(span, error, at) for span in run.get("spans_ms") or [])
    return RunTelemetry(
        root=root,
        stages=stages,
        recordings=tuple(_recordings(run, metric_attrs, end_ms, input_tokens, output_tokens)),
    )


def _stage_span(span: Mapping[str, Any], error: Mapping[str, Any] | None, at: Any) -> Span:
    """A child span per stage of core/analysis.stage_spans (the report's spans_ms)."""
    stage = str(span.get("stage"))
    failed = error is not None and stage in (error.get("stage"), error.get("cut_stage"))
    return Span(
        name=stage,
        kind="internal",
        start_unix_ns=at(float(span.get("start") or 0.0)),
        end_unix_ns=at(float(span.get("end") or 0.0)),
        attributes={"promptpath.stage": stage},
        error=bounded(error.get("message") or error.get("kind")) if failed and error else None,
    )


def _finding_events(run: Mapping[str, Any], time_unix_ns: int) -> list[SpanEvent]:
    """Each probe finding as a span event at the end of the operation (probes run after
    the trace): ``promptpath.finding`` with the probe, verdict and summary."""
    events = []
    for finding in run.get("findings") or []:
        if not isinstance(finding, Mapping):
            continue
        events.append(
            SpanEvent(
                name="promptpath.finding",
                time_unix_ns=time_unix_ns,
                attributes={
                    "promptpath.probe": bounded(finding.get("probe"), 64),
                    "promptpath.verdict": bounded(finding.get("verdict"), 16),
                    "promptpath.summary": bounded(finding.get("summary")),
                },
            )
        )
    return events


def _recordings(
    run: Mapping[str, Any],
    attrs: Attributes,
    end_ms: float,
    input_tokens: int | None,
    output_tokens: int | None,
) -> list[Recording]:
    out = [Recording(instrument=OPERATION_DURATION, value=end_ms / 1000, attributes=attrs)]
    tokens = run.get("tokens") or {}
    ttft_ms = _number((run.get("ttft_ms") or {}).get("from_start"))
    if ttft_ms is not None:
        out.append(
            Recording(instrument=TIME_TO_FIRST_CHUNK, value=ttft_ms / 1000, attributes=attrs)
        )
    for gap in tokens.get("gaps") or []:
        value = _number(gap)
        if value is not None:
            out.append(
                Recording(instrument=TIME_PER_OUTPUT_CHUNK, value=value / 1000, attributes=attrs)
            )
    for token_type, count in (("input", input_tokens), ("output", output_tokens)):
        if count is not None:
            out.append(
                Recording(
                    instrument=TOKEN_USAGE,
                    value=count,
                    attributes={**attrs, "gen_ai.token.type": token_type},
                )
            )
    for span in run.get("spans_ms") or []:
        start, end = _number(span.get("start")), _number(span.get("end"))
        if start is None or end is None:
            continue
        out.append(
            Recording(
                instrument=STAGE_DURATION,
                value=(end - start) / 1000,
                attributes={**attrs, "promptpath.stage": str(span.get("stage"))},
            )
        )
    return out


def telemetry(report: Mapping[str, Any]) -> list[RunTelemetry]:
    """Every run of ``report`` (itself, or a series' runs) as telemetry, in order."""
    return [run_telemetry(run) for run in runs_of(report)]


def count_points(runs: Sequence[RunTelemetry]) -> tuple[int, int]:
    """(spans, recordings) the runs make: what an export is expected to carry."""
    spans = sum(1 + len(r.stages) for r in runs)
    return spans, sum(len(r.recordings) for r in runs)
