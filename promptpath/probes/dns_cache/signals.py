"""dns-cache observations and the signals found in them, sans-IO.

Signals, each with the source it was seen at:

    stale       ede_stale_answer          EDE 3 "Stale Answer" (or 19) in a resolver reply
                ttl_not_counting_down     same TTL twice, seconds apart, and either a TTL
                                          serve-stale pins (30, 0) or more time than the TTL
    constant    ttl_constant              same TTL twice, seconds apart, within that TTL and
                                          not the zone's: local data (dnsmasq host-record,
                                          unbound local-data, CoreDNS cluster names, a
                                          split-horizon view) or a forwarder that rewrites
                                          TTLs. Nothing says the answer expired: never a FAIL.
    mismatch    disjoint_from_authoritative  address set shares nothing with the authority
                answer_changed_within_ttl the set changed before the advertised TTL ran out
                negative_cached           resolver says NXDOMAIN/no data, the authority has data
    inflated    ttl_inflated              resolver TTL above the zone's TTL (a TTL floor)
    broken      resolver_failed, authoritative_unreachable, authoritative_not_found,
                lame_delegation, named_authoritative_lame, name_missing

Each resolver's TTL countdown is classed (``countdown_of``): counting, refreshed, zone_ttl_0,
zone_ttl (the zone's own TTL each time: nothing caches in between, or the resolver serves
the zone), too_soon (queries under ``MIN_COUNTDOWN_S`` apart: not judged), stuck and
constant (the two signals above), unchecked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from promptpath.net.dnsmsg import Lookup, ede_text
from promptpath.net.dnswalk import AuthResult, without_authority

EDE_STALE_ANSWER = 3
EDE_STALE_NXDOMAIN = 19
#: Below this many seconds between two queries a whole-second TTL may legitimately repeat.
MIN_COUNTDOWN_S = 2.0
#: TTLs known to be pinned by serve-stale implementations, and who pins them.
PINNED_TTLS = {
    30: "30 s is the serve-stale reply TTL (unbound serve-expired-reply-ttl, RFC 8767)",
    0: "0 s is how dnsmasq --use-stale-cache and some forwarders serve expired entries",
}
SignalKind = Literal["stale", "mismatch", "inflated", "constant", "broken"]
Countdown = Literal[
    "counting",
    "refreshed",
    "zone_ttl_0",
    "zone_ttl",
    "too_soon",
    "stuck",
    "constant",
    "unchecked",
]
DEFINITIVE = ("ok", "nodata", "nxdomain")
FAILED = ("servfail", "refused", "formerr", "lame", "referral", "timeout", "network", "malformed")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolverCheck:
    """A recursive resolver asked twice, ``recheck`` seconds apart."""

    server: str
    first: Lookup
    second: Lookup | None = None

    @property
    def elapsed_s(self) -> float | None:
        if self.second is None:
            return None
        return (self.second.end_ns - self.first.end_ns) / 1e9

    @property
    def latest(self) -> Lookup:
        """The newest answer that carried addresses, else the newest answer."""
        if self.second is not None and (self.second.status == "ok" or self.first.status != "ok"):
            return self.second
        return self.first


@dataclass(frozen=True, slots=True, kw_only=True)
class Observations:
    """Everything the probe collected; times are ``perf_counter_ns`` stamps from the I/O layer."""

    host: str
    used: tuple[str, ...] = ()  # the address set the connection used
    used_from: str = "none"  # connection | connection attempts | --resolve | none
    connection_error: str | None = None  # the traced request's error, if it failed
    system: Lookup | None = None  # getaddrinfo (skipped when --resolver is given)
    resolvers: tuple[ResolverCheck, ...] = ()
    authoritative: AuthResult | None = None
    recheck_s: float = 3.0
    queries: int = 0
    budget_exhausted: bool = False
    t0_ns: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Signal:
    name: str
    kind: SignalKind
    source: str  # "resolver ADDR:PORT", "system", "connection", "authoritative"
    message: str
    data: dict[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "kind": self.kind,
            "source": self.source,
            "message": self.message,
            **self.data,
        }


def ips_text(addresses: Sequence[str] | frozenset[str]) -> str:
    return ", ".join(sorted(addresses)) or "none"


def auth_says(auth: AuthResult) -> str:
    if auth.status == "ok":
        ttl = f", TTL {auth.ttl} s" if auth.ttl is not None else ""
        return f"{ips_text(auth.ips)}{ttl}"
    return {"nxdomain": "NXDOMAIN", "nodata": "no address record"}.get(auth.status, auth.status)


def definitive(auth: AuthResult | None) -> bool:
    """The authority gave an answer to compare with (addresses only with the AA bit)."""
    if auth is None or auth.status not in DEFINITIVE:
        return False
    return auth.status != "ok" or bool(auth.answered)


def countdown_of(rc: ResolverCheck, auth_ttl: int | None) -> Countdown:
    """What the resolver's two TTLs say about its cache (see the module docstring)."""
    second, elapsed = rc.second, rc.elapsed_s
    if (
        second is None
        or elapsed is None
        or not rc.first.status == second.status == "ok"
        or rc.first.ttl is None
        or second.ttl is None
    ):
        return "unchecked"
    t1, t2 = rc.first.ttl, second.ttl
    if t2 < t1:
        return "counting"
    if t2 > t1:
        return "refreshed"  # fetched afresh (or prefetched) between the queries
    if t1 == 0 and auth_ttl == 0:
        return "zone_ttl_0"
    if elapsed < MIN_COUNTDOWN_S:
        return "too_soon"
    # Expired between the two queries and fetched afresh: the same full TTL twice.
    if 0 < t1 < elapsed and (auth_ttl is None or t1 == auth_ttl):
        return "refreshed"
    # The zone's own TTL every time: a forwarder that does not cache, or the zone's server.
    if t1 == auth_ttl:
        return "zone_ttl"
    # A TTL serve-stale pins, or one that should have run out between the two queries.
    if t1 in PINNED_TTLS or t1 < elapsed:
        return "stuck"
    # Within its TTL and nothing pinned: local data and TTL-rewriting forwarders look
    # like this. Not evidence that anything expired.
    return "constant"


