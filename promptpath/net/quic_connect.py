"""Reaching an HTTP/3 server: a verified QUIC handshake, address by address.

aioquic's ``connect()`` resolves the name itself, keeps the first address only and binds
an IPv6 socket, so we build the datagram endpoint ourselves: the tracer's own timed DNS
stage (done before), one UDP socket per resolved address (IPv4 or IPv6 to match),
``server_name`` for SNI. A handshake that fails is named from its cause (ICMP reject,
version negotiation, TLS alert, silence); one that completes is checked by quic_verify
before it is returned.

No session ticket is offered to a traced connection, and nothing is written on a stream
before the handshake has completed, so a request never travels as 0-RTT early data. The
first request may be handed over with the connect (``FirstRequest``): it is queued the
moment the handshake completes, once the certificate passed, and leaves with our Finished
(``Completion``). aioquic is imported inside the functions that use it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any

import anyio

from promptpath.core.addr import fmt_addr
from promptpath.core.errors import ConnectError, PromptpathError, TLSError
from promptpath.core.timeline import ConnectAttempt, TLSInfo
from promptpath.net import aioquic_internals, dns, dontfrag, flows
from promptpath.net.keylog import KeyLog
from promptpath.net.quic_complete import Completion, FirstRequest
from promptpath.net.quic_protocol import (
    Arrival,
    HandshakeFailed,
    QuicRecorder,
    QuicTracer,
    version_name,
)
from promptpath.net.quic_verify import ALERT_BAD_CERTIFICATE, CertVerifier, refusal
from promptpath.net.transport import ConnectSpec

#: Longest wait for a QUIC handshake on one address (bounded by --timeout as well, less
#: a margin): a silent UDP path fails after min(5 s, --timeout - margin) per address, so
#: the next address, or the report, is not held up. The README documents it.
HANDSHAKE_TIMEOUT_S = 5.0

#: QUIC transport error code range carrying a TLS alert (RFC 9001 §4.8).
_CRYPTO_ERROR = 0x100


@dataclass(frozen=True, slots=True)
class ClientCert:
    """A client certificate (leaf, chain) and its key, parsed once, before t0."""

    certificate: Any  # cryptography x509.Certificate
    chain: tuple[Any, ...]
    private_key: Any


def load_client_cert(certfile: str, keyfile: str | None) -> ClientCert:
    """The PEM certificate(s) of ``certfile`` and the key in ``keyfile`` (else in
    ``certfile``), in either order. aioquic's own ``load_cert_chain`` would read the files
    inside every handshake, and finds a key in the certificate file only after the
    certificates and only as PKCS#8."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    with open(certfile, "rb") as fh:
        cert_pem = fh.read()
    key_pem = cert_pem
    if keyfile is not None:
        with open(keyfile, "rb") as fh:
            key_pem = fh.read()
    certs = x509.load_pem_x509_certificates(cert_pem)
    key = load_pem_private_key(key_pem, password=None)
    return ClientCert(certificate=certs[0], chain=tuple(certs[1:]), private_key=key)


@dataclass(slots=True, kw_only=True)
class Session:
    """A QUIC connection whose handshake completed (and whose certificate passed)."""

    protocol: QuicTracer
    recorder: QuicRecorder
    keylog: KeyLog | None = None  # SSLKEYLOGFILE: drained again when the connection closes
    #: The response stream of the FirstRequest, which left with our Finished (None: none
    #: was handed over).
    first: asyncio.Queue[Arrival] | None = None


def preload() -> None:
    """Import aioquic (and what its TLS layer verifies with) before t0."""
    import aioquic.h3.connection
    import aioquic.h3.events
    import aioquic.quic.connection
    import aioquic.quic.events  # noqa: F401
    import cryptography.x509  # noqa: F401


def _configuration_for(spec: ConnectSpec, keylog: KeyLog | None = None) -> Any:
    from aioquic.h3.connection import H3_ALPN
    from aioquic.quic.configuration import QuicConfiguration

    return QuicConfiguration(
        secrets_log_file=keylog,  # type: ignore[arg-type]  # write() and flush() suffice
        is_client=True,
        alpn_protocols=list(H3_ALPN),
        server_name=spec.host,  # aioquic sends no SNI for an IP literal
        # A paused stream must be cut by --timeout, not by our own idle timer.
        idle_timeout=max(30.0, _left(spec) + 5.0),
        verify_mode=ssl.CERT_NONE,  # CertVerifier checks, with a store loaded before t0
    )


def _left(spec: ConnectSpec) -> float:
    """Seconds until the trace's deadline (a day when none was given)."""
    return 86400.0 if spec.deadline is None else spec.deadline - time.monotonic()


