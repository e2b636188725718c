"""The edges probe's judgement, pure: every candidate address with its measured round
trips in, one finding out.

Two questions. **The system's choice**: the address the trace used against the fastest
that answered; the used one is called slower only when its median connect exceeds the
best's by more than ``max(FLOOR_MS, SHARE × best)`` *and* its fastest sample is slower than
the best's slowest (the repeated samples do not overlap), so one unlucky handshake is
never a finding. **The resolvers**: each resolver's answer judged by the nearest address
it returned; when two resolvers steer to different edges and one is nearer by the same
margin, both are named.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from promptpath.core.edgename import EdgeName
from promptpath.core.findings import Finding, Verdict

PROBE = "edges"
#: The used edge is slower than the best by more than max(FLOOR_MS, SHARE x best).
FLOOR_MS = 5.0
SHARE = 0.20


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One address an edge may be reached at, and what timing it showed."""

    ip: str
    port: int
    family: str  # ipv4 | ipv6
    sources: tuple[str, ...]  # where it came from: "system", "resolver ADDR:PORT", ...
    connect_ms: tuple[float, ...] = ()
    #: The kernel's RTT sample of each handshake (TCP_INFO), beside the stamped connects.
    kernel_rtt_ms: tuple[float, ...] = ()
    tls_ms: float | None = None
    alpn: str | None = None
    fingerprint: str | None = None
    ttfb_ms: float | None = None
    status: int | None = None
    edge: EdgeName | None = None
    error: str | None = None

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.connect_ms) if self.connect_ms else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """One resolver's answer for the name, asked one way."""

    server: str  # "system" or ADDR:PORT
    ecs: str | None = None  # the client subnet sent, if any
    addresses: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    host: str
    candidates: tuple[Candidate, ...]
    used: str | None = None  # the address the trace connected to
    decided_by: str = "dns"  # dns | --resolve | --connect-to | literal
    attempts: tuple[tuple[str, str, bool], ...] = ()  # the trace's (ip, family, connected)
    answers: tuple[Answer, ...] = ()
    https: tuple[dict[str, object], ...] = ()  # HTTPS records read, as JSON
    alt_svc: tuple[dict[str, object], ...] = ()  # Alt-Svc alternatives, as JSON
    notes: tuple[str, ...] = field(default=())


def ms(value: float | None) -> str:
    """A round trip as shown: two decimals under a millisecond (loopback), else one."""
    if value is None:
        return "—"
    return f"{value:.2f} ms" if value < 1 else f"{value:.1f} ms"


def margin(best_ms: float) -> float:
    """How much slower than the best counts as slower."""
    return max(FLOOR_MS, SHARE * best_ms)


def clearly_slower(slow: Candidate, fast: Candidate) -> bool:
    """``slow`` is slower than ``fast`` beyond the margin, over repeated samples."""
    a, b = slow.median_ms, fast.median_ms
    if a is None or b is None or len(slow.connect_ms) < 2 or len(fast.connect_ms) < 2:
        return False
    return a - b > margin(b) and min(slow.connect_ms) > max(fast.connect_ms)


def _where(c: Candidate) -> str:
    return f"the {c.edge.name} edge ({c.ip})" if c.edge is not None else c.ip


def _cause(used: Candidate, best: Candidate, facts: Facts) -> str:
    if facts.decided_by in ("--resolve", "--connect-to"):
        return f"the {facts.decided_by} pin decided the address, not DNS"
    if facts.decided_by == "literal":
        return "the URL names the address itself"
    if used.family != best.family:
        lost = [ip for ip, fam, ok in facts.attempts if fam == best.family]
        raced = "raced and lost" if lost else "was not tried first"
        return (
            f"happy eyeballs (RFC 8305) let {used.family} win: the {best.family} address"
            f" {raced} though it is nearer"
        )
    return (
        "the resolver's order put the far address first, and the client takes the first"
        " that connects"
    )


def _choice(facts: Facts, timed: list[Candidate]) -> tuple[list[str], list[str], bool]:
    """(summary parts, advice, slower?) for the system's choice."""
    best = min(timed, key=lambda c: c.median_ms or 0.0)
    used = next((c for c in timed if c.ip == facts.used), None)
    parts = [f"nearest {_where(best)} {ms(best.median_ms)}"]
    if used is None:
        return parts, [], False
    if used.ip == best.ip:
        parts.append("the trace used it" + _family_note(facts, best, timed))
        return parts, [], False
    if not clearly_slower(used, best):
        parts.append(
            f"the trace used {_where(used)} {ms(used.median_ms)}: within max({FLOOR_MS:g} ms,"
            f" {SHARE:.0%}) of it"
        )
        return parts, [], False
    cause = _cause(used, best, facts)
    parts.insert(
        0,
        f"the trace used {_where(used)} at {ms(used.median_ms)}, slower than"
        f" {_where(best)} at {ms(best.median_ms)} ({cause})",
    )
    advice = [
        "pin the nearer address while you investigate (--resolve HOST:PORT:ADDR) and ask the"
        " provider or your DNS team why this client is steered to the far edge"
    ]
    return parts, advice, True


