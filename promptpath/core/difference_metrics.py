"""What one run gives a comparison: each metric's value, and what it needs finished.

Pure, as differences.py: values come from a timeline's own stamps, unrounded. A metric counts
only when the stages it needs finished ok in that run (see ``finished``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from promptpath.core.analysis import Metrics
from promptpath.core.timeline import Timeline

#: Stages that make the connection; a failure in one of them leaves nothing to time after.
SETUP_STAGES = ("dns", "connect", "tls", "quic_handshake")

#: What a metric needs to have finished ok before its value counts (see ``finished``).
Need = Literal["connection", "stream"]


def setup_round_trips(timeline: Timeline) -> int | None:
    """Round trips the protocols need before the request can be sent (DNS not counted).

    Expected from what was negotiated, not measured: a lost Initial or a HelloRetryRequest
    adds one that this count does not see.
    """
    if timeline.reused_connection:
        return 0
    if timeline.stage("quic_handshake") is not None:
        return 1  # QUIC folds the transport and TLS 1.3 handshakes; we never use 0-RTT
    if timeline.stage("connect") is None:
        return None
    trips = 1  # TCP three-way handshake: the client may send after one round trip
    if timeline.stage("tls") is not None:
        tls = timeline.tls
        version = tls.version if tls is not None else None
        if version in ("TLSv1.2", "TLSv1.1", "TLSv1") and not (tls and tls.resumed):
            trips += 2
        else:
            trips += 1
    return trips


def connection_ready(timeline: Timeline) -> bool:
    """Every setup stage that ran ended ok and a connection (or a reused one) was ready."""
    if timeline.reused_connection:
        return timeline.error is None or timeline.error.stage not in SETUP_STAGES
    if timeline.error is not None and timeline.error.stage in SETUP_STAGES:
        return False
    ran = [s for s in timeline.stages if s.name in SETUP_STAGES]
    if any(s.end_ns is None or not s.ok for s in ran):
        return False
    return any(s.name in ("connect", "quic_handshake") for s in ran)


def finished(timeline: Timeline) -> dict[Need, bool]:
    """Which parts of the run finished ok: the connection, and the whole stream after it."""
    ready = connection_ready(timeline)
    return {"connection": ready, "stream": ready and timeline.error is None}


def stage_ms(timeline: Timeline, name: str) -> float | None:
    stage = timeline.stage(name)
    if stage is None or stage.duration_ns is None:
        return None
    return stage.duration_ns / 1e6


def handshake_ms(timeline: Timeline) -> float | None:
    """Transport + TLS setup: connect + tls over TCP, quic_handshake over QUIC. Neither
    holds building the ClientHello (``client_hello_ns``), so both span the same wire."""
    quic = stage_ms(timeline, "quic_handshake")
    if quic is not None:
        return quic
    connect = stage_ms(timeline, "connect")
    if connect is None:
        return None
    return connect + (stage_ms(timeline, "tls") or 0.0)


def _setup_ms(timeline: Timeline) -> float | None:
    hs = handshake_ms(timeline)
    if hs is None:
        return None
    return hs + (stage_ms(timeline, "dns") or 0.0)


def _client_hello_ms(timeline: Timeline) -> float | None:
    return None if timeline.client_hello_ns is None else timeline.client_hello_ns / 1e6


def _from_start(timeline: Timeline, name: str) -> float | None:
    t = timeline.milestones.get(name)
    return None if t is None else (t - timeline.t0_ns) / 1e6


def _since_request(timeline: Timeline, name: str) -> float | None:
    m = timeline.milestones
    if name not in m or "request_sent" not in m:
        return None
    return (m[name] - m["request_sent"]) / 1e6


def _gap(attr: str) -> Callable[[Timeline, Metrics], float | None]:
    def value(_timeline: Timeline, metrics: Metrics) -> float | None:
        summary = metrics.tokens.gap_summary
        return None if summary is None else float(getattr(summary, attr))

    return value


def _trips(timeline: Timeline, _metrics: Metrics) -> float | None:
    value = setup_round_trips(timeline)
    return None if value is None else float(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Metric:
    key: str
    label: str
    unit: str
    need: Need
    value: Callable[[Timeline, Metrics], float | None]
    higher_is_better: bool = False
    measured: bool = True


#: Every metric compared, in the order a reader wants them: measured rows first (setup,
#: then the response, then the stream), the expectation last.
METRICS = (
    _Metric(
        key="handshake_ms",
        label="handshake (TCP+TLS / QUIC)",
        unit="ms",
        need="connection",
        value=lambda tl, _m: handshake_ms(tl),
    ),
    _Metric(
        key="client_hello_ms",
        label="ClientHello build (client CPU)",
        unit="ms",
        need="connection",
        value=lambda tl, _m: _client_hello_ms(tl),
    ),
    _Metric(
        key="setup_ms",
        label="connection setup incl. DNS",
        unit="ms",
        need="connection",
        value=lambda tl, _m: _setup_ms(tl),
    ),
    _Metric(
        key="ttfb_ms",
        label="TTFB (from start)",
        unit="ms",
        need="connection",
        value=lambda tl, _m: _from_start(tl, "ttfb"),
    ),
    _Metric(
        key="ttfb_from_request_ms",
        label="TTFB (after request)",
        unit="ms",
        need="connection",
        value=lambda tl, _m: _since_request(tl, "ttfb"),
    ),
    _Metric(
        key="ttft_ms",
        label="TTFT (from start)",
        unit="ms",
        need="connection",
        value=lambda tl, _m: _from_start(tl, "ttft"),
    ),
    _Metric(
        key="ttft_from_request_ms",
        label="TTFT (after request)",
        unit="ms",
        need="connection",
        value=lambda tl, _m: _since_request(tl, "ttft"),
    ),
    # The first text a user sees: after the reasoning, where a model reasons first.
    _Metric(
        key="first_output_ms",
        label="first output (from start)",
        unit="ms",
        need="connection",
        value=lambda tl, _m: _from_start(tl, "first_output"),
    ),
    _Metric(
        key="first_output_from_request_ms",
        label="first output (after request)",
        unit="ms",
        need="connection",
        value=lambda tl, _m: _since_request(tl, "first_output"),
    ),
    *(
        _Metric(key=f"gap_{q}_ms", label=f"gap {q}", unit="ms", need="stream", value=_gap(q))
        for q in ("p50", "p90", "p99", "max")
    ),
    _Metric(
        key="tokens_per_second",
        label="tokens/s",
        unit="tok/s",
        need="stream",
        value=lambda _tl, m: m.tokens.per_second,
        higher_is_better=True,
    ),
    _Metric(
        key="end_ms",
        label="stream end (from start)",
        unit="ms",
        need="stream",
        value=lambda tl, _m: _from_start(tl, "end"),
    ),
    _Metric(
        key="setup_round_trips",
        label="setup round trips (expected, not measured)",
        unit="round trips",
        need="connection",
        value=_trips,
        measured=False,
    ),
)


def samples(
    runs: Sequence[tuple[Timeline, Metrics, dict[Need, bool]]], metric: _Metric
) -> tuple[float, ...]:
    """The metric's value in each run that finished what it needs."""
    values = []
    for timeline, metrics, done in runs:
        if not done[metric.need]:
            continue
        value = metric.value(timeline, metrics)
        if value is not None:
            values.append(value)
    return tuple(values)
