"""One candidate edge timed: TCP connects (stamped at the syscall, as the trace's connect
stage is: net/tcp.py; each with the kernel's own RTT sample of its handshake, TCP_INFO's
``tcpi_rtt`` as net/tcprtt.py reads it for every run), one TLS handshake with the trace's
SNI and ALPN, the fingerprint of the certificate it serves, and optionally one HEAD request
for the edge's headers and time to first byte. No key, no body: nothing that costs tokens.

The handshake is made with verification off: it times and fingerprints, the trace
verifies. Every wait has a deadline; the response head read is bounded (``MAX_HEAD``).
"""

from __future__ import annotations

import hashlib
import socket
import ssl
import time
from dataclasses import dataclass, field

import anyio

from promptpath.net.tcp import connect_address
from promptpath.net.tcprtt import read_tcp_rtt

#: The most of a HEAD answer read: its status line and headers, nothing more.
MAX_HEAD = 16 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Handshake:
    """What one TLS handshake (and the HEAD after it) showed."""

    tls_ms: float | None = None
    alpn: str | None = None
    version: str | None = None
    fingerprint: str | None = None  # SHA-256 of the leaf certificate, hex
    ttfb_ms: float | None = None  # HEAD sent -> first byte of the answer
    status: int | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectSamples:
    """Each connect's handshake in ms as stamped at the syscall, and the kernel's RTT
    sample of it (``tcpi_rtt`` right after the handshake; None where it gave none)."""

    stamped_ms: tuple[float, ...]
    kernel_ms: tuple[float | None, ...]


async def connect_samples(ip: str, port: int, *, count: int, timeout: float) -> ConnectSamples:
    """``count`` TCP connects one after another; raises OSError (with what happened) when
    the first fails."""
    stamped: list[float] = []
    kernel: list[float | None] = []
    for i in range(count):
        try:
            stream, start, end = await connect_address(ip, port, timeout=timeout)
        except OSError:
            if i == 0:
                raise
            break
        rtt = read_tcp_rtt(stream.extra(anyio.abc.SocketAttribute.raw_socket, None))
        await stream.aclose()
        stamped.append((end - start) / 1e6)
        kernel.append(None if rtt is None else rtt.smoothed_ms)
    return ConnectSamples(tuple(stamped), tuple(kernel))


def _read_head(conn: socket.socket | ssl.SSLSocket, deadline: float) -> tuple[bytes, int | None]:
    """The answer's head (bounded), and when its first byte came (perf_counter_ns)."""
    data = b""
    first: int | None = None
    while b"\r\n\r\n" not in data and len(data) < MAX_HEAD:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        conn.settimeout(remaining)
        try:
            piece = conn.recv(MAX_HEAD - len(data))
        except (TimeoutError, OSError):
            break
        if not piece:
            break
        if first is None:
            first = time.perf_counter_ns()
        data += piece
    return data, first


def _parse_head(data: bytes) -> tuple[int | None, tuple[tuple[str, str], ...]]:
    lines = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else None
    headers = []
    for line in lines[1:100]:
        name, sep, value = line.partition(":")
        if sep and name.strip():
            headers.append((name.strip().lower(), value.strip()))
    return status, tuple(headers)


def handshake(
    ip: str,
    port: int,
    host: str,
    *,
    tls: bool,
    alpn: tuple[str, ...],
    head: str | None,
    timeout: float,
) -> Handshake:
    """Blocking (run it in a thread): connect, TLS (when ``tls``), then ``HEAD head``
    when given (over HTTP/1.1: ALPN then offers only ``http/1.1``)."""
    deadline = time.monotonic() + timeout
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    raw = socket.socket(family, socket.SOCK_STREAM)
    conn: socket.socket | ssl.SSLSocket = raw
    try:
        # As the trace's connections: without it Nagle holds the HEAD until the TLS
        # Finished is acknowledged, and the time to first byte reads two round trips.
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(timeout)
        try:
            raw.connect((ip, port))
        except OSError as exc:
            return Handshake(error=f"no TCP connection ({exc.strerror or exc})")
        out: dict[str, object] = {}
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["http/1.1"] if head is not None else list(alpn))
            start = time.perf_counter_ns()
            try:
                raw.settimeout(max(0.01, deadline - time.monotonic()))
                conn = ctx.wrap_socket(raw, server_hostname=host)
            except (OSError, ssl.SSLError) as exc:
                return Handshake(error=f"TLS handshake failed ({exc})"[:200])
            out["tls_ms"] = round((time.perf_counter_ns() - start) / 1e6, 3)
            assert isinstance(conn, ssl.SSLSocket)
            der = conn.getpeercert(binary_form=True)
            out["fingerprint"] = None if der is None else hashlib.sha256(der).hexdigest()
            out["alpn"] = conn.selected_alpn_protocol()
            out["version"] = conn.version()
        if head is not None:
            authority = host if port in (80, 443) else f"{host}:{port}"
            request = (
                f"HEAD {head} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: promptpath\r\n"
                "Accept: */*\r\nConnection: close\r\n\r\n"
            ).encode("latin-1", "replace")
            sent = time.perf_counter_ns()
            try:
                conn.sendall(request)
            except OSError as exc:
                return Handshake(**out, error=f"HEAD not sent ({exc})"[:200])  # type: ignore[arg-type]
            data, first = _read_head(conn, deadline)
            status, headers = _parse_head(data)
            out["ttfb_ms"] = None if first is None else round((first - sent) / 1e6, 3)
            out["status"], out["headers"] = status, headers
        return Handshake(**out)  # type: ignore[arg-type]
    finally:
        conn.close()


async def handshake_async(
    ip: str,
    port: int,
    host: str,
    *,
    tls: bool,
    alpn: tuple[str, ...],
    head: str | None,
    timeout: float,
) -> Handshake:
    """``handshake`` in a worker thread."""

    def run() -> Handshake:
        return handshake(ip, port, host, tls=tls, alpn=alpn, head=head, timeout=timeout)

    return await anyio.to_thread.run_sync(run)
