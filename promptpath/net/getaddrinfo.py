"""The system resolver (getaddrinfo), timed on its own."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import weakref
from typing import Any

from promptpath.core.errors import DNSError, ErrorKind
from promptpath.core.timeline import DNSAnswer, Family

#: Loops whose default executor has its thread (each asyncio.run makes a new one).
_warm_loops: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()


def _words(path: str) -> list[list[str]]:
    """Each line's words, comments dropped; [] when the file cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return [line.split("#")[0].split() for line in fh]
    except OSError:
        return []


def localhost_stays_local(hosts: str = "/etc/hosts", nsswitch: str = "/etc/nsswitch.conf") -> bool:
    """Whether getaddrinfo("localhost") is answered by the hosts file without DNS: the
    ``hosts:`` line of nsswitch.conf asks ``files`` first, and the file names localhost."""
    order = next((w[1:] for w in _words(nsswitch) if w and w[0] == "hosts:"), [])
    named = any("localhost" in words[1:] for words in _words(hosts))
    return bool(order) and order[0] == "files" and named


async def warm_system_resolver() -> None:
    """Pay the process's first-call costs of getaddrinfo now, before a trace's t0: the
    default executor's thread, Python's idna codec (imported on the first name encoded)
    and glibc's configuration (nsswitch.conf, host.conf, resolv.conf, gai.conf, the
    hosts file; read once per process). About 3 ms of a first lookup's 4 ms against a
    loopback dnsmasq (measured); the stage keeps only the lookup.

    Sends nothing: "localhost" is asked only when the hosts file answers it before any
    other service (``localhost_stays_local``); otherwise only the thread and the codec
    are warmed."""
    loop = asyncio.get_running_loop()
    if loop in _warm_loops:
        return
    _warm_loops.add(loop)
    "localhost".encode("idna")
    if localhost_stays_local():
        with contextlib.suppress(OSError):
            await loop.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)
    else:
        await loop.run_in_executor(None, lambda: None)


def _stamped(
    stamps: list[int], host: str, port: int, family: int
) -> list[tuple[Any, Any, Any, Any, Any]]:
    """getaddrinfo in the executor's thread, stamped there: the hand-offs to the thread
    and back to the loop (a thread wake-up each, ms on a loaded machine) stay outside."""
    stamps.append(time.perf_counter_ns())
    try:
        return socket.getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
    finally:
        stamps.append(time.perf_counter_ns())


async def resolve_system(host: str, port: int, *, family: int = 0) -> DNSAnswer:
    """getaddrinfo, timed on its own; addresses in the order the system prefers."""
    loop = asyncio.get_running_loop()
    stamps: list[int] = []
    try:
        infos = await loop.run_in_executor(None, _stamped, stamps, host, port, family)
    except socket.gaierror as exc:
        start, end = stamps
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
    start, end = stamps
    seen: list[tuple[str, Family]] = []
    for fam, _type, _proto, _canon, sockaddr in infos:
        ip = str(sockaddr[0])
        entry: tuple[str, Family] = (ip, "ipv6" if fam == socket.AF_INET6 else "ipv4")
        if entry not in seen:
            seen.append(entry)
    return DNSAnswer(resolver="system", addresses=tuple(seen), start_ns=start, end_ns=end)
