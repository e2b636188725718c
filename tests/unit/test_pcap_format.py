"""--pcap's pure parts: the pcapng blocks written and read back, which packets are the
run's own, and the refusals before any request. (tshark reading our file, and the
captures themselves, are in tests/lab/test_pcap.py.)"""

from __future__ import annotations

import ipaddress
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from promptpath.core import pcapng
from promptpath.core.errors import UsageError
from promptpath.core.packets import FlowSet, dns_question, ip_of, own_packets, parse_ip
from promptpath.plan.resolve import Values, resolve

TCP, UDP = 6, 17


def ipv4(src: str, dst: str, proto: int, payload: bytes) -> bytes:
    head = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        20 + len(payload),
        0,
        0,
        64,
        proto,
        0,
        ipaddress.IPv4Address(src).packed,
        ipaddress.IPv4Address(dst).packed,
    )
    return head + payload


def ipv6(src: str, dst: str, proto: int, payload: bytes) -> bytes:
    head = struct.pack("!IHBB", 6 << 28, len(payload), proto, 64)
    return head + ipaddress.IPv6Address(src).packed + ipaddress.IPv6Address(dst).packed + payload


def tcp(sport: int, dport: int, data: bytes = b"") -> bytes:
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x18, 65535, 0, 0) + data


def udp(sport: int, dport: int, data: bytes = b"") -> bytes:
    return struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data


def dns_query(name: str) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + labels + b"\0\1\0\1"


def raw(data: bytes, ts: int = 1) -> pcapng.Packet:
    return pcapng.Packet(ts_ns=ts, linktype=pcapng.LINKTYPE_RAW, data=data)


def test_written_packets_read_back_with_their_nanosecond_stamps() -> None:
    packets = [raw(b"\x45" + bytes(n), ts=1_796_592_031_452_898_225 + n) for n in (19, 40, 41)]
    data = pcapng.write(packets, keylog=b"CLIENT_RANDOM aa bb\n")
    assert len(data) % 4 == 0
    assert list(pcapng.read(data)) == packets
    assert pcapng.secrets_of(data) == b"CLIENT_RANDOM aa bb\n"


def test_the_secrets_block_comes_before_the_first_packet() -> None:
    data = pcapng.write([raw(b"\x45" + bytes(19))], keylog=b"X\n")
    kinds, at = [], 0
    while at < len(data):
        kind, total = struct.unpack_from("<II", data, at)
        kinds.append(kind)
        at += total
    assert kinds == [pcapng.SHB, pcapng.IDB, pcapng.DSB, pcapng.EPB]
    # Without secrets there is no block for them.
    assert pcapng.DSB not in _kinds(pcapng.write([raw(b"\x45" + bytes(19))]))


def _kinds(data: bytes) -> list[int]:
    out, at = [], 0
    while at < len(data):
        kind, total = struct.unpack_from("<II", data, at)
        out.append(kind)
        at += total
    return out


def test_a_big_endian_section_in_microseconds_reads_right() -> None:
    """dumpcap writes the host's order; another machine's file may be big-endian, and a
    file without if_tsresol counts microseconds."""
    shb_body = struct.pack(">IHHq", 0x1A2B3C4D, 1, 0, -1)
    idb_body = struct.pack(">HHI", pcapng.LINKTYPE_ETHERNET, 0, 65535)
    frame = bytes(12) + b"\x08\x00" + ipv4("127.0.0.1", "127.0.0.2", UDP, udp(1, 2))
    pad = b"\0" * (-len(frame) % 4)
    epb_body = struct.pack(">IIIII", 0, 0, 1_500_000, len(frame), len(frame)) + frame + pad

    def block(kind: int, body: bytes) -> bytes:
        return struct.pack(">II", kind, len(body) + 12) + body + struct.pack(">I", len(body) + 12)

    data = block(pcapng.SHB, shb_body) + block(pcapng.IDB, idb_body) + block(pcapng.EPB, epb_body)
    (packet,) = pcapng.read(data)
    assert packet.ts_ns == 1_500_000_000 and packet.data == frame
    assert ip_of(packet) == frame[14:]


def test_a_cut_stream_keeps_the_packets_before_the_cut() -> None:
    data = pcapng.write([raw(b"\x45" + bytes(19), ts=5), raw(b"\x45" + bytes(39), ts=6)])
    assert [p.ts_ns for p in pcapng.read(data[:-10])] == [5]


@given(st.binary(max_size=300))
def test_any_bytes_read_without_an_exception(data: bytes) -> None:
    list(pcapng.read(data))
    parse_ip(data)
    dns_question(data)


