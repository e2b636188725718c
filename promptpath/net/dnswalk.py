"""Find a name's authoritative servers and ask them directly, without recursion.

The walk: SOA query through a recursive resolver to find the zone cut (climbing one label
at a time past CNAMEs and empty names), NS query for the zone, addresses of up to
``max_servers`` name servers (glue first), then the name's A/AAAA at each server with RD=0.
A CNAME that leaves the zone starts a new hop at the target's zone. Referrals from a parent
are followed a bounded number of times. Every query goes through an injected ``Exchange``,
so the walk is tested offline on recorded messages.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from promptpath.net.dnsmsg import (
    STATUS_ORDER,
    Lookup,
    Server,
    format_server,
    name_text,
    read_reply,
)
from promptpath.net.dnsquery import Exchange, lookup

if TYPE_CHECKING:
    import dns.message

MAX_HOPS = 4  # zones along a CNAME chain
MAX_ZONE_STEPS = 6  # labels climbed looking for the zone cut
MAX_REFERRALS = 2

#: Overall outcome of the authoritative side.
AuthStatus = Literal[
    "ok", "nodata", "nxdomain", "lame", "unreachable", "not_found", "budget", "cname"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthHop:
    """One zone along the chain: the name asked, its zone, and each server's answer."""

    qname: str
    zone: str | None
    servers: tuple[Lookup, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuthResult:
    """What the zone's authoritative servers say now."""

    method: Literal["--authoritative", "walk"]
    hops: tuple[AuthHop, ...]
    status: AuthStatus
    notes: tuple[str, ...] = ()

    @property
    def final(self) -> tuple[Lookup, ...]:
        return self.hops[-1].servers if self.hops else ()

    @property
    def answered(self) -> tuple[Lookup, ...]:
        """The final hop's authoritative answers that carried addresses."""
        return tuple(lk for lk in self.final if authoritative_answer(lk))

    @property
    def ips(self) -> frozenset[str]:
        return frozenset(ip for lk in self.answered for ip in lk.ips)

    @property
    def ttl(self) -> int | None:
        """The zone's TTL for the address RRset (the largest, if servers disagree)."""
        ttls = [lk.ttl for lk in self.answered if lk.ttl is not None]
        return max(ttls) if ttls else None

    @property
    def cname_chain(self) -> tuple[str, ...]:
        chain: list[str] = []
        for hop in self.hops:
            best = next((lk for lk in hop.servers if lk.cname_chain), None)
            if best is not None:
                chain.extend(n for n in best.cname_chain if n not in chain)
        return tuple(chain)


def zone_from_reply(message: dns.message.Message, qname: str) -> str | None:
    """The zone containing ``qname`` per an SOA reply, or None (CNAME here, or no SOA)."""
    import dns.name
    import dns.rdatatype

    name = dns.name.from_text(qname)
    for rrset in message.answer:
        if rrset.name == name and rrset.rdtype == dns.rdatatype.CNAME:
            return None  # the CNAME owner's zone is above it: climb
        if rrset.name == name and rrset.rdtype == dns.rdatatype.SOA:
            return name_text(name)
    for rrset in message.authority:
        if rrset.rdtype == dns.rdatatype.SOA and name.is_subdomain(rrset.name):
            return name_text(rrset.name)
    return None


def ns_from_reply(message: dns.message.Message, zone: str) -> tuple[list[str], dict[str, str]]:
    """NS names for ``zone`` (sorted) and glue addresses keyed by NS name."""
    import dns.name
    import dns.rdatatype

    owner = dns.name.from_text(zone)
    names: set[str] = set()
    for rrset in (*message.answer, *message.authority):
        if rrset.name == owner and rrset.rdtype == dns.rdatatype.NS:
            names.update(name_text(r.target) for r in rrset)
    glue: dict[str, str] = {}
    for rrset in message.additional:
        key = name_text(rrset.name)
        is_addr = rrset.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA)
        # Prefer IPv4 glue: it is reachable from more places.
        if key in names and is_addr and (key not in glue or rrset.rdtype == dns.rdatatype.A):
            glue[key] = str(next(iter(rrset)).address)
    return sorted(names), glue


