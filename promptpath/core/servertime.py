"""The server's own account of a request: the time it says it spent, its request id and
the edge that answered, read from response headers. Pure: headers and the measured wait in,
data out.

Sources: W3C ``Server-Timing`` (https://www.w3.org/TR/server-timing/), OpenAI's
``openai-processing-ms``, Envoy's ``x-envoy-upstream-service-time``; the request id a
support ticket asks for (``x-request-id``, Anthropic's ``request-id``); the edge location
(the ``cf-ray`` suffix is Cloudflare's data-centre code, Fastly's ``x-served-by`` ends in
its POP code, CloudFront's ``x-amz-cf-pop``, any ``Via``).

The issue-23 dialects, from recorded responses of the real APIs (public cassettes and
captures; no call was made from here): Google's front end answers Gemini and Vertex with
``server-timing: gfet4t7; dur=N`` (the GFE's own latency, read as Server-Timing's largest
``dur``); Azure's AI services front door sends ``apim-request-id`` (its API Management
request id, equal to ``x-request-id`` when both come), ``x-envoy-upstream-service-time``
and ``x-ms-region`` (the Azure region that served); Cohere's API answers through Envoy
behind Google's load balancer (``server: envoy``, ``via: 1.1 google``,
``x-envoy-upstream-service-time``) and its only per-request id is ``x-debug-trace-id``.
Bedrock's time is in the stream itself (``StreamTime`` below).

Which figure is "the server's time": the figures nest rather than add up (a gateway's
upstream time encloses the application's processing; a Server-Timing ``total`` encloses its
parts, and other metrics such as ``db`` and ``app`` usually overlap), so they are never
summed, which could count one interval twice. From Server-Timing, a metric named ``total``
is taken as the server's whole time, else its largest ``dur`` (a lower bound on it). Across
sources the largest figure is used: it is the outermost interval a server-side hop owns,
so what remains of the wait lies outside every hop that reported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from promptpath.core.edgename import EdgeName, edge_name, location_of
from promptpath.core.timeline import Timeline

#: RFC 9110 tchar, besides letters and digits.
_TCHAR_EXTRA = frozenset("!#$%&'*+-.^_`|~")
_OWS = " \t"

#: The answer's request id: the first of these it carries, in this order.
REQUEST_ID_HEADERS = (
    "x-request-id",
    "request-id",
    "x-amzn-requestid",
    "apim-request-id",
    "x-debug-trace-id",
)
#: Headers that name where the answer came from (a POP, a data centre, a region).
EDGE_HEADERS = ("cf-ray", "x-served-by", "x-amz-cf-pop", "x-ms-region", "via")
#: Headers that carry a single duration in milliseconds, with no further syntax.
DURATION_HEADERS = ("openai-processing-ms", "x-envoy-upstream-service-time")


@dataclass(frozen=True, slots=True, kw_only=True)
class TimingMetric:
    """One Server-Timing metric."""

    name: str
    dur: float | None = None  # ms; None when absent or not a non-negative number
    desc: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerFigure:
    """One duration the server side reported, and which header said so."""

    ms: float
    header: str  # lower-case header name
    metric: str | None = None  # the Server-Timing metric, for that header


@dataclass(frozen=True, slots=True, kw_only=True)
class Edge:
    """A header that names where the answer was served from."""

    header: str
    value: str
    location: str | None  # the data-centre/POP code, when the value carries one


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamTime:
    """The server's own time for the whole request, said inside the stream (Bedrock's
    ``metadata.metrics.latencyMs``), beside what was measured here over the same span:
    from the request sent to the stream's end marker."""

    ms: float
    source: str  # the field it came from
    measured_ms: float | None  # request sent -> end marker, measured here

    @property
    def outside_ms(self) -> float | None:
        """The part of the measured span outside the server's figure (network, queueing,
        delivery); None when the figure exceeds it or nothing was measured."""
        if self.measured_ms is None or self.ms > self.measured_ms:
            return None
        return self.measured_ms - self.ms


