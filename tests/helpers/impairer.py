"""A user-space path impairer: two network namespaces joined through this process.

    sudo .venv/bin/python -m tests.helpers.impairer --delay-ms 20 [--jitter-ms 2]
        [--loss 2] [--rate-kbit 10000] [--seed 1]

The kernel here has no netem, so delay and loss cannot come from ``tc``. Instead each of
two namespaces made for the purpose (``pp-cli-<pid>-<hex>`` and ``pp-srv-<pid>-<hex>``)
gets a TUN device whose file descriptor this process holds; every IP packet the client
namespace routes to the server's address is read here, delayed, perhaps dropped, and
written into the server namespace's TUN, and the same the other way. TCP, UDP (QUIC) and
ICMP are all just packets to it. Addresses come from a private subnet that exists only
inside those two namespaces (client 10.200.0.1, server 10.200.0.2, point to point), so
the host's own interfaces and routes are never touched.

Per direction ("up" = client to server, "down" = back): a fixed delay, a uniform jitter
of ± ``jitter_ms`` that never reorders (a packet leaves no earlier than the one before
it, as on one physical link: TCP would otherwise see reordering as loss), random loss
from a seeded RNG (the same packet sequence loses the same packets), and a rate limit
(a bottleneck that serialises packets at ``rate_kbit``, tail-dropping above a queue of
``QUEUE_PACKETS``). The pump is one thread sleeping in select() until the next packet
is due, with the kernel's timer slack set to 1 µs; its own precision is measured in
tests/lab/test_impaired_path.py and CONTRIBUTING.md ("Path impairer lab").

Cleanup: the context manager deletes both namespaces (the TUN devices vanish with the
descriptors), atexit does the same if the interpreter exits another way, and every
start first deletes ``pp-cli-*``/``pp-srv-*`` namespaces whose owning pid is gone.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import fcntl
import json
import os
import random
import re
import secrets
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

CLIENT_ADDR = "10.200.0.1"
SERVER_ADDR = "10.200.0.2"
TUN_NAME = "pptun0"  # the same name in both namespaces: each has its own
QUEUE_PACKETS = 1000  # netem's default limit
_NS_PATTERN = re.compile(r"^pp-(?:cli|srv)-(\d+)-[0-9a-f]+$")
_TUNSETIFF = 0x400454CA
_IFF_TUN = 0x0001
_IFF_NO_PI = 0x1000
_CLONE_NEWNET = 0x40000000
_PR_SET_TIMERSLACK = 29
_MAX_PACKET = 65535
SPIN_NS = 200_000
PUMP_PRIORITY = 10  # SCHED_FIFO, low among real-time threads


class LabUnavailable(RuntimeError):
    """This machine cannot host the lab (not root, no TUN, no netns, no iproute2)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Impairment:
    """What one direction of the path does to each packet."""

    delay_ms: float = 0.0
    jitter_ms: float = 0.0  # uniform in ±jitter_ms, clamped so no packet is reordered
    loss: float = 0.0  # probability in [0, 1]
    rate_kbit: float = 0.0  # 0 = unlimited


