"""HTTP/2 on httpcore's connection class, read by one task per connection, stamped per read.

httpcore 1.0 lets the streams of a connection take turns reading it: a stream with
nothing queued takes the read lock and reads; the others wait in line for the lock, and
a stream whose frame has already arrived still waits its turn to find out. With a
hundred streams on one connection that convoy held reads back by hundreds of
milliseconds (measured: benchmarks/bench_load.py), so every stamp was late. Here one
reader task per connection reads as soon as the socket has data, hands each event to
its stream and wakes only that stream. The reader reads when the loop polls the socket;
between polls, each stream's turn takes what the socket holds, stamped (rxstamp.py's
``prefetch``), so packets of a burst do not merge in the kernel and share one stamp.

Each event carries the stamp of the socket read that brought it (``stamps``): a frame
can wait in its stream's queue while other streams are served, and the connection's
last read is then a later one. This overrides two private methods of httpcore's
``AsyncHTTP2Connection`` (httpcore's minor version is pinned in pyproject).

A GOAWAY(NO_ERROR) is a graceful shutdown (RFC 9113 section 6.8): the streams at or below
its last stream id go on to their end, the ones above it were never processed and fail
at once, naming the GOAWAY, and the connection takes no new stream. httpcore stops
reading at any GOAWAY and h2 closes its state machine (net/h2_internals.py), so the
graceful one is kept from both (``drain``). A GOAWAY with an error code ends every
stream, as httpcore has it.
"""

from __future__ import annotations

import asyncio
import time

import anyio
import h2.errors
import h2.events
import h2.exceptions
import httpcore

from promptpath.core.timeline import CloseKind, GoawayRecord
from promptpath.net.backend import TracedNetworkStream
from promptpath.net.h2_internals import keep_open_on_graceful_goaway
from promptpath.net.transport import Recorder

#: The attribute an h2 event carries its socket read's stamp in: (t_ns, read index).
_STAMP = "_promptpath_stamp"

#: How a connection's end reaches the reader: the peer's FIN or RST.
_ENDED = (httpcore.RemoteProtocolError, httpcore.ReadError)

_StreamEvent = h2.events.ResponseReceived | h2.events.DataReceived | h2.events.StreamEnded


def error_code_name(code: int) -> str:
    """An HTTP/2 error code as RFC 9113 section 7 names it, with its number: "CANCEL (8)"."""
    try:
        return f"{h2.errors.ErrorCodes(code).name} ({code})"
    except ValueError:  # codes outside the registry are allowed, and mean INTERNAL_ERROR
        return f"unknown code 0x{code:x} ({code})"


class PeerEnded(httpcore.RemoteProtocolError):
    """The server ended a stream by RST_STREAM, or the connection by GOAWAY, in words.

    httpcore raises these with the h2 event as the argument, whose repr reached users;
    this one carries the close as the timeline records it (kind, stamp, code)."""

    def __init__(
        self,
        kind: CloseKind,
        message: str,
        code: int,
        t_ns: int,
        last_stream_id: int | None = None,
        stream_id: int = 0,
    ) -> None:
        super().__init__(message)
        self.kind: CloseKind = kind
        self.code = code
        self.t_ns = t_ns
        self.last_stream_id = last_stream_id  # a GOAWAY's
        self.stream_id = stream_id  # the request's stream, when known

    @classmethod
    def reset(cls, event: h2.events.StreamReset) -> PeerEnded:
        code = int(event.error_code or 0)
        stamp = getattr(event, _STAMP, (time.perf_counter_ns(), -1))[0]
        return cls(
            "stream_reset",
            f"the server sent RST_STREAM {error_code_name(code)}",
            code,
            stamp,
        )

    @classmethod
    def goaway(
        cls, event: h2.events.ConnectionTerminated, why: str = "", stream_id: int = 0
    ) -> PeerEnded:
        """``why`` follows the GOAWAY's words: what it meant for this stream."""
        code = int(event.error_code or 0)
        last = int(event.last_stream_id or 0)
        stamp = getattr(event, _STAMP, (time.perf_counter_ns(), -1))[0]
        detail = f"GOAWAY {error_code_name(code)}, last stream {last}"
        if event.additional_data:
            # Debug data from the peer: untrusted, shown escaped and short.
            text = event.additional_data[:80].decode("ascii", "backslashreplace")
            detail += f", debug data {text!r}"
        message = f"the server sent {detail}{why}"
        return cls("goaway", message, code, stamp, last_stream_id=last, stream_id=stream_id)


