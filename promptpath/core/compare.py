"""HTTP/2 against HTTP/3 for the same prompt: the differences that matter.

Everything here is pure: ``promptpath.tracer.trace_pair`` runs the two traces.

Round trips before the request can leave are expected from the protocol versions (TCP 1 +
TLS 1.3 1, or TLS 1.2 2; QUIC 1, folding transport and TLS), not measured; times come from
each timeline's own stages and milestones. One run per protocol is one sample each, so a
difference within the noise floor is called "same": max(2 ms, 10 %, the larger
interquartile range of either run's token gaps), the jitter the path showed while we
watched. Two runs on a shared machine never match to the millisecond.

A metric counts only when the stages it needs finished ok in that run: a refused connect
or a timed-out QUIC handshake has a duration, but it is the time to fail, not a handshake
to compare. Such a side is None (null in JSON), so its delta and winner are None too, and
the summary names the run that failed and where.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from promptpath.core.analysis import Metrics, compute
from promptpath.core.stats import percentile
from promptpath.core.timeline import ErrorInfo, Timeline

Better = Literal["a", "b", "same"]

#: Differences below max(NOISE_MS, NOISE_SHARE x the larger value, the runs' gap IQR)
#: are called "same" (round trips: below ROUND_TRIP_FLOOR).
NOISE_MS = 2.0
NOISE_SHARE = 0.10
ROUND_TRIP_FLOOR = 0.5

#: Each side of a comparison is one run: one sample, whatever its verdict says.
SAMPLES_PER_PROTOCOL = 1

#: Stages that make the connection; a failure in one of them leaves nothing to time after.
SETUP_STAGES = ("dns", "connect", "tls", "quic_handshake")

#: What a metric needs to have finished ok before its value counts (see ``finished``).
Need = Literal["connection", "stream"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """One metric measured on both runs."""

    key: str  # JSON key: "setup_round_trips", "ttft_ms", "gap_p99_ms", ...
    label: str  # for people: "TTFT (from start)"
    unit: str  # "ms", "round trips", "tok/s"
    a: float | None  # first run (HTTP/2)
    b: float | None  # second run (HTTP/3)
    higher_is_better: bool = False
    measured: bool = True  # False: expected from the protocols (round trips), not timed
    jitter_ms: float = 0.0  # the larger gap IQR of the two runs: spread one sample can't beat

    @property
    def noise_floor(self) -> float | None:
        """The smallest |delta| that is not called "same", in the metric's unit."""
        if self.a is None or self.b is None:
            return None
        if self.unit == "round trips":
            return ROUND_TRIP_FLOOR
        share = NOISE_SHARE * max(abs(self.a), abs(self.b))
        if self.unit == "ms":
            return round(max(NOISE_MS, share, self.jitter_ms), 3)
        return round(share, 3)

    @property
    def delta(self) -> float | None:
        """b - a, in the metric's unit."""
        if self.a is None or self.b is None:
            return None
        return round(self.b - self.a, 3)

    @property
    def better(self) -> Better | None:
        """Which run did better, "same" within noise, None when one side is missing."""
        floor = self.noise_floor
        if self.a is None or self.b is None or floor is None:
            return None
        diff = self.b - self.a
        if abs(diff) <= floor:
            return "same"
        b_wins = diff > 0 if self.higher_is_better else diff < 0
        return "b" if b_wins else "a"


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


def handshake_ms(metrics: Metrics) -> float | None:
    """Transport + TLS setup: connect + tls over TCP, quic_handshake over QUIC."""
    st = metrics.stages_ms
    if "quic_handshake" in st:
        return st["quic_handshake"]
    if "connect" in st:
        return round(st["connect"] + st.get("tls", 0.0), 3)
    return None


def _setup_ms(metrics: Metrics) -> float | None:
    hs = handshake_ms(metrics)
    if hs is None:
        return None
    return round(hs + metrics.stages_ms.get("dns", 0.0), 3)


def _since_request(timeline: Timeline, name: str) -> float | None:
    m = timeline.milestones
    if name not in m or "request_sent" not in m:
        return None
    return round((m[name] - m["request_sent"]) / 1e6, 3)


def gap_iqr_ms(metrics: Metrics) -> float:
    """Interquartile range of the token gaps: the run's jitter (0 with fewer than 2 gaps)."""
    gaps = metrics.tokens.gaps
    if len(gaps) < 2:
        return 0.0
    return round(percentile(gaps, 75) - percentile(gaps, 25), 3)


