"""The path-MTU verdict, from the handshakes ``net.mtu.check`` made, and where the path
narrows, from ``net.mtu.locate``'s traces. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.path.hops import Hop, Sample, hops_of, name_of

PROBE = "mtu"
ADVICE = (
    "clamp the MSS where the path narrows (a tunnel or VPN: iptables -t mangle -A FORWARD -p"
    " tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu, or nft's `tcp option maxseg"
    " size set rt mtu`), or let ICMP type 3 code 4 (ICMPv6 type 2, packet too big) through"
    " the firewall so senders learn the path MTU"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    mss: int | None  # None: the kernel's own
    completed: bool
    elapsed_ms: float
    received: int
    error: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """Where full-size packets toward the server stop (``after_hop`` None: not placed)."""

    packet_bytes: int
    after_hop: int | None
    before_hop: Hop | None  # the next hop small probes reach, when one does
    responder: str | None  # the hop before the narrow link, or who said "too big"
    mtu: int | None  # the narrow link's, when an ICMP "fragmentation needed" told it
    by: Literal["icmp", "silence", "local"] | None
    sentence: str

    def as_dict(self) -> dict[str, object]:
        return {
            "packet_bytes": self.packet_bytes,
            "after_hop": self.after_hop,
            "before_hop": None if self.before_hop is None else self.before_hop.ttl,
            "responder": self.responder,
            "mtu": self.mtu,
            "by": self.by,
        }


def _named(hop: Hop) -> str:
    return f"hop {hop.ttl} ({name_of(hop)})"


def place(
    big: Sequence[Sample], small: Sequence[Sample], destination: str, *, packet_bytes: int
) -> Place:
    """Where ``packet_bytes``-byte probes (``big``, DF) stop that small ones (``small``)
    get past. A router answers time-exceeded before it checks the size, so the hop before
    the narrow link still answers full-size probes; past it they draw its "fragmentation
    needed" (``too_big``) or, where that is filtered too, nothing."""
    big_hops = hops_of([b for b in big if b.kind != "too_big"], destination)
    small_hops = hops_of(small, destination)
    hops = {h.ttl: h for h in [*small_hops, *big_hops] if h.responders}
    full = f"{packet_bytes}-byte packets toward the server"

    def placed(
        after: int, responder: str | None, mtu: int | None, by: Literal["icmp", "silence"]
    ) -> Place:
        before = next((h for h in small_hops if h.ttl > after and h.rtts_ms), None)
        last = _named(hops[after]) if after in hops else f"hop {after}"
        if by == "icmp":
            told = f"at most {mtu} bytes" if mtu else "only smaller packets"
            where = f"after {last}" + ("" if before is None else f", before {_named(before)}")
            text = (
                f"{full} stop {where}: the link there carries {told} (ICMP 'fragmentation"
                f" needed' from {responder}, which reaches us; that ICMP taught this host the"
                " path MTU for about 10 minutes, so its own connections to the server meanwhile"
                " use smaller packets and a run from here does not see the black hole)"
            )
        else:
            past = "from any hop" if after == 0 else f"past {last}"
            small = "" if before is None else f" while small ones are answered by {_named(before)}"
            text = (
                f"{full} get no answer {past}{small}: the path narrows"
                + (" before the first hop" if after == 0 else " after it")
                + ", and the ICMP 'fragmentation needed' is filtered toward us as well"
            )
        return Place(
            packet_bytes=packet_bytes,
            after_hop=after,
            before_hop=before,
            responder=responder,
            mtu=mtu,
            by=by,
            sentence=text,
        )

    too_big = sorted((b for b in big if b.kind == "too_big"), key=lambda b: b.ttl)
    if too_big and too_big[0].responder is None:
        mtu = too_big[0].mtu
        return Place(
            packet_bytes=packet_bytes,
            after_hop=0,
            before_hop=None,
            responder=None,
            mtu=mtu,
            by="local",
            sentence=f"this host's own route carries packets of at most {mtu} bytes (EMSGSIZE)",
        )
    if too_big:
        first = too_big[0]
        after = next(
            (
                t
                for t, h in sorted(hops.items())
                if first.responder in h.responders and t < first.ttl
            ),
            first.ttl - 1,
        )
        return placed(after, first.responder, first.mtu, "icmp")
    if any(h.destination and h.rtts_ms for h in big_hops):
        return Place(
            packet_bytes=packet_bytes,
            after_hop=None,
            before_hop=None,
            responder=None,
            mtu=None,
            by=None,
            sentence=(
                f"{full} arrive: the black hole is on the way back only, where probes from"
                " here cannot place it"
            ),
        )
    reached = max((h.ttl for h in big_hops if h.rtts_ms), default=0)
    if any(h.ttl > reached and h.rtts_ms for h in small_hops):
        last = hops.get(reached)
        return placed(reached, None if last is None else last.responders[0], None, "silence")
    return Place(
        packet_bytes=packet_bytes,
        after_hop=None,
        before_hop=None,
        responder=None,
        mtu=None,
        by=None,
        sentence=(
            f"{full} and small probes stop answering at the same hop ({reached}): where the"
            " path narrows cannot be told from here"
        ),
    )


def judge(
    attempts: Sequence[Attempt],
    *,
    largest_working_mss: int | None,
    headers: int,
    location: Place | None = None,
) -> Finding:
    """``attempts`` in order: the full-size handshake first, then the clamped ones;
    ``location``, for a black hole, where full-size packets toward the server stop."""
    evidence: dict[str, object] = {
        "attempts": [
            {
                "mss": a.mss,
                "completed": a.completed,
                "elapsed_ms": a.elapsed_ms,
                "received_bytes": a.received,
                "error": a.error,
            }
            for a in attempts
        ],
        "largest_working_mss": largest_working_mss,
    }
    full = attempts[0]
    if full.completed:
        return Finding(
            probe=PROBE,
            verdict=Verdict.PASS,
            summary=(
                f"no path-MTU black hole: the server's TLS flight ({full.received} bytes) arrived"
                " in full-size segments with the default MSS"
            ),
            evidence=evidence,
        )
    clamped = [a for a in attempts[1:] if a.completed]
    if not clamped:
        return Finding(
            probe=PROBE,
            verdict=Verdict.WARN,
            summary=(
                f"the TLS handshake fails with the default MSS ({full.error}) and with the"
                " smallest one too: not a path-MTU problem"
            ),
            evidence=evidence,
        )
    failing = sorted(a.mss for a in attempts[1:] if not a.completed and a.mss is not None)
    good = largest_working_mss or max(a.mss or 0 for a in clamped)
    above = next((m for m in failing if m > good), None)
    size = f"up to MSS {good} (packets of {good + headers} bytes)"
    if above is not None:
        size += f", not at MSS {above} ({above + headers} bytes)"
        evidence["path_mtu_bytes"] = {"at_least": good + headers, "below": above + headers}
    else:
        evidence["path_mtu_bytes"] = {"at_least": good + headers, "below": None}
    evidence["location"] = None if location is None else location.as_dict()
    return Finding(
        probe=PROBE,
        verdict=Verdict.FAIL,
        summary=(
            "path-MTU black hole: with the default MSS the server's TLS flight never arrived"
            f" ({full.elapsed_ms / 1000:.1f} s, {full.received} bytes), with a clamped MSS it"
            f" does, {size}; full-size packets are dropped on the path and the ICMP"
            " 'fragmentation needed' that would say so is filtered"
            + ("" if location is None else f"; {location.sentence}")
        ),
        evidence=evidence,
        advice=[ADVICE],
    )
