"""The edges probe's judgement (probes/edges/verdict.py), fed measured figures."""

from __future__ import annotations

from promptpath.core.edgename import EdgeName
from promptpath.core.findings import Verdict
from promptpath.probes.edges.probe import head_path
from promptpath.probes.edges.verdict import Answer, Candidate, Facts, clearly_slower, judge


def cand(ip: str, *ms: float, family: str = "ipv4", edge: str | None = None) -> Candidate:
    named = (
        None if edge is None else EdgeName(name=edge, cdn="cloudflare", header="cf-ray", value="x")
    )
    return Candidate(ip=ip, port=443, family=family, sources=("system",), connect_ms=ms, edge=named)


def test_slower_needs_the_margin_and_no_overlap() -> None:
    near = cand("192.0.2.1", 10.0, 10.5, 11.0)
    assert clearly_slower(cand("192.0.2.2", 20.0, 21.0, 22.0), near)
    # 4 ms slower: under the 5 ms floor
    assert not clearly_slower(cand("192.0.2.2", 14.0, 14.5, 15.0), near)
    # 40 ms against 100 ms: 40 % over, but the floor of 20 % of 100 ms is met only...
    assert clearly_slower(cand("192.0.2.2", 140.0, 141.0, 142.0), cand("192.0.2.1", 100, 101, 102))
    # ... 15 ms slower than 100 ms is under 20 %
    assert not clearly_slower(
        cand("192.0.2.2", 115.0, 116.0, 117.0), cand("192.0.2.1", 100, 101, 102)
    )
    # the medians differ but one sample of the slow one beat the fast one's slowest
    assert not clearly_slower(cand("192.0.2.2", 9.0, 30.0, 31.0), near)
    # one sample is no repeated sample
    assert not clearly_slower(cand("192.0.2.2", 40.0), cand("192.0.2.1", 1.0))


def test_the_used_far_edge_is_flagged_naming_both() -> None:
    facts = Facts(
        host="api.example",
        candidates=(
            cand("192.0.2.1", 1.0, 1.1, 1.2, edge="FRA"),
            cand("192.0.2.9", 40.0, 40.2, 40.4, edge="AMS"),
        ),
        used="192.0.2.9",
        attempts=(("192.0.2.9", "ipv4", True),),
    )
    f = judge(facts)
    assert f.verdict is Verdict.WARN
    assert f.summary.startswith(
        "the trace used the AMS edge (192.0.2.9) at 40.2 ms, slower than"
        " the FRA edge (192.0.2.1) at 1.1 ms"
    )
    assert "the resolver's order put the far address first" in f.summary
    assert f.evidence["nearest"] == "192.0.2.1"


def test_happy_eyeballs_is_named_when_the_other_family_won() -> None:
    facts = Facts(
        host="api.example",
        candidates=(
            cand("192.0.2.1", 5.0, 5.1, 5.2),
            cand("2001:db8::1", 30.0, 30.5, 31.0, family="ipv6"),
        ),
        used="2001:db8::1",
        attempts=(("2001:db8::1", "ipv6", True), ("192.0.2.1", "ipv4", False)),
    )
    f = judge(facts)
    assert f.verdict is Verdict.WARN
    assert "happy eyeballs (RFC 8305) let ipv6 win: the ipv4 address raced and lost" in f.summary


def test_a_pin_says_it_decided() -> None:
    facts = Facts(
        host="api.example",
        candidates=(cand("192.0.2.1", 5.0, 5.1, 5.2), cand("192.0.2.2", 30.0, 30.5, 31.0)),
        used="192.0.2.2",
        decided_by="--resolve",
    )
    f = judge(facts)
    assert "the --resolve pin decided" in f.summary


def test_the_nearest_used_passes() -> None:
    facts = Facts(
        host="api.example",
        candidates=(cand("192.0.2.1", 5.0, 5.1, 5.2), cand("192.0.2.2", 30.0, 30.5, 31.0)),
        used="192.0.2.1",
    )
    f = judge(facts)
    assert f.verdict is Verdict.PASS
    assert f.summary == "2 addresses timed; nearest 192.0.2.1 5.1 ms; the trace used it"


def test_resolvers_steering_to_different_edges_are_both_named() -> None:
    facts = Facts(
        host="api.example",
        candidates=(
            cand("192.0.2.1", 9.0, 9.1, 9.2, edge="FRA"),
            cand("192.0.2.9", 38.0, 38.1, 38.3, edge="AMS"),
        ),
        used="192.0.2.1",
        answers=(
            Answer(server="10.1.1.1:53", addresses=("192.0.2.9",)),
            Answer(server="192.0.2.53:53", addresses=("192.0.2.1",)),
        ),
    )
    f = judge(facts)
    assert f.verdict is Verdict.WARN
    assert (
        "your resolver 10.1.1.1:53 returns 192.0.2.9 (the AMS edge, 38.1 ms); 192.0.2.53:53"
        " returns 192.0.2.1 (the FRA edge, 9.1 ms): the resolver is far from this client or"
        " strips client subnet"
    ) in f.summary


def test_resolvers_agreeing_make_no_resolver_finding() -> None:
    facts = Facts(
        host="api.example",
        candidates=(cand("192.0.2.1", 9.0, 9.1, 9.2),),
        used="192.0.2.1",
        answers=(
            Answer(server="10.1.1.1:53", addresses=("192.0.2.1",)),
            Answer(server="system", addresses=("192.0.2.1",)),
        ),
    )
    assert judge(facts).verdict is Verdict.PASS


def test_nothing_answering_is_a_warning_not_a_crash() -> None:
    facts = Facts(
        host="api.example",
        candidates=(
            Candidate(
                ip="192.0.2.1",
                port=443,
                family="ipv4",
                sources=("system",),
                error="connect: refused",
            ),
        ),
    )
    f = judge(facts)
    assert f.verdict is Verdict.WARN and "no address of api.example answered" in f.summary


def test_the_family_that_won_and_by_how_much_is_said() -> None:
    facts = Facts(
        host="api.example",
        candidates=(
            cand("2001:db8::1", 10.0, 10.2, 10.4, family="ipv6"),
            cand("192.0.2.1", 12.0, 12.5, 13.0),
        ),
        used="2001:db8::1",
        attempts=(("2001:db8::1", "ipv6", True), ("192.0.2.1", "ipv4", False)),
    )
    f = judge(facts)
    assert f.verdict is Verdict.PASS
    assert f.summary.endswith(
        "the trace used it (ipv6 won the happy-eyeballs race; the nearest ipv4 address"
        " 192.0.2.1 is 2.3 ms slower)"
    )


def test_the_head_carries_no_query_so_no_key_in_it() -> None:
    path = "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse&key=AIzaSyA-secret"
    assert head_path(path) == "/v1beta/models/gemini-2.0-flash:streamGenerateContent"
    assert head_path("") == "/" and head_path("/v1/chat/completions") == "/v1/chat/completions"
