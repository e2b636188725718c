"""Misbehaving hops for ``promptpath demo --hop``: a small HTTP/1.1 reverse proxy in front of
the reference endpoint that breaks a stream the way a real hop does, so a newcomer sees a
probe find it with no nginx and no network.

* ``buffering``: holds the response body and passes it on in 4 KiB blocks, as nginx's
  ``proxy_buffering on`` does with an HTTP/1.1 upstream (size-triggered, flushed at the end);
* ``idle-timeout``: closes the client's connection (FIN, no chunked terminator) after 3 s
  with no byte from upstream, and a keep-alive connection after 3 s idle, as
  ``proxy_read_timeout 3s`` / haproxy's ``timeout server`` do;
* ``compression``: gzips ``text/event-stream`` for clients that accept gzip and holds it to
  the end (nginx ``gzip on`` with buffering); identity clients get the stream as sent;
* ``ghost-stream``: when the client leaves, keeps reading the upstream to its end instead
  of closing it, so the model goes on generating for nobody;
* ``clean``: passes every byte on at once and closes the upstream when the client leaves.

Loopback only, one upstream, bounded reads: it is a demo hop, not a proxy to deploy.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

HopKind = Literal["clean", "buffering", "idle-timeout", "compression", "ghost-stream"]
HOPS: tuple[HopKind, ...] = ("clean", "buffering", "idle-timeout", "compression", "ghost-stream")

BLOCK_BYTES = 4096  # nginx's default proxy_buffer_size on x86-64 Linux
IDLE_CUT_S = 3.0
MAX_HEAD = 64 * 1024
MAX_BODY = 4 * 1024 * 1024
READ = 16 * 1024


@dataclass(frozen=True, slots=True)
class _Head:
    first_line: bytes
    headers: list[tuple[str, str]]

    def get(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name), None)


async def _read_head(reader: asyncio.StreamReader, timeout: float | None) -> _Head | None:
    try:
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        return None
    lines = raw[:-4].split(b"\r\n")
    headers = []
    for line in lines[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    return _Head(first_line=lines[0], headers=headers)


def _head_bytes(head: _Head, drop: tuple[str, ...], add: list[tuple[str, str]]) -> bytes:
    kept = [(k, v) for k, v in head.headers if k.lower() not in drop]
    lines = [head.first_line] + [f"{k}: {v}".encode("latin-1") for k, v in (*kept, *add)]
    return b"\r\n".join(lines) + b"\r\n\r\n"


class _Dechunker:
    """The payload of a chunked body, as bytes arrive; ``done`` after the last chunk."""

    def __init__(self) -> None:
        self.buffer = b""
        self.done = False

    def feed(self, data: bytes) -> bytes:
        self.buffer += data
        out = b""
        while not self.done:
            line, sep, rest = self.buffer.partition(b"\r\n")
            if not sep:
                break
            size = int(line.split(b";")[0] or b"0", 16)
            if size == 0:
                self.done = True
                break
            if len(rest) < size + 2:
                break
            out += rest[:size]
            self.buffer = rest[size + 2 :]
        return out


class Hop:
    """One proxy of ``kind`` on 127.0.0.1, forwarding to ``upstream_port`` (plain HTTP)."""

    def __init__(self, kind: HopKind, upstream_port: int) -> None:
        self.kind = kind
        self.upstream_port = upstream_port
        self.port = 0
        self.upstreams_left_running = 0  # ghost-stream: upstreams read on after the client left

    async def serve(self, ready: threading.Event, stop: asyncio.Event) -> None:
        tasks: set[asyncio.Task[None]] = set()

        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.ensure_future(self._client(reader, writer))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        server = await asyncio.start_server(accepted, "127.0.0.1", 0, limit=MAX_HEAD)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        await stop.wait()
        server.close()
        for task in list(tasks):  # connections still open when the demo ends
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        idle = IDLE_CUT_S if self.kind == "idle-timeout" else 75.0
        try:
            while True:
                head = await _read_head(reader, idle)
                if head is None:
                    break
                length = int(head.get("content-length") or 0)
                if length > MAX_BODY:
                    break
                body = await reader.readexactly(length) if length else b""
                if not await self._exchange(head, body, reader, writer):
                    break
                if (head.get("connection") or "").lower() == "close":
                    break
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            pass  # the client or the upstream went away: so does this connection
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _exchange(
        self,
        head: _Head,
        body: bytes,
        client_reader: asyncio.StreamReader,
        client: asyncio.StreamWriter,
    ) -> bool:
        """One request through the hop; False when the client connection must end."""
        up_reader, up_writer = await asyncio.open_connection(
            "127.0.0.1", self.upstream_port, limit=MAX_HEAD
        )
        try:
            up_writer.write(_head_bytes(head, ("connection",), [("Connection", "close")]) + body)
            await up_writer.drain()
            response = await _read_head(up_reader, 60.0)
            if response is None:
                return False
            sse = (response.get("content-type") or "").startswith("text/event-stream")
            accepts_gzip = "gzip" in (head.get("accept-encoding") or "").lower()
            chunked = (response.get("transfer-encoding") or "").lower() == "chunked"
            if self.kind == "compression" and sse and accepts_gzip and chunked:
                await self._compressed(response, up_reader, client)
                return True
            client.write(_head_bytes(response, ("connection",), [("Via", f"1.1 demo-{self.kind}")]))
            return await self._relay(up_reader, client_reader, client, chunked)
        finally:
            up_writer.close()

    async def _relay(
        self,
        upstream: asyncio.StreamReader,
        client_reader: asyncio.StreamReader,
        client: asyncio.StreamWriter,
        chunked: bool,
    ) -> bool:
        held = b""
        timeout = IDLE_CUT_S if self.kind == "idle-timeout" else 120.0
        ending = _Dechunker() if chunked else None
        left = asyncio.ensure_future(client_reader.read(1))  # b"": the client went away
        try:
            while True:
                read = asyncio.ensure_future(upstream.read(READ))
                done, _ = await asyncio.wait(
                    {read, left}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if not done:  # silent upstream: the idle hop cuts the client off
                    read.cancel()
                    return False
                if left in done and read not in done:
                    if self.kind == "ghost-stream":
                        self.upstreams_left_running += 1
                        data = await read  # go on pulling for nobody, to the end
                        while data:
                            data = await upstream.read(READ)
                    else:
                        read.cancel()
                    return False
                data = read.result()
                if not data:
                    break
                if self.kind == "buffering":
                    held += data
                    while len(held) >= BLOCK_BYTES:
                        client.write(held[:BLOCK_BYTES])
                        held = held[BLOCK_BYTES:]
                else:
                    client.write(data)
                await client.drain()
                if ending is not None:
                    ending.feed(data)
                    if ending.done:
                        break
            client.write(held)
            await client.drain()
            return ending is not None  # a body ended by EOF ends the connection too
        finally:
            left.cancel()

    async def _compressed(
        self, response: _Head, upstream: asyncio.StreamReader, client: asyncio.StreamWriter
    ) -> None:
        """The whole event stream gzipped and held to its end, one chunk and the terminator."""
        gzip = zlib.compressobj(wbits=31)
        dechunk = _Dechunker()
        out = b""
        while not dechunk.done:
            data = await upstream.read(READ)
            if not data:
                break
            out += gzip.compress(dechunk.feed(data))
        out += gzip.flush()
        drop = ("connection", "content-length", "content-encoding")
        add = [("Content-Encoding", "gzip"), ("Via", "1.1 demo-compression")]
        client.write(_head_bytes(response, drop, add))
        client.write(f"{len(out):x}\r\n".encode() + out + b"\r\n0\r\n\r\n")
        await client.drain()


@contextlib.contextmanager
def running(kind: HopKind, upstream_port: int) -> Iterator[Hop]:
    """The hop on its own event loop in a thread, for as long as the block runs."""
    hop = Hop(kind, upstream_port)
    ready = threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def main() -> None:
        try:
            loop.run_until_complete(hop.serve(ready, stop))
        finally:
            loop.close()

    thread = threading.Thread(target=main, name=f"promptpath-hop-{kind}", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the demo hop did not start")
    try:
        yield hop
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
