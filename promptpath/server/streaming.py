"""The paced writer: turns a dialect's events into timed ASGI sends.

Each event goes out in its own ``http.response.body`` message (so hypercorn writes it at
once) unless the ``batch`` control coalesces them on purpose. Tokens are scheduled on
absolute deadlines from the moment the request arrived, so cadence does not drift.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from promptpath.server.behaviour import Behaviour
from promptpath.server.dialect import Dialect, Event, Finish, JSONObject, frame, keepalive
from promptpath.server.stats import RequestRecord, ServerStats

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_BODY = 8 * 1024 * 1024
_KEEPALIVE = Event("")  # placeholder in the write queue; framed as an SSE comment
_UNBOUNDED = 1 << 62  # a batch size no stream reaches


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
        encode: Callable[..., bytes],
        sse: bool,
        batch: int,
        stats: ServerStats,
        record: RequestRecord,
        report: JSONObject | None = None,
        held: bool = False,
        ws: bool = False,
    ) -> None:
        self.ex = ex
        self.ws = ws  # each event its own WebSocket message: nothing to frame
        #: The batching is a hold behind the "model" (a provider's guardrail): each event
        #: is stamped when it was produced, so a canary sees the hold as added delay.
        self.held = held
        self.report = report  # rides on the first JSON event, then is spent
        self.encode = encode  # the dialect's framing (Dialect.encode)
        self.sse = sse
        self.batch = batch
        self.stats = stats
        self.record = record
        self.seq = 0
        self.pending: list[Event] = []
        self.made: list[int | None] = []  # per pending event: its own stamp, or None

    async def emit(self, event: Event, *, made_unix_ns: int | None = None) -> bool:
        """Queue ``event``; ``made_unix_ns`` stamps it with when it was produced instead of
        the write's time (an emulated filter that held it is then seen as a hold)."""
        self.pending.append(event)
        if made_unix_ns is None and self.held:
            made_unix_ns = time.time_ns()
        self.made.append(made_unix_ns)
        return len(self.pending) < self.batch or await self.flush()

    async def keepalive(self) -> bool:
        """A keepalive must reach the wire to be any use, so it flushes the batch."""
        self.pending.append(_KEEPALIVE)
        self.made.append(None)
        return await self.flush()

    async def flush(self) -> bool:
        if not self.pending:
            return True
        parts: list[bytes] = []
        write_unix_ns = time.time_ns()  # one write, one send time
        for event, made in zip(self.pending, self.made, strict=True):
            sent_unix_ns = write_unix_ns if made is None else made
            if event is _KEEPALIVE:
                parts.append(keepalive(seq=self.seq, sent_unix_ns=sent_unix_ns))
            elif isinstance(event.data, str):
                parts.append(self.encode(event, seq=self.seq, sent_unix_ns=sent_unix_ns))
            else:
                report, self.report = self.report, None
                parts.append(
                    self.encode(event, seq=self.seq, sent_unix_ns=sent_unix_ns, report=report)
                )
            self.seq += 1
        n_tokens = sum(1 for event in self.pending if event.content)
        self.pending.clear()
        self.made.clear()
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


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamSpec:
    """What one streamed answer is: its dialect, controls, tokens and where it goes."""

    dialect: Dialect
    behaviour: Behaviour
    tokens: Sequence[str]
    finish: Finish
    t_recv: float  # when the request arrived, on the ``loop.time()`` clock
    http_version: str = "1.1"
    headers: tuple[tuple[str, str], ...] = ()  # more response headers (not over WebSocket)
    #: The controls applied, for the first JSON event's stamp.
    report: JSONObject | None = None
    #: On an accepted WebSocket: each event one text message, no HTTP head, the socket left
    #: open at the end (the client may send the next request), and ``truncate_after`` a
    #: Close frame with ``close_code`` (1011 unless set).
    ws: bool = False
    #: At least this many events per write (a provider's check releasing scanned batches).
    hold_batch: int = 1
    #: The emulated prefill's share of the first-token delay (server/prefill.py), in ms.
    prefill_ms: float = 0.0


