"""Alt-Svc (RFC 7838) parsing, HTTPS records (RFC 9460) and the JSON ``h3`` object. Pure."""

from __future__ import annotations

import pytest

from promptpath.net.altsvc import (
    DEFAULT_MAX_AGE,
    AltService,
    HTTPSRecord,
    https_qname,
    parse_alt_svc,
    record_from_rdata,
)
from promptpath.tracer.h3discovery import build_h3, describe_h3


def test_typical_h3_advertisement_with_draft_versions() -> None:
    got = parse_alt_svc('h3=":443"; ma=86400, h3-29=":443"; ma=86400')
    assert [s.protocol for s in got.services] == ["h3", "h3-29"]
    h3 = got.by_protocol("h3")
    assert h3 == AltService(protocol="h3", host=None, port=443, max_age=86400, persist=False)
    assert h3.authority == ":443"
    assert not got.problems and not got.clear


def test_ma_defaults_to_24_hours_and_persist_is_read() -> None:
    got = parse_alt_svc('h3="alt.example.com:8443";persist=1')
    service = got.services[0]
    assert (service.host, service.port, service.max_age, service.persist) == (
        "alt.example.com",
        8443,
        DEFAULT_MAX_AGE,
        True,
    )
    assert service.authority == "alt.example.com:8443"


def test_persist_other_than_1_is_ignored() -> None:
    assert parse_alt_svc('h3=":1"; persist=0').services[0].persist is False


def test_ipv6_literal_authority_is_bracketed() -> None:
    service = parse_alt_svc('h3="[2001:db8::1]:443"; ma=60').services[0]
    assert service.host == "2001:db8::1"
    assert service.authority == "[2001:db8::1]:443"


def test_several_fields_form_one_list() -> None:
    got = parse_alt_svc(['h2=":8443"', 'h3=":8443"; ma=3600'])
    assert [(s.protocol, s.port, s.max_age) for s in got.services] == [
        ("h2", 8443, DEFAULT_MAX_AGE),
        ("h3", 8443, 3600),
    ]


def test_clear_alone_clears() -> None:
    got = parse_alt_svc("clear")
    assert got.clear and not got.services and not got.problems


def test_clear_in_a_later_field_still_counts() -> None:
    got = parse_alt_svc(['h3=":443"', "clear"])
    assert got.clear
    assert (
        build_h3(
            origin_host="a.example",
            origin_port=443,
            alt_svc_values=['h3=":443"', "clear"],
            records=None,
        )["advertised_by"]
        is None
    )


def test_protocol_id_is_percent_decoded() -> None:
    assert parse_alt_svc('h3%2D29=":443"').services[0].protocol == "h3-29"


def test_quoted_parameter_may_hold_commas_and_escapes() -> None:
    got = parse_alt_svc(r'h3=":443"; foo="a,b\"c", h2=":444"')
    assert [s.protocol for s in got.services] == ["h3", "h2"]
    assert got.services[0].params == (("foo", 'a,b"c'),)


def test_whitespace_and_empty_elements_are_tolerated() -> None:
    got = parse_alt_svc(' ,, h3=":443" ;  ma=10 ,, ')
    assert [(s.protocol, s.max_age) for s in got.services] == [("h3", 10)]
    assert not got.problems


def test_trailing_semicolon_is_harmless() -> None:
    assert parse_alt_svc('h3=":443";').services[0].port == 443


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("h3=:443", "quoted string"),
        ('h3="alt.example.com"', "no port"),
        ('h3=":99999"', "bad port"),
        ('h3=":0"', "bad port"),
        ('h3=":44x"', "bad port"),
        ('h3="[not-v6]:443"', "IPv6"),
        ('h3="a b:443"', "bad host"),
        ('h3=":443"; ma=soon', "not a number"),
        ('h3=":443"; ma=-1', "not a number"),
        ('h3=":443', "unterminated"),
        ('h3=":443" junk', "expected ','"),
        ('"h3"=":443"', "expected a token"),
        ("h3", "expected '='"),
        ("=", "expected a token"),
        ('clear, h3=":443"', "only value"),
    ],
)
def test_malformed_alternative_is_ignored_and_reported(value: str, reason: str) -> None:
    got = parse_alt_svc(value)
    assert got.problems, value
    assert reason in got.problems[0]
    assert all(s.protocol != "h3" or s.port == 443 for s in got.services)


def test_one_bad_alternative_does_not_spoil_the_others() -> None:
    got = parse_alt_svc('h3=":443"; ma=soon, h2=":443", h3-29=nope, h3="[::1]:8443"')
    assert [(s.protocol, s.port) for s in got.services] == [("h2", 443), ("h3", 8443)]
    assert len(got.problems) == 2