def _graceful(event: h2.events.Event) -> bool:
    """A GOAWAY(NO_ERROR): the server shuts down and lets the streams it took finish."""
    return isinstance(event, h2.events.ConnectionTerminated) and int(event.error_code or 0) == 0


def goaway_record(event: h2.events.ConnectionTerminated, stream_id: int) -> GoawayRecord:
    """A GOAWAY as the timeline keeps it, for the request on ``stream_id``."""
    return GoawayRecord(
        t_ns=getattr(event, _STAMP, (time.perf_counter_ns(), -1))[0],
        code=int(event.error_code or 0),
        last_stream_id=int(event.last_stream_id or 0),
        stream_id=stream_id,
    )


_warm = False


def warm_up() -> None:
    """Run h2 once, with no socket, before a trace's t0: a process's first connection
    state and header block cost ~0.5 ms more than later ones (HPACK's and the state
    machine's first calls; measured 0.9 ms against 0.35), which the request stage would
    otherwise carry."""
    global _warm
    if _warm:
        return
    _warm = True
    import h2.config
    import h2.connection

    conn = h2.connection.H2Connection(h2.config.H2Configuration(validate_inbound_headers=False))
    conn.initiate_connection()
    headers = [(b":method", b"POST"), (b":authority", b"warm.invalid"), (b":scheme", b"https")]
    conn.send_headers(1, [*headers, (b":path", b"/"), (b"content-type", b"application/json")])
    conn.send_data(1, b"{}", end_stream=True)
    conn.data_to_send()


class _StreamSlots:
    """What httpcore's AsyncSemaphore is to its HTTP/2 connection (``acquire``, ``release``,
    both awaited), made with ``free`` of its ``bound`` slots free instead of reaching that
    by ``bound - free`` awaits."""

    def __init__(self, bound: int, *, free: int) -> None:
        self._slots = anyio.Semaphore(free, max_value=bound)

    async def acquire(self) -> None:
        await self._slots.acquire()

    async def release(self) -> None:
        self._slots.release()


