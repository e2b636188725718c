"""Path-MTU black holes: does the server's first flight arrive only in small segments?

A black hole drops full-size packets and filters the ICMP "fragmentation needed" that would
tell the sender to shrink them: the small ClientHello goes through, the server's certificate
flight never arrives, and the TLS stage stalls. Announcing a small MSS in our SYN
(``TCP_MAXSEG`` before ``connect()``) makes the server send small segments: if a handshake
with a clamped MSS completes where the full-size one stalls, the path is a black hole, and
the largest MSS that still completes gives its size.

Looking only: a TLS handshake with no request and no key, its certificate not checked (the
trace checks it), closed right after.

Where the path narrows (``locate``): datagrams of the size that failed, with DF and a
rising TTL (net/pathtrace.py), beside small TCP SYNs. A router answers a probe whose TTL
runs out before it checks the size (checked on the lab chain: TTL 2 brought r2's
time-exceeded, TTL 3 its "fragmentation needed"), so full-size probes are answered up to
the hop before the narrow link; past it they draw that hop's "fragmentation needed" with
the link's MTU, or, where that ICMP is filtered too, nothing while small probes still are.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass

from promptpath.net import flows
from promptpath.net.dontfrag import path_mtu
from promptpath.net.pathtrace import Traced, trace_path

#: The smallest MSS an IPv4 host must accept (RFC 9293 §3.7.1); IPv6's is 1220.
MIN_MSS: dict[int, int] = {socket.AF_INET: 536, socket.AF_INET6: 1220}
#: IP and TCP headers between an MSS and the packet size a link carries.
HEADERS: dict[int, int] = {socket.AF_INET: 40, socket.AF_INET6: 60}


@dataclass(frozen=True, slots=True, kw_only=True)
class Handshake:
    mss: int | None  # None: the kernel's own (the interface MTU's)
    completed: bool
    elapsed_ms: float
    received: int  # bytes of the server's flight that arrived (0: none)
    error: str | None = None


def handshake(
    address: tuple[str, int], family: int, sni: str | None, *, mss: int | None, timeout_s: float
) -> Handshake:
    """One looking-only TLS handshake, the MSS clamped when ``mss`` is given."""
    raw = socket.socket(family, socket.SOCK_STREAM)
    raw.settimeout(timeout_s)
    if mss is not None:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # looking only; the trace judged the certificate
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=sni)
    start = time.perf_counter_ns()
    received = 0
    try:
        raw.connect(address)
        flows.note_socket(raw, flows.TCP)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                tls.do_handshake()
                raw.sendall(outgoing.read())
                return Handshake(
                    mss=mss, completed=True, elapsed_ms=_since(start), received=received
                )
            except ssl.SSLWantReadError:
                raw.sendall(outgoing.read())
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            raw.settimeout(left)
            data = raw.recv(65536)
            if not data:
                raise ConnectionError("the server closed the connection")
            received += len(data)
            incoming.write(data)
    except TimeoutError:
        return Handshake(
            mss=mss,
            completed=False,
            elapsed_ms=_since(start),
            received=received,
            error="timed out",
        )
    except (OSError, ssl.SSLError) as exc:
        return Handshake(
            mss=mss,
            completed=False,
            elapsed_ms=_since(start),
            received=received,
            error=str(exc) or type(exc).__name__,
        )
    finally:
        raw.close()


#: UDP and IP headers: a datagram of N bytes is a packet of N + these.
UDP_HEADERS: dict[int, int] = {socket.AF_INET: 28, socket.AF_INET6: 48}
#: The locating traces: full-size datagrams twice per TTL, small SYNs once.
LOCATE_ROUNDS = 2
LOCATE_MAX_TTL = 15
LOCATE_TIMEOUT_S = 1.0
#: The longest both take: each round waits out one probe timeout past its last send.
LOCATE_BUDGET_S = (LOCATE_ROUNDS + 1) * (LOCATE_TIMEOUT_S + LOCATE_MAX_TTL * 0.005)


@dataclass(frozen=True, slots=True, kw_only=True)
class Located:
    packet_bytes: int  # the full-size probes' packets, IP header included
    big: Traced  # UDP, DF, ``packet_bytes`` long
    small: Traced  # TCP SYNs


def locate(address: tuple[str, int], family: int, *, packet_bytes: int) -> Located:
    """Full-size DF datagrams (``packet_bytes``, or the route's MTU when that is smaller)
    and small SYNs toward ``address``, TTL 1 up. Blocking; raises PathUnsupported where
    ICMP errors cannot be received unprivileged.

    The ICMP "fragmentation needed" a narrow hop answers teaches this host the path MTU
    (net/dontfrag.py): run it after the handshakes, which must see the path untaught."""
    route = _route_mtu(address, family)
    if route is not None:
        packet_bytes = min(packet_bytes, route)
    headers = UDP_HEADERS.get(family, 28)
    big = trace_path(
        address,
        family,
        protocol="udp",
        rounds=LOCATE_ROUNDS,
        max_ttl=LOCATE_MAX_TTL,
        timeout_s=LOCATE_TIMEOUT_S,
        datagram_bytes=max(packet_bytes - headers, 0),
    )
    small = trace_path(
        address,
        family,
        protocol="tcp",
        rounds=1,
        max_ttl=LOCATE_MAX_TTL,
        timeout_s=LOCATE_TIMEOUT_S,
    )
    return Located(packet_bytes=packet_bytes, big=big, small=small)


def _route_mtu(address: tuple[str, int], family: int) -> int | None:
    """The MTU of this host's route to ``address`` (connecting a UDP socket sends nothing)."""
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            return path_mtu(sock)
    except OSError:
        return None


def _since(start: int) -> float:
    return round((time.perf_counter_ns() - start) / 1e6, 3)


@dataclass(frozen=True, slots=True, kw_only=True)
class MTUCheck:
    full: Handshake  # with the kernel's own MSS
    small: Handshake | None  # with the smallest MSS (only when the full one stalled)
    largest_working_mss: int | None  # the search's answer (a black hole only)
    tried: tuple[Handshake, ...]  # every handshake, in order

    @property
    def black_hole(self) -> bool:
        return not self.full.completed and self.small is not None and self.small.completed


def check(
    address: tuple[str, int],
    family: int,
    sni: str | None,
    *,
    timeout_s: float = 3.0,
    steps: int = 4,
    full_mss: int = 1460,
) -> MTUCheck:
    """The full-size handshake; when it fails, the smallest MSS; when that completes, a
    binary search for the largest MSS that still completes (``steps`` handshakes)."""
    full = handshake(address, family, sni, mss=None, timeout_s=timeout_s)
    tried = [full]
    if full.completed:
        return MTUCheck(full=full, small=None, largest_working_mss=None, tried=tuple(tried))
    low = MIN_MSS.get(family, 536)
    small = handshake(address, family, sni, mss=low, timeout_s=timeout_s)
    tried.append(small)
    if not small.completed:
        return MTUCheck(full=full, small=small, largest_working_mss=None, tried=tuple(tried))
    good, bad = low, full_mss
    for _ in range(steps):
        if bad - good <= 8:
            break
        middle = (good + bad) // 2
        attempt = handshake(address, family, sni, mss=middle, timeout_s=timeout_s)
        tried.append(attempt)
        if attempt.completed:
            good = middle
        else:
            bad = middle
    return MTUCheck(full=full, small=small, largest_working_mss=good, tried=tuple(tried))
