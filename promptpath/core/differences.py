"""HTTP/2 against HTTP/3 for the same prompt: the differences that matter.

Everything here is pure: ``promptpath.tracer.trace_pair`` runs the traces, several per
protocol, interleaved (HTTP/2 then HTTP/3, then HTTP/3 then HTTP/2, ...) so that a drift
of the machine or the path lands on both.

Each metric is compared on its own samples: one value per run that finished what the
metric needs, the median of each side compared, and a noise floor from that metric's own
spread: max(NOISE_MS, NOISE_SHARE of the larger median, the sum of the two sides'
interquartile ranges). A difference within the floor is called "same"; the verdict is
taken on the unrounded values. With one run per side there is no spread to measure and
the floor is the fixed part only, which the summary says.

Round trips before the request can leave are expected from the protocol versions (TCP 1 +
TLS 1.3 1, or TLS 1.2 2; QUIC 1, folding transport and TLS), not measured: that row comes
after the measured ones, labelled as an expectation.

A metric counts only when the stages it needs finished ok in that run: a refused connect
or a timed-out QUIC handshake has a duration, but it is the time to fail, not a handshake
to compare. A side with no such run is None (null in JSON), so its delta and winner are
None too, and the summary names the run that failed and where.

On a loopback target a round trip is ~15 µs: every difference is the two processes' CPU
(client and server), not the path. There a measured difference beyond the floor names no
winner: it is marked client-side and the summary says so. A real CPU difference sits
wherever it sits against the floor, so naming a winner for it flipped from run to run.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from promptpath.core.addr import is_loopback as loopback_address
from promptpath.core.analysis import compute
from promptpath.core.difference_metrics import (
    METRICS,
    SETUP_STAGES,
    finished,
    handshake_ms,
    samples,
    setup_round_trips,
    stage_ms,
)
from promptpath.core.stats import percentile
from promptpath.core.timeline import ErrorInfo, Timeline

__all__ = [
    "DEFAULT_RUNS",
    "Difference",
    "differences",
    "differences_json",
    "failure_line",
    "handshake_ms",
    "is_loopback",
    "setup_round_trips",
    "shown",
    "summary",
]

Better = Literal["a", "b", "same"]

#: Differences below max(NOISE_MS, NOISE_SHARE x the larger median, IQR_a + IQR_b) are
#: called "same" (round trips: below ROUND_TRIP_FLOOR).
NOISE_MS = 2.0
NOISE_SHARE = 0.10
ROUND_TRIP_FLOOR = 0.5

#: Runs per protocol unless asked otherwise (--compare-runs).
DEFAULT_RUNS = 5


def _iqr(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    return percentile(values, 75) - percentile(values, 25)


@dataclass(frozen=True, slots=True, kw_only=True)
class Difference:
    """One metric measured on both protocols: each side's samples, one per run."""

    key: str  # JSON key: "handshake_ms", "ttft_ms", "gap_p99_ms", "setup_round_trips", ...
    label: str  # for people: "TTFT (from start)"
    unit: str  # "ms", "round trips", "tok/s"
    a_values: tuple[float, ...] = field(default=())  # first protocol (HTTP/2)
    b_values: tuple[float, ...] = field(default=())  # second protocol (HTTP/3)
    higher_is_better: bool = False
    measured: bool = True  # False: expected from the protocols (round trips), not timed
    #: The target is on this host (loopback): a time difference is CPU, never the path.
    on_host: bool = False

    @property
    def a(self) -> float | None:
        """The first side's median, None without a sample."""
        return statistics.median(self.a_values) if self.a_values else None

    @property
    def b(self) -> float | None:
        return statistics.median(self.b_values) if self.b_values else None

    @property
    def spread_a(self) -> float | None:
        """Interquartile range of the first side's samples (None below two)."""
        return _iqr(self.a_values)

    @property
    def spread_b(self) -> float | None:
        return _iqr(self.b_values)

    @property
    def noise_floor(self) -> float | None:
        """The smallest |delta| that is not called "same", in the metric's unit."""
        a, b = self.a, self.b
        if a is None or b is None:
            return None
        if self.unit == "round trips":
            return ROUND_TRIP_FLOOR
        spread = (self.spread_a or 0.0) + (self.spread_b or 0.0)
        share = NOISE_SHARE * max(abs(a), abs(b))
        fixed = NOISE_MS if self.unit == "ms" else 0.0
        return max(fixed, share, spread)

    @property
    def delta(self) -> float | None:
        """b - a (medians), in the metric's unit, unrounded."""
        a, b = self.a, self.b
        if a is None or b is None:
            return None
        return b - a

    @property
    def beyond_floor(self) -> bool:
        """|delta| exceeds the noise floor (on the unrounded values)."""
        diff, floor = self.delta, self.noise_floor
        return diff is not None and floor is not None and abs(diff) > floor

    @property
    def client_side(self) -> bool:
        """A measured difference beyond the floor to a target on this host: the two
        processes' CPU (client and server), which names no protocol the better one."""
        return self.on_host and self.measured and self.beyond_floor

    @property
    def better(self) -> Better | None:
        """Which side did better, "same" within the floor (and for a client-side
        difference), None when one side is missing. Decided on the unrounded values."""
        diff = self.delta
        if diff is None or self.noise_floor is None:
            return None
        if not self.beyond_floor or self.client_side:
            return "same"
        b_wins = diff > 0 if self.higher_is_better else diff < 0
        return "b" if b_wins else "a"


