"""The HTTP/3 half of the path reading: do 1200-byte datagrams reach a QUIC server, and
where do they stop? Pure.

The datagrams carry don't-fragment (net/pathtrace.py). A QUIC server's version negotiation
says they get through; a "too big" answer (ICMP "fragmentation needed") says the path MTU
is below them after the hop that sent it; silence past a hop says UDP is filtered there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from promptpath.probes.path.hops import Hop, Sample, hops_of, name_of

#: UDP and IP headers around a datagram: a 1200-byte one is a 1228-byte IPv4 packet.
UDP_IP_HEADERS = {False: 28, True: 48}  # keyed by "is IPv6"
QUIC_DATAGRAM_BYTES = 1200


def read_udp(
    udp: Sequence[Sample],
    destination: str,
    port: int,
    tcp_reached: bool,
    names: Mapping[str, str | None] | None,
) -> tuple[dict[str, object], str, bool, Narrowing | None]:
    """The UDP trace read: its facts (the finding's ``evidence.udp``), the sentence for the
    summary, whether HTTP/3 cannot work from here, and where datagrams stop for being too
    big (None: they do not)."""
    # A "too big" answer is not a hop's: it is the hop before the narrow link speaking
    # for a TTL past it (or this host's own route), so it is read apart.
    hops = hops_of([s for s in udp if s.kind != "too_big"], destination, names)
    last = hops[-1] if hops else None
    vn = any(s.kind == "quic_vn" for s in udp)
    closed = last is not None and last.destination and not vn
    answered = [h for h in hops if h.rtts_ms and not h.destination]
    narrowing = None if vn else narrowing_of(udp, hops, destination)
    facts: dict[str, object] = {
        "hops": [h.as_dict() for h in hops],
        "quic_answered": vn,
        "port_closed": closed,
        "datagram_bytes": QUIC_DATAGRAM_BYTES,
        "dont_fragment": True,
        "path_mtu": None if narrowing is None else narrowing.as_dict(),
    }
    if vn:
        return (
            facts,
            (
                f"1200-byte UDP datagrams reach {destination} port {port} unfragmented and it"
                " answers QUIC: HTTP/3's Initials get through"
            ),
            False,
            None,
        )
    if narrowing is not None:
        return facts, narrowing.sentence(tcp_reached=tcp_reached), True, narrowing
    if closed:
        closed_note = f"UDP port {port} is closed at {destination} (ICMP port unreachable)"
        return facts, closed_note, True, None
    beyond = f" after hop {answered[-1].ttl} ({name_of(answered[-1])})" if answered else ""
    return (
        facts,
        (
            f"1200-byte UDP datagrams to port {port} get no answer from {destination}{beyond}:"
            " UDP is filtered on the path, so HTTP/3 cannot work from here"
            + (" (TCP reaches it)" if tcp_reached else "")
        ),
        True,
        None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Narrowing:
    """Where 1200-byte datagrams stop for being too big: after hop ``after_hop`` (0: this
    host's own route refused them), whose next link carries ``mtu``-byte packets."""

    after_hop: int
    hop: Hop | None  # the hop before the narrow link (None: this host's own route)
    responder: str | None
    mtu: int | None
    ipv6: bool

    def as_dict(self) -> dict[str, object]:
        return {"after_hop": self.after_hop, "responder": self.responder, "bytes": self.mtu}

    @property
    def where(self) -> str:
        if self.after_hop == 0:
            return "on this host's own route"
        named = f" ({name_of(self.hop)})" if self.hop is not None else ""
        return f"after hop {self.after_hop}{named}"

    def sentence(self, *, tcp_reached: bool) -> str:
        packet = QUIC_DATAGRAM_BYTES + UDP_IP_HEADERS[self.ipv6]
        carries = f"packets of at most {self.mtu} bytes" if self.mtu else "only smaller packets"
        told = "EMSGSIZE" if self.after_hop == 0 else "ICMP 'fragmentation needed'"
        return (
            f"the path MTU is below 1200-byte UDP datagrams {self.where}: the next link"
            f" carries {carries} ({told}), a 1200-byte datagram is a {packet}-byte packet,"
            " and QUIC must not be fragmented (RFC 9000 §14): HTTP/3 cannot work from here"
            + (" (TCP reaches it)" if tcp_reached else "")
        )

    def advice(self) -> str:
        packet = QUIC_DATAGRAM_BYTES + UDP_IP_HEADERS[self.ipv6]
        return (
            f"HTTP/3 needs {packet}-byte packets through unfragmented: raise the MTU of the"
            f" link {self.where} (a tunnel's or VPN's) to at least {packet} bytes, or expect"
            " clients to fall back to HTTP/2"
        )


def narrowing_of(udp: Sequence[Sample], hops: Sequence[Hop], destination: str) -> Narrowing | None:
    """The first "too big" answer, placed: the hop that sent it is the one whose next link
    is narrow (it answered time-exceeded at its own TTL; else the TTL before the probe's)."""
    big = [s for s in udp if s.kind == "too_big"]
    if not big:
        return None
    first = min(big, key=lambda s: s.ttl)
    ipv6 = ":" in destination
    if first.responder is None:
        return Narrowing(after_hop=0, hop=None, responder=None, mtu=first.mtu, ipv6=ipv6)
    hop = next(
        (h for h in hops if first.responder in h.responders and h.ttl < first.ttl),
        next((h for h in hops if h.ttl == first.ttl - 1), None),
    )
    return Narrowing(
        after_hop=hop.ttl if hop is not None else max(0, first.ttl - 1),
        hop=hop if hop is not None and hop.responders else None,
        responder=first.responder,
        mtu=first.mtu,
        ipv6=ipv6,
    )
