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


def _ssl_error(reason: str) -> ssl.SSLError:
    exc = ssl.SSLError(1, reason)
    exc.reason = reason
    return exc


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        # OpenSSL 3.0 and 3.2+ name a plain-HTTP answer differently (only 3.0 is here to
        # produce it over a socket: tests/integration/test_tls_failures.py).
        ("WRONG_VERSION_NUMBER", "the server answered in plain HTTP: try http://"),
        ("RECORD_LAYER_FAILURE", "the server answered in plain HTTP: try http://"),
        ("TLSV1_ALERT_PROTOCOL_VERSION", "the server offers only TLS 1.1 (or older)"),
        ("UNSUPPORTED_PROTOCOL", "the server offers only TLS 1.1 (or older)"),
        ("SSLV3_ALERT_HANDSHAKE_FAILURE", "handshake with api.test failed"),
    ],
)
def test_handshake_failures_in_plain_words(reason: str, words: str) -> None:
    err = tls_failure(_ssl_error(reason), host="api.test", elapsed_ns=0)
    assert err.kind == "handshake_failed" and err.stage == "tls"
    assert err.message.startswith(f"TLS: {words}") and err.message.endswith(f"({reason})")


def test_a_refused_certificate_read_again_gives_the_fact_that_decides() -> None:
    cert = cert_info(der(NOW - dt.timedelta(days=3, hours=1)), now=NOW)
    assert cert is not None
    expired = tls_failure(
        _verify_error(10, "certificate has expired"), host="api.test", elapsed_ns=0, cert=cert
    )
    assert expired.message == (
        "TLS: the server's certificate expired on 2026-11-27 (3 days ago) (certificate has"
        " expired; certificate read by a second, unverified handshake)"
    )
    wrong = tls_failure(_verify_error(62, "mismatch"), host="other.test", elapsed_ns=0, cert=cert)
    assert "not valid for 'other.test': it names api.test (" in wrong.message
    unknown = tls_failure(_verify_error(20, "no issuer"), host="api.test", elapsed_ns=0, cert=cert)
    assert "issuer CN=api.test is not a trusted CA (--cacert FILE)" in unknown.message
