"""Name resolution, timed: the system resolver (getaddrinfo) or a named resolver (dnspython)."""

from __future__ import annotations

import ipaddress
import socket
import time

from promptpath.core.errors import DNSError, PromptpathError
from promptpath.core.timeline import DNSAnswer, DNSFailure, Family, StageName, Timeline
from promptpath.net import flows
from promptpath.net.getaddrinfo import resolve_system, warm_system_resolver

__all__ = [
    "DNSAnswer",
    "Family",
    "family_of",
    "is_ip_literal",
    "prepare",
    "resolve",
    "resolve_stage",
]


def family_of(ip: str) -> Family:
    return "ipv6" if ipaddress.ip_address(ip).version == 6 else "ipv4"


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


_FAMILY_WORD: dict[Family, str] = {"ipv4": "an IPv4 address", "ipv6": "an IPv6 address"}


def _wanted(fam: Family, family: int) -> bool:
    return family == 0 or (family == socket.AF_INET) == (fam == "ipv4")


async def prepare(resolver: str | None) -> None:
    """Before a trace's t0: pay the process's first-call costs of the resolver it will use
    (dnspython's lazy imports for ``--resolver``; the executor thread, idna codec and
    glibc's configuration for the system's), so that the ``dns`` stage is the lookup's."""
    if resolver is not None:
        from promptpath.net.dnsquery import load_dnspython

        load_dnspython()
    else:
        await warm_system_resolver()


async def resolve(
    host: str,
    port: int,
    *,
    family: int = 0,
    override: str | None = None,
    resolver: str | None = None,
    timeout: float = 5.0,
) -> DNSAnswer:
    """Resolve for the connection: IP literal, --resolve override, named resolver, or system."""
    now = time.perf_counter_ns()
    bare = host.strip("[]")
    fixed = bare if is_ip_literal(bare) else override
    if fixed is not None:
        # An IP literal or a --resolve pin still has to be of the family asked for (curl
        # refuses `-4` with an IPv6 literal too).
        if not _wanted(family_of(fixed), family):
            raise DNSError(
                f"DNS: {fixed} is {_FAMILY_WORD[family_of(fixed)]}, but "
                f"{'-4' if family == socket.AF_INET else '-6'} asks for the other family",
                stage="dns",
                kind="no_address",
                host=host,
            )
        return DNSAnswer(
            resolver="literal" if fixed == bare else "--resolve",
            addresses=((fixed, family_of(fixed)),),
            start_ns=now,
            end_ns=now,
        )
    flows.note_name(bare)
    if resolver is not None:
        from promptpath.net.dnsmsg import parse_server
        from promptpath.net.dnsquery import resolve_with  # dnspython: only when asked for

        flows.note_dns_port(parse_server(resolver)[1])  # --pcap keeps its queries by name
        answer = await resolve_with(resolver, host, family=family, timeout=timeout)
    else:
        try:
            answer = await resolve_system(host, port, family=family)
        except DNSError as err:
            raise await _family_missing(err, host, port, family) from err
    usable = tuple(a for a in answer.addresses if _wanted(a[1], family))
    if not usable:
        fam = {int(socket.AF_INET): "IPv4", int(socket.AF_INET6): "IPv6"}.get(family, "any")
        raise DNSError(
            f"DNS: no {fam} address for {host}", stage="dns", kind="no_address", host=host
        )
    return DNSAnswer(
        resolver=answer.resolver,
        addresses=usable,
        start_ns=answer.start_ns,
        end_ns=answer.end_ns,
        ttl=answer.ttl,
        cname_chain=answer.cname_chain,
    )


async def _family_missing(err: DNSError, host: str, port: int, family: int) -> DNSError:
    """getaddrinfo restricted by -4/-6 says "Name or service not known" for a name that
    exists in the other family only (glibc, checked by hand): ``err`` reworded as "no IPv6
    address for NAME" when the name has addresses of the other family, else ``err``."""
    if family == 0:
        return err
    try:
        other = await resolve_system(host, port)  # after the stage: its time is not counted
    except DNSError:
        return err
    if not other.addresses:
        return err
    fam, flag = ("IPv6", "-6") if family == socket.AF_INET6 else ("IPv4", "-4")
    found = ", ".join(ip for ip, _ in other.addresses[:3])
    return DNSError(
        f"DNS: no {fam} address for {host} (it resolves to {found}): drop {flag}",
        stage="dns",
        kind="no_address",
        **{**err.detail, "status": "no_address"},
    )


async def resolve_stage(
    timeline: Timeline,
    host: str,
    port: int,
    *,
    family: int = 0,
    override: str | None = None,
    resolver: str | None = None,
    timeout: float = 5.0,
    proxy: bool = False,
) -> DNSAnswer:
    """The ``dns`` stage of a trace, for every transport: resolve and record it.

    ``proxy``: the lookup of a forward proxy's name (stage ``proxy_dns``; the answer goes
    to ``Timeline.proxy``, since the origin's name is the proxy's to resolve)."""
    name: StageName = "proxy_dns" if proxy else "dns"
    timeline.begin(name, time.perf_counter_ns())
    try:
        answer = await resolve(
            host, port, family=family, override=override, resolver=resolver, timeout=timeout
        )
    except PromptpathError as exc:  # DNSError, or a UsageError for a malformed --resolver
        end = time.perf_counter_ns()
        stage = timeline.end(name, end, ok=False)
        if proxy:
            exc.stage = "proxy_dns"
            exc.message = exc.message.replace("DNS:", "DNS (the proxy's name):", 1)
            raise
        # Keep what we know of the failed lookup for the report: which resolver, how long.
        start_ns = exc.detail.get("start_ns")
        end_ns = exc.detail.get("end_ns")
        if stage is not None and isinstance(start_ns, int) and isinstance(end_ns, int):
            stage.start_ns, stage.end_ns = start_ns, end_ns
        if stage is not None and exc.detail.get("resolver"):
            stage.detail["resolver"] = exc.detail["resolver"]
        resolver_name = str(exc.detail.get("resolver") or resolver or "system")
        timeline.dns = DNSAnswer(
            resolver=resolver_name,
            addresses=(),
            start_ns=stage.start_ns if stage else end,
            end_ns=stage.end_ns or end if stage else end,
        )
        rcode, status, negative_ttl = (
            exc.detail.get(k) for k in ("rcode", "status", "negative_ttl")
        )
        timeline.dns_error = DNSFailure(
            kind=exc.kind,
            rcode=None if rcode is None else str(rcode),
            status=None if status is None else str(status),
            negative_ttl=negative_ttl if isinstance(negative_ttl, int) else None,
        )
        raise
    # The stage is the resolver's own measurement, not our bookkeeping around it.
    stage = timeline.stages[-1]
    stage.start_ns, stage.end_ns = answer.start_ns, answer.end_ns
    stage.detail["resolver"] = answer.resolver
    timeline.mark("dns_done", answer.end_ns)
    if proxy:
        if timeline.proxy is not None:
            timeline.proxy.dns = answer
    else:
        timeline.dns = answer
    return answer
