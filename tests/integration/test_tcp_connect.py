"""One stamped TCP connect over real loopback sockets."""

from __future__ import annotations

import asyncio
import errno
import socket
import struct
import sys
import time
from collections.abc import Iterator

import pytest
from anyio.abc import SocketAttribute

from promptpath.net.tcp import connect_address

# struct tcp_info (linux/tcp.h): eight u8 fields, then u32s; tcpi_rtt (µs) is the 16th.
_TCPI_RTT = struct.Struct("=8x60xI")


def _listener(family: socket.AddressFamily, host: str, backlog: int = 16) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.bind((host, 0))
    sock.listen(backlog)
    return sock


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with _listener(socket.AF_INET, "127.0.0.1") as sock:
        yield sock


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


async def test_stamps_bracket_the_handshake(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    before = time.perf_counter_ns()
    stream, start_ns, end_ns = await connect_address("127.0.0.1", port, timeout=5)
    after = time.perf_counter_ns()
    async with stream:
        assert before <= start_ns < end_ns <= after
        # The connection the listener holds is ours (the kernel finished the handshake).
        accepted, peer = listener.accept()
        accepted.close()
        assert peer[1] == stream.extra(SocketAttribute.local_port)
        if sys.platform == "linux":
            # The kernel times SYN → SYN/ACK itself: our bracket cannot be shorter.
            raw = stream.extra(SocketAttribute.raw_socket)
            info = raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCPI_RTT.size)
            (rtt_us,) = _TCPI_RTT.unpack(info)
            assert end_ns - start_ns >= rtt_us * 1000


async def test_connect_sets_nodelay(listener: socket.socket) -> None:
    stream, _, _ = await connect_address("127.0.0.1", listener.getsockname()[1])
    async with stream:
        raw = stream.extra(SocketAttribute.raw_socket)
        assert raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


async def test_closed_port_is_refused_quickly() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: the kernel answers RST
        started = time.monotonic()
        with pytest.raises(OSError) as caught:
            await connect_address("127.0.0.1", port, timeout=5)
    assert caught.value.errno == errno.ECONNREFUSED
    assert time.monotonic() - started < 1.0


async def test_unanswered_syn_times_out_with_etimedout() -> None:
    # A listener whose accept queue is full drops new SYNs: nothing answers.
    with _listener(socket.AF_INET, "127.0.0.1", backlog=0) as full:
        port = full.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):  # fills the queue
            started = time.monotonic()
            with pytest.raises(TimeoutError) as caught:
                await connect_address("127.0.0.1", port, timeout=0.3)
            waited = time.monotonic() - started
    assert caught.value.errno == errno.ETIMEDOUT
    assert 0.3 <= waited < 2.0


async def test_retransmitted_syn_shows_in_the_stamps() -> None:
    # The first SYN meets a full accept queue and is dropped; the queue drains, and the
    # kernel's retransmission (initial RTO 1 s) connects, seen from the event loop.
    with _listener(socket.AF_INET, "127.0.0.1", backlog=0) as full:
        port = full.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)):  # fills the queue
            drained: list[socket.socket] = []
            loop = asyncio.get_running_loop()
            loop.call_later(0.2, lambda: drained.append(full.accept()[0]))
            stream, start_ns, end_ns = await connect_address("127.0.0.1", port, timeout=10)
            async with stream:
                assert 0.9e9 <= end_ns - start_ns < 9e9
            for sock in drained:
                sock.close()


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 on lo")
async def test_ipv6_loopback_connects() -> None:
    with _listener(socket.AF_INET6, "::1") as sock:
        stream, start_ns, end_ns = await connect_address("::1", sock.getsockname()[1])
        async with stream:
            assert start_ns < end_ns
            accepted, peer = sock.accept()
            accepted.close()
            assert peer[0] == "::1"