def _family_note(facts: Facts, used: Candidate, timed: Sequence[Candidate]) -> str:
    """Which family won (RFC 8305) and by how much, when both answered."""
    other = [c for c in timed if c.family != used.family]
    if not other or used.median_ms is None:
        return ""
    best = min(other, key=lambda c: c.median_ms or 0.0)
    diff = (best.median_ms or 0.0) - used.median_ms
    raced = len({fam for _ip, fam, _ok in facts.attempts}) > 1
    won = f"{used.family} won the happy-eyeballs race" if raced else f"{used.family} was used"
    side = "slower" if diff >= 0 else "faster"
    return f" ({won}; the nearest {best.family} address {best.ip} is {ms(abs(diff))} {side})"


def _resolvers(facts: Facts, by_ip: dict[str, Candidate]) -> tuple[str | None, list[str]]:
    """A sentence when resolvers steer to different edges and one is nearer; notes."""
    scored: list[tuple[Answer, Candidate]] = []
    for answer in facts.answers:
        timed = [by_ip[ip] for ip in answer.addresses if ip in by_ip and by_ip[ip].median_ms]
        if timed:
            scored.append((answer, min(timed, key=lambda c: c.median_ms or 0.0)))
    notes = []
    for answer in facts.answers:
        if answer.error:
            notes.append(f"resolver {answer.server}: {answer.error}")
    if len(scored) < 2:
        return None, notes
    far_answer, far = max(scored, key=lambda s: s[1].median_ms or 0.0)
    near_answer, near = min(scored, key=lambda s: s[1].median_ms or 0.0)
    if set(far_answer.addresses) == set(near_answer.addresses) or not clearly_slower(far, near):
        return None, notes

    def who(a: Answer) -> str:
        return a.server + (f" (client subnet {a.ecs})" if a.ecs else "")

    def reached(c: Candidate) -> str:
        edge = f"the {c.edge.name} edge, " if c.edge is not None else ""
        return f"{c.ip} ({edge}{ms(c.median_ms)})"

    return (
        f"your resolver {who(far_answer)} returns {reached(far)}; {who(near_answer)} returns"
        f" {reached(near)}: the resolver is far from this client or strips client subnet"
    ), notes


def judge(facts: Facts) -> Finding:
    timed = [c for c in facts.candidates if c.median_ms is not None]
    evidence: dict[str, object] = {
        "host": facts.host,
        "addresses": [candidate_json(c, facts) for c in facts.candidates],
        "used": facts.used,
        "decided_by": facts.decided_by,
        "resolvers": [
            {"server": a.server, "ecs": a.ecs, "addresses": list(a.addresses), "error": a.error}
            for a in facts.answers
        ],
        "https_records": list(facts.https),
        "alt_svc": list(facts.alt_svc),
        "notes": list(facts.notes),
    }
    if not timed:
        return Finding(
            probe=PROBE,
            verdict=Verdict.WARN if facts.candidates else Verdict.SKIP,
            summary=f"no address of {facts.host} answered a TCP connect"
            if facts.candidates
            else f"no address found for {facts.host}",
            evidence=evidence,
        )
    by_ip = {c.ip: c for c in timed}
    parts, advice, slower = _choice(facts, timed)
    evidence["nearest"] = min(timed, key=lambda c: c.median_ms or 0.0).ip
    steer, notes = _resolvers(facts, by_ip)
    evidence["notes"] = [*facts.notes, *notes]
    if steer is not None:
        parts.append(steer)
        advice.append(
            "use a resolver near this client, or one that passes EDNS Client Subnet, for this name"
        )
    certs = {c.fingerprint for c in timed if c.fingerprint}
    head = f"{len(facts.candidates)} address{'es' if len(facts.candidates) != 1 else ''} timed"
    if len(certs) > 1:
        head += f", {len(certs)} different certificates (different edges or deployments)"
    if facts.decided_by in ("--resolve", "--connect-to"):
        head += f"; the {facts.decided_by} pin decided which one the trace used"
    verdict = Verdict.WARN if slower or steer is not None else Verdict.PASS
    return Finding(
        probe=PROBE,
        verdict=verdict,
        summary="; ".join([parts[0], head, *parts[1:]]) if slower else "; ".join([head, *parts]),
        evidence=evidence,
        advice=advice,
        lead=parts[0] if slower else (steer or ""),
    )


def candidate_json(c: Candidate, facts: Facts) -> dict[str, object]:
    return {
        "ip": c.ip,
        "port": c.port,
        "family": c.family,
        "sources": list(c.sources),
        "connect_ms": [round(x, 3) for x in c.connect_ms],
        "median_ms": None if c.median_ms is None else round(c.median_ms, 3),
        "kernel_rtt_ms": [round(x, 3) for x in c.kernel_rtt_ms],
        "tls_ms": c.tls_ms,
        "alpn": c.alpn,
        "fingerprint": c.fingerprint,
        "ttfb_ms": c.ttfb_ms,
        "status": c.status,
        "edge": None
        if c.edge is None
        else {
            "name": c.edge.name,
            "cdn": c.edge.cdn,
            "header": c.edge.header,
            "value": c.edge.value,
        },
        "used": c.ip == facts.used,
        "error": c.error,
    }


def ordered(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Nearest first; the ones that did not answer last."""
    return sorted(candidates, key=lambda c: (c.median_ms is None, c.median_ms or 0.0))
