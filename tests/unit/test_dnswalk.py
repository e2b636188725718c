"""The authoritative walk, offline: every query answered from recorded messages."""

from __future__ import annotations

import socket

import dns.flags
import dns.message
import dns.rcode
import dns.rrset

from promptpath.net.dnsmsg import Reply, Server
from promptpath.net.dnswalk import find_authoritative, parent_of, zone_from_reply

RESOLVER: Server = ("10.0.0.53", 53)
NS1: Server = ("192.0.2.1", 53)
NS2: Server = ("192.0.2.2", 53)
CDN_NS: Server = ("198.51.100.1", 53)
V4 = socket.AF_INET

SOA_EXAMPLE = "example.com. 300 IN SOA ns1.example.com. host.example.com. 7 3600 600 86400 60"
SOA_CDN = "cdn.test. 60 IN SOA ns.cdn.test. host.cdn.test. 1 3600 600 86400 30"

Key = tuple[Server, str, str, bool]


def msg(
    qname: str,
    rdtype: str,
    *,
    answer: tuple[str, ...] = (),
    authority: tuple[str, ...] = (),
    additional: tuple[str, ...] = (),
    rcode: int = dns.rcode.NOERROR,
    aa: bool = True,
) -> dns.message.Message:
    query = dns.message.make_query(qname, rdtype, use_edns=0)
    reply = dns.message.make_response(query)
    reply.set_rcode(rcode)
    if aa:
        reply.flags |= dns.flags.AA
    for section, lines in (
        (reply.answer, answer),
        (reply.authority, authority),
        (reply.additional, additional),
    ):
        for line in lines:
            name, ttl, cls, typ, *data = line.split()
            section.append(dns.rrset.from_text(name, int(ttl), cls, typ, " ".join(data)))
    return dns.message.from_wire(reply.to_wire())


class Recorded:
    """An Exchange that answers from a table and records what it was asked."""

    def __init__(self, table: dict[Key, dns.message.Message | str]) -> None:
        self.table = table
        self.asked: list[Key] = []

    async def __call__(self, server: Server, qname: str, rdtype: str, *, rd: bool) -> Reply:
        key = (server, qname.rstrip(".").lower(), rdtype, rd)
        self.asked.append(key)
        found = self.table.get(key, "timeout")
        if isinstance(found, str):
            return Reply(
                server=server,
                qname=qname,
                rdtype=rdtype,
                rd=rd,
                message=None,
                error=found,
                detail=f"{found} at {server[0]}",
            )
        return Reply(server=server, qname=qname, rdtype=rdtype, rd=rd, message=found)


def example_zone_walk() -> dict[Key, dns.message.Message | str]:
    """Resolver knows example.com: NODATA SOA for www, two NS, glue for ns1 only."""
    return {
        (RESOLVER, "www.example.com", "SOA", True): msg(
            "www.example.com", "SOA", aa=False, authority=(SOA_EXAMPLE,)
        ),
        (RESOLVER, "example.com", "NS", True): msg(
            "example.com",
            "NS",
            aa=False,
            answer=(
                "example.com. 3600 IN NS ns2.example.com.",
                "example.com. 3600 IN NS ns1.example.com.",
            ),
            additional=("ns1.example.com. 3600 IN A 192.0.2.1",),
        ),
        (RESOLVER, "ns2.example.com", "A", True): msg(
            "ns2.example.com", "A", aa=False, answer=("ns2.example.com. 3600 IN A 192.0.2.2",)
        ),
    }


def www_at(
    server: Server, ip: str = "192.0.2.80", ttl: int = 300
) -> dict[Key, dns.message.Message | str]:
    return {
        (server, "www.example.com", "A", False): msg(
            "www.example.com", "A", answer=(f"www.example.com. {ttl} IN A {ip}",)
        )
    }


