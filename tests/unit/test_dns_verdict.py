"""The dns-cache verdict, exhaustively, on hand-built observations (no sockets, no clock)."""

from __future__ import annotations

import dataclasses
import json

from promptpath.core.findings import Verdict
from promptpath.net.dnsmsg import Lookup
from promptpath.net.dnswalk import AuthHop, AuthResult, AuthStatus
from promptpath.probes.dns_cache.signals import MIN_COUNTDOWN_S, find_signals
from promptpath.probes.dns_cache.verdict import Observations, ResolverCheck, judge, skipped

HOST = "api.example.com"
RES = "127.0.0.1:5353"
SEC = 1_000_000_000


def lk(
    ips: tuple[str, ...] = ("192.0.2.1",),
    *,
    ttl: int | None = 300,
    at_s: float = 0.0,
    status: str | None = None,
    source: str = "resolver",
    server: str = RES,
    ede: tuple[tuple[int, str], ...] = (),
    negative_ttl: int | None = None,
    nsname: str | None = None,
    error: str | None = None,
) -> Lookup:
    end = int(1 * SEC + at_s * SEC)
    return Lookup(
        source=source,
        server=server,
        qname=HOST,
        status=status or ("ok" if ips else "nodata"),
        nsname=nsname,
        addresses=tuple((ip, "ipv6" if ":" in ip else "ipv4") for ip in ips),
        ttl=ttl if ips else None,
        ede=ede,
        negative_ttl=negative_ttl,
        aa=source == "authoritative",
        error=error,
        start_ns=end - 1_000_000,
        end_ns=end,
    )


def auth(
    ips: tuple[str, ...] = ("192.0.2.1",),
    *,
    ttl: int = 300,
    status: AuthStatus = "ok",
    servers: tuple[Lookup, ...] | None = None,
) -> AuthResult:
    if servers is None:
        if status == "ok":
            servers = (
                lk(ips, ttl=ttl, source="authoritative", server="192.0.2.53:53", nsname="ns1"),
            )
        elif status in ("nxdomain", "nodata"):
            servers = (lk((), status=status, source="authoritative", server="192.0.2.53:53"),)
        elif status == "unreachable":
            servers = (
                lk((), status="timeout", source="authoritative", server="192.0.2.53:53",
                   error="no answer from 192.0.2.53:53 (timeout)"),
            )  # fmt: skip
        else:
            servers = ()
    return AuthResult(
        method="walk",
        hops=(AuthHop(qname=HOST, zone="example.com", servers=servers),),
        status=status,
        notes=("no NS records for example.com",) if status == "not_found" else (),
    )


def twice(first: Lookup, second: Lookup | None, server: str = RES) -> ResolverCheck:
    return ResolverCheck(server=server, first=first, second=second)


def obs(*checks: ResolverCheck, authority: AuthResult | None = None, **kw: object) -> Observations:
    return Observations(
        host=HOST,
        resolvers=checks,
        authoritative=auth() if authority is None else authority,
        t0_ns=0,
        **kw,  # type: ignore[arg-type]
    )


def names(o: Observations) -> list[str]:
    return [s.name for s in find_signals(o)]


def counting(
    ttl: int = 300, ips: tuple[str, ...] = ("192.0.2.1",), gap: float = 3.0
) -> ResolverCheck:
    return twice(lk(ips, ttl=ttl), lk(ips, ttl=ttl - int(gap), at_s=gap))


# -- pass --------------------------------------------------------------------------------


def test_clean_cache_counting_down_and_agreeing_passes() -> None:
    finding = judge(obs(counting()))
    assert finding.verdict is Verdict.PASS
    assert finding.evidence["signals"] == []
    assert "agrees with the authoritative servers" in finding.summary
    assert "300 -> 297" in finding.summary
    assert finding.probe == "dns-cache"


def test_overlapping_sets_are_not_disjoint() -> None:
    o = obs(counting(ips=("192.0.2.1", "192.0.2.9")), authority=auth(("192.0.2.1", "192.0.2.2")))
    assert judge(o).verdict is Verdict.PASS


def test_record_expiring_between_queries_and_refetched_is_not_stuck() -> None:
    # TTL 1 zone: both queries can see a fresh full TTL of 1 s.
    o = obs(twice(lk(ttl=1), lk(ttl=1, at_s=3.0)), authority=auth(ttl=1))
    assert names(o) == []


def test_zone_ttl_zero_answered_at_zero_is_not_stuck() -> None:
    o = obs(twice(lk(ttl=0), lk(ttl=0, at_s=3.0)), authority=auth(ttl=0))
    assert names(o) == []


