"""HTTP/3 over QUIC: the transport the tracer uses for ``--http 3``.

Reaching the server is quic_connect's job (a verified handshake, address by address),
pumping datagrams quic_protocol's, checking the certificate quic_verify's. This module
sends a request on an established connection and hands the response over, stamped
datagram by datagram, as the transport seam defines it (net/transport.py).

The request is never sent as 0-RTT early data: no session ticket is offered to a traced
connection, and nothing is written on a stream before the handshake has completed. The
first request (``ConnectSpec.first_request``) leaves the moment it has, with our Finished,
once the certificate passed (quic_complete.py); ``request`` then finds it sent.

aioquic is imported only inside functions of those modules, and the tracer imports this
module only for ``--http 3``: an HTTP/2 run never pays for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable

from promptpath.core.rtt import PathRtt
from promptpath.core.timeline import Timeline
from promptpath.net import aioquic_internals
from promptpath.net.keylog import KeyLog
from promptpath.net.quic_complete import FirstRequest
from promptpath.net.quic_connect import ClientCert, Session, connect, load_client_cert, preload
from promptpath.net.quic_protocol import Arrival, QuicRecorder
from promptpath.net.quic_verify import CertVerifier
from promptpath.net.transport import (
    Body,
    BodyPiece,
    ConnectSpec,
    Recorder,
    ResponseHead,
    TransportError,
    WireRequest,
)

#: Request headers that are connection-specific and forbidden in HTTP/3 (RFC 9114 §4.2).
_FORBIDDEN = frozenset(
    {"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
)


def h3_headers(request: WireRequest, spec: ConnectSpec) -> list[tuple[bytes, bytes]]:
    """The HEADERS block of ``request`` on HTTP/3: pseudo-headers first, the authority
    from -H Host when given (as on HTTP/1.1 and HTTP/2), one content-length of the body's
    own, and no connection-specific field (RFC 9114 section 4.2)."""
    headers = [
        (b":method", request.method.encode()),
        (b":scheme", b"https"),
        (b":authority", request.authority(spec).encode()),
        (b":path", request.path.encode()),
    ]
    for name, value in request.end_to_end_headers():
        lname = name.lower()
        if lname not in _FORBIDDEN:
            headers.append((lname.encode(), value.encode()))
    headers.append((b"content-length", str(len(request.body)).encode()))
    return headers


class QuicTransport:
    """Opens QUIC connections and speaks HTTP/3 on them.

    ``cacert``/``verify``: the certificate store is loaded here, at construction, so
    that it is done before t0 (aioquic would reload it inside every handshake); so is
    ``client_cert``, (certificate PEM, key PEM or None when the first holds both).
    ``keylog``: the SSLKEYLOGFILE path, appended to in the NSS key log format.
    """

    def __init__(
        self,
        host: str,
        *,
        cacert: str | None,
        verify: bool,
        client_cert: tuple[str, str | None] | None = None,
        keylog: str | None = None,
    ) -> None:
        preload()
        self._keylog = None if keylog is None else KeyLog(keylog)
        self._verifier = CertVerifier(host, cacert) if verify else None
        self._client_cert: ClientCert | None = (
            None if client_cert is None else load_client_cert(*client_cert)
        )

    @staticmethod
    def recorder(timeline: Timeline) -> QuicRecorder:
        """The recorder this transport needs: one that counts datagrams too."""
        return QuicRecorder(timeline)

    async def connect(self, spec: ConnectSpec, recorder: Recorder) -> QuicConnection:
        assert isinstance(recorder, QuicRecorder), "QUIC stamps go to a QuicRecorder"
        recorder.connects += 1
        request = spec.first_request
        first = None if request is None else FirstRequest(h3_headers(request, spec), request.body)
        session = await connect(
            spec, recorder, self._verifier, self._client_cert, keylog=self._keylog, first=first
        )
        return QuicConnection(session, spec)


class QuicConnection:
    """One QUIC connection; each request is one bidirectional stream."""

    def __init__(self, session: Session, spec: ConnectSpec) -> None:
        self._session = session
        self._spec = spec
        # The request that left with our Finished, and its response stream: ``request``
        # hands that stream over when asked for the very same request.
        self._first = None if session.first is None else spec.first_request
        # RFC 9002's smoothed RTT right after the handshake; the stream's end reads again.
        first = self._rtt()
        self._first_rtt_ms = None if first is None else first[1]

    def _rtt(self) -> tuple[float, float] | None:
        quic = self._session.protocol.quic
        return None if quic is None else aioquic_internals.rtt_estimates(quic)

    def record_rtt(self, timeline: Timeline) -> None:
        """QUIC's RTT estimates now onto ``timeline``, once (core/rtt.py)."""
        if timeline.rtt is not None:
            return
        now = self._rtt()
        if now is None and self._first_rtt_ms is None:
            return
        timeline.rtt = PathRtt(
            source="quic",
            first_ms=self._first_rtt_ms,
            min_ms=None if now is None else now[0],
            smoothed_ms=None if now is None else now[1],
        )

    @property
    def reusable(self) -> bool:
        return self._session.protocol.terminated is None

    @property
    def multiplexed(self) -> bool:
        return True  # every request is a stream of its own on the one connection

    async def request(
        self, request: WireRequest, timeline: Timeline | None = None
    ) -> tuple[ResponseHead, Body]:
        tl = self._session.recorder.timeline if timeline is None else timeline
        if request is self._first and self._session.first is not None:
            self._first = None
            queue = self._session.first  # sent already, stamped onto the connecting timeline
        else:
            queue = self._session.protocol.send_request(
                h3_headers(request, self._spec), request.body, tl
            )
        while True:  # skip informational (1xx) responses
            head = await queue.get()
            if head.broken is not None:
                raise TransportError(f"no response: {head.broken}")
            if head.headers is None:
                continue
            status = next((int(v) for k, v in head.headers if k == b":status"), 0)
            if status >= 200:
                break
        tl.mark("ttfb", head.t_ns)
        response = ResponseHead(
            status=status,
            headers=tuple(
                (k.decode("latin-1"), v.decode("latin-1"))
                for k, v in head.headers
                if not k.startswith(b":")
            ),
            http_version="HTTP/3",
            t_ns=head.t_ns,
        )
        return response, _body(queue, head, lambda: self.record_rtt(tl))

    async def abort(self) -> None:
        """Leave without a CONNECTION_CLOSE (the UDP socket just goes)."""
        self._session.protocol.drop()
        if self._session.keylog is not None:
            self._session.keylog.drain()

    async def aclose(self) -> None:
        self._session.protocol.close()
        if self._session.keylog is not None:  # a key update's secrets, if there was one
            self._session.keylog.drain()


async def _body(
    queue: asyncio.Queue[Arrival], first: Arrival, on_end: Callable[[], None]
) -> AsyncGenerator[BodyPiece, None]:
    """The DATA arrivals of a response, then the end (the stream's FIN, stamped with its
    datagram); TransportError if the stream or the connection dies first."""
    arrival = first
    while not arrival.ended:
        arrival = await queue.get()
        if arrival.broken is not None:
            raise TransportError(arrival.broken)
        if arrival.data:
            yield BodyPiece(data=arrival.data, t_ns=arrival.t_ns, read_index=arrival.read_index)
    on_end()
    yield BodyPiece(data=b"", t_ns=arrival.t_ns, read_index=arrival.read_index, end=True)


__all__ = ["QuicConnection", "QuicTransport", "h3_headers"]
