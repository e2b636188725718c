"""A TCP byte stream that knows when the kernel received what it reads (SO_TIMESTAMPNS).

A read stamped with the clock when it returns is as late as the event loop was busy:
with hundreds of streams in flight (load mode), or another process on the core, that is
milliseconds after the bytes arrived. Linux stamps every received packet; asked with
``SO_TIMESTAMPNS``, ``recvmsg`` hands the stamp of the last packet a read took over as
ancillary data (for TCP too; checked on loopback: within ~10 µs of the sender's
``send()``). ``rx_unix_ns`` keeps it for the stamping stream above (backend.py), which
maps it onto the trace's ``perf_counter_ns`` clock. Where the option is missing (not
Linux), reads carry no stamp and the stamping stream falls back to its own clock.

anyio's own socket stream reads through an asyncio transport, which throws ancillary data
away: this one reads the socket itself when anyio says it is readable.

A FIN carries no data, so no receive stamp: a read that returns EOF is as late as the
loop was busy. The kernel does keep when the last segment with an ACK arrived (TCP_INFO's
``tcpi_last_ack_recv``, ms ago, in jiffies), and the FIN is that segment when nothing
came after it. Checked on loopback (linux 6.18, HZ 250): a peer's ``shutdown(SHUT_WR)``
read 7 ms to 1 s later is placed within ±1.2 ms of the shutdown. ``eof_ns`` keeps it.

Packets that wait in the receive queue are merged by TCP, and the merged bytes carry the
last packet's stamp (checked on this kernel: three sends 1 ms apart, read 5 ms later, all
bytes carry the third's stamp, even a one-byte ``MSG_PEEK``): a loop that reads a
connection late loses the earlier packets' arrival times for good. ``prefetch()`` takes
what the kernel holds now, stamped, for ``receive()`` to hand out in order: a connection
whose reader waits while the loop runs other tasks can be read from those tasks' turns
(net/http2.py does so on every stream event, benchmarks/bench_load.py measures it).
"""

from __future__ import annotations

import asyncio
import collections
import socket
import struct
import sys
import time

import anyio
import anyio.abc
import anyio.lowlevel

#: ``SO_TIMESTAMPNS`` (= ``SCM_TIMESTAMPNS``) in asm-generic/socket.h, which x86 and arm
#: use; Python does not export it. Other architectures number it differently: off there.
_SO_TIMESTAMPNS = 35 if sys.platform == "linux" else None
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux: tv_sec, tv_nsec
#: struct tcp_info (linux/tcp.h): 8 one-byte fields, then u32s; tcpi_last_ack_recv is the
#: 13th (rto, ato, snd_mss, rcv_mss, unacked, sacked, lost, retrans, fackets,
#: last_data_sent, last_ack_sent, last_data_recv, last_ack_recv).
_TCP_INFO_LAST_ACK_RECV = struct.Struct("=56xI")
#: Bytes one read takes; prefetched bytes are held up to ``_PREFETCH_LIMIT`` (beyond it
#: the kernel keeps them, as it would without prefetching).
_READ_BYTES = 65536
_PREFETCH_LIMIT = 1 << 20


#: One socket with receive stamps on, held for the process (``keep_stamping_on``).
_stamping_held: socket.socket | None = None


def keep_stamping_on() -> None:
    """Before t0: have the kernel stamp every packet on arrival from now on.

    Linux turns arrival stamping on for the whole system when the first socket asks, and
    turns it off when the last one stops, through a deferred switch: a packet that arrives
    before it flips is stamped when it is read. Checked by hand on this kernel (6.18): in
    a fresh process, with no other stamping socket open, the first datagram read 10 ms
    after its send carried the read's time in 1 of 3 runs, then 1 of 9 (and the first
    of 200 in one process, none after); with one stamping socket opened first, 15 of 15
    carried their arrival. A socket of our own asking before t0, and kept open, flips it before any
    traced packet arrives."""
    global _stamping_held
    if _stamping_held is not None or _SO_TIMESTAMPNS is None:
        return
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        sock.close()
        return
    _stamping_held = sock


def enable_rx_stamps(sock: socket.socket) -> int:
    """Ask the kernel to stamp what ``sock`` receives; the ancillary buffer size recvmsg
    needs for the stamp (0 where the option is missing: no stamps)."""
    if _SO_TIMESTAMPNS is None or struct.calcsize("@l") != 8:
        return 0
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        return 0
    return socket.CMSG_SPACE(_TIMESPEC.size)