@dataclass(slots=True)
class Direction:
    """One direction's schedule: when each admitted packet may leave (pure: time is passed in)."""

    impairment: Impairment
    rng: random.Random
    queue: deque[tuple[int, bytes]] = field(default_factory=deque)
    link_free_ns: int = 0  # when the bottleneck finishes serialising what it holds
    last_release_ns: int = 0
    forwarded: int = 0
    lost: int = 0
    overflowed: int = 0
    #: Extra delay (ms) by the far end's IPv4 address, read at ``peer_offset`` of each
    #: packet (its destination going up, its source coming down): more server addresses
    #: behind one path, each with a round trip of its own (``add_server_address``). Order
    #: is then kept per address, as on separate links: a near address's packet does not
    #: wait behind a far one's.
    by_peer: dict[bytes, float] = field(default_factory=dict)
    peer_offset: int = 16
    last_by_peer: dict[bytes, int] = field(default_factory=dict)

    def admit(self, packet: bytes, now_ns: int) -> int | None:
        """Queue ``packet`` read at ``now_ns``; its release time, or None when dropped."""
        imp = self.impairment
        if imp.loss > 0 and self.rng.random() < imp.loss:
            self.lost += 1
            return None
        if len(self.queue) >= QUEUE_PACKETS:
            self.overflowed += 1
            return None
        departs = now_ns
        if imp.rate_kbit > 0:
            departs = max(now_ns, self.link_free_ns) + int(len(packet) * 8e6 / imp.rate_kbit)
            self.link_free_ns = departs
        jitter = self.rng.uniform(-imp.jitter_ms, imp.jitter_ms) if imp.jitter_ms > 0 else 0.0
        if self.by_peer:
            return self._admit_by_peer(packet, departs, imp.delay_ms + jitter)
        release = departs + max(0, int((imp.delay_ms + jitter) * 1e6))
        release = max(release, self.last_release_ns)
        self.last_release_ns = release
        self.queue.append((release, packet))
        return release

    def _admit_by_peer(self, packet: bytes, departs: int, delay_ms: float) -> int:
        key = packet[self.peer_offset : self.peer_offset + 4]
        release = departs + max(0, int((delay_ms + self.by_peer.get(key, 0.0)) * 1e6))
        release = max(release, self.last_by_peer.get(key, 0))
        self.last_by_peer[key] = release
        at = len(self.queue)
        while at > 0 and self.queue[at - 1][0] > release:
            at -= 1
        self.queue.insert(at, (release, packet))  # the queue stays in release order
        return release

    def due(self, now_ns: int) -> Iterator[bytes]:
        """Pop every packet whose release time has come, in order."""
        while self.queue and self.queue[0][0] <= now_ns:
            self.forwarded += 1
            yield self.queue.popleft()[1]

    def next_release_ns(self) -> int | None:
        return self.queue[0][0] if self.queue else None


