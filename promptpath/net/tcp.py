"""One TCP connect to one address, stamped at the syscall.

``anyio.connect_tcp`` builds a task group and a happy-eyeballs task before it reaches
``connect()``; stamped around it, a 12 µs loopback handshake (SYN → SYN/ACK in a packet
capture) read as ~0.6 ms. Here the clock is read just before ``connect()`` and again as
soon as the handshake is known to be done: when the syscall returned if it finished inside
it, else when the event loop's writability callback sees the socket writable.
"""

from __future__ import annotations

import asyncio
import errno
import os
import select
import socket
import time

import anyio.abc

from promptpath.net.rxstamp import RxStampedStream


async def connect_address(
    ip: str, port: int, *, timeout: float | None = None
) -> tuple[anyio.abc.SocketStream, int, int]:
    """Connect to ``ip`` (an address, never a name) and return the stream with the
    ``perf_counter_ns`` stamps taken just before ``connect()`` and when it completed.

    Raises OSError with the errno: ECONNREFUSED, EHOSTUNREACH, ... and ETIMEDOUT (a
    TimeoutError) when ``timeout`` seconds pass first.
    """
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        # As anyio does: requests and TLS records go out at once, not after Nagle's delay.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start_ns = time.perf_counter_ns()
        code = sock.connect_ex((ip, port))
        returned_ns = time.perf_counter_ns()
        if code not in (0, errno.EINPROGRESS):
            raise OSError(code, os.strerror(code))
        if code == 0 or _writable_now(sock):
            # The handshake finished inside connect() (loopback, a peer on this host): it
            # was done when the syscall returned. A trip through the event loop would add
            # its latency, and the poll that tells us so its own 8 µs (median, loopback,
            # against a capture: connect() 40 µs, with the poll 48, SYN -> SYN/ACK 6).
            end_ns = returned_ns
        else:
            end_ns = await _writable(sock, timeout)
        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            raise OSError(code, os.strerror(code))
        stream: anyio.abc.SocketStream = RxStampedStream(sock)
    except BaseException:
        sock.close()
        raise
    return stream, start_ns, end_ns


def _writable_now(sock: socket.socket) -> bool:
    poller = select.poll()
    poller.register(sock, select.POLLOUT)
    return bool(poller.poll(0))  # POLLERR and POLLHUP count too: SO_ERROR says which


async def _writable(sock: socket.socket, timeout: float | None) -> int:
    """Wait until ``sock`` is writable; return the ``perf_counter_ns`` it was seen so."""
    loop = asyncio.get_running_loop()
    seen: asyncio.Future[int] = loop.create_future()

    def writable() -> None:
        # Stamped here rather than when the task resumes: this callback runs in the loop
        # iteration that saw the socket writable, the task only in the next one.
        if not seen.done():
            seen.set_result(time.perf_counter_ns())

    def expired() -> None:
        if not seen.done():
            seen.set_exception(OSError(errno.ETIMEDOUT, os.strerror(errno.ETIMEDOUT)))

    fd = sock.fileno()
    loop.add_writer(fd, writable)
    timer = None if timeout is None else loop.call_later(timeout, expired)
    try:
        return await seen
    finally:
        loop.remove_writer(fd)
        if timer is not None:
            timer.cancel()
