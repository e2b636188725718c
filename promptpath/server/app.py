"""The ASGI application: routing, controls, and the paced writer.

Each event goes out in its own ``http.response.body`` message (so hypercorn writes it at
once) unless the ``batch`` control coalesces them on purpose. Tokens are scheduled on
absolute deadlines from the moment the request arrived, so cadence does not drift.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import datetime, timezone
from typing import Any

from promptpath.server.behaviour import Behaviour, BehaviourError, from_headers
from promptpath.server.dialect import (
    Dialect,
    ErrorReply,
    Event,
    Finish,
    JSONObject,
    RequestError,
    RequestInfo,
    frame,
    json_body,
    keepalive,
    stamped,
)
from promptpath.server.dialects import dialect_for_path
from promptpath.server.stats import RequestRecord, ServerStats
from promptpath.server.tokens import answer_tokens

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY = 8 * 1024 * 1024
_KEEPALIVE = Event("")  # placeholder in the write queue; framed as an SSE comment

HTML_PAGE = b"""<!DOCTYPE html>
<html><head><title>Network Access Required</title></head>
<body><h1>Please sign in to continue</h1>
<p>Your connection is being intercepted by a captive portal or a web filter.
This is not the API you asked for.</p></body></html>
"""


class _Exchange:
    """One request's receive/send, with disconnect detection (``http.disconnect`` or a
    failing send) and sleeps that wake up early when the client goes away."""

    def __init__(self, receive: Receive, send: Send) -> None:
        self._receive = receive
        self._send = send
        self._watcher: asyncio.Task[None] | None = None
        self._send_failed = False

    async def read_body(self) -> bytes | None:
        """The request body, or None when it is larger than ``MAX_BODY``."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._send_failed = True
                return b""
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > MAX_BODY:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def watch(self) -> None:
        """From now on, notice the client leaving."""
        self._watcher = asyncio.ensure_future(self._wait_disconnect())

    async def _wait_disconnect(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass

    @property
    def gone(self) -> bool:
        return self._send_failed or (self._watcher is not None and self._watcher.done())

    async def sleep_until(self, deadline: float) -> bool:
        """Sleep to a ``loop.time()`` deadline; False when the client left meanwhile."""
        if self.gone:
            return False
        delay = deadline - asyncio.get_running_loop().time()
        if delay <= 0:
            return True
        if self._watcher is None:
            await asyncio.sleep(delay)
            return True
        done, _ = await asyncio.wait({self._watcher}, timeout=delay)
        return not done

    async def send(self, message: Message) -> bool:
        if self.gone:
            return False
        try:
            await self._send(message)
        except Exception:  # any send failure means the peer is gone (ASGI 2.4: OSError)
            self._send_failed = True
            return False
        return True

    def close(self) -> None:
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()


class _EventWriter:
    """Stamps, frames and writes events, ``batch`` of them per transport write."""

    def __init__(
        self, ex: _Exchange, *, sse: bool, batch: int, stats: ServerStats, record: RequestRecord
    ) -> None:
        self.ex = ex
        self.sse = sse
        self.batch = batch
        self.stats = stats
        self.record = record
        self.seq = 0
        self.pending: list[Event] = []

    async def emit(self, event: Event) -> bool:
        self.pending.append(event)
        return len(self.pending) < self.batch or await self.flush()

    async def keepalive(self) -> bool:
        """A keepalive must reach the wire to be any use, so it flushes the batch."""
        self.pending.append(_KEEPALIVE)
        return await self.flush()

    async def flush(self) -> bool:
        if not self.pending:
            return True
        parts: list[bytes] = []
        sent_unix_ns = time.time_ns()  # one write, one send time
        for event in self.pending:
            if event is _KEEPALIVE:
                parts.append(keepalive(seq=self.seq, sent_unix_ns=sent_unix_ns))
            else:
                parts.append(frame(event, sse=self.sse, seq=self.seq, sent_unix_ns=sent_unix_ns))
            self.seq += 1
        n_tokens = sum(1 for event in self.pending if event.content)
        self.pending.clear()
        body = b"".join(parts)
        ok = await self.ex.send({"type": "http.response.body", "body": body, "more_body": True})
        if ok:
            self.stats.tokens(self.record, n_tokens)
        return ok


class ReferenceApp:
    """ASGI app serving the four dialects, ``/stats`` and ``/healthz``."""

    def __init__(
        self,
        defaults: Behaviour | None = None,
        *,
        api_key: str | None = None,
        on_startup: Callable[[], None] | None = None,
    ) -> None:
        self.defaults = defaults or Behaviour()
        self.api_key = api_key
        self.on_startup = on_startup
        self.stats = ServerStats()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.on_startup is not None:
                    self.on_startup()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- plumbing --------------------------------------------------------------------
    @staticmethod
    async def _reply(
        send: Send,
        status: int,
        body: bytes,
        content_type: str,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        if status in (204, 304):  # these must not carry a body (RFC 9110 15.3.5, 15.4.5)
            body = b""
            raw = []
        else:
            raw = [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
            ]
        raw += [(k.encode(), v.encode()) for k, v in headers]
        with contextlib.suppress(Exception):  # the client may be gone already
            await send({"type": "http.response.start", "status": status, "headers": raw})
            await send({"type": "http.response.body", "body": body, "more_body": False})

    async def _json(
        self, send: Send, status: int, data: JSONObject, headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        body = json_body(stamped(data, seq=0, sent_unix_ns=time.time_ns()))
        await self._reply(send, status, body, "application/json", headers)

    async def _error(
        self,
        send: Send,
        record: RequestRecord,
        dialect: type[Dialect],
        status: int,
        message: str | None = None,
        *,
        param: str | None = None,
        request_id: str = "",
    ) -> None:
        reply: ErrorReply = dialect.error_reply(status, message, param=param)
        record.status = status
        headers = (*reply.headers, ("x-request-id", request_id)) if request_id else reply.headers
        await self._json(send, status, reply.body, headers)

    def _authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        if self.api_key is None:
            return True
        expected = self.api_key.encode()
        for name, value in headers:
            key = name.lower()
            if key == b"authorization" and value[:7].lower() == b"bearer ":
                candidate = value[7:].strip()
            elif key == b"x-api-key":
                candidate = value.strip()
            else:
                continue
            if hmac.compare_digest(candidate, expected):
                return True
        return False

    # -- requests --------------------------------------------------------------------
    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        t_recv = loop.time()
        started_unix_ns = time.time_ns()
        path: str = scope["path"]
        method: str = scope["method"]

        if path.rstrip("/") == "/healthz":
            await self._reply(send, 200, b"ok", "text/plain; charset=utf-8")
            return
        if path.rstrip("/") == "/stats":
            body = json_body(self.stats.snapshot())
            await self._reply(send, 200, body, "application/json", (("cache-control", "no-store"),))
            return

        dialect_cls = dialect_for_path(path)
        record = self.stats.start(
            path=path,
            dialect=None if dialect_cls is None else dialect_cls.name,
            started_unix_ns=started_unix_ns,
        )
        if dialect_cls is None:
            record.status = 404
            reply = {"error": {"message": f"no endpoint at {path}", "type": "not_found"}}
            await self._json(send, 404, reply)
            return
        if method != "POST":
            await self._error(send, record, dialect_cls, 405, f"{method} not allowed; use POST")
            return

        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        request_id = f"req_{secrets.token_hex(12)}"
        if not self._authorized(headers):
            await self._error(send, record, dialect_cls, 401, request_id=request_id)
            return
        try:
            behaviour = from_headers(self.defaults, headers)
        except BehaviourError as exc:
            await self._error(send, record, dialect_cls, 400, str(exc), param=exc.header)
            return

        ex = _Exchange(receive, send)
        raw = await ex.read_body()
        # Delays count from the whole request received, as a model server's queue would:
        # the client's request_sent is the comparable stamp on its side.
        t_recv = loop.time()
        if raw is None:
            await self._error(send, record, dialect_cls, 413, "request body too large")
            return
        try:
            params = dialect_cls.parse_request(json.loads(raw or b"{}"))
        except json.JSONDecodeError as exc:
            await self._error(send, record, dialect_cls, 400, f"body is not JSON: {exc}")
            return
        except RequestError as exc:
            await self._error(send, record, dialect_cls, 400, exc.message, param=exc.param)
            return

        if behaviour.status is not None and behaviour.status != 200:
            await self._error(send, record, dialect_cls, behaviour.status, request_id=request_id)
            return

        now = datetime.now(timezone.utc)
        info = RequestInfo(
            id=secrets.token_hex(12),
            created_unix=int(now.timestamp()),
            created_iso=now.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z",
            params=params,
        )
        dialect = dialect_cls(info)
        limit = params.max_tokens
        n_tokens = behaviour.tokens if limit is None else min(behaviour.tokens, limit)
        finish: Finish = "length" if limit is not None and limit < behaviour.tokens else "stop"
        tokens = answer_tokens(n_tokens)
        common: tuple[tuple[str, str], ...] = (
            ("x-request-id", request_id),
            ("cache-control", "no-cache"),
        )
        if behaviour.accel_buffering is not None:
            common = (*common, ("x-accel-buffering", behaviour.accel_buffering))

        record.status = 200
        if behaviour.body == "html":
            await self._reply(send, 200, HTML_PAGE, "text/html; charset=utf-8", common)
            return
        if behaviour.body == "json" or not params.stream:
            ex.watch()
            try:
                plan = _Plan(behaviour, t_recv)
                if not await ex.sleep_until(plan.deadline(max(0, n_tokens - 1))):
                    self.stats.disconnect(record)
                    return
                elapsed = int((loop.time() - t_recv) * 1e9)
                answer = dialect.complete("".join(tokens), finish, n_tokens, elapsed)
                self.stats.tokens(record, n_tokens)
                await self._json(send, 200, answer, common)
            finally:
                ex.close()
            return

        ex.watch()
        try:
            complete = await self._stream(
                ex, scope, dialect, behaviour, tokens, finish, t_recv, record, common
            )
            if not complete and ex.gone:
                self.stats.disconnect(record)
        finally:
            ex.close()

    async def _stream(
        self,
        ex: _Exchange,
        scope: Scope,
        dialect: Dialect,
        behaviour: Behaviour,
        tokens: list[str],
        finish: Finish,
        t_recv: float,
        record: RequestRecord,
        headers: tuple[tuple[str, str], ...],
    ) -> bool:
        """Write the event stream. False when it stopped early (client gone, truncated)."""
        content_type = dialect.media_type + ("; charset=utf-8" if dialect.sse else "")
        raw_headers = [(b"content-type", content_type.encode())]
        raw_headers += [(k.encode(), v.encode()) for k, v in headers]
        if not await ex.send(
            {"type": "http.response.start", "status": 200, "headers": raw_headers}
        ):
            return False
        out = _EventWriter(
            ex, sse=dialect.sse, batch=behaviour.batch, stats=self.stats, record=record
        )
        plan = _Plan(behaviour, t_recv)

        async def wait(deadline: float) -> bool:
            every = behaviour.keepalive_s
            if dialect.sse and every > 0:
                next_keepalive = asyncio.get_running_loop().time() + every
                while next_keepalive < deadline:
                    if not await ex.sleep_until(next_keepalive) or not await out.keepalive():
                        return False
                    next_keepalive += every
            return await ex.sleep_until(deadline)

        async def end_body() -> bool:
            return await out.flush() and await ex.send(
                {"type": "http.response.body", "body": b"", "more_body": False}
            )

        for event in dialect.opening():
            if not await out.emit(event):
                return False
        for i in range(len(tokens) + 1):
            # Controls fire "after token K", i.e. once K tokens have been written.
            if behaviour.malformed_after == i and not await out.emit(dialect.malformed()):
                return False
            if behaviour.error_after == i:
                for event in dialect.error():
                    if not await out.emit(event):
                        return False
                return await end_body()
            if behaviour.truncate_after == i:
                if not await out.flush():
                    return False
                if str(scope.get("http_version", "1.1")).startswith("1"):
                    # Return without the final body message: hypercorn then closes the
                    # connection without the chunked terminator, as a cut proxy would.
                    return False
                # h2/h3 cannot be reset from ASGI: end the stream with no terminal marker.
                await end_body()
                return False
            if i == len(tokens):
                break
            if not await wait(plan.deadline(i)) or not await out.emit(dialect.token(tokens[i])):
                return False

        elapsed_ns = int((asyncio.get_running_loop().time() - t_recv) * 1e9)
        for event in dialect.closing(finish, len(tokens), elapsed_ns):
            if not await out.emit(event):
                return False
        return await end_body()


class _Plan:
    """When token ``i`` is due, on the ``loop.time()`` clock."""

    def __init__(self, behaviour: Behaviour, t_recv: float) -> None:
        self.b = behaviour
        self.t_first = t_recv + behaviour.ttft_ms / 1000.0

    def deadline(self, i: int) -> float:
        t = self.t_first
        if self.b.rate > 0:
            t += i / self.b.rate
        if self.b.pause_after is not None and i >= self.b.pause_after:
            t += self.b.pause_s
        return t
