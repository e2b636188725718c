"""What a TLS handshake negotiated, and why one failed — in words a network engineer uses."""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import ssl
from collections.abc import Mapping
from typing import Any

from promptpath.core.errors import ErrorKind, TLSError
from promptpath.core.timeline import CertInfo, TLSInfo
from promptpath.net.interception import judge

#: OpenSSL X509_V_ERR_* codes we name (the HTTP/3 path's verifier reports the same codes).
VERIFY_KINDS: dict[int, ErrorKind] = {
    9: "cert_not_yet_valid",
    10: "cert_expired",
    18: "self_signed",
    19: "unknown_ca",
    20: "unknown_ca",
    21: "unknown_ca",
    2: "unknown_ca",
    62: "hostname_mismatch",
    64: "ip_mismatch",
}

#: What each refused-certificate kind means, and what to do; ``{host!r}`` is filled in.
_CERT_HINTS = {
    "cert_expired": "the server's certificate has expired",
    "cert_not_yet_valid": "the server's certificate is not valid yet",
    "hostname_mismatch": "the certificate is not valid for {host!r}",
    "ip_mismatch": "the certificate is not valid for {host!r}",
    "unknown_ca": "the certificate chain does not lead to a trusted CA (--cacert FILE)",
    "self_signed": "the certificate is self-signed (--cacert FILE to trust it)",
}


def cert_hint(kind: str, host: str) -> str:
    """A refused certificate of ``kind`` for ``host``, in words (TCP and QUIC alike)."""
    return _CERT_HINTS.get(kind, "certificate verification failed").format(host=host)


def cert_info(der: bytes | None, *, now: dt.datetime | None = None) -> CertInfo | None:
    """Subject, issuer, SANs and expiry of a DER certificate (cryptography, imported lazily)."""
    if not der:
        return None
    from cryptography import x509

    cert = x509.load_der_x509_certificate(der)
    try:
        san_ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        sans = tuple(
            [str(n) for n in san_ext.get_values_for_type(x509.DNSName)]
            + [str(ip) for ip in san_ext.get_values_for_type(x509.IPAddress)]
        )
    except x509.ExtensionNotFound:
        sans = ()
    not_after = cert.not_valid_after_utc
    now = now or dt.datetime.now(dt.UTC)
    # Whole days, truncated toward zero: a certificate that expired 23 h ago is 0 days
    # past, not -1 (timedelta.days floors negatives).
    days_left = int((not_after - now).total_seconds() / 86400)
    return CertInfo(
        subject=cert.subject.rfc4514_string(),
        issuer=cert.issuer.rfc4514_string(),
        sans=sans,
        not_before=cert.not_valid_before_utc.isoformat(),
        not_after=not_after.isoformat(),
        days_left=days_left,
        expired=not_after <= now,
    )