class StampedHTTP2Connection(httpcore.AsyncHTTP2Connection):
    """httpcore's HTTP/2 connection, read by one task, each event stamped with its read."""

    def __init__(
        self, origin: httpcore.Origin, stream: httpcore.AsyncNetworkStream, recorder: Recorder
    ) -> None:
        super().__init__(origin=origin, stream=stream)
        self._recorder = recorder
        #: The last GOAWAY(NO_ERROR) the server sent, stamped: it is draining this
        #: connection. Streams at or below its last stream id go on.
        self.drain: h2.events.ConnectionTerminated | None = None
        #: Per stream id, the stamp of the last event its response took.
        self.stamps: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._reader_error: BaseException | None = None
        self._waiting: dict[int, anyio.Event] = {}  # streams waiting for their next event
        self._touched: set[int] = set()  # streams the last read brought events for
        # The socket's bytes taken, stamped, on every stream's turn (see _receive_stream_event).
        self._prefetch = stream.raw.prefetch if isinstance(stream, TracedNetworkStream) else None
        #: Per stream id, the stamp of the write that carried its END_STREAM: the request
        #: sent. Not the connection's last write when streams share it: the stream's task may
        #: resume after other streams' writes (seen in load mode: 40 of 120 streams read a
        #: negative wait, their request_sent stamped after their response's HEADERS).
        self.sent_ns: dict[int, int] = {}
        self._takes = 0  # how many times h2's outgoing bytes were taken to be written
        self._ending: dict[int, int] = {}  # stream id -> takes before its END_STREAM queued
        h2_state = self._h2_state
        take = h2_state.data_to_send

        def counted_take(amount: int | None = None) -> bytes:
            data = take(amount)
            if data:
                self._takes += 1
            return data

        h2_state.data_to_send = counted_take  # type: ignore[method-assign]
        keep_open_on_graceful_goaway(h2_state)

    async def _read_incoming_data(self, request: httpcore.Request) -> list[h2.events.Event]:
        events = await super()._read_incoming_data(request)
        rec = self._recorder
        stamp = (rec.last_read_ns or time.perf_counter_ns(), rec.read_index)
        touched = self._touched
        for event in events:
            setattr(event, _STAMP, stamp)
            touched.add(getattr(event, "stream_id", 0))
        if any(_graceful(event) for event in events):
            events = [event for event in events if not self._drained_by(event)]
        return events

    def _drained_by(self, event: h2.events.Event) -> bool:
        """True for a GOAWAY(NO_ERROR), kept as ``drain`` and from httpcore (which would
        end every stream at it); the streams it refused are woken to fail."""
        if not _graceful(event):
            return False
        assert isinstance(event, h2.events.ConnectionTerminated)
        self.drain = event
        # The first word on how the server ends the connection: a FIN follows the drain.
        self._recorder.closed("goaway", getattr(event, _STAMP)[0], 0)
        last = int(event.last_stream_id or 0)
        self._touched.update(sid for sid in self._events if sid > last)
        return True

    def _refusal(self, stream_id: int) -> PeerEnded | None:
        """The error for a stream the server's graceful GOAWAY left unprocessed, if it did."""
        drain = self.drain
        if drain is None or stream_id <= int(drain.last_stream_id or 0):
            return None
        why = f": stream {stream_id} was not processed (it can be retried on a new connection)"
        return PeerEnded.goaway(drain, why, stream_id)

    def is_available(self) -> bool:
        # A draining connection takes no new stream (RFC 9113 section 6.8).
        return self.drain is None and super().is_available()

    async def _receive_stream_event(
        self, request: httpcore.Request, stream_id: int
    ) -> _StreamEvent:
        # The reader reads when the loop polls the socket, after every task ready then has
        # run: with a hundred streams woken by one read, packets arriving meanwhile merge in
        # the kernel's queue and share the last one's stamp. Each stream's turn takes them
        # now, stamped, for the reader (one recvmsg, nothing when there is nothing).
        if self._prefetch is not None:
            self._prefetch()
        queued = self._events.get(stream_id)
        while not queued:
            refused = self._refusal(stream_id)
            if refused is not None:
                raise refused
            if self._reader_error is not None:
                raise self._reader_error
            if self._reader is None:
                self._reader = asyncio.get_running_loop().create_task(self._read_all(request))
            waiter = self._waiting[stream_id] = anyio.Event()
            try:
                await waiter.wait()
            finally:
                self._waiting.pop(stream_id, None)
            queued = self._events.get(stream_id)
        event = queued.pop(0)
        self.stamps[stream_id] = getattr(event, _STAMP)
        if isinstance(event, h2.events.StreamReset):
            raise PeerEnded.reset(event)
        return event

    async def _read_all(self, request: httpcore.Request) -> None:
        """Read until the connection ends, waking each stream its frames were for."""
        waiting, touched = self._waiting, self._touched
        try:
            while True:
                await self._receive_events(request)
                for stream_id in touched:
                    waiter = waiting.get(stream_id)
                    if waiter is not None:
                        waiter.set()
                touched.clear()
        except BaseException as exc:  # the streams still waiting raise it
            closed = not isinstance(exc, Exception)  # cancelled: aclose() ended the reading
            goaway = self._connection_terminated
            if closed:
                self._reader_error = httpcore.ReadError("connection closed")
            elif goaway is not None and isinstance(exc, httpcore.RemoteProtocolError):
                # httpcore stops reading at a GOAWAY and raises it as a bare event: say it.
                self._reader_error = PeerEnded.goaway(goaway)
            elif self.drain is not None and isinstance(exc, _ENDED):
                # Drained, and the connection ended before the streams still open did
                # (seen by hand: hypercorn 0.18 on SIGTERM sends GOAWAY(NO_ERROR, last
                # stream 1), then closes mid-stream).
                why = ", then closed mid-stream"
                self._reader_error = PeerEnded.goaway(self.drain, why)
            else:
                self._reader_error = exc
            for waiter in waiting.values():
                waiter.set()
            if closed:
                raise

    # -- the first request: no 99 turns of the event loop --------------------------------
    # httpcore's first request on a connection sends the preface, then takes its stream
    # semaphore from the 100 streams we advertise down to 1 (until the server's SETTINGS
    # say more) with 99 awaits of anyio's Semaphore.acquire, each a turn of the event loop
    # with a shielded cancel scope: ~100 loop turns inside the request stage (measured:
    # sys.setprofile between tls_done and request_sent), milliseconds of our own CPU on a
    # loaded machine where curl writes its request at once. The same state, made at once:
    # the init sent, the flag set, a semaphore with 1 of its slots free. httpcore's own
    # block is then skipped (it runs only while ``_sent_connection_init`` is false).
    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if self.drain is not None:
            why = ": the connection takes no new stream"
            raise PeerEnded.goaway(self.drain, why)
        if not self._sent_connection_init:
            async with self._init_lock:
                if not self._sent_connection_init:
                    try:
                        await self._send_connection_init(request)
                    except BaseException:
                        with anyio.CancelScope(shield=True):
                            await self.aclose()
                        raise
                    self._sent_connection_init = True
                    self._max_streams = 1
                    bound = self._h2_state.local_settings.max_concurrent_streams
                    # httpcore types it as its AsyncSemaphore; it only awaits the two.
                    self._max_streams_semaphore = _StreamSlots(  # type: ignore[assignment]
                        bound, free=self._max_streams
                    )
        return await super().handle_async_request(request)

    # -- the request in one write --------------------------------------------------------
    # httpcore writes after each step: the preface with SETTINGS, the HEADERS, each DATA
    # frame, the END_STREAM: four TLS records and four sends for one small request, each
    # waking the server (on a loaded 2-core machine, a context switch apiece: the request
    # stage read 14-22 ms on the wire where curl's took 4.5-7.7, bench_capture.py --http 2).
    # Held here, they leave in one write once the body is queued. RFC 9113 §3.4 lets a
    # client send its first request right after the preface, without waiting for the
    # server's SETTINGS. A body larger than the flow-control window flushes what is held
    # first: the server cannot open the window for data it has not seen.
    _held = False

    async def _send_connection_init(self, request: httpcore.Request) -> None:
        self._held = True
        await super()._send_connection_init(request)

    async def _send_request_headers(self, request: httpcore.Request, stream_id: int) -> None:
        self._held = True  # a warm request's HEADERS and DATA too
        await super()._send_request_headers(request, stream_id)

    async def _send_end_stream(self, request: httpcore.Request, stream_id: int) -> None:
        # h2 queues the END_STREAM synchronously at the start of super()'s call: the first
        # take after this count carries it, whichever stream's task makes that write.
        self._ending[stream_id] = self._takes
        await super()._send_end_stream(request, stream_id)

    def _note_written(self) -> None:
        """After a write (under the write lock, the last take its own): stamp the streams
        whose END_STREAM it carried."""
        takes, stamp = self._takes, self._recorder.last_write_ns
        if stamp is None:
            return
        for stream_id, before in list(self._ending.items()):
            if takes > before:
                self.sent_ns[stream_id] = stamp
                del self._ending[stream_id]

    async def _send_request_body(self, request: httpcore.Request, stream_id: int) -> None:
        try:
            await super()._send_request_body(request, stream_id)
        finally:
            await self._flush(request)

    async def _wait_for_outgoing_flow(self, request: httpcore.Request, stream_id: int) -> int:
        if self._held and self._h2_state.local_flow_control_window(stream_id) <= 0:
            await self._flush(request)
        return await super()._wait_for_outgoing_flow(request, stream_id)

    async def _flush(self, request: httpcore.Request) -> None:
        if self._held:
            self._held = False
            await self._write_outgoing_data(request)

    async def _write_outgoing_data(self, request: httpcore.Request) -> None:
        if self._held:
            return  # the bytes stay in h2's buffer until _flush
        # Called after every DATA frame a stream takes, mostly with nothing to send; the
        # write lock it takes yields to the event loop each time (a tenth of the client's
        # CPU with 500 streams, profiled). h2 4.x keeps the bytes it has not handed over
        # in ``_data_to_send``; without that attribute, always write.
        if not getattr(self._h2_state, "_data_to_send", True):
            return
        await super()._write_outgoing_data(request)
        self._note_written()  # no await since super() released the lock: no write between

    async def reset(self, stream_id: int, code: int = h2.errors.ErrorCodes.CANCEL) -> bool:
        """Leave one stream by RST_STREAM, the connection kept open: how a browser's fetch
        abort leaves (RFC 9113 section 8.1). httpcore sends nothing when a response is
        closed early (its ``_response_closed`` only forgets the stream), so the frame is
        written here, under httpcore's write lock. False when the stream had ended."""
        async with self._write_lock:
            try:
                self._h2_state.reset_stream(stream_id, error_code=code)
            except h2.exceptions.StreamClosedError:
                return False  # it ended already: nothing left to leave
            await self._network_stream.write(self._h2_state.data_to_send())
            self._note_written()
        return True

    async def aclose(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None and not reader.done():
            reader.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([reader])
        await super().aclose()


__all__ = ["PeerEnded", "StampedHTTP2Connection", "error_code_name", "goaway_record", "warm_up"]
