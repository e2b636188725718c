"""Port numbers for components that must be told their port before they start.

nginx, haproxy, caddy, squid, unbound, dnsmasq, LiteLLM and Prometheus take a port in
their configuration, so a test picks one and the component binds it later, seconds later
for LiteLLM. A port picked with ``bind(("127.0.0.1", 0))`` comes from the kernel's
ephemeral range (``net.ipv4.ip_local_port_range``, 32768-60999 here), which every outgoing
connection of every test draws from too: under ``pytest -n``, another worker's connection
took such a port before LiteLLM bound it (observed: nginx proxied to a refserver that had
taken LiteLLM's port). Ports here come from below that range, where the kernel never
allocates on its own, from a slice of their own per xdist worker, so two workers never
pick the same number and no outgoing connection lands on it.
"""

from __future__ import annotations

import itertools
import os
import random
import socket

LOOPBACK = "127.0.0.1"

#: Below Linux's default ephemeral range (32768-60999) and above the well-known ports.
_FIRST = 10_000
_SLICE = 2_500  # ports per worker: 8 workers fit below 30,000


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # "gw3"; unset outside xdist
    digits = worker.removeprefix("gw")
    return int(digits) % 8 if digits.isdigit() else 0


def _candidates() -> itertools.cycle[int]:
    start = _FIRST + _worker_index() * _SLICE
    ports = list(range(start, start + _SLICE))
    # A random starting point: a second suite on the same machine (a developer's run beside
    # CI's) is unlikely to walk the same numbers, and bindability is checked anyway.
    offset = random.randrange(_SLICE)
    return itertools.cycle(ports[offset:] + ports[:offset])


_NEXT = _candidates()


def _bindable(port: int, kind: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def free_port(*, udp: bool = False) -> int:
    """A TCP port on 127.0.0.1 that nothing holds now (and UDP too when ``udp``)."""
    for _ in range(_SLICE):
        port = next(_NEXT)
        if _bindable(port, socket.SOCK_STREAM) and (
            not udp or _bindable(port, socket.SOCK_DGRAM)
        ):
            return port
    raise RuntimeError("no free port in this worker's slice of 127.0.0.1")


__all__ = ["LOOPBACK", "free_port"]