#: The short names cryptography's ``Name.rfc4514_string`` writes, by the long names the
#: ssl module's decoding gives (OpenSSL's). It writes any other attribute as its OID,
#: which that decoding does not give: such a name is left to cryptography.
_SHORT_NAMES = {
    "commonName": "CN",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
#: What RFC 4514 escapes (some only first or last): a value holding any of them is left to
#: cryptography, so that its escaping is cryptography's own, whatever its version.
_SPECIAL = frozenset('\\"+,;<>\0#')


def _rfc4514(name: object) -> str | None:
    """The ssl module's decoded name (RDNs in DER order) as cryptography writes it; None
    when it needs more than plain single-valued attributes with known short names."""
    if not isinstance(name, tuple):
        return None
    parts = []
    for rdn in reversed(name):
        if not isinstance(rdn, tuple) or len(rdn) != 1 or len(rdn[0]) != 2:
            return None  # a multi-valued RDN: its order is cryptography's business
        key, value = rdn[0]
        short = _SHORT_NAMES.get(key)
        if short is None or not isinstance(value, str) or not value:
            return None
        if value.strip(" ") != value or not _SPECIAL.isdisjoint(value):
            return None
        parts.append(f"{short}={value}")
    return ",".join(parts)


#: How the ssl module spells a certificate time (OpenSSL's ASN1_TIME_print, in UTC):
#: "Mar  2 02:32:54 2027 GMT". Parsed here, not with ssl.cert_time_to_seconds, whose
#: time.strptime costs ~8 ms on its first call in a process (it imports _strptime and
#: reads the locale). Anything else (fractional seconds) is left to cryptography.
_CERT_TIME = re.compile(r"([A-Z][a-z]{2}) {1,2}(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4}) GMT")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _utc(text: object) -> dt.datetime | None:
    match = _CERT_TIME.fullmatch(text) if isinstance(text, str) else None
    if match is None or match[1] not in _MONTHS:
        return None
    day, hour, minute, second, year = (int(match[i]) for i in range(2, 7))
    try:
        return dt.datetime(
            year, _MONTHS.index(match[1]) + 1, day, hour, minute, second, tzinfo=dt.UTC
        )
    except ValueError:  # "Feb 30"
        return None


def decoded_cert_info(
    decoded: Mapping[str, Any], *, now: dt.datetime | None = None
) -> CertInfo | None:
    """``cert_info`` from the ssl module's decoding of a verified certificate
    (``getpeercert()``), no cryptography needed; None when a field needs cryptography's own
    formatting (tests/unit/test_tlsinfo.py holds the two equal)."""
    subject, issuer = _rfc4514(decoded.get("subject")), _rfc4514(decoded.get("issuer"))
    not_before, not_after = _utc(decoded.get("notBefore")), _utc(decoded.get("notAfter"))
    if subject is None or issuer is None or not_before is None or not_after is None:
        return None
    dns_names: list[str] = []
    ips: list[str] = []
    for kind, value in decoded.get("subjectAltName", ()):
        if kind == "DNS":
            dns_names.append(value)
        elif kind == "IP Address":
            try:  # the ssl module spells IPv6 uncompressed ("0:0:0:0:0:0:0:1")
                ips.append(str(ipaddress.ip_address(value)))
            except ValueError:
                return None
    now = now or dt.datetime.now(dt.UTC)
    return CertInfo(
        subject=subject,
        issuer=issuer,
        sans=(*dns_names, *ips),
        not_before=not_before.isoformat(),
        not_after=not_after.isoformat(),
        days_left=int((not_after - now).total_seconds() / 86400),
        expired=not_after <= now,
    )


def describe_tls(
    ssl_object: ssl.SSLObject,
    *,
    sni: str | None,
    alpn_offered: tuple[str, ...],
    verified: bool | None,
) -> TLSInfo:
    cipher = ssl_object.cipher()
    return TLSInfo(
        sni=sni,
        alpn_offered=alpn_offered,
        alpn=ssl_object.selected_alpn_protocol(),
        version=ssl_object.version(),
        cipher=cipher[0] if cipher else None,
        resumed=bool(ssl_object.session_reused),
        verified=verified,
        cert_der=ssl_object.getpeercert(binary_form=True),
        # Decoded after the trace (~20 us here would be request time); empty unless verified.
        decoded_cert=(lambda: ssl_object.getpeercert() or {}) if verified else None,
    )


def pem_cert_info(path: str) -> CertInfo | None:
    """The first certificate of a PEM file (the leaf of --cert), None if it cannot be read."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding

    try:
        with open(path, "rb") as fh:
            cert = x509.load_pem_x509_certificate(fh.read())
    except (OSError, ValueError):
        return None
    return cert_info(cert.public_bytes(Encoding.DER))


def finish_tls(tls: TLSInfo | None) -> None:
    """Parse the certificate kept during the trace (after it: parsing costs ~1-3 ms), and
    judge from its issuer whether an inspection product re-signed it."""
    if tls is None:
        return
    decoder, tls.decoded_cert = tls.decoded_cert, None  # the SSL object goes with it
    if tls.cert is None and decoder is not None:
        try:
            decoded = decoder()
        except ValueError:
            # "handshake not done yet": a session the server ended with an alert after the
            # handshake (TLS 1.3's refused client certificate) leaves the SSL object
            # unreadable. The DER taken when the handshake completed is read instead.
            decoded = {}
        tls.cert = decoded_cert_info(decoded) if decoded else None
    if tls.cert is None and tls.cert_der:
        tls.cert = cert_info(tls.cert_der)
    if tls.intercepted is None:  # a caller that compared with a direct handshake keeps its own
        tls.intercepted = judge(tls.cert)


def client_cert_refused(*, sent: bool | None, host: str, how: str) -> TLSError:
    """The server asked for a client certificate and ended the session: ``how`` it did
    (the alert's words, or how the connection closed)."""
    if sent:
        return TLSError(
            f"TLS: {host} refused our client certificate ({how}): is it signed by a CA the"
            " server trusts, and still valid?",
            stage="tls",
            kind="client_cert_rejected",
            host=host,
        )
    return TLSError(
        f"TLS: the server asked for a client certificate; pass --cert/--key ({how})",
        stage="tls",
        kind="client_cert_required",
        host=host,
    )


#: OpenSSL's reasons when the answer to our ClientHello is not TLS at all: a plain-HTTP
#: server's "HTTP/1.1 400" read as a record header (3.0: WRONG_VERSION_NUMBER; 3.2+:
#: RECORD_LAYER_FAILURE; HTTP_REQUEST is the server side's own name for it).
_PLAIN_HTTP_REASONS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"})
#: The server refused every version we offer (TLS 1.2 and 1.3).
_VERSION_REASONS = frozenset(
    {"TLSV1_ALERT_PROTOCOL_VERSION", "UNSUPPORTED_PROTOCOL", "NO_PROTOCOLS_AVAILABLE"}
)

#: How a certificate got into a failure's report: the refused handshake keeps none.
SECOND_HANDSHAKE = "certificate read by a second, unverified handshake"


def _refused_cert_words(kind: str, host: str, cert: CertInfo | None) -> str:
    """The refused certificate in words, with the fact that decides it when we have it."""
    if cert is None:
        return cert_hint(kind, host)
    if kind == "cert_expired":
        ago = -cert.days_left
        return (
            f"the server's certificate expired on {cert.not_after[:10]}"
            f" ({ago} day{'s' if ago != 1 else ''} ago)"
        )
    if kind == "cert_not_yet_valid":
        return f"the server's certificate is not valid before {cert.not_before[:10]}"
    if kind in ("hostname_mismatch", "ip_mismatch"):
        names = ", ".join(cert.sans) or f"no SAN (subject {cert.subject})"
        return f"the certificate is not valid for {host!r}: it names {names}"
    if kind == "self_signed":
        return f"the certificate is self-signed by {cert.issuer} (--cacert FILE to trust it)"
    if kind == "unknown_ca":
        return f"the certificate's issuer {cert.issuer} is not a trusted CA (--cacert FILE)"
    return cert_hint(kind, host)


def tls_failure(
    exc: ssl.SSLError, *, host: str, elapsed_ns: int, cert: CertInfo | None = None
) -> TLSError:
    """Translate an ssl error into a one-line TLSError naming what is wrong; ``cert`` is the
    refused certificate when a second, unverified handshake could read it."""
    elapsed_ms = round(elapsed_ns / 1e6, 3)
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = exc.verify_code
        kind = VERIFY_KINDS.get(code, "cert_verify_failed")
        reason = exc.verify_message or exc.reason or str(exc)
        how = f"; {SECOND_HANDSHAKE}" if cert is not None else ""
        return TLSError(
            f"TLS: {_refused_cert_words(kind, host, cert)} ({reason}{how})",
            stage="tls",
            kind=kind,
            host=host,
            verify_code=code,
            elapsed_ms=elapsed_ms,
        )
    reason = exc.reason or type(exc).__name__
    if reason in _PLAIN_HTTP_REASONS:
        words = "the server answered in plain HTTP: try http://"
    elif reason in _VERSION_REASONS:
        # The alert names no version (OpenSSL's record says 0x0303 whatever the server
        # speaks): all we know is that it refused 1.2 and 1.3.
        words = "the server offers only TLS 1.1 (or older); TLS 1.2 or later is required"
    else:
        words = f"handshake with {host} failed"
    return TLSError(
        f"TLS: {words} ({reason})",
        stage="tls",
        kind="handshake_failed",
        host=host,
        reason=str(reason),
        elapsed_ms=elapsed_ms,
    )
