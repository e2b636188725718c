"""A TCP socket's bytes taken in time keep each packet's own arrival (rxstamp.py, prefetch).

Checked by hand first (linux 6.18, loopback, RxStampedStream over a real connection): two
sends 20 ms apart read together afterwards come back as one read, "onetwo", stamped at the
second send (+20.14 ms): TCP merged them in the receive queue. With prefetch() between the
two sends: two pieces, "one" at +0.008 ms and "two" at +20.25 ms.

Stamps and the sends' times are both CLOCK_REALTIME, so the assertions are orderings (a
packet stamped before the next send began), which no load on the machine can break.
"""

from __future__ import annotations

import select
import socket
import sys
import time
from collections.abc import Iterator

import anyio
import pytest

from promptpath.net.rxstamp import RxStampedStream

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="SO_TIMESTAMPNS is Linux's")


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(client, server): a loopback TCP connection, the client's side non-blocking."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    client.setblocking(False)
    with client, server:
        yield client, server


def _wait_readable(sock: socket.socket) -> None:
    """Until the kernel holds bytes for ``sock`` (loopback delivers within the send)."""
    assert select.select([sock], [], [], 5.0)[0]


async def _read(stream: RxStampedStream, n: int) -> list[tuple[bytes, int]]:
    pieces: list[tuple[bytes, int]] = []
    with anyio.fail_after(5):
        while sum(len(data) for data, _ in pieces) < n:
            data = await stream.receive()
            assert stream.rx_unix_ns is not None
            pieces.append((data, stream.rx_unix_ns))
    return pieces


def test_prefetch_keeps_each_packets_stamp_where_one_late_read_merges_them(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    client, server = pair
    stream = RxStampedStream(client)

    async def burst(prefetch: bool) -> tuple[list[tuple[bytes, int]], int]:
        server.send(b"one")
        _wait_readable(client)
        time.sleep(0.02)  # the loop busy elsewhere
        if prefetch:
            stream.prefetch()
        second_ns = time.time_ns()
        server.send(b"two")
        _wait_readable(client)
        return await _read(stream, 6), second_ns

    async def main() -> None:
        # Without: one read, stamped after the second send began (the kernel's merge).
        merged, second_ns = await burst(prefetch=False)
        assert [data for data, _ in merged] == [b"onetwo"]
        assert merged[0][1] >= second_ns
        # With: the first packet keeps its own stamp, from before the second send.
        pieces, second_ns = await burst(prefetch=True)
        assert [data for data, _ in pieces] == [b"one", b"two"]
        assert pieces[0][1] < second_ns <= pieces[1][1]

    anyio.run(main)


def test_a_waiting_read_wakes_when_prefetch_takes_its_bytes(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    client, server = pair
    stream = RxStampedStream(client)

    async def main() -> None:
        got: list[bytes] = []

        async def reader() -> None:
            got.append(await stream.receive())

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                await anyio.sleep(0.01)  # the reader waits on the socket
                server.send(b"late")
                _wait_readable(client)
                stream.prefetch()  # takes the bytes the reader was waiting for
                assert not select.select([client], [], [], 0)[0]  # the kernel has none left
        assert got == [b"late"]

    anyio.run(main)


def test_an_end_found_by_prefetch_comes_after_the_bytes_before_it(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    client, server = pair
    stream = RxStampedStream(client)

    async def main() -> None:
        server.send(b"x" * 3000)
        _wait_readable(client)
        stream.prefetch()
        server.shutdown(socket.SHUT_WR)
        _wait_readable(client)
        stream.prefetch()  # finds the FIN
        # A piece larger than the read asks for is handed out in parts, one stamp.
        first = await stream.receive(1000)
        stamp = stream.rx_unix_ns
        rest = await stream.receive(5000)
        assert (len(first), len(rest)) == (1000, 2000)
        assert stream.rx_unix_ns == stamp
        for _ in range(2):  # and the end stays the end
            with pytest.raises(anyio.EndOfStream):
                await stream.receive()

    anyio.run(main)


def test_closing_wakes_a_waiting_read_with_an_error(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    client, _server = pair
    stream = RxStampedStream(client)

    async def main() -> None:
        errors: list[BaseException] = []

        async def reader() -> None:
            try:
                await stream.receive()
            except anyio.ClosedResourceError as exc:
                errors.append(exc)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                await anyio.sleep(0.01)
                await stream.aclose()
        assert len(errors) == 1

    anyio.run(main)
