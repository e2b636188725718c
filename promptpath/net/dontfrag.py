"""Don't-fragment on a UDP socket, and the path MTU the kernel knows for a connected one.

QUIC's datagrams must not be fragmented at the IP layer (RFC 9000 §14: "the Don't
Fragment (DF) bit MUST be set if possible"). Linux's default for a UDP socket
(``IP_PMTUDISC_WANT``, from ``net.ipv4.ip_no_pmtu_disc=0``) sets DF only until the kernel
learns a smaller path MTU; then it fragments datagrams above it itself. Checked on a
namespace path with an 1100-byte link (tests/lab/test_path_mtu.py): the first 1200-byte
datagram drew the router's ICMP "fragmentation needed" (MTU 1100), every later one left as
a 1114-byte fragment and a 162-byte one and was reassembled at the server, which answered
it. So a client without DF reaches an HTTP/3 server over a path where a real QUIC client
(which sets DF) cannot.

Two modes, both DF, never fragmented by this host:

* ``DO`` (a real client): a datagram above the path MTU the kernel knows fails at once
  with ``EMSGSIZE``; one above the path MTU it does not know yet is dropped by the router,
  whose ICMP then fails the socket with ``EMSGSIZE`` (checked: the second send on that
  path failed locally, the error queue saying origin "local", MTU 1100).
* ``PROBE`` (a prober, as tracepath does): the path MTU the kernel learnt is ignored, so
  every datagram leaves with DF and every narrow link answers again: a second trace
  finds the hop as the first did (checked: three 1200-byte datagrams, three ICMP
  "fragmentation needed" from the same router).

Either way the ICMP teaches the kernel the path MTU (``ip route get`` shows ``cache
expires 597sec mtu 1100``): for about ten minutes this host's own connections to that
address use smaller packets (a TCP SYN then announces the smaller MSS).

The option numbers are Linux's (linux/in.h, linux/in6.h); Python exports only
``IPV6_DONTFRAG``. Elsewhere IPv6 uses that where it exists and IPv4 is left as it is.
"""

from __future__ import annotations

import socket
import sys
from typing import Literal

Mode = Literal["do", "probe"]

IP_MTU_DISCOVER = 10
IP_MTU = 14
IPV6_MTU_DISCOVER = 23
IPV6_MTU = 24
_PMTUDISC: dict[Mode, int] = {"do": 2, "probe": 3}  # IP(V6)_PMTUDISC_DO / _PROBE
IPV6_DONTFRAG: int | None = getattr(socket, "IPV6_DONTFRAG", None)
_LINUX = sys.platform.startswith("linux")


def forbid_fragmentation(sock: socket.socket, mode: Mode = "do") -> bool:
    """Set DF on ``sock`` (``mode`` as above). False where this system has no way to (or
    refused: the datagrams then go as the kernel's default sends them)."""
    options: list[tuple[int, int, int]] = []
    if sock.family == socket.AF_INET6:
        if _LINUX:
            options.append((socket.IPPROTO_IPV6, IPV6_MTU_DISCOVER, _PMTUDISC[mode]))
        if IPV6_DONTFRAG is not None:
            options.append((socket.IPPROTO_IPV6, IPV6_DONTFRAG, 1))
    elif _LINUX and sock.family == socket.AF_INET:
        options.append((socket.IPPROTO_IP, IP_MTU_DISCOVER, _PMTUDISC[mode]))
    done = False
    for level, option, value in options:
        try:
            sock.setsockopt(level, option, value)
            done = True
        except OSError:
            pass
    return done


def fragmentation_forbidden(sock: socket.socket) -> bool:
    """Whether ``sock`` sends with DF and never fragments (what ``forbid_fragmentation``
    set, read back from the kernel)."""
    if not _LINUX:
        return False
    if sock.family == socket.AF_INET6:
        value = sock.getsockopt(socket.IPPROTO_IPV6, IPV6_MTU_DISCOVER)
    else:
        value = sock.getsockopt(socket.IPPROTO_IP, IP_MTU_DISCOVER)
    return value in _PMTUDISC.values()


def path_mtu(sock: socket.socket) -> int | None:
    """The path MTU the kernel holds for a connected socket's peer (the route's, lowered by
    any ICMP "fragmentation needed" it learnt); None where it cannot be read."""
    if not _LINUX:
        return None
    try:
        if sock.family == socket.AF_INET6:
            return int(sock.getsockopt(socket.IPPROTO_IPV6, IPV6_MTU))
        return int(sock.getsockopt(socket.IPPROTO_IP, IP_MTU))
    except OSError:  # not connected, or closed
        return None
