"""Reading DNS replies, pure: a dnspython ``Message`` in, frozen facts out.

``read_reply(message, qname)`` follows the CNAME chain from the queried name and collects
addresses, TTLs, EDE options (RFC 8914), the SOA of a negative answer and any referral;
``combine(replies, ...)`` merges one server's A and AAAA replies into one ``Lookup``.
Also the small parsers for server specs and resolv.conf. Nothing here sends a packet or
reads a clock; dnspython is imported inside functions.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from promptpath.core.addr import fmt_addr
from promptpath.core.errors import UsageError
from promptpath.core.timeline import Family

if TYPE_CHECKING:
    import dns.message
    import dns.name

Server = tuple[str, int]

#: RFC 8914 Extended DNS Error codes (IANA registry, 0-24).
EDE_NAMES = {
    0: "Other",
    1: "Unsupported DNSKEY Algorithm",
    2: "Unsupported DS Digest Type",
    3: "Stale Answer",
    4: "Forged Answer",
    5: "DNSSEC Indeterminate",
    6: "DNSSEC Bogus",
    7: "Signature Expired",
    8: "Signature Not Yet Valid",
    9: "DNSKEY Missing",
    10: "RRSIGs Missing",
    11: "No Zone Key Bit Set",
    12: "NSEC Missing",
    13: "Cached Error",
    14: "Not Ready",
    15: "Blocked",
    16: "Censored",
    17: "Filtered",
    18: "Prohibited",
    19: "Stale NXDOMAIN Answer",
    20: "Not Authoritative",
    21: "Not Supported",
    22: "No Reachable Authority",
    23: "Network Error",
    24: "Invalid Data",
}
#: Longest CNAME chain we follow inside one reply.
MAX_CHAIN = 12
#: How a combined lookup ended. The failures after "nodata" carry ``Lookup.error``.
STATUS_ORDER = (
    "ok",  # addresses
    "nxdomain",
    "cname",  # chain leaves the server's zone: ask the target's servers
    "nodata",
    "referral",  # an authoritative query answered with a delegation further down
    "lame",  # asked without recursion, answered without authority
    "refused",
    "servfail",
    "formerr",
    "timeout",
    "network",
    "malformed",
    "budget",
)


def rdtypes_for(family: int) -> tuple[str, ...]:
    """Query types for an address family: 0 asks both."""
    if family == socket.AF_INET:
        return ("A",)
    if family == socket.AF_INET6:
        return ("AAAA",)
    return ("A", "AAAA")


def parse_server(spec: str, *, default_port: int = 53) -> Server:
    """ADDR, ADDR:PORT, IPv6, or [IPv6]:PORT -> (address, port); UsageError otherwise."""
    text = spec.strip()
    port_s = ""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise UsageError(f"DNS server must be ADDR[:PORT] or [IPv6]:PORT, got {spec!r}")
        port_s = rest[1:]
        if rest and not port_s:
            raise UsageError(f"DNS server has an empty port: {spec!r}", kind="bad_option")
    elif text.count(":") == 1:
        host, _, port_s = text.partition(":")
    else:
        host = text
    try:
        ipaddress.ip_address(host)
    except ValueError as exc:
        raise UsageError(
            f"DNS server must be an IP address (ADDR[:PORT]), got {spec!r}", kind="bad_option"
        ) from exc
    if port_s and not (port_s.isdigit() and 0 < int(port_s) < 65536):
        raise UsageError(f"DNS server has a bad port: {spec!r}", kind="bad_option")
    return host, int(port_s) if port_s else default_port


def format_server(server: Server) -> str:
    return fmt_addr(*server)


def parse_resolv_conf(text: str) -> list[str]:
    """The ``nameserver`` addresses of a resolv.conf, in order, as ADDR strings."""
    servers: list[str] = []
    for raw in text.splitlines():
        fields = raw.split("#", 1)[0].split(";", 1)[0].split()
        if len(fields) >= 2 and fields[0] == "nameserver":
            try:
                ipaddress.ip_address(fields[1])
            except ValueError:
                continue
            servers.append(fields[1])
    return servers


def name_text(name: object) -> str:
    """A domain name for display: lower case, no trailing dot."""
    return str(name).rstrip(".").lower() or "."


# -- what came back ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One query sent to one server and what came back (a message, or why not)."""

    server: Server
    qname: str
    rdtype: str
    rd: bool
    message: dns.message.Message | None
    tcp: bool = False  # the UDP answer was truncated and TCP answered
    error: str | None = None  # timeout | network | malformed | budget (when message is None)
    detail: str = ""  # one line about the error
    start_ns: int = 0
    end_ns: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyFacts:
    """What one DNS message says about one name."""

    rcode: str  # NOERROR, NXDOMAIN, SERVFAIL, REFUSED, ...
    aa: bool
    addresses: tuple[tuple[str, Family], ...]
    ttl: int | None  # min TTL of the A/AAAA RRsets at the end of the CNAME chain
    cname_chain: tuple[str, ...]  # CNAME targets, in order, without the queried name
    chain_ttl: int | None  # min TTL over the CNAME RRsets and the address RRsets
    dangling: str | None  # chain ends at this name, with no data here and no SOA over it
    soa_zone: str | None  # owner of the SOA in the authority section
    negative_ttl: int | None  # min(SOA TTL, SOA minimum): how long a negative answer is cached
    referral: tuple[str, ...]  # NS names when the reply delegates instead of answering
    referral_zone: str | None
    glue: tuple[tuple[str, str], ...]  # (NS name, address) from the additional section
    ede: tuple[tuple[int, str], ...]  # RFC 8914 extended errors (code, text)


