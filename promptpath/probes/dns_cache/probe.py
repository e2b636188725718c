"""dns-cache: is a cache between the client and the zone serving an old or inflated answer?

Asks the system path (getaddrinfo) and the recursive resolver(s) twice, ``dns_recheck_s``
apart, while it finds the zone's authoritative servers and asks them without recursion.
The I/O lives in ``promptpath.net.dnsquery`` / ``dnswalk``; the verdict in ``verdict``.
It runs whether or not the traced request succeeded: a refused connection to a stale
address is exactly when it matters.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, ClassVar

from promptpath.core.findings import Finding
from promptpath.net.dns import is_ip_literal
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.dns_cache.verdict import (
    PROBE,
    Observations,
    ResolverCheck,
    judge,
    skipped,
)
from promptpath.probes.settings import DNSCacheSettings, ProbeSettings

if TYPE_CHECKING:
    from promptpath.net.dnsmsg import Lookup, Server
    from promptpath.net.dnsquery import Querier

#: Hard cap on DNS messages sent (UDP tries and TCP retries included).
MAX_QUERIES = 48
#: Per-query timeout (a lost UDP datagram is retried within it).
QUERY_TIMEOUT_S = 2.0
#: Time for everything except the recheck pause.
QUERY_BUDGET_S = 10.0
DEFAULT_RECHECK_S = DNSCacheSettings().recheck_s
#: A shorter recheck cannot tell a TTL counting down from a stuck one (whole seconds): the
#: probe still runs and says so, but the command line should refuse it.
MIN_RECHECK_S = DNSCacheSettings.MIN_RECHECK_S  # held equal to MIN_COUNTDOWN_S by a test
MAX_RECHECK_S = DNSCacheSettings.MAX_RECHECK_S
MAX_RESOLVERS = 3
#: Once a resolver has answered one address family, how long the other may take.
AAAA_GRACE_S = 0.5


def recheck_seconds(settings: ProbeSettings) -> float:
    """The pause between the two resolver queries (--dns-recheck)."""
    return settings.dns_cache.recheck()


def used_addresses(ctx: ProbeContext) -> tuple[tuple[str, ...], str, str | None]:
    """(address set the connection used, where that came from, the request's error)."""
    opts = ctx.options
    override = opts.resolve_override(opts.target.host, opts.target.port)
    timeline = ctx.result.timeline if ctx.result is not None else None
    error = None
    if timeline is not None and timeline.error is not None:
        error = f"{timeline.error.stage}: {timeline.error.message}"
    if override is not None:
        return (override,), "--resolve", error
    if timeline is None:
        return (), "none", error
    if timeline.address is not None:
        return (timeline.address[0],), "connection", error
    if timeline.attempts:
        ips = tuple(dict.fromkeys(a.ip for a in timeline.attempts))
        return ips, "connection attempts", error
    answer = timeline.dns
    if answer is not None and answer.addresses:
        return tuple(ip for ip, _ in answer.addresses), "connection dns", error
    return (), "none", error


def not_resolved_through_dns(host: str) -> str | None:
    """Why no resolver answers for ``host``, or None when one does. A localhost name must
    not even be sent to one (RFC 6761 §6.3): a canary on loopback has nothing to check."""
    name = host.strip("[]").lower().rstrip(".")
    if is_ip_literal(name):
        return f"{name} is an IP address: it is not resolved at all, so no DNS answer to check"
    if name == "localhost" or name.endswith(".localhost"):
        return (
            f"{name} is this machine: it is answered by /etc/hosts (RFC 6761), not resolved"
            " through DNS, so no DNS answer to check"
        )
    return None


@register
class DNSCacheProbe(Probe):
    name: ClassVar[str] = PROBE
    description: ClassVar[str] = (
        "compare cached DNS answers with the zone's authoritative servers"
        " (stale, serve-stale, inflated TTL)"
    )

    def cost(self, ctx: ProbeContext) -> Cost:
        seconds = recheck_seconds(ctx.settings) + QUERY_BUDGET_S + QUERY_TIMEOUT_S
        return Cost(dns_queries=MAX_QUERIES, seconds=round(seconds, 1))

    async def run(self, ctx: ProbeContext) -> Finding:
        from promptpath.net import dnsmsg, dnsquery, dnswalk

        opts = ctx.options
        host = opts.target.host.strip("[]")
        reason = not_resolved_through_dns(host)
        if reason is not None:
            return skipped(host, reason)
        recheck = recheck_seconds(ctx.settings)
        t0 = time.perf_counter_ns()
        querier = dnsquery.Querier(
            timeout=min(opts.timeout, QUERY_TIMEOUT_S),
            max_queries=MAX_QUERIES,
            budget_s=recheck + QUERY_BUDGET_S,
        )
        if opts.resolver is not None:
            # The connection used this resolver: the system path is not what we debug.
            resolvers = [dnsmsg.parse_server(opts.resolver)]
        else:
            found = dnsquery.read_resolv_conf()[:MAX_RESOLVERS]
            resolvers = [dnsmsg.parse_server(s) for s in found]
        authoritative = ctx.settings.dns_cache.authoritative
        named = dnsmsg.parse_server(authoritative) if authoritative else None
        labels = ", ".join(dnsmsg.format_server(s) for s in resolvers) or "none"
        ctx.progress(f"dns-cache: {host} via resolver(s) {labels}, rechecking after {recheck:g} s")

        async def system() -> Lookup | None:
            if opts.resolver is not None:
                return None
            return await _system(host, opts.target.port, family=opts.family)

        checks = asyncio.gather(
            *(_twice(querier, s, host, family=opts.family, recheck=recheck) for s in resolvers)
        )
        walk = dnswalk.find_authoritative(
            querier,
            host,
            family=opts.family,
            resolver=resolvers[0] if resolvers else None,
            named=named,
            progress=ctx.progress,
        )
        sys_lookup, rounds, auth = await asyncio.gather(system(), checks, walk)
        used, used_from, error = used_addresses(ctx)
        obs = Observations(
            host=host,
            used=used,
            used_from=used_from,
            connection_error=error,
            system=sys_lookup,
            resolvers=tuple(rounds),
            authoritative=auth,
            recheck_s=recheck,
            queries=querier.sent,
            budget_exhausted=querier.exhausted,
            t0_ns=t0,
        )
        return judge(obs)


async def _twice(
    querier: Querier, server: Server, host: str, *, family: int, recheck: float
) -> ResolverCheck:
    """Ask a resolver, wait ``recheck`` seconds, ask again: does the TTL count down?"""
    from promptpath.net.dnsmsg import format_server
    from promptpath.net.dnsquery import lookup

    async def ask() -> Lookup:
        return await lookup(
            querier, server, host, family=family, rd=True, source="resolver", grace=AAAA_GRACE_S
        )

    first = await ask()
    second = None
    if first.status not in ("timeout", "network", "budget"):
        await asyncio.sleep(max(0.0, recheck - (time.perf_counter_ns() - first.end_ns) / 1e9))
        second = await ask()
    return ResolverCheck(server=format_server(server), first=first, second=second)


async def _system(host: str, port: int, *, family: int) -> Lookup:
    from promptpath.net.dnsmsg import Lookup
    from promptpath.net.dnsquery import system_lookup

    start = time.perf_counter_ns()
    try:
        return await asyncio.wait_for(
            system_lookup(host, port, family=family), timeout=2 * QUERY_TIMEOUT_S
        )
    except TimeoutError:
        return Lookup(
            source="system",
            server="system",
            qname=host.lower().rstrip("."),
            status="timeout",
            error=f"getaddrinfo gave no answer within {2 * QUERY_TIMEOUT_S:g} s",
            start_ns=start,
            end_ns=time.perf_counter_ns(),
        )
