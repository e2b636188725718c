"""Reverse names (PTR) for a path's hop addresses, looked up only when asked (--path-names).

The same rules as the trace's own name: a ``--resolve`` pin names its address without a
query (curl's pins act as a hosts file, and glibc answers reverse lookups from the hosts
file too); with ``--resolver ADDR[:PORT]`` a PTR query to that server (dnspython, through
``dnsquery.Querier``'s query budget); otherwise the system's ``getnameinfo`` with
``NI_NAMEREQD`` (hosts file, nscd, the stub resolver), in worker threads. Every lookup runs
at once within one deadline: an address not named by then is left unnamed, with why, and
the abandoned system lookups finish in their threads without holding the probe up.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio

__all__ = ["ReverseName", "reverse_names"]

#: Worst case per address: one UDP try and one retry (dnsquery counts each as a query).
QUERIES_PER_NAME = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class ReverseName:
    """One address's reverse name, or why there is none."""

    address: str
    name: str | None
    source: str  # "--resolve", "resolver ADDR:PORT" or "system"
    error: str | None = None  # "no name", "timeout", the resolver's status...


def _system(address: str) -> ReverseName:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sockaddr: tuple[str, int] | tuple[str, int, int, int] = (
        (address, 0, 0, 0) if family == socket.AF_INET6 else (address, 0)
    )
    try:
        name, _port = socket.getnameinfo(sockaddr, socket.NI_NAMEREQD)
    except socket.gaierror as exc:
        why = "no name" if exc.errno == socket.EAI_NONAME else (exc.strerror or str(exc))
        return ReverseName(address=address, name=None, source="system", error=why)
    except OSError as exc:
        return ReverseName(
            address=address, name=None, source="system", error=exc.strerror or str(exc)
        )
    return ReverseName(address=address, name=name.rstrip("."), source="system")


def _source(resolver: str | None) -> str:
    from promptpath.net.dnsmsg import format_server, parse_server

    return "system" if resolver is None else f"resolver {format_server(parse_server(resolver))}"


async def _with_resolver(
    resolver: str, addresses: Sequence[str], budget_s: float, out: dict[str, ReverseName]
) -> None:
    """PTR queries to ``resolver`` for ``addresses``, at once; each answer into ``out`` as
    it comes (a deadline that cuts the rest keeps those)."""
    import dns.rcode
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype
    import dns.reversename

    from promptpath.net.dnsmsg import parse_server, read_ptr
    from promptpath.net.dnsquery import Querier, load_dnspython

    server = parse_server(resolver)
    source = _source(resolver)
    load_dnspython()
    dns.rdata.get_rdata_class(dns.rdataclass.IN, dns.rdatatype.PTR)  # type: ignore[no-untyped-call]
    querier = Querier(
        timeout=budget_s, max_queries=QUERIES_PER_NAME * len(addresses), budget_s=budget_s
    )

    async def one(address: str) -> None:
        qname = dns.reversename.from_address(address).to_text()
        reply = await querier(server, qname, "PTR", rd=True)
        if reply.message is None:
            out[address] = ReverseName(
                address=address, name=None, source=source, error=reply.error or "no answer"
            )
            return
        names = read_ptr(reply.message, qname)
        if names:
            out[address] = ReverseName(address=address, name=names[0], source=source)
            return
        rcode = dns.rcode.to_text(reply.message.rcode())
        why = "no name" if rcode in ("NOERROR", "NXDOMAIN") else rcode
        out[address] = ReverseName(address=address, name=None, source=source, error=why)

    async with anyio.create_task_group() as tasks:
        for address in addresses:
            tasks.start_soon(one, address)


async def reverse_names(
    addresses: Sequence[str],
    *,
    pins: Mapping[str, str],
    resolver: str | None,
    budget_s: float,
) -> list[ReverseName]:
    """Each address's reverse name, in order, within ``budget_s`` seconds in all.

    ``pins``: address -> the name a --resolve pin gave it (answered without a query)."""
    deadline = time.perf_counter() + budget_s
    found = {
        a: ReverseName(address=a, name=pins[a], source="--resolve") for a in addresses if a in pins
    }
    asked = [a for a in dict.fromkeys(addresses) if a not in found]
    source = _source(resolver)
    with anyio.move_on_after(max(0.0, deadline - time.perf_counter())):
        if resolver is not None and asked:
            # The querier's own budget ends first, so its timeouts are the ones reported.
            await _with_resolver(resolver, asked, max(0.1, budget_s - 0.1), found)
        elif asked:

            async def one(address: str) -> None:
                found[address] = await anyio.to_thread.run_sync(
                    _system, address, abandon_on_cancel=True
                )

            async with anyio.create_task_group() as tasks:
                for address in asked:
                    tasks.start_soon(one, address)
    return [
        found.get(a) or ReverseName(address=a, name=None, source=source, error="timeout")
        for a in addresses
    ]
