"""dns-cache and resolve_with against real nsd, unbound and dnsmasq on loopback ports.

Each test starts its own servers (configs, pids and logs in tmp_path) and kills them on the
way out. The zone is ``pp-lab.example``; every address involved is in 127.0.0.0/8.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from promptpath.core.errors import DNSError
from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import ConnectAttempt, ErrorInfo, Timeline
from promptpath.net import dns as pdns
from promptpath.net.dnsmsg import parse_server
from promptpath.net.dnsquery import Querier, lookup, resolve_with
from promptpath.net.dnswalk import find_authoritative
from promptpath.options import RunOptions, parse_target
from promptpath.probes.base import ProbeContext
from promptpath.probes.dns_cache.probe import DNSCacheProbe
from promptpath.report.json import dns_json
from promptpath.tracer.orchestrator import TraceResult
from tests.helpers.dnslab import NSD, Dnsmasq, Unbound, ask, free_port
from tests.helpers.probesettings import probe_settings

pytestmark = pytest.mark.lab

ZONE = "pp-lab.example"
WWW = f"www.{ZONE}"
OLD = "127.0.0.2"
NEW = "127.0.0.3"
RECHECK_S = 2.0


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[ExitStack]:
    with ExitStack() as stack:
        yield stack


def nsd(lab: ExitStack, tmp: Path, name: str, *, ttl: int, records: list[str]) -> NSD:
    server = NSD(tmp / name, zone=ZONE, ttl=ttl, records=records)
    lab.enter_context(server)
    return server


def run_options(resolver: str, **kw: object) -> RunOptions:
    return RunOptions(
        target=parse_target(f"http://{WWW}:8080/v1/chat/completions"),
        provider="openai",
        model="m",
        resolver=resolver,
        family=socket.AF_INET,
        timeout=5.0,
        **kw,  # type: ignore[arg-type]
    )


async def run_probe(
    opts: RunOptions, result: TraceResult | None = None, *, authoritative: str | None = None
) -> Finding:
    messages: list[str] = []
    ctx = ProbeContext(
        options=opts,
        result=result,
        progress=messages.append,
        settings=probe_settings(dns_recheck=RECHECK_S, authoritative=authoritative),
    )
    probe = DNSCacheProbe()
    cost = probe.cost(ctx)
    start = time.monotonic()
    finding = await probe.run(ctx)
    assert time.monotonic() - start < cost.seconds
    assert messages, "the probe reports progress"
    queries = finding.evidence.get("queries")
    assert isinstance(queries, int) and queries <= cost.dns_queries
    return finding


def signal_names(finding: Finding) -> set[str]:
    signals = finding.evidence["signals"]
    assert isinstance(signals, list)
    return {s["name"] for s in signals}


def refused_trace(opts: RunOptions, ip: str) -> TraceResult:
    """What the tracer records when the connection to a stale address is refused."""
    tl = Timeline(
        t0_ns=time.perf_counter_ns(),
        t0_unix_ns=time.time_ns(),
        attempts=[
            ConnectAttempt(ip=ip, port=8080, family="ipv4", start_ns=1, end_ns=2, error="refused")
        ],
        error=ErrorInfo(stage="connect", kind="refused", message=f"{ip}:8080 refused"),
    )
    return TraceResult(options=opts, timeline=tl)


# -- serve-stale: unbound ----------------------------------------------------------------


async def test_unbound_serving_an_expired_old_address_fails_with_ede_and_ttl_30(
    lab: ExitStack, tmp_path: Path
) -> None:
    # The record moved: the zone's current server publishes NEW; the server unbound knows
    # (still publishing OLD) goes away. unbound keeps answering OLD from its expired cache.
    old = nsd(lab, tmp_path, "nsd-old", ttl=1, records=[f"www IN A {OLD}"])
    new = nsd(lab, tmp_path, "nsd-new", ttl=1, records=[f"www IN A {NEW}"])
    unbound = lab.enter_context(
        Unbound(tmp_path / "unbound", zone=ZONE, upstream_port=old.port, serve_expired=True)
    )
    warm = await resolve_with(unbound.address, WWW, family=socket.AF_INET, timeout=3)
    assert [ip for ip, _ in warm.addresses] == [OLD]
    old.stop()
    await asyncio.sleep(2.0)  # past the 1 s TTL

    opts = run_options(unbound.address)
    finding = await run_probe(opts, refused_trace(opts, OLD), authoritative=new.address)

    assert finding.verdict is Verdict.FAIL, finding.summary
    assert {"ede_stale_answer", "ttl_not_counting_down", "disjoint_from_authoritative"} <= (
        signal_names(finding)
    )
    assert OLD in finding.summary and NEW in finding.summary
    assert 'EDE 3 "Stale Answer"' in finding.summary
    resolvers = finding.evidence["resolvers"]
    assert isinstance(resolvers, list)
    assert [a["ttl"] for a in resolvers[0]["answers"]] == [30, 30]
    authority = finding.evidence["authoritative"]
    assert isinstance(authority, dict)
    assert authority["addresses"] == [NEW]
    assert authority["ttl"] == 1
    used = finding.evidence["used"]
    assert used == {
        "addresses": [OLD],
        "from": "connection attempts",
        "connection_error": f"connect: {OLD}:8080 refused",
    }
    assert any("traced request failed" in a for a in finding.advice)

    # The connection path asks A and AAAA: unbound answers A from its expired cache and
    # never answers AAAA (nothing cached, authority gone). The A answer must not wait.
    start = time.monotonic()
    used = await pdns.resolve(WWW, 8080, family=0, resolver=unbound.address, timeout=3)
    assert time.monotonic() - start < 1.0
    assert [ip for ip, _ in used.addresses] == [OLD]
    assert used.ttl == 30


async def test_unbound_serving_stale_while_the_authority_is_down_fails(
    lab: ExitStack, tmp_path: Path
) -> None:
    auth = nsd(lab, tmp_path, "nsd", ttl=1, records=[f"www IN A {OLD}"])
    unbound = lab.enter_context(
        Unbound(tmp_path / "unbound", zone=ZONE, upstream_port=auth.port, serve_expired=True)
    )
    await resolve_with(unbound.address, WWW, family=socket.AF_INET, timeout=3)
    auth.stop()
    await asyncio.sleep(2.0)

    finding = await run_probe(run_options(unbound.address), authoritative=auth.address)

    assert finding.verdict is Verdict.FAIL, finding.summary
    assert {"ede_stale_answer", "authoritative_unreachable"} <= signal_names(finding)
    assert "no authoritative answer to refresh it from" in finding.summary


# -- inflated TTL: dnsmasq ---------------------------------------------------------------


async def test_dnsmasq_min_cache_ttl_inflates_the_ttl_and_warns(
    lab: ExitStack, tmp_path: Path
) -> None:
    auth = nsd(lab, tmp_path, "nsd", ttl=5, records=[f"www IN A {OLD}"])
    dnsmasq = lab.enter_context(
        Dnsmasq(tmp_path / "dnsmasq", zone=ZONE, upstream_port=auth.port, min_cache_ttl=600)
    )
    ask(dnsmasq.port, WWW)  # fills the cache

    finding = await run_probe(run_options(dnsmasq.address), authoritative=auth.address)

    assert finding.verdict is Verdict.WARN, finding.summary
    assert signal_names(finding) == {"ttl_inflated"}
    signal = finding.evidence["signals"][0]  # type: ignore[index]
    assert signal["authoritative_ttl"] == 5
    assert 590 <= signal["resolver_ttl"] <= 600
    assert any("min-cache-ttl" in a for a in finding.advice)


async def test_dnsmasq_inflated_cache_holding_the_old_address_after_a_change_fails(
    lab: ExitStack, tmp_path: Path
) -> None:
    auth = nsd(lab, tmp_path, "nsd", ttl=1, records=[f"www IN A {OLD}"])
    dnsmasq = lab.enter_context(
        Dnsmasq(tmp_path / "dnsmasq", zone=ZONE, upstream_port=auth.port, min_cache_ttl=600)
    )
    ask(dnsmasq.port, WWW)
    auth.publish([f"www IN A {NEW}"])  # serial + 1, same port
    await asyncio.sleep(1.5)  # the zone's TTL has run out; dnsmasq's floor has not

    finding = await run_probe(run_options(dnsmasq.address), authoritative=auth.address)

    assert finding.verdict is Verdict.FAIL, finding.summary
    assert {"ttl_inflated", "disjoint_from_authoritative"} <= signal_names(finding)
    assert f"holds {OLD}" in finding.summary and NEW in finding.summary


async def test_dnsmasq_serving_stale_entries_at_ttl_0_fails(lab: ExitStack, tmp_path: Path) -> None:
    old = nsd(lab, tmp_path, "nsd-old", ttl=1, records=[f"www IN A {OLD}"])
    new = nsd(lab, tmp_path, "nsd-new", ttl=1, records=[f"www IN A {NEW}"])
    dnsmasq = lab.enter_context(
        Dnsmasq(tmp_path / "dnsmasq", zone=ZONE, upstream_port=old.port, use_stale_cache=True)
    )
    ask(dnsmasq.port, WWW)
    old.stop()
    await asyncio.sleep(2.0)

    finding = await run_probe(run_options(dnsmasq.address), authoritative=new.address)

    assert finding.verdict is Verdict.FAIL, finding.summary
    assert {
        "ede_stale_answer",
        "ttl_not_counting_down",
        "disjoint_from_authoritative",
    } <= signal_names(finding)
    stuck = next(
        s
        for s in finding.evidence["signals"]  # type: ignore[attr-defined]
        if s["name"] == "ttl_not_counting_down"
    )
    assert stuck["ttl_first"] == stuck["ttl_second"] == 0
    assert "dnsmasq" in stuck["message"]


# -- local data: dnsmasq host-record -----------------------------------------------------


async def test_dnsmasq_local_data_with_a_constant_ttl_warns_not_fails(
    lab: ExitStack, tmp_path: Path
) -> None:
    # The review's case: host-record + local-ttl=42 and no zone behind it. The TTL stays at
    # 42 s, 2 s into a 42 s TTL: local data (as CoreDNS cluster names and split-horizon
    # zones look), not serve-stale, and nothing was served past its TTL.
    dnsmasq = lab.enter_context(
        Dnsmasq(
            tmp_path / "dnsmasq",
            zone=ZONE,
            upstream_port=None,
            host_records=[(WWW, OLD)],
            local_ttl=42,
        )
    )
    opts = run_options(dnsmasq.address)
    finding = await run_probe(opts, refused_trace(opts, OLD), authoritative=None)

    assert finding.verdict is Verdict.WARN, finding.summary
    assert "ttl_constant" in signal_names(finding)
    assert not signal_names(finding) & {"ttl_not_counting_down", "ede_stale_answer"}
    assert "does not count down: local data or a forwarder that rewrites TTLs" in (finding.summary)
    assert "past its TTL" not in finding.summary
    assert not any("serve-stale" in a for a in finding.advice)
    resolvers = finding.evidence["resolvers"]
    assert isinstance(resolvers, list)
    assert [a["ttl"] for a in resolvers[0]["answers"]] == [42, 42]
    assert resolvers[0]["countdown"] == "constant"


async def test_dnsmasq_local_data_shadowing_the_public_zone_warns_not_fails(
    lab: ExitStack, tmp_path: Path
) -> None:
    # Split horizon: the resolver's local data says OLD (TTL 42, constant), the zone's own
    # server says NEW (TTL 300). Worth a look, not a stale cache.
    auth = nsd(lab, tmp_path, "nsd", ttl=300, records=[f"www IN A {NEW}"])
    dnsmasq = lab.enter_context(
        Dnsmasq(
            tmp_path / "dnsmasq",
            zone=ZONE,
            upstream_port=None,
            host_records=[(WWW, OLD)],
            local_ttl=42,
        )
    )
    finding = await run_probe(run_options(dnsmasq.address), authoritative=auth.address)

    assert finding.verdict is Verdict.WARN, finding.summary
    assert {"ttl_constant", "disjoint_from_authoritative"} <= signal_names(finding)
    assert "past its TTL" not in finding.summary


# -- clean -------------------------------------------------------------------------------


async def test_clean_unbound_cache_passes(lab: ExitStack, tmp_path: Path) -> None:
    auth = nsd(lab, tmp_path, "nsd", ttl=30, records=[f"www IN A {OLD}"])
    unbound = lab.enter_context(Unbound(tmp_path / "unbound", zone=ZONE, upstream_port=auth.port))
    finding = await run_probe(run_options(unbound.address), authoritative=auth.address)
    assert finding.verdict is Verdict.PASS, finding.summary
    assert signal_names(finding) == set()
    resolvers = finding.evidence["resolvers"]
    assert isinstance(resolvers, list)
    first, second = (a["ttl"] for a in resolvers[0]["answers"])
    assert second < first <= 30


@pytest.mark.parametrize(
    ("snoop", "says"),
    [(True, f"answered {OLD} without the AA bit"), (False, "answered REFUSED without authority")],
    ids=["cache-answer", "refused"],
)
async def test_a_resolver_named_as_the_authority_is_flagged_lame_not_trusted(
    lab: ExitStack, tmp_path: Path, snoop: bool, says: str
) -> None:
    # --authoritative pointed at unbound. Asked without recursion it answers from its
    # cache without the AA bit (allow_snoop), or refuses: no authority either way.
    auth = nsd(lab, tmp_path, "nsd", ttl=30, records=[f"www IN A {OLD}"])
    unbound = lab.enter_context(
        Unbound(tmp_path / "unbound", zone=ZONE, upstream_port=auth.port, allow_snoop=snoop)
    )
    await resolve_with(unbound.address, WWW, family=socket.AF_INET, timeout=3)  # warm it
    finding = await run_probe(run_options(unbound.address), authoritative=unbound.address)
    assert finding.verdict is Verdict.WARN, finding.summary
    assert signal_names(finding) == {"named_authoritative_lame"}, finding.summary
    assert finding.summary.startswith(f"--authoritative {unbound.address} is not authoritative")
    assert says in finding.summary
    assert "agrees with the authoritative servers" not in finding.summary
    authority = finding.evidence["authoritative"]
    assert isinstance(authority, dict)
    assert authority["status"] == "lame" and authority["addresses"] == []
    assert [s["aa"] for s in authority["servers"]] == [False]


async def test_missing_name_is_a_clear_failure_not_a_crash(lab: ExitStack, tmp_path: Path) -> None:
    auth = nsd(lab, tmp_path, "nsd", ttl=30, records=[f"www IN A {OLD}"])
    unbound = lab.enter_context(Unbound(tmp_path / "unbound", zone=ZONE, upstream_port=auth.port))
    opts = dataclasses.replace(
        run_options(unbound.address),
        target=parse_target(f"http://nope.{ZONE}:8080/v1/chat/completions"),
    )
    finding = await run_probe(opts, authoritative=auth.address)
    assert finding.verdict is Verdict.FAIL
    assert signal_names(finding) == {"name_missing"}
    assert "NXDOMAIN" in finding.summary


async def test_resolver_that_cannot_reach_the_zone_times_out_and_fails(
    lab: ExitStack, tmp_path: Path
) -> None:
    # Nothing listens upstream: unbound keeps retrying and never answers the client.
    dead = free_port()
    auth = nsd(lab, tmp_path, "nsd", ttl=30, records=[f"www IN A {OLD}"])
    unbound = lab.enter_context(Unbound(tmp_path / "unbound", zone=ZONE, upstream_port=dead))
    finding = await run_probe(run_options(unbound.address), authoritative=auth.address)
    assert finding.verdict is Verdict.FAIL
    assert "resolver_failed" in signal_names(finding)
    assert f"no answer from {unbound.address} (timeout)" in finding.summary


# -- resolve_with, the walk, TCP fallback ------------------------------------------------


async def test_resolve_with_returns_addresses_ttl_and_cname_chain(
    lab: ExitStack, tmp_path: Path
) -> None:
    auth = nsd(
        lab,
        tmp_path,
        "nsd",
        ttl=30,
        records=[f"www IN A {OLD}", f"www IN A {NEW}", "api IN CNAME lb", "lb IN CNAME www"],
    )
    unbound = lab.enter_context(Unbound(tmp_path / "unbound", zone=ZONE, upstream_port=auth.port))

    answer = await resolve_with(unbound.address, f"api.{ZONE}", family=0, timeout=3)
    assert sorted(ip for ip, _ in answer.addresses) == [OLD, NEW]
    assert answer.cname_chain == (f"lb.{ZONE}", WWW)
    assert answer.ttl is not None and 0 < answer.ttl <= 30
    assert answer.resolver == unbound.address
    assert answer.end_ns > answer.start_ns

    # The connection path (dns.resolve with --resolver) and the JSON it reports.
    used = await pdns.resolve(WWW, 443, family=socket.AF_INET, resolver=unbound.address)
    data = dns_json(used, OLD)
    assert data is not None
    assert data["resolver"] == unbound.address
    assert data["used"] == OLD
    assert {a["ip"] for a in data["answers"]} == {OLD, NEW}  # type: ignore[attr-defined]

    with pytest.raises(DNSError) as nx:
        await resolve_with(unbound.address, f"nope.{ZONE}", family=0, timeout=3)
    assert nx.value.kind == "nxdomain"
    assert "NXDOMAIN" in nx.value.message

    with pytest.raises(DNSError) as nodata:
        await pdns.resolve(WWW, 443, family=socket.AF_INET6, resolver=unbound.address)
    assert nodata.value.kind == "no_address"


async def test_resolve_with_times_out_within_its_bound() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))  # bound, never answers
        port = silent.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(DNSError) as exc:
            await resolve_with(f"127.0.0.1:{port}", WWW, family=0, timeout=1.0)
        assert time.monotonic() - start < 2.0
    assert exc.value.kind == "timeout"


async def test_walk_finds_the_zone_servers_through_a_real_resolver(
    lab: ExitStack, tmp_path: Path
) -> None:
    auth = nsd(lab, tmp_path, "nsd", ttl=30, records=[f"www IN A {OLD}"])
    unbound = lab.enter_context(Unbound(tmp_path / "unbound", zone=ZONE, upstream_port=auth.port))
    querier = Querier(timeout=2.0, max_queries=20, budget_s=8.0)
    result = await find_authoritative(
        querier,
        WWW,
        family=socket.AF_INET,
        resolver=parse_server(unbound.address),
        ns_port=auth.port,  # the zone's NS (ns1 -> 127.0.0.1) listens on the lab port
    )
    assert result.method == "walk"
    assert result.status == "ok"
    assert result.hops[0].zone == ZONE
    assert [lk.nsname for lk in result.final] == [f"ns1.{ZONE}"]
    assert result.ips == frozenset({OLD})
    assert result.ttl == 30
    assert all(lk.aa for lk in result.final)


async def test_truncated_udp_answer_is_retried_over_tcp(lab: ExitStack, tmp_path: Path) -> None:
    many = [f"big IN A 127.0.{i // 250}.{i % 250 + 1}" for i in range(120)]  # > 1232 bytes
    auth = nsd(lab, tmp_path, "nsd", ttl=30, records=many)
    querier = Querier(timeout=2.0, max_queries=4, budget_s=5.0)
    found = await lookup(
        querier,
        parse_server(auth.address),
        f"big.{ZONE}",
        family=socket.AF_INET,
        rd=False,
        source="authoritative",
    )
    assert found.tcp
    assert found.status == "ok"
    assert len(found.addresses) == 120
    assert querier.sent == 2  # one UDP (truncated), one TCP
