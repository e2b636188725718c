"""One name asked of one recursive resolver, with or without an EDNS Client Subnet option
(RFC 7871): the A and AAAA answers as that resolver would steer this client.

A geo-steering authority answers by the resolver's address unless the resolver passes
on the client's subnet; asking once without and once with the option shows whether the
answer follows the client or the resolver. The subnet sent is the source address this
host would use towards the resolver (a UDP ``connect()`` sends nothing), cut to /24 or
/56 as RFC 7871 §11.1 recommends; behind NAT that address is private, and resolvers
ignore private subnets, which the probe says.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass

from promptpath.net.dnsmsg import format_server, parse_server

#: RFC 7871 §11.1: the longest prefixes a client should send.
V4_PREFIX = 24
V6_PREFIX = 56


@dataclass(frozen=True, slots=True, kw_only=True)
class Asked:
    """What one resolver answered for one name, asked one way."""

    server: str  # ADDR:PORT
    ecs: str | None  # the subnet sent ("192.0.2.0/24"), None: no option
    addresses: tuple[str, ...] = ()  # A then AAAA, in the answers' order
    ms: float | None = None  # the slower of the two queries
    error: str | None = None


def client_subnet(server: str) -> str | None:
    """This host's source address towards ``server``, as an ECS subnet; None if none."""
    addr, port = parse_server(server)
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((addr, port))  # picks the route and source; sends nothing
            local = sock.getsockname()[0]
    except OSError:
        return None
    prefix = V6_PREFIX if family == socket.AF_INET6 else V4_PREFIX
    return str(ipaddress.ip_network(f"{local}/{prefix}", strict=False))


async def ask(server: str, qname: str, *, ecs: str | None, timeout: float) -> Asked:
    """A and AAAA for ``qname`` from ``server`` (ADDR[:PORT]), with ``ecs`` if given."""
    from promptpath.net.dnsfeatures import plain_dns_only

    plain_dns_only()
    import dns.asyncquery
    import dns.edns
    import dns.exception
    import dns.message
    import dns.rdatatype

    addr, port = parse_server(server)
    label = format_server((addr, port))
    options: list[dns.edns.Option] = []
    if ecs is not None:
        net = ipaddress.ip_network(ecs, strict=False)
        options.append(dns.edns.ECSOption(str(net.network_address), net.prefixlen))
    found: list[str] = []
    slowest = 0.0
    for rdtype in ("A", "AAAA"):
        query = dns.message.make_query(qname, rdtype, use_edns=0, options=options)
        start = time.perf_counter_ns()
        try:
            reply = await dns.asyncquery.udp(query, addr, port=port, timeout=timeout)
        except dns.exception.Timeout:
            return Asked(server=label, ecs=ecs, error=f"no answer within {timeout:g} s")
        except (OSError, dns.exception.DNSException) as exc:
            return Asked(server=label, ecs=ecs, error=f"{type(exc).__name__}: {exc}"[:200])
        slowest = max(slowest, (time.perf_counter_ns() - start) / 1e6)
        want = dns.rdatatype.from_text(rdtype)
        for rrset in reply.answer:
            if rrset.rdtype == want:
                found.extend(r.address for r in rrset)
    return Asked(server=label, ecs=ecs, addresses=tuple(found), ms=round(slowest, 3))