async def connect(
    spec: ConnectSpec,
    recorder: QuicRecorder,
    verifier: CertVerifier | None,
    client_cert: ClientCert | None = None,
    keylog: KeyLog | None = None,
    first: FirstRequest | None = None,
) -> Session:
    """A QUIC handshake to each resolved address in turn until one completes; ``first``
    leaves with our Finished on the one that does (``Completion``)."""
    timeline = recorder.timeline
    host, port = spec.host, spec.dial_port
    sni = None if dns.is_ip_literal(host) else host
    stage = timeline.begin("quic_handshake", time.perf_counter_ns(), sni=sni)
    first_attempt = len(timeline.attempts)

    def failed() -> None:
        # As over TCP: a failed stage starts at the first handshake packet's send, too.
        if len(timeline.attempts) > first_attempt:
            stage.start_ns = timeline.attempts[first_attempt].start_ns
        timeline.end("quic_handshake", time.perf_counter_ns(), ok=False)

    last: PromptpathError | None = None
    # Stop a little before --timeout so a dead UDP path is reported as what it is (a
    # handshake timeout, exit 4) rather than as the generic trace timeout.
    margin = min(0.25, _left(spec) / 10)
    for ip, fam in spec.addresses:
        budget = min(HANDSHAKE_TIMEOUT_S, _left(spec) - margin)
        if budget <= 0:
            break
        try:
            session = await handshake(
                spec,
                recorder,
                ip,
                fam,
                budget,
                verifier=verifier,
                client_cert=client_cert,
                keylog=keylog,
                first=first,
            )
        except ConnectError as exc:
            last = exc
            continue  # UDP to this address is dead: try the next one, as over TCP
        except PromptpathError:
            failed()
            raise
        attempt = timeline.attempts[-1]
        stage.start_ns, stage.end_ns = attempt.start_ns, attempt.end_ns
        stage.detail["attempts"] = len(timeline.attempts)
        return session
    failed()
    if last is None:
        last = ConnectError(
            f"no time left for a QUIC handshake with {host} within --timeout",
            stage="quic_handshake",
            kind="handshake_timeout",
            host=host,
            port=port,
        )
    raise last


async def handshake(
    spec: ConnectSpec,
    recorder: QuicRecorder,
    ip: str,
    fam: dns.Family,
    budget: float,
    *,
    verifier: CertVerifier | None,
    client_cert: ClientCert | None = None,
    keylog: KeyLog | None = None,
    first: FirstRequest | None = None,
) -> Session:
    """One QUIC handshake with ``ip`` in ``budget`` seconds, stamped as a ConnectAttempt;
    ``first``, once the certificate passed, leaves with our Finished (``Completion``).

    Raises ConnectError or TLSError named from the cause when it does not complete, or
    when ``verifier`` refuses the certificate.
    """
    from aioquic.quic.connection import QuicConnection

    timeline = recorder.timeline
    port = spec.dial_port
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET6 if fam == "ipv6" else socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    # QUIC is never fragmented (RFC 9000 §14): without DF the kernel fragments our
    # 1200-byte datagrams once it learnt a smaller path MTU, and reaches a server that
    # clients setting DF (browsers, quiche) cannot (net/dontfrag.py).
    dontfrag.forbid_fragmentation(sock, "do")
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
            f"cannot send UDP to {fmt_addr(ip, port)}: {exc.strerror or exc}",
            stage="quic_handshake",
            kind="network_unreachable",
            host=spec.host,
            port=port,
        ) from exc
    peer = sock.getpeername()
    local_port = sock.getsockname()[1]
    flows.note_socket(sock, flows.UDP)
    # Building the ClientHello (key shares, 2-3 ms cold) is client CPU, not handshake: it
    # is kept apart as client_hello_ns and the attempt starts at the first Initial's send,
    # as the TCP tls stage starts at the ClientHello's send.
    hello_start = time.perf_counter_ns()
    config = _configuration_for(spec, keylog)
    if client_cert is not None:  # what load_cert_chain would set, from files read before t0
        config.certificate = client_cert.certificate
        config.certificate_chain = list(client_cert.chain)
        config.private_key = client_cert.private_key
    # No session ticket is offered and none is kept: a request must never be able to
    # travel as replayable 0-RTT data.
    quic = QuicConnection(configuration=config)
    recorder.first_sent_ns = None
    # This address's datagrams only: an earlier address's attempt counted into the same stats.
    out_before, in_before = recorder.stats.datagrams_out, recorder.stats.datagrams_in
    completion = Completion(quic, verifier, first, timeline)
    _transport, protocol = await loop.create_datagram_endpoint(
        lambda: QuicTracer(quic, recorder, on_complete=completion), sock=sock
    )
    protocol.start(peer)
    start = recorder.first_sent_ns or time.perf_counter_ns()
    timeline.client_hello_ns = start - hello_start
    failure: str | None = None
    with anyio.move_on_after(budget):
        try:
            await protocol.handshake
        except HandshakeFailed as exc:
            failure = str(exc)
    end = protocol.handshake_ns or time.perf_counter_ns()
    if keylog is not None:  # also for a failed handshake: its Initial/Handshake secrets
        keylog.drain()
    # Completed even when the budget ran out while this coroutine waited to resume: the
    # first request may have left with our Finished, so the handshake is not a timeout.
    done = protocol.handshake
    completed = done.done() and not done.cancelled() and done.exception() is None
    if not completed:
        protocol.handshake.cancel()  # nobody waits for it any more
        # Counted before our CONNECTION_CLOSE goes out: the message is about what the
        # handshake sent the peer.
        sent = recorder.stats.datagrams_out - out_before
        protocol.close()
        heard = recorder.stats.datagrams_in - in_before
        error = _handshake_error(spec, protocol, ip, budget, failure, sent=sent, heard=heard)
        timeline.attempts.append(
            ConnectAttempt(
                ip=ip,
                port=port,
                family=fam,
                start_ns=start,
                end_ns=end,
                error=error.message,
                local_port=local_port,
            )
        )
        raise error
    timeline.attempts.append(
        ConnectAttempt(
            ip=ip, port=port, family=fam, start_ns=start, end_ns=end, local_port=local_port
        )
    )
    timeline.address = (ip, port)
    timeline.family = fam
    timeline.server_flight_ns = protocol.flight_ns
    if completion.error is not None:
        protocol.close()
        raise completion.error
    timeline.tls = tls = _tls_info(quic, done.result(), spec, verified=verifier is not None)
    # aioquic answers a CertificateRequest with the certificate it was given (or an empty
    # one); whether one came is only in its TLS state (aioquic_internals).
    tls.client_cert_requested = aioquic_internals.certificate_requested(quic)
    tls.client_cert_sent = tls.client_cert_requested and client_cert is not None
    if completion.problem is not None:  # checked before our Finished left; nothing else did
        kind, reason = completion.problem
        tls.verified, tls.verify_error = False, reason
        protocol.close(_CRYPTO_ERROR + ALERT_BAD_CERTIFICATE, reason)
        timeline.attempts[-1] = dataclasses.replace(timeline.attempts[-1], error=reason)
        raise refusal(spec.host, ip, kind, reason)
    # Only now is the connection usable: a refused certificate must not leave milestones
    # behind ("last milestone tls_done" for a handshake we rejected).
    timeline.mark("connected", end)
    timeline.mark("tls_done", end)
    return Session(protocol=protocol, recorder=recorder, keylog=keylog, first=completion.stream)


