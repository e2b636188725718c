"""pcapng, written and read in pure code: the --pcap file and dumpcap's stream.

The blocks of the pcapng specification (draft-ietf-opsawg-pcapng) this needs, all
little-endian on write: a Section Header Block (0x0A0D0D0A), one Interface Description
Block (0x00000001) per interface, a Decryption Secrets Block (0x0000000A, secrets type
0x544C534B "TLSK": NSS key log lines, which carry QUIC's secrets too) before the first
packet, then an Enhanced Packet Block (0x00000006) per packet. Every block is
``type, total length, body padded to 32 bits, total length again``.

The reader takes a whole section stream (dumpcap's ``-w -``), either byte order, the
interface's ``if_tsresol`` honoured, and yields its enhanced and simple packets; blocks
it does not need are stepped over by their length. Bounded: a block whose length runs
past the data ends the reading (a cut capture keeps what came before).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

SHB = 0x0A0D0D0A
IDB = 0x00000001
SPB = 0x00000003
EPB = 0x00000006
DSB = 0x0000000A
#: The Decryption Secrets Block's type for the NSS key log format ("TLSK").
SECRETS_TLS_KEYLOG = 0x544C534B
_BYTE_ORDER_MAGIC = 0x1A2B3C4D

#: Link types used here (the tcpdump.org LINKTYPE_ registry).
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101  # an IPv4 or IPv6 packet, no link-layer header
LINKTYPE_LINUX_SLL = 113
LINKTYPE_LINUX_SLL2 = 276

#: The option codes written and read.
_OPT_END = 0
_IF_NAME = 2
_IF_TSRESOL = 9
_SHB_USERAPPL = 4

#: Snapshot length written: whole packets (the largest an interface can hand over).
SNAPLEN = 262144


@dataclass(frozen=True, slots=True, kw_only=True)
class Packet:
    """One captured packet: when (ns since the epoch), its link type, its bytes as seen."""

    ts_ns: int
    linktype: int
    data: bytes
    #: The length on the wire, when the capture cut the packet shorter than it was.
    orig_len: int | None = None


def _pad(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 4)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + _pad(value)


def _options(*pairs: tuple[int, bytes]) -> bytes:
    if not pairs:
        return b""
    return b"".join(_option(code, value) for code, value in pairs) + struct.pack("<HH", 0, 0)


def _block(kind: int, body: bytes) -> bytes:
    body = _pad(body)
    total = len(body) + 12
    return struct.pack("<II", kind, total) + body + struct.pack("<I", total)


def section_header(application: str) -> bytes:
    """The Section Header Block: byte-order magic, version 1.0, section length unknown."""
    body = struct.pack("<IHHq", _BYTE_ORDER_MAGIC, 1, 0, -1)
    return _block(SHB, body + _options((_SHB_USERAPPL, application.encode("utf-8"))))


def interface(linktype: int, name: str) -> bytes:
    """An Interface Description Block with nanosecond timestamps (``if_tsresol`` 9)."""
    body = struct.pack("<HHI", linktype, 0, SNAPLEN)
    return _block(IDB, body + _options((_IF_NAME, name.encode("utf-8")), (_IF_TSRESOL, b"\x09")))


def decryption_secrets(keylog: bytes) -> bytes:
    """A Decryption Secrets Block holding NSS key log lines (TLS and QUIC secrets)."""
    return _block(DSB, struct.pack("<II", SECRETS_TLS_KEYLOG, len(keylog)) + _pad(keylog))


def enhanced_packet(interface_id: int, packet: Packet) -> bytes:
    """An Enhanced Packet Block; the timestamp in ns, the interface's resolution."""
    high, low = packet.ts_ns >> 32, packet.ts_ns & 0xFFFFFFFF
    orig = len(packet.data) if packet.orig_len is None else packet.orig_len
    head = struct.pack("<IIIII", interface_id, high, low, len(packet.data), orig)
    return _block(EPB, head + _pad(packet.data))


