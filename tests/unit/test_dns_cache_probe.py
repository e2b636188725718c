"""The dns-cache probe's own wiring: options, the address the connection used, cost, skip."""

from __future__ import annotations

import pytest

from promptpath.core.errors import UsageError
from promptpath.core.findings import Verdict
from promptpath.core.timeline import ConnectAttempt, ErrorInfo, Timeline
from promptpath.net.dns import DNSAnswer
from promptpath.options import RunOptions, parse_target
from promptpath.probes.base import REGISTRY, ProbeContext
from promptpath.probes.dns_cache.probe import (
    DEFAULT_RECHECK_S,
    MAX_QUERIES,
    MIN_RECHECK_S,
    DNSCacheProbe,
    not_resolved_through_dns,
    recheck_seconds,
    used_addresses,
)
from promptpath.probes.settings import DNSCacheSettings, ProbeSettings
from promptpath.tracer.orchestrator import TraceResult


def options(url: str = "https://api.example.com/v1/chat/completions", **kw: object) -> RunOptions:
    return RunOptions(target=parse_target(url), provider="openai", model="m", **kw)  # type: ignore[arg-type]


def ctx_with(timeline: Timeline | None, **kw: object) -> ProbeContext:
    settings = kw.pop("settings", ProbeSettings())
    assert isinstance(settings, ProbeSettings)
    opts = options(**kw)
    result = None if timeline is None else TraceResult(options=opts, timeline=timeline)
    return ProbeContext(options=opts, result=result, settings=settings)


def recheck(seconds: float) -> ProbeSettings:
    return ProbeSettings(dns_cache=DNSCacheSettings(recheck_s=seconds))


def test_probe_is_registered_under_its_name() -> None:
    assert REGISTRY["dns-cache"] is DNSCacheProbe


def test_recheck_defaults_reads_and_clamps_the_probe_setting() -> None:
    assert recheck_seconds(ProbeSettings()) == DEFAULT_RECHECK_S
    assert recheck_seconds(recheck(2.5)) == 2.5
    assert recheck_seconds(recheck(1e9)) == 60.0
    for too_short in (1.5, -4.0):
        with pytest.raises(UsageError, match="--dns-recheck must be at least 2 s"):
            recheck(too_short)


def test_the_shortest_useful_recheck_is_published_for_the_command_line() -> None:
    # Two whole-second TTLs under 2 s apart may legitimately be equal: the bound the
    # command line checks (probes/settings.py) is the countdown the signals need.
    from promptpath.probes.dns_cache.signals import MIN_COUNTDOWN_S

    assert MIN_RECHECK_S == MIN_COUNTDOWN_S == 2.0
    assert DEFAULT_RECHECK_S >= MIN_RECHECK_S


def test_cost_declares_queries_and_seconds_including_the_recheck() -> None:
    cost = DNSCacheProbe().cost(ctx_with(None, settings=recheck(2)))
    assert cost.dns_queries == MAX_QUERIES
    assert cost.seconds >= 2 + 10
    assert "DNS queries" in cost.describe()


def test_used_address_is_the_connected_one() -> None:
    tl = Timeline(t0_ns=0, t0_unix_ns=0, address=("192.0.2.7", 443))
    assert used_addresses(ctx_with(tl)) == (("192.0.2.7",), "connection", None)


def test_failed_connection_reports_every_attempted_address_and_the_error() -> None:
    tl = Timeline(
        t0_ns=0,
        t0_unix_ns=0,
        attempts=[
            ConnectAttempt(
                ip="192.0.2.7", port=443, family="ipv4", start_ns=1, end_ns=2, error="refused"
            ),
            ConnectAttempt(
                ip="192.0.2.8", port=443, family="ipv4", start_ns=3, end_ns=4, error="refused"
            ),
        ],
        error=ErrorInfo(stage="connect", kind="refused", message="connection refused"),
    )
    assert used_addresses(ctx_with(tl)) == (
        ("192.0.2.7", "192.0.2.8"),
        "connection attempts",
        "connect: connection refused",
    )


def test_dns_answer_is_the_fallback_when_nothing_was_attempted() -> None:
    answer = DNSAnswer(resolver="system", addresses=(("192.0.2.9", "ipv4"),), start_ns=0, end_ns=1)
    tl = Timeline(t0_ns=0, t0_unix_ns=0, dns=answer)
    assert used_addresses(ctx_with(tl)) == (("192.0.2.9",), "connection dns", None)


def test_resolve_override_is_what_was_used() -> None:
    ctx = ctx_with(None, resolve=(("api.example.com", 443, "192.0.2.50"),))
    assert used_addresses(ctx) == (("192.0.2.50",), "--resolve", None)


def test_no_trace_means_no_used_address() -> None:
    assert used_addresses(ctx_with(None)) == ((), "none", None)


async def test_ip_literal_target_is_skipped_without_a_query() -> None:
    finding = await DNSCacheProbe().run(ctx_with(None, url="http://127.0.0.1:8080/api/chat"))
    assert finding.verdict is Verdict.SKIP
    ipv6 = await DNSCacheProbe().run(ctx_with(None, url="http://[::1]:8080/api/chat"))
    assert ipv6.verdict is Verdict.SKIP


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST.", "app.localhost", "127.0.0.1", "[::1]", "::1"]
)
def test_localhost_names_and_ip_literals_are_not_resolved_through_dns(host: str) -> None:
    assert not_resolved_through_dns(host) is not None


@pytest.mark.parametrize("host", ["api.example.com", "localhost.example.com", "mylocalhost"])
def test_other_names_are_resolved_through_dns(host: str) -> None:
    assert not_resolved_through_dns(host) is None