def _tls_info(quic: Any, event: Any, spec: ConnectSpec, *, verified: bool) -> TLSInfo:
    """What the QUIC handshake's TLS 1.3 negotiated (aioquic's tls.Context, via the adapter)."""
    suite = aioquic_internals.cipher_suite_name(quic)
    cert = aioquic_internals.peer_certificate(quic)
    der: bytes | None = None
    if cert is not None:
        from cryptography.hazmat.primitives.serialization import Encoding

        der = cert.public_bytes(Encoding.DER)
    return TLSInfo(
        sni=spec.sni,
        alpn_offered=("h3",),
        alpn=event.alpn_protocol,
        version="TLSv1.3",  # QUIC carries TLS 1.3 only (RFC 9001)
        cipher=None if suite is None else f"TLS_{suite}",
        resumed=bool(event.session_resumed),
        verified=True if verified else None,
        # Parsed after the trace (session.finish), as over TCP: here it was 0.3-0.7 ms of
        # the request stage (sys.setprofile between tls_done and request_sent).
        cert_der=der,
    )


def _handshake_error(
    spec: ConnectSpec,
    protocol: QuicTracer,
    ip: str,
    budget: float,
    failure: str | None,
    *,
    sent: int,
    heard: int,
) -> PromptpathError:
    """Why a handshake did not complete, named from what the socket and the peer said
    (``sent``/``heard``: this address's datagrams, our closing one left out)."""
    host, port = spec.host, spec.dial_port
    where = fmt_addr(ip, port)
    common: dict[str, object] = {
        "host": host,
        "port": port,
        "ip": ip,
        "datagrams_out": sent,
        "datagrams_in": heard,
    }
    closed = protocol.terminated
    if protocol.socket_error is not None and protocol.socket_error.errno == errno.EMSGSIZE:
        mtu = protocol.path_mtu
        fits = f"carries packets of at most {mtu} bytes" if mtu else "carries smaller packets"
        return ConnectError(
            f"QUIC to {where}: the path MTU is below QUIC's 1200-byte datagrams — the path"
            f" {fits} (ICMP 'fragmentation needed', or this host's route), and QUIC must not"
            " be fragmented (RFC 9000 §14): HTTP/3 cannot work on this path, clients fall"
            " back to TCP (--http 2); --probe path names the hop where it narrows",
            stage="quic_handshake",
            kind="path_mtu",
            path_mtu=mtu,
            **common,
        )
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
    what = (
        f"{heard} datagram(s) came back but the handshake did not complete"
        if heard
        else "no datagram came back"
    )
    return ConnectError(
        f"QUIC handshake with {where} timed out after {budget:.1f} s: {what}"
        f" ({sent} sent). The path likely blocks or drops UDP/{port};"
        " browsers and API clients fall back to TCP (HTTP/2) — compare with --http 2",
        stage="quic_handshake",
        kind="handshake_timeout",
        timeout_s=round(budget, 3),
        **common,
    )