def test_same_ttl_within_countdown_tolerance_is_not_a_signal() -> None:
    o = obs(twice(lk(ttl=100), lk(ttl=100, at_s=1.5)), authority=auth(ttl=300))
    assert names(o) == []


def test_an_unchanged_ttl_is_never_called_counting_down() -> None:
    # The review's case: 60 -> 60 s was summarised as "counting down (60 -> 60 s)".
    o = obs(twice(lk(ttl=60), lk(ttl=60, at_s=1.0)), authority=auth(ttl=60))
    finding = judge(o)
    assert "counting down" not in finding.summary
    assert "60 -> 60" not in finding.summary


def test_a_recheck_too_short_to_judge_the_countdown_is_said_in_summary_and_evidence() -> None:
    o = obs(twice(lk(ttl=60), lk(ttl=60, at_s=1.0)), authority=auth(ttl=60), recheck_s=1.0)
    finding = judge(o)
    assert finding.verdict is Verdict.PASS  # the answers agree; only the countdown is unknown
    assert "TTL countdown not checked: the two answers came 1.0 s apart" in finding.summary
    assert "needs ≥ 2 s" in finding.summary
    ev = finding.evidence
    assert ev["countdown_min_s"] == MIN_COUNTDOWN_S == 2.0
    assert "TTL countdown not checked" in str(ev["countdown_note"])
    resolvers = ev["resolvers"]
    assert isinstance(resolvers, list) and resolvers[0]["countdown"] == "too_soon"
    # A countdown seen within the short gap is still a countdown: nothing to add.
    fine = judge(obs(twice(lk(ttl=60), lk(ttl=59, at_s=1.0)), authority=auth(ttl=60)))
    assert "counting down (60 -> 59 s)" in fine.summary
    assert fine.evidence["countdown_note"] is None


def test_a_refreshed_ttl_is_called_refreshed_not_counting_down() -> None:
    o = obs(twice(lk(ttl=20), lk(ttl=300, at_s=3.0)), authority=auth(ttl=300))
    summary = judge(o).summary
    assert "refreshed from the zone between the queries (TTL 20 -> 300 s)" in summary
    assert "counting down" not in summary


def test_prefetched_refresh_up_to_the_zone_ttl_is_not_a_signal() -> None:
    o = obs(twice(lk(ttl=20), lk(ttl=300, at_s=3.0)), authority=auth(ttl=300))
    assert names(o) == []


def test_system_only_agreeing_passes() -> None:
    o = obs(system=lk(source="system", server="system", ttl=None))
    assert judge(o).verdict is Verdict.PASS


# -- stale -------------------------------------------------------------------------------


def unbound_stale(ips: tuple[str, ...] = ("127.0.0.2",)) -> ResolverCheck:
    return twice(lk(ips, ttl=30, ede=((3, ""),)), lk(ips, ttl=30, ede=((3, ""),), at_s=2.0))


def test_serve_stale_with_old_address_fails_naming_ede_ttl_and_authority() -> None:
    finding = judge(obs(unbound_stale(), authority=auth(("127.0.0.3",), ttl=2)))
    assert finding.verdict is Verdict.FAIL
    signals = {s["name"]: s for s in finding.evidence["signals"]}  # type: ignore[attr-defined]
    assert set(signals) == {
        "ede_stale_answer",
        "ttl_not_counting_down",
        "disjoint_from_authoritative",
    }
    assert signals["ede_stale_answer"]["ede_code"] == 3
    assert signals["ttl_not_counting_down"]["ttl_first"] == 30
    assert "serve-expired-reply-ttl" in signals["ttl_not_counting_down"]["message"]
    assert finding.summary == (
        f'resolver {RES} serves 127.0.0.2 past its TTL (EDE 3 "Stale Answer", TTL stuck at '
        "30 s over 2.0 s); the authoritative servers say 127.0.0.3, TTL 2 s"
    )
    assert any("serve-stale" in a for a in finding.advice)
    in_effect = finding.evidence["ttl_in_effect"]
    assert in_effect == [
        {"source": f"resolver {RES}", "ttl": 30, "authoritative_ttl": 2, "expires_in_s": None}
    ]


def test_serve_stale_does_not_also_claim_inflation() -> None:
    o = obs(unbound_stale(), authority=auth(("127.0.0.3",), ttl=2))
    assert "ttl_inflated" not in names(o)