def authoritative_answer(lk: Lookup) -> bool:
    """Addresses with the AA bit: the zone's own data, not a copy from some cache."""
    return lk.status == "ok" and lk.aa


def without_authority(lk: Lookup) -> bool:
    """A server asked without recursion that answered from a cache (addresses, no AA)."""
    return lk.status == "ok" and not lk.aa


def parent_of(name: str) -> str | None:
    return None if name in (".", "") else (name.split(".", 1)[1] if "." in name else ".")


def overall_status(hops: Sequence[AuthHop]) -> AuthStatus:
    final = hops[-1].servers if hops else ()
    if not final:
        return "not_found"
    # Addresses without AA came from a cache (a resolver or forwarder named, or listed, as
    # a name server): they are not the authority's answer.
    statuses = ["lame" if without_authority(lk) else lk.status for lk in final]
    best = min(statuses, key=STATUS_ORDER.index)
    answered: dict[str, AuthStatus] = {
        "ok": "ok",
        "nodata": "nodata",
        "nxdomain": "nxdomain",
        "cname": "cname",
    }
    if best in answered:
        return answered[best]
    if all(st == "budget" for st in statuses):
        return "budget"
    if all(st in ("timeout", "network", "budget") for st in statuses):
        return "unreachable"
    return "lame"


