"""Certificate facts from DER, with an injected clock."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from promptpath.net.tlsinfo import cert_hint, cert_info, decoded_cert_info, tls_failure

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


# -- the ssl module's decoding, no cryptography: the same CertInfo, or None -----------------
def _cert(
    subject: x509.Name, sans: list[x509.GeneralName], issuer: x509.Name | None = None
) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer or subject)
        .public_key(key.public_key())
        .serial_number(7)
        .not_valid_before(NOW - dt.timedelta(days=10, seconds=17))
        .not_valid_after(NOW + dt.timedelta(days=80, hours=5))
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


def _decoded(der_bytes: bytes, tmp_path: Path) -> dict[str, object]:
    # CPython's own helper (test_ssl's) for what getpeercert() returns, from a file: the
    # same C code decodes a live connection's verified certificate.
    path = tmp_path / "cert.pem"
    path.write_text(ssl.DER_cert_to_PEM_cert(der_bytes))
    return ssl._ssl._test_decode_cert(str(path))  # type: ignore[attr-defined]


def _attr(oid: x509.ObjectIdentifier, value: str) -> x509.NameAttribute[str]:
    return x509.NameAttribute(oid, value)


PLAIN = x509.Name(
    [
        _attr(NameOID.COUNTRY_NAME, "US"),
        _attr(NameOID.STATE_OR_PROVINCE_NAME, "California"),
        _attr(NameOID.LOCALITY_NAME, "San Francisco"),
        _attr(NameOID.ORGANIZATION_NAME, "Example Org"),
        _attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "Edge"),
        _attr(NameOID.DOMAIN_COMPONENT, "example"),
        _attr(NameOID.STREET_ADDRESS, "1 Main St"),
        _attr(NameOID.USER_ID, "u1"),
        _attr(NameOID.COMMON_NAME, "*.api.example.com"),
    ]
)
SANS: list[x509.GeneralName] = [
    x509.DNSName("api.example.com"),
    x509.IPAddress(ipaddress.ip_address("::1")),
    x509.DNSName("*.example.com"),
    x509.IPAddress(ipaddress.ip_address("192.0.2.7")),
    x509.RFC822Name("ops@example.com"),  # not a SAN either form reports
    x509.UniformResourceIdentifier("https://example.com/"),
]


@pytest.mark.parametrize(
    ("subject", "sans"),
    [
        (PLAIN, SANS),
        (x509.Name([_attr(NameOID.COMMON_NAME, "api.test")]), [x509.DNSName("api.test")]),
        (x509.Name([_attr(NameOID.ORGANIZATION_NAME, "No SAN Ltd")]), []),
        (x509.Name([]), [x509.DNSName("empty-subject.test")]),
    ],
    ids=["every-short-name", "one-cn", "no-san", "empty-subject"],
)
def test_the_ssl_modules_decoding_gives_what_cryptography_gives(
    subject: x509.Name, sans: list[x509.GeneralName], tmp_path: Path
) -> None:
    issuer = x509.Name([_attr(NameOID.COMMON_NAME, "Test CA"), _attr(NameOID.COUNTRY_NAME, "DE")])
    der_bytes = _cert(subject, sans, issuer)
    fast = decoded_cert_info(_decoded(der_bytes, tmp_path), now=NOW)
    assert fast is not None and fast == cert_info(der_bytes, now=NOW)


@pytest.mark.parametrize(
    "name",
    [
        x509.Name([_attr(NameOID.ORGANIZATION_NAME, "Example, Inc.")]),  # escaped ","
        x509.Name([_attr(NameOID.COMMON_NAME, " leading space")]),
        x509.Name([_attr(NameOID.COMMON_NAME, "#hash")]),
        x509.Name([_attr(NameOID.EMAIL_ADDRESS, "ops@example.com")]),  # an OID there
        x509.Name(
            [
                x509.RelativeDistinguishedName(
                    [_attr(NameOID.COMMON_NAME, "a"), _attr(NameOID.ORGANIZATION_NAME, "b")]
                )
            ]
        ),
    ],
    ids=["comma", "leading-space", "hash", "email-oid", "multi-valued-rdn"],
)
def test_a_name_that_needs_cryptographys_own_formatting_is_left_to_it(
    name: x509.Name, tmp_path: Path
) -> None:
    der_bytes = _cert(name, [x509.DNSName("x.test")])
    assert decoded_cert_info(_decoded(der_bytes, tmp_path), now=NOW) is None
    assert cert_info(der_bytes, now=NOW) is not None  # which finish_tls then uses


@pytest.mark.parametrize(
    ("text", "when"),
    [
        ("Mar  2 02:32:54 2027 GMT", dt.datetime(2027, 3, 2, 2, 32, 54, tzinfo=dt.UTC)),
        ("Dec 31 23:59:59 2049 GMT", dt.datetime(2049, 12, 31, 23, 59, 59, tzinfo=dt.UTC)),
        ("Jan  1 00:00:00 2050 GMT", dt.datetime(2050, 1, 1, tzinfo=dt.UTC)),  # GeneralizedTime
        ("Mar  2 02:32:54.5 2027 GMT", None),  # fractional seconds: cryptography's to read
        ("Feb 30 00:00:00 2020 GMT", None),
        ("Foo  2 02:32:54 2027 GMT", None),
    ],
)
def test_certificate_times_as_the_ssl_module_spells_them(text: str, when: object) -> None:
    from promptpath.net.tlsinfo import _utc

    assert _utc(text) == when
    if when is not None:  # what ssl.cert_time_to_seconds (strptime: 8 ms at first) reads
        assert dt.datetime.fromtimestamp(ssl.cert_time_to_seconds(text), dt.UTC) == when


def test_a_session_ended_by_an_alert_has_its_certificate_read_from_the_der() -> None:
    # Found by tests/integration/test_mtls.py: after a TLS 1.3 server refuses our client
    # certificate with an alert, SSLObject.getpeercert() raises "handshake not done yet".
    from promptpath.core.timeline import TLSInfo
    from promptpath.net.tlsinfo import finish_tls

    def unreadable() -> dict[str, object]:
        raise ValueError("handshake not done yet")

    der_bytes = der(NOW + dt.timedelta(days=30))
    tls = TLSInfo(sni="api.test", alpn_offered=(), cert_der=der_bytes, decoded_cert=unreadable)
    finish_tls(tls)
    assert tls.cert is not None and tls.cert.subject == "CN=api.test"
    assert tls.decoded_cert is None  # the SSL object is let go
