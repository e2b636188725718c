"""The paced writer: turns a dialect's events into timed ASGI sends.

Each event goes out in its own ``http.response.body`` message (so hypercorn writes it at
once) unless the ``batch`` control coalesces them on purpose. Tokens are scheduled on
absolute deadlines from the moment the request arrived, so cadence does not drift.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from promptpath.server.behaviour import Behaviour
from promptpath.server.dialect import Dialect, Event, Finish, JSONObject, frame, keepalive
from promptpath.server.stats import RequestRecord, ServerStats

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY = 8 * 1024 * 1024
_KEEPALIVE = Event("")  # placeholder in the write queue; framed as an SSE comment


class Exchange:
    """One request's receive/send, with disconnect detection (``http.disconnect`` or a
    failing send) and sleeps that wake up early when the client goes away."""

    def __init__(self, receive: Receive, send: Send) -> None:
        self._receive = receive
        self._send = send
        self._watcher: asyncio.Task[None] | None = None
        self._send_failed = False
        self.gone_unix_ns: int | None = None  # when we saw the client leave

    async def read_body(self) -> bytes | None:
        """The request body, or None when it is larger than ``MAX_BODY``; either way the
        request is read to its end (see ``ReferenceApp._http`` for why)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._send_failed = True
                self.gone_unix_ns = time.time_ns()
                return b""
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size <= MAX_BODY:
                chunks.append(chunk)
            if not message.get("more_body", False):
                return None if size > MAX_BODY else b"".join(chunks)

    def watch(self) -> None:
        """From now on, notice the client leaving."""
        self._watcher = asyncio.ensure_future(self._wait_disconnect())

    async def _wait_disconnect(self) -> None:
        while (await self._receive())["type"] != "http.disconnect":
            pass
        self.gone_unix_ns = self.gone_unix_ns or time.time_ns()

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
            self.gone_unix_ns = self.gone_unix_ns or time.time_ns()
            return False
        return True

    def close(self) -> None:
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()


class EventWriter:
    """Stamps, frames and writes events, ``batch`` of them per transport write."""

    def __init__(
        self,
        ex: Exchange,
        *,
        sse: bool,
        batch: int,
        stats: ServerStats,
        record: RequestRecord,
        report: JSONObject | None = None,
        ws: bool = False,
    ) -> None:
        self.ex = ex
        self.ws = ws  # each event its own WebSocket message: nothing to frame
        self.report = report  # rides on the first JSON event, then is spent
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
            elif isinstance(event.data, str):
                parts.append(frame(event, sse=self.sse, seq=self.seq, sent_unix_ns=sent_unix_ns))
            else:
                report, self.report = self.report, None
                parts.append(
                    frame(
                        event, sse=self.sse, seq=self.seq, sent_unix_ns=sent_unix_ns, report=report
                    )
                )
            self.seq += 1
        n_tokens = sum(1 for event in self.pending if event.content)
        self.pending.clear()
        if self.ws:
            ok = True
            for part in parts:  # one message per event, written back to back
                text = part.decode().rstrip("\n")
                ok = ok and await self.ex.send({"type": "websocket.send", "text": text})
        else:
            body = b"".join(parts)
            ok = await self.ex.send({"type": "http.response.body", "body": body, "more_body": True})
        if ok:
            self.stats.tokens(self.record, n_tokens)
        return ok


async def write_stream(
    ex: Exchange,
    dialect: Dialect,
    behaviour: Behaviour,
    tokens: list[str],
    *,
    finish: Finish,
    t_recv: float,
    http_version: str,
    headers: tuple[tuple[str, str], ...],
    stats: ServerStats,
    record: RequestRecord,
    report: JSONObject | None = None,
    ws: bool = False,
) -> bool:
    """Write the event stream. False when it stopped early (client gone, truncated).

    ``ws``: on an accepted WebSocket: each event one text message, no HTTP head, the
    socket left open at the end (the client may send the next request), and
    ``truncate_after`` a Close frame with ``close_code`` (1011 unless set).

    Every content token counts as generated when it is produced. The disconnect check
    runs on every chunk (each sleep and each send): a client that left stops the
    generation at once, unless ``ignore_disconnect`` plays a ghosting upstream.
    ``report`` (the controls applied) goes into the first JSON event's stamp."""
    content_type = dialect.media_type + ("; charset=utf-8" if dialect.sse else "")
    raw_headers = [(b"content-type", content_type.encode())]
    raw_headers += [(k.encode(), v.encode()) for k, v in headers]
    if not ws and not await ex.send(
        {"type": "http.response.start", "status": 200, "headers": raw_headers}
    ):
        return False
    out = EventWriter(
        ex,
        sse=dialect.sse and not ws,
        batch=behaviour.batch,
        stats=stats,
        record=record,
        report=report,
        ws=ws,
    )
    plan = Plan(behaviour, t_recv)

    async def wait(deadline: float) -> bool:
        every = behaviour.keepalive_s
        if dialect.sse and not ws and every > 0:
            next_keepalive = asyncio.get_running_loop().time() + every
            while next_keepalive < deadline:
                if not await ex.sleep_until(next_keepalive) or not await out.keepalive():
                    return False
                next_keepalive += every
        return await ex.sleep_until(deadline)

    async def end_body() -> bool:
        if ws:
            return await out.flush()
        return await out.flush() and await ex.send(
            {"type": "http.response.body", "body": b"", "more_body": False}
        )

    async def client_left(next_token: int) -> bool:
        """The client is gone: record when we saw it, and with ``ignore_disconnect`` go on
        producing the rest on schedule, as an upstream nobody told would."""
        if not ex.gone:
            return False
        stats.disconnect(record, ex.gone_unix_ns)
        if behaviour.ignore_disconnect:
            loop = asyncio.get_running_loop()
            for j in range(next_token, len(tokens)):
                await asyncio.sleep(max(0.0, plan.deadline(j) - loop.time()))
                stats.generated(record, t_recv_unix_ns)
        return False

    t_recv_unix_ns = time.time_ns() - int((asyncio.get_running_loop().time() - t_recv) * 1e9)
    for event in dialect.opening():
        if not await out.emit(event):
            return await client_left(0)
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
            if ws:
                code = behaviour.close_code or 1011
                await ex.send({"type": "websocket.close", "code": code, "reason": "truncate-after"})
                return False
            if http_version.startswith("1"):
                # Return without the final body message: hypercorn then closes the
                # connection without the chunked terminator, as a cut proxy would.
                return False
            # h2/h3 cannot be reset from ASGI: end the stream with no terminal marker.
            await end_body()
            return False
        if i == len(tokens):
            break
        if not await wait(plan.deadline(i)):
            return await client_left(i)
        stats.generated(record, t_recv_unix_ns)
        if not await out.emit(dialect.token(tokens[i])):
            return await client_left(i + 1)

    elapsed_ns = int((asyncio.get_running_loop().time() - t_recv) * 1e9)
    for event in dialect.closing(finish, len(tokens), elapsed_ns):
        if not await out.emit(event):
            return False
    return await end_body()


class Plan:
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
