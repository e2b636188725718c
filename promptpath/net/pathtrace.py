"""The path below HTTP, hop by hop: TCP SYNs (and, for HTTP/3, UDP datagrams) with rising
TTL toward the address and port a trace used, as ``mtr --tcp`` / tcptraceroute do.

No raw socket and no capability: on Linux an ordinary socket with ``IP_RECVERR``
(``IPV6_RECVERR``) receives the ICMP errors its own packets caused on its error queue,
with the address of the router that sent them (``SO_EE_OFFENDER``). A TCP probe is a
non-blocking ``connect()`` with a small TTL: a router's ICMP time-exceeded, the
destination's SYN/ACK (the connect completes; it is closed at once with a reset) or its
RST. A UDP probe is one 1200-byte datagram shaped as a QUIC long-header packet of a
reserved version (RFC 9000 §15: ``0x?a?a?a?a``): a QUIC server answers it with a Version
Negotiation packet, which says both "the destination" and "1200-byte datagrams get
through", the size QUIC's Initials need. UDP probes carry don't-fragment and ignore the path
MTU the kernel learnt (net/dontfrag.py, ``IP_PMTUDISC_PROBE``): a datagram the kernel
fragmented would reach a QUIC server real clients cannot. A router that cannot forward one
answers ICMP "fragmentation needed" / "packet too big" with its next link's MTU
(``too_big``); the probes past it would only hear the same, so the trace stops raising the
TTL there as at the destination.

Timing: ``perf_counter_ns`` right before ``connect()``/``send()`` and right after the
selector woke for that socket; the selector waits on every open probe at once.

With CAP_NET_RAW a raw ICMP socket listens beside the probes (net/rawicmp.py): the kernel
hands a TCP socket's error queue only ICMP whose quoted sequence number is in its window,
so behind a middlebox that rewrites sequence numbers the hops past it are heard only there.
A raw answer is used only for a probe the error queue left unanswered.
"""

from __future__ import annotations

import errno
import os
import secrets
import selectors
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import Literal

from promptpath.net import dontfrag, flows, rawicmp
from promptpath.net.errqueue import queued_error, recverr_option, too_big

Protocol = Literal["tcp", "udp"]
ReplyKind = Literal[
    "time_exceeded",  # a router on the way: TTL ran out there
    "unreachable",  # ICMP destination/port unreachable (from a router, or the destination)
    "synack",  # the destination accepted the connection
    "rst",  # the destination refused it (its own answer all the same)
    "quic_vn",  # the destination answered the UDP probe with QUIC version negotiation
    "too_big",  # the datagram does not fit the path: ICMP "fragmentation needed" / "packet
    # too big" from a router (its address the responder), or EMSGSIZE from this host's own
    # route (no responder); ``mtu`` says what fits
    "none",  # no answer within the timeout
]
DESTINATION_KINDS = ("synack", "rst", "quic_vn")


def at_destination(reply: ProbeReply, destination: str) -> bool:
    """The destination answered: SYN/ACK, RST, QUIC, or an ICMP error it sent itself
    (a closed UDP port, a host that prohibits the port)."""
    return reply.kind in DESTINATION_KINDS or (
        reply.responder is not None and reply.responder == destination
    )


def ends_trace(reply: ProbeReply, destination: str) -> bool:
    """Probes with a higher TTL would only repeat this answer: the destination's, or a
    datagram too big for the path (every later one stops at the same narrow link)."""
    return reply.kind == "too_big" or at_destination(reply, destination)


QUIC_PROBE_BYTES = 1200  # RFC 9000 §14.1: the smallest datagram an Initial may ride in
_GREASE_VERSION = 0x1A2A3A4A


