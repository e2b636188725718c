"""Raw ICMP listening for the path probe, when the process has CAP_NET_RAW.

The error queue (``IP_RECVERR``, net/pathtrace.py) brings a probe socket the ICMP its
packets caused without any privilege, but only the ICMP the kernel accepts as that
socket's: for TCP the quoted sequence number must lie in the connection's send window
(``tcp_v4_err``/``tcp_v6_err``; the kernel counts the others in ``TcpExt
OutOfWindowIcmps``). A middlebox that rewrites TCP sequence numbers (a firewall's
sequence randomisation) without fixing the copies routers beyond it quote makes every hop
past it look silent to the error queue, though its ICMP arrives. A raw ICMP socket sees
every ICMP packet the host receives; the probe matches each to its probe by the quoted
ports and destination, and uses it only for a probe the error queue left unanswered.

``parse`` is pure (bytes in, the facts out); ``open_listener`` and ``out_of_window_icmps``
are the I/O.
"""

from __future__ import annotations

import errno
import itertools
import socket
import struct
from dataclasses import dataclass

PROTO_TCP, PROTO_UDP = 6, 17
NETSTAT = "/proc/net/netstat"


@dataclass(frozen=True, slots=True, kw_only=True)
class HeardICMP:
    """An ICMP error about one of our packets, as a raw socket received it."""

    responder: str  # who sent the ICMP
    icmp: tuple[int, int]  # type, code
    protocol: int  # of the quoted packet: 6 TCP, 17 UDP
    source_port: int  # the quoted packet's (our probe socket's local port)
    destination: str  # the quoted packet's
    destination_port: int
    #: The next link's MTU, from a "fragmentation needed" (ICMP type 3 code 4) or "packet
    #: too big" (ICMPv6 type 2) message; None for other errors.
    mtu: int | None = None


def _quote(inner: bytes, family: int) -> tuple[int, str, int, int] | None:
    """(protocol, destination, source port, destination port) of the quoted packet."""
    if family == socket.AF_INET:
        if len(inner) < 20 or inner[0] >> 4 != 4:
            return None
        ihl = (inner[0] & 0x0F) * 4
        if ihl < 20 or len(inner) < ihl + 4:
            return None
        dst = socket.inet_ntop(socket.AF_INET, inner[16:20])
        sport, dport = struct.unpack(">HH", inner[ihl : ihl + 4])
        return inner[9], dst, sport, dport
    if len(inner) < 44 or inner[0] >> 4 != 6:
        return None  # extension headers before TCP/UDP are not followed: none are sent
    dst = socket.inet_ntop(socket.AF_INET6, inner[24:40])
    sport, dport = struct.unpack(">HH", inner[40:44])
    return inner[6], dst, sport, dport


def parse(packet: bytes, family: int, sender: str) -> HeardICMP | None:
    """One raw-socket read: an ICMP error quoting a TCP or UDP packet, else None.

    IPv4 raw sockets deliver the IP header too; ICMPv6 ones the ICMPv6 message only (the
    sender is the address recvfrom gives)."""
    if family == socket.AF_INET:
        if len(packet) < 20:
            return None
        ihl = (packet[0] & 0x0F) * 4
        sender = socket.inet_ntop(socket.AF_INET, packet[12:16])
        message = packet[ihl:]
        errors: tuple[int, ...] = (3, 11)  # destination unreachable, time exceeded
    else:
        message = packet
        errors = (1, 2, 3)  # destination unreachable, packet too big, time exceeded
    if len(message) < 8 or message[0] not in errors:
        return None
    # The next link's MTU: RFC 1191's 16 bits after 2 unused ones; RFC 4443's 32 bits.
    mtu = None
    if family == socket.AF_INET and message[:2] == b"\x03\x04":
        mtu = struct.unpack(">H", message[6:8])[0]
    elif family != socket.AF_INET and message[0] == 2:
        mtu = struct.unpack(">I", message[4:8])[0]
    quoted = _quote(message[8:], family)
    if quoted is None or quoted[0] not in (PROTO_TCP, PROTO_UDP):
        return None
    protocol, destination, sport, dport = quoted
    return HeardICMP(
        responder=sender,
        icmp=(message[0], message[1]),
        protocol=protocol,
        source_port=sport,
        destination=destination,
        destination_port=dport,
        mtu=mtu or None,
    )


def open_listener(family: int) -> tuple[socket.socket | None, str | None]:
    """A non-blocking raw ICMP socket, or None and why not (the capability it lacks)."""
    protocol = socket.IPPROTO_ICMPV6 if family == socket.AF_INET6 else socket.IPPROTO_ICMP
    try:
        sock = socket.socket(family, socket.SOCK_RAW, protocol)
    except PermissionError:
        return None, "no CAP_NET_RAW (not root, and no capability given)"
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES):
            return None, "no CAP_NET_RAW (not root, and no capability given)"
        return None, f"raw ICMP socket refused ({exc.strerror or exc})"
    sock.setblocking(False)
    return sock, None


def read_counter(text: str, name: str = "OutOfWindowIcmps") -> int | None:
    """A ``TcpExt`` counter from /proc/net/netstat's text (a header line, then values)."""
    lines = text.splitlines()
    for head, values in itertools.pairwise(lines):
        if head.startswith("TcpExt:") and values.startswith("TcpExt:"):
            row = dict(zip(head.split()[1:], values.split()[1:], strict=False))
            value = row.get(name)
            return int(value) if value is not None and value.isdigit() else None
    return None


def out_of_window_icmps() -> int | None:
    """How many ICMP errors this network namespace's TCP has dropped as out of window."""
    try:
        with open(NETSTAT, encoding="ascii", errors="replace") as fh:
            return read_counter(fh.read())
    except OSError:
        return None
