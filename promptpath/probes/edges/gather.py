"""Where the target's edges may be: every address the system resolver, the trace's
--resolver and each --edges-resolver (with and without client subnet) return, the HTTPS
record's hints (RFC 9460) and the Alt-Svc alternatives the trace was shown. I/O: DNS only.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from promptpath.core.errors import DNSError, UsageError
from promptpath.core.timeline import Timeline
from promptpath.net import dns
from promptpath.net.altsvc import HTTPSRecord, https_record, parse_alt_svc
from promptpath.net.dnsecs import ask, client_subnet
from promptpath.net.getaddrinfo import resolve_system
from promptpath.probes.edges.verdict import Answer

#: Each DNS question's deadline.
DNS_TIMEOUT_S = 2.0


@dataclass(slots=True)
class Found:
    """Candidate addresses (in the order found) with where each came from."""

    ports: dict[str, int] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)
    answers: list[Answer] = field(default_factory=list)
    https: list[dict[str, object]] = field(default_factory=list)
    alt_svc: list[dict[str, object]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add_port(self, ip: str, port: int, source: str) -> None:
        """``ip`` on another port: a candidate of its own (``ip`` then reads ``ip port``)."""
        if port == self.ports.get(ip):
            self.add(ip, port, source)
        # One address is timed once, on the origin's port: the alternative's port is
        # listed with it rather than doubling the connects.
        else:
            self.sources.setdefault(ip, []).append(f"{source} (port {port})")

    def add(self, ip: str, port: int, source: str) -> None:
        ip = ip.strip("[]")
        self.ports.setdefault(ip, port)
        seen = self.sources.setdefault(ip, [])
        if source not in seen:
            seen.append(source)


async def from_system(found: Found, host: str, port: int) -> None:
    try:
        answer = await resolve_system(host, port)
    except DNSError as exc:
        found.answers.append(Answer(server="system", error=exc.message))
        return
    ips = tuple(ip for ip, _fam in answer.addresses)
    found.answers.append(Answer(server="system", addresses=ips))
    for ip in ips:
        found.add(ip, port, "system")


async def from_resolver(found: Found, server: str, host: str, port: int) -> None:
    """``server`` asked twice: without, then with this client's subnet (RFC 7871)."""
    subnet = client_subnet(server)
    for ecs in (None, subnet) if subnet is not None else (None,):
        asked = await ask(server, host, ecs=ecs, timeout=DNS_TIMEOUT_S)
        found.answers.append(
            Answer(server=asked.server, ecs=ecs, addresses=asked.addresses, error=asked.error)
        )
        for ip in asked.addresses:
            found.add(ip, port, f"resolver {asked.server}" + (" +ecs" if ecs else ""))
    if subnet is not None and ipaddress.ip_network(subnet).is_private:
        found.notes.append(
            f"the client subnet sent to {server} ({subnet}) is private: a resolver ignores"
            " it, so the two answers can only differ by the resolver's own choice"
        )


def _record_json(r: HTTPSRecord, port: int) -> dict[str, object]:
    return {
        "priority": r.priority,
        "target": r.target,
        "port": r.port if r.port is not None else port,
        "alpn": list(r.alpn),
        "ipv4hint": list(r.ipv4hint),
        "ipv6hint": list(r.ipv6hint),
    }


async def from_https_record(found: Found, host: str, port: int, resolver: str | None) -> None:
    try:
        records = await https_record(host, port=port, resolver=resolver, timeout=DNS_TIMEOUT_S)
    except (LookupError, UsageError) as exc:
        found.notes.append(f"HTTPS record not read: {exc}")
        return
    for r in records:
        found.https.append(_record_json(r, port))
        if r.alias:
            continue
        alt_port = r.port if r.port is not None else port
        for ip in (*r.ipv4hint, *r.ipv6hint):
            found.add(ip, alt_port, "https-rr hint")
        if r.target not in (".", host, host + "."):
            try:
                answer = await dns.resolve(
                    r.target.rstrip("."), alt_port, resolver=resolver, timeout=DNS_TIMEOUT_S
                )
            except (DNSError, UsageError):
                found.notes.append(f"HTTPS record target {r.target} did not resolve")
                continue
            for ip, _fam in answer.addresses:
                found.add(ip, alt_port, f"https-rr {r.target}")


async def from_alt_svc(
    found: Found, timeline: Timeline | None, host: str, port: int, *, ask_dns: bool
) -> None:
    """Alt-Svc alternatives: TCP ones (h2, http/1.1) become candidates; QUIC ones (h3) are
    listed, not timed here (``--http 3`` times a QUIC handshake). The origin's own host on
    another port reuses the addresses found; another host is resolved only when
    ``ask_dns`` (not for a pinned or local name)."""
    if timeline is None:
        return
    values = [v for k, v in timeline.response_headers if k.lower() == "alt-svc"]
    if not values:
        return
    for svc in parse_alt_svc(values).services:
        alt_host = svc.host or host
        timed = svc.protocol in ("h2", "http/1.1")
        found.alt_svc.append(
            {"protocol": svc.protocol, "host": alt_host, "port": svc.port, "timed": timed}
        )
        if not timed:
            continue
        if svc.host is None or svc.host.rstrip(".").lower() == host.lower():
            for ip in list(found.sources):
                found.add_port(ip, svc.port, f"alt-svc {svc.protocol}")
            continue
        if not ask_dns:
            continue
        try:
            answer = await dns.resolve(alt_host, svc.port, timeout=DNS_TIMEOUT_S)
        except (DNSError, UsageError):
            continue
        for ip, _fam in answer.addresses:
            found.add(ip, svc.port, f"alt-svc {svc.protocol}")