class Walker:
    """Runs the walk for one name with one exchange, collecting notes as it goes."""

    def __init__(
        self,
        exchange: Exchange,
        *,
        family: int,
        resolver: Server | None,
        named: Server | None = None,
        max_servers: int = 3,
        ns_port: int = 53,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.exchange = exchange
        self.ns_port = ns_port
        self.family = family
        self.resolver = resolver
        self.named = named
        self.max_servers = max_servers
        self.notes: list[str] = []
        self.progress = progress or (lambda _msg: None)

    async def run(self, host: str) -> AuthResult:
        hops: list[AuthHop] = []
        qname = name_text(host)
        seen = {qname}
        for _ in range(MAX_HOPS):
            hop = await self.hop(qname, first=not hops)
            hops.append(hop)
            targets = sorted(
                {lk.dangling for lk in hop.servers if lk.status == "cname" and lk.dangling}
            )
            if not targets or any(lk.status == "ok" for lk in hop.servers):
                break
            if targets[0] in seen:
                self.notes.append(f"CNAME loop at {targets[0]}")
                break
            qname = targets[0]
            seen.add(qname)
            self.progress(f"dns-cache: following CNAME to {qname}")
        else:
            self.notes.append(f"CNAME chain crosses more than {MAX_HOPS} zones; stopped")
        return AuthResult(
            method="--authoritative" if self.named else "walk",
            hops=tuple(hops),
            status=overall_status(hops),
            notes=tuple(self.notes),
        )

    async def hop(self, qname: str, *, first: bool) -> AuthHop:
        if self.named is not None:
            label = format_server(self.named)
            found = await self.ask([(None, self.named)], qname)
            usable = any(
                authoritative_answer(lk) or lk.status in ("nodata", "nxdomain", "cname")
                for lk in found
            )
            if first or usable or self.resolver is None:
                return AuthHop(qname=qname, zone=_zone_of(found), servers=tuple(found))
            self.notes.append(
                f"{label} is not authoritative for {qname}; walking from the resolver"
            )
        if self.resolver is None:
            self.notes.append(
                "no recursive resolver to find the authoritative servers with; "
                "name one with --authoritative"
            )
            return AuthHop(qname=qname, zone=None, servers=())
        zone = await self.find_zone(qname)
        if zone is None:
            return AuthHop(qname=qname, zone=None, servers=())
        servers = await self.find_servers(zone)
        if not servers:
            return AuthHop(qname=qname, zone=zone, servers=())
        self.progress(f"dns-cache: asking {len(servers)} authoritative server(s) for {zone}")
        found = await self.ask(servers, qname)
        for _ in range(MAX_REFERRALS):
            deeper = _deeper_referral(found, zone, qname)
            if deeper is None:
                break
            zone, names, glue = deeper
            self.notes.append(f"servers of the parent zone referred {qname} to {zone}")
            servers = await self.addresses(names, glue)
            if not servers:
                break
            found = await self.ask(servers, qname)
        return AuthHop(qname=qname, zone=zone, servers=tuple(found))

    async def ask(self, servers: Sequence[tuple[str | None, Server]], qname: str) -> list[Lookup]:
        return list(
            await asyncio.gather(
                *(
                    lookup(
                        self.exchange,
                        server,
                        qname,
                        family=self.family,
                        rd=False,
                        source="authoritative",
                        nsname=nsname,
                    )
                    for nsname, server in servers
                )
            )
        )

    async def find_zone(self, qname: str) -> str | None:
        assert self.resolver is not None
        label = format_server(self.resolver)
        name: str | None = qname
        for _ in range(MAX_ZONE_STEPS):
            if name is None:
                break
            reply = await self.exchange(self.resolver, name, "SOA", rd=True)
            if reply.message is None:
                self.notes.append(f"SOA query for {name} via {label}: {reply.detail}")
                return None
            zone = zone_from_reply(reply.message, name)
            if zone is not None:
                return zone
            if reply.message.rcode() not in (0, 3):  # NOERROR, NXDOMAIN
                import dns.rcode

                rcode = dns.rcode.to_text(reply.message.rcode())
                self.notes.append(f"SOA query for {name} via {label} answered {rcode}")
                return None
            name = parent_of(name)
        self.notes.append(
            f"could not find the zone of {qname} (no SOA within {MAX_ZONE_STEPS} labels)"
        )
        return None

    async def find_servers(self, zone: str) -> list[tuple[str | None, Server]]:
        assert self.resolver is not None
        reply = await self.exchange(self.resolver, zone, "NS", rd=True)
        if reply.message is None:
            self.notes.append(f"NS query for {zone}: {reply.detail}")
            return []
        names, glue = ns_from_reply(reply.message, zone)
        if not names:
            self.notes.append(f"no NS records for {zone}")
            return []
        return await self.addresses(names, glue)

    async def addresses(
        self, names: Sequence[str], glue: dict[str, str]
    ) -> list[tuple[str | None, Server]]:
        """Addresses of up to max_servers NS names: glue, else A (then AAAA) via the resolver."""
        servers: list[tuple[str | None, Server]] = []
        for nsname in list(names)[: self.max_servers]:
            ip = glue.get(nsname)
            if ip is None and self.resolver is not None:
                for rdtype in ("A", "AAAA"):
                    reply = await self.exchange(self.resolver, nsname, rdtype, rd=True)
                    if reply.message is None:
                        continue
                    facts = read_reply(reply.message, nsname)
                    if facts.addresses:
                        ip = facts.addresses[0][0]
                        break
            if ip is None:
                self.notes.append(f"name server {nsname} has no address")
                continue
            servers.append((nsname, (ip, self.ns_port)))
        if len(names) > self.max_servers:
            self.notes.append(f"asked {self.max_servers} of {len(names)} name servers")
        return servers


def _zone_of(found: Sequence[Lookup]) -> str | None:
    return next((lk.zone for lk in found if lk.zone), None)


def _deeper_referral(
    found: Sequence[Lookup], zone: str, qname: str
) -> tuple[str, tuple[str, ...], dict[str, str]] | None:
    """A referral to a zone strictly below ``zone`` that still contains ``qname``."""
    for lk in found:
        if lk.status != "referral" or not lk.referral_zone:
            continue
        child = lk.referral_zone
        if child != zone and _is_sub(child, zone) and _is_sub(qname, child):
            return child, lk.referral, dict(lk.glue)
    return None


def _is_sub(name: str, zone: str) -> bool:
    return zone == "." or name == zone or name.endswith("." + zone)


async def find_authoritative(
    exchange: Exchange,
    host: str,
    *,
    family: int,
    resolver: Server | None,
    named: Server | None = None,
    max_servers: int = 3,
    ns_port: int = 53,
    progress: Callable[[str], None] | None = None,
) -> AuthResult:
    """Ask the name's authoritative servers (``named``, or found by the walk) without recursion.

    ``ns_port`` is where the walk expects name servers to listen (53; lab tests use others).
    """
    walker = Walker(
        exchange,
        family=family,
        resolver=resolver,
        named=named,
        max_servers=max_servers,
        ns_port=ns_port,
        progress=progress,
    )
    return await walker.run(host)
