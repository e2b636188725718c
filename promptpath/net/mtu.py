"""Path-MTU black holes: does the server's first flight arrive only in small segments?

A black hole drops full-size packets and filters the ICMP "fragmentation needed" that would
tell the sender to shrink them: the small ClientHello goes through, the server's certificate
flight never arrives, and the TLS stage stalls. Announcing a small MSS in our SYN
(``TCP_MAXSEG`` before ``connect()``) makes the server send small segments: if a handshake
with a clamped MSS completes where the full-size one stalls, the path is a black hole, and
the largest MSS that still completes gives its size.

Looking only: a TLS handshake with no request and no key, its certificate not checked (the
trace checks it), closed right after.
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass

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