async def test_walk_finds_zone_servers_and_asks_them_without_recursion() -> None:
    ex = Recorded({**example_zone_walk(), **www_at(NS1), **www_at(NS2)})
    result = await find_authoritative(ex, "www.example.com", family=V4, resolver=RESOLVER)
    assert result.method == "walk"
    assert result.status == "ok"
    assert result.ips == frozenset({"192.0.2.80"})
    assert result.ttl == 300
    assert result.hops[0].zone == "example.com"
    assert {lk.nsname for lk in result.final} == {"ns1.example.com", "ns2.example.com"}
    assert all(lk.aa for lk in result.final)
    # Glue saved a query for ns1; ns2's address came from the resolver.
    assert (RESOLVER, "ns1.example.com", "A", True) not in ex.asked
    assert (RESOLVER, "ns2.example.com", "A", True) in ex.asked
    # The authoritative servers were asked with RD clear.
    assert (NS1, "www.example.com", "A", False) in ex.asked


async def test_walk_climbs_past_a_cname_to_find_the_owner_zone() -> None:
    table = {
        **example_zone_walk(),
        (RESOLVER, "www.example.com", "SOA", True): msg(
            "www.example.com",
            "SOA",
            aa=False,
            answer=("www.example.com. 300 IN CNAME host.example.com.",),
            authority=(SOA_EXAMPLE,),
        ),
        (RESOLVER, "example.com", "SOA", True): msg(
            "example.com", "SOA", aa=False, answer=(SOA_EXAMPLE,)
        ),
        **www_at(NS1),
        **www_at(NS2),
    }
    ex = Recorded(table)
    result = await find_authoritative(ex, "www.example.com", family=V4, resolver=RESOLVER)
    assert result.hops[0].zone == "example.com"
    assert (RESOLVER, "example.com", "SOA", True) in ex.asked


async def test_cname_into_another_zone_starts_a_second_hop() -> None:
    cname = msg("www.example.com", "A", answer=("www.example.com. 300 IN CNAME edge.cdn.test.",))
    table = {
        **example_zone_walk(),
        (NS1, "www.example.com", "A", False): cname,
        (NS2, "www.example.com", "A", False): cname,
        (RESOLVER, "edge.cdn.test", "SOA", True): msg(
            "edge.cdn.test", "SOA", aa=False, authority=(SOA_CDN,)
        ),
        (RESOLVER, "cdn.test", "NS", True): msg(
            "cdn.test",
            "NS",
            aa=False,
            answer=("cdn.test. 3600 IN NS ns.cdn.test.",),
            additional=("ns.cdn.test. 3600 IN A 198.51.100.1",),
        ),
        (CDN_NS, "edge.cdn.test", "A", False): msg(
            "edge.cdn.test", "A", answer=("edge.cdn.test. 20 IN A 198.51.100.7",)
        ),
    }
    result = await find_authoritative(
        Recorded(table), "www.example.com", family=V4, resolver=RESOLVER
    )
    assert [h.zone for h in result.hops] == ["example.com", "cdn.test"]
    assert result.status == "ok"
    assert result.ips == frozenset({"198.51.100.7"})
    assert result.ttl == 20
    assert result.cname_chain == ("edge.cdn.test",)


async def test_one_lame_server_does_not_hide_the_good_answer() -> None:
    table = {
        **example_zone_walk(),
        **www_at(NS1),
        (NS2, "www.example.com", "A", False): msg(
            "www.example.com", "A", rcode=dns.rcode.REFUSED, aa=False
        ),
    }
    result = await find_authoritative(
        Recorded(table), "www.example.com", family=V4, resolver=RESOLVER
    )
    assert result.status == "ok"
    statuses = {lk.nsname: lk.status for lk in result.final}
    assert statuses == {"ns1.example.com": "ok", "ns2.example.com": "lame"}


async def test_all_servers_timing_out_is_unreachable() -> None:
    result = await find_authoritative(
        Recorded(example_zone_walk()), "www.example.com", family=V4, resolver=RESOLVER
    )
    assert result.status == "unreachable"
    assert all(lk.status == "timeout" for lk in result.final)


