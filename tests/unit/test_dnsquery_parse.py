"""Reading DNS replies offline: messages built with dnspython's message API."""

from __future__ import annotations

import socket

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rrset
import pytest

from promptpath.core.errors import UsageError
from promptpath.net.dnsmsg import (
    Reply,
    combine,
    format_server,
    parse_resolv_conf,
    parse_server,
    rdtypes_for,
    read_reply,
)

SERVER = ("192.0.2.53", 53)


def response(
    qname: str,
    rdtype: str = "A",
    *,
    answer: tuple[str, ...] = (),
    authority: tuple[str, ...] = (),
    additional: tuple[str, ...] = (),
    rcode: int = dns.rcode.NOERROR,
    aa: bool = True,
    ede: tuple[tuple[int, str], ...] = (),
) -> dns.message.Message:
    """A reply as a server would send it; RR lines are zone-file text with absolute names."""
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
    if ede:
        reply.use_edns(0, options=[dns.edns.EDEOption(code, text or None) for code, text in ede])
    # Round-trip through wire format: what we parse is what a server would have sent.
    return dns.message.from_wire(reply.to_wire())


def reply_of(message: dns.message.Message | None, rdtype: str = "A", **kw: object) -> Reply:
    return Reply(
        server=SERVER,
        qname="www.example.com",
        rdtype=rdtype,
        rd=True,
        message=message,
        start_ns=1_000,
        end_ns=2_000,
        **kw,  # type: ignore[arg-type]
    )


SOA = "example.com. 300 IN SOA ns1.example.com. host.example.com. 7 3600 600 86400 60"


# -- server specs and resolv.conf --------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("127.0.0.1", ("127.0.0.1", 53)),
        ("127.0.0.1:5353", ("127.0.0.1", 5353)),
        ("::1", ("::1", 53)),
        ("2001:db8::1", ("2001:db8::1", 53)),
        ("[::1]:5353", ("::1", 5353)),
        ("[2001:db8::1]", ("2001:db8::1", 53)),
        (" 10.0.0.1:53 ", ("10.0.0.1", 53)),
    ],
)
def test_parse_server_accepts_addr_port_and_bracketed_ipv6(
    spec: str, expected: tuple[str, int]
) -> None:
    assert parse_server(spec) == expected


