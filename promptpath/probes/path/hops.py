"""The path probe's samples grouped into hops, as mtr shows them. Pure.

One sample per probe (its TTL, what answered, the round trip); one hop per TTL, up to the
first TTL the destination answered at. Both readings (path/verdict.py for TCP, path/udp.py
for HTTP/3's datagrams) and the MTU probe's placing (mtu/verdict.py) start here.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

Kind = Literal["time_exceeded", "unreachable", "synack", "rst", "quic_vn", "too_big", "none"]
DESTINATION_KINDS = ("synack", "rst", "quic_vn")


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One probe: its TTL and what answered (``rtt_ms`` None: nothing did)."""

    ttl: int
    kind: Kind
    responder: str | None
    rtt_ms: float | None
    mtu: int | None = None  # too_big: the largest packet the next link carries


class Reply(Protocol):
    """What net/pathtrace.py's ProbeReply carries that the reading needs."""

    @property
    def ttl(self) -> int: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def responder(self) -> str | None: ...
    @property
    def rtt_ns(self) -> int | None: ...
    @property
    def mtu(self) -> int | None: ...


def samples_of(replies: Iterable[Reply]) -> list[Sample]:
    """The trace's replies as samples, RTTs in ms."""
    return [
        Sample(
            ttl=r.ttl,
            kind=r.kind,
            responder=r.responder,
            rtt_ms=None if r.rtt_ns is None else round(r.rtt_ns / 1e6, 3),
            mtu=r.mtu,
        )
        for r in replies
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class Hop:
    ttl: int
    responders: tuple[str, ...]  # every address that answered at this TTL (ECMP shows >1)
    sent: int
    rtts_ms: tuple[float, ...]
    destination: bool
    #: Each responder's reverse name (None: it has none), when --path-names asked for them.
    names: tuple[str | None, ...] | None = None

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.rtts_ms) if self.rtts_ms else None

    @property
    def loss(self) -> float:
        return 1.0 - len(self.rtts_ms) / self.sent if self.sent else 0.0

    def as_dict(self) -> dict[str, object]:
        rtts = self.rtts_ms
        named = {} if self.names is None else {"names": list(self.names)}
        return {
            "ttl": self.ttl,
            "responders": list(self.responders),
            **named,
            "sent": self.sent,
            "answered": len(rtts),
            "loss": round(self.loss, 3),
            "rtt_ms": None
            if not rtts
            else {
                "min": round(min(rtts), 3),
                "median": round(statistics.median(rtts), 3),
                "max": round(max(rtts), 3),
            },
            "destination": self.destination,
        }


def hops_of(
    samples: Sequence[Sample], destination: str, names: Mapping[str, str | None] | None = None
) -> list[Hop]:
    """Samples grouped per TTL, up to the first TTL the destination answered at; with
    ``names`` (address -> reverse name), each responder's name beside it."""
    by_ttl: dict[int, list[Sample]] = {}
    for s in samples:
        by_ttl.setdefault(s.ttl, []).append(s)
    hops: list[Hop] = []
    for ttl in sorted(by_ttl):
        group = by_ttl[ttl]
        answered = [s for s in group if s.rtt_ms is not None]
        at_dest = any(s.kind in DESTINATION_KINDS or s.responder == destination for s in answered)
        responders = tuple(dict.fromkeys(s.responder for s in answered if s.responder))
        hops.append(
            Hop(
                ttl=ttl,
                responders=responders,
                sent=len(group),
                rtts_ms=tuple(s.rtt_ms for s in answered if s.rtt_ms is not None),
                destination=at_dest,
                names=None if names is None else tuple(names.get(r) for r in responders),
            )
        )
        if at_dest:
            break
    return hops


def name_of(hop: Hop) -> str:
    """The hop's responders, each as mtr shows a named one: ``name (address)``."""
    names = hop.names or (None,) * len(hop.responders)
    shown = [f"{n} ({a})" if n else a for a, n in zip(hop.responders, names, strict=True)]
    return " / ".join(shown) or "?"
