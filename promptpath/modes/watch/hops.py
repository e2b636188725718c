"""--path: the path probe's hops kept across its runs, mtr-style. Pure.

Each run of the path probe (every ``--path-every`` traces) sends a few TTL-limited probes
per hop and its finding lists the hops (``evidence.hops``). Here they add up: per TTL the
probes sent and answered since the watch began (loss), the median RTT of each run over
the window (last, average, best, worst), the responder last seen, and whether the path
probe's latest reading judged that hop's loss or delay its own ICMP's deprioritisation
(a loss or delay that does not persist to the end of the path), as it already judges.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Hops kept: the path probe's own maximum TTL.
MAX_HOPS = 30


@dataclass(slots=True)
class HopStats:
    ttl: int
    responder: str | None = None
    sent: int = 0
    answered: int = 0
    best: float | None = None
    worst: float | None = None
    medians: deque[float] | None = None
    deprioritised: bool = False
    destination: bool = False

    @property
    def loss(self) -> float:
        return 0.0 if not self.sent else 1.0 - self.answered / self.sent

    @property
    def last(self) -> float | None:
        return self.medians[-1] if self.medians else None

    @property
    def average(self) -> float | None:
        return sum(self.medians) / len(self.medians) if self.medians else None


class PathHops:
    def __init__(self, window: int = 30) -> None:
        self.window = window
        self.hops: dict[int, HopStats] = {}
        self.runs = 0
        self.summary: str | None = None  # the latest finding's summary line
        self.verdict: str | None = None

    def reset(self) -> None:
        self.hops.clear()
        self.runs = 0

    def feed(self, finding: Mapping[str, Any]) -> None:
        """One path probe finding (its ``as_dict()``)."""
        self.summary = str(finding.get("summary", ""))
        self.verdict = str(finding.get("verdict", ""))
        evidence = finding.get("evidence")
        if not isinstance(evidence, Mapping):
            return
        hops = evidence.get("hops")
        if not isinstance(hops, Sequence):
            return  # skipped (no Linux, behind a proxy): the summary says why
        self.runs += 1
        deprioritised = evidence.get("deprioritised")
        marked = set(deprioritised) if isinstance(deprioritised, Sequence) else set()
        for hop in hops[:MAX_HOPS]:
            if isinstance(hop, Mapping):
                self._hop(hop, hop.get("ttl") in marked)

    def _hop(self, hop: Mapping[str, Any], deprioritised: bool) -> None:
        ttl = hop.get("ttl")
        if not isinstance(ttl, int):
            return
        stats = self.hops.get(ttl)
        if stats is None:
            stats = self.hops[ttl] = HopStats(ttl=ttl, medians=deque(maxlen=self.window))
        responders = hop.get("responders")
        if isinstance(responders, Sequence) and responders:
            stats.responder = str(responders[-1])
        stats.sent += _int(hop.get("sent"))
        stats.answered += _int(hop.get("answered"))
        stats.deprioritised = deprioritised
        stats.destination = bool(hop.get("destination"))
        rtt = hop.get("rtt_ms")
        if isinstance(rtt, Mapping):
            low, mid, high = (_num(rtt.get(k)) for k in ("min", "median", "max"))
            if mid is not None and stats.medians is not None:
                stats.medians.append(mid)
            if low is not None and (stats.best is None or low < stats.best):
                stats.best = low
            if high is not None and (stats.worst is None or high > stats.worst):
                stats.worst = high

    def rows(self) -> list[HopStats]:
        return [self.hops[ttl] for ttl in sorted(self.hops)]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


__all__ = ["HopStats", "PathHops"]
