"""DNS queries with dnspython: bounded exchanges, ``lookup``, ``resolve_with``.

``Querier`` is the only code here that sends packets: one query over UDP (EDNS on, so EDE
options come back), retransmitted within its timeout, retried over TCP when the UDP answer
is truncated, all within a query budget and a deadline. It never raises for network
trouble: a ``Reply`` carries the error kind instead, and ``dnsmsg`` reads the rest.
``resolve_with`` turns one resolver's answer into a ``DNSAnswer`` or raises ``DNSError``
carrying what it did learn (``RESOLVE_DETAIL_KEYS``).

dnspython is imported inside functions: importing this module stays cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol

from promptpath.core.errors import DNSError, ErrorKind
from promptpath.core.timeline import DNSAnswer
from promptpath.net.dnsfeatures import plain_dns_only
from promptpath.net.dnsmsg import (
    Lookup,
    Reply,
    Server,
    combine,
    flag,
    format_server,
    name_text,
    parse_resolv_conf,
    parse_server,
    rdtypes_for,
    read_reply,
)
from promptpath.net.dnsudp import exchange_udp
from promptpath.net.getaddrinfo import resolve_system

if TYPE_CHECKING:
    import dns.message

__all__ = [
    "Exchange",
    "Querier",
    "lookup",
    "read_resolv_conf",
    "resolve_with",
    "system_lookup",
]

#: EDNS payload size we advertise (the DNS Flag Day 2020 value: no fragmented UDP).
EDNS_PAYLOAD = 1232
#: Per-try UDP timeout; a lost datagram is retried until the query's own timeout.
UDP_TRY_S = 2.0
UDP_TRIES = 3
#: How long the other address family may lag once one has answered (RFC 8305 section 3).
RESOLUTION_DELAY_S = 0.05
#: What ``resolve_with`` puts in ``DNSError.detail`` (every key, always): enough for a
#: partial ``dns`` record. ``start_ns``/``end_ns`` are the queries' own perf_counter_ns
#: stamps (None if nothing was sent); ``rcode`` is None when no reply came back.
RESOLVE_DETAIL_KEYS = (
    "resolver",
    "rcode",
    "status",
    "elapsed_ms",
    "start_ns",
    "end_ns",
    "cname_chain",
    "negative_ttl",
)
#: Record types whose dnspython modules a resolver's reply may need (answer, CNAME chain,
#: negative answer, referral, EDNS).
_RDTYPES = ("A", "AAAA", "CNAME", "SOA", "NS", "OPT")


_loaded = False


def load_dnspython() -> None:
    """Import every dnspython module a query may need, now, so that no query's stamps
    include an import (dnspython loads its asyncio backend and record types lazily;
    ~0.3 s on a small machine, aioquic included)."""
    global _loaded
    if _loaded:
        return
    plain_dns_only()
    import dns.asyncbackend
    import dns.asyncquery
    import dns.edns
    import dns.exception
    import dns.message
    import dns.rcode
    import dns.rdata
    import dns.rdataclass
    import dns.rdatatype

    for name in _RDTYPES:
        rdtype = dns.rdatatype.from_text(name)
        dns.rdata.get_rdata_class(dns.rdataclass.IN, rdtype)  # type: ignore[no-untyped-call]
    with contextlib.suppress(dns.asyncbackend.AsyncLibraryNotFoundError):
        dns.asyncbackend.get_default_backend()  # imports the asyncio backend
        _loaded = True  # outside a running loop the backend is still to load


def read_resolv_conf(path: str = "/etc/resolv.conf") -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return parse_resolv_conf(fh.read())
    except OSError:
        return []


class Exchange(Protocol):
    """Send one query to one server; never raises for network trouble."""

    def __call__(
        self, server: Server, qname: str, rdtype: str, *, rd: bool
    ) -> Awaitable[Reply]: ...


class Querier:
    """Sends queries within a budget: at most ``max_queries`` messages, all before a deadline."""

    def __init__(self, *, timeout: float, max_queries: int, budget_s: float) -> None:
        self.timeout = timeout
        self.max_queries = max_queries
        self.deadline_ns = time.perf_counter_ns() + int(budget_s * 1e9)
        self.sent = 0
        self.exhausted = False

    def _take(self) -> float | None:
        """Claim one query; the time it may take, or None when the budget is spent."""
        left = (self.deadline_ns - time.perf_counter_ns()) / 1e9
        if self.sent >= self.max_queries or left <= 0.05:
            self.exhausted = True
            return None
        self.sent += 1
        return min(self.timeout, left)

    async def __call__(self, server: Server, qname: str, rdtype: str, *, rd: bool) -> Reply:
        import dns.exception
        import dns.message
        import dns.rcode

        load_dnspython()  # a no-op after the first query: the stamps below exclude imports
        start = time.perf_counter_ns()
        # On the wire: the first datagram sent, the answer's arrival (net/dnsudp.py).
        wire: list[int] = []

        def done(
            message: dns.message.Message | None,
            *,
            tcp: bool = False,
            error: str | None = None,
            detail: str = "",
        ) -> Reply:
            return Reply(
                server=server,
                qname=qname,
                rdtype=rdtype,
                rd=rd,
                message=message,
                tcp=tcp,
                error=error,
                detail=detail,
                start_ns=wire[0] if wire else start,
                end_ns=wire[-1]
                if message is not None and len(wire) > 1
                else time.perf_counter_ns(),
            )

        query = dns.message.make_query(qname, rdtype, use_edns=0, payload=EDNS_PAYLOAD)
        if not rd:
            query.flags &= ~flag("RD")
        where = f"{format_server(server)}"
        try:
            response, tcp = await self._send(query, server, wire)
            if response is None:
                return done(None, error="budget", detail="DNS query budget spent")
            if response.rcode() == dns.rcode.FORMERR and response.edns < 0:
                # FORMERR without an OPT record: a server that predates EDNS. Ask plainly.
                query.use_edns(False)
                retry, tcp = await self._send(query, server, wire)
                response = retry or response
            return done(response, tcp=tcp)
        except (dns.exception.Timeout, TimeoutError):
            return done(None, error="timeout", detail=f"no answer from {where} (timeout)")
        except ConnectionRefusedError:
            return done(None, error="network", detail=f"{where} refused (port unreachable)")
        except OSError as exc:
            return done(None, error="network", detail=f"{where}: {exc.strerror or exc}")
        except (dns.exception.DNSException, ValueError, EOFError) as exc:
            return done(None, error="malformed", detail=f"bad reply from {where}: {exc}")

    async def _send(
        self, query: dns.message.Message, server: Server, wire: list[int]
    ) -> tuple[dns.message.Message | None, bool]:
        """The answer, and whether TCP gave it; ``wire`` gets the first send's stamp and
        then each answer's arrival (the last one is the answer used)."""
        plain_dns_only()
        import dns.asyncquery
        import dns.exception

        host, port = server
        limit = self._take()
        if limit is None:
            return None, False
        end = time.perf_counter() + limit
        response = None
        for attempt in range(UDP_TRIES):
            try_s = min(UDP_TRY_S, end - time.perf_counter())
            if attempt and (try_s <= 0.05 or self._take() is None):
                raise dns.exception.Timeout
            try:
                response, sent_ns, received_ns = await exchange_udp(
                    query, host, port, timeout=try_s
                )
                wire[:] = [wire[0] if wire else sent_ns, received_ns]
                break
            except dns.exception.Timeout:
                if time.perf_counter() >= end - 0.05:
                    raise
        if response is None:
            raise dns.exception.Timeout
        if not response.flags & flag("TC"):
            return response, False
        # Truncated over UDP: the full answer is only available over TCP (RFC 7766).
        limit = self._take()
        if limit is None:
            return response, False
        # dnspython's own TCP exchange, stamped around (connect included): a rare path.
        sent_ns = time.perf_counter_ns()
        answer = await dns.asyncquery.tcp(query, host, timeout=limit, port=port)
        wire[:] = [wire[0] if wire else sent_ns, time.perf_counter_ns()]
        return answer, True


