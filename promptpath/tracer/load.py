"""Load mode: ``count`` traced prompts with ``concurrency`` of them in flight at once.

How streams map to connections (README, "How load mode uses connections"):

- HTTP/2 (ALPN h2, or h2c with ``--http 2`` on http://) and HTTP/3: streams are
  multiplexed, ``connections`` connections (default 1), stream *i* on connection
  *i mod K* (round robin by start order). At most ``STREAMS_PER_CONNECTION`` streams
  share one connection at a time (httpcore's own SETTINGS_MAX_CONCURRENT_STREAMS, which
  is hypercorn's default too); a stream beyond that waits in ``queue``. aioquic runs
  many request streams on one QUIC connection, so HTTP/3 multiplexes as HTTP/2 does.
- HTTP/1.1: one connection per stream in flight, at most ``connections`` of them when
  that is given (default: as many as ``concurrency``). A stream that finds no free
  connection waits in ``queue``; a finished stream's connection is reused (keep-alive)
  by the next stream that takes it, which then has no dns/connect/tls stages.
- Over https with ``--http auto``/``2`` the protocol is what ALPN selects: the first
  stream's connection decides it, and the others wait (``queue``) for its handshake.

Every stream is one TraceResult with its own Timeline, run by the orchestrator's Tracer
(the same connect, request, body ingest and error mapper as a single run). The stream
that opened a connection carries its dns/connect/tls (or quic_handshake) stages; the
others on it are ``reused_connection`` with none. A wait for a connection is the stage
``queue``, from the stream's t0, so TTFT from start includes it; --timeout counts from
t0 too. Body pieces keep the stamp of the socket read that carried them (net/http.py
stamps HTTP/2 frames per read); a stream's ``reads`` are the connection's reads that
carried its bytes (whole reads: on a shared connection one read carries many streams).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from promptpath.core.errors import UsageError
from promptpath.core.timeline import Stage, Timeline
from promptpath.net.transport import (
    Body,
    BodyPiece,
    Connection,
    Recorder,
    ResponseHead,
    Transport,
    WireRequest,
)
from promptpath.options import RunOptions
from promptpath.result import TraceResult
from promptpath.tracer.orchestrator import Tracer
from promptpath.tracer.session import (
    Session,
    TransportFactory,
    gc_held,
    new_timeline,
    refusal,
    refused_result,
)
from promptpath.tracer.strategy import Connector, Lease

#: Streams one HTTP/2 or HTTP/3 connection carries at once: httpcore advertises 100 as its
#: SETTINGS_MAX_CONCURRENT_STREAMS (and blocks a 101st inside the request); hypercorn's
#: default limit is 100 too. Waiting for a slot here shows as ``queue``, not as request time.
STREAMS_PER_CONNECTION = 100


async def run_concurrent(
    options: RunOptions,
    *,
    count: int,
    concurrency: int,
    connections: int,
    on_run: Callable[[int, TraceResult], None],
    on_start: Callable[[int, TraceResult], None] | None = None,
    transport_factory: TransportFactory | None = None,
) -> list[TraceResult]:
    """Trace ``count`` prompts, ``concurrency`` in flight at once; results in start order.

    ``connections``: for HTTP/2 and HTTP/3 how many connections carry the streams (round
    robin); for HTTP/1.1 the most connections open at once. 0 or less: the protocol's
    default (1 for HTTP/2 and HTTP/3, ``concurrency`` for HTTP/1.1). ``on_run(index,
    result)`` is called as each stream finishes, ``on_start(index, result)`` as each begins
    (so a caller cancelled mid-run still holds the streams in flight)."""
    if count < 1 or concurrency < 1:
        raise UsageError("load mode needs count ≥ 1 and concurrency ≥ 1", kind="bad_option")
    refused = refusal(options)
    if refused is not None:  # each run's result says why, as trace() would
        refused_runs = [refused_result(options, refused) for _ in range(count)]
        for index, result in enumerate(refused_runs):
            on_run(index, result)
        return refused_runs
    session = Session(options, transport_factory=transport_factory)
    await session.prepare()
    pool = _Pool(options, session.transport, concurrency=concurrency, connections=connections)
    tracer = Tracer(options, session.transport, strategy=pool)
    # By index as they start: nothing here grows with ``count`` before a stream begins.
    results: dict[int, TraceResult] = {}
    next_index = iter(range(count))

    async def worker() -> None:
        for index in next_index:  # shared: each index is taken by exactly one worker
            result = results[index] = session.new_result(tracer.sent)
            if on_start is not None:
                on_start(index, result)
            await tracer.request(result.timeline, index=index)
            on_run(index, result)

    # As trace() does: a full collection inside a stream stalls every read in flight.
    with gc_held():
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(min(concurrency, count)):
                    tg.start_soon(worker)
        finally:
            await tracer.aclose()
    done = [results[i] for i in sorted(results)]
    session.finish(done)
    return done


class _Pool:
    """The connections of one load run, and which stream goes on which."""

    def __init__(
        self, options: RunOptions, transport: Transport, *, concurrency: int, connections: int
    ) -> None:
        self.options = options
        self.transport = transport
        self.concurrency = concurrency
        self.connections = connections
        self.lanes: list[_Lane] = []
        self.multiplexed = _known_multiplexing(options)
        self._decided = anyio.Event()  # set when the protocol is known (or the probe ended)
        self._probing = False
        self._free: deque[_Lane] = deque()  # HTTP/1.1: lanes no stream is using
        # HTTP/1.1: streams waiting for a lane, first come first served (a freed lane is
        # handed to the longest waiter, never to a stream that has just started).
        self._waiters: deque[tuple[anyio.Event, list[_Lane]]] = deque()
        self._started = 0  # streams placed without an index

    @property
    def connection(self) -> Connection | None:
        return None  # many: no single connection to go on with

    @property
    def recorder(self) -> Recorder | None:
        return None

    async def acquire(
        self, connector: Connector, timeline: Timeline, deadline: float, index: int | None
    ) -> Lease:
        """A lane for the stream on ``timeline``, and a connection on it; waits show as
        ``queue`` and count against the stream's --timeout (the tracer's)."""
        if index is None:  # round robin by start order all the same
            index, self._started = self._started, self._started + 1
        probe = False
        while self.multiplexed is None and self._probing:
            _queue(timeline)
            await self._decided.wait()
        if self.multiplexed is None:  # this stream's connection decides the protocol
            self._probing = probe = True
            lane = self._lane()
        elif self.multiplexed:
            lane = self._lane(index % self._multiplexed_lanes)
        else:
            lane = await self._exclusive(timeline)
        try:
            conn, slots, conn_timeline = await lane.acquire(connector, timeline, deadline)
        except BaseException:
            self._done(lane, probe)
            raise
        return _PoolLease(
            connection=_Shared(conn, conn_timeline, timeline),
            slots=slots,
            conn_timeline=conn_timeline,
            done=lambda: self._done(lane, probe),
        )

    def _done(self, lane: _Lane, probe: bool) -> None:
        if probe:
            self._probing = False
            self._wake_waiters()
        if self.multiplexed is False:
            self._release(lane)

    @property
    def _multiplexed_lanes(self) -> int:
        return max(1, self.connections)

    @property
    def _exclusive_lanes(self) -> int:
        return self.concurrency if self.connections < 1 else min(self.connections, self.concurrency)

    async def _exclusive(self, timeline: Timeline) -> _Lane:
        """A lane for this stream alone (HTTP/1.1): a free one, a new one, or the next one
        freed after those who waited longer."""
        if not self._waiters:
            if self._free:
                return self._free.popleft()
            if len(self.lanes) < self._exclusive_lanes:
                return self._lane()
        _queue(timeline)
        handed: list[_Lane] = []
        turn = anyio.Event()
        self._waiters.append((turn, handed))
        try:
            await turn.wait()
        except BaseException:  # --timeout ran out while queued
            if handed:  # the turn came as the wait was cancelled: pass the lane on
                self._release(handed.pop())
            else:
                self._waiters.remove((turn, handed))
            raise
        return handed[0]

    def _release(self, lane: _Lane) -> None:
        if self._waiters:
            turn, handed = self._waiters.popleft()
            handed.append(lane)
            turn.set()
        else:
            self._free.append(lane)

    def _lane(self, index: int | None = None) -> _Lane:
        """Lane ``index`` (made when first used), or a new one."""
        while index is None or index >= len(self.lanes):
            self.lanes.append(_Lane(self.transport, on_open=self._opened))
            if index is None:
                return self.lanes[-1]
        return self.lanes[index]

    def _opened(self, multiplexed: bool) -> None:
        if self.multiplexed is None:
            self.multiplexed = multiplexed
            self._wake_waiters()

    def _wake_waiters(self) -> None:
        decided, self._decided = self._decided, anyio.Event()
        decided.set()

    async def aclose(self) -> None:
        for lane in self.lanes:
            await lane.aclose()


def _known_multiplexing(options: RunOptions) -> bool | None:
    """Whether streams share connections, when the options decide it (None: ALPN will)."""
    if options.http == "3":
        return True
    if options.http == "1.1":
        return False
    if options.target.scheme == "http":
        return options.http == "2"  # h2c with prior knowledge; else HTTP/1.1
    return None


def _queue(timeline: Timeline) -> Stage:
    """The stream's open ``queue`` stage, begun now if it has none."""
    if timeline.stages and timeline.stages[-1].name == "queue":
        return timeline.stages[-1]
    return timeline.begin("queue", time.perf_counter_ns())


