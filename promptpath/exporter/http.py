"""A small HTTP/1.1 server of our own: h11 (already here through httpcore) over anyio streams.

One task per connection; keep-alive, as Prometheus reuses its scrape connections. Every
request is bounded before the handler sees it: headers by h11's limit (16 KiB), a body by
``MAX_BODY`` (the exporter takes none worth more). A request h11 cannot parse gets a 400
and the connection closes; the handler's own failure a 500 (never a traceback on the wire).

No peer can hold the server's connections (``Limits``):

- time: a request (head and body) must arrive whole within ``request_s`` of the
  connection opening, or of its first byte on a kept-alive connection, which may wait
  ``idle_s`` for that byte; an answer must be taken within ``send_s``;
- room: at most ``connections`` open; when they are all taken, the one that has waited
  longest for a request (not one being answered) is closed to make room, as nginx reuses
  its idle keep-alive connections, so idle or trickling connections never lock a scraper
  out;
- one peer (an IPv4 address, an IPv6 /64) at most ``per_peer`` of them: past that its own
  longest-waiting one is closed, or, when all of its connections are being answered, the
  new one is.
"""

from __future__ import annotations

import contextlib
import ipaddress
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import h11

MAX_BODY = 64 * 1024
MAX_CONNECTIONS = 256
_READ = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """How long and how many: see the module's docstring."""

    #: The whole request, from the connection's opening or the request's first byte.
    request_s: float = 10.0
    #: A kept-alive connection's wait for its next request's first byte.
    idle_s: float = 60.0
    #: Writing one answer (a peer that does not read it holds no connection for longer).
    send_s: float = 30.0
    connections: int = MAX_CONNECTIONS
    #: Open connections of one peer (a quarter: one peer never holds them all).
    per_peer: int = MAX_CONNECTIONS // 4


#: Why the server closed a connection itself (the ``reason`` label).
CLOSE_REASONS = ("request_timeout", "idle_timeout", "send_timeout", "evicted", "peer_limit")


@dataclass(slots=True)
class ConnectionStats:
    """The server's connections: open now, and closed by the server, by reason."""

    open: int = 0
    closed: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-case names; the last of repeated ones
    body: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = field(default=())


Handler = Callable[[Request], Awaitable[Response]]


def text(status: int, message: str) -> Response:
    return Response(status=status, body=(message.rstrip("\n") + "\n").encode())


class _TooLarge(Exception):
    pass


async def _next_event(conn: h11.Connection, stream: anyio.abc.ByteStream) -> object:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(await _receive(stream))


async def _read_request(conn: h11.Connection, stream: anyio.abc.ByteStream) -> Request | None:
    event = await _next_event(conn, stream)
    if isinstance(event, h11.ConnectionClosed):
        return None
    if not isinstance(event, h11.Request):
        raise h11.RemoteProtocolError(f"unexpected {type(event).__name__}")
    body = bytearray()
    while True:
        part = await _next_event(conn, stream)
        if isinstance(part, h11.Data):
            body += part.data
            if len(body) > MAX_BODY:
                raise _TooLarge
        elif isinstance(part, h11.EndOfMessage):
            break
        else:
            return None
    target = event.target.decode("ascii", "replace")
    split = urlsplit(target)
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
    return Request(
        method=event.method.decode("ascii", "replace"),
        path=split.path,
        query=parse_qs(split.query, keep_blank_values=True),
        headers=headers,
        body=bytes(body),
    )


async def _send(
    conn: h11.Connection,
    stream: anyio.abc.ByteStream,
    response: Response,
    *,
    close: bool,
    head: bool = False,
) -> None:
    """The response; to a HEAD request its headers only (h11 refuses a body there)."""
    headers = [
        ("content-type", response.content_type),
        ("content-length", str(len(response.body))),
        *response.headers,
    ]
    if close:
        headers.append(("connection", "close"))
    data = conn.send(h11.Response(status_code=response.status, headers=headers))
    data = data or b""
    if not head:
        data += conn.send(h11.Data(data=response.body)) or b""
    data += conn.send(h11.EndOfMessage()) or b""
    await stream.send(data)


def peer_of(stream: anyio.abc.ByteStream) -> str:
    """Whom a connection counts against: its IPv4 address, or its IPv6 /64 (one host's
    share of addresses), an IPv4-mapped address as the IPv4 one."""
    try:
        address = stream.extra(anyio.abc.SocketAttribute.remote_address)
    except (anyio.TypedAttributeLookupError, OSError):
        return "?"
    host = address[0] if isinstance(address, tuple) else str(address)
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return str(host)
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass(slots=True, eq=False)
class _Connection:
    """One open connection, as the server sees it to choose which to close."""

    peer: str
    scope: anyio.CancelScope
    #: Since when it waits for (or reads) a request; None while one is answered.
    waiting_since: float | None
    evicted: bool = False


