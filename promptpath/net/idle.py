"""Socket-level keep-alive idle watch: our own connection, no pool in between.

A connection pool hides the moment a peer closes an idle connection (it notices only on
reuse, if at all). Here we open one TCP (+TLS) connection, send one HTTP/1.1 request,
read the response to its end, and then keep reading the idle socket: the read that
returns EOF (FIN) or fails with ECONNRESET (RST) is stamped with ``perf_counter_ns``.
If nothing closes by the cap, one more request on the same connection tells whether it
is still alive or silently died in a middlebox.
"""

from __future__ import annotations

import dataclasses
import ssl
import time
from collections.abc import Callable
from typing import Literal

import anyio
import anyio.abc
import h11
from anyio.streams.tls import TLSStream

from promptpath.net import dns
from promptpath.net.wrapped import WrappedStream
from promptpath.options import RunOptions
from promptpath.probes.idle_measure import CloseKind, IdleWatch, ReuseOutcome
from promptpath.providers import prepare

#: How often the watch reports that the connection is still open.
PROGRESS_EVERY_S = 10.0
#: Bytes of idle-time data kept as text (an HTTP 408 status line, say).
IDLE_DATA_KEEP = 200


class _Closed(Exception):
    """The peer closed (FIN/close_notify) or reset the connection."""

    def __init__(self, kind: CloseKind, t_ns: int) -> None:
        super().__init__(kind)
        self.kind = kind
        self.t_ns = t_ns


class WatchedStream(WrappedStream):
    """The raw TCP stream, stamping each read and how (and when) the peer closed."""

    def __init__(self, inner: anyio.abc.SocketStream) -> None:
        super().__init__(inner)
        self.last_read_ns: int | None = None
        self.closed_ns: int | None = None
        self.close_kind: CloseKind | None = None

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            data = await self._inner.receive(max_bytes)
        except anyio.EndOfStream:
            self._close("fin")
            raise
        except (anyio.BrokenResourceError, ConnectionResetError):
            self._close("rst")  # anyio turns ECONNRESET into BrokenResourceError
            raise
        self.last_read_ns = time.perf_counter_ns()
        return data

    def _close(self, kind: CloseKind, t_ns: int | None = None) -> None:
        if self.closed_ns is None:
            self.closed_ns = time.perf_counter_ns() if t_ns is None else t_ns
            self.close_kind = kind


class _Conn:
    """One HTTP/1.1 connection driven by h11 over a watched (maybe TLS) stream."""

    def __init__(self, raw: WatchedStream, stream: anyio.abc.ByteStream) -> None:
        self.raw = raw
        self.stream = stream
        self.h11 = h11.Connection(our_role=h11.CLIENT)

    async def receive(self) -> bytes:
        """Bytes from the peer; raises ``_Closed`` when it closed or reset."""
        try:
            return await self.stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, ssl.SSLError, OSError) as exc:
            kind = self.raw.close_kind
            if kind is None:  # TLS saw close_notify (in the last read) before any FIN
                kind = "rst" if isinstance(exc, anyio.BrokenResourceError) else "close_notify"
                self.raw._close(kind, self.raw.last_read_ns)
            raise _Closed(kind, self.raw.closed_ns or time.perf_counter_ns()) from exc

    async def exchange(self, request: h11.Request, body: bytes) -> tuple[h11.Response, int]:
        """Send one request, read its response to the end; the stamp of the last read."""
        await self.stream.send(self.h11.send(request) or b"")
        await self.stream.send(self.h11.send(h11.Data(data=body)) or b"")
        await self.stream.send(self.h11.send(h11.EndOfMessage()) or b"")
        response: h11.Response | None = None
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                try:
                    data = await self.receive()
                except _Closed:
                    data = b""
                self.h11.receive_data(data)
                continue
            if isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.EndOfMessage):
                assert response is not None
                return response, self.raw.last_read_ns or time.perf_counter_ns()
            elif isinstance(event, h11.ConnectionClosed):
                raise _Closed(self.raw.close_kind or "fin", self.raw.closed_ns or 0)


def _header(response: h11.Response, name: str) -> str | None:
    wanted = name.encode()
    for key, value in response.headers:
        if key.lower() == wanted:
            return str(value.decode("latin-1"))
    return None


def priming_request(options: RunOptions, max_tokens: int) -> tuple[h11.Request, bytes]:
    """A small real request of the target's own kind (the path under test)."""
    small = dataclasses.replace(options, max_tokens=max_tokens, prompt="Say OK.")
    prepared = prepare(small)
    target = options.target
    host = f"[{target.host}]" if ":" in target.host else target.host
    default = 443 if target.scheme == "https" else 80
    authority = host if target.port == default else f"{host}:{target.port}"
    headers = [
        ("host", authority),
        ("content-length", str(len(prepared.body))),
        *prepared.headers,
    ]
    request = h11.Request(method=prepared.method, target=target.path, headers=headers)
    return request, prepared.body