def resolver_signals(rc: ResolverCheck, auth: AuthResult | None) -> list[Signal]:
    """Signals from one resolver's two answers, compared with the authority."""
    src = f"resolver {rc.server}"
    out: list[Signal] = []
    answers = [lk for lk in (rc.first, rc.second) if lk is not None]
    for lk in answers:
        stale = [(c, t) for c, t in lk.ede if c in (EDE_STALE_ANSWER, EDE_STALE_NXDOMAIN)]
        if stale:
            code, text = stale[0]
            out.append(
                Signal(
                    name="ede_stale_answer",
                    kind="stale",
                    source=src,
                    message=f"{src} marked its answer {ede_text(code)}"
                    + (f" ({text})" if text else ""),
                    data={
                        "ede_code": code,
                        "ede_text": text,
                        "ttl": lk.ttl,
                        "addresses": sorted(lk.ips),
                    },
                )
            )
            break
    auth_ttl = auth.ttl if auth is not None and auth.status == "ok" else None
    second, elapsed = rc.second, rc.elapsed_s
    countdown = countdown_of(rc, auth_ttl)
    if second is not None and elapsed is not None and countdown == "constant":
        t1 = rc.first.ttl
        zone = f"; the zone says {auth_ttl} s" if auth_ttl is not None else ""
        out.append(
            Signal(
                name="ttl_constant",
                kind="constant",
                source=src,
                message=f"{src} answered TTL {t1} s twice, {elapsed:.1f} s apart; the TTL does "
                f"not count down: local data or a forwarder that rewrites TTLs{zone}",
                data={
                    "ttl_first": t1,
                    "ttl_second": second.ttl,
                    "elapsed_s": round(elapsed, 3),
                    "authoritative_ttl": auth_ttl,
                },
            )
        )
    if second is not None and elapsed is not None and countdown == "stuck":
        t1, t2 = rc.first.ttl, second.ttl
        hint = PINNED_TTLS.get(t1, "") if t1 is not None else ""
        out.append(
            Signal(
                name="ttl_not_counting_down",
                kind="stale",
                source=src,
                message=f"{src} answered TTL {t1} s twice, {elapsed:.1f} s apart"
                + (f"; {hint}" if hint else ""),
                data={
                    "ttl_first": t1,
                    "ttl_second": t2,
                    "elapsed_s": round(elapsed, 3),
                    # More time passed than the TTL allowed: the answer is past its TTL.
                    "past_ttl": t1 is not None and elapsed > t1,
                },
            )
        )
    if (
        second is not None
        and elapsed is not None
        and rc.first.status == second.status == "ok"
        and rc.first.ttl is not None
    ):
        t1 = rc.first.ttl
        if rc.first.ips != second.ips and elapsed < t1:
            out.append(
                Signal(
                    name="answer_changed_within_ttl",
                    kind="mismatch",
                    source=src,
                    message=f"{src} changed its answer ({ips_text(rc.first.ips)} -> "
                    f"{ips_text(second.ips)}) {elapsed:.1f} s into a {t1} s TTL",
                    data={
                        "first": sorted(rc.first.ips),
                        "second": sorted(second.ips),
                        "ttl_first": t1,
                        "elapsed_s": round(elapsed, 3),
                    },
                )
            )
    served_stale = any(s.kind == "stale" for s in out)
    ttls = [lk.ttl for lk in answers if lk.status == "ok" and lk.ttl is not None]
    if auth_ttl is not None and ttls and max(ttls) > auth_ttl and not served_stale:
        out.append(
            Signal(
                name="ttl_inflated",
                kind="inflated",
                source=src,
                message=f"{src} answered TTL {max(ttls)} s where the zone says {auth_ttl} s "
                "(a minimum cache TTL)",
                data={"resolver_ttl": max(ttls), "authoritative_ttl": auth_ttl},
            )
        )
    latest = rc.latest
    out.extend(_compare(latest, src, auth))
    if latest.status in FAILED:
        out.append(
            Signal(
                name="resolver_failed",
                kind="broken",
                source=src,
                message=f"{src} could not resolve {latest.qname}: {latest.error or latest.status}",
                data={"status": latest.status},
            )
        )
    return out