#: StreamEvent.name of the event that carries the figure -> the field it was read from
STREAM_TIME_SOURCES = {
    "metadata": "metadata.metrics.latencyMs",
    "message_stop": "amazon-bedrock-invocationMetrics.invocationLatency",
    "chunk": "amazon-bedrock-invocationMetrics.invocationLatency",
}


def stream_time(timeline: Timeline) -> StreamTime | None:
    """The last server time a stream event carried, with the span measured for it."""
    event = next((e for e in reversed(timeline.events) if e.server_ms is not None), None)
    if event is None or event.server_ms is None:
        return None
    sent = timeline.milestones.get("request_sent")
    end = timeline.milestones.get("end")
    measured = None if sent is None or end is None else (end - sent) / 1e6
    return StreamTime(
        ms=event.server_ms,
        source=STREAM_TIME_SOURCES.get(event.name, event.name),
        measured_ms=measured,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerAccount:
    """What the response headers say about the server's side of the request."""

    server_timing: tuple[TimingMetric, ...] = ()
    figures: tuple[ServerFigure, ...] = ()  # every duration reported, in header order
    time: ServerFigure | None = None  # the one the wait is split by
    wait_ms: float | None = None  # request sent → response headers, as measured
    request_id: tuple[str, str] | None = None  # (header, value)
    edge: tuple[Edge, ...] = ()
    stream_time: StreamTime | None = None  # the whole request's time, said in the stream
    edge_name: EdgeName | None = None  # the edge a documented CDN header names (edgename.py)

    @property
    def network_ms(self) -> float | None:
        """The part of the wait outside the server's figure; None when the figure exceeds
        the wait (the two clocks cover different intervals) or either is missing."""
        if self.time is None or self.wait_ms is None or self.time.ms > self.wait_ms:
            return None
        return self.wait_ms - self.time.ms


def _is_tchar(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch in _TCHAR_EXTRA)


class _Scanner:
    """A cursor over one header value; quoted strings are skipped whole."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ows(self) -> None:
        while self.peek() and self.peek() in _OWS:
            self.pos += 1

    def token(self) -> str:
        start = self.pos
        while self.peek() and _is_tchar(self.peek()):
            self.pos += 1
        return self.text[start : self.pos]

    def quoted(self) -> str:
        """A quoted-string at the cursor (its opening quote); an unterminated one runs to
        the end of the value."""
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            self.pos += 1
            if ch == "\\" and self.pos < len(self.text):
                out.append(self.text[self.pos])
                self.pos += 1
            elif ch == '"':
                break
            else:
                out.append(ch)
        return "".join(out)

    def skip_to_comma(self) -> None:
        """Past the rest of a malformed metric, to the next comma outside quotes."""
        while self.peek() and self.peek() != ",":
            if self.peek() == '"':
                self.quoted()
            else:
                self.pos += 1


def _duration(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _metric(scan: _Scanner) -> TimingMetric | None:
    """One metric at the cursor; None (cursor at the next comma) when it is malformed."""
    name = scan.token()
    if not name:
        return None
    params: dict[str, str] = {}
    while True:
        scan.skip_ows()
        ch = scan.peek()
        if ch in ("", ","):
            break
        if ch != ";":
            return None
        scan.pos += 1
        scan.skip_ows()
        key = scan.token().lower()
        if not key:
            return None
        scan.skip_ows()
        value = ""
        if scan.peek() == "=":
            scan.pos += 1
            scan.skip_ows()
            value = scan.quoted() if scan.peek() == '"' else scan.token()
        params.setdefault(key, value)  # the spec keeps the first of a repeated parameter
    dur = params.get("dur")
    return TimingMetric(
        name=name,
        dur=None if dur is None else _duration(dur),
        desc=params.get("desc"),
    )


def parse_server_timing(values: Sequence[str]) -> list[TimingMetric]:
    """Every well-formed metric of the given ``Server-Timing`` field values, in order;
    a malformed metric is skipped and the ones after it still read."""
    metrics: list[TimingMetric] = []
    for value in values:
        scan = _Scanner(value)
        while scan.peek():
            scan.skip_ows()
            if scan.peek() == ",":
                scan.pos += 1
                continue
            if not scan.peek():
                break
            metric = _metric(scan)
            if metric is None:
                scan.skip_to_comma()
            else:
                metrics.append(metric)
    return metrics


def server_timing_figure(metrics: Sequence[TimingMetric]) -> ServerFigure | None:
    """The server's whole time by Server-Timing: ``total`` if given, else the largest dur."""
    timed = [m for m in metrics if m.dur is not None]
    total = next((m for m in timed if m.name.lower() == "total"), None)
    chosen = total or max(timed, key=lambda m: m.dur or 0.0, default=None)
    if chosen is None or chosen.dur is None:
        return None
    return ServerFigure(ms=chosen.dur, header="server-timing", metric=chosen.name)


def _location(header: str, value: str) -> str | None:
    if header in ("x-amz-cf-pop", "x-ms-region"):
        return value.strip() or None
    # cf-ray's data centre, Fastly's delivery node: the one table of edge headers.
    return location_of(header, value)


def server_account(
    headers: Sequence[tuple[str, str]],
    wait_ms: float | None,
    in_stream: StreamTime | None = None,
) -> ServerAccount | None:
    """What the headers (and ``in_stream``, a figure the stream carried) say about the
    server's side; None when they say nothing of it."""
    lowered = [(k.lower(), v) for k, v in headers]
    timing = parse_server_timing([v for k, v in lowered if k == "server-timing"])
    figures: list[ServerFigure] = []
    from_timing = server_timing_figure(timing)
    if from_timing is not None:
        figures.append(from_timing)
    for name in DURATION_HEADERS:
        raw = next((v for k, v in lowered if k == name), None)
        ms = None if raw is None else _duration(raw.strip())
        if ms is not None:
            figures.append(ServerFigure(ms=ms, header=name))
    request_id = next(
        ((k, v.strip()) for name in REQUEST_ID_HEADERS for k, v in lowered if k == name), None
    )
    edge = tuple(
        Edge(header=k, value=v.strip(), location=_location(k, v))
        for k, v in lowered
        if k in EDGE_HEADERS
    )
    named = edge_name(lowered)
    if not (timing or figures or request_id or edge or in_stream or named):
        return None
    return ServerAccount(
        server_timing=tuple(timing),
        figures=tuple(figures),
        time=max(figures, key=lambda f: f.ms, default=None),
        wait_ms=wait_ms,
        request_id=request_id,
        edge=edge,
        stream_time=in_stream,
        edge_name=named,
    )


def stream_words(account: ServerAccount) -> str | None:
    """The server's in-stream time against the span measured here, in one sentence."""
    st = account.stream_time
    if st is None:
        return None
    said = f"the server says the request took {st.ms:.0f} ms ({st.source})"
    if st.measured_ms is None:
        return said
    outside = st.outside_ms
    if outside is None:
        return (
            f"{said}, more than the {st.measured_ms:.1f} ms measured here from the request"
            " sent to the stream's end (its clock starts earlier or ends later)"
        )
    return (
        f"{said}; the other {outside:.1f} ms of the {st.measured_ms:.1f} ms from the request"
        " sent to the stream's end was network, queueing and delivery"
    )


def split_words(account: ServerAccount) -> str | None:
    """The wait split in one sentence, or None when the server gave no time."""
    fig = account.time
    if fig is None:
        return None
    source = fig.header if fig.metric is None else f"{fig.header} {fig.metric}"
    said = f"the server says it spent {fig.ms:.1f} ms ({source})"
    if account.wait_ms is None:
        return said
    network = account.network_ms
    if network is None:
        return (
            f"{said}, more than the {account.wait_ms:.1f} ms wait measured here: its clock"
            " covers more than the wait (it may start before the request had fully arrived)"
        )
    return (
        f"{said}; the other {network:.1f} ms of the {account.wait_ms:.1f} ms wait was network"
        " and queueing before it"
    )