async def lookup(
    exchange: Exchange,
    server: Server,
    qname: str,
    *,
    family: int,
    rd: bool,
    source: str,
    nsname: str | None = None,
    grace: float | None = None,
) -> Lookup:
    """Ask one server for the name's addresses (A and/or AAAA, concurrently).

    With ``grace``, once one type has answered with addresses the other gets only that
    much longer (RFC 8305's Resolution Delay): a resolver that answers A at once but sits
    on AAAA (unbound does, when the authority is gone) must not hold the connection up.
    """
    tasks = [asyncio.ensure_future(exchange(server, qname, t, rd=rd)) for t in rdtypes_for(family)]
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            answered = any(_has_addresses(t.result(), qname) for t in done)
            if grace is not None and answered and pending:
                await asyncio.wait(pending, timeout=grace)
                break
    finally:
        late = [t for t in tasks if not t.done()]
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
    replies = [t.result() for t in tasks if not t.cancelled()]
    return combine(replies, source=source, qname=qname, authoritative=not rd, nsname=nsname)


def _has_addresses(reply: Reply, qname: str) -> bool:
    return reply.message is not None and bool(read_reply(reply.message, qname).addresses)


async def system_lookup(host: str, port: int, *, family: int) -> Lookup:
    """What getaddrinfo says (hosts file, nscd/systemd-resolved caches, the stub resolver)."""
    start = time.perf_counter_ns()
    try:
        answer = await resolve_system(host, port, family=family)
    except DNSError as exc:
        status = {"nxdomain": "nxdomain", "nodata": "nodata"}.get(exc.kind, "servfail")
        return Lookup(
            source="system",
            server="system",
            qname=name_text(host),
            status=status,
            error=exc.message,
            start_ns=start,
            end_ns=time.perf_counter_ns(),
        )
    return Lookup(
        source="system",
        server="system",
        qname=name_text(host),
        status="ok" if answer.addresses else "nodata",
        addresses=answer.addresses,
        start_ns=answer.start_ns,
        end_ns=answer.end_ns,
    )