async def write_stream(
    ex: Exchange, spec: StreamSpec, *, stats: ServerStats, record: RequestRecord
) -> bool:
    """Write the event stream. False when it stopped early (client gone, truncated).

    Every content token counts as generated when it is produced. The disconnect check
    runs on every chunk (each sleep and each send): a client that left stops the
    generation at once, unless ``ignore_disconnect`` plays a ghosting upstream."""
    dialect, behaviour, tokens, ws = spec.dialect, spec.behaviour, spec.tokens, spec.ws
    t_recv, hold_batch = spec.t_recv, spec.hold_batch
    content_type = dialect.media_type + ("; charset=utf-8" if dialect.sse else "")
    raw_headers = [(b"content-type", content_type.encode())]
    raw_headers += [(k.encode(), v.encode()) for k, v in spec.headers]
    if not ws and not await ex.send(
        {"type": "http.response.start", "status": 200, "headers": raw_headers}
    ):
        return False
    # An emulated content filter holds every token until its batch is checked: the writer
    # then writes only when told to (release), never by count.
    filtered = behaviour.filter_batch is not None
    out = EventWriter(
        ex,
        # Over WebSocket each event is its own message: the JSON alone, no SSE framing.
        encode=functools.partial(frame, sse=False) if ws else dialect.encode,
        sse=dialect.sse and not ws,
        batch=_UNBOUNDED if filtered else max(behaviour.batch, hold_batch),
        held=hold_batch > 1,
        stats=stats,
        record=record,
        report=spec.report,
        ws=ws,
    )
    plan = Plan(behaviour, t_recv, prefill_ms=spec.prefill_ms)
    held = 0  # tokens the emulated filter holds

    async def release() -> bool:
        """The emulated filter passes its batch: the held tokens, then its verdict."""
        nonlocal held
        if not filtered or not held:
            return True
        held = 0
        for event in dialect.filter_verdict():
            if not await out.emit(event):
                return False
        return await out.flush()

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
    if filtered and not await out.flush():  # the opening is not the filter's to hold
        return await client_left(0)
    for i in range(len(tokens) + 1):
        # Controls fire "after token K", i.e. once K tokens have been written.
        if behaviour.malformed_after == i and not await out.emit(dialect.malformed()):
            return False
        if behaviour.error_after == i:
            if not await release():
                return False
            for event in dialect.error():
                if not await out.emit(event):
                    return False
            return await end_body()
        if behaviour.truncate_after == i:
            if not await release() or not await out.flush():
                return False
            if ws:
                code = behaviour.close_code or 1011
                await ex.send({"type": "websocket.close", "code": code, "reason": "truncate-after"})
                return False
            if spec.http_version.startswith("1"):
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
        made = time.time_ns() if filtered else None
        for event in dialect.events_for(tokens[i], reasoning=i < behaviour.reasoning):
            if not await out.emit(event, made_unix_ns=made):
                return await client_left(i + 1)
        held += 1
        if filtered and held >= (behaviour.filter_batch or 1) and not await release():
            return await client_left(i + 1)

    if not await release():
        return False
    elapsed_ns = int((asyncio.get_running_loop().time() - t_recv) * 1e9)
    for event in dialect.closing(spec.finish, len(tokens), elapsed_ns):
        if not await out.emit(event):
            return False
    return await end_body()


class Plan:
    """When token ``i`` is due, on the ``loop.time()`` clock."""

    def __init__(self, behaviour: Behaviour, t_recv: float, *, prefill_ms: float = 0.0) -> None:
        self.b = behaviour
        self.t_first = t_recv + (behaviour.ttft_ms + prefill_ms) / 1000.0

    def deadline(self, i: int) -> float:
        t = self.t_first
        if self.b.rate > 0:
            t += i / self.b.rate
        if self.b.pause_after is not None and i >= self.b.pause_after:
            t += self.b.pause_s
        return t
