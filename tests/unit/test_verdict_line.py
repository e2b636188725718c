"""The verdict line leads with what is wrong: the stage that broke, each SLO breached, the
worst finding at or above --fail-on; then where the time went. Pure: timelines from
scripted bytes, findings and SLO results as data."""

from __future__ import annotations

import json

import pytest

from promptpath.core.analysis import compute, headline
from promptpath.core.findings import Finding, Verdict, first_clause
from promptpath.core.slo import SLOResult, parse_slo
from promptpath.core.timeline import ErrorInfo, Timeline
from promptpath.core.verdict import counted, run_line, tone_of
from promptpath.tracer.ingest import BodyIngest

MS = 1_000_000


def streamed() -> Timeline:
    """An OpenAI stream of three tokens that completed: nothing broke."""
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.mark("request_sent", 10 * MS)
    tl.mark("ttfb", 300 * MS)
    ingest = BodyIngest(tl, "openai")
    for i, text in enumerate(["He", "ll", "o"]):
        chunk = {"choices": [{"index": 0, "delta": {"content": text}}]}
        ingest.feed(f"data: {json.dumps(chunk)}\n\n".encode(), (580 + 20 * i) * MS, i)
    ingest.feed(b"data: [DONE]\n\n", 700 * MS, 3)
    ingest.finish(701 * MS)
    return tl


BUFFERING = Finding(
    probe="buffering",
    verdict=Verdict.FAIL,
    summary="a size-triggered buffer: 3 deliveries of exactly 4012 bytes; at proxy (Via)",
    lead="a hop delivers the stream in 3.9 KiB blocks (Via: 1.1 nginx)",
)
TLS_WARN = Finding(
    probe="tls",
    verdict=Verdict.WARN,
    summary="the certificate expires in 19 days (2027-01-01); chain complete",
)
PASSED = Finding(probe="idle-timeout", verdict=Verdict.PASS, summary="a 5 s silence survived")


def test_the_worst_failing_finding_leads_and_the_figures_follow_a_dash() -> None:
    tl = streamed()
    figures = headline(tl, compute(tl)).removeprefix("OK: ")
    line = run_line(tl, compute(tl), findings=[PASSED, TLS_WARN, BUFFERING], fail_on="fail")
    assert line == (
        f"FAIL buffering: a hop delivers the stream in 3.9 KiB blocks (Via: 1.1 nginx) — {figures}"
    )
    assert figures.startswith("first token after 580 ms")
    assert tone_of(line) == "fail"


def test_a_warning_leads_only_under_fail_on_warn() -> None:
    tl = streamed()
    quiet = run_line(tl, compute(tl), findings=[TLS_WARN], fail_on="fail")
    assert quiet.startswith("OK: first token after") and tone_of(quiet) == "ok"
    loud = run_line(tl, compute(tl), findings=[TLS_WARN], fail_on="warn")
    assert loud.startswith("WARN tls: the certificate expires in 19 days (2027-01-01) — first")
    assert tone_of(loud) == "warn"


def test_the_fail_leads_a_warning_found_first_and_the_rest_are_counted() -> None:
    tl = streamed()
    line = run_line(tl, compute(tl), findings=[TLS_WARN, BUFFERING], fail_on="warn")
    assert line.startswith("FAIL buffering: a hop delivers")
    assert "(Via: 1.1 nginx) (and 1 more: tls) — first token" in line


def test_a_probe_error_counts_as_a_fail_but_a_fail_leads_it() -> None:
    broken = Finding(probe="dns-cache", verdict=Verdict.ERROR, summary="resolver unreachable")
    assert counted([broken, BUFFERING], "fail") == [BUFFERING, broken]
    tl = streamed()
    line = run_line(tl, compute(tl), findings=[broken], fail_on="fail")
    assert line.startswith("ERROR dns-cache: resolver unreachable — ") and tone_of(line) == "fail"


def test_an_slo_breach_is_named_first() -> None:
    tl = streamed()
    breach = SLOResult(slo=parse_slo("ttft_p95<500ms"), value=580.4, ok=False)
    held = SLOResult(slo=parse_slo("error_rate<=5%"), value=0.0, ok=True)
    line = run_line(tl, compute(tl), findings=[BUFFERING], slos=[held, breach])
    assert line.startswith(
        "FAILED: ttft_p95 < 500ms breached (580 ms); FAIL buffering: a hop delivers"
    )
    assert tone_of(line) == "fail"


def test_a_run_that_broke_says_where_first() -> None:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.error = ErrorInfo(stage="connect", kind="refused", message="connection refused", t_ns=MS)
    stale = Finding(
        probe="dns-cache",
        verdict=Verdict.FAIL,
        summary="the resolver serves a stale address: 10.0.0.9 answered nothing",
    )
    line = run_line(tl, compute(tl), findings=[stale])
    assert line == (
        "FAILED in connect: connection refused; FAIL dns-cache: the resolver serves a stale address"
    )
    assert run_line(tl, compute(tl)) == headline(tl, compute(tl))


def test_nothing_wrong_is_the_measurement_line() -> None:
    tl = streamed()
    assert run_line(tl, compute(tl), findings=[PASSED]) == headline(tl, compute(tl))


@pytest.mark.parametrize(
    ("summary", "lead"),
    [
        (
            "the certificate expired on 2026-12-05; incomplete chain: x",
            "the certificate expired on 2026-12-05",
        ),
        (
            "the upstream kept generating (after a TCP reset: a closed tab): 35 of 40 tokens",
            "the upstream kept generating (after a TCP reset: a closed tab)",
        ),
        ("TLS: the version is old; more", "TLS: the version is old"),
        ("no clause at all", "no clause at all"),
    ],
)
def test_a_findings_lead_is_its_first_clause_outside_brackets(summary: str, lead: str) -> None:
    assert first_clause(summary) == lead
    finding = Finding(probe="x", verdict=Verdict.FAIL, summary=summary)
    assert finding.as_dict()["lead"] == lead


@pytest.mark.parametrize(
    ("expr", "value", "concurrency", "said"),
    [
        ("ttft_p95<800ms", 912.3, None, "ttft_p95 < 800ms breached (912 ms)"),
        ("ttft_p95 <= 0.8 s", 4.83, None, "ttft_p95 <= 0.8 s breached (4.8 ms)"),
        ("error_rate<1%", 0.05, 8, "error_rate < 1% breached at concurrency 8 (5%)"),
        ("gap_p99_p95<50", None, None, "gap_p99_p95 < 50 breached (not measured)"),
    ],
)
def test_an_slo_breach_in_words(
    expr: str, value: float | None, concurrency: int | None, said: str
) -> None:
    result = SLOResult(slo=parse_slo(expr), value=value, ok=False, concurrency=concurrency)
    assert result.breach() == said
