"""The dns-cache verdict, sans-IO: observations in, one ``Finding`` out.

Weighing: CDNs and geo-DNS answer differently per client, so a disjoint set alone is a
warning. A cache that serves stale answers (EDE 3, a TTL pinned at serve-stale's 30 or 0 s,
or a TTL outlived between the queries) *and* disagrees with (or cannot reach) the authority
fails, as does an inflated cache holding an address the authority dropped. A TTL that
merely stays put within itself is what local data (CoreDNS cluster names, split-horizon
zones, dnsmasq/unbound local-data) looks like: a warning at most, never "past its TTL".

Evidence (JSON): ``signals`` (each with name, kind, source, message and its numbers), the
address set ``used`` by the connection, the answers and TTLs from each source (``system``,
``resolvers`` asked twice, each with its ``countdown``), ``authoritative`` servers, and the
``ttl_in_effect``. Queries too close together to judge a countdown are said so
(``countdown_note``, and in the summary), never silently passed.
"""

from __future__ import annotations

from collections.abc import Sequence

from promptpath.core.findings import Finding, Verdict
from promptpath.net.dnsmsg import EDE_NAMES, Lookup, ede_text
from promptpath.probes.dns_cache.signals import (
    DEFINITIVE,
    MIN_COUNTDOWN_S,
    Observations,
    ResolverCheck,
    Signal,
    SignalKind,
    auth_says,
    countdown_of,
    definitive,
    find_signals,
    ips_text,
)

__all__ = ["Observations", "ResolverCheck", "Signal", "evidence", "judge", "skipped"]

PROBE = "dns-cache"


def _first(signals: Sequence[Signal], *names: str) -> Signal | None:
    return next((s for s in signals if s.name in names), None)


def _fail_summary(obs: Observations, signals: Sequence[Signal]) -> str | None:
    """One line naming why this fails, or None when nothing adds up to a failure."""
    auth = obs.authoritative
    stale = _first(signals, "ede_stale_answer", "ttl_not_counting_down")
    mismatch = _first(signals, "disjoint_from_authoritative", "negative_cached")
    auth_down = auth is None or auth.status not in (*DEFINITIVE, "cname")
    if stale is not None and (mismatch is not None or auth_down):
        lk = _latest_of(obs, stale.source)
        what = ips_text(lk.ips) if lk is not None and lk.status == "ok" else "its answer"
        evidence = ", ".join(
            _stale_phrase(s) for s in signals if s.source == stale.source and s.kind == "stale"
        )
        there = (
            f"the authoritative servers say {auth_says(auth)}"
            if auth is not None and definitive(auth)
            else "no authoritative answer to refresh it from"
        )
        if _past_ttl(signals, stale.source):
            return f"{stale.source} serves {what} past its TTL ({evidence}); {there}"
        return (
            f"{stale.source} serves {what} with its TTL pinned at a serve-stale value "
            f"({evidence}); {there}"
        )
    inflated = _first(signals, "ttl_inflated")
    disjoint = _first(signals, "disjoint_from_authoritative")
    if inflated is not None and disjoint is not None and auth is not None:
        lk = _latest_of(obs, inflated.source)
        held = ips_text(lk.ips) if lk is not None else "an old answer"
        return (
            f"{inflated.source} holds {held} for {inflated.data['resolver_ttl']} s "
            f"(zone TTL {inflated.data['authoritative_ttl']} s); the authoritative servers "
            f"say {auth_says(auth)}"
        )
    missing = _first(signals, "name_missing")
    if missing is not None:
        return missing.message
    failed = [s for s in signals if s.name == "resolver_failed"]
    if (
        obs.resolvers
        and len(failed) == len(obs.resolvers)
        and (obs.system is None or obs.system.status != "ok")
    ):
        return f"no resolver could resolve {obs.host}: " + "; ".join(
            s.message.split(": ", 1)[-1] for s in failed
        )
    return None


def _past_ttl(signals: Sequence[Signal], source: str) -> bool:
    """Evidence that ``source`` answered past the TTL: EDE 3/19, or the TTL outlived."""
    return any(
        s.source == source
        and (
            s.name == "ede_stale_answer"
            or (s.name == "ttl_not_counting_down" and s.data.get("past_ttl"))
        )
        for s in signals
    )


def _stale_phrase(signal: Signal) -> str:
    data = signal.data
    if signal.name == "ede_stale_answer":
        code = int(str(data["ede_code"]))
        return ede_text(code)
    return f"TTL stuck at {data['ttl_first']} s over {float(str(data['elapsed_s'])):.1f} s"


def _latest_of(obs: Observations, source: str) -> Lookup | None:
    for rc in obs.resolvers:
        if f"resolver {rc.server}" == source:
            return rc.latest
    return obs.system if source == "system" else None


_WARN_ORDER: tuple[SignalKind, ...] = ("stale", "inflated", "mismatch", "constant", "broken")