def write(
    packets: Sequence[Packet],
    *,
    keylog: bytes = b"",
    application: str = "promptpath",
    interface_name: str = "promptpath",
) -> bytes:
    """One pcapng section: the header, an interface per link type in order of first use,
    the secrets (when there are any) before the first packet, then the packets."""
    ids: dict[int, int] = {}
    for packet in packets:
        ids.setdefault(packet.linktype, len(ids))
    out = [section_header(application)]
    out.extend(interface(linktype, interface_name) for linktype in ids)
    if keylog:
        out.append(decryption_secrets(keylog))
    out.extend(enhanced_packet(ids[p.linktype], p) for p in packets)
    return b"".join(out)


@dataclass(slots=True)
class _Interface:
    linktype: int
    units_per_s: int = 1_000_000  # if_tsresol absent: microseconds


def _tsresol(value: int) -> int:
    exponent = value & 0x7F
    return int(2**exponent) if value & 0x80 else int(10**exponent)


def _read_tsresol(options: bytes, order: str) -> int | None:
    at = 0
    while at + 4 <= len(options):
        code, length = struct.unpack_from(order + "HH", options, at)
        at += 4
        if code == _OPT_END:
            return None
        if code == _IF_TSRESOL and length >= 1:
            return _tsresol(options[at])
        at += length + (-length % 4)
    return None


def read(data: bytes) -> Iterator[Packet]:
    """The packets of a pcapng stream (one section or several), in file order."""
    order = "<"
    interfaces: list[_Interface] = []
    at = 0
    while at + 12 <= len(data):
        (kind,) = struct.unpack_from(order + "I", data, at)  # SHB's type reads alike both ways
        if kind == SHB:
            magic = data[at + 8 : at + 12]
            order = "<" if magic == struct.pack("<I", _BYTE_ORDER_MAGIC) else ">"
            interfaces = []  # interface ids count from 0 in each section
        (total,) = struct.unpack_from(order + "I", data, at + 4)
        if total < 12 or total % 4 or at + total > len(data):
            return  # a cut or damaged block: keep what came before
        body = data[at + 8 : at + total - 4]
        if kind == IDB and len(body) >= 8:
            (linktype,) = struct.unpack_from(order + "H", body, 0)
            iface = _Interface(linktype)
            resolution = _read_tsresol(body[8:], order)
            if resolution is not None:
                iface.units_per_s = resolution
            interfaces.append(iface)
        elif kind == EPB and len(body) >= 20:
            ifid, high, low, caplen, orig = struct.unpack_from(order + "IIIII", body, 0)
            if ifid < len(interfaces) and 20 + caplen <= len(body):
                iface = interfaces[ifid]
                stamp = (high << 32) | low
                yield Packet(
                    ts_ns=stamp * 1_000_000_000 // iface.units_per_s,
                    linktype=iface.linktype,
                    data=bytes(body[20 : 20 + caplen]),
                    orig_len=orig if orig != caplen else None,
                )
        elif kind == SPB and len(body) >= 4 and interfaces:
            (orig,) = struct.unpack_from(order + "I", body, 0)
            yield Packet(ts_ns=0, linktype=interfaces[0].linktype, data=bytes(body[4 : 4 + orig]))
        at += total


def secrets_of(data: bytes) -> bytes:
    """The key log lines of every TLSK Decryption Secrets Block in a pcapng stream."""
    out = []
    at = 0
    while at + 12 <= len(data):
        kind, total = struct.unpack_from("<II", data, at)
        if total < 12 or at + total > len(data):
            break
        if kind == DSB:
            stype, length = struct.unpack_from("<II", data, at + 8)
            if stype == SECRETS_TLS_KEYLOG:
                out.append(data[at + 16 : at + 16 + length])
        at += total
    return b"".join(out)


__all__ = [
    "LINKTYPE_ETHERNET",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_LINUX_SLL2",
    "LINKTYPE_RAW",
    "SECRETS_TLS_KEYLOG",
    "Packet",
    "decryption_secrets",
    "enhanced_packet",
    "interface",
    "read",
    "secrets_of",
    "section_header",
    "write",
]
