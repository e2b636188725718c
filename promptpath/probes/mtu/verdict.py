"""The path-MTU verdict, from the handshakes ``net.mtu.check`` made. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from promptpath.core.findings import Finding, Verdict

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


def judge(attempts: Sequence[Attempt], *, largest_working_mss: int | None, headers: int) -> Finding:
    """``attempts`` in order: the full-size handshake first, then the clamped ones."""
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
    return Finding(
        probe=PROBE,
        verdict=Verdict.FAIL,
        summary=(
            "path-MTU black hole: with the default MSS the server's TLS flight never arrived"
            f" ({full.elapsed_ms / 1000:.1f} s, {full.received} bytes), with a clamped MSS it"
            f" does, {size}; full-size packets are dropped on the path and the ICMP"
            " 'fragmentation needed' that would say so is filtered"
        ),
        evidence=evidence,
        advice=[ADVICE],
    )