async def _connect(options: RunOptions) -> tuple[_Conn, str]:
    target = options.target
    answer = await dns.resolve(
        target.host,
        target.port,
        family=options.family,
        override=options.resolve_override(target.host, target.port),
        resolver=options.resolver,
        timeout=min(options.timeout, 10.0),
    )
    ip = answer.addresses[0][0]
    sock = await anyio.connect_tcp(ip, target.port)
    raw = WatchedStream(sock)
    stream: anyio.abc.ByteStream = raw
    if target.scheme == "https":
        from promptpath.trace import ssl_context_for

        ctx = ssl_context_for(options)
        ctx.set_alpn_protocols(["http/1.1"])  # h11 speaks HTTP/1.1 only
        stream = await TLSStream.wrap(
            raw, hostname=target.host, ssl_context=ctx, standard_compatible=False
        )
    address = f"[{ip}]:{target.port}" if ":" in ip else f"{ip}:{target.port}"
    return _Conn(raw, stream), address


async def watch_idle(
    options: RunOptions,
    *,
    cap_s: float,
    request_timeout: float,
    progress: Callable[[str], None],
    max_tokens: int = 16,
) -> IdleWatch:
    """Complete one request, hold the connection idle up to ``cap_s``, say how it ended.

    Bounded by ``cap_s + 2 * request_timeout``: connecting and the priming exchange share
    one deadline, the re-use request (only when nothing closed) has another.
    """
    tls = options.target.scheme == "https"
    request, body = priming_request(options, max_tokens)
    conn: _Conn | None = None
    address = ""
    try:
        with anyio.fail_after(request_timeout):
            conn, address = await _connect(options)
            response, end_ns = await conn.exchange(request, body)
    except Exception as exc:  # no connection or no answer: reported, not raised
        what = f"timed out after {request_timeout:g} s" if isinstance(exc, TimeoutError) else exc
        stage = "connect" if conn is None else "the priming request"
        if conn is not None:
            with anyio.CancelScope(shield=True):
                await conn.stream.aclose()
        return IdleWatch(
            address=address,
            tls=tls,
            cap_s=cap_s,
            error=f"{stage} failed: {type(exc).__name__}: {what}",
        )
    try:
        watch = IdleWatch(
            address=address,
            tls=tls,
            cap_s=cap_s,
            status=response.status_code,
            response_end_ns=end_ns,
            connection_close=conn.h11.our_state is h11.MUST_CLOSE
            or conn.h11.their_state is h11.MUST_CLOSE,
            keep_alive_header=_header(response, "keep-alive"),
        )
        if watch.connection_close:
            return watch
        return await _idle(conn, watch, end_ns, request, body, request_timeout, progress)
    finally:
        with anyio.CancelScope(shield=True):
            await conn.stream.aclose()


async def _idle(
    conn: _Conn,
    watch: IdleWatch,
    end_ns: int,
    request: h11.Request,
    body: bytes,
    request_timeout: float,
    progress: Callable[[str], None],
) -> IdleWatch:
    deadline_ns = end_ns + int(watch.cap_s * 1e9)
    idle_bytes = b""
    next_report = PROGRESS_EVERY_S
    while True:
        now = time.perf_counter_ns()
        if now >= deadline_ns:
            break
        step = min((deadline_ns - now) / 1e9, PROGRESS_EVERY_S)
        with anyio.move_on_after(step):
            try:
                data = await conn.receive()
            except _Closed as closed:
                return dataclasses.replace(
                    watch,
                    closed_ns=closed.t_ns,
                    close_kind=closed.kind,
                    bytes_while_idle=len(idle_bytes),
                    idle_data=idle_bytes[:IDLE_DATA_KEEP].decode("latin-1"),
                )
            idle_bytes += data  # e.g. "HTTP/1.1 408 Request Timeout" before the close
            continue
        idle_s = (time.perf_counter_ns() - end_ns) / 1e9
        if idle_s >= next_report and idle_s < watch.cap_s:
            progress(f"idle-timeout: connection idle {idle_s:.0f} s of ≤ {watch.cap_s:g} s, open")
            next_report += PROGRESS_EVERY_S
    watch = dataclasses.replace(
        watch,
        bytes_while_idle=len(idle_bytes),
        idle_data=idle_bytes[:IDLE_DATA_KEEP].decode("latin-1"),
    )
    if idle_bytes:
        return dataclasses.replace(watch, reuse="error", reuse_detail="peer sent data while idle")
    progress(f"idle-timeout: still open after {watch.cap_s:g} s idle; one request to check it")
    return await _reuse(conn, watch, request, body, request_timeout)


async def _reuse(
    conn: _Conn, watch: IdleWatch, request: h11.Request, body: bytes, timeout: float
) -> IdleWatch:
    outcome: ReuseOutcome
    status: int | None = None
    detail = ""
    try:
        conn.h11.start_next_cycle()
        with anyio.fail_after(timeout):
            response, _ = await conn.exchange(request, body)
        outcome, status = "ok", response.status_code
    except TimeoutError:
        outcome, detail = "timeout", f"no answer within {timeout:g} s"
    except _Closed as closed:
        outcome = "reset" if closed.kind == "rst" else "closed"
        detail = f"peer {closed.kind}"
    except (anyio.BrokenResourceError, OSError) as exc:
        outcome, detail = "reset", f"{type(exc).__name__}: {exc}"
    except h11.ProtocolError as exc:
        outcome, detail = "error", f"HTTP/1.1 protocol error: {exc}"
    result: Literal["ok", "reset", "closed", "timeout", "error"] = outcome
    return dataclasses.replace(watch, reuse=result, reuse_status=status, reuse_detail=detail)
