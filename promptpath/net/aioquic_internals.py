"""Every read of aioquic's internals, in one place, checked against one pinned minor.

aioquic has no public API for three facts an HTTP/3 trace needs: the certificate chain
the server sent (asked for in aiortc/aioquic#357, "we don't expose an API"), the cipher
suite TLS negotiated, and whether a stream's bytes and FIN have all left the connection
(it only reports delivery by ending the stream). So this module reads them from
aioquic's objects, and nothing else in promptpath does.

Each function was checked against aioquic :data:`CHECKED_AGAINST` (pinned in
pyproject.toml); tests/unit/test_aioquic_internals.py runs them against a real in-memory
handshake. When an internal is missing or has changed shape, they raise
:class:`AioquicInternalsChanged` rather than guess: a guessed "no certificate" would skip
verification, since aioquic runs with CERT_NONE for us.

aioquic and cryptography are imported only for type checking, or where they are used.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aioquic.quic.connection import QuicConnection
    from cryptography import x509

#: The aioquic minor these reads were checked against (``aioquic>=1.7,<1.8`` in pyproject).
CHECKED_AGAINST = "1.7"

__all__ = [
    "CHECKED_AGAINST",
    "AioquicInternalsChanged",
    "certificate_requested",
    "changed",
    "cipher_suite_name",
    "peer_certificate",
    "peer_certificate_chain",
    "rtt_estimates",
    "stream_fully_sent",
]


class AioquicInternalsChanged(RuntimeError):
    """An aioquic internal promptpath reads is gone or has a new shape."""


def changed(what: str) -> AioquicInternalsChanged:
    """The error (and wording) for an internal ``what`` that no longer reads as expected."""
    try:
        version = ".".join(metadata.version("aioquic").split(".")[:2])
    except metadata.PackageNotFoundError:
        version = "?"
    return AioquicInternalsChanged(
        f"aioquic {version} changed an internal promptpath reads: {what}; "
        "update promptpath/net/aioquic_internals.py"
    )


def _read(obj: object, name: str, what: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        raise changed(f"{what} is gone") from None


def _certificate(value: object, what: str) -> x509.Certificate:
    from cryptography import x509

    if not isinstance(value, x509.Certificate):
        raise changed(f"{what} is a {type(value).__name__}, not a cryptography Certificate")
    return value


def peer_certificate(quic: QuicConnection) -> x509.Certificate | None:
    """The server's leaf certificate, or None when it sent none (a resumed session).

    Reads ``QuicConnection.tls._peer_certificate`` (aioquic 1.7): set from the Certificate
    message, and kept even under CERT_NONE.
    """
    tls = _read(quic, "tls", "QuicConnection.tls")
    cert = _read(tls, "_peer_certificate", "tls.Context._peer_certificate")
    return None if cert is None else _certificate(cert, "tls.Context._peer_certificate")


def peer_certificate_chain(quic: QuicConnection) -> list[x509.Certificate]:
    """The certificates the server sent after its leaf (intermediates), in wire order.

    Reads ``QuicConnection.tls._peer_certificate_chain`` (aioquic 1.7).
    """
    what = "tls.Context._peer_certificate_chain"
    chain = _read(_read(quic, "tls", "QuicConnection.tls"), "_peer_certificate_chain", what)
    if not isinstance(chain, list):
        raise changed(f"{what} is a {type(chain).__name__}, not a list")
    return [_certificate(cert, what) for cert in chain]


def cipher_suite_name(quic: QuicConnection) -> str | None:
    """The negotiated TLS 1.3 suite's IANA name without ``TLS_`` (``AES_128_GCM_SHA256``).

    None before the handshake has chosen one. Reads ``QuicConnection.tls.key_schedule
    .cipher_suite`` (aioquic 1.7): public names, but undocumented state of the TLS engine.
    """
    what = "tls.Context.key_schedule.cipher_suite"
    schedule = _read(_read(quic, "tls", "QuicConnection.tls"), "key_schedule", what)
    if schedule is None:
        return None
    suite = _read(schedule, "cipher_suite", what)
    name = getattr(suite, "name", None)
    if not isinstance(name, str):
        raise changed(f"{what} is a {type(suite).__name__}, not a CipherSuite enum")
    return name


def stream_fully_sent(quic: QuicConnection, stream_id: int) -> bool:
    """Whether every byte of a stream, and its FIN once written, has left at least once.

    Reads ``QuicConnection._streams[id].sender._pending`` (a RangeSet of offsets still to
    send) and ``._pending_eof`` (a FIN still to send), aioquic 1.7. A stream aioquic has
    already discarded finished in both directions, so everything was sent.
    """
    streams = _read(quic, "_streams", "QuicConnection._streams")
    if not isinstance(streams, dict):
        raise changed(f"QuicConnection._streams is a {type(streams).__name__}, not a dict")
    stream = streams.get(stream_id)
    if stream is None:
        return True
    sender = _read(stream, "sender", "QuicStream.sender")
    pending = _read(sender, "_pending", "QuicStreamSender._pending")
    pending_eof = _read(sender, "_pending_eof", "QuicStreamSender._pending_eof")
    try:
        ranges = len(pending)  # a RangeSet: len(), as its bool() raises NotImplementedError
    except TypeError:
        raise changed(
            f"QuicStreamSender._pending is a {type(pending).__name__}, not a RangeSet"
        ) from None
    if not isinstance(pending_eof, bool):
        raise changed(f"QuicStreamSender._pending_eof is a {type(pending_eof).__name__}")
    return ranges == 0 and not pending_eof


def certificate_requested(quic: QuicConnection) -> bool:
    """Whether the server sent a CertificateRequest in this handshake (client side).

    Reads ``QuicConnection.tls._certificate_request`` (aioquic 1.7): None until the
    message arrives, then the parsed request.
    """
    what = "tls.Context._certificate_request"
    return _read(_read(quic, "tls", "QuicConnection.tls"), "_certificate_request", what) is not None


def rtt_estimates(quic: QuicConnection) -> tuple[float, float] | None:
    """The connection's RTT (min_rtt, smoothed_rtt) in ms, RFC 9002 section 5; None
    before the first sample.

    aioquic has no public accessor: reads ``QuicConnection._loss`` (a QuicPacketRecovery)
    and its ``_rtt_initialized``, ``_rtt_min`` and ``_rtt_smoothed`` (seconds), aioquic 1.7.
    """
    loss = _read(quic, "_loss", "QuicConnection._loss")
    ready = _read(loss, "_rtt_initialized", "QuicPacketRecovery._rtt_initialized")
    minimum = _read(loss, "_rtt_min", "QuicPacketRecovery._rtt_min")
    smoothed = _read(loss, "_rtt_smoothed", "QuicPacketRecovery._rtt_smoothed")
    if not isinstance(ready, bool):
        raise changed(f"QuicPacketRecovery._rtt_initialized is a {type(ready).__name__}")
    for name, value in (("_rtt_min", minimum), ("_rtt_smoothed", smoothed)):
        if not isinstance(value, float | int):
            raise changed(f"QuicPacketRecovery.{name} is a {type(value).__name__}")
    if not ready:
        return None
    return float(minimum) * 1000, float(smoothed) * 1000
