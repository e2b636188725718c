"""The Querier on real loopback sockets against a scripted DNS server: TCP after truncation,
no-EDNS retry, timeouts, budgets, garbage replies, and resolve_with's error kinds."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
from collections.abc import AsyncIterator

import dns.flags
import dns.message
import dns.rcode
import dns.rrset
import pytest

from promptpath.core.errors import DNSError
from promptpath.net.dnsquery import RESOLVE_DETAIL_KEYS, Querier, lookup, resolve_with
from tests.helpers.scripteddns import MakeServer, scripted_dns

NAME = "svc.lab.test"


def answer(query: dns.message.Message, *ips: str, ttl: int = 60) -> dns.message.Message:
    reply = dns.message.make_response(query)
    if ips and query.question[0].rdtype == 1:  # A
        reply.answer.append(dns.rrset.from_text(NAME + ".", ttl, "IN", "A", *ips))
    return reply


@pytest.fixture
async def dns_server() -> AsyncIterator[MakeServer]:
    async with scripted_dns() as make:
        yield make


async def test_truncated_udp_answer_is_fetched_again_over_tcp(dns_server: MakeServer) -> None:
    def handler(query: dns.message.Message, transport: str) -> bytes:
        if transport == "udp":
            reply = dns.message.make_response(query)
            reply.flags |= dns.flags.TC
            return reply.to_wire()
        return answer(query, "127.0.0.9").to_wire()

    srv = await dns_server(handler)
    querier = Querier(timeout=2.0, max_queries=4, budget_s=5.0)
    found = await lookup(
        querier, srv.server, NAME, family=socket.AF_INET, rd=True, source="resolver"
    )
    assert found.status == "ok"
    assert found.ips == frozenset({"127.0.0.9"})
    assert found.tcp
    assert [t for t, _ in srv.seen] == ["udp", "tcp"]


async def test_server_without_edns_is_asked_again_without_it(dns_server: MakeServer) -> None:
    def handler(query: dns.message.Message, transport: str) -> bytes:
        if query.edns >= 0:
            reply = dns.message.make_response(query)
            reply.use_edns(False)
            reply.set_rcode(dns.rcode.FORMERR)
            return reply.to_wire()
        return answer(query, "127.0.0.10").to_wire()

    srv = await dns_server(handler)
    querier = Querier(timeout=2.0, max_queries=4, budget_s=5.0)
    found = await lookup(
        querier, srv.server, NAME, family=socket.AF_INET, rd=True, source="resolver"
    )
    assert found.ips == frozenset({"127.0.0.10"})
    assert [q.edns for _, q in srv.seen] == [0, -1]


async def test_silent_server_times_out_within_the_query_timeout(dns_server: MakeServer) -> None:
    srv = await dns_server(lambda q, t: None)
    querier = Querier(timeout=0.6, max_queries=8, budget_s=5.0)
    start = time.monotonic()
    found = await lookup(querier, srv.server, NAME, family=0, rd=True, source="resolver")
    assert time.monotonic() - start < 1.5
    assert found.status == "timeout"
    assert found.error == f"no answer from {srv.address} (timeout)"


async def test_lost_datagram_is_retransmitted_within_the_timeout(
    dns_server: MakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("promptpath.net.dnsquery.UDP_TRY_S", 0.3)
    calls = {"n": 0}

    def handler(query: dns.message.Message, transport: str) -> bytes | None:
        calls["n"] += 1
        return None if calls["n"] == 1 else answer(query, "127.0.0.11").to_wire()

    srv = await dns_server(handler)
    querier = Querier(timeout=2.0, max_queries=4, budget_s=5.0)
    found = await lookup(
        querier, srv.server, NAME, family=socket.AF_INET, rd=True, source="resolver"
    )
    assert found.status == "ok"
    assert querier.sent == 2


async def test_query_budget_stops_sending(dns_server: MakeServer) -> None:
    srv = await dns_server(lambda q, t: answer(q, "127.0.0.12").to_wire())
    querier = Querier(timeout=1.0, max_queries=1, budget_s=5.0)
    found = await lookup(querier, srv.server, NAME, family=0, rd=True, source="resolver")
    assert querier.sent == 1
    assert querier.exhausted
    assert len(srv.seen) == 1
    assert found.status == "ok"  # the A that was sent still answered


async def test_garbage_reply_is_malformed_not_a_crash(dns_server: MakeServer) -> None:
    def handler(query: dns.message.Message, transport: str) -> bytes:
        return query.to_wire()[:2] + b"\x81\x80\x00\x01\x00\x05"  # id matches, body truncated

    srv = await dns_server(handler)
    querier = Querier(timeout=0.8, max_queries=2, budget_s=5.0)
    found = await lookup(
        querier, srv.server, NAME, family=socket.AF_INET, rd=True, source="resolver"
    )
    assert found.status == "malformed"
    assert (found.error or "").startswith(f"bad reply from {srv.address}")


@pytest.mark.parametrize(
    ("rcode", "kind"),
    [
        (dns.rcode.SERVFAIL, "servfail"),
        (dns.rcode.REFUSED, "refused"),
        (dns.rcode.NXDOMAIN, "nxdomain"),
    ],
)
async def test_resolve_with_maps_rcodes_to_error_kinds(
    dns_server: MakeServer, rcode: int, kind: str
) -> None:
    def handler(query: dns.message.Message, transport: str) -> bytes:
        reply = dns.message.make_response(query)
        reply.set_rcode(rcode)
        return reply.to_wire()

    srv = await dns_server(handler)
    with pytest.raises(DNSError) as exc:
        await resolve_with(srv.address, NAME, family=0, timeout=2.0)
    assert exc.value.kind == kind
    assert exc.value.stage == "dns"
    assert srv.address in exc.value.message
    assert "\n" not in exc.value.message
    detail = exc.value.detail
    assert set(RESOLVE_DETAIL_KEYS) <= set(detail)
    assert detail["resolver"] == srv.address
    assert detail["rcode"] == dns.rcode.to_text(rcode)
    assert detail["status"] == kind


async def test_a_failed_resolve_carries_what_the_resolver_said_and_when(
    dns_server: MakeServer,
) -> None:
    # NXDOMAIN at the end of a CNAME chain, with the zone's SOA: the tracer needs all of it
    # for a partial dns record, since no DNSAnswer exists.
    soa = "lab.test. 60 IN SOA ns.lab.test. host.lab.test. 1 3600 600 86400 45"

    def handler(query: dns.message.Message, transport: str) -> bytes:
        reply = dns.message.make_response(query)
        reply.set_rcode(dns.rcode.NXDOMAIN)
        reply.answer.append(dns.rrset.from_text(NAME + ".", 30, "IN", "CNAME", "gone.lab.test."))
        name, ttl, cls, typ, *data = soa.split()
        reply.authority.append(dns.rrset.from_text(name, int(ttl), cls, typ, " ".join(data)))
        return reply.to_wire()

    srv = await dns_server(handler)
    before = time.perf_counter_ns()
    with pytest.raises(DNSError) as exc:
        await resolve_with(srv.address, NAME, family=socket.AF_INET, timeout=2.0)
    after = time.perf_counter_ns()
    detail = exc.value.detail
    assert exc.value.kind == "nxdomain"
    assert detail["rcode"] == "NXDOMAIN"
    assert detail["cname_chain"] == ["gone.lab.test"]
    assert detail["negative_ttl"] == 45
    start, end = detail["start_ns"], detail["end_ns"]
    assert isinstance(start, int) and isinstance(end, int)
    assert before <= start <= end <= after
    assert detail["elapsed_ms"] == round((end - start) / 1e6, 3)


async def test_a_resolver_that_never_answers_leaves_no_rcode_but_its_query_times() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(DNSError) as exc:
            await resolve_with(address, NAME, family=socket.AF_INET, timeout=0.5)
    detail = exc.value.detail
    assert exc.value.kind == "timeout"
    assert detail["rcode"] is None and detail["status"] == "timeout"
    start, end = detail["start_ns"], detail["end_ns"]
    assert isinstance(start, int) and isinstance(end, int)
    assert 0.4e9 <= end - start <= 1.5e9


#: Run in a fresh interpreter: which dnspython modules load while a query is timed?
_IMPORT_SPY = """
import asyncio, importlib.abc, json, sys, time

