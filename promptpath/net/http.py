"""HTTP/1.1 and HTTP/2 over TCP: httpcore's connection classes on our stamped streams.

The connection is opened here, stage by stage (``backend.connect_tcp``, then
``start_tls`` with the ALPN offer), and only then handed to httpcore's
``AsyncHTTP11Connection`` or ``AsyncHTTP2Connection`` (public API), chosen by what ALPN
selected. No pool sits in between: a pool would open connections when and how it
likes, and a CONNECT tunnel (a hop before the origin's TLS) could not be put in the
middle. httpcore's exceptions are translated here, at the boundary, into
``TransportError``.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import httpcore

from promptpath.core.timeline import CloseRecord, GoawayRecord, Timeline
from promptpath.net.backend import TracedNetworkStream, connect_tcp
from promptpath.net.http2 import PeerEnded, StampedHTTP2Connection, goaway_record
from promptpath.net.proxy import open_tunnel
from promptpath.net.tcprtt import path_rtt, read_tcp_rtt
from promptpath.net.transport import (
    Body,
    BodyPiece,
    ConnectSpec,
    Recorder,
    ResponseHead,
    TransportError,
    WireRequest,
)

_FAILURES = (
    httpcore.ProtocolError,
    httpcore.NetworkError,
    httpcore.TimeoutException,
    httpcore.ConnectionNotAvailable,
    OSError,
)


class OneWriteHTTP11Connection(httpcore.AsyncHTTP11Connection):
    """httpcore's HTTP/1.1 connection, writing a request's head and body in one go.

    httpcore writes the head, each body chunk and the end of the message (an empty write
    with a content-length) apart: three TLS records and sends, each waking the server,
    where curl sends one. Held here up to ``HELD_MAX`` bytes; a larger body goes on in
    writes of its own once that much is out. This overrides httpcore's private
    ``_send_event`` and the two methods around it (httpcore's minor is pinned)."""

    HELD_MAX = 65536
    _held: bytearray | None = None

    async def _send_request_headers(self, request: httpcore.Request) -> None:
        self._held = bytearray()
        await super()._send_request_headers(request)

    async def _send_request_body(self, request: httpcore.Request) -> None:
        try:
            await super()._send_request_body(request)
        finally:
            await self._flush(request.extensions.get("timeout", {}).get("write"))

    async def _send_event(self, event: Any, timeout: float | None = None) -> None:
        held = self._held
        if held is None:
            await super()._send_event(event, timeout=timeout)
            return
        held += self._h11_state.send(event) or b""
        if len(held) >= self.HELD_MAX:
            await self._flush(timeout)
            self._held = bytearray()

    async def _flush(self, timeout: float | None) -> None:
        held, self._held = self._held, None
        if held:
            await self._network_stream.write(bytes(held), timeout=timeout)


#: The anyio names httpcore and our stream code look up during a trace. anyio 4.16 exports
#: its API lazily: the first ``anyio.Lock`` (httpcore's first lock, in the request stage)
#: ran anyio's module __getattr__ and imported anyio._core._synchronization there (0.6 ms
#: of the first HTTP/1.1 request's stage, sys.setprofile between tls_done and
#: request_sent). Looked up once when the transport is built, before t0.
_ANYIO_NAMES = (
    *("BrokenResourceError", "CancelScope", "ClosedResourceError", "EndOfStream", "Event"),
    *("Lock", "Semaphore", "aclose_forcefully", "connect_tcp", "create_task_group"),
    *("fail_after", "get_cancelled_exc_class", "move_on_after", "notify_closing", "sleep"),
    *("wait_readable", "wait_writable"),
)


def _resolve_anyio_names() -> None:
    for name in _ANYIO_NAMES:
        getattr(anyio, name)


class TCPTransport:
    """Opens TCP (+TLS) connections and speaks HTTP/1.1 or HTTP/2 on them.

    ``h2c``: HTTP/2 with prior knowledge on a cleartext connection (there is no ALPN on
    cleartext to negotiate it).
    """

    def __init__(self, *, h2c: bool = False) -> None:
        self._h2c = h2c
        _resolve_anyio_names()

    @staticmethod
    def recorder(timeline: Timeline) -> Recorder:
        return Recorder(timeline)

    async def open_stream(
        self, spec: ConnectSpec, recorder: Recorder, *, tunnel: bool = False
    ) -> TracedNetworkStream:
        """The ``connect`` and (for https) ``tls`` stages: a stamped byte stream.

        Through a proxy: ``proxy_connect`` (and ``proxy_tls`` for an https:// proxy), then
        for an https:// target the ``tunnel`` (CONNECT) and the origin's ``tls`` inside it.
        ``tunnel``: CONNECT for a plain-http target too (a WebSocket cannot go in the
        absolute form: the proxy would have to speak it).
        """
        hop = spec.proxy
        if hop is None:
            stream = await connect_tcp(spec.host, spec.dial_port, spec.addresses, recorder)
        else:
            plain_target = spec.scheme == "http" and not tunnel
            stream = await connect_tcp(
                hop.host,
                hop.port,
                hop.addresses,
                recorder,
                stage_name="proxy_connect",
                milestone=None,
            )
            if recorder.timeline.proxy is not None and recorder.timeline.attempts:
                attempt = recorder.timeline.attempts[-1]
                recorder.timeline.proxy.address = (attempt.ip, attempt.port)
            if hop.scheme == "https":
                assert hop.ssl_context is not None, "an https:// proxy carries its SSL context"
                stream = await stream.start_tls(
                    hop.ssl_context, hop.host, alpn=("http/1.1",), stage_name="proxy_tls"
                )
            if plain_target:  # absolute-form requests to the proxy: it is the connection
                ready = recorder.timeline.stages[-1].end_ns or time.perf_counter_ns()
                recorder.timeline.mark("connected", ready)
                return stream
            await open_tunnel(stream, spec, hop, recorder)
        if spec.scheme == "https":
            assert spec.ssl_context is not None, "an https spec carries its SSL context"
            stream = await stream.start_tls(spec.ssl_context, spec.host, alpn=spec.alpn)
        return stream

    async def connect(self, spec: ConnectSpec, recorder: Recorder) -> TCPConnection:
        stream = await self.open_stream(spec, recorder)
        return TCPConnection(stream, spec, recorder, h2c=self._h2c)


class TCPConnection:
    """One HTTP/1.1 or HTTP/2 connection; each request's milestones go to the recorder's
    current timeline (a warm request switches it)."""

    def __init__(
        self, stream: TracedNetworkStream, spec: ConnectSpec, recorder: Recorder, *, h2c: bool
    ) -> None:
        self.stream = stream
        self._spec = spec
        self._recorder = recorder
        # The kernel's estimate right after the handshake (the SYN's sample and the TLS
        # flights'); the stream's end reads it again with the minimum (net/tcprtt.py).
        first = read_tcp_rtt(self._socket())
        self._first_rtt_ms = None if first is None else first.smoothed_ms
        origin = httpcore.Origin(spec.scheme.encode(), spec.host.encode(), spec.port)
        alpn = stream.get_extra_info("ssl_object")
        selected = alpn.selected_alpn_protocol() if alpn is not None else None
        # A proxy in absolute form speaks HTTP/1.1: no h2c through it.
        self.http2 = selected == "h2" or (spec.scheme == "http" and h2c and spec.proxy is None)
        self.last_stream_id = 0  # HTTP/2: the stream of the last request sent
        self._conn: httpcore.AsyncHTTP11Connection | httpcore.AsyncHTTP2Connection
        if self.http2:
            self._conn = StampedHTTP2Connection(origin, stream, recorder)
        else:
            self._conn = OneWriteHTTP11Connection(origin=origin, stream=stream)

    @property
    def multiplexed(self) -> bool:
        """HTTP/2: streams share this connection; HTTP/1.1: one request at a time."""
        return self.http2

    def _socket(self) -> socket.socket | None:
        sock = self.stream.raw.extra(anyio.abc.SocketAttribute.raw_socket, None)
        return sock if isinstance(sock, socket.socket) else None

    def record_rtt(self, timeline: Timeline) -> None:
        """The kernel's round trip now onto ``timeline``, once (net/tcprtt.py)."""
        if timeline.rtt is None:
            via_proxy = self._spec.proxy is not None
            timeline.rtt = path_rtt(self._socket(), self._first_rtt_ms, via_proxy=via_proxy)

    @property
    def closed_by_http(self) -> bool:
        """HTTP ended the connection (``Connection: close``, HTTP/1.0): it takes no more."""
        return self._conn.is_closed()

    @property
    def reusable(self) -> bool:
        conn = self._conn
        return conn.is_available() and not conn.is_closed() and not conn.has_expired()

    async def request(
        self, request: WireRequest, timeline: Timeline | None = None
    ) -> tuple[ResponseHead, Body]:
        recorder = self._recorder
        tl = recorder.timeline if timeline is None else timeline
        h2conn = self._conn if isinstance(self._conn, StampedHTTP2Connection) else None
        stream_id = 0

        async def on_trace(name: str, info: dict[str, Any]) -> None:
            # Stamps come from the socket wrapper, not from now(): the trace callback runs
            # after httpcore has parsed what the read brought.
            nonlocal stream_id
            if name.endswith("send_request_headers.started"):
                stream_id = info.get("stream_id", 0)
            elif name.endswith("send_request_body.complete"):
                # HTTP/2: the write that carried this stream's END_STREAM, which is not the
                # connection's last write when other streams wrote since.
                sent = None if h2conn is None else h2conn.sent_ns.get(stream_id)
                t_sent = recorder.last_write_ns if sent is None else sent
                tl.mark("request_sent", t_sent or time.perf_counter_ns())
            elif name.endswith("receive_response_headers.complete"):
                # On HTTP/2 the read that carried this stream's HEADERS, which is not the
                # connection's last read when other streams share it.
                stamp = None if h2conn is None else h2conn.stamps.get(stream_id)
                t_ns = recorder.last_read_ns if stamp is None else stamp[0]
                tl.mark("ttfb", t_ns or time.perf_counter_ns())

        spec = self._spec
        target = request.path
        extra: list[tuple[str, str]] = []
        if spec.proxy is not None and spec.scheme == "http":
            # Through a proxy, a plain-http request names the whole URL (absolute form),
            # and only this request carries the proxy's credentials.
            target = f"http://{spec.authority}{request.path}"
            if spec.proxy.authorization is not None:
                extra.append(("proxy-authorization", spec.proxy.authorization))
        url = httpcore.URL(
            scheme=spec.scheme.encode(),
            host=spec.host.encode(),
            port=spec.port,
            target=target.encode(),
        )
        core_request = httpcore.Request(
            request.method,
            url,
            # Host first: httpcore's HTTP/2 takes the first one for :authority.
            headers=[
                ("host", request.authority(spec)),
                ("content-length", str(len(request.body))),
                *request.end_to_end_headers(),
                *extra,
            ],
            content=request.body,
            extensions={"trace": on_trace},
        )
        try:
            response = await self._conn.handle_async_request(core_request)
        except _FAILURES as err:
            raise _translate(err, tl, stream_id) from err
        self.last_stream_id = stream_id
        version = response.extensions.get("http_version", b"HTTP/1.1")
        head = ResponseHead(
            status=response.status,
            headers=tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers),
            http_version=version.decode() if isinstance(version, bytes) else str(version),
            t_ns=tl.milestones.get("ttfb") or time.perf_counter_ns(),
        )
        return head, _Body(response, recorder, tl, h2conn, stream_id, self.record_rtt)

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await self._conn.aclose()

    async def cancel_stream(self) -> bool:
        """Leave the last request by RST_STREAM CANCEL and keep the connection (HTTP/2
        only; False on HTTP/1.1, where leaving a request means closing the connection, and
        when the stream had ended already)."""
        if not isinstance(self._conn, StampedHTTP2Connection) or not self.last_stream_id:
            return False
        try:
            return await self._conn.reset(self.last_stream_id)
        except _FAILURES as err:
            raise _translate(err, self._recorder.timeline) from err

    async def abort(self) -> None:
        """Close with a TCP RST instead of a FIN (a zero linger time): how a killed
        process or a closed browser tab leaves, as against a client that ends a request."""
        sock = self.stream.raw.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if sock is not None and sock.fileno() >= 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await self.aclose()


