"""A scripted DNS server on loopback for tests of our DNS client code: UDP and TCP on one
127.0.0.1 port, each query handed to a function that returns the wire reply (or None: no
answer at all), every query kept in ``seen``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import cast

import dns.message

from promptpath.net.dnsmsg import Server

Handler = Callable[[dns.message.Message, str], bytes | None]  # (query, "udp"|"tcp") -> wire
MakeServer = Callable[[Handler], Awaitable["ScriptedDNS"]]


@dataclass
class ScriptedDNS:
    """UDP and TCP on one 127.0.0.1 port; each query goes to ``handler``."""

    handler: Handler
    seen: list[tuple[str, dns.message.Message]] = field(default_factory=list)
    port: int = 0

    @property
    def server(self) -> Server:
        return ("127.0.0.1", self.port)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def reply(self, wire: bytes, transport: str) -> bytes | None:
        query = dns.message.from_wire(wire)
        self.seen.append((transport, query))
        return self.handler(query, transport)


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, dns_server: ScriptedDNS) -> None:
        self.dns = dns_server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        out = self.dns.reply(data, "udp")
        if out is not None and self.transport is not None:
            self.transport.sendto(out, addr)


async def serve(srv: ScriptedDNS) -> Callable[[], None]:
    """Bind UDP and TCP on the same free port; returns a closer."""
    loop = asyncio.get_running_loop()
    for _ in range(20):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        try:
            tcp = await asyncio.start_server(
                lambda r, w: _tcp(srv, r, w), "127.0.0.1", port, reuse_address=False
            )
        except OSError:
            sock.close()
            continue
        transport, _ = await loop.create_datagram_endpoint(lambda: _UDP(srv), sock=sock)
        srv.port = port

        def close(udp: asyncio.BaseTransport = transport, tcp: asyncio.Server = tcp) -> None:
            udp.close()
            tcp.close()

        return close
    raise RuntimeError("no free port")


async def _tcp(srv: ScriptedDNS, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    try:
        size = struct.unpack("!H", await r.readexactly(2))[0]
        out = srv.reply(await r.readexactly(size), "tcp")
        if out is not None:
            w.write(struct.pack("!H", len(out)) + out)
            await w.drain()
    except asyncio.IncompleteReadError:
        pass
    finally:
        w.close()


@contextlib.asynccontextmanager
async def scripted_dns() -> AsyncIterator[MakeServer]:
    """Yields ``make(handler)``: a started ScriptedDNS; all closed when the block ends."""
    closers: list[Callable[[], None]] = []

    async def make(handler: Handler) -> ScriptedDNS:
        srv = ScriptedDNS(handler)
        closers.append(await serve(srv))
        return srv

    try:
        yield make
    finally:
        for close in closers:
            close()
