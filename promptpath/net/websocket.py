"""WebSocket over TCP (+TLS): the upgrade, then messages, behind the transport seam.

    connect   dns is the tracer's; connect, tls and the proxy's stages are the TCP
              transport's own (``TCPTransport.open_stream``, ALPN http/1.1 only, a
              CONNECT tunnel through a proxy for ws:// too)
    request   the ``upgrade`` stage: the GET with ``Upgrade: websocket`` (request_sent)
              to the 101 (ttfb); then the request's messages (``response.create``) and
              a body of whole messages, each stamped with the read that carried its
              last frame. Any other answer than 101 comes back as a head and its body,
              for the tracer to judge (it redacts what it quotes).

The protocol is sans-IO (``net/ws_protocol.py``); this module only pumps bytes and
stamps. Optional in-band pings go out while the body is read, bounded in number.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

import anyio
import anyio.abc
import httpcore

from promptpath.core.errors import StreamError
from promptpath.core.timeline import Timeline, WebSocketInfo, WSPing
from promptpath.net.backend import TracedNetworkStream
from promptpath.net.http import TCPTransport, network_reason
from promptpath.net.transport import (
    BodyPiece,
    ConnectSpec,
    Recorder,
    ResponseHead,
    TransportError,
    WireRequest,
)
from promptpath.net.ws_protocol import (
    CloseReceived,
    MessageReceived,
    Messages,
    PongReceived,
    Upgrade,
    UpgradeFailed,
    WSItem,
    close_words,
    ping_number,
)

_READ = 65536
_FAILURES = (httpcore.NetworkError, httpcore.TimeoutException, OSError)
#: How long a polite close waits for the server's Close reply.
CLOSE_WAIT_S = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class WSSettings:
    """What the client offers and does beyond the request: a client shape's choices."""

    subprotocols: tuple[str, ...] = ()
    deflate: bool = False  # offer permessage-deflate (browsers and websockets do)
    ping_interval_s: float | None = None  # in-band pings while the body is read
    ping_max: int = 0  # at most this many


class WebSocketTransport:
    """Opens TCP (+TLS) connections and upgrades them to WebSocket."""

    def __init__(self, settings: WSSettings | None = None) -> None:
        self.settings = settings or WSSettings()
        self._tcp = TCPTransport()

    @staticmethod
    def recorder(timeline: Timeline) -> Recorder:
        return Recorder(timeline)

    async def connect(self, spec: ConnectSpec, recorder: Recorder) -> WebSocketConnection:
        # RFC 8441's WebSocket over HTTP/2 is not what these APIs speak: offer http/1.1 only.
        spec = replace(spec, alpn=("http/1.1",))
        stream = await self._tcp.open_stream(spec, recorder, tunnel=True)
        return WebSocketConnection(stream, spec, recorder, self.settings)


