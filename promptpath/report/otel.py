"""The JSON report as OpenTelemetry data: spans and histogram recordings, no SDK.

Pure: it reads the JSON report (a run or a series, already redacted by structure) and
returns plain dataclasses; ``promptpath/outputs/otlp.py`` hands them to the OpenTelemetry SDK.
Nothing here imports opentelemetry, so the mapping is tested without the ``otel`` extra.

The names, units and bucket boundaries follow the OpenTelemetry semantic conventions for
generative AI (open-telemetry/semantic-conventions-genai, status Development), in one
table of both settings, ``report/otel_names.py``: v1.41's names by default, the latest
with ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` or ``--otel-semconv
latest``. The span is named ``{gen_ai.operation.name} {gen_ai.request.model}``, kind
CLIENT, with ``gen_ai.provider.name``, the models, ``gen_ai.usage.*``,
``gen_ai.request.stream`` and ``gen_ai.response.time_to_first_chunk`` (s). A provider
that reports billable tokens is used as reported; else the output tokens are the content
events counted ("if GenAI system returns each token independently, instrumentation
SHOULD count").

From open-telemetry/semantic-conventions, the HTTP client span's attributes
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
from promptpath.report.otel_names import (
    INSTRUMENTS,
    MODALITY_UNKNOWN,
    STAGE_DURATION,
    TOKEN_MODALITY,
    TOKEN_TYPE,
    Instrument,
    Semconv,
)
from promptpath.report.otel_tokens import SUBSETS as _SUBSETS
from promptpath.report.otel_tokens import subsets as _subsets
from promptpath.report.otel_tokens import tokens as _tokens
from promptpath.report.otel_tokens import with_cache as _with_cache
from promptpath.report.runs import runs_of

AttrValue = str | int | float | bool
Attributes = dict[str, AttrValue]

#: What an attribute or event text from the network may grow to: a hostile server's
#: 1 MiB error message is not a span attribute.
TEXT_MAX: Final = 512
REDACTED: Final = "REDACTED"  # semantic-conventions url.full: the word, not our "[redacted]"

_DEFAULT_NAMES: Final = INSTRUMENTS["default"]
#: The default setting's instruments by their old names (tests and callers use them).
OPERATION_DURATION: Final = _DEFAULT_NAMES["duration"]
TIME_TO_FIRST_CHUNK: Final = _DEFAULT_NAMES["time_to_first_chunk"]
TIME_PER_OUTPUT_CHUNK: Final = _DEFAULT_NAMES["time_per_output_chunk"]
TOKEN_USAGE: Final = _DEFAULT_NAMES["token_usage"]


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


def run_telemetry(run: Mapping[str, Any], semconv: Semconv = "default") -> RunTelemetry:
    """One run object of the report (the shape `run --json` prints) as telemetry, with
    the names of ``semconv`` (report/otel_names.py)."""
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
    subsets = _subsets(run)
    if semconv == "latest":
        input_tokens = _with_cache(run, input_tokens, subsets)
    if input_tokens is not None:
        attrs["gen_ai.usage.input_tokens"] = input_tokens
    if output_tokens is not None:
        attrs["gen_ai.usage.output_tokens"] = output_tokens
    if semconv == "latest":
        for key, attr, _role in _SUBSETS:
            if key in subsets:
                attrs[attr] = subsets[key]
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
        recordings=tuple(
            _recordings(run, semconv, metric_attrs, end_ms, (input_tokens, output_tokens), subsets)
        ),
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
    semconv: Semconv,
    attrs: Attributes,
    end_ms: float,
    counts: tuple[int | None, int | None],
    subsets: Mapping[str, int],
) -> list[Recording]:
    names = INSTRUMENTS[semconv]

    def record(role: str, value: float, attributes: Attributes = attrs) -> Recording:
        return Recording(instrument=names[role], value=value, attributes=attributes)

    out = [record("duration", end_ms / 1000)]
    tokens = run.get("tokens") or {}
    ttft_ms = _number((run.get("ttft_ms") or {}).get("from_start"))
    if ttft_ms is not None:
        out.append(record("time_to_first_chunk", ttft_ms / 1000))
    for gap in tokens.get("gaps") or []:
        value = _number(gap)
        if value is not None:
            out.append(record("time_per_output_chunk", value / 1000))
    if semconv == "latest":
        out.extend(_latest_tokens(record, attrs, counts, subsets))
    else:
        for token_type, count in zip(("input", "output"), counts, strict=True):
            if count is not None:
                out.append(record("token_usage", count, {**attrs, TOKEN_TYPE: token_type}))
    for span in run.get("spans_ms") or []:
        start, end = _number(span.get("start")), _number(span.get("end"))
        if start is None or end is None:
            continue
        stage_attrs: Attributes = {**attrs, "promptpath.stage": str(span.get("stage"))}
        out.append(
            Recording(instrument=STAGE_DURATION, value=(end - start) / 1000, attributes=stage_attrs)
        )
    return out


def _latest_tokens(
    record: Any,
    attrs: Attributes,
    counts: tuple[int | None, int | None],
    subsets: Mapping[str, int],
) -> list[Recording]:
    """The latest conventions' token metrics (gen-ai-token-metrics.md): the input and
    output counters on every operation, failed ones too, ``0`` when no count came (their
    rule), under ``gen_ai.token.modality`` ``unknown``; the per-operation histograms, which
    carry ``error.type`` but no modality; the cache and reasoning counters only when the
    provider reported that subset (a 0 there would claim it said none were cached)."""
    input_tokens, output_tokens = counts
    counter_attrs = {k: v for k, v in attrs.items() if k != "error.type"}
    counter_attrs[TOKEN_MODALITY] = MODALITY_UNKNOWN
    out = [
        record("usage.input", input_tokens or 0, counter_attrs),
        record("usage.output", output_tokens or 0, counter_attrs),
    ]
    for key, _attr, role in _SUBSETS:
        if key in subsets:
            out.append(record(role, subsets[key], counter_attrs))
    out.append(record("operation.input", input_tokens or 0))
    out.append(record("operation.output", output_tokens or 0))
    return out


def telemetry(report: Mapping[str, Any], semconv: Semconv = "default") -> list[RunTelemetry]:
    """Every run of ``report`` (itself, or a series' runs) as telemetry, in order."""
    return [run_telemetry(run, semconv) for run in runs_of(report)]


def count_points(runs: Sequence[RunTelemetry]) -> tuple[int, int]:
    """(spans, recordings) the runs make: what an export is expected to carry."""
    spans = sum(1 + len(r.stages) for r in runs)
    return spans, sum(len(r.recordings) for r in runs)