class Server:
    """Accepts connections on listeners and serves each with ``handler``."""

    def __init__(
        self,
        listeners: Sequence[anyio.abc.Listener[Any]],
        handler: Handler,
        limits: Limits | None = None,
    ):
        self.listeners = list(listeners)
        self.handler = handler
        self.limits = limits or Limits()
        self.stats = ConnectionStats()
        #: Set once stopping: each answer then closes its connection.
        self.closing = False
        self._open: list[_Connection] = []
        self._changed = anyio.Event()

    @property
    def busy(self) -> int:
        """Connections answering a request now."""
        return sum(1 for c in self._open if c.waiting_since is None)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def _count(self, peer: str | None) -> int:
        """Open connections (of ``peer``, or all), less those already told to close."""
        return sum(1 for c in self._open if not c.evicted and (peer is None or c.peer == peer))

    def _waiting(self, peer: str | None) -> list[_Connection]:
        return [
            c
            for c in self._open
            if c.waiting_since is not None and not c.evicted and (peer is None or c.peer == peer)
        ]

    def _evict(self, peer: str | None) -> bool:
        """Close the connection (of ``peer``, or any) that has waited longest for a request;
        False when every one is being answered."""
        waiting = self._waiting(peer)
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c.waiting_since or 0.0)
        oldest.evicted = True
        oldest.scope.cancel()
        self.stats.closed["evicted"] += 1
        return True

    async def _room(self) -> None:
        """Wait while every connection is taken and each is being answered (the kernel's
        backlog holds the next ones meanwhile, and no descriptor is spent on them)."""
        while self._count(None) >= self.limits.connections and not self._waiting(None):
            await self._changed.wait()

    async def _accept(self, listener: Any, tg: anyio.abc.TaskGroup) -> None:
        limits = self.limits
        try:
            while True:
                await self._room()
                stream = await listener.accept()
                peer = peer_of(stream)
                if self._count(peer) >= limits.per_peer and not self._evict(peer):
                    self.stats.closed["peer_limit"] += 1
                    with contextlib.suppress(Exception):
                        await anyio.aclose_forcefully(stream)
                    continue
                if self._count(None) >= limits.connections:
                    # Room for the new one: the longest waiting goes (none left since
                    # _room looked: this one is one over, and _room waits before the next).
                    self._evict(None)
                record = _Connection(
                    peer=peer, scope=anyio.CancelScope(), waiting_since=time.monotonic()
                )
                self._open.append(record)
                self.stats.open = len(self._open)
                tg.start_soon(self._one, stream, record)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def _one(self, stream: anyio.abc.ByteStream, record: _Connection) -> None:
        try:
            await self._serve(stream, record)
        except Exception:  # one connection's failure never ends the server
            pass
        finally:
            with contextlib.suppress(Exception):
                await anyio.aclose_forcefully(stream)
            self._open.remove(record)
            self.stats.open = len(self._open)
            self._notify()

    async def _serve(self, stream: anyio.abc.ByteStream, record: _Connection) -> None:
        """Requests on ``stream`` until the peer closes, a limit is reached, or ``closing``."""
        conn = h11.Connection(h11.SERVER)
        first = True
        while not record.evicted:
            record.waiting_since = time.monotonic()
            self._notify()  # one more connection that _room may close
            # Only the wait for a request may be cut to make room, never its answer.
            with anyio.CancelScope() as record.scope:
                request = await self._next_request(conn, stream, first=first)
            if record.scope.cancelled_caught or record.evicted or request is None:
                return
            first = False
            record.waiting_since = None
            try:
                response = await self.handler(request)
            except Exception as exc:  # a bug of ours: one line, no traceback on the wire
                response = text(500, f"internal error: {type(exc).__name__}")
            close = self.closing or conn.their_state is h11.MUST_CLOSE
            if not await self._answer(
                conn, stream, response, close=close, head=request.method == "HEAD"
            ):
                return
            if close or conn.our_state is h11.MUST_CLOSE:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return

    async def _next_request(
        self, conn: h11.Connection, stream: anyio.abc.ByteStream, *, first: bool
    ) -> Request | None:
        """The next request, within the limits; None when the connection is to close (the
        peer closed it, a limit ran out, or it was refused with 400 or 413)."""
        limits = self.limits
        if not first and not conn.trailing_data[0]:
            # Kept alive: wait for the next request's first byte...
            try:
                with anyio.fail_after(limits.idle_s):
                    data = await _receive(stream)
            except TimeoutError:
                self.stats.closed["idle_timeout"] += 1
                return None
            conn.receive_data(data)
        try:  # ...then the whole request.
            with anyio.fail_after(limits.request_s):
                return await _read_request(conn, stream)
        except TimeoutError:
            self.stats.closed["request_timeout"] += 1
        except _TooLarge:
            await self._answer(conn, stream, text(413, "request body too large"))
        except h11.RemoteProtocolError as exc:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                await self._answer(conn, stream, text(400, f"bad request: {exc}"))
        return None

    async def _answer(
        self,
        conn: h11.Connection,
        stream: anyio.abc.ByteStream,
        response: Response,
        *,
        close: bool = True,
        head: bool = False,
    ) -> bool:
        """Send ``response`` within the send limit; False when it could not be."""
        try:
            with anyio.fail_after(self.limits.send_s):
                await _send(conn, stream, response, close=close, head=head)
        except TimeoutError:
            self.stats.closed["send_timeout"] += 1
            return False
        except (
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
            h11.LocalProtocolError,
        ):
            return False  # the peer gave up and left: nothing to answer
        return True

    async def serve(self) -> None:
        """Accept until the listeners are closed, then serve the open connections out."""
        async with anyio.create_task_group() as tg:
            for listener in self.listeners:
                tg.start_soon(self._accept, listener, tg)

    def drain(self) -> None:
        """Keep accepting (a readiness check must get its 503), but close each connection
        after its answer."""
        self.closing = True

    async def stop_accepting(self) -> None:
        self.closing = True
        for listener in self.listeners:
            with contextlib.suppress(Exception):
                await listener.aclose()


async def _receive(stream: anyio.abc.ByteStream) -> bytes:
    try:
        return await stream.receive(_READ)
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        return b""


__all__ = [
    "CLOSE_REASONS",
    "ConnectionStats",
    "Handler",
    "Limits",
    "Request",
    "Response",
    "Server",
    "peer_of",
    "text",
]
