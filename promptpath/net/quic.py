"""One traced request over HTTP/3: resolve → QUIC handshake → request → stream.

aioquic's ``connect()`` resolves the name itself, keeps the first address only and binds
an IPv6 socket, so we build the datagram endpoint ourselves: our own timed DNS stage, one
UDP socket per resolved address (IPv4 or IPv6 to match), ``server_name`` for SNI. The
protocol below only pumps datagrams between that socket and a sans-IO ``QuicConnection``
and stamps every datagram with ``perf_counter_ns`` the moment it arrives; the stream
decoder, milestones and reports are the ones the TCP tracer uses.

The request is never sent as 0-RTT early data: no session ticket is offered to a traced
connection, and nothing is written on a stream before the handshake has completed.

aioquic is imported here only, and ``promptpath.trace`` imports this module only for
``--http 3``: an HTTP/2 run never pays for it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from promptpath.errors import (
    ConnectError,
    PromptpathError,
    StreamError,
    TLSError,
    TraceTimeout,
    UsageError,
)
from promptpath.ingest import (
    SNIFF_LIMIT,
    BodyIngest,
    is_event_stream,
    not_a_stream_error,
    status_error,
)
from promptpath.net import dns
from promptpath.net.tlsinfo import _VERIFY_KINDS, cert_info
from promptpath.options import RunOptions
from promptpath.providers import PreparedRequest, prepare
from promptpath.timeline import ConnectAttempt, ErrorInfo, Read, Timeline, TLSInfo
from promptpath.trace import TraceResult, _close_open_stages, new_timeline, phase_of

#: Longest wait for a QUIC handshake on one address (bounded by --timeout as well).
HANDSHAKE_TIMEOUT_S = 5.0

#: Wire version numbers we can name.
QUIC_VERSIONS = {0x00000001: "QUICv1", 0x6B3343CF: "QUICv2"}

#: Request headers that are connection-specific and forbidden in HTTP/3 (RFC 9114 §4.2).
_FORBIDDEN = frozenset(
    {"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
)

#: QUIC transport error code range carrying a TLS alert (RFC 9001 §4.8).
_CRYPTO_ERROR = 0x100


def version_name(version: int | None) -> str | None:
    if version is None:
        return None
    return QUIC_VERSIONS.get(version, f"0x{version:08x}")


# -- what one datagram brought --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Arrival:
    """Something that happened on one request stream, stamped with the datagram it came in."""

    t_ns: int
    read_index: int
    headers: list[tuple[bytes, bytes]] | None = None
    data: bytes = b""
    ended: bool = False
    broken: str | None = None  # the stream or connection died: why


@dataclass(slots=True)
class _Recorder:
    """Where stamps go: switched to a fresh Timeline for a warm request."""

    timeline: Timeline
    stats: dict[str, Any] = field(default_factory=dict)
    last_read_ns: int | None = None
    last_write_ns: int | None = None
    first_sent_ns: int | None = None

    def __post_init__(self) -> None:
        self.reset_stats()

    def reset_stats(self) -> None:
        version = self.stats.get("version")
        self.stats = {
            "version": version,
            "datagrams_in": 0,
            "datagrams_out": 0,
            "bytes_in": 0,
            "bytes_out": 0,
        }
        self.timeline.extra["quic"] = self.stats

    @property
    def read_index(self) -> int:
        return len(self.timeline.reads) - 1


class QuicTracer(asyncio.DatagramProtocol):
    """Pumps datagrams between a connected UDP socket and a QuicConnection, stamping each.

    Runs HTTP/3 on top once the handshake completes (never before: no early data).
    """

    def __init__(self, quic: Any, recorder: _Recorder) -> None:
        self._quic = quic
        self._rec = recorder
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.DatagramTransport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._streams: dict[int, asyncio.Queue[_Arrival]] = {}
        self._unsent: dict[int, Timeline] = {}  # request streams whose last byte is not out yet
        self.h3: Any = None
        self.handshake: asyncio.Future[Any] = self._loop.create_future()
        self.handshake_ns: int | None = None
        self.terminated: Any = None  # aioquic ConnectionTerminated
        self.socket_error: OSError | None = None
        self.server_versions: tuple[int, ...] | None = None  # from a Version Negotiation
        self.tickets = _Tickets()

    # -- asyncio side ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        t_ns = time.perf_counter_ns()  # first thing: the stamp is the arrival
        rec = self._rec
        rec.last_read_ns = t_ns
        rec.timeline.reads.append(Read(t_ns, len(data)))
        rec.stats["datagrams_in"] += 1
        rec.stats["bytes_in"] += len(data)
        if len(data) >= 5 and data[0] & 0x80:  # long header: the version is on the wire
            version = int.from_bytes(data[1:5], "big")
            if version == 0:
                self.server_versions = _vn_versions(data)
            else:
                rec.stats["version"] = version_name(version)
        try:
            self._quic.receive_datagram(data, addr, now=self._loop.time())
            self._process(t_ns, rec.read_index)
            self.transmit()
        except Exception as exc:  # a bug below us must end the trace, not hang it
            self._fail(f"internal QUIC error: {exc!r}")

    def error_received(self, exc: Exception) -> None:
        # An ICMP error on the connected socket (port unreachable: nothing listens on UDP).
        if isinstance(exc, OSError):
            self.socket_error = exc
        self._fail(f"socket error: {exc}")

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self._fail("the UDP socket was closed")

    # -- QUIC side ---------------------------------------------------------------------
    def start(self, addr: Any) -> None:
        self._quic.connect(addr, now=self._loop.time())
        self.transmit()

    def transmit(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        rec = self._rec
        for data, _addr in self._quic.datagrams_to_send(now=self._loop.time()):
            if rec.first_sent_ns is None:
                rec.first_sent_ns = time.perf_counter_ns()
            transport.sendto(data)  # a connected socket: the address is implied
            rec.last_write_ns = time.perf_counter_ns()
            rec.stats["datagrams_out"] += 1
            rec.stats["bytes_out"] += len(data)
            rec.timeline.bytes_written += len(data)
        for sid, tl in list(self._unsent.items()):
            if _fully_sent(self._quic, sid):
                tl.mark("request_sent", rec.last_write_ns or time.perf_counter_ns())
                del self._unsent[sid]
        timer_at = self._quic.get_timer()
        if self._timer is not None and self._timer_at != timer_at:
            self._cancel_timer()
        if self._timer is None and timer_at is not None:
            self._timer = self._loop.call_at(timer_at, self._on_timer)
        self._timer_at = timer_at

    def _on_timer(self) -> None:
        now = max(self._timer_at or 0.0, self._loop.time())
        self._timer = self._timer_at = None
        try:
            self._quic.handle_timer(now=now)
            self._process(time.perf_counter_ns(), -1)
            self.transmit()
        except Exception as exc:  # as in datagram_received: fail, never hang
            self._fail(f"internal QUIC error: {exc!r}")

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_at = None

    def _process(self, t_ns: int, read_index: int) -> None:
        from aioquic.h3.connection import H3Connection
        from aioquic.h3.events import DataReceived, HeadersReceived
        from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, StreamReset

        event = self._quic.next_event()
        while event is not None:
            if isinstance(event, HandshakeCompleted):
                self.handshake_ns = t_ns
                # HTTP/3 starts only now, so not even its SETTINGS can go out as early data.
                self.h3 = H3Connection(self._quic)
                if not self.handshake.done():
                    self.handshake.set_result(event)
            elif isinstance(event, ConnectionTerminated):
                self.terminated = event
                reason = event.reason_phrase or "no reason given"
                self._fail(f"QUIC connection closed (error 0x{event.error_code:x}: {reason})")
            elif isinstance(event, StreamReset) and event.stream_id in self._streams:
                self._streams[event.stream_id].put_nowait(
                    _Arrival(
                        t_ns=t_ns,
                        read_index=read_index,
                        broken=f"the server reset the stream (error 0x{event.error_code:x})",
                    )
                )
            if self.h3 is not None:
                for h3_event in self.h3.handle_event(event):
                    queue = self._streams.get(getattr(h3_event, "stream_id", -1))
                    if queue is None:
                        continue
                    if isinstance(h3_event, HeadersReceived):
                        queue.put_nowait(
                            _Arrival(
                                t_ns=t_ns,
                                read_index=read_index,
                                headers=list(h3_event.headers),
                                ended=h3_event.stream_ended,
                            )
                        )
                    elif isinstance(h3_event, DataReceived):
                        queue.put_nowait(
                            _Arrival(
                                t_ns=t_ns,
                                read_index=read_index,
                                data=h3_event.data,
                                ended=h3_event.stream_ended,
                            )
                        )
            event = self._quic.next_event()

    def _fail(self, why: str) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(_HandshakeFailed(why))
        t_ns = time.perf_counter_ns()
        for queue in self._streams.values():
            queue.put_nowait(_Arrival(t_ns=t_ns, read_index=-1, broken=why))

    # -- requests ----------------------------------------------------------------------
    def send_request(
        self, headers: list[tuple[bytes, bytes]], body: bytes, timeline: Timeline
    ) -> asyncio.Queue[_Arrival]:
        """Open a request stream, queue HEADERS and DATA, and send them."""
        stream_id = self._quic.get_next_available_stream_id()
        queue: asyncio.Queue[_Arrival] = asyncio.Queue()
        self._streams[stream_id] = queue
        self._unsent[stream_id] = timeline
        timeline.mark("request_start", time.perf_counter_ns())
        self.h3.send_headers(stream_id, headers, end_stream=not body)
        if body:
            self.h3.send_data(stream_id, body, end_stream=True)
        self.transmit()
        return queue

    def close(self, error_code: int = 0, reason: str = "") -> None:
        if self._transport is None:
            return
        self._quic.close(error_code=error_code, reason_phrase=reason)
        self.transmit()
        self._cancel_timer()
        self._transport.close()


class _HandshakeFailed(Exception):
    pass


class _Tickets:
    """TLS session tickets the server sent (kept only to time a resumed handshake)."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.arrived = asyncio.Event()

    def add(self, ticket: Any) -> None:
        self.items.append(ticket)
        self.arrived.set()