class _Body:
    """The response body, piece by piece, each with the stamp of the read that carried it."""

    def __init__(
        self,
        response: httpcore.Response,
        recorder: Recorder,
        timeline: Timeline,
        h2conn: StampedHTTP2Connection | None = None,
        stream_id: int = 0,
        on_end: Callable[[Timeline], None] | None = None,
    ) -> None:
        self._response = response
        self._on_end = on_end
        self._chunks = response.aiter_stream().__aiter__()
        self._recorder = recorder
        self._timeline = timeline  # this stream's: a reset ends this request, not another
        self._stamps = None if h2conn is None else h2conn.stamps
        self._h2conn = h2conn
        self._stream_id = stream_id
        self._done = False

    def _stamp(self) -> tuple[int, int]:
        """The stamp of the read that carried what was just taken from the body."""
        if self._stamps is not None:
            stamp = self._stamps.get(self._stream_id)
            if stamp is not None:
                return stamp
        rec = self._recorder
        return rec.last_read_ns or time.perf_counter_ns(), rec.read_index

    def __aiter__(self) -> _Body:
        return self

    async def __anext__(self) -> BodyPiece:
        if self._done:
            raise StopAsyncIteration
        try:
            data = await self._chunks.__anext__()
        except StopAsyncIteration:
            # The read that carried the end (the last chunk, or EOF) is the body's end.
            self._done = True
            if self._on_end is not None:
                self._on_end(self._timeline)
            if self._h2conn is not None and self._h2conn.drain is not None:
                # The server drained the connection and let this stream finish: say so.
                note_goaway(self._timeline, goaway_record(self._h2conn.drain, self._stream_id))
            t_ns, index = self._stamp()
            return BodyPiece(data=b"", t_ns=t_ns, read_index=index, end=True)
        except _FAILURES as err:
            raise _translate(err, self._timeline, self._stream_id) from err
        # The stamp of the socket read that brought these bytes, not of this moment.
        t_ns, index = self._stamp()
        return BodyPiece(data=data, t_ns=t_ns, read_index=index)

    async def aclose(self) -> None:
        if self._on_end is not None:  # a body left early: the estimates all the same
            self._on_end(self._timeline)
        with anyio.CancelScope(shield=True):
            await self._response.aclose()
        if self._stamps is not None:
            self._stamps.pop(self._stream_id, None)


