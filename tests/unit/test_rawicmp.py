"""The raw ICMP listener's parsing, the kernel counter's reading, and what the path verdict
says when the kernel refused ICMP to the probe sockets (a sequence-rewriting middlebox)."""

from __future__ import annotations

import socket
import struct

from promptpath.core.findings import Verdict
from promptpath.net.rawicmp import PROTO_TCP, PROTO_UDP, parse, read_counter
from promptpath.probes.path.hops import Sample
from promptpath.probes.path.verdict import Listening, judge


def _ipv4(src: str, dst: str, protocol: int, payload: bytes, ttl: int = 64) -> bytes:
    head = struct.pack(
        ">BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(payload),
        0,
        0,
        ttl,
        protocol,
        0,
        socket.inet_aton(src),
        socket.inet_aton(dst),
    )
    return head + payload


def _quoted_tcp(sport: int, dport: int) -> bytes:
    return struct.pack(">HHI", sport, dport, 12345)  # the 8 bytes RFC 792 guarantees


def test_an_ipv4_time_exceeded_names_the_router_and_the_quoted_probe() -> None:
    inner = _ipv4("10.0.0.1", "192.0.2.9", PROTO_TCP, _quoted_tcp(40000, 443), ttl=1)
    icmp = bytes([11, 0, 0, 0, 0, 0, 0, 0]) + inner
    heard = parse(_ipv4("10.0.1.1", "10.0.0.1", 1, icmp), socket.AF_INET, "ignored")
    assert heard is not None
    assert heard.responder == "10.0.1.1" and heard.icmp == (11, 0)
    assert (heard.protocol, heard.source_port) == (PROTO_TCP, 40000)
    assert (heard.destination, heard.destination_port) == ("192.0.2.9", 443)


def test_an_icmpv6_unreachable_quoting_udp_is_read_from_the_message_alone() -> None:
    src = socket.inet_pton(socket.AF_INET6, "2001:db8::1")
    dst = socket.inet_pton(socket.AF_INET6, "2001:db8::9")
    inner = struct.pack(">IHBB", 0x60000000, 8, PROTO_UDP, 1) + src + dst
    inner += struct.pack(">HHHH", 50000, 8443, 8, 0)
    heard = parse(bytes([1, 4, 0, 0, 0, 0, 0, 0]) + inner, socket.AF_INET6, "2001:db8::7")
    assert heard is not None
    assert heard.responder == "2001:db8::7" and heard.icmp == (1, 4)
    assert (heard.protocol, heard.source_port, heard.destination_port) == (PROTO_UDP, 50000, 8443)
    assert heard.destination == "2001:db8::9"


def test_fragmentation_needed_and_packet_too_big_carry_the_next_links_mtu() -> None:
    # RFC 1191: ICMP type 3 code 4, 2 unused bytes then the next-hop MTU (16 bits).
    inner = _ipv4("10.0.0.1", "192.0.2.9", PROTO_UDP, struct.pack(">HHHH", 40000, 443, 8, 0))
    icmp = bytes([3, 4, 0, 0, 0, 0]) + struct.pack(">H", 1100) + inner
    heard = parse(_ipv4("10.0.1.1", "10.0.0.1", 1, icmp), socket.AF_INET, "")
    assert heard is not None and heard.icmp == (3, 4) and heard.mtu == 1100
    # RFC 4443: ICMPv6 type 2, the MTU in 32 bits.
    src = socket.inet_pton(socket.AF_INET6, "2001:db8::1")
    dst = socket.inet_pton(socket.AF_INET6, "2001:db8::9")
    inner6 = struct.pack(">IHBB", 0x60000000, 8, PROTO_UDP, 1) + src + dst
    inner6 += struct.pack(">HHHH", 50000, 443, 8, 0)
    big = parse(bytes([2, 0, 0, 0]) + struct.pack(">I", 1280) + inner6, socket.AF_INET6, "::7")
    assert big is not None and big.icmp == (2, 0) and big.mtu == 1280
    # Other errors carry none (the same bytes in a port unreachable mean nothing).
    unreachable = bytes([3, 3, 0, 0, 0, 0]) + struct.pack(">H", 1100) + inner
    other = parse(_ipv4("10.0.1.1", "10.0.0.1", 1, unreachable), socket.AF_INET, "")
    assert other is not None and other.mtu is None


