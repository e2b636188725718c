"""Whether the server asked for a client certificate, read from real handshake bytes.

Client and server are this Python's OpenSSL, joined by memory BIOs (no socket): each
case is a real handshake, and the tap sees exactly the bytes a socket would carry.
"""

from __future__ import annotations

import contextlib
import ssl
from dataclasses import dataclass

import pytest
import trustme

from promptpath.net.clientauth import ClientAuth, HandshakeTap

TLS12, TLS13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3


@dataclass(frozen=True)
class PKI:
    ca: trustme.CA
    server: trustme.LeafCert
    client: trustme.LeafCert
    stranger: trustme.CA  # a CA the client does not trust


@pytest.fixture(scope="module")
def pki() -> PKI:
    ca = trustme.CA()
    return PKI(
        ca=ca,
        server=ca.issue_cert("localhost"),
        client=ca.issue_cert("alice@example.com"),
        stranger=trustme.CA(),
    )


def _handshake(
    pki: PKI,
    *,
    version: ssl.TLSVersion,
    mode: ssl.VerifyMode,
    client_cert: bool,
    trust_server: bool = True,
) -> tuple[HandshakeTap, str | None]:
    """One handshake in memory; (the client's tap, the version, or None if it failed)."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    if trust_server:
        pki.server.configure_cert(server_ctx)
    else:
        pki.stranger.issue_cert("localhost").configure_cert(server_ctx)
    pki.ca.configure_trust(server_ctx)
    server_ctx.verify_mode = mode
    server_ctx.maximum_version = version
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    pki.ca.configure_trust(client_ctx)
    if client_cert:
        pki.client.configure_cert(client_ctx)
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    tap = HandshakeTap()
    done = False
    for _ in range(10):
        try:
            client.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError:
            break
        finally:
            tap.sent += (out := c_out.read())
            s_in.write(out)
        if done:
            break
        # A refusing server still writes its alert: the client reads it next.
        with contextlib.suppress(ssl.SSLWantReadError, ssl.SSLError):
            server.do_handshake()
        tap.received += (back := s_out.read())
        c_in.write(back)
    return tap, client.version() if done else None


@pytest.mark.parametrize("version", [TLS12, TLS13], ids=["tls1.2", "tls1.3"])
@pytest.mark.parametrize(
    ("mode", "client_cert", "expected"),
    [
        (ssl.CERT_NONE, False, ClientAuth(requested=False, sent=False)),
        (ssl.CERT_NONE, True, ClientAuth(requested=False, sent=False)),
        (ssl.CERT_OPTIONAL, False, ClientAuth(requested=True, sent=False)),
        (ssl.CERT_OPTIONAL, True, ClientAuth(requested=True, sent=True)),
        (ssl.CERT_REQUIRED, True, ClientAuth(requested=True, sent=True)),
    ],
    ids=["not-asked", "not-asked-cert-loaded", "optional", "optional-sent", "required-sent"],
)
def test_the_tap_tells_what_the_server_asked_and_what_we_sent(
    pki: PKI,
    version: ssl.TLSVersion,
    mode: ssl.VerifyMode,
    client_cert: bool,
    expected: ClientAuth,
) -> None:
    tap, negotiated = _handshake(pki, version=version, mode=mode, client_cert=client_cert)
    assert negotiated == {TLS12: "TLSv1.2", TLS13: "TLSv1.3"}[version]
    assert tap.client_auth(negotiated) == expected


def test_tls13_refusal_comes_after_the_clients_handshake_and_is_still_read(pki: PKI) -> None:
    # TLS 1.3: the client is done before the server reads its empty Certificate; the
    # refusal (alert 116) would only arrive on the first read.
    tap, negotiated = _handshake(pki, version=TLS13, mode=ssl.CERT_REQUIRED, client_cert=False)
    assert negotiated == "TLSv1.3"
    assert tap.client_auth(negotiated) == ClientAuth(requested=True, sent=False)


def test_tls12_refusal_ends_the_handshake_and_the_failed_one_still_says_why(pki: PKI) -> None:
    tap, negotiated = _handshake(pki, version=TLS12, mode=ssl.CERT_REQUIRED, client_cert=False)
    assert negotiated is None  # the server's alert ended it
    assert tap.client_auth(None) == ClientAuth(requested=True, sent=False)


def test_our_own_refusal_of_the_server_is_not_taken_for_an_answer(pki: PKI) -> None:
    # TLS 1.2 shows the CertificateRequest in clear, but we hung up (unknown CA) before
    # answering it: "sent" must not read as "sent nothing".
    tap, negotiated = _handshake(
        pki, version=TLS12, mode=ssl.CERT_REQUIRED, client_cert=True, trust_server=False
    )
    assert negotiated is None
    assert tap.client_auth(None) == ClientAuth(requested=True, sent=None)


def test_tls13_handshake_we_ended_early_says_nothing(pki: PKI) -> None:
    tap, negotiated = _handshake(
        pki, version=TLS13, mode=ssl.CERT_REQUIRED, client_cert=True, trust_server=False
    )
    assert negotiated is None
    assert tap.client_auth(None) == ClientAuth(requested=None, sent=None)


def test_no_bytes_back_is_unknown_not_unasked() -> None:
    tap = HandshakeTap(sent=bytearray(b"\x16\x03\x01\x00\x01\x01"))
    assert tap.client_auth(None) == ClientAuth(requested=None, sent=None)


def test_an_unexpected_tls13_flight_is_unknown_not_guessed() -> None:
    record = b"\x17\x03\x03\x00\x01\x00"
    assert HandshakeTap(sent=bytearray(record * 4)).client_auth("TLSv1.3") == ClientAuth(
        requested=None, sent=None
    )