def _pass_summary(obs: Observations) -> tuple[str, bool]:
    """(summary, comparable): did we compare a cache's answer with the authority's?"""
    auth = obs.authoritative
    ok = [rc for rc in obs.resolvers if rc.latest.status == "ok"]
    if (
        auth is None
        or not definitive(auth)
        or not (ok or (obs.system and obs.system.status == "ok"))
    ):
        return f"could not compare cached answers for {obs.host} with the authority", False
    if ok:
        rc = ok[0]
        return (
            f"resolver {rc.server} agrees with the authoritative servers: {auth_says(auth)}"
            f"{_countdown_phrase(rc, auth.ttl)}",
            True,
        )
    return f"the system resolver agrees with the authoritative servers: {auth_says(auth)}", True


def _countdown_phrase(rc: ResolverCheck, auth_ttl: int | None) -> str:
    """How the TTL moved between the two answers, for a passing summary ("" if unknown)."""
    second = rc.second
    if second is None:
        return ""
    t1, t2 = rc.first.ttl, second.ttl
    return {
        "counting": f", counting down ({t1} -> {t2} s)",
        "refreshed": f", refreshed from the zone between the queries (TTL {t1} -> {t2} s)",
        "zone_ttl_0": ", TTL 0 s as the zone says",
        "zone_ttl": f", the zone's own TTL each time ({t1} s: no cache between, or it is the zone)",
    }.get(countdown_of(rc, auth_ttl), "")


def countdown_note(obs: Observations) -> str | None:
    """Why a resolver's countdown was not judged: its two answers came too close together."""
    auth_ttl = obs.authoritative.ttl if obs.authoritative is not None else None
    early = [rc for rc in obs.resolvers if countdown_of(rc, auth_ttl) == "too_soon"]
    if not early:
        return None
    gap = min(rc.elapsed_s or 0.0 for rc in early)
    return (
        f"TTL countdown not checked: the two answers came {gap:.1f} s apart, too close to"
        f" tell a countdown from a stuck TTL (needs ≥ {MIN_COUNTDOWN_S:g} s; --dns-recheck)"
    )


def _advice(obs: Observations, signals: Sequence[Signal]) -> list[str]:
    auth = obs.authoritative
    zone_ttl = auth.ttl if auth is not None and auth.status == "ok" else None
    names = {s.name for s in signals}
    out: list[str] = []
    stale_advised: set[str] = set()
    for s in signals:
        lk = _latest_of(obs, s.source)
        ttl = lk.ttl if lk is not None else None
        if s.kind == "stale":
            if s.source in stale_advised:
                continue
            stale_advised.add(s.source)
            out.append(
                f"{s.source} answers from its expired cache (serve-stale): it keeps doing so "
                "while it cannot refresh from the authority, up to its serve-expired-ttl "
                "(unbound; 0 = no limit). Flush the name there (unbound: unbound-control "
                f"flush {obs.host}; dnsmasq: SIGHUP) and check that it can reach the "
                "authoritative servers."
            )
        elif s.name == "ttl_constant":
            out.append(
                f"{s.source} hands out the same TTL ({s.data['ttl_first']} s) each time. "
                "Local data does that (dnsmasq host-record/address with local-ttl, unbound "
                "local-data, CoreDNS cluster names, a split-horizon view), and so does a "
                "forwarder that rewrites TTLs (dnsmasq --max-ttl, a TTL override): nothing "
                "says the answer expired. If the name should come from its zone, check that "
                "resolver's local records and TTL settings."
            )
        elif s.name == "ttl_inflated":
            out.append(
                f"{s.source} keeps answers {s.data['resolver_ttl']} s where the zone says "
                f"{s.data['authoritative_ttl']} s (dnsmasq --min-cache-ttl, unbound "
                "cache-min-ttl): after a DNS change its clients keep the old address until "
                f"it expires, in ≈{ttl if ttl is not None else s.data['resolver_ttl']} s. "
                "Lower the floor to at most the zone's TTL."
            )
        elif s.name == "negative_cached":
            neg = s.data.get("negative_ttl")
            out.append(
                f"{s.source} caches the negative answer"
                + (f" for up to {neg} s (the zone's SOA minimum)" if neg is not None else "")
                + "; it clears by itself, or flush the name there."
            )
        elif s.name == "resolver_failed":
            out.append(f"{s.source} fails for this name: check it, or try --resolver ADDR.")
        elif s.name == "authoritative_not_found":
            out.append(
                "For a private or split-horizon zone, name its server with "
                "--authoritative ADDR[:PORT]."
            )
        elif s.name == "authoritative_unreachable":
            out.append(
                "The authoritative servers do not answer: caches serve what they have "
                "(or fail); check the servers and the delegation, or pass --authoritative."
            )
        elif s.name == "named_authoritative_lame":
            out.append(
                f"{s.data['server']} answers from a cache, not as the zone's server: pass one "
                "of the zone's own name servers (dig NS <zone>) to --authoritative, or drop "
                "the option to let the probe find them."
            )
        elif s.name == "lame_delegation":
            out.append(
                "Remove or fix the listed name servers that do not answer with authority: "
                "resolvers that pick them waste time or fail."
            )
    if "disjoint_from_authoritative" in names and not names & {
        "ede_stale_answer",
        "ttl_not_counting_down",
    }:
        remaining: list[int] = []
        for s in signals:
            held = s.data.get("ttl")
            if s.name == "disjoint_from_authoritative" and isinstance(held, int):
                remaining.append(held)
        wait = f" (≈{max(remaining)} s here)" if remaining else ""
        out.append(
            "If the record changed recently, caches keep the old address until their TTL "
            f"runs out{wait}. CDNs and geo-DNS answer per client: compare from the client's "
            "own network before blaming the cache."
        )
    sys_bad = any(s.source == "system" for s in signals if s.kind == "mismatch")
    if sys_bad and not any(
        s.source.startswith("resolver") and s.kind == "mismatch" for s in signals
    ):
        out.append(
            "getaddrinfo disagrees while the resolvers agree with the authority: check "
            "/etc/hosts and local caches (nscd; systemd-resolved: resolvectl flush-caches)."
        )
    if obs.connection_error and any(
        s.name == "disjoint_from_authoritative" and s.source == "connection" for s in signals
    ):
        out.append(
            f"The traced request failed ({obs.connection_error}) on an address the zone no "
            "longer serves: the stale answer is the likely cause."
        )
    if zone_ttl is not None and not out:
        out.append(f"The zone's TTL is {zone_ttl} s: a change reaches clients within that.")
    return out


