"""The transport seam: what the tracer asks of every path to a server, and nothing more.

In the spirit of httpcore's Pool → Connection → Backend narrowing, one orchestrator
(``promptpath.tracer.orchestrator``) drives every protocol through two small interfaces::

    Transport.connect(spec, recorder) -> Connection        TCP (+TLS) or QUIC, stages stamped
    Connection.request(request, timeline) -> (ResponseHead, AsyncIterator[BodyPiece])
    Connection.reusable / .multiplexed / .abort() / .aclose()

A transport only stamps and pumps: it appends the stages it runs (connect, tls,
quic_handshake), every socket read and the close it saw to ``recorder.timeline``, and
hands each piece of the body over with the stamp of the read that carried it. It never
sees ``RunOptions``: no key, prompt or probe option reaches the socket layer except as
the request bytes themselves. Deciding what the response means (status, stream, verdicts)
is the orchestrator's job.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

from promptpath.core.timeline import CloseKind, CloseRecord, Family, Timeline
from promptpath.net.dns import is_ip_literal
from promptpath.net.schedwait import run_queue_ns


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyHop:
    """A forward proxy between us and the origin, as the socket layer needs it."""

    scheme: Literal["http", "https"]
    host: str
    port: int
    addresses: tuple[tuple[str, Family], ...]  # resolved (the proxy_dns stage)
    authorization: str | None = field(default=None, repr=False)  # Proxy-Authorization value
    ssl_context: ssl.SSLContext | None = None  # an https:// proxy's TLS

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectSpec:
    """Everything a transport needs to open one connection, and nothing else."""

    host: str  # the origin's name as in the URL: SNI (unless an IP literal), :authority
    port: int
    scheme: Literal["http", "https"]
    addresses: tuple[tuple[str, Family], ...]  # resolved, in the order to try them
    connect_host: str | None = None  # the host dialled instead (--connect-to): CONNECT names it
    connect_port: int | None = None  # the port to dial, when not ``port`` (--connect-to)
    alpn: tuple[str, ...] = ()  # protocols to offer, in order of preference
    ssl_context: ssl.SSLContext | None = None  # TCP+TLS only (QUIC verifies on its own)
    deadline: float | None = None  # time.monotonic() by which the whole trace must end
    proxy: ProxyHop | None = None  # connect through this forward proxy
    #: The first request on this connection, prepared before t0. A transport that can send
    #: it with its handshake's last flight does (QUIC: with our Finished, once the
    #: certificate passed), and ``Connection.request`` of this very object then only reads
    #: its response; the others ignore it. Not in the repr: its headers carry the key.
    first_request: WireRequest | None = field(default=None, repr=False)

    @property
    def dial_port(self) -> int:
        """The port the connection goes to (``port`` stays the origin's, for :authority)."""
        return self.port if self.connect_port is None else self.connect_port

    @property
    def sni(self) -> str | None:
        return None if is_ip_literal(self.host) else self.host

    @property
    def host_port(self) -> str:
        """``host:port`` of what is dialled, always with the port (CONNECT's target)."""
        name = self.connect_host or self.host
        host = f"[{name}]" if ":" in name else name
        return f"{host}:{self.dial_port}"

    @property
    def authority(self) -> str:
        """``host[:port]`` as the Host header / :authority carries it (port when not default)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class WireRequest:
    """The request as it goes on the wire (headers already final, body already encoded)."""

    method: str
    path: str  # path plus query
    headers: tuple[tuple[str, str], ...]
    body: bytes
    #: WebSocket: the text messages sent once the upgrade is answered with a 101 (the
    #: dialect's ``response.create``); the GET itself carries no body.
    messages: tuple[str, ...] = ()

    def authority(self, spec: ConnectSpec) -> str:
        """The Host / :authority this request names: a Host among its headers (-H Host,
        as curl applies it on every version), else the connection's own."""
        return next((v for n, v in self.headers if n.lower() == "host"), spec.authority)

    def end_to_end_headers(self) -> list[tuple[str, str]]:
        """Its headers without the ones each transport writes itself: Host (``authority``)
        and the body's framing, which only the transport may state (one Content-Length,
        never beside a Transfer-Encoding)."""
        return [(n, v) for n, v in self.headers if n.lower() not in _TRANSPORT_OWNED]


#: Request headers a transport writes from the request itself, never copied from it.
_TRANSPORT_OWNED = frozenset({"host", "content-length", "transfer-encoding"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseHead:
    """A final (non-1xx) response head, stamped with the read that completed it."""

    status: int
    headers: tuple[tuple[str, str], ...]
    http_version: str  # "HTTP/1.1", "HTTP/2", "HTTP/3"
    t_ns: int
    #: The answer to a WebSocket upgrade: a 101's body is whole messages, one per piece
    #: (text, UTF-8), any other status's body the refusal's bytes.
    websocket: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BodyPiece:
    """Response-body bytes with the stamp of the socket read (or datagram) that carried them.

    The last piece of a body that ended cleanly has ``end`` set (and usually no data): its
    stamp is the read that carried the end (the last chunk, the stream's FIN). After a
    WebSocket's 101 each piece is one whole message, stamped with the read that carried
    its last frame."""

    data: bytes
    t_ns: int
    read_index: int  # index into Timeline.reads, -1 when unknown
    end: bool = False


class Body(Protocol):
    """A response body as stamped pieces; ``aclose`` frees it whether or not it was read."""

    def __aiter__(self) -> AsyncIterator[BodyPiece]: ...

    async def __anext__(self) -> BodyPiece: ...

    async def aclose(self) -> None: ...


class TransportError(Exception):
    """The connection failed after it was established (reset, EOF, protocol violation).

    ``reason`` is in words a network engineer reads; ``protocol`` tells an HTTP framing
    error from a network one. Errors while connecting are PromptpathErrors already
    (ConnectError, TLSError): the transport knows which stage it was in.
    """

    def __init__(self, reason: str, *, protocol: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.protocol = protocol


class Connection(Protocol):
    """One established connection to the server."""

    async def request(
        self, request: WireRequest, timeline: Timeline | None = None
    ) -> tuple[ResponseHead, Body]:
        """Send ``request``; its milestones (request_sent, ttfb) go to ``timeline``, else
        the recorder's. Streams sharing a connection each pass their own."""
        ...

    @property
    def reusable(self) -> bool:
        """Whether another request may go on this connection now."""
        ...

    @property
    def multiplexed(self) -> bool:
        """Whether requests share it at once (HTTP/2, HTTP/3) or take turns (HTTP/1.1)."""
        ...

    async def abort(self) -> None:
        """Leave abruptly (TCP: an RST; QUIC: no CONNECTION_CLOSE), as a killed client does."""
        ...

    async def aclose(self) -> None:
        """Close it the polite way (FIN, close_notify, CONNECTION_CLOSE)."""
        ...


class Transport(Protocol):
    """Opens connections of one kind (TCP with HTTP/1.1 or HTTP/2, QUIC with HTTP/3)."""

    def recorder(self, timeline: Timeline) -> Recorder:
        """A recorder of the kind this transport stamps into."""
        ...

    async def connect(self, spec: ConnectSpec, recorder: Recorder) -> Connection: ...


@dataclass(slots=True)
class Recorder:
    """Where a transport's stamps go. Switched to a fresh Timeline for a warm request."""

    timeline: Timeline
    last_read_ns: int | None = None
    last_write_ns: int | None = None
    connects: int = 0  # connections opened through this recorder
    #: schedwait.run_queue_ns() at the last read or write.
    _run_queue_ns: int | None = field(default=None, init=False, repr=False)

    @property
    def read_index(self) -> int:
        """The last read's ordinal in the timeline (-1 before any)."""
        return self.timeline.read_count - 1

    def read(self, t_ns: int, nbytes: int) -> int:
        """One socket read (or datagram) returned at ``t_ns``; its ordinal in the timeline
        (kept up to core.timeline.MAX_KEPT_READS, counted past it), with how long our
        thread waited for a CPU since the read or write before it (schedwait.py)."""
        self.last_read_ns = t_ns
        waited = self._waited()
        tl = self.timeline
        if self._run_queue_ns is not None:
            tl.cpu_wait_ns = (tl.cpu_wait_ns or 0) + waited
        return tl.add_read(t_ns, nbytes, waited)

    def wrote(self, t_ns: int, nbytes: int) -> None:
        self.last_write_ns = t_ns
        self.timeline.bytes_written += nbytes
        self._waited()

    def _waited(self) -> int:
        """Our run-queue wait since the last call (0 the first time, or where unknown)."""
        now = run_queue_ns()
        before, self._run_queue_ns = self._run_queue_ns, now
        return 0 if now is None or before is None else max(0, now - before)

    def switch(self, timeline: Timeline) -> None:
        """Stamp into ``timeline`` from now on (a warm request on the same connection)."""
        self.timeline = timeline

    def closed(self, kind: CloseKind, t_ns: int | None = None, code: int | None = None) -> None:
        """The peer ended the connection (or the stream): the first word on how is kept."""
        if self.timeline.close is None:
            stamp = time.perf_counter_ns() if t_ns is None else t_ns
            self.timeline.close = CloseRecord(kind=kind, t_ns=stamp, code=code)


__all__ = [
    "Body",
    "BodyPiece",
    "ConnectSpec",
    "Connection",
    "ProxyHop",
    "Recorder",
    "ResponseHead",
    "Transport",
    "TransportError",
    "WireRequest",
]