def test_serve_stale_with_authority_unreachable_fails() -> None:
    finding = judge(obs(unbound_stale(), authority=auth(status="unreachable")))
    assert finding.verdict is Verdict.FAIL
    assert "no authoritative answer to refresh it from" in finding.summary
    assert "authoritative_unreachable" in [s["name"] for s in finding.evidence["signals"]]  # type: ignore[attr-defined]


def test_serve_stale_still_matching_the_authority_warns() -> None:
    finding = judge(obs(unbound_stale(("127.0.0.2",)), authority=auth(("127.0.0.2",), ttl=2)))
    assert finding.verdict is Verdict.WARN
    assert "EDE 3" in finding.summary


def test_ede_alone_once_is_a_stale_signal() -> None:
    o = obs(twice(lk(ttl=25, ede=((3, "x"),)), None))
    assert names(o) == ["ede_stale_answer"]


def test_ede_stale_nxdomain_is_recognised() -> None:
    first = lk((), status="nxdomain", ede=((19, ""),), negative_ttl=30)
    o = obs(twice(first, None), authority=auth(("192.0.2.1",)))
    assert names(o) == ["ede_stale_answer", "negative_cached"]
    assert judge(o).verdict is Verdict.FAIL


def test_ttl_sitting_at_zero_is_stuck_and_mentions_dnsmasq() -> None:
    o = obs(twice(lk(ttl=0), lk(ttl=0, at_s=3.0)), authority=auth(ttl=300))
    signals = find_signals(o)
    assert [s.name for s in signals] == ["ttl_not_counting_down"]
    assert "dnsmasq" in signals[0].message


def local_data(ttl: int = 42, ips: tuple[str, ...] = ("127.0.0.1",)) -> ResolverCheck:
    """dnsmasq host-record with local-ttl, unbound local-data, a CoreDNS cluster name."""
    return twice(lk(ips, ttl=ttl), lk(ips, ttl=ttl, at_s=2.0))


def test_constant_ttl_with_no_authority_is_local_data_a_warning_not_serve_stale() -> None:
    # The review's case: dnsmasq local-ttl=42 over 2 s, no zone to ask, was a FAIL
    # "serves 127.0.0.1 past its TTL" with serve-stale advice, 2 s into a 42 s TTL.
    for status in ("not_found", "unreachable"):
        o = obs(local_data(), authority=auth(status=status))  # type: ignore[arg-type]
        finding = judge(o)
        assert finding.verdict is Verdict.WARN, (status, finding.summary)
        assert names(o)[0] == "ttl_constant" and "ttl_not_counting_down" not in names(o)
        assert "past its TTL" not in finding.summary
        assert finding.summary == (
            f"resolver {RES} answered TTL 42 s twice, 2.0 s apart; the TTL does not count down: "
            "local data or a forwarder that rewrites TTLs"
        )
        assert not any("serve-stale" in a or "expired cache" in a for a in finding.advice)
        assert any("local-data" in a and "(42 s)" in a for a in finding.advice)
        ev = finding.evidence
        assert ev["resolvers"][0]["countdown"] == "constant"  # type: ignore[index]
        assert ev["ttl_in_effect"][0]["expires_in_s"] == 42  # type: ignore[index]


def test_constant_ttl_equal_to_the_zone_ttl_is_not_stuck() -> None:
    # A forwarder that does not cache (or the zone's own server) repeats the zone's TTL.
    finding = judge(obs(local_data(ips=("192.0.2.1",)), authority=auth(ttl=42)))
    assert finding.verdict is Verdict.PASS, finding.summary
    assert "the zone's own TTL each time (42 s" in finding.summary
    assert finding.evidence["resolvers"][0]["countdown"] == "zone_ttl"  # type: ignore[index]


def test_constant_ttl_other_than_the_zone_ttl_warns_naming_both() -> None:
    o = obs(local_data(ips=("192.0.2.1",)), authority=auth(ttl=300))
    finding = judge(o)
    assert names(o) == ["ttl_constant"]
    assert finding.verdict is Verdict.WARN
    assert finding.summary.endswith("rewrites TTLs; the zone says 300 s")


def test_split_horizon_local_data_disagreeing_with_the_public_zone_warns() -> None:
    o = obs(local_data(ips=("10.0.0.5",)), authority=auth(("192.0.2.1",), ttl=300))
    finding = judge(o)
    assert set(names(o)) == {"ttl_constant", "disjoint_from_authoritative"}
    assert finding.verdict is Verdict.WARN, finding.summary
    assert "past its TTL" not in finding.summary


