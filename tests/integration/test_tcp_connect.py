"""One stamped TCP connect over real loopback sockets, and where the TLS stage starts."""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from anyio.abc import SocketAttribute

import promptpath.net.tcp
import promptpath.tracer.orchestrator
from promptpath.cli.commands import RunArgs, build_options
from promptpath.net.tcp import connect_address
from promptpath.options import RunOptions
from promptpath.tracer.orchestrator import trace
from tests.helpers.refserver import RefServer

# struct tcp_info (linux/tcp.h): eight u8 fields, then u32s; tcpi_rtt (µs) is the 16th.
_TCPI_RTT = struct.Struct("=8x60xI")
_CLIENT_HELLO = 1  # TLS HandshakeType (RFC 8446)


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


async def test_a_handshake_done_inside_connect_ends_when_the_syscall_returned(
    listener: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On loopback the kernel completes the handshake inside connect() (the listener's
    # SYN/ACK and our ACK are processed before it returns): the check that says so is
    # made slow here, and is not handshake time.
    real = promptpath.net.tcp._writable_now
    checked: list[tuple[int, bool]] = []

    def slow_check(sock: socket.socket) -> bool:
        time.sleep(0.1)
        done = real(sock)
        checked.append((time.perf_counter_ns(), done))
        return done

    monkeypatch.setattr(promptpath.net.tcp, "_writable_now", slow_check)
    stream, start_ns, end_ns = await connect_address("127.0.0.1", listener.getsockname()[1])
    async with stream:
        [(checked_ns, done)] = checked
        if done:
            assert start_ns < end_ns < checked_ns - 100_000_000
        else:  # the kernel left the handshake for later (softirq deferred): the loop saw it
            assert end_ns > checked_ns


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


def _options(server: RefServer) -> RunOptions:
    args = RunArgs(
        target=f"https://localhost:{server.port}/v1/chat/completions",
        cacert=server.ca,
        http="1.1",
        family=socket.AF_INET,
        timeout=20.0,
        max_tokens=3,
        headers=["x-promptpath-ttft-ms: 0", "x-promptpath-rate: 0"],
    )
    return build_options(args, environ={})


async def test_tls_stage_starts_after_connect_and_ends_at_handshake(
    refserver_tls: RefServer,
) -> None:
    result = await trace(_options(refserver_tls))
    assert result.exc is None
    tl = result.timeline
    connect, tls = tl.stage("connect"), tl.stage("tls")
    assert connect is not None and tls is not None
    assert connect.end_ns is not None and tls.end_ns is not None
    assert connect.end_ns <= tls.start_ns < tls.end_ns
    # The server's first flight arrives inside the stage, after our ClientHello.
    assert any(tls.start_ns < r.t_ns <= tls.end_ns for r in tl.reads)
    assert tl.attempts[-1].local_port


async def test_tls_stage_leaves_out_building_the_client_hello(
    refserver_tls: RefServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    hello_built: list[int] = []
    make_context = promptpath.tracer.orchestrator.ssl_context_for

    def slow_hello(
        conn: Any, direction: str, version: Any, ctype: Any, msg: Any, data: Any
    ) -> None:
        if direction == "write" and msg == _CLIENT_HELLO:
            time.sleep(0.2)  # building the ClientHello is slow; sending it is not
            hello_built.append(time.perf_counter_ns())

    def context(options: RunOptions) -> ssl.SSLContext:
        ctx = make_context(options)
        # The stdlib's debugging hook into OpenSSL's message callback (private, 3.8+):
        # the one place to slow down building the ClientHello before it is sent.
        ctx._msg_callback = slow_hello  # type: ignore[attr-defined]
        return ctx

    monkeypatch.setattr(promptpath.tracer.orchestrator, "ssl_context_for", context)
    result = await trace(_options(refserver_tls))
    assert result.exc is None
    tls = result.timeline.stage("tls")
    assert tls is not None and tls.duration_ns is not None
    assert len(hello_built) == 1
    assert tls.start_ns >= hello_built[0]
    assert tls.duration_ns < 200_000_000
    # ...and is reported on its own, as over QUIC.
    hello_ns = result.timeline.client_hello_ns
    assert hello_ns is not None and hello_ns >= 200_000_000
