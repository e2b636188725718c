"""Which captured packets are the run's own: pure code over the bytes a capture handed in.

A capture sees the whole interface; the --pcap file keeps only the run's flows
(``FlowSet``: the TCP and UDP 5-tuples its sockets opened, the remote endpoints of
connects that never got a local port, its DNS queries by the names it asked for) and
the ICMP errors that quote one of those packets. Every packet is read as untrusted bytes: a
header that runs past the data, or a length that lies, makes the packet no match.

Packets are stripped of their link-layer header on the way (Ethernet, Linux cooked v1
and v2, or already raw): the file holds raw IPv4/IPv6 (LINKTYPE_RAW), one interface.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from promptpath.core.pcapng import (
    LINKTYPE_ETHERNET,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_RAW,
    Packet,
)

TCP, UDP, ICMP, ICMPV6 = 6, 17, 1, 58
_ETH_IPV4, _ETH_IPV6, _ETH_VLAN = 0x0800, 0x86DD, 0x8100
#: IPv6 extension headers stepped over to reach TCP/UDP (hop-by-hop, routing, dest opts).
_IPV6_EXTENSIONS = {0, 43, 60}
#: The most DNS labels read from a question (a name has at most 127).
_MAX_LABELS = 128

Endpoint = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Datagram:
    """The IP view of one packet: addresses, protocol, ports and where its payload sits."""

    proto: int
    src: str
    dst: str
    sport: int = 0
    dport: int = 0
    payload: int = 0  # offset of the TCP/UDP payload in the raw IP packet


def ip_of(packet: Packet) -> bytes | None:
    """The IP packet inside ``packet``'s link-layer header, or None (ARP, other)."""
    data = packet.data
    if packet.linktype == LINKTYPE_RAW:
        return data
    if packet.linktype == LINKTYPE_ETHERNET:
        at, ethertype = 12, -1
        while at + 2 <= len(data):
            (ethertype,) = struct.unpack_from("!H", data, at)
            if ethertype != _ETH_VLAN:
                break
            at += 4
        body, ethertype = data[at + 2 :], ethertype
    elif packet.linktype == LINKTYPE_LINUX_SLL and len(data) >= 16:
        (ethertype,) = struct.unpack_from("!H", data, 14)
        body = data[16:]
    elif packet.linktype == LINKTYPE_LINUX_SLL2 and len(data) >= 20:
        (ethertype,) = struct.unpack_from("!H", data, 0)
        body = data[20:]
    else:
        return None
    return body if ethertype in (_ETH_IPV4, _ETH_IPV6) else None


def parse_ip(raw: bytes) -> Datagram | None:
    """Addresses, protocol and ports of an IPv4/IPv6 packet; None when it is neither or
    its headers do not fit in the bytes."""
    if not raw:
        return None
    version = raw[0] >> 4
    if version == 4 and len(raw) >= 20:
        ihl = (raw[0] & 0x0F) * 4
        frag = struct.unpack_from("!H", raw, 6)[0] & 0x1FFF
        proto, at = raw[9], ihl
        src, dst = str(ipaddress.IPv4Address(raw[12:16])), str(ipaddress.IPv4Address(raw[16:20]))
        if ihl < 20 or frag:  # a later fragment carries no ports
            return Datagram(proto=proto, src=src, dst=dst, payload=len(raw))
    elif version == 6 and len(raw) >= 40:
        proto, at = raw[6], 40
        src, dst = str(ipaddress.IPv6Address(raw[8:24])), str(ipaddress.IPv6Address(raw[24:40]))
        while proto in _IPV6_EXTENSIONS and at + 8 <= len(raw):
            proto, at = raw[at], at + (raw[at + 1] + 1) * 8
    else:
        return None
    if proto == TCP and at + 20 <= len(raw):
        sport, dport = struct.unpack_from("!HH", raw, at)
        offset = at + (raw[at + 12] >> 4) * 4
        return Datagram(proto=proto, src=src, dst=dst, sport=sport, dport=dport, payload=offset)
    if proto == UDP and at + 8 <= len(raw):
        sport, dport = struct.unpack_from("!HH", raw, at)
        return Datagram(proto=proto, src=src, dst=dst, sport=sport, dport=dport, payload=at + 8)
    return Datagram(proto=proto, src=src, dst=dst, payload=min(at, len(raw)))