async def test_all_servers_answering_without_authority_is_lame() -> None:
    lame = msg("www.example.com", "A", aa=False)
    table = {
        **example_zone_walk(),
        (NS1, "www.example.com", "A", False): lame,
        (NS2, "www.example.com", "A", False): lame,
    }
    result = await find_authoritative(
        Recorded(table), "www.example.com", family=V4, resolver=RESOLVER
    )
    assert result.status == "lame"


async def test_nxdomain_at_the_authority_is_reported_as_such() -> None:
    nx = msg("www.example.com", "A", rcode=dns.rcode.NXDOMAIN, authority=(SOA_EXAMPLE,))
    table = {
        **example_zone_walk(),
        (NS1, "www.example.com", "A", False): nx,
        (NS2, "www.example.com", "A", False): nx,
    }
    result = await find_authoritative(
        Recorded(table), "www.example.com", family=V4, resolver=RESOLVER
    )
    assert result.status == "nxdomain"
    assert result.ips == frozenset()


async def test_referral_to_a_child_zone_is_followed_once() -> None:
    referral = msg(
        "www.example.com",
        "A",
        aa=False,
        authority=("www.example.com. 3600 IN NS ns.www.example.com.",),
        additional=("ns.www.example.com. 3600 IN A 192.0.2.77",),
    )
    child: Server = ("192.0.2.77", 53)
    table = {
        **example_zone_walk(),
        (NS1, "www.example.com", "A", False): referral,
        (NS2, "www.example.com", "A", False): referral,
        **www_at(child, ip="192.0.2.81"),
    }
    result = await find_authoritative(
        Recorded(table), "www.example.com", family=V4, resolver=RESOLVER
    )
    assert result.status == "ok"
    assert result.hops[0].zone == "www.example.com"
    assert result.ips == frozenset({"192.0.2.81"})
    assert any("referred" in n for n in result.notes)


async def test_named_authoritative_is_asked_directly_and_nothing_else() -> None:
    named: Server = ("127.0.0.1", 5300)
    ex = Recorded(www_at(named, ip="127.0.0.3", ttl=2))
    result = await find_authoritative(
        ex, "www.example.com", family=V4, resolver=RESOLVER, named=named
    )
    assert result.method == "--authoritative"
    assert result.ips == frozenset({"127.0.0.3"})
    assert result.ttl == 2
    assert ex.asked == [(named, "www.example.com", "A", False)]


async def test_named_server_answering_from_its_cache_is_lame_not_the_authority() -> None:
    # --authoritative pointed at a resolver: it answers RD=0 from its cache, without AA.
    named: Server = ("127.0.0.1", 5300)
    cached = msg("www.example.com", "A", answer=("www.example.com. 17 IN A 127.0.0.9",), aa=False)
    result = await find_authoritative(
        Recorded({(named, "www.example.com", "A", False): cached}),
        "www.example.com",
        family=V4,
        resolver=RESOLVER,
        named=named,
    )
    assert result.status == "lame"
    assert result.ips == frozenset()  # a cache's copy is not what the zone says
    assert result.ttl is None
    (server,) = result.final
    assert server.status == "ok" and not server.aa and server.ips == {"127.0.0.9"}


async def test_one_server_answering_from_a_cache_does_not_taint_the_zones_answer() -> None:
    cached = msg("www.example.com", "A", answer=("www.example.com. 9 IN A 192.0.2.99",), aa=False)
    table = {**example_zone_walk(), **www_at(NS1), (NS2, "www.example.com", "A", False): cached}
    result = await find_authoritative(
        Recorded(table), "www.example.com", family=V4, resolver=RESOLVER
    )
    assert result.status == "ok"
    assert result.ips == frozenset({"192.0.2.80"})
    assert result.ttl == 300