class WebSocketConnection:
    """One upgrade and its messages (one request per connection)."""

    def __init__(
        self,
        stream: TracedNetworkStream,
        spec: ConnectSpec,
        recorder: Recorder,
        settings: WSSettings,
    ) -> None:
        self.stream = stream
        self._spec = spec
        self._recorder = recorder
        self._settings = settings
        self._messages: Messages | None = None
        self._info: WebSocketInfo | None = None
        self._used = False
        self._closed = False

    @property
    def reusable(self) -> bool:
        return False

    @property
    def multiplexed(self) -> bool:
        return False

    async def request(
        self, request: WireRequest, timeline: Timeline | None = None
    ) -> tuple[ResponseHead, _MessageBody | _RefusalBody]:
        recorder = self._recorder
        tl = recorder.timeline if timeline is None else timeline
        self._used = True
        settings = self._settings
        upgrade = Upgrade(
            authority=request.authority(self._spec),
            target=request.path,
            headers=request.end_to_end_headers(),
            subprotocols=settings.subprotocols,
            deflate=settings.deflate,
        )
        info = self._info = tl.websocket = WebSocketInfo(
            subprotocols_offered=settings.subprotocols,
            extensions_offered=upgrade.offered_extensions,
        )
        data = upgrade.request()
        start = time.perf_counter_ns()
        tl.begin("upgrade", start)
        info.upgrade_start_ns = start
        try:
            await self.stream.write(data)
            tl.mark("request_sent", recorder.last_write_ns or time.perf_counter_ns())
            answer = None
            while answer is None:
                answer = upgrade.receive(await self.stream.read(_READ))
        except UpgradeFailed as exc:
            tl.end("upgrade", recorder.last_read_ns or time.perf_counter_ns(), ok=False)
            raise StreamError(
                f"WebSocket upgrade failed: {exc}", stage="upgrade", kind="upgrade_invalid"
            ) from exc
        except _FAILURES as err:
            raise TransportError(network_reason(err)) from err
        t_ns = recorder.last_read_ns or time.perf_counter_ns()
        index = recorder.read_index
        tl.end("upgrade", t_ns, ok=answer.accepted)
        tl.mark("ttfb", t_ns)
        head = ResponseHead(
            status=answer.status,
            headers=answer.headers,
            http_version=f"HTTP/{answer.http_version}",
            t_ns=t_ns,
            websocket=True,
        )
        if not answer.accepted:
            return head, _RefusalBody(self.stream, upgrade, recorder)
        info.upgraded_ns = t_ns
        info.subprotocol = answer.subprotocol
        info.extensions = answer.extensions
        messages = self._messages = Messages(upgrade.extensions())
        body = _MessageBody(self, messages, tl, info)
        if answer.trailing:  # frames in the 101's own read
            body.take(messages.feed(answer.trailing, t_ns, index))
        # Those frames may have closed it already (a refused frame): then only our Close goes.
        sending = request.messages if messages.open else ()
        out = b"".join(messages.send_text(m) for m in sending) + messages.outgoing()
        if out:
            try:
                await self.stream.write(out)
            except _FAILURES as err:
                raise TransportError(network_reason(err)) from err
        if sending:
            info.messages_sent = len(sending)
            info.sent_ns = recorder.last_write_ns or time.perf_counter_ns()
        return head, body

    @property
    def recorder(self) -> Recorder:
        return self._recorder

    def after(self, timeline: Timeline | None = None) -> _MessageBody:
        """The messages that come after a finished response on the same socket (it stays
        open between responses): what a probe watching a quiet WebSocket reads, its pings
        going out as the settings say, the close recorded as during a response."""
        if self._messages is None or self._info is None:
            raise RuntimeError("no upgraded WebSocket to read after")
        tl = self._recorder.timeline if timeline is None else timeline
        return _MessageBody(self, self._messages, tl, self._info)

    async def aclose(self) -> None:
        """Our Close (1000) and a short wait for the server's reply, then TCP's FIN."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            messages, info = self._messages, self._info
            if messages is not None and messages.open:
                try:
                    await self.stream.write(messages.close(1000))
                    if info is not None and info.close_by is None:
                        info.close_by, info.close_code = "client", 1000
                        info.close_ns = self._recorder.last_write_ns
                    with anyio.move_on_after(CLOSE_WAIT_S):
                        while True:
                            data = await self.stream.read(_READ)
                            items = messages.feed(data, 0, -1) if data else messages.eof(0)
                            if not data or any(isinstance(i, CloseReceived) for i in items):
                                break
                except _FAILURES:
                    pass
            with contextlib.suppress(*_FAILURES):
                await self.stream.aclose()

    async def abort(self) -> None:
        """Leave with a TCP RST and no Close frame, as a killed client does."""
        sock = self.stream.raw.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if sock is not None and sock.fileno() >= 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._closed = True
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(*_FAILURES):
                await self.stream.aclose()

    async def write(self, data: bytes) -> None:
        try:
            await self.stream.write(data)
        except _FAILURES as err:
            raise TransportError(network_reason(err)) from err


class _MessageBody:
    """The messages after the 101, each a BodyPiece; pings go out between reads.

    A close ends the body with a TransportError that says who closed and with which
    code: the tracer judges whether the stream had ended by then (its terminal marker)
    or was truncated."""

    def __init__(
        self,
        conn: WebSocketConnection,
        messages: Messages,
        timeline: Timeline,
        info: WebSocketInfo,
    ) -> None:
        self._conn = conn
        self._messages = messages
        self._timeline = timeline
        self._info = info
        self._ready: deque[BodyPiece | TransportError] = deque()
        self._done = False
        settings = conn._settings
        self._interval_ns = (
            None
            if settings.ping_interval_s is None or settings.ping_max <= 0
            else int(settings.ping_interval_s * 1e9)
        )
        self._ping_max = settings.ping_max
        self._next_ping_ns = time.perf_counter_ns() + (self._interval_ns or 0)

    def __aiter__(self) -> _MessageBody:
        return self

    def take(self, items: Sequence[WSItem]) -> None:
        """What the frames of one read completed, in order."""
        info = self._info
        for item in items:
            if isinstance(item, MessageReceived):
                info.messages += 1
                if item.frames > 1:
                    info.fragmented += 1
                if not item.text:
                    info.binary += 1  # no dialect sends binary: counted, not decoded
                    continue
                self._ready.append(
                    BodyPiece(data=item.data, t_ns=item.t_ns, read_index=item.read_index)
                )
            elif isinstance(item, PongReceived):
                self._pong(item)
            elif isinstance(item, CloseReceived):
                self._close(item)
        info.control_frames = self._messages.control_frames

    def _pong(self, item: PongReceived) -> None:
        number = ping_number(item.payload)
        pings = self._info.pings
        if number is not None and 0 <= number < len(pings) and pings[number].pong_ns is None:
            pings[number] = replace(pings[number], pong_ns=item.t_ns)

    def _close(self, item: CloseReceived) -> None:
        info = self._info
        if info.close_by is None:
            info.close_by = item.by
            info.close_code, info.close_reason = item.code, item.reason
            info.close_ns = item.t_ns
        self._done = True
        reason = f" ({item.reason})" if item.reason else ""
        if item.by == "server":
            what = f"the server closed the WebSocket with {close_words(item.code)}{reason}"
            self._ready.append(TransportError(what))
        elif item.by == "protocol":
            what = f"a frame broke the WebSocket protocol: {close_words(item.code)}{reason}"
            self._ready.append(TransportError(what, protocol=True))
        else:
            self._ready.append(
                TransportError("the connection ended without a WebSocket Close frame (1006)")
            )

    async def __anext__(self) -> BodyPiece:
        while True:
            if self._ready:
                piece = self._ready.popleft()
                if isinstance(piece, TransportError):
                    raise piece
                return piece
            if self._done:
                raise StopAsyncIteration
            await self._read_once()

    async def _read_once(self) -> None:
        conn, messages = self._conn, self._messages
        recorder = conn.recorder
        data: bytes | None = None
        try:
            if self._interval_ns is None or len(self._info.pings) >= self._ping_max:
                data = await conn.stream.read(_READ)
            else:
                wait_s = max(0.0, (self._next_ping_ns - time.perf_counter_ns()) / 1e9)
                with anyio.move_on_after(wait_s):
                    data = await conn.stream.read(_READ)
                if data is None:  # the ping is due: nothing arrived meanwhile
                    await self._ping()
                    return
        except _FAILURES as err:
            raise TransportError(network_reason(err)) from err
        if data:
            items = messages.feed(data, recorder.last_read_ns or 0, recorder.read_index)
        else:
            eof = conn.stream.raw.eof_ns
            items = messages.eof(eof or time.perf_counter_ns())
        self.take(items)
        out = messages.outgoing()
        if out:
            with contextlib.suppress(TransportError):  # the peer is gone: the close says how
                await conn.write(out)

    async def _ping(self) -> None:
        number = len(self._info.pings)
        await self._conn.write(self._messages.ping(number))
        sent = self._conn.recorder.last_write_ns or time.perf_counter_ns()
        self._info.pings.append(WSPing(sent_ns=sent))
        self._next_ping_ns = sent + (self._interval_ns or 0)

    async def aclose(self) -> None:
        self._done = True


class _RefusalBody:
    """The body of an answer other than 101: the refusal's bytes, as they come."""

    def __init__(self, stream: TracedNetworkStream, upgrade: Upgrade, recorder: Recorder) -> None:
        self._stream = stream
        self._upgrade = upgrade
        self._recorder = recorder
        self._started = False

    def __aiter__(self) -> _RefusalBody:
        return self

    async def __anext__(self) -> BodyPiece:
        up = self._upgrade
        if up.body_done:
            raise StopAsyncIteration
        # Whatever the head's read carried after it is parsed first (h11 buffers it).
        data = b"" if self._started else up.body()
        self._started = True
        while not data and not up.body_done:
            try:
                raw = await self._stream.read(_READ)
            except _FAILURES as err:
                raise TransportError(network_reason(err)) from err
            data = up.body(raw)
        rec = self._recorder
        return BodyPiece(
            data=data,
            t_ns=rec.last_read_ns or time.perf_counter_ns(),
            read_index=rec.read_index,
            end=up.body_done and not data,
        )

    async def aclose(self) -> None:
        return None


__all__ = ["WSSettings", "WebSocketConnection", "WebSocketTransport"]
