"""The asyncio side of an HTTP/3 trace: one UDP socket pumped into a sans-IO QuicConnection.

``QuicTracer`` stamps every datagram with the moment it arrived (the kernel's receive
stamp on the ``perf_counter_ns`` clock, rxstamp.py; else when it is read),
counts what goes in and out, runs HTTP/3 on top once the handshake completes (never
before: no early data) and hands each request stream what its datagrams brought as
``Arrival`` records. It decides nothing about the response: quic.py and ingest.py do.

aioquic is imported inside the methods that use it, never at module level.
"""

from __future__ import annotations

import asyncio
import errno
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from promptpath.core.timeline import QuicStats, Timeline
from promptpath.net import aioquic_internals
from promptpath.net.dontfrag import path_mtu
from promptpath.net.rxstamp import enable_last_packet_stamp, last_packet_stamp, perf_ns_of
from promptpath.net.transport import Recorder

#: Wire version numbers we can name.
QUIC_VERSIONS = {0x00000001: "QUICv1", 0x6B3343CF: "QUICv2"}


def version_name(version: int | None) -> str | None:
    """``QUICv1``/``QUICv2`` for a wire version we know, its hex otherwise."""
    if version is None:
        return None
    return QUIC_VERSIONS.get(version, f"0x{version:08x}")


def h3_error_name(code: int) -> str:
    """An HTTP/3 error code as RFC 9114 section 8.1 names it: "H3_REQUEST_CANCELLED (0x10c)".

    The same words as HTTP/2's (net/http2.error_code_name), so a reset reads alike."""
    from aioquic.h3.connection import ErrorCode

    try:
        return f"{ErrorCode(code).name} (0x{code:x})"
    except ValueError:  # unknown codes are allowed (and reserved ones are greased)
        return f"unknown code 0x{code:x}"


# -- what one datagram brought --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Arrival:
    """Something that happened on one request stream, stamped with the datagram it came in."""

    t_ns: int
    read_index: int
    headers: list[tuple[bytes, bytes]] | None = None
    data: bytes = b""
    ended: bool = False
    broken: str | None = None  # the stream or connection died: why