def _follow_cnames(
    message: dns.message.Message, current: dns.name.Name
) -> tuple[dns.name.Name, list[str], list[int]]:
    """The name at the end of the answer's CNAME chain from ``current`` (at most MAX_CHAIN
    links), the chain's targets and their TTLs."""
    import dns.rdatatype

    chain: list[str] = []
    ttls: list[int] = []
    for _ in range(MAX_CHAIN):
        cname = next(
            (r for r in message.answer if r.name == current and r.rdtype == dns.rdatatype.CNAME),
            None,
        )
        if cname is None:
            break
        ttls.append(cname.ttl)
        current = next(iter(cname)).target
        chain.append(name_text(current))
    return current, chain, ttls


def read_ptr(message: dns.message.Message, qname: str) -> tuple[str, ...]:
    """The PTR names a reply gives for ``qname`` (a reverse name), through CNAMEs (RFC 2317
    delegates classless reverse zones that way). Each name as dnspython spells it: bytes
    outside printable ASCII come out as ``\\DDD``, so a hostile label cannot carry a
    control character (the terminal escapes what is left all the same)."""
    import dns.name
    import dns.rdatatype

    current, _chain, _ttls = _follow_cnames(message, dns.name.from_text(qname))
    names: list[str] = []
    for rrset in message.answer:
        if rrset.name != current or rrset.rdtype != dns.rdatatype.PTR:
            continue
        for rdata in rrset:
            name = str(rdata.target).rstrip(".")
            if name and name not in names:
                names.append(name)
    return tuple(names)


def read_reply(message: dns.message.Message, qname: str) -> ReplyFacts:
    """Read a reply for ``qname``: follow its CNAME chain, collect addresses, TTLs, EDE."""
    import dns.name
    import dns.rcode
    import dns.rdatatype

    current, chain, ttls = _follow_cnames(message, dns.name.from_text(qname))
    addresses: list[tuple[str, Family]] = []
    addr_ttls: list[int] = []
    for rrset in message.answer:
        if rrset.name != current or rrset.rdtype not in (dns.rdatatype.A, dns.rdatatype.AAAA):
            continue
        fam: Family = "ipv4" if rrset.rdtype == dns.rdatatype.A else "ipv6"
        addr_ttls.append(rrset.ttl)
        for rdata in rrset:
            entry = (str(rdata.address), fam)
            if entry not in addresses:
                addresses.append(entry)
    soa = next((r for r in message.authority if r.rdtype == dns.rdatatype.SOA), None)
    soa_zone = negative_ttl = None
    if soa is not None:
        soa_zone = name_text(soa.name)
        negative_ttl = min(soa.ttl, next(iter(soa)).minimum)
    rcode = dns.rcode.to_text(message.rcode())
    dangling = None
    out_of_zone = soa is None or not current.is_subdomain(soa.name)
    if chain and not addresses and rcode == "NOERROR" and out_of_zone:
        dangling = name_text(current)
    aa = bool(message.flags & flag("AA"))
    referral: tuple[str, ...] = ()
    referral_zone = None
    ns = next((r for r in message.authority if r.rdtype == dns.rdatatype.NS), None)
    if ns is not None and not aa and not message.answer and rcode == "NOERROR":
        referral = tuple(sorted(name_text(r.target) for r in ns))
        referral_zone = name_text(ns.name)
    glue = tuple(
        (name_text(r.name), str(rd.address))
        for r in message.additional
        if r.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA)
        for rd in r
    )
    ede = tuple((int(e.code), e.text or "") for e in message.extended_errors())
    all_ttls = ttls + addr_ttls
    return ReplyFacts(
        rcode=rcode,
        aa=aa,
        addresses=tuple(addresses),
        ttl=min(addr_ttls) if addr_ttls else None,
        cname_chain=tuple(chain),
        chain_ttl=min(all_ttls) if all_ttls and addr_ttls else None,
        dangling=dangling,
        soa_zone=soa_zone,
        negative_ttl=negative_ttl,
        referral=referral,
        referral_zone=referral_zone,
        glue=glue,
        ede=ede,
    )


def flag(name: str) -> int:
    import dns.flags

    return int(dns.flags.Flag[name])