@pytest.mark.parametrize(
    "spec",
    [
        "ns1.example.com",
        "1.2.3.4:0",
        "1.2.3.4:70000",
        "1.2.3.4:dns",
        "[::1",
        "[::1]x",
        "[::1]:",
        "",
    ],
)
def test_parse_server_rejects_names_and_bad_ports(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_server(spec)


def test_format_server_brackets_ipv6_only() -> None:
    assert format_server(("127.0.0.1", 53)) == "127.0.0.1:53"
    assert format_server(("::1", 5353)) == "[::1]:5353"


def test_parse_resolv_conf_keeps_nameservers_in_order_and_skips_junk() -> None:
    text = """# generated
search example.com
nameserver 127.0.0.53
nameserver not-an-ip
options edns0 trust-ad
nameserver 2001:db8::53 # v6
; comment
nameserver 10.0.0.1
"""
    assert parse_resolv_conf(text) == ["127.0.0.53", "2001:db8::53", "10.0.0.1"]


def test_rdtypes_follow_the_family() -> None:
    assert rdtypes_for(0) == ("A", "AAAA")
    assert rdtypes_for(socket.AF_INET) == ("A",)
    assert rdtypes_for(socket.AF_INET6) == ("AAAA",)


# -- read_reply --------------------------------------------------------------------------


def test_plain_answer_gives_addresses_and_ttl() -> None:
    msg = response(
        "www.example.com",
        answer=("www.example.com. 300 IN A 192.0.2.1", "www.example.com. 300 IN A 192.0.2.2"),
    )
    facts = read_reply(msg, "www.example.com")
    assert facts.rcode == "NOERROR"
    assert facts.aa
    assert facts.addresses == (("192.0.2.1", "ipv4"), ("192.0.2.2", "ipv4"))
    assert facts.ttl == facts.chain_ttl == 300
    assert facts.cname_chain == ()
    assert facts.dangling is None


def test_cname_chain_is_followed_and_chain_ttl_is_the_minimum() -> None:
    msg = response(
        "api.example.com",
        answer=(
            "api.example.com. 3600 IN CNAME lb.example.com.",
            "lb.example.com. 60 IN CNAME edge.example.com.",
            "edge.example.com. 20 IN A 192.0.2.9",
            "other.example.com. 5 IN A 192.0.2.99",
        ),
    )
    facts = read_reply(msg, "API.example.com.")
    assert facts.cname_chain == ("lb.example.com", "edge.example.com")
    assert facts.addresses == (("192.0.2.9", "ipv4"),)
    assert facts.ttl == 20
    assert facts.chain_ttl == 20


def test_cname_to_another_zone_without_data_is_dangling() -> None:
    # nsd answers a CNAME out of its zone with the CNAME alone: the target is elsewhere.
    msg = response("www.example.com", answer=("www.example.com. 300 IN CNAME edge.cdn.test.",))
    facts = read_reply(msg, "www.example.com")
    assert facts.dangling == "edge.cdn.test"
    assert facts.addresses == ()


def test_cname_to_in_zone_name_without_aaaa_is_nodata_not_dangling() -> None:
    msg = response(
        "www.example.com",
        "AAAA",
        answer=("www.example.com. 300 IN CNAME host.example.com.",),
        authority=(SOA,),
    )
    facts = read_reply(msg, "www.example.com")
    assert facts.dangling is None
    assert facts.soa_zone == "example.com"


def test_nxdomain_carries_the_zone_and_negative_ttl() -> None:
    msg = response("gone.example.com", rcode=dns.rcode.NXDOMAIN, authority=(SOA,))
    facts = read_reply(msg, "gone.example.com")
    assert facts.rcode == "NXDOMAIN"
    assert facts.soa_zone == "example.com"
    assert facts.negative_ttl == 60  # min(SOA TTL 300, SOA minimum 60)


def test_referral_names_the_child_zone_servers_and_glue() -> None:
    msg = response(
        "www.sub.example.com",
        aa=False,
        authority=(
            "sub.example.com. 86400 IN NS ns2.sub.example.com.",
            "sub.example.com. 86400 IN NS ns1.sub.example.com.",
        ),
        additional=("ns1.sub.example.com. 86400 IN A 192.0.2.10",),
    )
    facts = read_reply(msg, "www.sub.example.com")
    assert facts.referral == ("ns1.sub.example.com", "ns2.sub.example.com")
    assert facts.referral_zone == "sub.example.com"
    assert facts.glue == (("ns1.sub.example.com", "192.0.2.10"),)


def test_ede_stale_answer_is_read_with_its_text() -> None:
    msg = response(
        "www.example.com",
        aa=False,
        answer=("www.example.com. 30 IN A 192.0.2.1",),
        ede=((int(dns.edns.EDECode.STALE_ANSWER), "served from expired cache"),),
    )
    facts = read_reply(msg, "www.example.com")
    assert facts.ede == ((3, "served from expired cache"),)
    assert facts.ttl == 30


def test_ipv6_answer_is_family_ipv6() -> None:
    msg = response("www.example.com", "AAAA", answer=("www.example.com. 10 IN AAAA 2001:db8::1",))
    assert read_reply(msg, "www.example.com").addresses == (("2001:db8::1", "ipv6"),)


# -- combine -----------------------------------------------------------------------------


def test_a_answer_and_aaaa_nodata_combine_to_ok_with_min_ttl() -> None:
    a = response("www.example.com", answer=("www.example.com. 40 IN A 192.0.2.1",))
    aaaa = response("www.example.com", "AAAA", authority=(SOA,))
    lk = combine([reply_of(a), reply_of(aaaa, "AAAA")], source="resolver", qname="www.example.com")
    assert lk.status == "ok"
    assert lk.ips == frozenset({"192.0.2.1"})
    assert lk.ttl == 40
    assert lk.error is None
    assert lk.server == "192.0.2.53:53"
    assert (lk.start_ns, lk.end_ns) == (1_000, 2_000)


def test_both_nxdomain_is_nxdomain_with_negative_ttl() -> None:
    nx = response("www.example.com", rcode=dns.rcode.NXDOMAIN, authority=(SOA,))
    lk = combine([reply_of(nx), reply_of(nx, "AAAA")], source="resolver", qname="www.example.com")
    assert lk.status == "nxdomain"
    assert lk.rcode == "NXDOMAIN"
    assert lk.negative_ttl == 60
    assert lk.error == "answered NXDOMAIN"


def test_timeouts_combine_to_timeout_with_the_detail_line() -> None:
    r = reply_of(None, error="timeout", detail="no answer from 192.0.2.53:53 (timeout)")
    lk = combine([r, r], source="resolver", qname="www.example.com")
    assert lk.status == "timeout"
    assert lk.rcode is None  # no reply, no rcode
    assert lk.error == "no answer from 192.0.2.53:53 (timeout)"


def test_servfail_on_one_type_and_timeout_on_the_other_prefers_servfail() -> None:
    sf = response("www.example.com", rcode=dns.rcode.SERVFAIL, aa=False)
    lk = combine(
        [reply_of(sf), reply_of(None, "AAAA", error="timeout", detail="t")],
        source="resolver",
        qname="www.example.com",
    )
    assert lk.status == "servfail"
    assert lk.rcode == "SERVFAIL"  # the reply that decided the status


def test_authoritative_query_answered_without_aa_is_lame() -> None:
    cached = response("www.example.com", aa=False, answer=("www.example.com. 9 IN A 192.0.2.1",))
    nodata = response("www.example.com", aa=False)
    lk = combine(
        [reply_of(nodata)], source="authoritative", qname="www.example.com", authoritative=True
    )
    assert lk.status == "lame"
    # Addresses win even without AA (a forwarder answering): ``aa`` says how much to trust it.
    lk2 = combine(
        [reply_of(cached)], source="authoritative", qname="www.example.com", authoritative=True
    )
    assert lk2.status == "ok"
    assert not lk2.aa


def test_authoritative_refused_is_lame_and_referral_is_referral() -> None:
    refused = response("www.example.com", rcode=dns.rcode.REFUSED, aa=False)
    lk = combine(
        [reply_of(refused)], source="authoritative", qname="www.example.com", authoritative=True
    )
    assert lk.status == "lame"
    assert "REFUSED" in (lk.error or "")
    ref = response(
        "www.example.com", aa=False, authority=("example.com. 3600 IN NS ns1.example.net.",)
    )
    lk = combine(
        [reply_of(ref)], source="authoritative", qname="www.example.com", authoritative=True
    )
    assert lk.status == "referral"
    assert lk.referral == ("ns1.example.net",)


def test_dangling_cname_at_an_authoritative_is_status_cname() -> None:
    msg = response("www.example.com", answer=("www.example.com. 300 IN CNAME edge.cdn.test.",))
    lk = combine(
        [reply_of(msg)], source="authoritative", qname="www.example.com", authoritative=True
    )
    assert lk.status == "cname"
    assert lk.dangling == "edge.cdn.test"
    assert lk.cname_chain == ("edge.cdn.test",)


def test_ede_and_tcp_are_merged_across_replies() -> None:
    stale = response(
        "www.example.com",
        aa=False,
        answer=("www.example.com. 30 IN A 192.0.2.1",),
        ede=((3, ""),),
    )
    aaaa = response("www.example.com", "AAAA", aa=False, ede=((3, ""),))
    lk = combine(
        [reply_of(stale), reply_of(aaaa, "AAAA", tcp=True)],
        source="resolver",
        qname="www.example.com",
    )
    assert lk.ede == ((3, ""),)
    assert lk.tcp


def test_empty_reply_list_is_a_network_failure() -> None:
    lk = combine([], source="resolver", qname="www.example.com")
    assert lk.status == "network"


def test_servfail_names_the_servers_own_reason_from_ede() -> None:
    sf = response(
        "www.example.com", rcode=dns.rcode.SERVFAIL, aa=False, ede=((22, "no reachable auth"),)
    )
    lk = combine([reply_of(sf)], source="resolver", qname="www.example.com")
    assert lk.status == "servfail"
    assert lk.error == 'answered SERVFAIL (EDE 22 "No Reachable Authority": no reachable auth)'
