"""What runs the moment a QUIC handshake completes, before our Finished leaves.

``Completion`` is the ``on_complete`` hook of ``QuicTracer`` (quic_protocol.py): called
inside the callback of the datagram that carried the server's Finished, before the
transmit that sends ours. It checks the certificate, and only then queues the first
request (``FirstRequest``, prepared before t0) so that it goes out in that same transmit.
quic_connect.py reads what it found once the handshake coroutine resumes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from promptpath.core.errors import ErrorKind
from promptpath.core.timeline import Timeline
from promptpath.net import aioquic_internals
from promptpath.net.quic_protocol import Arrival, QuicTracer
from promptpath.net.quic_verify import CertVerifier


@dataclass(frozen=True, slots=True)
class FirstRequest:
    """The first request's HTTP/3 HEADERS block and body (prepared before t0), to leave
    with our Finished. Not in any repr: the headers carry the key."""

    headers: list[tuple[bytes, bytes]] = field(repr=False)
    body: bytes = field(repr=False)


class Completion:
    """What runs the moment the handshake completes (``QuicTracer``'s ``on_complete``):
    inside the callback of the datagram that carried the server's Finished, before the
    transmit that sends ours.

    First the certificate check (``CertVerifier``, when verifying): its verdict is kept in
    ``problem`` for the coroutine to refuse the connection with, as over TCP the check runs
    inside the handshake. Only when it passed is the first request queued (``stream``), so
    that it leaves in that same transmit: the client holds the 1-RTT keys once it has the
    server's Finished (RFC 9001 section 4.1.4), and aioquic builds the Initial, Handshake
    and 1-RTT packets of one transmit into one datagram while they fit (RFC 9000 section
    12.2). A refused certificate queues nothing: no request byte goes to an unverified
    server. A check that raises (an aioquic internal moved) is kept in ``error`` and
    queues nothing either.
    """

    def __init__(
        self,
        quic: Any,
        verifier: CertVerifier | None,
        first: FirstRequest | None,
        timeline: Timeline,
    ) -> None:
        self._quic = quic
        self._verifier = verifier
        self._first = first
        self._timeline = timeline
        self.problem: tuple[ErrorKind, str] | None = None
        self.error: Exception | None = None
        self.stream: asyncio.Queue[Arrival] | None = None

    def __call__(self, tracer: QuicTracer) -> None:
        try:
            self.problem = _certificate_problem(self._quic, self._verifier)
        except Exception as exc:  # raised by the coroutine, after the callback
            self.error = exc
            return
        if self.problem is None and self._first is not None:
            self.stream = tracer.queue_request(
                self._first.headers, self._first.body, self._timeline
            )


def _certificate_problem(quic: Any, verifier: CertVerifier | None) -> tuple[ErrorKind, str] | None:
    """What ``verifier`` finds wrong with the certificate the server sent, or None."""
    if verifier is None:
        return None
    peer_cert = aioquic_internals.peer_certificate(quic)
    if peer_cert is None:  # a resumed session shows none
        return None
    return verifier.check(peer_cert, aioquic_internals.peer_certificate_chain(quic))


__all__ = ["Completion", "FirstRequest"]
