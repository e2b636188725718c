"""Name resolution, timed: the system resolver (getaddrinfo) or a named resolver (dnspython)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from promptpath.errors import DNSError, ErrorKind, PromptpathError

if TYPE_CHECKING:
    from promptpath.options import RunOptions
    from promptpath.timeline import Timeline

Family = Literal["ipv4", "ipv6"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DNSAnswer:
    """What a resolver said for one name."""

    resolver: str  # "system", "literal", "--resolve", or "ADDR:PORT" of a named resolver
    addresses: tuple[tuple[str, Family], ...]
    start_ns: int
    end_ns: int
    ttl: int | None = None
    cname_chain: tuple[str, ...] = field(default_factory=tuple)


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


async def resolve_system(host: str, port: int, *, family: int = 0) -> DNSAnswer:
    """getaddrinfo, timed on its own; addresses in the order the system prefers."""
    loop = asyncio.get_running_loop()
    start = time.perf_counter_ns()
    try:
        infos = await loop.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        end = time.perf_counter_ns()
        kinds: dict[int, ErrorKind] = {
            int(socket.EAI_NONAME): "nxdomain",
            int(socket.EAI_AGAIN): "servfail_or_timeout",
        }
        kind = kinds.get(exc.errno if exc.errno is not None else 0, "resolve_failed")
        if getattr(socket, "EAI_NODATA", None) == exc.errno:
            kind = "nodata"
        raise DNSError(
            f"DNS: could not resolve {host!r} ({exc.strerror or exc})",
            stage="dns",
            kind=kind,
            host=host,
            elapsed_ms=round((end - start) / 1e6, 3),
            resolver="system",
            rcode=None,  # getaddrinfo does not say
            status=kind,
            start_ns=start,
            end_ns=end,
        ) from exc
    end = time.perf_counter_ns()
    seen: list[tuple[str, Family]] = []
    for fam, _type, _proto, _canon, sockaddr in infos:
        ip = str(sockaddr[0])
        entry: tuple[str, Family] = (ip, "ipv6" if fam == socket.AF_INET6 else "ipv4")
        if entry not in seen:
            seen.append(entry)
    return DNSAnswer(resolver="system", addresses=tuple(seen), start_ns=start, end_ns=end)


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
    if resolver is not None:
        from promptpath.net.dnsquery import resolve_with  # dnspython: only when asked for

        answer = await resolve_with(resolver, host, family=family, timeout=timeout)
    else:
        answer = await resolve_system(host, port, family=family)
    usable = tuple(a for a in answer.addresses if _wanted(a[1], family))
    if not usable:
        fam = {int(socket.AF_INET): "IPv4", int(socket.AF_INET6): "IPv6"}.get(family, "any")
        raise DNSError(
            f"DNS: {host!r} has no {fam} address", stage="dns", kind="no_address", host=host
        )
    return DNSAnswer(
        resolver=answer.resolver,
        addresses=usable,
        start_ns=answer.start_ns,
        end_ns=answer.end_ns,
        ttl=answer.ttl,
        cname_chain=answer.cname_chain,
    )


def dns_json(answer: DNSAnswer | None, used_ip: str | None) -> dict[str, object] | None:
    """The ``dns`` object of the JSON report: what resolved the name and which address was used."""
    if answer is None:
        return None
    return {
        "resolver": answer.resolver,
        "answers": [{"ip": ip, "family": fam} for ip, fam in answer.addresses],
        "used": used_ip,
        "ttl": answer.ttl,
        "cname_chain": list(answer.cname_chain),
        "duration_ms": round((answer.end_ns - answer.start_ns) / 1e6, 3),
    }


def dns_json_for(timeline: Timeline) -> dict[str, object] | None:
    """dns_json for a timeline, with the failure (kind, rcode, EDE) when the lookup failed."""
    answer = timeline.extra.get("dns")
    if not isinstance(answer, DNSAnswer):
        return None
    body = dns_json(answer, timeline.address[0] if timeline.address else None)
    error = timeline.extra.get("dns_error")
    if body is not None and isinstance(error, dict):
        body["error"] = error
    return body


async def resolve_stage(timeline: Timeline, options: RunOptions, host: str, port: int) -> DNSAnswer:
    """The ``dns`` stage of a trace, for every transport: resolve and record it."""
    timeline.begin("dns", time.perf_counter_ns())
    try:
        answer = await resolve(
            host,
            port,
            family=options.family,
            override=options.resolve_override(host, port),
            resolver=options.resolver,
            timeout=min(options.timeout, 10.0),
        )
    except PromptpathError as exc:  # DNSError, or a UsageError for a malformed --resolver
        end = time.perf_counter_ns()
        stage = timeline.end("dns", end, ok=False)
        # Keep what we know of the failed lookup for the report: which resolver, how long.
        start_ns = exc.detail.get("start_ns")
        end_ns = exc.detail.get("end_ns")
        if stage is not None and isinstance(start_ns, int) and isinstance(end_ns, int):
            stage.start_ns, stage.end_ns = start_ns, end_ns
        if stage is not None and exc.detail.get("resolver"):
            stage.detail["resolver"] = exc.detail["resolver"]
        resolver_name = str(exc.detail.get("resolver") or options.resolver or "system")
        timeline.extra["dns"] = DNSAnswer(
            resolver=resolver_name,
            addresses=(),
            start_ns=stage.start_ns if stage else end,
            end_ns=stage.end_ns or end if stage else end,
        )
        timeline.extra["dns_error"] = {
            "kind": exc.kind,
            **{
                k: v
                for k, v in exc.detail.items()
                if k in ("rcode", "status", "ede", "negative_ttl") and v is not None
            },
        }
        raise
    # The stage is the resolver's own measurement, not our bookkeeping around it.
    stage = timeline.stages[-1]
    stage.start_ns, stage.end_ns = answer.start_ns, answer.end_ns
    stage.detail["resolver"] = answer.resolver
    timeline.mark("dns_done", answer.end_ns)
    timeline.extra["dns"] = answer
    return answer
