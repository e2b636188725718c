"""What watch reads from each trace's run document: its metrics and its facts. Pure.

Watch reads the ``promptpath.run/1`` document exactly as ``run --json`` prints it (the
line its history keeps), so a trace measured now and one read back from a history file
are read by the same code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from promptpath.core.change.band import BandRule


@dataclass(frozen=True, slots=True, kw_only=True)
class Metric:
    """One row of the watch table."""

    name: str  # the short name (history, events)
    label: str  # the row's label
    unit: str
    #: the stage a failure in which counts against this row ("" for derived rows)
    stage: str
    read: Callable[[Mapping[str, Any]], float | None]
    rule: BandRule
    #: 1 when a higher value is worse (durations), -1 when lower is (tokens/s).
    worse: int = 1


def _at(*keys: str) -> Callable[[Mapping[str, Any]], float | None]:
    def read(doc: Mapping[str, Any]) -> float | None:
        value: Any = doc
        for key in keys:
            if not isinstance(value, Mapping):
                return None
            value = value.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)

    return read


#: A stage's band is at least 10 ms or 10 % of its median either side: a loopback stage
#: of 0.4 ms whose MAD is 0.02 ms must not call a 1 ms trace a change.
_STAGE = BandRule(floor=10.0, share=0.1)
#: Gaps between tokens are tens of ms: 5 ms or 20 % of the median.
_GAP = BandRule(floor=5.0, share=0.2)
_RATE = BandRule(floor=2.0, share=0.2)

STAGES = ("dns", "connect", "tls", "quic_handshake", "request", "wait", "first_token", "streaming")
_LABELS = {
    "dns": "DNS",
    "connect": "TCP connect",
    "tls": "TLS",
    "quic_handshake": "QUIC handshake",
    "request": "request",
    "wait": "wait (TTFB)",
    "first_token": "first token",
    "streaming": "streaming",
}

METRICS: tuple[Metric, ...] = (
    *(
        Metric(name=s, label=_LABELS[s], unit="ms", stage=s, read=_at("stages_ms", s), rule=_STAGE)
        for s in STAGES
    ),
    Metric(
        name="ttft",
        label="TTFT",
        unit="ms",
        stage="",
        read=_at("ttft_ms", "from_start"),
        rule=_STAGE,
    ),
    Metric(
        name="gap_p50",
        label="gap p50",
        unit="ms",
        stage="",
        read=_at("tokens", "gaps_ms", "p50"),
        rule=_GAP,
    ),
    Metric(
        name="gap_p95",
        label="gap p95",
        unit="ms",
        stage="",
        read=_at("tokens", "gaps_ms", "p95"),
        rule=_GAP,
    ),
    Metric(
        name="tokens_per_s",
        label="tokens/s",
        unit="tok/s",
        stage="",
        read=_at("tokens", "per_second"),
        rule=_RATE,
        worse=-1,
    ),
)
BY_NAME: Mapping[str, Metric] = {m.name: m for m in METRICS}


def values_of(doc: Mapping[str, Any]) -> dict[str, float]:
    """Every metric the document has a value for."""
    out = {}
    for metric in METRICS:
        value = metric.read(doc)
        if value is not None:
            out[metric.name] = value
    return out


def failure_of(doc: Mapping[str, Any]) -> tuple[str, str] | None:
    """(stage, message) of a failed trace, or None."""
    error = doc.get("error")
    if not isinstance(error, Mapping):
        return None if doc.get("ok", True) else ("unknown", "failed")
    stage, message = error.get("stage"), error.get("message")
    return (str(stage or "unknown"), str(message or error.get("kind") or "failed"))


__all__ = ["BY_NAME", "METRICS", "STAGES", "Metric", "failure_of", "values_of"]