loads = []

class Spy(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "dns" or name.startswith("dns.") or name == "aioquic":
            loads.append((name, time.perf_counter_ns()))
        return None

sys.meta_path.insert(0, Spy())
from promptpath.core.errors import DNSError
from promptpath.net.dnsquery import resolve_with

async def main():
    try:
        got = await resolve_with(sys.argv[1], sys.argv[2], family=2, timeout=3.0)
        start, end = got.start_ns, got.end_ns
    except DNSError as exc:
        start, end = exc.detail["start_ns"], exc.detail["end_ns"]
    inside = [name for name, t in loads if start <= t <= end]
    print(json.dumps({"loaded": len(loads), "inside": inside}))

asyncio.run(main())
"""


@pytest.mark.parametrize("qname", [NAME, "nope." + NAME], ids=["answer", "nxdomain"])
async def test_the_resolvers_stamps_exclude_loading_dnspython(
    dns_server: MakeServer, qname: str
) -> None:
    def handler(query: dns.message.Message, transport: str) -> bytes:
        if str(query.question[0].name).startswith("nope."):
            reply = dns.message.make_response(query)
            reply.set_rcode(dns.rcode.NXDOMAIN)
            return reply.to_wire()
        return answer(query, "127.0.0.16").to_wire()

    srv = await dns_server(handler)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _IMPORT_SPY,
        srv.address,
        qname,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    seen = json.loads(out)
    assert seen["loaded"] > 10  # the spy saw dnspython load: it was a fresh interpreter
    assert seen["inside"] == []


async def test_resolve_with_reports_the_ttl_and_keeps_the_ipv4_answer_when_aaaa_fails(
    dns_server: MakeServer,
) -> None:
    def handler(query: dns.message.Message, transport: str) -> bytes:
        if query.question[0].rdtype == 1:
            return answer(query, "127.0.0.13", ttl=42).to_wire()
        reply = dns.message.make_response(query)
        reply.set_rcode(dns.rcode.SERVFAIL)
        return reply.to_wire()

    srv = await dns_server(handler)
    got = await resolve_with(srv.address, NAME, family=0, timeout=2.0)
    assert got.addresses == (("127.0.0.13", "ipv4"),)
    assert got.ttl == 42
    assert got.resolver == srv.address


async def test_resolver_sitting_on_aaaa_does_not_hold_up_the_ipv4_answer(
    dns_server: MakeServer,
) -> None:
    # unbound does this when the authority is gone: A from the (stale) cache at once, AAAA
    # never. The connection should not wait out the whole timeout for AAAA.
    def handler(query: dns.message.Message, transport: str) -> bytes | None:
        return answer(query, "127.0.0.14").to_wire() if query.question[0].rdtype == 1 else None

    srv = await dns_server(handler)
    start = time.monotonic()
    got = await resolve_with(srv.address, NAME, family=0, timeout=3.0)
    assert time.monotonic() - start < 0.5
    assert got.addresses == (("127.0.0.14", "ipv4"),)


async def test_without_grace_lookup_waits_for_every_type(dns_server: MakeServer) -> None:
    def handler(query: dns.message.Message, transport: str) -> bytes | None:
        return answer(query, "127.0.0.15").to_wire() if query.question[0].rdtype == 1 else None

    srv = await dns_server(handler)
    querier = Querier(timeout=0.4, max_queries=4, budget_s=5.0)
    start = time.monotonic()
    found = await lookup(querier, srv.server, NAME, family=0, rd=False, source="authoritative")
    assert time.monotonic() - start >= 0.35
    assert found.status == "ok"


async def test_the_answer_is_stamped_when_it_arrived_not_when_the_loop_read_it() -> None:
    """A busy loop reads the answer late; the reply's end is the kernel's receive stamp.

    The server is a thread with a blocking socket, so it answers while this loop sleeps."""
    import threading

    from promptpath.net.rxstamp import enable_rx_stamps

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        if not enable_rx_stamps(probe):
            pytest.skip("no SO_TIMESTAMPNS on this platform")
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(5)
    answered = threading.Event()

    def serve_one() -> None:
        wire, addr = server.recvfrom(512)
        server.sendto(answer(dns.message.from_wire(wire), "127.0.0.16").to_wire(), addr)
        answered.set()

    thread = threading.Thread(target=serve_one)
    thread.start()
    try:
        querier = Querier(timeout=2.0, max_queries=2, budget_s=2.0)
        started = time.perf_counter_ns()
        task = asyncio.ensure_future(querier(server.getsockname(), NAME, "A", rd=True))
        await asyncio.sleep(0)  # the task runs up to its wait: the query is sent
        time.sleep(0.2)  # the loop is busy while the answer arrives
        reply = await task
        waited_ns = time.perf_counter_ns() - started
    finally:
        thread.join(5)
        server.close()
    assert answered.is_set() and reply.message is not None
    assert waited_ns >= 200_000_000
    # Loopback answers in well under a millisecond; 50 ms leaves room for a loaded machine
    # and is a quarter of the time the loop made the answer wait.
    assert reply.end_ns - reply.start_ns < 50_000_000
