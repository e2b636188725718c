"""The run's own flows, noted by the sockets as they open (read by --pcap's filter).

Nothing is noted unless a capture is listening (``listening()``): a run without --pcap
pays one attribute test per connect. Each note carries the tag of the trace whose task
opened it (``tagged()``, a context variable: concurrent runs of a load test keep theirs),
so ``--pcap DIR`` can write one file per run.
"""

from __future__ import annotations

import contextvars
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

TCP, UDP = 6, 17

Endpoint = tuple[str, int]

#: The trace a task works for (None: the command's own work, a probe's socket).
_TAG: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "promptpath_flow_tag", default=None
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Flow:
    """One socket of the run: its protocol, our endpoint (None: the connect failed before
    it had one), the peer's, and the trace it served."""

    proto: int
    local: Endpoint | None
    remote: Endpoint
    tag: int | None = None


@dataclass(slots=True)
class FlowLog:
    """What a capture collects while the run goes."""

    flows: list[Flow] = field(default_factory=list)
    #: Names looked up (lower case, no final dot) and by which trace.
    names: list[tuple[str, int | None]] = field(default_factory=list)
    #: The port of each named resolver (--resolver ADDR:PORT) asked.
    dns_ports: set[int] = field(default_factory=set)
    #: Tags in the order their traces began.
    tags: list[int] = field(default_factory=list)


_log: FlowLog | None = None


@contextmanager
def listening() -> Iterator[FlowLog]:
    """Collect every flow noted while the block runs."""
    global _log
    previous, _log = _log, FlowLog()
    try:
        yield _log
    finally:
        _log = previous


@contextmanager
def tagged(tag: int) -> Iterator[None]:
    """Flows opened inside the block (in this task and the tasks it starts) belong to ``tag``."""
    if _log is not None and tag not in _log.tags:
        _log.tags.append(tag)
    token = _TAG.set(tag)
    try:
        yield
    finally:
        _TAG.reset(token)


def _endpoint(address: object) -> Endpoint | None:
    if isinstance(address, tuple) and len(address) >= 2:
        host, port = address[0], address[1]
        if isinstance(host, str) and isinstance(port, int):
            return (host.split("%", 1)[0], port)
    return None


def note_socket(sock: socket.socket, proto: int) -> None:
    """A connected socket: its 5-tuple, as the kernel says it."""
    if _log is None:
        return
    try:
        local, remote = _endpoint(sock.getsockname()), _endpoint(sock.getpeername())
    except OSError:
        return
    if local is not None and remote is not None:
        _log.flows.append(Flow(proto=proto, local=local, remote=remote, tag=_TAG.get()))


def note_endpoints(proto: int, local: Endpoint | None, remote: Endpoint) -> None:
    """A flow known by its endpoints (``local`` None: a connect that never got a port)."""
    if _log is not None:
        _log.flows.append(Flow(proto=proto, local=local, remote=remote, tag=_TAG.get()))


def note_name(name: str) -> None:
    """A name the run looks up: its DNS queries are kept by this name."""
    if _log is not None:
        _log.names.append((name.rstrip(".").lower(), _TAG.get()))


def note_dns_port(port: int) -> None:
    if _log is not None:
        _log.dns_ports.add(port)


__all__ = [
    "TCP",
    "UDP",
    "Flow",
    "FlowLog",
    "listening",
    "note_dns_port",
    "note_endpoints",
    "note_name",
    "note_socket",
    "tagged",
]
