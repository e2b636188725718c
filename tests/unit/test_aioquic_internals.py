"""The aioquic internals promptpath reads, checked against the installed aioquic.

A real client and server QuicConnection shake hands in memory (datagrams handed over
by the test, a fake clock, no socket), then the client sends a request body; the
adapter's answers are compared with what the server actually received and what the
test configured. When aioquic moves an internal, the failure names it and the file to
update.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from importlib import metadata
from types import SimpleNamespace
from typing import Any

import pytest
import trustme
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import HandshakeCompleted, StreamDataReceived
from aioquic.tls import CipherSuite
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from promptpath.net import aioquic_internals as internals

# Labels only: the datagrams never touch a socket.
CLIENT_ADDR = ("127.0.0.1", 50000)
SERVER_ADDR = ("127.0.0.1", 4433)
RTT_S = 0.01  # fake clock step per round; more than aioquic's 1 ms ACK delay
SUITE = CipherSuite.CHACHA20_POLY1305_SHA256  # not aioquic's first choice: a real check


def _msg(what: str) -> str:
    return str(internals.changed(what))


@dataclass
class Pair:
    """A client and a server QuicConnection joined by the test instead of a network."""

    client: QuicConnection
    server: QuicConnection
    now: float = 0.0
    client_events: list[Any] = field(default_factory=list)
    server_events: list[Any] = field(default_factory=list)

    def client_to_server(self) -> int:
        """Send what the client has queued (as the congestion window allows); count it."""
        sent = self.client.datagrams_to_send(now=self.now)
        for data, _addr in sent:
            self.server.receive_datagram(data, CLIENT_ADDR, now=self.now)
        self.server_events.extend(_drain(self.server))
        return len(sent)

    def server_to_client(self) -> int:
        sent = self.server.datagrams_to_send(now=self.now)
        for data, _addr in sent:
            self.client.receive_datagram(data, SERVER_ADDR, now=self.now)
        self.client_events.extend(_drain(self.client))
        return len(sent)

    def round(self) -> int:
        self.now += RTT_S
        return self.client_to_server() + self.server_to_client()

    def received(self, stream_id: int) -> tuple[bytes, bool]:
        """What the server got on ``stream_id``: the bytes, and whether the FIN came."""
        got = [e for e in self.server_events if isinstance(e, StreamDataReceived)]
        data = b"".join(e.data for e in got if e.stream_id == stream_id)
        return data, any(e.end_stream for e in got if e.stream_id == stream_id)


def _drain(quic: QuicConnection) -> list[Any]:
    events = []
    while (event := quic.next_event()) is not None:
        events.append(event)
    return events


@pytest.fixture(scope="module")
def pki() -> tuple[trustme.LeafCert, x509.Certificate, x509.Certificate]:
    """A leaf issued by an intermediate, so the server sends a chain of one."""
    intermediate_ca = trustme.CA().create_child_ca()
    leaf = intermediate_ca.issue_cert("localhost")
    pems = [x509.load_pem_x509_certificate(p.bytes()) for p in leaf.cert_chain_pems]
    return leaf, pems[0], pems[1]


def _pair(
    pki: tuple[trustme.LeafCert, x509.Certificate, x509.Certificate],
    *,
    server_cls: type[QuicConnection] = QuicConnection,
    client_leaf: trustme.LeafCert | None = None,
) -> Pair:
    leaf, cert, intermediate = pki
    server_config = QuicConfiguration(is_client=False, alpn_protocols=["h3"])
    server_config.certificate = cert
    server_config.certificate_chain = [intermediate]
    server_config.private_key = load_pem_private_key(leaf.private_key_pem.bytes(), None)
    # As promptpath's own client is configured: aioquic does not verify, we read the chain.
    client_config = QuicConfiguration(
        is_client=True,
        alpn_protocols=["h3"],
        server_name="localhost",
        verify_mode=ssl.CERT_NONE,
        cipher_suites=[SUITE],
    )
    if client_leaf is not None:  # as promptpath's --cert configures it
        client_config.certificate = x509.load_pem_x509_certificate(
            client_leaf.cert_chain_pems[0].bytes()
        )
        client_config.private_key = load_pem_private_key(client_leaf.private_key_pem.bytes(), None)
    client = QuicConnection(configuration=client_config)
    server = server_cls(
        configuration=server_config,
        original_destination_connection_id=client.original_destination_connection_id,
    )
    client.connect(SERVER_ADDR, now=0.0)  # the ClientHello is queued, not yet sent
    return Pair(client=client, server=server)


def _handshake(pair: Pair) -> None:
    for _ in range(20):
        pair.round()
        done = [
            any(isinstance(e, HandshakeCompleted) for e in events)
            for events in (pair.client_events, pair.server_events)
        ]
        if all(done):
            return
    pytest.fail("the in-memory QUIC handshake did not complete in 20 round trips")


def test_installed_aioquic_is_the_minor_the_adapter_was_checked_against() -> None:
    installed = ".".join(metadata.version("aioquic").split(".")[:2])
    assert installed == internals.CHECKED_AGAINST, (
        f"aioquic {installed} is installed but promptpath/net/aioquic_internals.py was "
        f"checked against {internals.CHECKED_AGAINST}: run this file, then update "
        "CHECKED_AGAINST there and the aioquic pin in pyproject.toml"
    )


def test_peer_certificate_and_chain_are_what_the_server_sent(
    pki: tuple[trustme.LeafCert, x509.Certificate, x509.Certificate],
) -> None:
    _leaf, cert, intermediate = pki
    pair = _pair(pki)
    assert internals.peer_certificate(pair.client) is None, _msg(
        "tls.Context._peer_certificate is set before the server has answered"
    )
    _handshake(pair)
    assert internals.peer_certificate(pair.client) == cert, _msg(
        "tls.Context._peer_certificate is not the server's leaf certificate"
    )
    assert internals.peer_certificate_chain(pair.client) == [intermediate], _msg(
        "tls.Context._peer_certificate_chain is not the intermediates the server sent"
    )


def test_cipher_suite_is_the_one_negotiated(
    pki: tuple[trustme.LeafCert, x509.Certificate, x509.Certificate],
) -> None:
    pair = _pair(pki)
    assert internals.cipher_suite_name(pair.client) is None, _msg(
        "tls.Context.key_schedule is set before the server has answered"
    )
    _handshake(pair)
    assert internals.cipher_suite_name(pair.client) == SUITE.name, _msg(
        f"tls.Context.key_schedule.cipher_suite does not name {SUITE.name}, the only suite offered"
    )


def test_stream_fully_sent_matches_what_reached_the_server(
    pki: tuple[trustme.LeafCert, x509.Certificate, x509.Certificate],
) -> None:
    pair = _pair(pki)
    _handshake(pair)
    sid = pair.client.get_next_available_stream_id()
    # Far more than the initial congestion window, so it leaves over several round trips.
    body = bytes(range(256)) * 800
    pair.client.send_stream_data(sid, body, end_stream=True)
    assert not internals.stream_fully_sent(pair.client, sid), _msg(
        "QuicStreamSender._pending does not hold bytes written but not yet sent"
    )
    rounds_unsent = 0
    for _ in range(200):
        pair.now += RTT_S
        pair.client_to_server()  # everything the client sent is now at the server
        data, fin = pair.received(sid)
        sent = internals.stream_fully_sent(pair.client, sid)
        assert sent == (data == body and fin), _msg(
            f"QuicStreamSender._pending/_pending_eof say {'all' if sent else 'not all'} sent "
            f"while the server has {len(data)} of {len(body)} bytes, fin={fin}"
        )
        if sent:
            break
        rounds_unsent += 1
        pair.server_to_client()  # ACKs open the congestion window
    else:
        pytest.fail(_msg("the stream never reads as fully sent in 200 round trips"))
    assert rounds_unsent > 0, "the body left in one flight: the partial case went unchecked"


def test_a_fin_written_alone_is_unsent_until_it_leaves(
    pki: tuple[trustme.LeafCert, x509.Certificate, x509.Certificate],
) -> None:
    pair = _pair(pki)
    _handshake(pair)
    sid = pair.client.get_next_available_stream_id()
    pair.client.send_stream_data(sid, b"prompt", end_stream=False)
    pair.round()
    assert internals.stream_fully_sent(pair.client, sid), _msg(
        "QuicStreamSender._pending still holds bytes the server has received"
    )
    pair.client.send_stream_data(sid, b"", end_stream=True)
    assert not internals.stream_fully_sent(pair.client, sid), _msg(
        "QuicStreamSender._pending_eof does not hold a FIN written but not yet sent"
    )
    pair.now += RTT_S
    pair.client_to_server()
    assert pair.received(sid) == (b"prompt", True)
    assert internals.stream_fully_sent(pair.client, sid), _msg(
        "QuicStreamSender._pending_eof still holds a FIN the server has received"
    )
    # Once the server finishes its side too, aioquic may drop the stream: still all sent.
    pair.server.send_stream_data(sid, b"answer", end_stream=True)
    for _ in range(5):
        pair.round()
    assert internals.stream_fully_sent(pair.client, sid), _msg(
        "a finished stream no longer reads as fully sent"
    )


class _AskingServer(QuicConnection):
    """A server that sends a CertificateRequest. aioquic has no setting for it (hypercorn's
    HTTP/3 never asks): its TLS context carries a flag "for test purposes only"."""

    def _initialize(self, peer_cid: bytes) -> None:
        super()._initialize(peer_cid)
        self.tls._request_client_certificate = True


def test_certificate_requested_is_whether_the_server_asked(
    pki: tuple[trustme.LeafCert, x509.Certificate, x509.Certificate],
) -> None:
    pair = _pair(pki)
    _handshake(pair)
    assert internals.certificate_requested(pair.client) is False, _msg(
        "tls.Context._certificate_request is set though the server sent no CertificateRequest"
    )
    client_leaf = trustme.CA().issue_cert("alice@example.com")
    asking = _pair(pki, server_cls=_AskingServer, client_leaf=client_leaf)
    _handshake(asking)
    assert internals.certificate_requested(asking.client) is True, _msg(
        "tls.Context._certificate_request is not set after the server's CertificateRequest"
    )
    # aioquic answered with the certificate it was configured with (what "sent" assumes).
    assert asking.server.tls._peer_certificate == asking.client.configuration.certificate


def test_a_moved_internal_fails_with_the_file_to_update() -> None:
    moved: Any = SimpleNamespace(tls=SimpleNamespace(key_schedule=None))
    with pytest.raises(internals.AioquicInternalsChanged) as caught:
        internals.peer_certificate(moved)
    assert re.fullmatch(
        r"aioquic \d+\.\d+ changed an internal promptpath reads: "
        r"tls\.Context\._peer_certificate is gone; update promptpath/net/aioquic_internals\.py",
        str(caught.value),
    ), str(caught.value)


def test_rtt_estimates_are_the_round_trips_the_handshake_took(
    pki: tuple[trustme.LeafCert, x509.Certificate, x509.Certificate],
) -> None:
    pair = _pair(pki)
    assert internals.rtt_estimates(pair.client) is None, _msg(
        "QuicPacketRecovery._rtt_initialized is set before any sample"
    )
    # Each flight answered 30 ms after it left: every sample the client takes is 30 ms
    # (less the ack delay its peer reports, which is 0 here: it acks at once).
    for _ in range(20):
        pair.client_to_server()
        pair.now += 0.030
        pair.server_to_client()
        if any(isinstance(e, HandshakeCompleted) for e in pair.client_events):
            break
    estimates = internals.rtt_estimates(pair.client)
    assert estimates is not None, _msg("QuicPacketRecovery._rtt_initialized never set")
    minimum, smoothed = estimates
    assert minimum == pytest.approx(30.0, abs=0.5), _msg("QuicPacketRecovery._rtt_min is not it")
    assert smoothed == pytest.approx(30.0, abs=1.0), _msg("QuicPacketRecovery._rtt_smoothed")


def test_a_moved_rtt_estimator_fails_with_the_file_to_update() -> None:
    with pytest.raises(internals.AioquicInternalsChanged, match=r"QuicConnection\._loss is gone"):
        internals.rtt_estimates(SimpleNamespace())  # type: ignore[arg-type]
