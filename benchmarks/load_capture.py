"""Load mode's arrival error split at the wire (`bench_load.py --capture`).

dumpcap captures `lo` on the reference endpoint's port while the load runs; the client's
TLS keys go to SSLKEYLOGFILE, so tshark decrypts the HTTP/2 DATA frames and finds each
event's ``sent_unix_ns`` in the packet that completed its frame. Per content event:

    server  = wire − server send   the packet's capture stamp − the event's sent_unix_ns:
                                   the endpoint's own lateness (hypercorn framing and
                                   flushing the event in its own task, TLS, the send)
    ours    = our stamp − wire     what our stamp adds: 0 when the read took that packet
                                   alone; a later packet's arrival when the kernel merged
                                   packets that waited in the receive queue (TCP keeps the
                                   last one's stamp for the merged bytes)

so arrival error = server + ours. All three clocks are CLOCK_REALTIME on one host (the
capture's stamps, the server's time.time_ns(), our kernel receive stamps mapped back to
wall clock at t0). An event whose "ours" exceeds ``MERGED_MS`` is counted, and checked
against the flow's later packets: "merged" when our stamp is within ``SAME_PACKET_MS``
of one of them (the read's last packet), "other" otherwise.
"""

from __future__ import annotations

import bisect
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from promptpath.core.stats import percentile
from promptpath.tracer.orchestrator import TraceResult

MERGED_MS = 0.1  # the brief's threshold: "ours" above it is counted
SAME_PACKET_MS = 0.02  # a capture stamp and a kernel receive stamp of one packet
_SENT = re.compile(rb'"sent_unix_ns":(\d+)')


def _epoch_ns(text: str) -> int:
    """tshark's frame.time_epoch ("1796187781.280463518") in integer ns, exactly."""
    sec, _, frac = text.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


@dataclass(slots=True)
class Wire:
    """What the capture saw of the server's side of the load."""

    #: Per event's sent_unix_ns: (TCP stream number, capture stamp of the packet that
    #: completed its DATA frame, in unix ns).
    events: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: Per TCP stream: capture stamps (unix ns) of every server packet carrying payload.
    packets: dict[int, list[int]] = field(default_factory=dict)


def read_wire(pcap: Path, keylog: Path, server_port: int) -> Wire:
    """The server's packets and the events they completed, decrypted with the key log."""
    cmd = [
        *("tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keylog}"),
        *("-Y", f"tcp.srcport == {server_port} && tcp.len > 0"),
        *("-T", "fields", "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"),
        *("-e", "frame.time_epoch", "-e", "tcp.stream", "-e", "http2.data.data"),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    wire = Wire()
    for row in out.splitlines():
        epoch, stream_text, data = [*row.split("\t"), "", ""][:3]
        t_ns, stream = _epoch_ns(epoch), int(stream_text)
        wire.packets.setdefault(stream, []).append(t_ns)
        for chunk in filter(None, data.split(",")):
            for match in _SENT.finditer(bytes.fromhex(chunk)):
                # The first packet to show an event completed its frame; tshark shows the
                # stream's whole body again with its END_STREAM frame.
                wire.events.setdefault(int(match.group(1)), (stream, t_ns))
    for stamps in wire.packets.values():
        stamps.sort()
    return wire


@dataclass(slots=True)
class Split:
    """The arrival error of a trial's content events, split at the wire (ms)."""

    total: list[float] = field(default_factory=list)
    server: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)
    unmatched: int = 0
    merged: int = 0  # "ours" > MERGED_MS and our stamp is a later packet's
    other: int = 0  # "ours" > MERGED_MS otherwise
    #: Of the events whose total error is at or above the total's p99: how many had more
    #: of it on the server's side than ours.
    tail: int = 0
    tail_server: int = 0


def split(results: list[TraceResult], wire: Wire) -> Split:
    """Each content event's error = (wire − server send) + (our stamp − wire)."""
    out = Split()
    pairs: list[tuple[float, float]] = []
    for result in results:
        tl = result.timeline
        for e in tl.events:
            if e.kind != "content" or not e.server_sent_unix_ns:
                continue
            seen = wire.events.get(e.server_sent_unix_ns)
            if seen is None:
                out.unmatched += 1
                continue
            stream, wire_ns = seen
            ours_unix = tl.t0_unix_ns + (e.t_ns - tl.t0_ns)
            server_ms = (wire_ns - e.server_sent_unix_ns) / 1e6
            ours_ms = (ours_unix - wire_ns) / 1e6
            out.total.append(server_ms + ours_ms)
            out.server.append(server_ms)
            out.ours.append(ours_ms)
            pairs.append((server_ms, ours_ms))
            if ours_ms > MERGED_MS:
                later = wire.packets[stream]
                i = bisect.bisect_left(later, ours_unix - int(SAME_PACKET_MS * 1e6))
                if i < len(later) and abs(later[i] - ours_unix) <= SAME_PACKET_MS * 1e6:
                    out.merged += 1
                else:
                    out.other += 1
    if out.total:
        p99 = percentile(out.total, 99)
        tail = [(s, o) for s, o in pairs if s + o >= p99]
        out.tail = len(tail)
        out.tail_server = sum(1 for s, o in tail if s > o)
    return out


def report(name: str, s: Split, line: Callable[[str, list[float]], str]) -> None:
    """Print a trial's split; ``line`` is bench_load's median/p99/max formatter."""
    if not s.total:
        print(f"  {name}: no event matched the capture ({s.unmatched} unmatched)")
        return
    print(f"{name}, split at the wire:")
    print(line("  arrival − server send (matched)", s.total))
    print(line("  (a) wire − server send (server)", s.server))
    print(line("  (b) our stamp − wire (ours)", s.ours))
    print(
        f"  (b) > {MERGED_MS:g} ms: {s.merged + s.other} of {len(s.ours)} events"
        f" ({s.merged} at a later packet's stamp: merged in the receive queue,"
        f" {s.other} other); {s.unmatched} not in the capture; of the {s.tail} events"
        f" at or above the p99, {s.tail_server} late mostly on the server's side"
    )