def test_only_the_runs_flows_are_kept() -> None:
    flows = FlowSet(
        exact={(TCP, ("127.0.0.1", 40000), ("127.0.0.1", 8443))},
        remote_only={(TCP, ("10.9.9.9", 443))},
        names={"api.example"},
    )
    ours = [
        ipv4("127.0.0.1", "127.0.0.1", TCP, tcp(40000, 8443, b"hello")),
        ipv4("127.0.0.1", "127.0.0.1", TCP, tcp(8443, 40000)),  # the reply
        ipv4("10.0.0.1", "10.9.9.9", TCP, tcp(51000, 443)),  # a SYN that got no answer
        ipv4("127.0.0.1", "127.0.0.53", UDP, udp(41000, 53, dns_query("API.example"))),
    ]
    theirs = [
        ipv4("127.0.0.1", "127.0.0.1", TCP, tcp(40001, 8443)),  # another client, same server
        ipv4("127.0.0.1", "127.0.0.53", UDP, udp(41000, 53, dns_query("other.example"))),
        ipv4("127.0.0.1", "127.0.0.1", UDP, udp(40000, 8443)),  # same ports, other protocol
    ]
    kept = own_packets([raw(p) for p in ours + theirs], flows)
    assert [p.data for p in kept] == ours


def test_ipv6_flows_and_ethernet_frames() -> None:
    flows = FlowSet(exact={(UDP, ("::1", 5000), ("::1", 443))})
    packet = ipv6("::1", "::1", UDP, udp(443, 5000, b"quic"))
    frame = pcapng.Packet(
        ts_ns=1, linktype=pcapng.LINKTYPE_ETHERNET, data=bytes(12) + b"\x86\xdd" + packet
    )
    (kept,) = own_packets([frame], flows)
    assert kept.data == packet and kept.linktype == pcapng.LINKTYPE_RAW


def test_dns_over_tcp_is_kept_by_its_question() -> None:
    query = dns_query("api.example")
    packet = ipv4("127.0.0.1", "127.0.0.1", TCP, tcp(40000, 53, len(query).to_bytes(2) + query))
    assert FlowSet(names={"api.example"}).matches(packet)
    assert not FlowSet(names={"x.example"}).matches(packet)


def _values(tmp_path: Path, target: str, **more: object) -> Values:
    from promptpath.plan import flags

    given: dict[str, object] = {f.dest: f.default for f in flags.FLAGS}
    given.update(target=target, pcap=str(tmp_path / "run.pcapng"), **more)
    return Values(given)


def test_a_key_bound_for_plain_http_is_refused_before_the_run(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-test-pcap-refusal"}
    with pytest.raises(UsageError) as caught:
        resolve(_values(tmp_path, "http://127.0.0.1:9/v1/chat/completions"), environ=env)
    assert caught.value.kind == "cleartext_key"
    assert "--pcap" in caught.value.message and "sk-test" not in caught.value.message
    assert not (tmp_path / "run.pcapng").exists()


def test_a_loopback_target_is_captured_on_lo_and_any_other_on_every_interface(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The way to capture is the machine's (tests/lab/test_pcap.py takes both for real).
    monkeypatch.setattr("promptpath.net.capture.available_way", lambda _environ: "dumpcap")
    local = resolve(_values(tmp_path, "https://localhost:8443/v1/chat/completions"), environ={})
    assert local.outputs.pcap is not None and local.outputs.pcap.interface == "lo"
    far = resolve(
        _values(
            tmp_path,
            "https://api.example/v1/chat/completions",
            resolve=["api.example:443:127.0.0.1"],
        ),
        environ={},
    )
    assert far.outputs.pcap is not None and far.outputs.pcap.interface == "lo"
    wide = resolve(_values(tmp_path, "https://api.example/v1/chat/completions"), environ={})
    assert wide.outputs.pcap is not None and wide.outputs.pcap.interface == "any"


def test_a_key_given_with_h_for_plain_http_is_refused_too(tmp_path: Path) -> None:
    values = _values(
        tmp_path, "http://127.0.0.1:9/v1/chat/completions", header=["x-api-key: abc-secret-1"]
    )
    with pytest.raises(UsageError) as caught:
        resolve(values, environ={})
    assert caught.value.kind == "cleartext_key" and "abc-secret" not in caught.value.message


def test_the_capture_and_another_export_cannot_share_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("promptpath.net.capture.available_way", lambda _environ: "dumpcap")
    values = _values(
        tmp_path, "https://localhost:8443/v1/chat/completions", har=str(tmp_path / "run.pcapng")
    )
    with pytest.raises(UsageError, match="--har and --pcap name the same file"):
        resolve(values, environ={})


def test_an_icmp_error_is_kept_when_it_quotes_one_of_our_packets() -> None:
    """On loopback every address is 127.0.0.1: the quoted packet decides, not the address."""
    flows = FlowSet(exact={(UDP, ("127.0.0.1", 40000), ("127.0.0.1", 8443))})
    ours = ipv4("127.0.0.1", "127.0.0.1", UDP, udp(40000, 8443, b"quic"))
    theirs = ipv4("127.0.0.1", "127.0.0.1", UDP, udp(51488, 40926, b"dns"))

    def unreachable(quoted: bytes) -> bytes:
        return ipv4("127.0.0.1", "127.0.0.1", 1, bytes([3, 3, 0, 0, 0, 0, 0, 0]) + quoted[:28])

    assert flows.matches(unreachable(ours))
    assert not flows.matches(unreachable(theirs))
    # An ICMP error quoting an ICMP error is never ours (and never recursed into).
    assert not flows.matches(unreachable(unreachable(ours)))