def _compare(lk: Lookup, src: str, auth: AuthResult | None) -> list[Signal]:
    """A cache's answer against the authority's definitive answer."""
    if auth is None or not definitive(auth):
        return []
    if lk.status == "ok" and not (lk.ips & auth.ips):
        return [
            Signal(
                name="disjoint_from_authoritative",
                kind="mismatch",
                source=src,
                message=f"{src} answers {ips_text(lk.ips)}; the authoritative servers say "
                f"{auth_says(auth)}",
                data={
                    "addresses": sorted(lk.ips),
                    "authoritative": sorted(auth.ips),
                    "ttl": lk.ttl,
                },
            )
        ]
    if lk.status in ("nxdomain", "nodata") and auth.status == "ok":
        return [
            Signal(
                name="negative_cached",
                kind="mismatch",
                source=src,
                message=f"{src} answers {lk.status.upper()}; the authoritative servers say "
                f"{auth_says(auth)}",
                data={
                    "status": lk.status,
                    "negative_ttl": lk.negative_ttl,
                    "authoritative": sorted(auth.ips),
                },
            )
        ]
    return []


def authoritative_signals(obs: Observations) -> list[Signal]:
    auth = obs.authoritative
    if auth is None:
        return []
    src = "authoritative"
    notes = "; ".join(auth.notes)
    bad = [
        lk for lk in auth.final if lk.status not in (*DEFINITIVE, "cname") or without_authority(lk)
    ]
    if auth.status == "not_found":
        return [
            Signal(
                name="authoritative_not_found",
                kind="broken",
                source=src,
                message="could not find the zone's authoritative servers"
                + (f": {notes}" if notes else ""),
            )
        ]
    if auth.status in ("unreachable", "budget"):
        return [
            Signal(
                name="authoritative_unreachable",
                kind="broken",
                source=src,
                message="no authoritative server answered: "
                + "; ".join(f"{_label(lk)} {lk.error or lk.status}" for lk in bad),
                data={"servers": [_label(lk) for lk in bad]},
            )
        ]
    out: list[Signal] = []
    # The server named with --authoritative has no NS name; the walk's servers all do.
    named = [lk for lk in bad if auth.method == "--authoritative" and lk.nsname is None]
    listed = [lk for lk in bad if lk not in named]
    for lk in named:
        out.append(
            Signal(
                name="named_authoritative_lame",
                kind="broken",
                source=src,
                message=f"--authoritative {lk.server} is not authoritative for {lk.qname}: it "
                f"{_lame_text(lk)}; there is no authority to compare the caches with",
                data={
                    "server": lk.server,
                    "status": lk.status,
                    "aa": lk.aa,
                    "addresses": sorted(lk.ips),
                },
            )
        )
    if listed:
        out.append(
            Signal(
                name="lame_delegation",
                kind="broken",
                source=src,
                message="listed name servers that do not answer with authority: "
                + "; ".join(f"{_label(lk)} {_lame_text(lk)}" for lk in listed),
                data={
                    "servers": [
                        {"server": _label(lk), "status": lk.status, "aa": lk.aa} for lk in listed
                    ]
                },
            )
        )
    caches = [rc.latest for rc in obs.resolvers] + ([obs.system] if obs.system else [])
    answered = [lk for lk in caches if lk.status in DEFINITIVE]
    if (
        auth.status in ("nxdomain", "nodata")
        and answered
        and all(lk.status in ("nxdomain", "nodata") for lk in answered)
    ):
        out.append(
            Signal(
                name="name_missing",
                kind="broken",
                source=src,
                message=f"{obs.host} has no address: {auth_says(auth)} at the authoritative "
                "servers and at every resolver",
                data={"status": auth.status},
            )
        )
    return out


def _lame_text(lk: Lookup) -> str:
    if without_authority(lk):
        return f"answered {ips_text(lk.ips)} without the AA bit (aa: false: from a cache)"
    return lk.error or lk.status


def _label(lk: Lookup) -> str:
    return f"{lk.nsname} ({lk.server})" if lk.nsname else lk.server


def find_signals(obs: Observations) -> list[Signal]:
    auth = obs.authoritative
    out: list[Signal] = []
    for rc in obs.resolvers:
        out.extend(resolver_signals(rc, auth))
    if obs.system is not None:
        out.extend(_compare(obs.system, "system", auth))
    used = set(obs.used)
    if used and auth is not None and definitive(auth) and not used & auth.ips:
        out.append(
            Signal(
                name="disjoint_from_authoritative",
                kind="mismatch",
                source="connection",
                message=f"the connection used {ips_text(obs.used)} ({obs.used_from}); the "
                f"authoritative servers say {auth_says(auth)}",
                data={
                    "addresses": sorted(obs.used),
                    "authoritative": sorted(auth.ips),
                    "connection_error": obs.connection_error,
                },
            )
        )
    out.extend(authoritative_signals(obs))
    return out