_ERROR_KINDS: dict[str, ErrorKind] = {
    "nxdomain": "nxdomain",
    "nodata": "no_address",
    "cname": "no_address",
    "servfail": "servfail",
    "refused": "refused",
    "formerr": "servfail",
    "lame": "servfail",
    "referral": "servfail",
    "timeout": "timeout",
    "network": "network",
    "malformed": "malformed",
    "budget": "timeout",
}


async def resolve_with(resolver: str, host: str, *, family: int, timeout: float) -> DNSAnswer:
    """Resolve through a named recursive resolver; TTL is the min over the answer's RRsets.

    The answer's ``start_ns``/``end_ns`` are the queries' own stamps (dnspython is loaded
    before them). On failure the ``DNSError`` carries ``RESOLVE_DETAIL_KEYS``.
    """
    server = parse_server(resolver)
    label = format_server(server)
    load_dnspython()  # before the budget starts and before any stamp
    querier = Querier(timeout=timeout, max_queries=4 * len(rdtypes_for(family)), budget_s=timeout)
    found = await lookup(
        querier,
        server,
        host,
        family=family,
        rd=True,
        source="resolver",
        grace=RESOLUTION_DELAY_S,
    )
    if found.addresses:
        return DNSAnswer(
            resolver=label,
            addresses=found.addresses,
            start_ns=found.start_ns,
            end_ns=found.end_ns,
            ttl=found.chain_ttl,
            cname_chain=found.cname_chain,
        )
    kind = _ERROR_KINDS.get(found.status, "resolve_failed")
    what = {
        "nxdomain": "does not exist (NXDOMAIN)",
        "nodata": "has no address record",
        "cname": "is a CNAME the resolver did not follow",
    }.get(found.status, found.error or found.status)
    sent = found.start_ns > 0
    raise DNSError(
        f"DNS: resolver {label}: {host!r} {what}",
        stage="dns",
        kind=kind,
        host=host,
        resolver=label,
        rcode=found.rcode,
        status=found.status,
        elapsed_ms=round((found.end_ns - found.start_ns) / 1e6, 3) if sent else None,
        start_ns=found.start_ns if sent else None,
        end_ns=found.end_ns if sent else None,
        cname_chain=list(found.cname_chain),
        negative_ttl=found.negative_ttl,
    )
