"""Certificate facts from DER, with an injected clock."""

from __future__ import annotations

import datetime as dt
import ssl

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from promptpath.net.tlsinfo import cert_hint, cert_info, tls_failure

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def der(not_after: dt.datetime) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "api.test")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(not_after - dt.timedelta(days=90))
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("api.test")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


@pytest.mark.parametrize(
    ("offset", "days"),
    [
        (dt.timedelta(days=30, hours=1), 30),
        (dt.timedelta(hours=23), 0),
        (-dt.timedelta(hours=23), 0),  # expired today: not "-1 days"
        (-dt.timedelta(days=2, hours=1), -2),
    ],
)
def test_days_left_truncates_toward_zero(offset: dt.timedelta, days: int) -> None:
    info = cert_info(der(NOW + offset), now=NOW)
    assert info is not None and info.days_left == days
    assert info.expired is (offset < dt.timedelta(0))
    assert info.sans == ("api.test",) and info.subject == "CN=api.test"


def _verify_error(code: int, message: str) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, "certificate verify failed")
    exc.verify_code = code
    exc.verify_message = message
    return exc


def test_tcp_refusal_names_a_certificate_not_valid_yet_as_quic_does() -> None:
    err = tls_failure(
        _verify_error(9, "certificate is not yet valid"), host="api.test", elapsed_ns=0
    )
    assert err.kind == "cert_not_yet_valid"
    assert err.message == (
        "TLS: the server's certificate is not valid yet (certificate is not yet valid)"
    )


def test_cert_hint_fills_in_the_host_and_falls_back_for_unnamed_kinds() -> None:
    assert (
        cert_hint("hostname_mismatch", "api.test") == "the certificate is not valid for 'api.test'"
    )
    assert cert_hint("cert_verify_failed", "api.test") == "certificate verification failed"
