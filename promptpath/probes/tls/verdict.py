"""The ``tls`` verdict: certificate expiry, protocol version, chain and name. Pure: the
facts (the trace's TLS details, a looking-only handshake's version and chain as parsed
certificates, the trust store's subjects) come in as arguments.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import CertInfo
from promptpath.probes.settings import TLSSettings

PROBE = "tls"
DEFAULT_WARN_DAYS = TLSSettings().warn_days
DEFAULT_FAIL_DAYS = TLSSettings().fail_days
#: Versions below TLS 1.2: deprecated by RFC 8996, refused by current clients.
#: Renewal with 1/RENEW_FRACTION_LEFT of the lifetime left (certbot's and Let's Encrypt's
#: recommended point: 30 days of 90).
RENEW_FRACTION_LEFT = 3
#: The longest lifetime taken for an automated (ACME) certificate: 90 days today, 47 from
#: 2029 under the CA/Browser Forum's schedule; longer ones are rotated by hand.
AUTOMATED_MAX_DAYS = 100
OLD_VERSIONS = frozenset({"SSLv2", "SSLv3", "TLSv1", "TLSv1.0", "TLSv1.1"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Facts:
    """What the probe knows about the TLS of the target."""

    host: str  # the name the certificate must match (the URL's host)
    version: str | None  # negotiated by the trace, else by the looking-only handshake
    version_source: str  # "trace" or "handshake"
    cert: CertInfo | None  # the leaf
    verified: bool | None  # the trace's verification (None: -k, or no handshake)
    verify_error: str | None
    chain: Sequence[CertInfo] | None  # as sent, leaf first (None: not seen)
    trusted_subjects: Collection[str] = ()  # RFC 4514 subjects of the trust store
    chain_note: str | None = None  # why the chain was not seen


@dataclass(frozen=True, slots=True, kw_only=True)
class _Issue:
    verdict: Verdict
    words: str
    advice: str


def name_matches(host: str, sans: Sequence[str]) -> bool:
    """RFC 6125 in short: an IP matches an IP SAN; a name matches a SAN exactly or a
    wildcard as the whole left-most label, which covers exactly one label."""
    host = host.strip("[]").lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
    for san in sans:
        san = san.lower().rstrip(".")
        if ip is not None:
            try:
                if ipaddress.ip_address(san) == ip:
                    return True
            except ValueError:
                continue
        elif _dns_match(host, san):
            return True
    return False


def _dns_match(host: str, san: str) -> bool:
    if san.startswith("*.") and san.count(".") >= 2:  # never a wildcard over a whole TLD
        return host.partition(".")[2] == san[2:]
    return san == host


def chain_complete(chain: Sequence[CertInfo], trusted: Collection[str]) -> str | None:
    """None when the chain as sent leads from the leaf to a trust anchor (a certificate the
    store holds, one issued by it, or a root the server sent itself); else the issuer the
    client was left to find. Issuer links are followed by name, in any order sent, and the
    first anchor ends the walk: a cross-signed root sent along (whose own issuer left the
    stores long ago) does not make a chain incomplete."""
    sent = {cert.subject: cert for cert in chain}
    cert = chain[0]
    for _ in chain:
        if cert.subject in trusted or cert.issuer in trusted or cert.issuer == cert.subject:
            return None
        parent = sent.get(cert.issuer)
        if parent is None or parent is cert:
            return cert.issuer
        cert = parent
    return cert.issuer  # a loop of issuers that never reaches an anchor


def lifetime_days(cert: CertInfo) -> float | None:
    """not_before to not_after, in days (None: the dates do not parse)."""
    try:
        start = datetime.fromisoformat(cert.not_before)
        end = datetime.fromisoformat(cert.not_after)
    except ValueError:
        return None
    return (end - start).total_seconds() / 86_400


def _rounded_life(cert: CertInfo) -> float | None:
    life = lifetime_days(cert)
    return None if life is None else round(life, 1)


def _expiry(cert: CertInfo, warn_days: int, fail_days: int) -> _Issue | None:
    if cert.expired:
        return _Issue(
            verdict=Verdict.FAIL,
            words=f"the certificate expired on {cert.not_after[:10]}",
            advice="renew the certificate now, and monitor expiry (clients refuse it)",
        )
    lifetime = lifetime_days(cert)
    # Rotation: a certificate of at most AUTOMATED_MAX_DAYS is one an ACME client renews,
    # with a third of its lifetime left (30 of 90 days; 2 of 6 for a short-lived one).
    # Thresholds above that point would flag a short-lived certificate all its life, so
    # they shrink to it; a longer-lived (hand-rotated) one keeps the fixed thresholds.
    automated = lifetime is not None and lifetime <= AUTOMATED_MAX_DAYS
    renew_at = lifetime / RENEW_FRACTION_LEFT if automated and lifetime else None
    if renew_at is not None:
        warn_days = min(warn_days, max(1, round(renew_at)))
        fail_days = min(fail_days, max(1, round(renew_at / 2)))
    if cert.days_left < fail_days:
        verdict = Verdict.FAIL
    elif cert.days_left < warn_days:
        verdict = Verdict.WARN
    elif renew_at is not None and cert.days_left < renew_at:
        return _Issue(
            verdict=Verdict.WARN,
            words=f"the certificate is past its renewal point: {cert.days_left} of"
            f" {lifetime:.0f} days left, expiring {cert.not_after[:10]}, where rotation"
            f" normally happens with {renew_at:.0f} left",
            advice="check that renewal runs (an ACME client renews with a third of the"
            " lifetime left): a missed rotation is the usual way to an expired certificate",
        )
    else:
        return None
    return _Issue(
        verdict=verdict,
        words=f"the certificate expires on {cert.not_after[:10]}, in {cert.days_left} days",
        advice=f"renew it: automated renewal (ACME renews with a third of the lifetime left)"
        f" should have run by now; alert on expiry under {warn_days} days",
    )


def _chain(facts: Facts) -> tuple[_Issue | None, dict[str, object]]:
    chain = facts.chain
    if chain is None or not chain:
        return None, {"checked": False, "note": facts.chain_note}
    sent = [{"subject": c.subject, "issuer": c.issuer} for c in chain]
    missing = chain_complete(chain, facts.trusted_subjects)
    evidence: dict[str, object] = {"checked": True, "sent": sent, "missing_issuer": missing}
    if missing is None:
        return None, evidence
    only = "only its own certificate" if len(chain) == 1 else f"{len(chain)} certificates"
    return (
        _Issue(
            verdict=Verdict.FAIL,
            words=f"incomplete chain: the server sent {only}, and not the certificate of its"
            f" issuer {missing}, which the trust store does not hold either",
            advice="serve the full chain (leaf, then intermediates: nginx ssl_certificate"
            " with the fullchain file): browsers may fetch a missing intermediate, but"
            " curl, Python, Go and the SDKs do not (or, for a private CA, trust it:"
            " --cacert)",
        ),
        evidence,
    )


def judge(facts: Facts, *, warn_days: int, fail_days: int) -> Finding:
    issues: list[_Issue] = []
    cert = facts.cert
    if cert is not None and (expiry := _expiry(cert, warn_days, fail_days)) is not None:
        issues.append(expiry)
    if facts.version in OLD_VERSIONS:
        issues.append(
            _Issue(
                verdict=Verdict.FAIL,
                words=f"the server negotiates {facts.version} at best (below TLS 1.2)",
                advice="enable TLS 1.2 and 1.3 on the server; TLS 1.0/1.1 are deprecated"
                " (RFC 8996) and refused by current clients",
            )
        )
    names_ok = None
    if cert is not None:
        # A verified handshake checked the name already (Python's own matcher decides).
        names_ok = True if facts.verified else name_matches(facts.host, cert.sans)
        if facts.verify_error in ("hostname_mismatch", "ip_mismatch") or not names_ok:
            names = ", ".join(cert.sans) or f"no SAN (subject {cert.subject})"
            issues.append(
                _Issue(
                    verdict=Verdict.FAIL,
                    words=f"the certificate is not valid for {facts.host!r}: it names {names}",
                    advice=f"serve a certificate whose SANs include {facts.host} (or connect"
                    " by a name it carries)",
                )
            )
    chain_issue, chain_evidence = _chain(facts)
    if chain_issue is not None:
        issues.append(chain_issue)
    if facts.verified is False and not issues:
        # Refused for a reason none of the checks above explains (an unknown CA, a
        # self-signed certificate): still not a pass.
        issues.append(
            _Issue(
                verdict=Verdict.FAIL,
                words=f"the certificate was refused ({facts.verify_error or 'verification'})",
                advice="serve a certificate from a CA the clients trust, or give them that CA"
                " (--cacert)",
            )
        )
    evidence: dict[str, object] = {
        "host": facts.host,
        "version": facts.version,
        "version_source": facts.version_source,
        "verified": facts.verified,
        "verify_error": facts.verify_error,
        "cert": None if cert is None else {**cert.as_dict(), "lifetime_days": _rounded_life(cert)},
        "name_matches": names_ok,
        "chain": chain_evidence,
        "thresholds_days": {"warn": warn_days, "fail": fail_days},
    }
    if cert is None and facts.version is None:
        return Finding(
            probe=PROBE,
            verdict=Verdict.SKIP,
            summary="no TLS handshake completed: nothing to judge"
            + (f" ({facts.chain_note})" if facts.chain_note else ""),
            evidence=evidence,
        )
    if not issues:
        parts = [facts.version or "version unknown"]
        if cert is not None:
            parts.append(f"certificate valid {cert.days_left} more days (to {cert.not_after[:10]})")
            parts.append(f"names {facts.host}")
        parts.append(
            f"chain complete ({len(facts.chain or ())} sent)"
            if chain_evidence["checked"]
            else "chain not checked"
        )
        return Finding(
            probe=PROBE, verdict=Verdict.PASS, summary=", ".join(parts), evidence=evidence
        )
    worst = max(issues, key=lambda i: i.verdict.severity).verdict
    return Finding(
        probe=PROBE,
        verdict=worst,
        summary="; ".join(i.words for i in issues),
        evidence=evidence,
        advice=[i.advice for i in issues],
    )
