"""A small HTTP/1.1 server of our own: h11 (already here through httpcore) over anyio streams.

One task per connection; keep-alive, as Prometheus reuses its scrape connections. Every
request is bounded before the handler sees it: headers by h11's limit (16 KiB), a body by
``MAX_BODY`` (the exporter takes none worth more), the wait for a request by
``IDLE_TIMEOUT_S``, connections by ``MAX_CONNECTIONS``. A request h11 cannot parse gets a
400 and the connection closes; the handler's own failure a 500 (never a traceback on the
wire).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import h11

MAX_BODY = 64 * 1024
IDLE_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 256
_READ = 64 * 1024


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
        try:
            data = await stream.receive(_READ)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            data = b""
        conn.receive_data(data)


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


async def serve_connection(
    stream: anyio.abc.ByteStream, handler: Handler, *, closing: Callable[[], bool]
) -> None:
    """Requests on ``stream`` until the peer closes, it idles too long, or ``closing()``."""
    conn = h11.Connection(h11.SERVER)
    async with stream:
        while True:
            try:
                with anyio.fail_after(IDLE_TIMEOUT_S):
                    request = await _read_request(conn, stream)
            except TimeoutError:
                return
            except _TooLarge:
                with contextlib.suppress(Exception):
                    await _send(conn, stream, text(413, "request body too large"), close=True)
                return
            except h11.RemoteProtocolError as exc:
                with contextlib.suppress(Exception):
                    if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                        await _send(conn, stream, text(400, f"bad request: {exc}"), close=True)
                return
            if request is None:
                return
            try:
                response = await handler(request)
            except Exception as exc:  # a bug of ours: one line, no traceback on the wire
                response = text(500, f"internal error: {type(exc).__name__}")
            close = closing() or conn.their_state is h11.MUST_CLOSE
            try:
                await _send(conn, stream, response, close=close, head=request.method == "HEAD")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                return  # the scraper gave up and left: nothing to answer
            if close or conn.our_state is h11.MUST_CLOSE:
                return
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                return


class Server:
    """Accepts connections on listeners and serves each with ``handler``."""

    def __init__(self, listeners: Sequence[anyio.abc.Listener[Any]], handler: Handler):
        self.listeners = list(listeners)
        self.handler = handler
        self.connections = 0
        self.closing = False
        self._slots = anyio.Semaphore(MAX_CONNECTIONS)

    async def _one(self, stream: anyio.abc.ByteStream) -> None:
        self.connections += 1
        try:
            await serve_connection(stream, self.handler, closing=lambda: self.closing)
        except Exception:  # one connection's failure never ends the server
            with contextlib.suppress(Exception):
                await stream.aclose()
        finally:
            self.connections -= 1
            self._slots.release()

    async def _accept(self, listener: Any, tg: anyio.abc.TaskGroup) -> None:
        """Accept while fewer than MAX_CONNECTIONS are open: past it the kernel's backlog
        holds the next ones, and no descriptor is spent on them."""
        try:
            while True:
                await self._slots.acquire()
                try:
                    stream = await listener.accept()
                except BaseException:
                    self._slots.release()
                    raise
                tg.start_soon(self._one, stream)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    async def serve(self) -> None:
        """Accept until the listeners are closed, then serve the open connections out."""
        async with anyio.create_task_group() as tg:
            for listener in self.listeners:
                tg.start_soon(self._accept, listener, tg)

    async def stop_accepting(self) -> None:
        self.closing = True
        for listener in self.listeners:
            with contextlib.suppress(Exception):
                await listener.aclose()


__all__ = ["Handler", "Request", "Response", "Server", "serve_connection", "text"]