def differences(a_runs: Sequence[Timeline], b_runs: Sequence[Timeline]) -> list[Difference]:
    """Every metric we compare, each side from its own runs, measured rows first.

    "connection setup incl. DNS" is left out when no run spent time resolving (an IP
    literal, --resolve): it would repeat the handshake row. To a loopback target, a
    measured difference names no winner (see ``Difference.client_side``).
    """
    on_host = is_loopback([*a_runs, *b_runs])
    side_a = [(tl, compute(tl), finished(tl)) for tl in a_runs]
    side_b = [(tl, compute(tl), finished(tl)) for tl in b_runs]
    rows = []
    for metric in METRICS:
        if metric.key == "setup_ms" and not any(
            (stage_ms(tl, "dns") or 0.0) > 0 for tl in (*a_runs, *b_runs)
        ):
            continue
        rows.append(
            Difference(
                key=metric.key,
                label=metric.label,
                unit=metric.unit,
                a_values=samples(side_a, metric),
                b_values=samples(side_b, metric),
                higher_is_better=metric.higher_is_better,
                measured=metric.measured,
                on_host=on_host,
            )
        )
    return rows


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def differences_json(rows: list[Difference]) -> dict[str, dict[str, object]]:
    """``{key: {label, unit, http2, http3, delta, better, measured, noise_floor, samples,
    spread, values}}``: medians, their difference and the floor rounded to the µs (the
    verdict was taken before rounding)."""
    names = {"a": "http2", "b": "http3", "same": "same", None: None}
    return {
        d.key: {
            "label": d.label,
            "unit": d.unit,
            "http2": _r(d.a),
            "http3": _r(d.b),
            "delta": _r(d.delta),
            "better": names[d.better],
            "measured": d.measured,
            "noise_floor": _r(d.noise_floor),
            "client_side": d.client_side,
            "samples": {"http2": len(d.a_values), "http3": len(d.b_values)},
            "spread": {"http2": _r(d.spread_a), "http3": _r(d.spread_b)},
            "values": {
                "http2": [round(v, 3) for v in d.a_values],
                "http3": [round(v, 3) for v in d.b_values],
            },
        }
        for d in rows
    }


def shown(d: Difference) -> tuple[str, str]:
    """Δ and the noise floor as text, with as many decimals (1 to 3) as it takes for
    the reader to see the verdict: |Δ| visibly above the floor when it is beyond it,
    not above it otherwise (never "+2.0 against 2.0" and a winner)."""
    delta, floor = d.delta, d.noise_floor
    if delta is None or floor is None:
        return ("—" if delta is None else f"{delta:+.1f}"), ""
    for places in (1, 2, 3):
        above = round(abs(delta), places) > round(floor, places)
        if above == d.beyond_floor:
            break
    return f"{delta:+.{places}f}", f"{floor:.{places}f}"


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


def is_loopback(runs: Sequence[Timeline]) -> bool:
    """Whether every run that connected went to a loopback address (127/8, ::1)."""
    addresses = [tl.address[0] for tl in runs if tl.address is not None]
    return bool(addresses) and all(loopback_address(ip) for ip in addresses)


def summary(
    rows: list[Difference],
    names: tuple[str, str] = ("HTTP/2", "HTTP/3"),
    errors: tuple[ErrorInfo | None, ErrorInfo | None] = (None, None),
    *,
    runs: tuple[int, int] = (1, 1),
) -> list[str]:
    """Which protocol's runs failed (if one did), then sentences for the measured
    differences beyond the floor, then the expectation, then how the floor was set
    (``runs``: runs per protocol) and, on a loopback target, that the differences are
    the two processes' CPU rather than the path."""
    loopback = any(d.on_host for d in rows)
    picked = (
        "handshake_ms",
        "ttfb_ms",
        "ttft_ms",
        "ttft_from_request_ms",
        "first_output_ms",
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
        if d is None or d.delta is None:
            continue
        if d.client_side:
            slower = names[1] if d.delta > 0 else names[0]
            lines.append(
                f"{d.label}: {slower} {_fmt(d.delta, d.unit)} slower here, beyond the noise"
                " floor but client and server CPU on this host, not the path"
            )
            continue
        if d.better in (None, "same"):
            continue
        winner, loser = (names[1], names[0]) if d.better == "b" else names
        verb = "more" if d.higher_is_better else "less"
        lines.append(f"{d.label}: {winner} {_fmt(d.delta, d.unit)} {verb} than {loser}")
    if not lines and not failures:
        lines.append("no measured difference beyond the noise floor between the two protocols")
    elif not lines and any(d.a is not None and d.b is not None for d in rows if d.measured):
        lines.append("no measured difference beyond the noise floor in what both finished")
    elif not lines:
        lines.append("nothing to compare: no metric was measured on both protocols")
    trips = by_key.get("setup_round_trips")
    if trips is not None and trips.better in ("a", "b") and trips.delta is not None:
        winner = names[1] if trips.better == "b" else names[0]
        lines.append(
            f"expected, not measured: {winner} should need {_fmt(trips.delta, trips.unit)}"
            " fewer before the request (from the protocol versions)"
        )
    lines = failures + lines
    if loopback:
        lines.append(
            "the target is on this host (loopback, a round trip of ~0.02 ms): any difference"
            " is client and server CPU, not the path; compare over the real path to see"
            " round trips"
        )
    n_a, n_b = runs
    if max(n_a, n_b) < 2:
        lines.append(
            f"one run per protocol: no spread to measure, so a time counts as different only"
            f" beyond max({NOISE_MS:g} ms, {NOISE_SHARE:.0%}); repeat (--compare-runs) before"
            " trusting a winner"
        )
    else:
        lines.append(
            f"{n_a} run(s) of {names[0]} and {n_b} of {names[1]}, interleaved; each value is"
            " the median of the runs that finished it, and a difference counts only beyond"
            f" max({NOISE_MS:g} ms, {NOISE_SHARE:.0%}, the two sides' interquartile ranges"
            " added)"
        )
    return lines