def note_goaway(timeline: Timeline, record: GoawayRecord) -> None:
    """The first GOAWAY this request's stream saw goes on its timeline."""
    if timeline.goaway is None:
        timeline.goaway = record


def _translate(err: BaseException, timeline: Timeline, stream_id: int = 0) -> TransportError:
    if isinstance(err, PeerEnded):
        # An HTTP/2 ending of the stream's own: how it closed goes on its timeline (the
        # connection's FIN, if one follows, is not what ended this request).
        if timeline.close is None:
            timeline.close = CloseRecord(kind=err.kind, t_ns=err.t_ns, code=err.code)
        if err.last_stream_id is not None:
            note_goaway(
                timeline,
                GoawayRecord(
                    t_ns=err.t_ns,
                    code=err.code,
                    last_stream_id=err.last_stream_id,
                    stream_id=err.stream_id or stream_id,
                ),
            )
        return TransportError(str(err))
    return TransportError(network_reason(err), protocol=isinstance(err, httpcore.ProtocolError))


def network_reason(err: BaseException) -> str:
    """httpcore's own text is often empty: the errno's words from the cause chain."""
    import os

    text = str(err).strip()
    cause: BaseException | None = err.__cause__ or err.__context__
    while not text and cause is not None:
        if isinstance(cause, OSError) and cause.errno:
            text = os.strerror(cause.errno)
        else:
            text = str(cause).strip()
        cause = cause.__cause__ or cause.__context__
    return text or type(err).__name__


__all__ = ["TCPConnection", "TCPTransport", "network_reason"]
