"""Rate-limit headers in each provider's spelling, and who answered a 429."""

from __future__ import annotations

import pytest

from promptpath.core.findings import Verdict
from promptpath.probes.ratelimit.verdict import (
    Dimension,
    dimensions,
    go_duration_s,
    judge,
    retry_after_s,
)

pytestmark = pytest.mark.unit

NOW = 1_796_083_200.0  # 2026-12-01T00:00:00Z

OPENAI = [
    ("x-ratelimit-limit-requests", "500"),
    ("x-ratelimit-remaining-requests", "499"),
    ("x-ratelimit-reset-requests", "120ms"),
    ("x-ratelimit-limit-tokens", "150000"),
    ("x-ratelimit-remaining-tokens", "9000"),
    ("x-ratelimit-reset-tokens", "6m0s"),
]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1s", 1.0), ("6m0s", 360.0), ("59.3ms", 0.0593), ("1h2m3s", 3723.0), ("17", 17.0)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "1x", "s1"])
def test_not_a_duration(text: str) -> None:
    assert go_duration_s(text) is None


def test_retry_after_seconds_or_date() -> None:
    assert retry_after_s("20", NOW) == 20.0
    assert retry_after_s("Tue, 01 Dec 2026 00:00:30 GMT", NOW) == pytest.approx(30.0)
    assert retry_after_s("later", NOW) is None


def test_openai_dimensions_and_a_warning_under_ten_percent() -> None:
    dims = dimensions(OPENAI, NOW)
    assert dims == [
        Dimension(
            source="openai",
            name="requests",
            limit=500,
            remaining=499,
            reset="120ms",
            reset_s=pytest.approx(0.12),
        ),  # type: ignore[arg-type]
        Dimension(
            source="openai",
            name="tokens",
            limit=150000,
            remaining=9000,
            reset="6m0s",
            reset_s=360.0,
        ),
    ]
    finding = judge(OPENAI, 200, NOW)
    assert finding.verdict is Verdict.WARN
    assert (
        finding.summary == "close to the limit: tokens 9,000/150,000 left (6.0 %), resets in 6 min"
    )
    assert finding.evidence["dimensions"][1]["remaining_pct"] == 6.0  # type: ignore[index]


def test_anthropic_dimensions_with_rfc3339_resets() -> None:
    headers = [
        (f"anthropic-ratelimit-{dim}-{field}", value)
        for dim in ("requests", "tokens", "input-tokens", "output-tokens")
        for field, value in (
            ("limit", "1000"),
            ("remaining", "900"),
            ("reset", "2026-12-01T00:00:42Z"),
        )
    ]
    dims = dimensions(headers, NOW)
    assert [d.name for d in dims] == ["requests", "tokens", "input-tokens", "output-tokens"]
    assert all(d.source == "anthropic" and d.reset_s == pytest.approx(42.0) for d in dims)
    finding = judge(headers, 200, NOW)
    assert finding.verdict is Verdict.PASS
    assert finding.summary.startswith(
        "within limits: requests 900/1,000 left (90.0 %), resets in 42 s"
    )


def test_ietf_structured_fields_with_a_policy() -> None:
    headers = [
        ("RateLimit-Policy", '"burst";q=100;w=60, "daily";q=1000;w=86400'),
        ("RateLimit", '"burst";r=5;t=30, "daily";r=800;t=3600'),
    ]
    dims = dimensions(headers, NOW)
    assert [(d.source, d.name, d.limit, d.remaining, d.reset_s) for d in dims] == [
        ("ietf", "burst", 100, 5, 30),
        ("ietf", "daily", 1000, 800, 3600),
    ]
    assert judge(headers, 200, NOW).verdict is Verdict.WARN  # burst: 5 %


def test_ietf_draft_07_dictionary_and_legacy_fields() -> None:
    draft = dimensions([("RateLimit", "limit=10, remaining=9, reset=7")], NOW)
    assert [(d.source, d.limit, d.remaining, d.reset_s) for d in draft] == [
        ("ietf-draft-07", 10, 9, 7)
    ]
    legacy = dimensions(
        [
            ("X-RateLimit-Limit", "60"),
            ("X-RateLimit-Remaining", "59"),
            ("X-RateLimit-Reset", str(int(NOW) + 50)),
        ],
        NOW,
    )
    assert [(d.source, d.limit, d.remaining, d.reset_s) for d in legacy] == [
        ("x-ratelimit-*", 60, 59, 50.0)
    ]


def test_garbage_values_do_not_break_the_reading() -> None:
    headers = [
        ("x-ratelimit-limit-requests", "many"),
        ("x-ratelimit-remaining-requests", "3"),
        ("RateLimit", '"unterminated;r=1'),
    ]
    dims = dimensions(headers, NOW)
    assert dims[0].limit is None and dims[0].remaining == 3 and dims[0].share_left is None
    assert judge(headers, 200, NOW).verdict is Verdict.PASS


def test_no_headers_is_a_pass_that_says_so() -> None:
    finding = judge([("content-type", "text/event-stream")], 200, NOW)
    assert finding.verdict is Verdict.PASS
    assert "no rate-limit headers" in finding.summary


def test_429_from_the_application_names_the_exhausted_dimension() -> None:
    headers = [
        ("server", "nginx"),
        ("retry-after", "20"),
        ("x-ratelimit-limit-requests", "500"),
        ("x-ratelimit-remaining-requests", "0"),
    ]
    finding = judge(headers, 429, NOW)
    assert finding.verdict is Verdict.FAIL and finding.evidence["layer"] == "application"
    assert finding.summary == (
        "429 from the application (its own rate-limit headers came with it): requests 0/500"
        " left (0.0 %); retry after 20 s"
    )


def test_429_from_an_edge_without_provider_headers() -> None:
    finding = judge([("Server", "nginx/1.22.1"), ("Content-Type", "text/html")], 429, NOW)
    assert finding.verdict is Verdict.FAIL and finding.evidence["layer"] == "edge"
    assert finding.summary.startswith("429 from the edge (nginx): no rate-limit headers")
    cf = judge([("cf-ray", "8f1c2d3e4f5a6b7c-FRA"), ("retry-after", "5")], 429, NOW)
    assert cf.evidence["edge"] == ["cloudflare"] and cf.summary.endswith("retry after 5 s")


def test_429_with_nothing_to_tell_the_layer() -> None:
    finding = judge([("server", "hypercorn-h11"), ("retry-after", "1")], 429, NOW)
    assert finding.evidence["layer"] == "unknown"


def test_probe_all_includes_the_security_probes() -> None:
    from promptpath.probes.suite import select

    names = [cls.name for cls in select(["all"])]
    assert {"ratelimit", "tls", "cors"} <= set(names)
