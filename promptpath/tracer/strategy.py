"""How a tracer's requests find their connection: a strategy passed to the one Tracer.

    fresh   every request opens its own connection (the previous one is closed first)
    reuse   one connection while the peer keeps it open; a new one when it did not
            (--warm, --count N --reuse)
    pool    K connections shared by concurrent streams (load mode: tracer/load.py)

The tracer resolves and connects through ``Connector.connect`` (the dns stage, then the
transport's own), sends and reads; the strategy only decides which connection a request
goes on and what the request's timeline learns from that (``reused_connection``, the
address and TLS details of the request that opened it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import anyio

from promptpath.core.timeline import Timeline
from promptpath.net.transport import Connection, Recorder, Transport


class Connector(Protocol):
    """What a strategy asks of the tracer: its transport, and a traced connect."""

    @property
    def transport(self) -> Transport: ...

    async def connect(self, timeline: Timeline, deadline: float, recorder: Recorder) -> Connection:
        """The dns stage, then the transport's connect (stamps go to ``recorder``)."""
        ...


class Lease(Protocol):
    """A connection lent to one request, given back when its response is done."""

    @property
    def connection(self) -> Connection: ...

    def release(self, timeline: Timeline) -> None:
        """The request on ``timeline`` is over (whatever became of it)."""
        ...


class ConnectionStrategy(Protocol):
    """Where each request goes; the tracer calls ``acquire`` inside its --timeout."""

    async def acquire(
        self, connector: Connector, timeline: Timeline, deadline: float, index: int | None
    ) -> Lease:
        """A connection for the request on ``timeline`` (``index``: its number in a
        series, for a strategy that places streams by it)."""
        ...

    @property
    def connection(self) -> Connection | None:
        """The connection the last request used, for a caller that goes on with it (the
        probes abort it or watch it idle); None when it is gone or there are many."""
        ...

    @property
    def recorder(self) -> Recorder | None:
        """Where that connection's stamps go (None: no request yet, or there are many)."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class _Held:
    """A lease with nothing to give back: the connection stays the strategy's."""

    connection: Connection

    def release(self, timeline: Timeline) -> None:
        return None


class OneConnection:
    """The fresh and the reuse strategies: one connection at a time.

    Every request gets its own Timeline; the one recorder is switched to it, so every
    stamp the transport takes lands on the request it belongs to. With ``reuse`` a
    request goes on the previous request's connection while the peer keeps it open
    (``reused_connection``, with that request's address and TLS details); without, or
    when the peer closed it, the connection is closed and a new one opened."""

    def __init__(self, *, reuse: bool = True) -> None:
        self.reuse = reuse
        self._connection: Connection | None = None
        self._recorder: Recorder | None = None
        self._first: Timeline | None = None

    @property
    def connection(self) -> Connection | None:
        return self._connection

    @property
    def recorder(self) -> Recorder | None:
        return self._recorder

    async def acquire(
        self, connector: Connector, timeline: Timeline, deadline: float, index: int | None
    ) -> Lease:
        if self._recorder is None:
            self._recorder = connector.transport.recorder(timeline)
        else:
            self._recorder.switch(timeline)
        conn, first = self._connection, self._first
        if self.reuse and conn is not None and conn.reusable and first is not None:
            timeline.reused_connection = True
            timeline.address, timeline.family, timeline.tls = first.address, first.family, first.tls
            return _Held(conn)
        await self.aclose()  # a connection the peer closed is not reused
        conn = self._connection = await connector.connect(timeline, deadline, self._recorder)
        self._first = timeline
        return _Held(conn)

    async def aclose(self) -> None:
        if self._connection is not None:
            with anyio.CancelScope(shield=True):
                await self._connection.aclose()
            self._connection = None


def fresh() -> OneConnection:
    """Every request on a connection of its own."""
    return OneConnection(reuse=False)


def reuse() -> OneConnection:
    """One connection for as long as the peer keeps it open."""
    return OneConnection(reuse=True)


__all__ = ["ConnectionStrategy", "Connector", "Lease", "OneConnection", "fresh", "reuse"]
