"""Certificate checks for an HTTP/3 trace, run the moment the QUIC handshake completes.

aioquic runs with ``CERT_NONE`` so that loading a CA store is never charged to the
handshake; ``CertVerifier`` (store loaded before t0) then checks chain, dates and name,
and ``refusal`` words what it found the way the TCP path does. pyOpenSSL,
service_identity and cryptography are imported where they are used.
"""

from __future__ import annotations

import ssl
from typing import Any

from promptpath.core.errors import ErrorKind, TLSError
from promptpath.net import dns
from promptpath.net.tlsinfo import VERIFY_KINDS, cert_hint, cert_info

#: TLS alert bad_certificate (RFC 8446 §6.2), sent as a QUIC CRYPTO_ERROR when we refuse.
ALERT_BAD_CERTIFICATE = 42


class CertVerifier:
    """Chain, dates and name checks with a CA store loaded once, before t0.

    aioquic would verify inside the handshake and re-read the CA bundle each time (about
    20 ms for the system store): time charged to quic_handshake that TCP's TLS, whose
    context loads before t0, never pays. So aioquic runs with CERT_NONE — it still checks
    the CertificateVerify signature, i.e. that the peer holds the key — and this checks
    the certificate the moment the handshake completes, inside the callback of the
    datagram that completed it and before our Finished leaves (quic_complete.Completion):
    within quic_handshake, as the TCP path's check is within tls, and before any request
    byte leaves.
    """

    def __init__(self, host: str, cacert: str | None = None) -> None:
        from OpenSSL import crypto

        self.host = host
        self._store = crypto.X509Store()
        if cacert:
            self._store.load_locations(cacert)
        else:  # the system store, as the TCP path uses
            paths = ssl.get_default_verify_paths()
            if paths.cafile or paths.capath:
                self._store.load_locations(paths.cafile, paths.capath)
            else:
                import certifi

                self._store.load_locations(certifi.where())

    def check(self, cert: Any, chain: list[Any]) -> tuple[ErrorKind, str] | None:
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
            return VERIFY_KINDS.get(code, "cert_verify_failed"), str(exc)
        is_ip = dns.is_ip_literal(self.host)
        try:
            if is_ip:
                verify_certificate_ip_address(cert, self.host)
            else:
                verify_certificate_hostname(cert, self.host)
        except (service_identity.VerificationError, service_identity.CertificateError) as exc:
            info = cert_info(cert.public_bytes(Encoding.DER))
            names = ", ".join(info.sans) if info is not None and info.sans else str(exc)
            kind: ErrorKind = "ip_mismatch" if is_ip else "hostname_mismatch"
            return kind, f"{self.host!r} is not among the certificate's names: {names}"
        return None


def refusal(host: str, ip: str, kind: ErrorKind, reason: str) -> TLSError:
    """The error for a certificate ``CertVerifier.check`` refused, with what to do about it."""
    return TLSError(
        f"TLS (QUIC): {cert_hint(kind, host)} ({reason})",
        stage="quic_handshake",
        kind=kind,
        host=host,
        ip=ip,
    )