@dataclass(slots=True)
class QuicRecorder(Recorder):
    """A Recorder that also counts datagrams (per timeline) and when the first one left."""

    stats: QuicStats = field(default_factory=QuicStats)
    first_sent_ns: int | None = None

    def __post_init__(self) -> None:
        self.reset_stats()

    def reset_stats(self) -> None:
        """Count afresh into the current timeline (a warm request has its own counts)."""
        self.stats = QuicStats(version=self.stats.version)
        self.timeline.quic = self.stats

    def switch(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.reset_stats()


class QuicTracer(asyncio.DatagramProtocol):
    """Pumps datagrams between a connected UDP socket and a QuicConnection, stamping each.

    Runs HTTP/3 on top once the handshake completes (never before: no early data).
    ``on_complete`` is called with this tracer the moment it does, inside the callback of
    the datagram that carried the server's Finished and before the transmit that sends
    ours: what it queues (the first request, once the certificate passed) leaves with our
    Finished, in the same transmit (quic_connect.Completion).
    """

    def __init__(
        self,
        quic: Any,
        recorder: QuicRecorder,
        on_complete: Callable[[QuicTracer], None] | None = None,
    ) -> None:
        self._quic = quic
        self._rec = recorder
        self._on_complete = on_complete
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.DatagramTransport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._streams: dict[int, asyncio.Queue[Arrival]] = {}
        self._unsent: dict[int, Timeline] = {}  # request streams whose last byte is not out yet
        self.h3: Any = None
        self.handshake: asyncio.Future[Any] = self._loop.create_future()
        # When the client's handshake was complete: the send of the datagram carrying its
        # Finished, after it processed the server's flight (not that flight's arrival).
        self.handshake_ns: int | None = None
        self._finished_unsent = False  # HandshakeCompleted seen, its Finished not yet out
        #: Client CPU on the datagrams that arrived before the handshake completed: from
        #: each one's callback to the end of its processing and of what it sent (the
        #: Finished's send, for the last one: ``on_complete``'s work comes before it), summed.
        self.flight_ns = 0
        self.terminated: Any = None  # aioquic ConnectionTerminated
        self.socket_error: OSError | None = None
        #: The path MTU the kernel held when the socket failed with EMSGSIZE (a datagram
        #: too big for the path: DF is set, net/dontfrag.py).
        self.path_mtu: int | None = None
        self._sock: Any = None
        self.server_versions: tuple[int, ...] | None = None  # from a Version Negotiation
        self._fd: int | None = None  # the socket, when the kernel keeps receive stamps

    @property
    def quic(self) -> Any:
        """The aioquic QuicConnection (read through net/aioquic_internals.py only)."""
        return self._quic

    # -- asyncio side ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        self._sock = sock
        if sock is not None and enable_last_packet_stamp(sock.fileno()):
            self._fd = sock.fileno()

    def datagram_received(self, data: bytes, addr: Any) -> None:
        # First thing: the arrival. The kernel's receive stamp of this datagram (asyncio
        # reads one per callback) mapped onto perf_counter, else now: a busy loop (the
        # previous datagram's processing, another process on the core) does not make it late.
        now = time.perf_counter_ns()
        rec = self._rec
        t_ns = now if self._fd is None else perf_ns_of(last_packet_stamp(self._fd), now)
        if rec.last_read_ns is not None and t_ns < rec.last_read_ns:
            t_ns = rec.last_read_ns  # never before the previous read's
        read_index = rec.read(t_ns, len(data))
        rec.stats.datagrams_in += 1
        rec.stats.bytes_in += len(data)
        if len(data) >= 5 and data[0] & 0x80:  # long header: the version is on the wire
            version = int.from_bytes(data[1:5], "big")
            if version == 0:
                self.server_versions = _vn_versions(data)
            else:
                rec.stats.version = version_name(version)
        in_handshake = self.handshake_ns is None
        try:
            self._quic.receive_datagram(data, addr, now=self._loop.time())
            self._process(t_ns, read_index)
            self.transmit()
        except Exception as exc:  # a bug below us must end the trace, not hang it
            self._fail(f"internal QUIC error: {exc!r}")
        if in_handshake:
            # From the callback, not the arrival: a datagram that waited in the socket
            # while another process had the core cost the client nothing.
            self.flight_ns += (self.handshake_ns or time.perf_counter_ns()) - now

    def error_received(self, exc: Exception) -> None:
        # An ICMP error on the connected socket (port unreachable: nothing listens on UDP;
        # EMSGSIZE: "fragmentation needed" came back, or the kernel already knows the path
        # MTU is below our datagrams).
        if isinstance(exc, OSError):
            self.socket_error = exc
            if exc.errno == errno.EMSGSIZE and self._sock is not None:
                self.path_mtu = path_mtu(self._sock)
        self._fail(f"socket error: {exc}")

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timer()
        self._fail("the UDP socket was closed")

    # -- QUIC side ---------------------------------------------------------------------
    def start(self, addr: Any) -> None:
        self._quic.connect(addr, now=self._loop.time())
        self.transmit()

    def transmit(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        rec = self._rec
        for data, _addr in self._quic.datagrams_to_send(now=self._loop.time()):
            # Stamped as the send begins, as over TCP (StampingStream.send).
            sent_ns = time.perf_counter_ns()
            if rec.first_sent_ns is None:
                rec.first_sent_ns = sent_ns
            if self._finished_unsent:  # aioquic puts the Handshake space's Finished first
                self._finished_unsent = False
                self.handshake_ns = sent_ns
            transport.sendto(data)  # a connected socket: the address is implied
            # The stamp before the hand-off, as over TCP (rxstamp.py): on loopback the
            # answer can arrive, kernel-stamped, before sendto() returns to us.
            rec.wrote(sent_ns, len(data))
            rec.stats.datagrams_out += 1
            rec.stats.bytes_out += len(data)
        for sid, tl in list(self._unsent.items()):
            if aioquic_internals.stream_fully_sent(self._quic, sid):
                tl.mark("request_sent", rec.last_write_ns or time.perf_counter_ns())
                del self._unsent[sid]
        timer_at = self._quic.get_timer()
        if self._timer is not None and self._timer_at != timer_at:
            self._cancel_timer()
        if self._timer is None and timer_at is not None:
            self._timer = self._loop.call_at(timer_at, self._on_timer)
        self._timer_at = timer_at

    def _on_timer(self) -> None:
        now = max(self._timer_at or 0.0, self._loop.time())
        self._timer = self._timer_at = None
        try:
            self._quic.handle_timer(now=now)
            self._process(time.perf_counter_ns(), -1)
            self.transmit()
        except Exception as exc:  # as in datagram_received: fail, never hang
            self._fail(f"internal QUIC error: {exc!r}")

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._timer_at = None

    def _process(self, t_ns: int, read_index: int) -> None:
        from aioquic.h3.connection import H3Connection
        from aioquic.h3.events import DataReceived, HeadersReceived
        from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted, StreamReset

        event = self._quic.next_event()
        while event is not None:
            if isinstance(event, HandshakeCompleted):
                self._finished_unsent = True  # transmit() stamps handshake_ns
                # HTTP/3 starts only now, so not even its SETTINGS can go out as early data.
                self.h3 = H3Connection(self._quic)
                if self._on_complete is not None:
                    # Before the transmit that follows: what it queues goes with our Finished.
                    self._on_complete(self)
                if not self.handshake.done():
                    self.handshake.set_result(event)
            elif isinstance(event, ConnectionTerminated):
                self.terminated = event
                self._rec.closed("quic_close", t_ns, code=event.error_code)
                reason = event.reason_phrase or "no reason given"
                self._fail(f"QUIC connection closed (error 0x{event.error_code:x}: {reason})")
            elif isinstance(event, StreamReset) and event.stream_id in self._streams:
                self._rec.closed("stream_reset", t_ns, code=event.error_code)
                self._streams[event.stream_id].put_nowait(
                    Arrival(
                        t_ns=t_ns,
                        read_index=read_index,
                        broken=f"the server sent RESET_STREAM {h3_error_name(event.error_code)}",
                    )
                )
            if self.h3 is not None:
                for h3_event in self.h3.handle_event(event):
                    queue = self._streams.get(getattr(h3_event, "stream_id", -1))
                    if queue is None:
                        continue
                    if isinstance(h3_event, HeadersReceived):
                        queue.put_nowait(
                            Arrival(
                                t_ns=t_ns,
                                read_index=read_index,
                                headers=list(h3_event.headers),
                                ended=h3_event.stream_ended,
                            )
                        )
                    elif isinstance(h3_event, DataReceived):
                        queue.put_nowait(
                            Arrival(
                                t_ns=t_ns,
                                read_index=read_index,
                                data=h3_event.data,
                                ended=h3_event.stream_ended,
                            )
                        )
            event = self._quic.next_event()

    def _fail(self, why: str) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(HandshakeFailed(why))
        t_ns = time.perf_counter_ns()
        for queue in self._streams.values():
            queue.put_nowait(Arrival(t_ns=t_ns, read_index=-1, broken=why))

    # -- requests ----------------------------------------------------------------------
    def send_request(
        self, headers: list[tuple[bytes, bytes]], body: bytes, timeline: Timeline
    ) -> asyncio.Queue[Arrival]:
        """Open a request stream, queue HEADERS and DATA, and send them."""
        queue = self.queue_request(headers, body, timeline)
        self.transmit()
        return queue

    def queue_request(
        self, headers: list[tuple[bytes, bytes]], body: bytes, timeline: Timeline
    ) -> asyncio.Queue[Arrival]:
        """Open a request stream and queue HEADERS and DATA (END_STREAM) for the next
        transmit, which stamps ``request_sent`` on ``timeline`` when their last byte is out."""
        stream_id = self._quic.get_next_available_stream_id()
        queue: asyncio.Queue[Arrival] = asyncio.Queue()
        self._streams[stream_id] = queue
        self._unsent[stream_id] = timeline
        self.h3.send_headers(stream_id, headers, end_stream=not body)
        if body:
            self.h3.send_data(stream_id, body, end_stream=True)
        return queue

    def drop(self) -> None:
        """Close the socket and send nothing: the peer learns of it only by its idle
        timeout, as of a killed process."""
        if self._transport is None:
            return
        self._cancel_timer()
        self._transport.close()

    def close(self, error_code: int = 0, reason: str = "") -> None:
        """Send CONNECTION_CLOSE (best effort) and close the socket."""
        if self._transport is None:
            return
        self._quic.close(error_code=error_code, reason_phrase=reason)
        self.transmit()
        self._cancel_timer()
        self._transport.close()


class HandshakeFailed(Exception):
    """The connection died before the handshake completed; the message says how."""


def _vn_versions(data: bytes) -> tuple[int, ...]:
    """Versions listed in a Version Negotiation packet (RFC 9000 §17.2.1)."""
    try:
        pos = 5
        pos += 1 + data[pos]  # destination connection ID
        pos += 1 + data[pos]  # source connection ID
    except IndexError:
        return ()
    return tuple(int.from_bytes(data[i : i + 4], "big") for i in range(pos, len(data) - 3, 4))
