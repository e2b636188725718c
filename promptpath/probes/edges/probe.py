"""The ``edges`` probe: every address and alternative of the target timed in parallel
(TCP connects, a TLS handshake with the trace's SNI and ALPN, the certificate served, and
with --edges-request one HEAD for the edge's headers), the system's and the resolvers'
choices judged (verdict.py).

Through a forward proxy the proxy resolves the name and picks the edge: only its view is
possible, and the finding says so rather than time addresses this client never uses.
"""

from __future__ import annotations

from dataclasses import replace

import anyio

from promptpath.core.edgename import edge_name
from promptpath.core.findings import Finding, Verdict
from promptpath.net import dns
from promptpath.net.edgetime import connect_samples, handshake_async
from promptpath.net.getaddrinfo import localhost_stays_local
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.edges import gather
from promptpath.probes.edges.verdict import PROBE, Candidate, Facts, judge, ordered

#: Connects per address: enough to tell a far edge from one slow handshake.
SAMPLES = 3
#: Each connect's, and the handshake's (with its HEAD), deadline.
DEADLINE_S = 3.0
#: All the DNS asking together (resolvers, HTTPS record, Alt-Svc names): what is found by
#: then is timed, the rest said.
GATHER_S = 10.0


def _dial(ctx: ProbeContext) -> tuple[str, int, str]:
    """The name and port dialled, and what decided the address: dns, a pin, a literal."""
    opts = ctx.options
    host, port = opts.target.host, opts.target.port
    rule = opts.connect_to_for(host, port)
    dial_host, dial_port = (host, port) if rule is None else rule.destination(host, port)
    if dns.is_ip_literal(dial_host):
        return dial_host.strip("[]"), dial_port, "literal" if rule is None else "--connect-to"
    if opts.resolve_override(dial_host, dial_port) is not None:
        return dial_host, dial_port, "--resolve"
    return dial_host, dial_port, "dns" if rule is None else "--connect-to"


def head_path(path: str) -> str:
    """The path the HEAD asks for: the target's, without its query (where some dialects
    carry the key, ``?key=``): no credential goes with it."""
    return path.split("?", 1)[0].split("#", 1)[0] or "/"


async def _time(
    ctx: ProbeContext, ip: str, port: int, sources: list[str], *, sni: str
) -> Candidate:
    opts = ctx.options
    base = Candidate(ip=ip, port=port, family=dns.family_of(ip), sources=tuple(sources))
    try:
        samples = await connect_samples(ip, port, count=SAMPLES, timeout=DEADLINE_S)
    except OSError as exc:
        return replace(base, error=f"connect: {exc.strerror or exc}")
    tls = opts.target.scheme in ("https", "wss")
    alpn = ("http/1.1",) if opts.http == "1.1" else ("h2", "http/1.1")
    head = head_path(opts.target.path) if ctx.settings.edges.request else None
    shake = await handshake_async(ip, port, sni, tls=tls, alpn=alpn, head=head, timeout=DEADLINE_S)
    return replace(
        base,
        connect_ms=samples.stamped_ms,
        kernel_rtt_ms=tuple(x for x in samples.kernel_ms if x is not None),
        tls_ms=shake.tls_ms,
        alpn=shake.alpn,
        fingerprint=shake.fingerprint,
        ttfb_ms=shake.ttfb_ms,
        status=shake.status,
        edge=edge_name(shake.headers) if shake.headers else None,
        error=shake.error,
    )


def _local(host: str) -> bool:
    """RFC 6761 localhost: a name DNS is never asked about (as tracer/h3discovery.py)."""
    bare = host.lower().rstrip(".")
    return bare == "localhost" or bare.endswith(".localhost")


async def _gather(ctx: ProbeContext, found: gather.Found, host: str, port: int) -> None:
    """The candidates. DNS is asked only where the trace would ask it: a --resolve pin
    keeps its name away from the system's DNS (an internal name, often), and localhost
    is the hosts file's; a resolver the user named (--resolver, --edges-resolver) is
    always asked, since naming it is the request."""
    opts = ctx.options
    named = [*([opts.resolver] if opts.resolver else []), *(ctx.settings.edges.resolvers or ())]
    pin = opts.resolve_override(host, port)
    if pin is not None:
        found.add(pin, port, "--resolve")
        found.notes.append(
            f"the --resolve pin keeps {host} away from the system's DNS: only the resolvers"
            " named (--resolver, --edges-resolver) are asked"
        )
    elif not _local(host) or localhost_stays_local():
        await gather.from_system(found, host, port)
    for server in named:
        await gather.from_resolver(found, server, host, port)
    if named or (pin is None and not _local(host)):
        await gather.from_https_record(found, host, port, named[0] if named else None)
    tl = ctx.result.timeline if ctx.result is not None else None
    await gather.from_alt_svc(found, tl, host, port, ask_dns=pin is None and not _local(host))


@register
class EdgesProbe(Probe):
    name = PROBE
    description = "every address and alternative timed, the edge named, resolvers compared"

    def cost(self, ctx: ProbeContext) -> Cost:
        s = ctx.settings.edges
        resolvers = len(s.resolvers or ()) + (1 if ctx.options.resolver else 0)
        return Cost(
            requests=s.max_addresses if s.request else 0,
            # A and AAAA, without and with client subnet, per resolver; the HTTPS record.
            dns_queries=4 * resolvers + 2,
            seconds=GATHER_S + DEADLINE_S * (SAMPLES + 1),
        )

    async def run(self, ctx: ProbeContext) -> Finding:
        opts = ctx.options
        if opts.proxy is not None:
            return Finding(
                probe=PROBE,
                verdict=Verdict.SKIP,
                summary=f"through the forward proxy {opts.proxy.url} only the proxy's view is"
                " possible: it resolves the name and picks the edge, so no address is timed"
                " from here",
            )
        host, port, decided_by = _dial(ctx)
        tl = ctx.result.timeline if ctx.result is not None else None
        found = gather.Found()
        used = tl.address[0] if tl is not None and tl.address is not None else None
        if used is not None:
            found.add(used, tl.address[1] if tl and tl.address else port, "trace")
        if decided_by == "literal":
            found.add(host, port, "literal")
        else:
            with anyio.move_on_after(GATHER_S) as scope:
                await _gather(ctx, found, host, port)
            if scope.cancelled_caught:
                found.notes.append(
                    f"DNS stopped after {GATHER_S:g} s: what it found by then is timed"
                )
        limit = ctx.settings.edges.max_addresses
        ips = list(found.sources)
        if len(ips) > limit:
            found.notes.append(f"{len(ips) - limit} more addresses not timed (--edges-max {limit})")
            ips = ips[:limit]
        ctx.progress(f"edges: timing {len(ips)} addresses in parallel")
        results: dict[str, Candidate] = {}

        async def one(ip: str) -> None:
            results[ip] = await _time(
                ctx, ip, found.ports[ip], found.sources[ip], sni=opts.target.host
            )

        async with anyio.create_task_group() as tg:
            for ip in ips:
                tg.start_soon(one, ip)
        attempts = tuple(
            (a.ip, a.family, a.error is None) for a in (tl.attempts if tl is not None else [])
        )
        facts = Facts(
            host=host,
            candidates=tuple(ordered([results[ip] for ip in ips])),
            used=used,
            decided_by=decided_by,
            attempts=attempts,
            answers=tuple(found.answers),
            https=tuple(found.https),
            alt_svc=tuple(found.alt_svc),
            notes=tuple(found.notes),
        )
        return judge(facts)