@pytest.mark.parametrize(
    "value",
    ["", " ", ",", ";", '"', "\\", 'h3="', '=""', 'h3=":443"; =', 'h3=":443"; ma', "\x00\xff"],
)
def test_garbage_never_crashes(value: str) -> None:
    got = parse_alt_svc(value)
    assert isinstance(got.problems, tuple)


def test_every_prefix_of_a_valid_header_parses_without_error() -> None:
    value = 'h3=":443"; ma=86400; persist=1, h3-29="alt.example:8443"; ma=60, h2=":443"'
    for end in range(len(value) + 1):
        parse_alt_svc(value[:end])  # must not raise


# -- HTTPS records -----------------------------------------------------------------------------


def test_https_qname_uses_port_prefix_off_443() -> None:
    assert https_qname("api.example.com") == "api.example.com"
    assert https_qname("api.example.com.", 8443) == "_8443._https.api.example.com"


def test_record_from_rdata_reads_alpn_port_and_hints() -> None:
    import dns.rdata

    rdata = dns.rdata.from_text(
        "IN", "HTTPS", "1 . alpn=h3,h2 port=8443 ipv4hint=192.0.2.1 ipv6hint=2001:db8::1"
    )
    record = record_from_rdata(rdata, ttl=300)
    assert record == HTTPSRecord(
        priority=1,
        target=".",
        alpn=("h3", "h2"),
        port=8443,
        ipv4hint=("192.0.2.1",),
        ipv6hint=("2001:db8::1",),
        ttl=300,
    )
    assert not record.alias


def test_alias_mode_record_has_only_a_target() -> None:
    import dns.rdata

    record = record_from_rdata(dns.rdata.from_text("IN", "HTTPS", "0 svc.example.net."))
    assert record.alias and record.target == "svc.example.net." and record.alpn == ()


# -- the JSON h3 object ----------------------------------------------------------------------


def test_h3_object_from_alt_svc() -> None:
    h3 = build_h3(
        origin_host="api.example.com",
        origin_port=443,
        alt_svc_values=['h3=":443"; ma=3600, h3-29=":443"'],
        records=None,
    )
    assert h3["advertised_by"] == "alt-svc"
    assert (h3["authority"], h3["host"], h3["port"], h3["max_age"]) == (
        ":443",
        "api.example.com",
        443,
        3600,
    )
    assert [a["protocol"] for a in h3["alt_svc"]["alternatives"]] == ["h3", "h3-29"]
    assert h3["https_rr"] is None
    assert "Alt-Svc at :443" in describe_h3(h3)


def test_h3_object_from_https_record_when_alt_svc_is_silent() -> None:
    records = (
        HTTPSRecord(priority=0, target="elsewhere.example."),
        HTTPSRecord(priority=2, target=".", alpn=("h2",)),
        HTTPSRecord(priority=1, target="edge.example.net.", alpn=("h3", "h2"), port=8443, ttl=60),
    )
    ordered = tuple(sorted(records, key=lambda r: r.priority))
    h3 = build_h3(
        origin_host="api.example.com", origin_port=443, alt_svc_values=[], records=ordered
    )
    assert h3["advertised_by"] == "https-rr"
    assert (h3["authority"], h3["host"], h3["port"], h3["max_age"]) == (
        "edge.example.net:8443",
        "edge.example.net",
        8443,
        60,
    )
    assert len(h3["https_rr"]["records"]) == 3


def test_h3_object_when_nothing_advertises_and_the_lookup_failed() -> None:
    h3 = build_h3(
        origin_host="api.example.com",
        origin_port=443,
        alt_svc_values=['h2=":443"', "h3=broken"],
        records=None,
        records_error="HTTPS query timed out",
    )
    assert h3["advertised_by"] is None and h3["authority"] is None
    assert h3["alt_svc"]["problems"]
    assert h3["https_rr"] == {"records": [], "error": "HTTPS query timed out"}
    line = describe_h3(h3)
    assert "not advertised" in line and "timed out" in line and "malformed" in line


def test_h3_line_says_a_skipped_lookup_was_not_made() -> None:
    h3 = build_h3(
        origin_host="pinned.test",
        origin_port=8443,
        alt_svc_values=[],
        records=None,
        records_error="skipped: --resolve pins the address",
    )
    line = describe_h3(h3)
    assert "not looked up (--resolve pins the address)" in line
    assert "failed" not in line