def _ip(*args: str) -> None:
    result = subprocess.run(["ip", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise LabUnavailable(f"ip {' '.join(args)}: {result.stderr.strip()}")


def check_available() -> None:
    """Raise LabUnavailable with the reason when this machine cannot host the lab."""
    if os.geteuid() != 0:
        raise LabUnavailable("needs root (network namespaces and TUN devices)")
    if shutil.which("ip") is None:
        raise LabUnavailable("iproute2 is not installed (apt-get install iproute2)")
    if not os.path.exists("/dev/net/tun"):
        raise LabUnavailable("no /dev/net/tun (TUN driver missing)")
    if not os.path.exists("/proc/self/ns/net"):
        raise LabUnavailable("the kernel has no network namespaces")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Delete lab namespaces whose owner process is gone; the names deleted.

    Only dead owners: another engineer's run on the same machine keeps its namespaces.
    """
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    removed = []
    for line in listing.splitlines():
        name = line.split(" ", 1)[0]
        match = _NS_PATTERN.match(name)
        if match and not _pid_alive(int(match.group(1))):
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
            removed.append(name)
    return removed


def _setns(path: str) -> None:
    """Move the calling thread into the network namespace at ``path``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, _CLONE_NEWNET) != 0:
            raise LabUnavailable(f"setns({path}): {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def enter_namespace(namespace: str) -> None:
    """Move the calling thread (and every process it starts later) into ``namespace``,
    for good: for a benchmark that measures from inside the client namespace."""
    _setns(f"/run/netns/{namespace}")


def _open_tun_in(namespace: str) -> int:
    """A TUN device created inside ``namespace``; its fd (non-blocking).

    A TUN device belongs to the namespace of the thread that opened /dev/net/tun, so this
    thread enters the namespace for the open and returns to its own right after.
    """
    own = f"/proc/self/task/{threading.get_native_id()}/ns/net"
    home = os.open(own, os.O_RDONLY)
    try:
        enter_namespace(namespace)
        try:
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
            try:
                request = struct.pack("16sH", TUN_NAME.encode(), _IFF_TUN | _IFF_NO_PI)
                fcntl.ioctl(fd, _TUNSETIFF, request)
            except OSError:
                os.close(fd)
                raise
        finally:
            if ctypes.CDLL(None, use_errno=True).setns(home, _CLONE_NEWNET) != 0:
                # Staying in the lab namespace would send this process's traffic there.
                reason = os.strerror(ctypes.get_errno())
                print(f"impairer: cannot return to the host namespace: {reason}", file=sys.stderr)
                os._exit(70)
    finally:
        os.close(home)
    return fd


@dataclass(slots=True)
class ImpairedPath:
    """A running lab: two namespaces, the addresses inside them, and the live pump."""

    client_ns: str
    server_ns: str
    up: Direction
    down: Direction
    client_addr: str = CLIENT_ADDR
    server_addr: str = SERVER_ADDR
    device: str = TUN_NAME

    @staticmethod
    def netns_exec(namespace: str) -> list[str]:
        """The command prefix that runs a program inside ``namespace``."""
        return ["ip", "netns", "exec", namespace]

    def client(self, *args: str) -> list[str]:
        return [*self.netns_exec(self.client_ns), *args]

    def server(self, *args: str) -> list[str]:
        return [*self.netns_exec(self.server_ns), *args]

    @contextlib.contextmanager
    def impaired(self, up: Impairment, down: Impairment) -> Iterator[None]:
        """Run the block with other impairments, then restore them: the pump reads a
        direction's impairment per packet, so the switch takes effect with the next one
        (a packet already queued keeps its release time; none leaves before it)."""
        saved = (self.up.impairment, self.down.impairment)
        self.up.impairment, self.down.impairment = up, down
        try:
            yield
        finally:
            self.up.impairment, self.down.impairment = saved

    def add_server_address(self, address: str, extra_ms: float) -> None:
        """One more IPv4 address in the server namespace, reached over the same TUN with
        ``extra_ms`` more delay each way than the path's own."""
        _ip("-n", self.server_ns, "addr", "add", f"{address}/32", "dev", self.device)
        _ip("-n", self.client_ns, "route", "add", f"{address}/32", "dev", self.device)
        key = socket.inet_aton(address)
        self.up.by_peer[key] = extra_ms
        self.down.by_peer[key] = extra_ms

    def counters(self) -> dict[str, dict[str, int]]:
        return {
            name: {"forwarded": d.forwarded, "lost": d.lost, "overflowed": d.overflowed}
            for name, d in (("up", self.up), ("down", self.down))
        }


def _pump(fds: tuple[int, int], directions: tuple[Direction, Direction], stop: int) -> None:
    """Move packets client TUN -> up -> server TUN and server TUN -> down -> client TUN."""
    with contextlib.suppress(OSError, AttributeError):
        # The default 50 µs slack would add up to that to every release.
        ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, 1, 0, 0, 0)
    with contextlib.suppress(OSError):
        # A path does not slow down when the machine is busy: real-time priority keeps
        # other processes from delaying a due packet. The pump sleeps between packets
        # and polls at most SPIN_NS, and the kernel caps real-time CPU at 95 % anyway.
        os.sched_setscheduler(
            threading.get_native_id(), os.SCHED_FIFO, os.sched_param(PUMP_PRIORITY)
        )
    outputs = (fds[1], fds[0])
    while True:
        now = time.monotonic_ns()
        for direction, out in zip(directions, outputs, strict=True):
            for packet in direction.due(now):
                with contextlib.suppress(BlockingIOError):
                    os.write(out, packet)  # a full device queue drops, as a link would
        releases = [r for d in directions if (r := d.next_release_ns()) is not None]
        timeout = None
        if releases:
            # select() wakes ~70 µs late on a busy VM: wake SPIN_NS early and poll the rest.
            wait_ns = min(releases) - time.monotonic_ns() - SPIN_NS
            timeout = max(0.0, wait_ns / 1e9)
        readable, _, _ = select.select([fds[0], fds[1], stop], [], [], timeout)
        if stop in readable:
            return
        for fd in readable:
            direction = directions[fds.index(fd)]
            while True:
                try:
                    packet = os.read(fd, _MAX_PACKET)
                except BlockingIOError:
                    break
                direction.admit(packet, time.monotonic_ns())


@contextlib.contextmanager
def impaired_path(up: Impairment, down: Impairment, *, seed: int = 0) -> Iterator[ImpairedPath]:
    """Create the two namespaces and TUN devices, pump packets until the block ends, and
    remove everything again. Raises LabUnavailable when the machine cannot do it."""
    check_available()
    sweep_stale()
    tag = f"{os.getpid()}-{secrets.token_hex(3)}"
    lab = ImpairedPath(
        client_ns=f"pp-cli-{tag}",
        server_ns=f"pp-srv-{tag}",
        up=Direction(up, random.Random(f"{seed}/up")),
        down=Direction(down, random.Random(f"{seed}/down"), peer_offset=12),
    )
    made: list[str] = []
    fds: list[int] = []

    def remove() -> None:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        fds.clear()
        for name in made:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        made.clear()

    atexit.register(remove)
    stop_r, stop_w = os.pipe()
    thread: threading.Thread | None = None
    try:
        for namespace, local, peer in (
            (lab.client_ns, CLIENT_ADDR, SERVER_ADDR),
            (lab.server_ns, SERVER_ADDR, CLIENT_ADDR),
        ):
            _ip("netns", "add", namespace)
            made.append(namespace)
            _ip("-n", namespace, "link", "set", "lo", "up")
            fds.append(_open_tun_in(namespace))
            _ip("-n", namespace, "addr", "add", local, "peer", peer, "dev", TUN_NAME)
            _ip("-n", namespace, "link", "set", TUN_NAME, "up")
        thread = threading.Thread(
            target=_pump,
            args=((fds[0], fds[1]), (lab.up, lab.down), stop_r),
            name="impairer",
            daemon=True,
        )
        thread.start()
        yield lab
    finally:
        os.write(stop_w, b"x")
        if thread is not None:
            thread.join(5)
        os.close(stop_r)
        os.close(stop_w)
        remove()
        atexit.unregister(remove)


@contextlib.contextmanager
def impairer_process(*cli_args: str) -> Iterator[dict[str, str]]:
    """``python -m tests.helpers.impairer CLI_ARGS`` as a process of its own (its pump then
    never waits for this process's GIL); yields its ready line (namespaces, addresses) and
    stops it, which removes the namespaces, when the block ends."""
    check_available()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.impairer", *cli_args],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise LabUnavailable(f"the impairer exited with status {process.wait(5)}")
        info: dict[str, str] = json.loads(line)
        yield info
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


# -- the lab's command line ------------------------------------------------------------


def _pair(text: str) -> tuple[float, float]:
    """``20`` (both directions) or ``30/10`` (up/down)."""
    parts = text.split("/")
    if len(parts) > 2:
        raise argparse.ArgumentTypeError(f"{text!r}: give VALUE or UP/DOWN")
    try:
        values = [float(p) for p in parts]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number") from exc
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: must not be negative")
    return values[0], values[-1]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.helpers.impairer",
        description="Two network namespaces joined by a user-space link with delay, jitter,"
        " loss and a rate limit. Each value is VALUE (both directions) or UP/DOWN"
        " (client to server / server to client). Runs until Ctrl-C, then removes both.",
    )
    parser.add_argument("--delay-ms", type=_pair, default=(0.0, 0.0), help="one-way delay")
    parser.add_argument("--jitter-ms", type=_pair, default=(0.0, 0.0), help="± uniform jitter")
    parser.add_argument("--loss", type=_pair, default=(0.0, 0.0), help="loss in percent")
    parser.add_argument("--rate-kbit", type=_pair, default=(0.0, 0.0), help="0 = unlimited")
    parser.add_argument("--seed", type=int, default=0, help="seed of the loss and jitter RNG")
    return parser