def lookup_json(lk: Lookup, t0_ns: int) -> dict[str, object]:
    """One source's answer for the evidence: addresses, TTL, chain, EDE, when."""
    return {
        "server": lk.server,
        **({"nsname": lk.nsname} if lk.nsname else {}),
        "qname": lk.qname,
        "status": lk.status,
        "rcode": lk.rcode,
        "addresses": [ip for ip, _ in lk.addresses],
        "ttl": lk.ttl,
        "cname_chain": list(lk.cname_chain),
        "ede": [{"code": c, "name": EDE_NAMES.get(c, "?"), "text": t} for c, t in lk.ede],
        "aa": lk.aa,
        "tcp": lk.tcp,
        "error": lk.error,
        "at_ms": round((lk.end_ns - t0_ns) / 1e6, 3) if lk.end_ns else None,
    }


def evidence(obs: Observations, signals: Sequence[Signal]) -> dict[str, object]:
    auth = obs.authoritative
    t0 = obs.t0_ns
    in_effect = []
    for rc in obs.resolvers:
        lk = rc.latest
        if lk.status == "ok" and lk.ttl is not None:
            stale = any(s.kind == "stale" and s.source == f"resolver {rc.server}" for s in signals)
            in_effect.append(
                {
                    "source": f"resolver {rc.server}",
                    "ttl": lk.ttl,
                    "authoritative_ttl": auth.ttl if auth is not None else None,
                    # A stale answer does not expire on its own schedule: it is re-served.
                    "expires_in_s": None if stale else lk.ttl,
                }
            )
    return {
        "host": obs.host,
        "signals": [s.as_dict() for s in signals],
        "used": {
            "addresses": list(obs.used),
            "from": obs.used_from,
            "connection_error": obs.connection_error,
        },
        "system": None if obs.system is None else lookup_json(obs.system, t0),
        "resolvers": [
            {
                "server": rc.server,
                "answers": [lookup_json(lk, t0) for lk in (rc.first, rc.second) if lk],
                "elapsed_s": None if rc.elapsed_s is None else round(rc.elapsed_s, 3),
                "countdown": countdown_of(rc, auth.ttl if auth is not None else None),
            }
            for rc in obs.resolvers
        ],
        "authoritative": None
        if auth is None
        else {
            "method": auth.method,
            "status": auth.status,
            "zone": auth.hops[-1].zone if auth.hops else None,
            "addresses": sorted(auth.ips),
            "ttl": auth.ttl,
            "cname_chain": list(auth.cname_chain),
            "servers": [lookup_json(lk, t0) for hop in auth.hops for lk in hop.servers],
            "notes": list(auth.notes),
        },
        "ttl_in_effect": in_effect,
        "recheck_s": obs.recheck_s,
        "countdown_min_s": MIN_COUNTDOWN_S,
        "countdown_note": countdown_note(obs),
        "queries": obs.queries,
        "budget_exhausted": obs.budget_exhausted,
    }


def judge(obs: Observations) -> Finding:
    """Weigh the signals into one finding with its evidence and advice."""
    signals = find_signals(obs)
    fail = _fail_summary(obs, signals)
    if fail is not None:
        verdict, summary = Verdict.FAIL, fail
    elif signals:
        top = min(signals, key=lambda s: _WARN_ORDER.index(s.kind))
        verdict, summary = Verdict.WARN, top.message
    else:
        summary, comparable = _pass_summary(obs)
        verdict = Verdict.PASS if comparable else Verdict.WARN
    note = countdown_note(obs)
    if note is not None:
        summary += f"; {note}"
    return Finding(
        probe=PROBE,
        verdict=verdict,
        summary=summary,
        evidence=evidence(obs, signals),
        advice=_advice(obs, signals),
    )


def skipped(host: str, reason: str) -> Finding:
    return Finding(probe=PROBE, verdict=Verdict.SKIP, summary=reason, evidence={"host": host})
