"""--pcap's packet capture: through Wireshark's dumpcap, or a packet socket (CAP_NET_RAW).

Either way the capture is known to run before the run's first packet: ``start()`` sends
a marker datagram over loopback and waits until the capture hands it back (dumpcap
delivers a packet ~250 ms after it passed, checked by hand: its pipe output is written
per libpcap buffer timeout); ``stop()`` sends a second marker after the last byte and
waits for it in the same way, so every packet before it is in. Memory is bounded
(``MAX_BYTES``; beyond it packets are counted, not kept) and so is every wait.

Two views of what was captured come back: dumpcap's own pcapng stream (``stream``), or
the packet socket's raw IP packets with their kernel receive times (``frames``). The
choice of what to keep is the caller's (core/packets.py); this module only captures.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

Way = Literal["dumpcap", "packet socket"]

#: The most bytes a capture keeps (dumpcap's stream, or the socket's packets).
MAX_BYTES = 64 << 20
#: How long the capture may take to show it runs (dumpcap: start, open, first buffer).
START_TIMEOUT_S = 10.0
#: How long the end marker may take to come back, and dumpcap to exit after SIGINT.
STOP_TIMEOUT_S = 5.0
#: After the run, before the end marker: the peer's last ACK or FIN is still on its way.
TAIL_S = 0.2
#: Only what a run is made of reaches the buffer (and the markers, sent over UDP).
BPF_FILTER = "tcp or udp or icmp or icmp6"

_ETH_P_ALL = 0x0003
_IP_PROTOCOLS = (0x0800, 0x86DD)
_PACKET_OUTGOING = 4
_SO_TIMESTAMPNS = 35


class CaptureError(Exception):
    """The capture could not start, or stopped on its own; the message says why."""


@dataclass(slots=True)
class Captured:
    """What a capture handed back."""

    way: Way
    interface: str
    #: dumpcap's pcapng stream (``way == "dumpcap"``).
    stream: bytes = b""
    #: (receive time in ns since the epoch, raw IP packet) from the packet socket.
    frames: list[tuple[int, bytes]] = field(default_factory=list)
    #: Packets not kept because MAX_BYTES was reached.
    dropped: int = 0


class Capture(Protocol):
    def start(self) -> None: ...
    def stop(self) -> Captured: ...


def can_open_packet_socket() -> bool:
    """Whether this process may open an AF_PACKET socket (CAP_NET_RAW), tried for real."""
    family = getattr(socket, "AF_PACKET", None)
    if family is None:
        return False
    try:
        socket.socket(family, socket.SOCK_DGRAM, socket.htons(_ETH_P_ALL)).close()
    except OSError:
        return False
    return True


def find_dumpcap(environ: Mapping[str, str]) -> str | None:
    """dumpcap on the PATH ``environ`` gives."""
    return shutil.which("dumpcap", path=environ.get("PATH", os.defpath))


def available_way(environ: Mapping[str, str]) -> Way | None:
    """dumpcap when it is installed, else the packet socket when we may open one."""
    if find_dumpcap(environ) is not None:
        return "dumpcap"
    if can_open_packet_socket():
        return "packet socket"
    return None


class _Marker:
    """A datagram over loopback, to ourselves, that the capture must hand back."""

    def __init__(self) -> None:
        self._rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._rx.bind(("127.0.0.1", 0))
        self._tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def send(self) -> bytes:
        token = b"promptpath-pcap-marker-" + secrets.token_hex(12).encode()
        self.resend(token)
        return token

    def resend(self, token: bytes) -> None:
        self._tx.sendto(token, self._rx.getsockname())

    def close(self) -> None:
        self._rx.close()
        self._tx.close()


def _await(
    seen: threading.Event,
    marker: _Marker,
    token: bytes,
    timeout: float,
    alive: Callable[[], bool] = lambda: True,
) -> bool:
    """Resend the marker every half second until the capture shows one (a datagram can be
    lost to a full buffer), within ``timeout``, and only while the capture is ``alive``."""
    deadline = time.monotonic() + timeout
    while not seen.wait(min(0.5, max(0.0, deadline - time.monotonic()))):
        if time.monotonic() >= deadline or not alive():
            return seen.is_set()
        marker.resend(token)
    return True


class DumpcapCapture:
    """dumpcap writing pcapng on a pipe, read by a thread into memory."""

    def __init__(self, dumpcap: str, interface: str) -> None:
        self._argv = [dumpcap, "-q", "-i", interface, "-f", BPF_FILTER, "-w", "-"]
        self.interface = interface
        self._buf = bytearray()
        self._dropped_bytes = 0
        self._lock = threading.Lock()
        self._wanted: bytes | None = None
        self._seen = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._marker = _Marker()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                if len(self._buf) + len(chunk) <= MAX_BYTES:
                    self._buf += chunk
                else:
                    self._dropped_bytes += len(chunk)
                wanted = self._wanted
                if wanted is not None and wanted in self._buf[-(len(chunk) + len(wanted)) :]:
                    self._seen.set()

    def _expect(self, token: bytes) -> None:
        with self._lock:
            self._seen.clear()
            self._wanted = token

    def start(self) -> None:
        try:
            self._proc = subprocess.Popen(
                self._argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # Its own process group: a Ctrl-C on the terminal is ours to handle (the
                # run reports what it measured); dumpcap is stopped by stop(), after it.
                process_group=0,
            )
        except OSError as exc:
            self._marker.close()
            raise CaptureError(f"cannot start dumpcap ({exc.strerror or exc})") from exc
        self._reader = threading.Thread(target=self._read, name="pcap-dumpcap", daemon=True)
        self._reader.start()
        token = self._marker.send()
        self._expect(token)
        if not _await(self._seen, self._marker, token, START_TIMEOUT_S, self._alive):
            why = self._finish(kill=True)
            raise CaptureError(f"dumpcap did not start capturing on {self.interface}{why}")

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _finish(self, *, kill: bool = False) -> str:
        """Stop dumpcap (SIGINT flushes its buffer) and reap it; its complaint, if any."""
        proc = self._proc
        assert proc is not None
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGINT)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join(STOP_TIMEOUT_S)
        err = b""
        if proc.stderr is not None:
            with contextlib.suppress(OSError, ValueError):
                if select.select([proc.stderr], [], [], 0)[0]:
                    err = proc.stderr.read(4096) or b""
            proc.stderr.close()
        if proc.stdout is not None:
            proc.stdout.close()
        self._marker.close()
        lines = [
            line.strip()
            for line in err.decode("utf-8", "replace").splitlines()
            if line.strip() and not line.startswith(("Capturing on", "File:", "Running as"))
        ]
        return f": {lines[0][:200]}" if proc.returncode and lines else ""

    def stop(self) -> Captured:
        arrived = False
        if self._proc is not None and self._proc.poll() is None:  # else: it stopped early
            time.sleep(TAIL_S)
            token = self._marker.send()
            self._expect(token)
            arrived = _await(self._seen, self._marker, token, STOP_TIMEOUT_S, self._alive)
        why = self._finish()
        if not arrived and self._proc is not None and self._proc.returncode not in (0, None):
            raise CaptureError(f"dumpcap stopped capturing{why}")
        with self._lock:
            stream = bytes(self._buf)
        return Captured(
            way="dumpcap",
            interface=self.interface,
            stream=stream,
            dropped=1 if self._dropped_bytes else 0,
        )


class PacketSocketCapture:
    """An AF_PACKET socket (cooked: the IP packet without its link header), read by a
    thread; each packet stamped with the kernel's receive time (SO_TIMESTAMPNS)."""

    def __init__(self, interface: str) -> None:
        self.interface = interface
        self._frames: list[tuple[int, bytes]] = []
        self._kept = 0
        self._dropped = 0
        self._wanted: bytes | None = None
        self._seen = threading.Event()
        self._running = threading.Event()
        self._thread: threading.Thread | None = None
        self._marker = _Marker()
        self._sock: socket.socket | None = None

    def start(self) -> None:
        try:
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(_ETH_P_ALL))
        except OSError as exc:
            self._marker.close()
            raise CaptureError(f"cannot open a packet socket ({exc.strerror or exc})") from exc
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        if self.interface != "any":
            sock.bind((self.interface, 0))
        sock.settimeout(0.1)
        self._sock = sock
        self._running.set()
        self._thread = threading.Thread(target=self._read, name="pcap-socket", daemon=True)
        self._thread.start()
        token = self._marker.send()
        self._wanted = token
        if not _await(self._seen, self._marker, token, START_TIMEOUT_S):
            self._close()
            raise CaptureError(f"the packet socket saw nothing on {self.interface}")

    def _read(self) -> None:
        sock = self._sock
        assert sock is not None
        space = socket.CMSG_SPACE(16)
        while self._running.is_set():
            try:
                data, ancdata, _flags, address = sock.recvmsg(1 << 16, space)
            except TimeoutError:
                continue
            except OSError:
                return
            ifname, proto, pkttype = address[0], address[1], address[2]
            if proto not in _IP_PROTOCOLS:
                continue  # ARP and the like: never a run's
            if ifname == "lo" and pkttype == _PACKET_OUTGOING:
                continue  # loopback hands each packet over twice: keep it once, as libpcap
            stamp = time.time_ns()
            for level, kind, value in ancdata:
                if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(value) >= 16:
                    sec, nsec = struct.unpack("@qq", value[:16])
                    stamp = sec * 1_000_000_000 + nsec
            wanted = self._wanted
            if wanted is not None and wanted in data:
                self._seen.set()
                continue  # a marker is ours, not the run's
            if self._kept + len(data) > MAX_BYTES:
                self._dropped += 1
                continue
            self._kept += len(data)
            self._frames.append((stamp, data))

    def _close(self) -> None:
        self._running.clear()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S)
        if self._sock is not None:
            self._sock.close()
        self._marker.close()

    def stop(self) -> Captured:
        time.sleep(TAIL_S)
        self._seen.clear()
        token = self._marker.send()
        self._wanted = token
        _await(self._seen, self._marker, token, STOP_TIMEOUT_S)
        self._close()
        return Captured(
            way="packet socket",
            interface=self.interface,
            frames=self._frames,
            dropped=self._dropped,
        )


def open_capture(way: Way, interface: str, environ: Mapping[str, str]) -> Capture:
    """A capture of ``way`` on ``interface`` (``lo``, or ``any``), not yet started."""
    if way == "dumpcap":
        dumpcap = find_dumpcap(environ)
        if dumpcap is None:
            raise CaptureError("dumpcap is no longer on the PATH")
        return DumpcapCapture(dumpcap, interface)
    return PacketSocketCapture(interface)


__all__ = [
    "BPF_FILTER",
    "MAX_BYTES",
    "Capture",
    "CaptureError",
    "Captured",
    "DumpcapCapture",
    "PacketSocketCapture",
    "Way",
    "available_way",
    "can_open_packet_socket",
    "find_dumpcap",
    "open_capture",
]