def _vn_versions(data: bytes) -> tuple[int, ...]:
    """Versions listed in a Version Negotiation packet (RFC 9000 §17.2.1)."""
    try:
        pos = 5
        pos += 1 + data[pos]  # destination connection ID
        pos += 1 + data[pos]  # source connection ID
    except IndexError:
        return ()
    return tuple(int.from_bytes(data[i : i + 4], "big") for i in range(pos, len(data) - 3, 4))


def _fully_sent(quic: Any, stream_id: int) -> bool:
    """Whether every byte (and the FIN) of a stream has left at least once.

    aioquic exposes no public accessor; read the sender's pending ranges defensively.
    """
    stream = getattr(quic, "_streams", {}).get(stream_id)
    sender = getattr(stream, "sender", None)
    if sender is None:
        return True
    try:
        pending = len(getattr(sender, "_pending", ()))  # a RangeSet: len(), not bool()
    except TypeError:
        return True
    return pending == 0 and not getattr(sender, "_pending_eof", False)


# -- connection ---------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _Session:
    protocol: QuicTracer
    recorder: _Recorder


def _preload() -> None:
    """Import aioquic (and what its TLS layer verifies with) before t0."""
    import aioquic.h3.connection
    import aioquic.h3.events
    import aioquic.quic.connection
    import aioquic.quic.events  # noqa: F401
    import cryptography.x509  # noqa: F401


