"""--path-names' lookups on real loopback sockets, against a scripted DNS server: PTR answers
(hostile ones too), a name that has none, a server that never answers (bounded by the
budget), and the --resolve pins that are answered without a query."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.PTR
import dns.rrset
import pytest

from promptpath.net.ptr import reverse_names
from tests.helpers.scripteddns import MakeServer, scripted_dns

NAMED, NAMELESS, SILENT, PINNED = "10.9.0.1", "10.9.0.2", "10.9.0.3", "10.9.0.4"
#: Label bytes a hostile resolver may send: ESC and a colour, a newline, rich markup.
HOSTILE = dns.name.Name([b"r1\x1b[31m", b"new\nline[/x]", b"lab", b"test", b""])


@pytest.fixture
async def dns_server() -> AsyncIterator[MakeServer]:
    async with scripted_dns() as make:
        yield make


def _handler(query: dns.message.Message, transport: str) -> bytes | None:
    qname = query.question[0].name
    reply = dns.message.make_response(query)
    if qname == dns.name.from_text("1.0.9.10.in-addr.arpa."):
        ptr = dns.rdtypes.ANY.PTR.PTR(dns.rdataclass.IN, dns.rdatatype.PTR, HOSTILE)
        reply.answer.append(dns.rrset.from_rdata(qname, 60, ptr))
    elif qname == dns.name.from_text("3.0.9.10.in-addr.arpa."):
        return None  # never answers
    else:
        reply.set_rcode(dns.rcode.NXDOMAIN)
    return reply.to_wire()


async def test_names_come_from_the_resolver_escaped_and_within_the_budget(
    dns_server: MakeServer,
) -> None:
    srv = await dns_server(_handler)
    start = time.perf_counter()
    answers = await reverse_names(
        [NAMED, NAMELESS, SILENT, PINNED, NAMED],
        pins={PINNED: "api.lab.test"},
        resolver=srv.address,
        budget_s=1.0,
    )
    elapsed = time.perf_counter() - start
    by = {a.address: a for a in answers}
    assert [a.address for a in answers] == [NAMED, NAMELESS, SILENT, PINNED, NAMED]
    # dnspython spells bytes outside printable ASCII as \DDD: no control character arrives.
    assert by[NAMED].name == "r1\\027[31m.new\\010line[/x].lab.test"
    assert by[NAMED].source == f"resolver {srv.address}"
    assert by[NAMELESS].name is None and by[NAMELESS].error == "no name"
    assert by[SILENT].name is None and by[SILENT].error == "timeout"
    assert by[PINNED].name == "api.lab.test" and by[PINNED].source == "--resolve"
    # One PTR query per address asked, the duplicate and the pinned one never sent (the
    # silent one may be retried once within the budget).
    asked = [str(q.question[0].name) for _t, q in srv.seen]
    assert set(asked) == {
        "1.0.9.10.in-addr.arpa.",
        "2.0.9.10.in-addr.arpa.",
        "3.0.9.10.in-addr.arpa.",
    }
    assert all(q.question[0].rdtype == dns.rdatatype.PTR for _t, q in srv.seen)
    assert asked.count("1.0.9.10.in-addr.arpa.") == 1
    # The silent server holds nobody past the budget (generous for a loaded machine).
    assert 0.8 <= elapsed < 1.8, elapsed