def differences(a: Timeline, b: Timeline) -> list[Difference]:
    """Every metric we compare, in the order a reader wants them."""
    ma, mb = compute(a), compute(b)
    ga, gb = ma.tokens.gap_summary, mb.tokens.gap_summary
    jitter = max(gap_iqr_ms(ma), gap_iqr_ms(mb))

    def gap(summary_attr: str) -> tuple[float | None, float | None]:
        va = None if ga is None else round(float(getattr(ga, summary_attr)), 3)
        vb = None if gb is None else round(float(getattr(gb, summary_attr)), 3)
        return va, vb

    def ms(metrics: Metrics, name: str) -> float | None:
        return metrics.milestones_ms.get(name)

    def rate(metrics: Metrics) -> float | None:
        value = metrics.tokens.per_second
        return None if value is None else round(value, 3)

    def trips(timeline: Timeline) -> float | None:
        value = setup_round_trips(timeline)
        return None if value is None else float(value)

    done_a, done_b = finished(a), finished(b)

    def counted(d: Difference, need: Need) -> Difference:
        """The row with each side that did not finish what the metric needs set to None."""
        return replace(
            d,
            a=d.a if done_a[need] else None,
            b=d.b if done_b[need] else None,
            jitter_ms=jitter if d.unit == "ms" else 0.0,
        )

    rows = [
        Difference(
            key="setup_round_trips",
            label="expected setup round trips",
            unit="round trips",
            a=trips(a),
            b=trips(b),
            measured=False,
        ),
        Difference(
            key="handshake_ms",
            label="handshake (TCP+TLS / QUIC)",
            unit="ms",
            a=handshake_ms(ma),
            b=handshake_ms(mb),
        ),
        Difference(
            key="setup_ms",
            label="connection setup incl. DNS",
            unit="ms",
            a=_setup_ms(ma),
            b=_setup_ms(mb),
        ),
        Difference(
            key="ttfb_ms", label="TTFB (from start)", unit="ms", a=ms(ma, "ttfb"), b=ms(mb, "ttfb")
        ),
        Difference(
            key="ttfb_from_request_ms",
            label="TTFB (after request)",
            unit="ms",
            a=_since_request(a, "ttfb"),
            b=_since_request(b, "ttfb"),
        ),
        Difference(
            key="ttft_ms", label="TTFT (from start)", unit="ms", a=ms(ma, "ttft"), b=ms(mb, "ttft")
        ),
        Difference(
            key="ttft_from_request_ms",
            label="TTFT (after request)",
            unit="ms",
            a=ma.ttft_from_request_ms,
            b=mb.ttft_from_request_ms,
        ),
    ]
    stream_rows: list[Difference] = []
    for attr in ("p50", "p90", "p99", "max"):
        va, vb = gap(attr)
        stream_rows.append(
            Difference(key=f"gap_{attr}_ms", label=f"gap {attr}", unit="ms", a=va, b=vb)
        )
    stream_rows += [
        Difference(
            key="tokens_per_second",
            label="tokens/s",
            unit="tok/s",
            a=rate(ma),
            b=rate(mb),
            higher_is_better=True,
        ),
        Difference(
            key="end_ms",
            label="stream end (from start)",
            unit="ms",
            a=ms(ma, "end"),
            b=ms(mb, "end"),
        ),
    ]
    return [counted(d, "connection") for d in rows] + [counted(d, "stream") for d in stream_rows]


def differences_json(rows: list[Difference]) -> dict[str, dict[str, object]]:
    """``{key: {label, unit, http2, http3, delta, better, measured, noise_floor}}``."""
    names = {"a": "http2", "b": "http3", "same": "same", None: None}
    return {
        d.key: {
            "label": d.label,
            "unit": d.unit,
            "http2": d.a,
            "http3": d.b,
            "delta": d.delta,
            "better": names[d.better],
            "measured": d.measured,
            "noise_floor": d.noise_floor,
        }
        for d in rows
    }


def _fmt(value: float, unit: str) -> str:
    if unit == "round trips":
        n = round(abs(value))
        return f"{n} round trip{'s' if n != 1 else ''}"
    if unit == "tok/s":
        return f"{abs(value):.1f} tok/s"
    return f"{abs(value):.1f} ms"


def failure_line(name: str, error: ErrorInfo) -> str:
    """Which run failed and where, and what that leaves out of the comparison."""
    if error.stage in SETUP_STAGES:
        left_out = "no connection, so none of its times are compared"
    else:
        left_out = "its times from that stage on are not compared"
    return f"{name} failed in {error.stage} ({error.kind}): {left_out}"


def summary(
    rows: list[Difference],
    names: tuple[str, str] = ("HTTP/2", "HTTP/3"),
    errors: tuple[ErrorInfo | None, ErrorInfo | None] = (None, None),
) -> list[str]:
    """Which run failed (if one did), sentences for the differences beyond noise (the
    ones that matter), then the caveat."""
    picked = (
        "setup_round_trips",
        "handshake_ms",
        "ttfb_ms",
        "ttft_ms",
        "ttft_from_request_ms",
        "gap_p50_ms",
        "gap_p99_ms",
    )
    failures = [
        failure_line(name, err) for name, err in zip(names, errors, strict=True) if err is not None
    ]
    lines: list[str] = []
    by_key = {d.key: d for d in rows}
    for key in picked:
        d = by_key.get(key)
        if d is None or d.better in (None, "same") or d.delta is None:
            continue
        winner, loser = (names[1], names[0]) if d.better == "b" else names
        verb = "more" if d.higher_is_better else "less"
        if d.unit == "round trips":
            lines.append(
                f"{winner} should need {_fmt(d.delta, d.unit)} fewer before the request"
                " (expected from the protocol versions, not measured)"
            )
        else:
            lines.append(f"{d.label}: {winner} {_fmt(d.delta, d.unit)} {verb} than {loser}")
    if not lines and not failures:
        lines.append("no difference beyond noise between the two protocols")
    elif not lines and any(d.a is not None and d.b is not None for d in rows):
        lines.append("no difference beyond noise in what both runs finished")
    elif not lines:
        lines.append("nothing to compare: no metric was measured on both runs")
    lines = failures + lines
    jitter = max((d.jitter_ms for d in rows), default=0.0)
    lines.append(
        "one run per protocol is one sample: a time counts as different only beyond"
        f" max({NOISE_MS:g} ms, {NOISE_SHARE:.0%}, gap IQR {jitter:.1f} ms);"
        " repeat the comparison before trusting a winner"
    )
    return lines