async def test_named_server_without_the_cname_target_falls_back_to_the_walk() -> None:
    named: Server = ("127.0.0.1", 5300)
    table = {
        (named, "www.example.com", "A", False): msg(
            "www.example.com", "A", answer=("www.example.com. 300 IN CNAME edge.cdn.test.",)
        ),
        (named, "edge.cdn.test", "A", False): msg(
            "edge.cdn.test", "A", rcode=dns.rcode.REFUSED, aa=False
        ),
        (RESOLVER, "edge.cdn.test", "SOA", True): msg(
            "edge.cdn.test", "SOA", aa=False, authority=(SOA_CDN,)
        ),
        (RESOLVER, "cdn.test", "NS", True): msg(
            "cdn.test",
            "NS",
            aa=False,
            answer=("cdn.test. 3600 IN NS ns.cdn.test.",),
            additional=("ns.cdn.test. 3600 IN A 198.51.100.1",),
        ),
        (CDN_NS, "edge.cdn.test", "A", False): msg(
            "edge.cdn.test", "A", answer=("edge.cdn.test. 20 IN A 198.51.100.7",)
        ),
    }
    result = await find_authoritative(
        Recorded(table), "www.example.com", family=V4, resolver=RESOLVER, named=named
    )
    assert result.ips == frozenset({"198.51.100.7"})
    assert any("not authoritative for edge.cdn.test" in n for n in result.notes)


async def test_without_a_resolver_or_named_server_the_servers_are_not_found() -> None:
    ex = Recorded({})
    result = await find_authoritative(ex, "www.example.com", family=V4, resolver=None)
    assert result.status == "not_found"
    assert ex.asked == []
    assert any("--authoritative" in n for n in result.notes)


async def test_resolver_timeout_during_the_soa_step_is_a_note_not_a_crash() -> None:
    result = await find_authoritative(Recorded({}), "www.example.com", family=V4, resolver=RESOLVER)
    assert result.status == "not_found"
    assert any("SOA query for www.example.com" in n for n in result.notes)


async def test_cname_loop_across_zones_stops() -> None:
    named: Server = ("127.0.0.1", 5300)
    table = {
        (named, "a.example.com", "A", False): msg(
            "a.example.com", "A", answer=("a.example.com. 300 IN CNAME b.example.net.",)
        ),
        (named, "b.example.net", "A", False): msg(
            "b.example.net", "A", answer=("b.example.net. 300 IN CNAME a.example.com.",)
        ),
    }
    ex = Recorded(table)
    result = await find_authoritative(ex, "a.example.com", family=V4, resolver=None, named=named)
    assert any("CNAME loop" in n for n in result.notes)
    assert len(ex.asked) == 2


async def test_spent_budget_is_reported_as_budget() -> None:
    named: Server = ("127.0.0.1", 5300)
    ex = Recorded({(named, "www.example.com", "A", False): "budget"})
    result = await find_authoritative(ex, "www.example.com", family=V4, resolver=None, named=named)
    assert result.status == "budget"


async def test_family_zero_asks_a_and_aaaa_at_each_server() -> None:
    named: Server = ("127.0.0.1", 5300)
    table = {
        **www_at(named),
        (named, "www.example.com", "AAAA", False): msg(
            "www.example.com", "AAAA", answer=("www.example.com. 300 IN AAAA 2001:db8::80",)
        ),
    }
    result = await find_authoritative(
        Recorded(table), "www.example.com", family=0, resolver=None, named=named
    )
    assert result.ips == frozenset({"192.0.2.80", "2001:db8::80"})


def test_zone_from_reply_reads_answer_soa_authority_soa_or_cname() -> None:
    apex = msg("example.com", "SOA", answer=(SOA_EXAMPLE,))
    assert zone_from_reply(apex, "example.com") == "example.com"
    below = msg("www.example.com", "SOA", authority=(SOA_EXAMPLE,))
    assert zone_from_reply(below, "www.example.com") == "example.com"
    cname = msg("www.example.com", "SOA", answer=("www.example.com. 1 IN CNAME x.test.",))
    assert zone_from_reply(cname, "www.example.com") is None
    unrelated = msg("www.example.org", "SOA", authority=(SOA_EXAMPLE,))
    assert zone_from_reply(unrelated, "www.example.org") is None


def test_parent_of_climbs_to_the_root() -> None:
    assert parent_of("www.example.com") == "example.com"
    assert parent_of("com") == "."
    assert parent_of(".") is None
