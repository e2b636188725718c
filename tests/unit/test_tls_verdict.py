"""The tls verdict on given facts: expiry thresholds, old versions, chains, names."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from promptpath.core.findings import Verdict
from promptpath.core.timeline import CertInfo
from promptpath.probes.tls.verdict import Facts, chain_complete, judge, name_matches

pytestmark = pytest.mark.unit

ROOT = "CN=Root CA"
INTER = "CN=Intermediate CA"


def cert(
    days: int = 400,
    *,
    subject: str = "CN=api.example.com",
    issuer: str = INTER,
    sans: tuple[str, ...] = ("api.example.com",),
) -> CertInfo:
    return CertInfo(
        subject=subject,
        issuer=issuer,
        sans=sans,
        not_before="2026-01-01T00:00:00+00:00",
        not_after="2027-01-05T00:00:00+00:00",
        days_left=days,
        expired=days < 0,
    )


INTERMEDIATE = cert(subject=INTER, issuer=ROOT, sans=())


def facts(**kw: object) -> Facts:
    base: dict[str, object] = dict(
        host="api.example.com",
        version="TLSv1.3",
        version_source="trace",
        cert=cert(),
        verified=True,
        verify_error=None,
        chain=[cert(), INTERMEDIATE],
        trusted_subjects={ROOT},
    )
    base.update(kw)
    return Facts(**base)  # type: ignore[arg-type]


def verdict(f: Facts, warn: int = 30, fail: int = 7) -> Verdict:
    return judge(f, warn_days=warn, fail_days=fail).verdict


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (400, Verdict.PASS),
        (30, Verdict.PASS),
        (29, Verdict.WARN),
        (7, Verdict.WARN),
        (6, Verdict.FAIL),
        (0, Verdict.FAIL),
        (-1, Verdict.FAIL),
    ],
)
def test_expiry_thresholds(days: int, expected: Verdict) -> None:
    f = facts(cert=cert(days))
    assert verdict(f) is expected


def test_thresholds_are_the_callers() -> None:
    assert verdict(facts(cert=cert(50)), warn=60, fail=10) is Verdict.WARN
    assert verdict(facts(cert=cert(9)), warn=60, fail=10) is Verdict.FAIL


def test_expired_says_when_with_evidence() -> None:
    found = judge(facts(cert=cert(-2)), warn_days=30, fail_days=7)
    assert found.summary.startswith("the certificate expired on 2027-01-05")
    assert found.evidence["cert"]["days_left"] == -2  # type: ignore[index]


@pytest.mark.parametrize("version", ["TLSv1", "TLSv1.1", "SSLv3"])
def test_a_version_below_tls12_fails(version: str) -> None:
    found = judge(facts(version=version, version_source="handshake"), warn_days=30, fail_days=7)
    assert found.verdict is Verdict.FAIL
    assert f"negotiates {version} at best (below TLS 1.2)" in found.summary


def test_chain_without_the_intermediate_is_incomplete() -> None:
    found = judge(facts(chain=[cert()]), warn_days=30, fail_days=7)
    assert found.verdict is Verdict.FAIL
    assert f"not the certificate of its issuer {INTER}" in found.summary
    assert found.evidence["chain"]["missing_issuer"] == INTER  # type: ignore[index]


def test_chains_that_reach_a_trust_anchor() -> None:
    assert chain_complete([cert(), INTERMEDIATE], {ROOT}) is None
    assert chain_complete([cert(issuer=ROOT)], {ROOT}) is None  # issued by the root itself
    root = cert(subject=ROOT, issuer=ROOT, sans=())
    assert chain_complete([cert(), INTERMEDIATE, root], set()) is None  # root sent along
    assert chain_complete([cert()], {ROOT}) == INTER


def test_a_cross_signed_root_sent_along_does_not_make_the_chain_incomplete() -> None:
    # Let's Encrypt's long chain: leaf, R3, ISRG Root X1 cross-signed by DST Root CA X3,
    # which current stores no longer hold; ISRG Root X1 itself is trusted.
    x1 = "CN=ISRG Root X1"
    r3 = cert(subject="CN=R3", issuer=x1, sans=())
    cross = cert(subject=x1, issuer="CN=DST Root CA X3", sans=())
    assert chain_complete([cert(issuer="CN=R3"), r3, cross], {x1}) is None
    assert chain_complete([cert(issuer="CN=R3"), cross, r3], {x1}) is None  # out of order
    assert chain_complete([cert(issuer="CN=R3"), cross], {x1}) == "CN=R3"


def test_a_chain_not_seen_is_said_not_judged() -> None:
    found = judge(facts(chain=None, chain_note="not checked: proxy"), warn_days=30, fail_days=7)
    assert found.verdict is Verdict.PASS and "chain not checked" in found.summary
    assert found.evidence["chain"] == {"checked": False, "note": "not checked: proxy"}


@pytest.mark.parametrize(
    ("host", "sans", "ok"),
    [
        ("api.example.com", ("api.example.com",), True),
        ("API.Example.com.", ("api.example.com",), True),
        ("api.example.com", ("*.example.com",), True),
        ("a.api.example.com", ("*.example.com",), False),
        ("example.com", ("*.example.com",), False),
        ("example.com", ("*.com",), False),
        ("127.0.0.1", ("127.0.0.1",), True),
        ("127.0.0.1", ("localhost",), False),
        ("::1", ("0:0:0:0:0:0:0:1",), True),
        ("other.example", ("api.example.com",), False),
    ],
)
def test_name_matching(host: str, sans: tuple[str, ...], ok: bool) -> None:
    assert name_matches(host, sans) is ok


def test_name_mismatch_names_what_the_certificate_carries() -> None:
    f = facts(host="other.example", verified=False, verify_error="hostname_mismatch")
    found = judge(f, warn_days=30, fail_days=7)
    assert found.verdict is Verdict.FAIL
    assert "not valid for 'other.example': it names api.example.com" in found.summary


def test_unverified_run_still_checks_the_name() -> None:
    assert verdict(facts(host="other.example", verified=None)) is Verdict.FAIL
    assert verdict(facts(verified=None)) is Verdict.PASS


def test_several_issues_take_the_worst_verdict() -> None:
    found = judge(facts(cert=cert(20), chain=[cert(20)]), warn_days=30, fail_days=7)
    assert found.verdict is Verdict.FAIL and len(found.advice) == 2


def test_no_handshake_at_all_is_a_skip() -> None:
    f = dataclasses.replace(facts(), cert=None, version=None, chain=None, chain_note="refused")
    assert verdict(f) is Verdict.SKIP


def test_a_refusal_no_check_explains_is_still_a_fail() -> None:
    found = judge(facts(verified=False, verify_error="unknown_ca"), warn_days=30, fail_days=7)
    assert found.verdict is Verdict.FAIL
    assert found.summary == "the certificate was refused (unknown_ca)"


def short_lived(lifetime_days: int, days_left: int) -> CertInfo:
    start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    return CertInfo(
        subject="CN=api.example.com",
        issuer=INTER,
        sans=("api.example.com",),
        not_before=start.isoformat(),
        not_after=(start + dt.timedelta(days=lifetime_days)).isoformat(),
        days_left=days_left,
    )


@pytest.mark.parametrize(
    ("lifetime", "days_left", "expected"),
    [
        # A 90-day ACME certificate renews with 30 left: the fixed thresholds agree.
        (90, 60, Verdict.PASS),
        (90, 29, Verdict.WARN),
        (90, 6, Verdict.FAIL),
        # A 6-day certificate lives under the fixed 30/7-day thresholds all its life:
        # judged against its own renewal point (2 days left) instead.
        (6, 5, Verdict.PASS),
        (6, 1, Verdict.WARN),
        (6, 0, Verdict.FAIL),
        # A 47-day certificate (CA/B Forum, 2029): renewal point ~16 days left.
        (47, 20, Verdict.PASS),
        (47, 14, Verdict.WARN),
    ],
)
def test_an_automated_certificate_is_judged_against_its_renewal_point(
    lifetime: int, days_left: int, expected: Verdict
) -> None:
    found = judge(facts(cert=short_lived(lifetime, days_left)), warn_days=30, fail_days=7)
    assert found.verdict is expected, found.summary
    assert found.evidence["cert"]["lifetime_days"] == lifetime  # type: ignore[index]


def test_a_hand_rotated_certificate_keeps_the_fixed_thresholds() -> None:
    # 369 days long, 60 left: past a third of its life, but a yearly certificate renewed
    # by hand is not late at 60 days.
    assert verdict(facts(cert=cert(60))) is Verdict.PASS