def test_ttl_pinned_at_30_without_ede_fails_without_claiming_past_its_ttl() -> None:
    # 2 s into a 30 s TTL: serve-stale's pinned value, but nothing has outlived its TTL.
    o = obs(twice(lk(ttl=30), lk(ttl=30, at_s=2.0)), authority=auth(status="unreachable"))
    finding = judge(o)
    assert names(o)[0] == "ttl_not_counting_down"
    assert finding.verdict is Verdict.FAIL
    assert "past its TTL" not in finding.summary
    assert finding.summary == (
        f"resolver {RES} serves 192.0.2.1 with its TTL pinned at a serve-stale value (TTL "
        "stuck at 30 s over 2.0 s); no authoritative answer to refresh it from"
    )


def test_ttl_outlived_between_the_queries_is_past_its_ttl() -> None:
    o = obs(
        twice(lk(("127.0.0.2",), ttl=5), lk(("127.0.0.2",), ttl=5, at_s=8.0)),
        authority=auth(("127.0.0.3",), ttl=300),
    )
    finding = judge(o)
    assert finding.verdict is Verdict.FAIL
    assert finding.summary.startswith(
        f"resolver {RES} serves 127.0.0.2 past its TTL (TTL stuck at 5 s over 8.0 s)"
    )


# -- inflated ----------------------------------------------------------------------------


def test_min_cache_ttl_inflation_warns_with_expiry_advice() -> None:
    o = obs(twice(lk(ttl=600), lk(ttl=597, at_s=3.0)), authority=auth(ttl=5))
    finding = judge(o)
    assert finding.verdict is Verdict.WARN
    assert names(o) == ["ttl_inflated"]
    assert finding.summary == (
        f"resolver {RES} answered TTL 600 s where the zone says 5 s (a minimum cache TTL)"
    )
    assert any("min-cache-ttl" in a and "≈597 s" in a for a in finding.advice)


def test_dnsmasq_first_forwarded_then_floored_is_inflated_not_stuck() -> None:
    o = obs(twice(lk(ttl=5), lk(ttl=600, at_s=2.0)), authority=auth(ttl=5))
    assert names(o) == ["ttl_inflated"]


def test_inflated_cache_holding_an_old_address_fails() -> None:
    o = obs(
        twice(lk(("127.0.0.2",), ttl=600), lk(("127.0.0.2",), ttl=597, at_s=3.0)),
        authority=auth(("127.0.0.3",), ttl=5),
    )
    finding = judge(o)
    assert finding.verdict is Verdict.FAIL
    assert finding.summary == (
        f"resolver {RES} holds 127.0.0.2 for 600 s (zone TTL 5 s); the authoritative servers "
        "say 127.0.0.3, TTL 5 s"
    )


# -- mismatch ----------------------------------------------------------------------------


def test_disjoint_alone_is_a_warning_with_cdn_advice() -> None:
    o = obs(counting(ttl=60, ips=("203.0.113.5",)), authority=auth(("192.0.2.1",), ttl=60))
    finding = judge(o)
    assert finding.verdict is Verdict.WARN
    assert names(o) == ["disjoint_from_authoritative"]
    assert any("CDNs" in a and "≈57 s" in a for a in finding.advice)


def test_connection_to_an_address_the_zone_dropped_is_reported_with_its_error() -> None:
    o = obs(
        counting(),
        used=("192.0.2.66",),
        used_from="connection attempts",
        connection_error="connect: connection refused",
    )
    finding = judge(o)
    assert finding.verdict is Verdict.WARN
    sig = finding.evidence["signals"][0]  # type: ignore[index]
    assert sig["source"] == "connection"
    assert sig["connection_error"] == "connect: connection refused"
    assert any("traced request failed" in a for a in finding.advice)
    assert finding.evidence["used"] == {
        "addresses": ["192.0.2.66"],
        "from": "connection attempts",
        "connection_error": "connect: connection refused",
    }


def test_connection_used_address_inside_the_authority_answer_is_fine() -> None:
    o = obs(counting(), used=("192.0.2.1",), used_from="connection")
    assert names(o) == []


def test_answer_changing_inside_its_ttl_warns() -> None:
    o = obs(
        twice(lk(("192.0.2.1",), ttl=300), lk(("192.0.2.2",), ttl=297, at_s=3.0)),
        authority=auth(("192.0.2.1", "192.0.2.2")),
    )
    assert names(o) == ["answer_changed_within_ttl"]
    assert judge(o).verdict is Verdict.WARN