@dataclass(frozen=True, slots=True, kw_only=True)
class Lookup:
    """One server's combined answer (A and/or AAAA) for one name."""

    source: str  # system | resolver | authoritative
    server: str  # "system" or ADDR:PORT
    qname: str
    status: str  # one of STATUS_ORDER
    rcode: str | None = None  # of the reply that decided the status (None: no reply came)
    nsname: str | None = None  # the NS name, for an authoritative server found by the walk
    addresses: tuple[tuple[str, Family], ...] = ()
    ttl: int | None = None
    chain_ttl: int | None = None
    cname_chain: tuple[str, ...] = ()
    dangling: str | None = None
    zone: str | None = None
    negative_ttl: int | None = None
    referral: tuple[str, ...] = ()
    referral_zone: str | None = None
    glue: tuple[tuple[str, str], ...] = ()
    ede: tuple[tuple[int, str], ...] = ()
    aa: bool = False
    tcp: bool = False
    error: str | None = None  # one line, when the status is a failure
    start_ns: int = 0
    end_ns: int = 0

    @property
    def ips(self) -> frozenset[str]:
        return frozenset(ip for ip, _ in self.addresses)


def _status_of(reply: Reply, facts: ReplyFacts | None, *, authoritative: bool) -> str:
    if facts is None:
        return reply.error or "network"
    if facts.addresses:
        return "ok"
    if authoritative and not facts.aa and facts.rcode in ("NOERROR", "NXDOMAIN"):
        return "referral" if facts.referral else "lame"
    if facts.rcode == "NXDOMAIN":
        return "nxdomain"
    if facts.rcode == "NOERROR":
        return "cname" if facts.dangling else "nodata"
    if authoritative and facts.rcode == "REFUSED":
        return "lame"
    return {"SERVFAIL": "servfail", "REFUSED": "refused", "FORMERR": "formerr"}.get(
        facts.rcode, "servfail"
    )


def ede_text(code: int, text: str = "") -> str:
    """EDE 22 "No Reachable Authority": text."""
    return f'EDE {code} "{EDE_NAMES.get(code, "unknown")}"' + (f": {text}" if text else "")


def _error_line(status: str, replies: Sequence[Reply], facts: Sequence[ReplyFacts | None]) -> str:
    detail = next((r.detail for r in replies if r.detail), "")
    rcodes = sorted({f.rcode for f in facts if f is not None})
    if status in ("timeout", "network", "malformed", "budget"):
        return detail or status
    if status == "lame":
        line = f"answered {'/'.join(rcodes)} without authority (lame)"
    elif status == "referral":
        line = "referred the query elsewhere instead of answering"
    else:
        line = f"answered {'/'.join(rcodes) or status.upper()}"
    # The server's own reason (RFC 8914), e.g. SERVFAIL with "No Reachable Authority".
    ede = next((e for f in facts if f is not None for e in f.ede), None)
    return line if ede is None else f"{line} ({ede_text(*ede)})"


def combine(
    replies: Sequence[Reply],
    *,
    source: str,
    qname: str,
    authoritative: bool = False,
    nsname: str | None = None,
) -> Lookup:
    """Merge the A and AAAA replies from one server into one ``Lookup`` (pure)."""
    facts = [None if r.message is None else read_reply(r.message, qname) for r in replies]
    statuses = [
        _status_of(r, f, authoritative=authoritative) for r, f in zip(replies, facts, strict=True)
    ]
    status = min(statuses, key=STATUS_ORDER.index) if statuses else "network"
    deciding = next((f for f, st in zip(facts, statuses, strict=True) if st == status), None)
    got = [f for f in facts if f is not None]
    addresses: list[tuple[str, Family]] = []
    for f in got:
        addresses.extend(a for a in f.addresses if a not in addresses)
    ttls = [f.ttl for f in got if f.ttl is not None]
    chain_ttls = [f.chain_ttl for f in got if f.chain_ttl is not None]
    chain = max((f.cname_chain for f in got), key=len, default=())
    ede: list[tuple[int, str]] = []
    for f in got:
        ede.extend(e for e in f.ede if e not in ede)
    first = got[0] if got else None
    server = replies[0].server if replies else ("", 0)
    return Lookup(
        source=source,
        server=format_server(server),
        qname=name_text(qname),
        status=status,
        rcode=deciding.rcode if deciding is not None else None,
        nsname=nsname,
        addresses=tuple(addresses),
        ttl=min(ttls) if ttls else None,
        chain_ttl=min(chain_ttls) if chain_ttls else None,
        cname_chain=chain,
        dangling=next((f.dangling for f in got if f.dangling), None),
        zone=next((f.soa_zone for f in got if f.soa_zone), None),
        negative_ttl=next((f.negative_ttl for f in got if f.negative_ttl is not None), None),
        referral=first.referral if first else (),
        referral_zone=first.referral_zone if first else None,
        glue=tuple(g for f in got for g in f.glue),
        ede=tuple(ede),
        aa=bool(got) and all(f.aa for f in got),
        tcp=any(r.tcp for r in replies),
        error=None if status == "ok" else _error_line(status, replies, facts),
        start_ns=min((r.start_ns for r in replies), default=0),
        end_ns=max((r.end_ns for r in replies), default=0),
    )