def _configuration_for(options: RunOptions) -> Any:
    from aioquic.h3.connection import H3_ALPN
    from aioquic.quic.configuration import QuicConfiguration

    return QuicConfiguration(
        is_client=True,
        alpn_protocols=list(H3_ALPN),
        server_name=options.target.host,  # aioquic sends no SNI for an IP literal
        # A paused stream must be cut by --timeout, not by our own idle timer.
        idle_timeout=max(30.0, options.timeout + 5.0),
        verify_mode=ssl.CERT_NONE,  # CertVerifier checks, with a store loaded before t0
    )


def _fmt_addr(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


async def _connect(
    options: RunOptions,
    recorder: _Recorder,
    deadline: float,
    verifier: CertVerifier | None,
) -> _Session:
    """Timed DNS, then a QUIC handshake to each address in turn until one completes."""
    timeline = recorder.timeline
    host, port = options.target.host, options.target.port
    timeline.begin("dns", time.perf_counter_ns())
    try:
        answer = await dns.resolve(
            host,
            port,
            family=options.family,
            override=options.resolve_override(host, port),
            resolver=options.resolver,
            timeout=min(options.timeout, 10.0),
        )
    except PromptpathError:
        timeline.end("dns", time.perf_counter_ns(), ok=False)
        raise
    dns_stage = timeline.stages[-1]
    dns_stage.start_ns, dns_stage.end_ns = answer.start_ns, answer.end_ns
    dns_stage.detail["resolver"] = answer.resolver
    timeline.mark("dns_done", answer.end_ns)
    timeline.extra["dns"] = answer
    timeline.dns_answers = [ip for ip, _fam in answer.addresses]

    sni = None if dns.is_ip_literal(host) else host
    stage = timeline.begin("quic_handshake", time.perf_counter_ns(), sni=sni)
    last: PromptpathError | None = None
    # Stop a little before --timeout so a dead UDP path is reported as what it is (a
    # handshake timeout, exit 4) rather than as the generic trace timeout.
    margin = min(0.25, options.timeout / 10)
    for ip, fam in answer.addresses:
        budget = min(HANDSHAKE_TIMEOUT_S, deadline - margin - time.monotonic())
        if budget <= 0:
            break
        try:
            session = await _handshake(options, recorder, ip, fam, budget, verifier=verifier)
        except ConnectError as exc:
            last = exc
            continue  # UDP to this address is dead: try the next one, as over TCP
        except PromptpathError:
            timeline.end("quic_handshake", time.perf_counter_ns(), ok=False)
            raise
        attempt = timeline.attempts[-1]
        stage.start_ns, stage.end_ns = attempt.start_ns, attempt.end_ns
        stage.detail["attempts"] = len(timeline.attempts)
        return session
    timeline.end("quic_handshake", time.perf_counter_ns(), ok=False)
    if last is None:
        last = ConnectError(
            f"no time left for a QUIC handshake with {host} within --timeout {options.timeout:g} s",
            stage="quic_handshake",
            kind="handshake_timeout",
            host=host,
            port=port,
        )
    raise last


async def _handshake(
    options: RunOptions,
    recorder: _Recorder,
    ip: str,
    fam: dns.Family,
    budget: float,
    *,
    verifier: CertVerifier | None,
    session_ticket: Any = None,
) -> _Session:
    from aioquic.quic.connection import QuicConnection

    timeline = recorder.timeline
    port = options.target.port
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET6 if fam == "ipv6" else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    try:
        # connect() on UDP only fixes the peer: ICMP errors (port unreachable) then reach us.
        sock.connect((ip, port))
    except OSError as exc:
        sock.close()
        now = time.perf_counter_ns()
        timeline.attempts.append(
            ConnectAttempt(ip=ip, port=port, family=fam, start_ns=now, end_ns=now, error=str(exc))
        )
        raise ConnectError(
            f"cannot send UDP to {_fmt_addr(ip, port)}: {exc.strerror or exc}",
            stage="quic_handshake",
            kind="network_unreachable",
            host=options.target.host,
            port=port,
        ) from exc
    peer = sock.getpeername()
    prepare_ns = time.perf_counter_ns()
    config = _configuration_for(options)
    # Only handshake-only resumption probes pass a ticket, and they open no stream, so
    # nothing can travel as 0-RTT data.
    config.session_ticket = session_ticket
    tickets = _Tickets()
    quic = QuicConnection(configuration=config, session_ticket_handler=tickets.add)
    recorder.first_sent_ns = None
    _transport, protocol = await loop.create_datagram_endpoint(
        lambda: QuicTracer(quic, recorder), sock=sock
    )
    protocol.tickets = tickets
    protocol.start(peer)
    start = recorder.first_sent_ns or time.perf_counter_ns()
    failure: str | None = None
    with anyio.move_on_after(budget) as scope:
        try:
            event = await protocol.handshake
        except _HandshakeFailed as exc:
            failure = str(exc)
    end = protocol.handshake_ns or time.perf_counter_ns()
    if scope.cancelled_caught or failure is not None:
        protocol.handshake.cancel()  # nobody waits for it any more
        protocol.close()
        error = _handshake_error(options, protocol, recorder, ip, budget, failure)
        timeline.attempts.append(
            ConnectAttempt(
                ip=ip, port=port, family=fam, start_ns=start, end_ns=end, error=error.message
            )
        )
        raise error
    timeline.attempts.append(
        ConnectAttempt(ip=ip, port=port, family=fam, start_ns=start, end_ns=end)
    )
    timeline.mark("connected", end)
    timeline.mark("tls_done", end)
    timeline.address = (ip, port)
    timeline.family = fam
    timeline.tls = tls = _tls_info(quic, event, options)
    peer_cert = getattr(quic.tls, "_peer_certificate", None)
    if verifier is not None and peer_cert is not None:  # a resumed session shows none
        problem = verifier.check(peer_cert, list(getattr(quic.tls, "_peer_certificate_chain", [])))
        if problem is not None:
            kind, reason = problem
            tls.verified, tls.verify_error = False, reason
            protocol.close(_CRYPTO_ERROR + _ALERT_BAD_CERTIFICATE, reason)
            timeline.attempts[-1] = dataclasses.replace(timeline.attempts[-1], error=reason)
            hint = _CERT_HINTS.get(kind, "certificate verification failed")
            raise TLSError(
                f"TLS (QUIC): {hint.format(host=options.target.host)} ({reason})",
                stage="quic_handshake",
                kind=kind,
                host=options.target.host,
                ip=ip,
            )
    # Building the ClientHello (key shares for several groups) is client CPU, spent
    # before the first Initial leaves: kept out of the stage, but on record.
    timeline.stages[-1].detail["client_hello_ms"] = round((start - prepare_ns) / 1e6, 3)
    return _Session(protocol=protocol, recorder=recorder)


def _tls_info(quic: Any, event: Any, options: RunOptions) -> TLSInfo:
    """What the QUIC handshake's TLS 1.3 negotiated (aioquic's tls.Context, read defensively)."""
    tls = getattr(quic, "tls", None)
    suite = getattr(getattr(tls, "key_schedule", None), "cipher_suite", None)
    cert = getattr(tls, "_peer_certificate", None)
    der: bytes | None = None
    if cert is not None:
        from cryptography.hazmat.primitives.serialization import Encoding

        der = cert.public_bytes(Encoding.DER)
    host = options.target.host
    return TLSInfo(
        sni=None if dns.is_ip_literal(host) else host,
        alpn_offered=("h3",),
        alpn=event.alpn_protocol,
        version="TLSv1.3",  # QUIC carries TLS 1.3 only (RFC 9001)
        cipher=None if suite is None else f"TLS_{suite.name}",
        resumed=bool(event.session_resumed),
        verified=None if options.insecure else True,
        cert=cert_info(der),
    )


_CERT_HINTS = {
    "cert_expired": "the server's certificate has expired",
    "cert_not_yet_valid": "the server's certificate is not valid yet",
    "hostname_mismatch": "the certificate is not valid for {host!r}",
    "ip_mismatch": "the certificate is not valid for {host!r}",
    "unknown_ca": "the certificate chain does not lead to a trusted CA (--cacert FILE)",
    "self_signed": "the certificate is self-signed (--cacert FILE to trust it)",
}

#: TLS alert bad_certificate (RFC 8446 §6.2), sent as a QUIC CRYPTO_ERROR when we refuse.
_ALERT_BAD_CERTIFICATE = 42


class CertVerifier:
    """Chain, dates and name checks with a CA store loaded once, before t0.

    aioquic would verify inside the handshake and re-read the CA bundle each time (about
    20 ms for the system store): time charged to quic_handshake that TCP's TLS, whose
    context loads before t0, never pays. So aioquic runs with CERT_NONE — it still checks
    the CertificateVerify signature, i.e. that the peer holds the key — and this checks
    the certificate the moment the handshake completes, before any request byte leaves.
    """

    def __init__(self, options: RunOptions) -> None:
        from OpenSSL import crypto

        self.host = options.target.host
        self._store = crypto.X509Store()
        if options.cacert:
            self._store.load_locations(options.cacert)
        else:  # the system store, as the TCP path uses
            paths = ssl.get_default_verify_paths()
            if paths.cafile or paths.capath:
                self._store.load_locations(paths.cafile, paths.capath)
            else:
                import certifi

                self._store.load_locations(certifi.where())

    def check(self, cert: Any, chain: list[Any]) -> tuple[str, str] | None:
        """``(kind, reason)`` of what is wrong with a cryptography certificate, or None."""
        import service_identity
        from cryptography.hazmat.primitives.serialization import Encoding
        from OpenSSL import crypto
        from service_identity.cryptography import (
            verify_certificate_hostname,
            verify_certificate_ip_address,
        )

        context = crypto.X509StoreContext(
            self._store,
            crypto.X509.from_cryptography(cert),
            [crypto.X509.from_cryptography(c) for c in chain],
        )
        try:
            context.verify_certificate()
        except crypto.X509StoreContextError as exc:
            code = exc.errors[0] if exc.errors else 0
            return _VERIFY_KINDS.get(code, "cert_verify_failed"), str(exc)
        is_ip = dns.is_ip_literal(self.host)
        try:
            if is_ip:
                verify_certificate_ip_address(cert, self.host)
            else:
                verify_certificate_hostname(cert, self.host)
        except (service_identity.VerificationError, service_identity.CertificateError) as exc:
            info = cert_info(cert.public_bytes(Encoding.DER))
            names = ", ".join(info.sans) if info is not None and info.sans else str(exc)
            kind = "ip_mismatch" if is_ip else "hostname_mismatch"
            return kind, f"{self.host!r} is not among the certificate's names: {names}"
        return None


def _handshake_error(
    options: RunOptions,
    protocol: QuicTracer,
    recorder: _Recorder,
    ip: str,
    budget: float,
    failure: str | None,
) -> PromptpathError:
    host, port = options.target.host, options.target.port
    stats = recorder.stats
    where = _fmt_addr(ip, port)
    common: dict[str, object] = {
        "host": host,
        "port": port,
        "ip": ip,
        "datagrams_out": stats["datagrams_out"],
        "datagrams_in": stats["datagrams_in"],
    }
    closed = protocol.terminated
    if protocol.socket_error is not None:
        exc = protocol.socket_error
        return ConnectError(
            f"QUIC to {where}: {exc.strerror or exc} — nothing answers on UDP port {port}"
            " (no HTTP/3 there, or an ICMP reject): clients will fall back to TCP (--http 2)",
            stage="quic_handshake",
            kind="refused" if isinstance(exc, ConnectionRefusedError) else "network_error",
            **common,
        )
    if closed is not None and "common protocol version" in (closed.reason_phrase or ""):
        offered = ", ".join(version_name(v) or "?" for v in protocol.server_versions or ())
        return ConnectError(
            f"QUIC version negotiation with {where} failed: the server offers"
            f" {offered or 'no version'}, we speak QUICv1/QUICv2",
            stage="quic_handshake",
            kind="version_negotiation",
            server_versions=[version_name(v) for v in protocol.server_versions or ()],
            **common,
        )
    if closed is not None:
        code = int(closed.error_code)
        reason = closed.reason_phrase or "no reason given"
        if _CRYPTO_ERROR <= code < _CRYPTO_ERROR + 0x100:
            return TLSError(
                f"TLS (QUIC) handshake with {where} failed: {reason}"
                f" (alert {code - _CRYPTO_ERROR})",
                stage="quic_handshake",
                kind="handshake_failed",
                alert=code - _CRYPTO_ERROR,
                **common,
            )
        return ConnectError(
            f"QUIC handshake with {where} was closed: error 0x{code:x} ({reason})",
            stage="quic_handshake",
            kind="handshake_closed",
            error_code=code,
            **common,
        )
    if failure is not None:
        return ConnectError(
            f"QUIC handshake with {where} failed: {failure}",
            stage="quic_handshake",
            kind="handshake_failed",
            **common,
        )
    heard = stats["datagrams_in"]
    what = (
        f"{heard} datagram(s) came back but the handshake did not complete"
        if heard
        else "no datagram came back"
    )
    return ConnectError(
        f"QUIC handshake with {where} timed out after {budget:g} s: {what}"
        f" ({stats['datagrams_out']} sent). The path likely blocks or drops UDP/{port};"
        " browsers and API clients fall back to TCP (HTTP/2) — compare with --http 2",
        stage="quic_handshake",
        kind="handshake_timeout",
        timeout_s=round(budget, 3),
        **common,
    )


# -- the request ------------------------------------------------------------------------


def _request_headers(options: RunOptions, prepared: PreparedRequest) -> list[tuple[bytes, bytes]]:
    host = options.target.host
    if ":" in host:
        host = f"[{host}]"
    authority = host if options.target.port == 443 else f"{host}:{options.target.port}"
    headers = [
        (b":method", prepared.method.encode()),
        (b":scheme", b"https"),
        (b":authority", authority.encode()),
        (b":path", options.target.path.encode()),
    ]
    for name, value in prepared.headers:
        lname = name.lower()
        if lname not in _FORBIDDEN:
            headers.append((lname.encode(), value.encode()))
    headers.append((b"content-length", str(len(prepared.body)).encode()))
    return headers


class _Broken(Exception):
    """The request stream ended abnormally (reset, connection closed)."""


async def _body(queue: asyncio.Queue[_Arrival], first: _Arrival) -> AsyncIterator[_Arrival]:
    """The DATA arrivals of a response, until the stream ends; _Broken if it dies."""
    arrival = first
    while not arrival.ended:
        arrival = await queue.get()
        if arrival.broken is not None:
            raise _Broken(arrival.broken)
        if arrival.data:
            yield arrival


async def _read_limited(
    queue: asyncio.Queue[_Arrival], first: _Arrival, limit: int = SNIFF_LIMIT
) -> bytes:
    body = b""
    try:
        with anyio.fail_after(5):
            async for arrival in _body(queue, first):
                body += arrival.data
                if len(body) >= limit:
                    break
    except (TimeoutError, _Broken):
        pass
    return body[:limit]


async def _exchange(session: _Session, options: RunOptions, timeline: Timeline) -> None:
    prepared = prepare(options)
    queue = session.protocol.send_request(
        _request_headers(options, prepared), prepared.body, timeline
    )
    while True:  # skip informational (1xx) responses
        head = await queue.get()
        if head.broken is not None:
            raise StreamError(
                f"no response: {head.broken}", stage=phase_of(timeline, options), kind="no_response"
            )
        if head.headers is None:
            continue
        status = next((int(v) for k, v in head.headers if k == b":status"), 0)
        if status >= 200:
            break
    timeline.mark("ttfb", head.t_ns)
    timeline.status = status
    timeline.http_version = "HTTP/3"
    timeline.response_headers = [
        (k.decode("latin-1"), v.decode("latin-1"))
        for k, v in head.headers
        if not k.startswith(b":")
    ]
    await _consume(queue, head, options, timeline)


async def _consume(
    queue: asyncio.Queue[_Arrival], head: _Arrival, options: RunOptions, timeline: Timeline
) -> None:
    """The same checks, decoding and verdicts as over TCP (ingest.py), fed from datagrams."""
    if (timeline.status or 0) >= 300:
        raise status_error(timeline, options, await _read_limited(queue, head))
    if not is_event_stream(timeline):
        raise not_a_stream_error(timeline, await _read_limited(queue, head, 2048))
    ingest = BodyIngest(timeline, options)
    last_ns = head.t_ns
    try:
        async for arrival in _body(queue, head):
            last_ns = arrival.t_ns
            ingest.feed(arrival.data, arrival.t_ns, arrival.read_index)
    except _Broken as err:
        if timeline.stream_end is None:  # a reset after the terminal marker cuts nothing
            raise ingest.broken(str(err), time.perf_counter_ns()) from err
    ingest.finish(last_ns)


# -- the trace ---------------------------------------------------------------------------


def _stage_of(timeline: Timeline, options: RunOptions) -> str:
    open_stage = timeline.current_stage
    if open_stage in ("dns", "quic_handshake"):
        return open_stage
    if "connected" not in timeline.milestones and not timeline.reused_connection:
        return "quic_handshake" if "dns_done" in timeline.milestones else "dns"
    return phase_of(timeline, options)


def _record_error(timeline: Timeline, exc: PromptpathError) -> PromptpathError:
    _close_open_stages(timeline)
    timeline.error = ErrorInfo(
        stage=exc.stage, kind=exc.kind, message=exc.message, detail=exc.detail
    )
    return exc


async def _traced(
    options: RunOptions,
    recorder: _Recorder,
    session: _Session | None,
    box: list[_Session],
    verifier: CertVerifier | None,
) -> PromptpathError | None:
    """Run one request (connecting first unless ``session`` is given); the error, if any."""
    timeline = recorder.timeline
    deadline = time.monotonic() + options.timeout
    try:
        with anyio.fail_after(options.timeout):
            if session is None:
                session = await _connect(options, recorder, deadline, verifier)
                box.append(session)
            await _exchange(session, options, timeline)
    except TimeoutError:
        stage = _stage_of(timeline, options)
        exc: PromptpathError = TraceTimeout(
            f"timed out after {options.timeout:g} s in stage {stage!r}",
            stage=stage,
            kind="timeout",
            timeout_s=options.timeout,
        )
    except PromptpathError as err:
        exc = err
    except OSError as err:
        stage = _stage_of(timeline, options)
        cls = ConnectError if stage in ("dns", "quic_handshake") else StreamError
        exc = cls(f"network error in stage {stage!r}: {err}", stage=stage, kind="network_error")
    else:
        return None
    return _record_error(timeline, exc)


async def trace_h3(options: RunOptions) -> TraceResult:
    """Trace one prompt over HTTP/3 (and, with --warm, a second on the same connection)."""
    if options.target.scheme != "https":
        timeline = new_timeline()
        exc = UsageError(
            "HTTP/3 needs an https:// target (QUIC always runs TLS)", kind="bad_option"
        )
        return TraceResult(options=options, timeline=timeline, exc=_record_error(timeline, exc))
    _preload()
    verifier = None if options.insecure else CertVerifier(options)  # CA store: before t0
    timeline = new_timeline()
    recorder = _Recorder(timeline)
    result = TraceResult(options=options, timeline=timeline)
    box: list[_Session] = []
    try:
        result.exc = await _traced(options, recorder, None, box, verifier)
        if options.warm and result.exc is None and box:
            warm_tl = new_timeline()
            recorder.timeline = warm_tl
            recorder.reset_stats()
            warm_tl.reused_connection = True
            warm_tl.address, warm_tl.family, warm_tl.tls = (
                timeline.address,
                timeline.family,
                timeline.tls,
            )
            warm = TraceResult(options=options, timeline=warm_tl)
            warm.exc = await _traced(options, recorder, box[0], box, verifier)
            result.warm = warm
    finally:
        for session in box:
            session.protocol.close()
    return result


async def measure_resumption(options: RunOptions) -> dict[str, Any]:
    """Two bare QUIC handshakes: a full one, then one resuming its TLS session ticket.

    No request is sent on either connection: a resumed connection may carry 0-RTT data,
    and a prompt must never travel as replayable early data. Returns ``{"full_ms",
    "resumed_ms", "ticket", "resumed", "error"}``; ``ticket`` is False when the server
    issued none (then there is nothing to resume).
    """
    _preload()
    verifier = None if options.insecure else CertVerifier(options)
    out: dict[str, Any] = {
        "full_ms": None,
        "resumed_ms": None,
        "ticket": False,
        "resumed": False,
        "error": None,
    }
    first = _Recorder(new_timeline())
    deadline = time.monotonic() + options.timeout
    sessions: list[_Session] = []
    try:
        with anyio.fail_after(options.timeout):
            session = await _connect(options, first, deadline, verifier)
            sessions.append(session)
            stage = first.timeline.stage("quic_handshake")
            if stage is not None and stage.duration_ns is not None:
                out["full_ms"] = round(stage.duration_ns / 1e6, 3)
            # Tickets come after the handshake, in 1-RTT packets.
            with anyio.move_on_after(min(1.0, max(0.0, deadline - time.monotonic() - 0.5))):
                await session.protocol.tickets.arrived.wait()
            session.protocol.close()
            tickets = session.protocol.tickets.items
            address, family = first.timeline.address, first.timeline.family
            if not tickets or address is None or family is None:
                return out
            out["ticket"] = True
            second = _Recorder(new_timeline())
            second.timeline.begin("quic_handshake", time.perf_counter_ns())
            budget = min(HANDSHAKE_TIMEOUT_S, deadline - time.monotonic() - 0.1)
            sessions.append(
                await _handshake(
                    options,
                    second,
                    address[0],
                    family,
                    budget,
                    verifier=verifier,
                    session_ticket=tickets[-1],
                )
            )
            attempt = second.timeline.attempts[-1]
            out["resumed_ms"] = round((attempt.end_ns - attempt.start_ns) / 1e6, 3)
            tls = second.timeline.tls
            out["resumed"] = bool(tls is not None and tls.resumed)
    except TimeoutError:
        out["error"] = f"timed out after {options.timeout:g} s"
    except PromptpathError as exc:
        out["error"] = exc.message
    finally:
        for each in sessions:
            each.protocol.close()
    return out