def test_answer_changing_after_its_ttl_ran_out_is_fine() -> None:
    o = obs(
        twice(lk(("192.0.2.1",), ttl=2), lk(("192.0.2.2",), ttl=300, at_s=3.0)),
        authority=auth(("192.0.2.2",)),
    )
    assert names(o) == []


def test_negative_cache_while_the_authority_has_data_warns_with_its_ttl() -> None:
    first = lk((), status="nxdomain", negative_ttl=60)
    second = lk((), status="nxdomain", negative_ttl=60, at_s=3.0)
    finding = judge(obs(twice(first, second)))
    assert finding.verdict is Verdict.WARN
    assert "negative_cached" in [s["name"] for s in finding.evidence["signals"]]  # type: ignore[attr-defined]
    assert any("up to 60 s" in a for a in finding.advice)


def test_system_disagreeing_while_resolvers_agree_points_at_hosts_file() -> None:
    o = obs(counting(), system=lk(("10.9.9.9",), source="system", server="system", ttl=None))
    finding = judge(o)
    assert finding.verdict is Verdict.WARN
    assert any("/etc/hosts" in a for a in finding.advice)


# -- broken ------------------------------------------------------------------------------


def test_name_missing_everywhere_fails() -> None:
    o = obs(twice(lk((), status="nxdomain"), None), authority=auth(status="nxdomain"))
    finding = judge(o)
    assert finding.verdict is Verdict.FAIL
    assert "has no address" in finding.summary


def test_every_resolver_failing_fails() -> None:
    failed = lk((), status="servfail", error="answered SERVFAIL")
    finding = judge(obs(twice(failed, None)))
    assert finding.verdict is Verdict.FAIL
    assert finding.summary == f"no resolver could resolve {HOST}: answered SERVFAIL"


def test_one_of_two_resolvers_failing_warns() -> None:
    failed = lk((), status="timeout", server="10.0.0.2:53", error="no answer (timeout)")
    o = obs(counting(), twice(failed, None, server="10.0.0.2:53"))
    finding = judge(o)
    assert finding.verdict is Verdict.WARN
    assert "resolver 10.0.0.2:53 could not resolve" in finding.summary


def test_authority_not_found_warns_and_suggests_authoritative_option() -> None:
    finding = judge(obs(counting(), authority=auth(status="not_found")))
    assert finding.verdict is Verdict.WARN
    assert "no NS records" in finding.summary
    assert any("--authoritative" in a for a in finding.advice)


def test_authority_unreachable_alone_warns() -> None:
    finding = judge(obs(counting(), authority=auth(status="unreachable")))
    assert finding.verdict is Verdict.WARN
    assert finding.summary.startswith("no authoritative server answered")


def test_partly_lame_delegation_warns_naming_the_bad_server() -> None:
    good = lk(source="authoritative", server="192.0.2.53:53", nsname="ns1.example.com")
    bad = lk(
        (),
        status="lame",
        source="authoritative",
        server="192.0.2.54:53",
        nsname="ns2.example.com",
        error="answered REFUSED without authority (lame)",
    )
    finding = judge(obs(counting(), authority=auth(servers=(good, bad))))
    assert finding.verdict is Verdict.WARN
    assert "ns2.example.com (192.0.2.54:53)" in finding.summary


def named(server: Lookup) -> AuthResult:
    """What the walk returns for --authoritative: one hop, the named server, no NS name."""
    from promptpath.net.dnswalk import overall_status

    hop = AuthHop(qname=HOST, zone=None, servers=(server,))
    return AuthResult(method="--authoritative", hops=(hop,), status=overall_status([hop]))


def test_named_authoritative_answering_from_a_cache_is_lame_and_not_compared() -> None:
    # --authoritative pointed at a resolver: addresses, but aa: false.
    cache = dataclasses.replace(lk(source="authoritative", server="127.0.0.1:5300"), aa=False)
    authority = named(cache)
    assert authority.status == "lame"
    finding = judge(obs(counting(), authority=authority))
    assert finding.verdict is Verdict.WARN
    assert names(obs(counting(), authority=authority)) == ["named_authoritative_lame"]
    assert finding.summary.startswith("--authoritative 127.0.0.1:5300 is not authoritative")
    assert "aa: false" in finding.summary
    assert "agrees with the authoritative servers" not in finding.summary
    assert any("--authoritative" in a and "dig NS" in a for a in finding.advice)
    signal = finding.evidence["signals"][0]  # type: ignore[index]
    assert signal["aa"] is False and signal["addresses"] == ["192.0.2.1"]