def rx_stamp(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The kernel's receive stamp (wall-clock ns) in recvmsg's ancillary data, if any."""
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack_from(payload)
            return int(sec * 1_000_000_000 + nsec)
    return None


def perf_ns_of(unix_ns: int | None, now_ns: int) -> int:
    """A wall-clock stamp mapped onto perf_counter_ns, never after ``now_ns`` (the
    caller's reading when the data was handed to it); ``now_ns`` itself without a stamp.

    The clocks' offset is read here, as one pair (the perf reading against the midpoint of
    two wall readings around it), not from ``now_ns``: whatever ran between the caller's
    reading and this call would move the stamp earlier by as long. On the QUIC path that
    is SIOCGSTAMPNS's ioctl, 4 µs warm and up to 40 µs on the first datagram after 50 ms
    of idle: the TTFT from the request read 0.02-0.05 ms short of the capture."""
    if unix_ns is None:
        return now_ns
    wall_before = time.time_ns()
    perf = time.perf_counter_ns()
    wall_after = time.time_ns()
    return min(now_ns, perf - ((wall_before + wall_after) // 2 - unix_ns))


#: ``SIOCGSTAMPNS`` (asm-generic/sockios.h; 64-bit: a struct timespec): the receive stamp
#: of the last packet a read took from the socket, kept by the kernel once asked for.
_SIOCGSTAMPNS = 0x8907 if sys.platform == "linux" else None


def _stamp_ioctl(fd: int) -> int:
    import fcntl

    assert _SIOCGSTAMPNS is not None
    sec, nsec = _TIMESPEC.unpack(fcntl.ioctl(fd, _SIOCGSTAMPNS, bytes(_TIMESPEC.size)))
    return int(sec * 1_000_000_000 + nsec)


def enable_last_packet_stamp(fd: int) -> bool:
    """Have the kernel keep the receive stamp of the last datagram read from ``fd``, for a
    socket read by someone else (asyncio's datagram transport, which uses recvfrom and so
    gets no ancillary data). The first ask turns the stamping on and has no stamp yet
    (ENOENT); False where there is no such ioctl. Not with SO_TIMESTAMPNS on the same
    socket: the kernel then hands stamps out as ancillary data only (checked on loopback:
    a datagram read 50 ms after it was sent carries a stamp 15-40 µs after the send)."""
    if _SIOCGSTAMPNS is None or struct.calcsize("@l") != 8:
        return False
    try:
        _stamp_ioctl(fd)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def last_packet_stamp(fd: int) -> int | None:
    """Wall-clock ns at which the kernel received the datagram last read from ``fd``."""
    try:
        return _stamp_ioctl(fd)
    except OSError:
        return None


class RxStampedStream(anyio.abc.SocketStream):
    """A connected TCP socket, read with ``recvmsg`` and its kernel receive stamp."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        #: Wall-clock ns at which the kernel received the last packet of the last read.
        self.rx_unix_ns: int | None = None
        #: perf_counter_ns just before the send() call that took the last bytes of the
        #: last item: the hand-off to the kernel happened after it. A stamp taken when
        #: send() returns can come after the peer's answer (on loopback the answer can
        #: arrive while this process waits to be scheduled again), and the answer is now
        #: stamped when the kernel received it.
        self.sent_ns: int | None = None
        #: perf_counter_ns at which the kernel received the peer's FIN (TCP_INFO), once a
        #: read returned EOF; None where TCP_INFO is missing.
        self.eof_ns: int | None = None
        self._ancillary = 0
        #: What prefetch() took and receive() has not handed out yet, oldest first.
        self._held: collections.deque[tuple[bytes, int | None] | OSError | _Eof] = (
            collections.deque()
        )
        self._held_bytes = 0
        self._ended = False  # prefetch() found the end: nothing more to take
        self._waiter: asyncio.Future[bool] | None = None  # receive() waiting for data
        if _SO_TIMESTAMPNS is not None and struct.calcsize("@l") == 8:
            try:
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                self._ancillary = socket.CMSG_SPACE(_TIMESPEC.size)
            except OSError:
                pass

    @property
    def _raw_socket(self) -> socket.socket:
        return self._sock

    async def receive(self, max_bytes: int = _READ_BYTES) -> bytes:
        await anyio.lowlevel.checkpoint_if_cancelled()
        waited = False
        while True:
            if self._held:  # taken earlier by prefetch(), stamped then
                data, stamp = self._from_held(max_bytes)
                break
            try:
                data, stamp = self._take(max_bytes)
            except BlockingIOError:
                await self._readable()
                waited = True
                continue
            except OSError as exc:
                if self._sock.fileno() == -1:
                    raise anyio.ClosedResourceError from exc
                raise anyio.BrokenResourceError from exc
            if not data:
                self.eof_ns = self._last_ack_ns()
                raise anyio.EndOfStream
            break
        self.rx_unix_ns = stamp
        if not waited:
            # Data was there at once: let other tasks run before taking more (a peer that
            # never stops sending must not starve the loop's timers). After the read, not
            # before: a read at once keeps packets from merging in the kernel's queue,
            # where they would share the last one's stamp. Shielded: the bytes are ours.
            await anyio.lowlevel.cancel_shielded_checkpoint()
        return data

    def _take(self, max_bytes: int) -> tuple[bytes, int | None]:
        """One recvmsg: the bytes and the kernel's stamp of their last packet."""
        data, ancillary, _flags, _addr = self._sock.recvmsg(max_bytes, self._ancillary)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
                sec, nsec = _TIMESPEC.unpack_from(payload)
                return data, sec * 1_000_000_000 + nsec
        return data, None

    def prefetch(self) -> None:
        """Take what the kernel holds for this socket now, with its stamp, for the next
        ``receive()``; nothing when it holds nothing (one non-blocking recvmsg). An end
        (FIN, an error) found here is held too and raised in turn."""
        if self._ended or self._held_bytes >= _PREFETCH_LIMIT or self._sock.fileno() == -1:
            return
        try:
            data, stamp = self._take(_READ_BYTES)
        except BlockingIOError:
            return
        except OSError as exc:
            self._held.append(exc)
            self._ended = True
        else:
            if data:
                # No kernel stamp (not Linux): the time of this read is still nearer the
                # arrival than the time the reader gets to it.
                self._held.append((data, time.time_ns() if stamp is None else stamp))
                self._held_bytes += len(data)
            else:
                self._held.append(_Eof(self._last_ack_ns()))
                self._ended = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def _from_held(self, max_bytes: int) -> tuple[bytes, int | None]:
        """The oldest prefetched piece (its first ``max_bytes``; the rest stays), or the end
        prefetching found, raised as receive() raises it."""
        item = self._held[0]
        if isinstance(item, _Eof):
            self.eof_ns = item.eof_ns
            raise anyio.EndOfStream
        if isinstance(item, OSError):
            self._held.popleft()
            raise anyio.BrokenResourceError from item
        data, stamp = item
        if len(data) > max_bytes:
            self._held[0] = (data[max_bytes:], stamp)
            data = data[:max_bytes]
        else:
            self._held.popleft()
        self._held_bytes -= len(data)
        return data, stamp

    async def _readable(self) -> None:
        """Until the socket is readable or ``prefetch()`` took something for us (anyio's
        wait_readable cannot be woken by the latter); ClosedResourceError if closed."""
        loop = asyncio.get_running_loop()
        fd = self._sock.fileno()
        if fd == -1:
            raise anyio.ClosedResourceError
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiter = waiter
        loop.add_reader(fd, _wake, waiter)
        try:
            readable = await waiter
        finally:
            self._waiter = None
            if self._sock.fileno() != -1:
                loop.remove_reader(fd)
        if not readable:
            raise anyio.ClosedResourceError

    def _last_ack_ns(self) -> int | None:
        """When the last segment carrying an ACK arrived, on the perf_counter clock."""
        if sys.platform != "linux":
            return None
        try:
            raw = self._sock.getsockopt(
                socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LAST_ACK_RECV.size
            )
        except (OSError, AttributeError):
            return None
        if len(raw) < _TCP_INFO_LAST_ACK_RECV.size:
            return None
        ago_ms: int = _TCP_INFO_LAST_ACK_RECV.unpack_from(raw)[0]
        return time.perf_counter_ns() - ago_ms * 1_000_000

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint_if_cancelled()
        sock = self._sock
        view = memoryview(item)
        while view:
            try:
                began = time.perf_counter_ns()
                sent = sock.send(view)
            except BlockingIOError:
                await anyio.wait_writable(sock)
                continue
            except OSError as exc:
                if sock.fileno() == -1:
                    raise anyio.ClosedResourceError from exc
                raise anyio.BrokenResourceError from exc
            view = view[sent:]
            self.sent_ns = began

    async def send_eof(self) -> None:
        self._sock.shutdown(socket.SHUT_WR)

    async def aclose(self) -> None:
        if self._sock.fileno() != -1:
            waiter = self._waiter
            if waiter is not None:  # a task waiting to read wakes with an error
                asyncio.get_running_loop().remove_reader(self._sock.fileno())
                _wake(waiter, False)
            anyio.notify_closing(self._sock)  # and one waiting to write
            self._sock.close()
        await anyio.lowlevel.checkpoint()


class _Eof:
    """The peer's FIN, found by prefetch(): when it arrived (TCP_INFO), if known."""

    __slots__ = ("eof_ns",)

    def __init__(self, eof_ns: int | None) -> None:
        self.eof_ns = eof_ns


def _wake(waiter: asyncio.Future[bool], readable: bool = True) -> None:
    if not waiter.done():
        waiter.set_result(readable)


__all__ = [
    "RxStampedStream",
    "enable_last_packet_stamp",
    "enable_rx_stamps",
    "keep_stamping_on",
    "last_packet_stamp",
    "perf_ns_of",
    "rx_stamp",
]