def dns_question(message: bytes) -> str | None:
    """The name of a DNS message's first question, lower case without the final dot; None
    when ``message`` is no DNS message with a question."""
    if len(message) < 12 or struct.unpack_from("!H", message, 4)[0] < 1:
        return None
    at, labels = 12, list[str]()
    for _ in range(_MAX_LABELS):
        if at >= len(message):
            return None
        length = message[at]
        if length == 0:
            return ".".join(labels).lower()
        if length & 0xC0 or at + 1 + length > len(message):
            return None  # a question's name is never compressed
        labels.append(message[at + 1 : at + 1 + length].decode("ascii", "replace"))
        at += 1 + length
    return None


@dataclass(slots=True, kw_only=True)
class FlowSet:
    """The run's own flows, as its sockets noted them (net/flows.py)."""

    #: (proto, local endpoint, remote endpoint) of each socket that got a local port.
    exact: set[tuple[int, Endpoint, Endpoint]] = field(default_factory=set)
    #: (proto, remote endpoint) of connects that failed before they had one.
    remote_only: set[tuple[int, Endpoint]] = field(default_factory=set)
    #: The names the run resolved, lower case; and the ports its resolvers listen on.
    names: set[str] = field(default_factory=set)
    dns_ports: set[int] = field(default_factory=lambda: {53})

    def matches(self, raw: bytes, *, quoted: bool = False) -> bool:
        """Whether the raw IP packet is one of the run's (``quoted``: the packet an ICMP
        error carries back, which may be cut after its ports)."""
        dgram = parse_ip(raw)
        if dgram is None:
            return False
        if dgram.proto in (ICMP, ICMPV6):
            # An ICMP error about our flows quotes our packet (after its 8-byte header):
            # kept when that packet is ours. On loopback every address is 127.0.0.1, so
            # the addresses alone would keep every program's ICMP.
            return not quoted and self.matches(raw[dgram.payload + 8 :], quoted=True)
        if dgram.proto not in (TCP, UDP):
            return False
        a, b = (dgram.src, dgram.sport), (dgram.dst, dgram.dport)
        for local, remote in ((a, b), (b, a)):
            if (dgram.proto, local, remote) in self.exact:
                return True
            if (dgram.proto, remote) in self.remote_only:
                return True
        if self.names and (dgram.sport in self.dns_ports or dgram.dport in self.dns_ports):
            body = raw[dgram.payload :]
            if dgram.proto == TCP and len(body) >= 2:
                body = body[2:]  # DNS over TCP: a two-byte length first
            return dns_question(body) in self.names
        return False


def own_packets(packets: Iterable[Packet], flows: FlowSet) -> list[Packet]:
    """The run's packets, each stripped to raw IP, in capture order."""
    out = []
    for packet in packets:
        raw = ip_of(packet)
        if raw is not None and flows.matches(raw):
            out.append(Packet(ts_ns=packet.ts_ns, linktype=LINKTYPE_RAW, data=raw, orig_len=None))
    return out


def contains_secret(packets: Sequence[Packet], secrets: Sequence[bytes]) -> bool:
    """Whether any packet's bytes hold one of ``secrets`` whole (the check a test and the
    refusal of cleartext captures lean on; split across segments is not looked for)."""
    wanted = [s for s in secrets if s]
    return any(s in p.data for p in packets for s in wanted)


__all__ = [
    "Datagram",
    "FlowSet",
    "contains_secret",
    "dns_question",
    "ip_of",
    "own_packets",
    "parse_ip",
]