def _ancillary(origin: int, icmp: tuple[int, int], info: int, offender: bytes) -> bytes:
    return struct.pack("=IBBBBII", 90, origin, icmp[0], icmp[1], 0, info, 0) + offender


def test_the_error_queue_says_who_sent_too_big_and_the_mtu_or_that_this_host_refused() -> None:
    from promptpath.net.errqueue import queued_error, too_big

    # As Linux hands it over (checked on the lab's 1100-byte link): sock_extended_err
    # (errno EMSGSIZE, origin ICMP, type 3, code 4, ee_info 1100), then the router's
    # sockaddr_in (SO_EE_OFFENDER).
    router = struct.pack("=HH4s8x", socket.AF_INET, 0, socket.inet_aton("10.203.2.2"))
    got = queued_error([(socket.IPPROTO_IP, 11, _ancillary(2, (3, 4), 1100, router))])
    assert got is not None
    assert (got.responder, got.icmp, got.info, got.errno) == ("10.203.2.2", (3, 4), 1100, 90)
    assert too_big(socket.AF_INET, got.icmp) and not too_big(socket.AF_INET, (3, 3))
    assert too_big(socket.AF_INET6, (2, 0)) and not too_big(socket.AF_INET6, (1, 4))
    # Origin local: this host refused the datagram itself (a send above the path MTU it
    # knows with IP_PMTUDISC_DO), no router, the MTU in ee_info.
    local = queued_error([(socket.IPPROTO_IP, 11, _ancillary(1, (0, 0), 1100, bytes(16)))])
    assert local is not None and local.responder is None and local.icmp is None
    assert local.info == 1100
    assert queued_error([(socket.IPPROTO_IP, 11, b"short")]) is None


def test_echo_replies_and_truncated_quotes_are_not_ours() -> None:
    echo = _ipv4("10.0.1.1", "10.0.0.1", 1, bytes([0, 0, 0, 0, 0, 0, 0, 0]))
    assert parse(echo, socket.AF_INET, "") is None
    short = _ipv4("10.0.1.1", "10.0.0.1", 1, bytes([11, 0, 0, 0, 0, 0, 0, 0]) + b"\x45\x00")
    assert parse(short, socket.AF_INET, "") is None
    assert parse(b"", socket.AF_INET6, "::1") is None


def test_the_out_of_window_counter_is_read_from_the_tcpext_rows() -> None:
    text = (
        "TcpExt: SyncookiesSent OutOfWindowIcmps LockDroppedIcmps\n"
        "TcpExt: 0 7 0\n"
        "IpExt: InNoRoutes\n"
        "IpExt: 0\n"
    )
    assert read_counter(text) == 7
    assert read_counter("IpExt: InNoRoutes\nIpExt: 0\n") is None


def _behind_a_rewriter() -> list[Sample]:
    first = [Sample(ttl=1, kind="time_exceeded", responder="10.0.0.1", rtt_ms=1.0)] * 3
    rest = [Sample(ttl=t, kind="none", responder=None, rtt_ms=None) for t in (2, 3) for _ in "abc"]
    return [*first, *rest]


def test_dropped_icmp_without_the_capability_names_the_middlebox_and_the_capability() -> None:
    finding = judge(
        destination="192.0.2.9",
        port=443,
        tcp=_behind_a_rewriter(),
        udp=None,
        connect_ms=None,
        elapsed_s=3.2,
        listening=Listening(reason="no CAP_NET_RAW (not root)", out_of_window=6),
    )
    assert finding.verdict is Verdict.WARN
    assert "dropped 6 ICMP error(s) as out of window" in finding.summary
    assert "nothing from hop 2 to hop 3" in finding.summary
    assert finding.evidence["silent"] == []  # where the trace ran out, not hops it passed
    assert any("CAP_NET_RAW" in a and "no CAP_NET_RAW (not root)" in a for a in finding.advice)
    raw = finding.evidence["raw_icmp"]
    assert raw == {
        "listening": False,
        "reason": "no CAP_NET_RAW (not root)",
        "heard": 0,
        "out_of_window_icmps": 6,
    }
    # Listening (root): nothing to advise about the capability.
    heard = judge(
        destination="192.0.2.9",
        port=443,
        tcp=_behind_a_rewriter(),
        udp=None,
        connect_ms=None,
        elapsed_s=3.2,
        listening=Listening(reason=None, heard=0, out_of_window=6),
    )
    assert not any("CAP_NET_RAW" in a for a in heard.advice)