def _end_queue(timeline: Timeline) -> None:
    stage = timeline.stages[-1] if timeline.stages else None
    if stage is not None and stage.name == "queue" and stage.end_ns is None:
        stage.end_ns = time.perf_counter_ns()


@dataclass(frozen=True, slots=True, kw_only=True)
class _PoolLease:
    """A stream's place on a lane: its slot on the connection, given back at its end."""

    connection: Connection
    slots: anyio.Semaphore
    conn_timeline: Timeline
    done: Callable[[], None]

    def release(self, timeline: Timeline) -> None:
        self.slots.release()
        close = self.conn_timeline.close
        if timeline.close is None and close is not None and close.t_ns >= timeline.t0_ns:
            timeline.close = close
        self.done()


class _Lane:
    """One connection slot, with streams sharing its connection.

    Whoever finds no usable connection opens one (its timeline gets the dns/connect/tls
    stages); streams arriving meanwhile wait in ``queue``. Once open, the connection's
    stamps go to a timeline of its own, and each stream takes from it the reads that
    carried its bytes."""

    def __init__(self, transport: Transport, *, on_open: Callable[[bool], None]) -> None:
        self.transport = transport
        self._on_open = on_open
        self.connection: Connection | None = None
        self._first: Timeline | None = None
        self._opening: anyio.Event | None = None
        self._conn_timeline: Timeline | None = None
        self._slots = anyio.Semaphore(1)
        self._retired: list[Connection] = []  # replaced connections, closed at the end

    async def acquire(
        self, connector: Connector, timeline: Timeline, deadline: float
    ) -> tuple[Connection, anyio.Semaphore, Timeline]:
        while True:
            conn, slots, conn_timeline = self.connection, self._slots, self._conn_timeline
            if conn is not None and conn_timeline is not None and conn.reusable:
                if slots.value == 0:
                    _queue(timeline)
                await slots.acquire()
                if conn is not self.connection or not conn.reusable:
                    slots.release()  # it went away while we waited: look again
                    continue
                _end_queue(timeline)
                first = self._first
                timeline.reused_connection = True
                if first is not None:
                    timeline.address, timeline.family = first.address, first.family
                    timeline.tls = first.tls
                return conn, slots, conn_timeline
            if self._opening is not None:
                _queue(timeline)
                await self._opening.wait()
                continue
            _end_queue(timeline)
            return await self._open(connector, timeline, deadline)

    async def _open(
        self, connector: Connector, timeline: Timeline, deadline: float
    ) -> tuple[Connection, anyio.Semaphore, Timeline]:
        opening = self._opening = anyio.Event()
        try:
            if self.connection is not None:
                self._retired.append(self.connection)  # streams may still be on it
                self.connection = None
            # Each connection has its own recorder: its stamps go to the opening stream's
            # timeline while it connects, then to the connection's own.
            recorder = self.transport.recorder(timeline)
            conn = await connector.connect(timeline, deadline, recorder)
            multiplexed = conn.multiplexed
            conn_timeline = new_timeline()
            recorder.switch(conn_timeline)
            slots = anyio.Semaphore(STREAMS_PER_CONNECTION if multiplexed else 1)
            await slots.acquire()  # ours; free a moment ago, so no wait
            self.connection, self._slots = conn, slots
            self._first, self._conn_timeline = timeline, conn_timeline
        finally:
            self._opening = None
            opening.set()
        self._on_open(multiplexed)
        return conn, slots, conn_timeline

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for conn in self._retired:
                await conn.aclose()
            self._retired.clear()
            if self.connection is not None:
                await self.connection.aclose()
                self.connection = None