def _impairments(ns: argparse.Namespace) -> tuple[Impairment, Impairment]:
    if max(ns.loss) > 100:
        raise SystemExit("--loss is a percentage (0-100)")
    return tuple(  # type: ignore[return-value]
        Impairment(
            delay_ms=ns.delay_ms[i],
            jitter_ms=ns.jitter_ms[i],
            loss=ns.loss[i] / 100,
            rate_kbit=ns.rate_kbit[i],
        )
        for i in (0, 1)
    )


def main(argv: Sequence[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    up, down = _impairments(ns)
    # SIGTERM ends the block like Ctrl-C does, so the namespaces are removed either way.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        with impaired_path(up, down, seed=ns.seed) as lab:
            print(
                json.dumps(
                    {
                        "event": "ready",
                        "client_ns": lab.client_ns,
                        "server_ns": lab.server_ns,
                        "client_addr": lab.client_addr,
                        "server_addr": lab.server_addr,
                        "device": lab.device,
                    }
                ),
                flush=True,
            )
            print(
                f"server: ip netns exec {lab.server_ns} promptpath serve --host"
                f" {lab.server_addr} --port 8443 --self-signed /tmp/pp-lab-certs\n"
                f"client: ip netns exec {lab.client_ns} promptpath run"
                f" https://localhost:8443/v1/chat/completions"
                f" --resolve localhost:8443:{lab.server_addr} --cacert /tmp/pp-lab-certs/ca.pem\n"
                "Ctrl-C removes both namespaces.",
                file=sys.stderr,
                flush=True,
            )
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
            print(json.dumps({"event": "stopped", **lab.counters()}), flush=True)
    except LabUnavailable as exc:
        print(f"impairer: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
