"""One DNS query over UDP, stamped at the socket: sent just before the datagram is handed
to the kernel, received when the kernel received the answer (SO_TIMESTAMPNS, rxstamp.py;
else when the loop reads it), before it is parsed.

dnspython's ``asyncquery.udp`` makes its socket, builds the wire form and parses the answer
inside the span a caller can time around it: ~1-2 ms of Python on a small machine against
a 0.1 ms exchange with a loopback resolver (measured). Here the socket and the wire form are
ready before the send is stamped, and the parse comes after the arrival is; with A and
AAAA in flight together, the second answer's stamp does not wait for the first's parse.
dnspython is imported inside the function, as in dnsquery.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import TYPE_CHECKING

from promptpath.net import flows
from promptpath.net.dnsfeatures import plain_dns_only
from promptpath.net.rxstamp import enable_rx_stamps, perf_ns_of, rx_stamp

if TYPE_CHECKING:
    import dns.message

__all__ = ["exchange_udp"]


async def exchange_udp(
    query: dns.message.Message, host: str, port: int, *, timeout: float
) -> tuple[dns.message.Message, int, int]:
    """The answer to ``query`` from ``host``:``port`` (an IP literal) and (sent_ns,
    received_ns) on the perf_counter clock.

    The socket is connected, so the kernel drops datagrams from anyone else. As dnspython's
    ``udp``: raises ``dns.exception.Timeout``, ``ConnectionRefusedError`` (ICMP port
    unreachable), other ``OSError``, dnspython's parse errors for a malformed answer and
    ``dns.query.BadResponse`` for one that does not answer this query (id, question)."""
    plain_dns_only()
    import dns.exception
    import dns.inet
    import dns.message
    import dns.query

    loop = asyncio.get_running_loop()
    wire = query.to_wire()
    sock = socket.socket(dns.inet.af_for_address(host), socket.SOCK_DGRAM)
    arrived: asyncio.Future[tuple[bytes, int]] = loop.create_future()

    def readable() -> None:
        try:
            data, ancillary, _flags, _addr = sock.recvmsg(65535, cmsg_size)
        except BlockingIOError:
            return
        except OSError as exc:  # an ICMP error queued on the socket
            if not arrived.done():
                arrived.set_exception(exc)
            return
        if not arrived.done():
            arrived.set_result((data, perf_ns_of(rx_stamp(ancillary), time.perf_counter_ns())))

    try:
        sock.setblocking(False)
        cmsg_size = enable_rx_stamps(sock)
        sock.connect((host, port))  # UDP: no packet, only the kernel's filter
        flows.note_socket(sock, flows.UDP)
        loop.add_reader(sock.fileno(), readable)
        try:
            sent_ns = time.perf_counter_ns()
            sock.send(wire)
            try:
                async with asyncio.timeout(timeout):
                    data, received_ns = await arrived
            except TimeoutError as exc:
                raise dns.exception.Timeout(timeout=timeout) from exc  # type: ignore[no-untyped-call]
        finally:
            loop.remove_reader(sock.fileno())
    finally:
        sock.close()
    answer = dns.message.from_wire(data, ignore_trailing=True)
    if not query.is_response(answer):
        raise dns.query.BadResponse
    return answer, sent_ns, received_ns