class _Shared:
    """A connection as one stream sees it: its pieces' read indexes point into the
    stream's own ``reads`` (the connection's reads that carried them are copied there)."""

    def __init__(self, conn: Connection, conn_timeline: Timeline, timeline: Timeline) -> None:
        self._conn = conn
        self._conn_timeline = conn_timeline
        self._timeline = timeline

    @property
    def reusable(self) -> bool:
        return self._conn.reusable

    @property
    def multiplexed(self) -> bool:
        return self._conn.multiplexed

    async def abort(self) -> None:
        await self._conn.abort()

    async def request(
        self, request: WireRequest, timeline: Timeline | None = None
    ) -> tuple[ResponseHead, Body]:
        head, body = await self._conn.request(request, timeline)
        return head, _SharedBody(body, self._conn_timeline, self._timeline)

    async def aclose(self) -> None:
        await self._conn.aclose()


class _SharedBody:
    """A body whose pieces index the stream's reads, not the connection's."""

    def __init__(self, body: Body, conn_timeline: Timeline, timeline: Timeline) -> None:
        self._body = body
        self._conn = conn_timeline
        self._timeline = timeline
        # The connection's read copied last and its ordinal in the stream's timeline: a
        # stream's pieces come in the order of the reads that carried them, so this one
        # pair is the whole mapping (a dict of every read grew with the stream).
        self._last = (-1, -1)

    def __aiter__(self) -> _SharedBody:
        return self

    async def __anext__(self) -> BodyPiece:
        piece = await self._body.__anext__()
        index = piece.read_index
        if index < 0:
            return piece
        copied, local = self._last
        if index > copied:
            read = self._conn.read_at(index)
            if read is None:
                # Past the connection's cap of kept reads: counted there, not kept. The
                # piece has its stamp; its own bytes are all of the read we know.
                local = self._timeline.add_read(piece.t_ns, len(piece.data))
            else:
                local = self._timeline.add_read(read.t_ns, read.nbytes)
            self._last = (index, local)
        elif index < copied:
            local = -1  # out of order (no transport does it): unknown, never a wrong read
        return BodyPiece(data=piece.data, t_ns=piece.t_ns, read_index=local, end=piece.end)

    async def aclose(self) -> None:
        await self._body.aclose()


__all__ = ["STREAMS_PER_CONNECTION", "run_concurrent"]
