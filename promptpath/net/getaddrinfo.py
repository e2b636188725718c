"""The system resolver (getaddrinfo), timed on its own."""

from __future__ import annotations

import asyncio
import socket
import time

from promptpath.core.errors import DNSError, ErrorKind
from promptpath.core.timeline import DNSAnswer, Family


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