def test_named_authoritative_answering_nodata_without_authority_is_lame_too() -> None:
    lame = lk(
        (),
        status="lame",
        source="authoritative",
        server="127.0.0.1:5300",
        error="answered NOERROR without authority (lame)",
    )
    finding = judge(obs(counting(), authority=named(lame)))
    assert names(obs(counting(), authority=named(lame))) == ["named_authoritative_lame"]
    assert "answered NOERROR without authority" in finding.summary


def test_a_listed_server_answering_from_a_cache_is_part_of_a_lame_delegation() -> None:
    good = lk(source="authoritative", server="192.0.2.53:53", nsname="ns1.example.com")
    cache = dataclasses.replace(
        lk(("198.51.100.1",), source="authoritative", server="192.0.2.54:53"),
        nsname="ns2.example.com",
        aa=False,
    )
    finding = judge(obs(counting(), authority=auth(servers=(good, cache))))
    assert finding.verdict is Verdict.WARN
    assert "ns2.example.com (192.0.2.54:53) answered 198.51.100.1 without the AA bit" in (
        finding.summary
    )
    # The cached copy is no part of what the authority says.
    authority = finding.evidence["authoritative"]
    assert isinstance(authority, dict) and authority["addresses"] == ["192.0.2.1"]


def test_no_authority_at_all_is_a_warning_not_a_pass() -> None:
    o = Observations(host=HOST, resolvers=(counting(),), authoritative=None)
    finding = judge(o)
    assert finding.verdict is Verdict.WARN
    assert finding.summary.startswith("could not compare")


# -- ordering and evidence ---------------------------------------------------------------


def test_stale_outranks_inflated_outranks_mismatch_in_a_warning_summary() -> None:
    stale_ok = unbound_stale(("192.0.2.1",))
    inflated = twice(lk(ttl=900, server="10.0.0.2:53"), None, server="10.0.0.2:53")
    finding = judge(obs(inflated, stale_ok))
    assert finding.verdict is Verdict.WARN
    assert "EDE 3" in finding.summary


def test_evidence_is_json_and_lists_every_source() -> None:
    o = obs(
        unbound_stale(),
        authority=auth(("127.0.0.3",), ttl=2),
        system=lk(("127.0.0.2",), source="system", server="system", ttl=None),
        used=("127.0.0.2",),
        used_from="connection",
        queries=7,
    )
    ev = judge(o).evidence
    text = json.dumps(ev)
    assert json.loads(text) == ev
    assert set(ev) == {
        "host", "signals", "used", "system", "resolvers", "authoritative",
        "ttl_in_effect", "recheck_s", "queries", "budget_exhausted",
        "countdown_min_s", "countdown_note",
    }  # fmt: skip
    resolvers = ev["resolvers"]
    assert isinstance(resolvers, list)
    answers = resolvers[0]["answers"]
    assert [a["ttl"] for a in answers] == [30, 30]
    assert answers[0]["ede"] == [{"code": 3, "name": "Stale Answer", "text": ""}]
    assert resolvers[0]["elapsed_s"] == 2.0
    assert resolvers[0]["countdown"] == "stuck"
    assert ev["countdown_note"] is None
    authority = ev["authoritative"]
    assert isinstance(authority, dict)
    assert authority["addresses"] == ["127.0.0.3"]
    assert authority["ttl"] == 2
    assert authority["servers"][0]["nsname"] == "ns1"
    assert {s["source"] for s in ev["signals"]} == {f"resolver {RES}", "system", "connection"}  # type: ignore[attr-defined]


def test_finding_as_dict_round_trips_through_json() -> None:
    for o in (obs(counting()), obs(unbound_stale(), authority=auth(("127.0.0.3",), ttl=2))):
        data = judge(o).as_dict()
        assert json.loads(json.dumps(data)) == data
        assert data["probe"] == "dns-cache"


def test_skipped_names_the_host() -> None:
    finding = skipped("192.0.2.1", "192.0.2.1 is an IP address")
    assert finding.verdict is Verdict.SKIP
    assert finding.evidence == {"host": "192.0.2.1"}


def test_dns_stage_failure_is_not_blamed_on_an_address_never_used() -> None:
    o = obs(
        counting(ips=("203.0.113.5",)),
        connection_error="dns: timed out after 5 s in stage 'dns'",
    )
    finding = judge(o)
    assert "disjoint_from_authoritative" in names(o)
    assert not any("traced request failed" in a for a in finding.advice)
