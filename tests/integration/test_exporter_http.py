"""The exporter's HTTP server under peers that hold connections (issue 30, item 5): real
sockets on loopback, the server in this process with short limits so that a test waits
fractions of a second rather than the defaults' ten.

Peers are told apart by source address: loopback is all of 127.0.0.0/8, so a client bound
to 127.0.0.2 is another peer of a server on 127.0.0.1 (checked by hand: the server's
accept sees ('127.0.0.2', port)).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

import anyio
import anyio.abc
import pytest

from promptpath.exporter.http import Limits, Request, Response, Server, text

#: Long enough that the test's own steps never reach it by accident on a loaded machine;
#: short enough that the test does not wait long for it.
REQUEST_S = 0.6
#: How long a test waits for something that must happen soon (measured: ~1 ms here).
SOON_S = 5.0


class Held:
    """A handler: /hold waits until released (a request being answered), others 200."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.holding = 0

    async def __call__(self, request: Request) -> Response:
        if request.path == "/hold":
            self.holding += 1
            await self.release.wait()
        if request.path == "/big":
            return Response(status=200, body=b"x" * (32 * 1024 * 1024))
        return text(200, "ok")


@contextlib.asynccontextmanager
async def serving(limits: Limits, handler: Held) -> AsyncIterator[tuple[Server, int]]:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    server = Server(listener.listeners, handler, limits)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        try:
            yield server, port
        finally:
            handler.release.set()
            await server.stop_accepting()
            tg.cancel_scope.cancel()


async def connect(port: int, source: str = "127.0.0.1") -> anyio.abc.SocketStream:
    return await anyio.connect_tcp("127.0.0.1", port, local_host=source)


async def ask(stream: anyio.abc.SocketStream, path: str = "/") -> bytes:
    """One request on ``stream`` and the answer's first bytes."""
    await stream.send(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    with anyio.fail_after(SOON_S):
        return await stream.receive()


async def until(condition: Callable[[], bool]) -> None:
    """Wait (a short while at most) for the server's own bookkeeping: a connection leaves
    its table just after its socket closes, which the client may see first."""
    with anyio.fail_after(SOON_S):
        while not condition():
            await anyio.sleep(0.01)


async def closed_within(stream: anyio.abc.SocketStream, seconds: float) -> bool:
    """Whether the server closes ``stream`` within ``seconds`` (nothing else arriving)."""
    with anyio.move_on_after(seconds):
        try:
            data = await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return True
        pytest.fail(f"unexpected bytes: {data[:80]!r}")
    return False


async def test_a_request_must_arrive_within_the_deadline_while_a_kept_alive_one_may_idle() -> None:
    limits = Limits(request_s=REQUEST_S, idle_s=30.0)
    async with serving(limits, Held()) as (server, port):
        silent = await connect(port)
        half = await connect(port)
        await half.send(b"GET / HTTP/1.1\r\nHost: x\r\n")  # a head never finished
        kept = await connect(port)
        assert (await ask(kept)).startswith(b"HTTP/1.1 200")
        started = time.monotonic()
        assert await closed_within(silent, SOON_S)
        assert await closed_within(half, SOON_S)
        assert time.monotonic() - started >= REQUEST_S * 0.8
        # The kept-alive connection outlived the request deadline and still serves.
        assert (await ask(kept)).startswith(b"HTTP/1.1 200")
        assert server.stats.closed["request_timeout"] == 2
        for stream in (silent, half, kept):
            await stream.aclose()


async def test_with_every_connection_taken_the_longest_waiting_one_makes_room() -> None:
    limits = Limits(connections=8, per_peer=8)
    async with serving(limits, Held()) as (server, port):
        idle = [await connect(port, f"127.0.0.{2 + i % 4}") for i in range(8)]
        await until(lambda: server.stats.open == 8)
        newcomer = await connect(port, "127.0.0.9")
        assert (await ask(newcomer)).startswith(b"HTTP/1.1 200")
        assert await closed_within(idle[0], SOON_S)  # the oldest made room
        assert server.stats.closed["evicted"] == 1
        assert not await closed_within(idle[1], 0.1)
        # A connection being answered is never the one closed: seven held in a handler
        # push out the seven idle ones; the newcomer, kept alive, is the next to go.
        held = [await connect(port, f"127.0.0.{2 + i % 4}") for i in range(7)]
        for stream in held:
            await stream.send(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        await until(lambda: server.busy == 7)
        assert [await closed_within(s, SOON_S) for s in idle[1:]] == [True] * 7
        last = await connect(port, "127.0.0.10")
        assert (await ask(last)).startswith(b"HTTP/1.1 200")
        assert await closed_within(newcomer, SOON_S)
        assert server.busy == 7 and server.stats.closed["evicted"] == 9
        for stream in [*idle, newcomer, *held, last]:
            await stream.aclose()


async def test_one_peer_holds_at_most_its_share_and_others_are_served() -> None:
    limits = Limits(connections=32, per_peer=4)
    handler = Held()
    async with serving(limits, handler) as (server, port):
        greedy = [await connect(port, "127.0.0.2") for _ in range(10)]
        await anyio.sleep(0.2)
        # Each one past four closed the peer's own longest-waiting one.
        assert [await closed_within(s, 1.0) for s in greedy[:6]] == [True] * 6
        await until(lambda: server.stats.open == 4)
        # When every one of its connections is being answered, its next is closed at once.
        for stream in greedy[6:]:
            await stream.send(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n")
        with anyio.fail_after(SOON_S):
            while handler.holding < 4:
                await anyio.sleep(0.01)
        refused = await connect(port, "127.0.0.2")
        assert await closed_within(refused, SOON_S)
        assert server.stats.closed["peer_limit"] == 1
        other = await connect(port, "127.0.0.3")
        assert (await ask(other)).startswith(b"HTTP/1.1 200")
        for stream in [*greedy, refused, other]:
            await stream.aclose()


async def test_an_answer_the_peer_does_not_read_frees_its_connection_in_time() -> None:
    import socket

    limits = Limits(send_s=REQUEST_S)
    async with serving(limits, Held()) as (server, port):
        raw = socket.socket()
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.connect(("127.0.0.1", port))  # loopback: at once
        raw.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        # 32 MiB never read: the server gives up on it after the send limit.
        with anyio.fail_after(SOON_S + REQUEST_S):
            while server.stats.closed["send_timeout"] == 0:
                await anyio.sleep(0.02)
        await until(lambda: server.stats.open == 0)
        raw.close()