class PathUnsupported(OSError):
    """This system cannot receive its probes' ICMP errors (no Linux error queue)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeReply:
    """One probe at one TTL, and what came back."""

    ttl: int
    round: int
    kind: ReplyKind
    responder: str | None = None  # who answered: a router, or the destination
    rtt_ns: int | None = None
    icmp: tuple[int, int] | None = None  # ICMP type and code, when an ICMP error came
    raw: bool = False  # heard on the raw ICMP socket, not the probe's error queue
    mtu: int | None = None  # too_big: the MTU the router (or this host's route) allows


@dataclass(frozen=True, slots=True, kw_only=True)
class Traced:
    """Every probe's reply, and what the raw listener and the kernel's counter add."""

    replies: list[ProbeReply] = field(default_factory=list)
    raw_reason: str | None = None  # why no raw ICMP socket listened (None: one did)
    #: ICMP errors this namespace's TCP dropped as out of window while the trace ran (None:
    #: the counter cannot be read here).
    out_of_window: int | None = None


def recverr_available(family: int) -> str | None:
    """None when this system delivers ICMP errors to an unprivileged socket; else why not."""
    if not sys.platform.startswith("linux"):
        return f"needs Linux error queues (IP_RECVERR); this is {sys.platform}"
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            level, option = recverr_option(family)
            s.setsockopt(level, option, 1)
    except OSError as exc:
        return f"this kernel refuses IP_RECVERR ({exc.strerror or exc})"
    return None


def quic_probe_datagram(size: int = QUIC_PROBE_BYTES) -> bytes:
    """A long-header Initial of a reserved version, padded to ``size`` bytes (1200: what a
    QUIC server answers; another size locates where full-size packets stop, net/mtu.py).

    Well-formed past the invariant header (token length 0, a length field that matches
    what follows) so that a server which parses the whole long header before it looks at
    the version still answers: aioquic (under hypercorn) drops a datagram whose length
    field overruns it, which random bytes there did for most probes (seen: 1 answer in 3)."""
    dcid, scid = secrets.token_bytes(8), secrets.token_bytes(8)
    head = bytes([0xC0]) + struct.pack(">I", _GREASE_VERSION)  # long header, Initial
    head += bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid
    head += b"\x00"  # token length 0
    rest = max(0, size - len(head) - 2)  # after a 2-byte length field
    head += struct.pack(">H", 0x4000 | rest)  # varint, 2 bytes: the length of what follows
    return head + secrets.token_bytes(rest)


@dataclass(slots=True)
class _Open:
    sock: socket.socket
    ttl: int
    round: int
    sent_ns: int
    address: str  # the destination's
    port: int  # our own, the one the ICMP quotes


def _open_probe(
    protocol: Protocol,
    family: int,
    address: tuple[str, int],
    ttl: int,
    rnd: int,
    datagram_bytes: int = QUIC_PROBE_BYTES,
) -> _Open | ProbeReply:
    """The probe, sent; or, when this host's own route refuses a datagram that large
    (EMSGSIZE: above the interface's MTU), the ``too_big`` answer that is."""
    kind = socket.SOCK_STREAM if protocol == "tcp" else socket.SOCK_DGRAM
    sock = socket.socket(family, kind)
    sock.setblocking(False)
    level, option = recverr_option(family)
    sock.setsockopt(level, option, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, ttl)
    else:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
    if protocol == "tcp":
        # A destination's SYN/ACK completes the connect: close it with a reset, not a FIN.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sent = time.perf_counter_ns()
        err = sock.connect_ex(address)
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            raise OSError(err, os.strerror(err))
    else:
        # DF, and the path MTU the kernel may have learnt ignored (dontfrag.py): a datagram
        # this host fragmented would reach a QUIC server that real clients cannot reach.
        dontfrag.forbid_fragmentation(sock, "probe")
        sock.connect(address)
        datagram = quic_probe_datagram(datagram_bytes)
        sent = time.perf_counter_ns()
        try:
            sock.send(datagram)
        except OSError as exc:
            if exc.errno != errno.EMSGSIZE:
                sock.close()
                raise
            mtu = dontfrag.path_mtu(sock)
            sock.close()
            return ProbeReply(ttl=ttl, round=rnd, kind="too_big", mtu=mtu)
    port = int(sock.getsockname()[1])
    flows.note_endpoints(
        flows.TCP if protocol == "tcp" else flows.UDP, (str(sock.getsockname()[0]), port), address
    )
    return _Open(sock=sock, ttl=ttl, round=rnd, sent_ns=sent, address=address[0], port=port)


def _answer(probe: _Open, protocol: Protocol, now: int) -> ProbeReply | None:
    """What the woken socket says: None when it woke for nothing yet."""

    def reply(
        kind: ReplyKind,
        responder: str | None,
        icmp: tuple[int, int] | None = None,
        mtu: int | None = None,
    ) -> ProbeReply:
        return ProbeReply(
            ttl=probe.ttl,
            round=probe.round,
            kind=kind,
            responder=responder,
            rtt_ns=now - probe.sent_ns,
            icmp=icmp,
            mtu=mtu,
        )

    try:
        _data, ancillary, _flags, _addr = probe.sock.recvmsg(512, 1024, socket.MSG_ERRQUEUE)
    except (BlockingIOError, InterruptedError):
        ancillary = None
    queued = None if ancillary is None else queued_error(ancillary)
    if ancillary is not None:
        family = probe.sock.family
        if queued is not None and queued.icmp is None:  # this host refused it itself
            if queued.errno == errno.EMSGSIZE:
                return reply("too_big", None, mtu=queued.info or None)
            return reply("unreachable", None)
        icmp = None if queued is None else queued.icmp
        responder = None if queued is None else queued.responder
        if queued is not None and too_big(family, icmp):
            return reply("too_big", responder, icmp, mtu=queued.info or None)
        # Time exceeded: ICMP type 11, ICMPv6 type 3; anything else says unreachable.
        exceeded = 3 if family == socket.AF_INET6 else 11
        kind: ReplyKind = "time_exceeded" if icmp and icmp[0] == exceeded else "unreachable"
        return reply(kind, responder, icmp)
    if protocol == "tcp":
        err = probe.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err == 0:
            return reply("synack", probe.address)
        if err == errno.ECONNREFUSED:
            return reply("rst", probe.address)
        return None
    try:
        probe.sock.recv(2048)
    except OSError:  # nothing yet (or an error the error queue will tell)
        return None
    return reply("quic_vn", probe.address)


def trace_path(
    address: tuple[str, int],
    family: int,
    *,
    protocol: Protocol = "tcp",
    rounds: int = 3,
    max_ttl: int = 15,
    timeout_s: float = 1.0,
    spacing_s: float = 0.005,
    raw: bool = True,
    datagram_bytes: int = QUIC_PROBE_BYTES,
) -> Traced:
    """Every probe's reply, ``rounds`` rounds of TTL 1.. (the first round stops raising
    the TTL once the destination answered, or a datagram was too big for the path; later
    rounds go only as far as it was); with ``raw``, a raw ICMP socket listens too where the
    process may open one. UDP probes are ``datagram_bytes`` long, sent with DF.

    Blocking: run it in a worker thread. Raises PathUnsupported where ICMP errors cannot
    be received unprivileged."""
    reason = recverr_available(family)
    if reason is not None:
        raise PathUnsupported(reason)
    listener, raw_reason = rawicmp.open_listener(family) if raw else (None, "not asked")
    before = rawicmp.out_of_window_icmps() if protocol == "tcp" else None
    replies: list[ProbeReply] = []
    limit = max_ttl
    try:
        for rnd in range(rounds):
            got = _one_round(
                address,
                family,
                protocol,
                rnd,
                limit,
                timeout_s,
                spacing_s,
                listener,
                datagram_bytes=datagram_bytes,
            )
            replies += got
            reached = [r.ttl for r in got if ends_trace(r, address[0])]
            if reached:
                limit = min(limit, min(reached))
    finally:
        if listener is not None:
            listener.close()
    after = rawicmp.out_of_window_icmps() if before is not None else None
    return Traced(
        replies=sorted(replies, key=lambda r: (r.ttl, r.round)),
        raw_reason=raw_reason,
        out_of_window=None if before is None or after is None else max(0, after - before),
    )


#: Raw-socket reads per wake at most: it hears every ICMP the host gets, not only ours.
RAW_READS_PER_WAKE = 64


def _hear(
    listener: socket.socket,
    family: int,
    protocol: Protocol,
    address: tuple[str, int],
    waiting: dict[int, _Open],
    heard: dict[int, ProbeReply],
    stamp: int,
) -> None:
    """Drain the raw socket; an ICMP error quoting one of the waiting probes is kept in
    ``heard`` (used only if that probe's error queue never answers)."""
    wanted = rawicmp.PROTO_TCP if protocol == "tcp" else rawicmp.PROTO_UDP
    by_port = {p.port: fd for fd, p in waiting.items()}
    exceeded = 3 if family == socket.AF_INET6 else 11
    for _ in range(RAW_READS_PER_WAKE):
        try:
            packet, sender = listener.recvfrom(2048)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return
        got = rawicmp.parse(packet, family, str(sender[0]))
        if got is None or got.protocol != wanted or got.destination_port != address[1]:
            continue
        fd = by_port.get(got.source_port)
        if fd is None or fd in heard or got.destination != address[0]:
            continue
        probe = waiting[fd]
        kind: ReplyKind = "time_exceeded" if got.icmp[0] == exceeded else "unreachable"
        heard[fd] = ProbeReply(
            ttl=probe.ttl,
            round=probe.round,
            kind="too_big" if too_big(family, got.icmp) else kind,
            responder=got.responder,
            rtt_ns=stamp - probe.sent_ns,
            icmp=got.icmp,
            raw=True,
            mtu=got.mtu if too_big(family, got.icmp) else None,
        )


def _one_round(
    address: tuple[str, int],
    family: int,
    protocol: Protocol,
    rnd: int,
    limit: int,
    timeout_s: float,
    spacing_s: float,
    listener: socket.socket | None = None,
    *,
    datagram_bytes: int = QUIC_PROBE_BYTES,
) -> list[ProbeReply]:
    selector = selectors.DefaultSelector()
    waiting: dict[int, _Open] = {}
    heard: dict[int, ProbeReply] = {}  # fd -> what the raw socket heard for that probe
    replies: list[ProbeReply] = []
    if listener is not None:
        selector.register(listener, selectors.EVENT_READ, data="raw")
    next_ttl, reached_at = 1, None
    events = selectors.EVENT_READ | (selectors.EVENT_WRITE if protocol == "tcp" else 0)
    next_send = time.perf_counter()
    try:
        while waiting or (next_ttl <= limit and reached_at is None):
            now = time.perf_counter()
            if next_ttl <= limit and reached_at is None and now >= next_send:
                probe = _open_probe(protocol, family, address, next_ttl, rnd, datagram_bytes)
                next_ttl += 1
                next_send = now + spacing_s
                if isinstance(probe, ProbeReply):  # refused by this host: nothing left
                    replies.append(probe)
                    reached_at = probe.ttl if reached_at is None else min(reached_at, probe.ttl)
                    continue
                waiting[probe.sock.fileno()] = probe
                selector.register(probe.sock, events)
            deadline = min((p.sent_ns for p in waiting.values()), default=time.perf_counter_ns())
            wait = deadline / 1e9 + timeout_s - time.perf_counter()
            if next_ttl <= limit and reached_at is None:
                wait = min(wait, max(0.0, next_send - time.perf_counter()))
            ready = selector.select(max(0.0, wait))
            stamp = time.perf_counter_ns()
            if listener is not None and any(key.data == "raw" for key, _m in ready):
                _hear(listener, family, protocol, address, waiting, heard, stamp)
            for key, _mask in ready:
                stamp = time.perf_counter_ns()
                woke = waiting.get(key.fd)
                if woke is None:
                    continue
                reply = _answer(woke, protocol, stamp)
                if reply is None:
                    continue
                replies.append(reply)
                if ends_trace(reply, address[0]):
                    reached_at = woke.ttl if reached_at is None else min(reached_at, woke.ttl)
                selector.unregister(woke.sock)
                woke.sock.close()
                del waiting[key.fd]
                heard.pop(key.fd, None)
            expired = time.perf_counter_ns() - int(timeout_s * 1e9)
            for fd, probe in list(waiting.items()):
                if probe.sent_ns <= expired:
                    late = heard.pop(fd, None)
                    replies.append(late or ProbeReply(ttl=probe.ttl, round=rnd, kind="none"))
                    if late is not None and ends_trace(late, address[0]):
                        reached_at = late.ttl if reached_at is None else min(reached_at, late.ttl)
                    selector.unregister(probe.sock)
                    probe.sock.close()
                    del waiting[fd]
    finally:
        for probe in waiting.values():
            probe.sock.close()
        selector.close()
    if reached_at is not None:  # probes past it only repeat its answer
        replies = [r for r in replies if r.ttl <= reached_at]
    return replies
