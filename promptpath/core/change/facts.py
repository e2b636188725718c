"""The facts that change when "it was fine yesterday", compared between two samples. Pure.

A fact is a value of a run (the address used, the certificate's issuer, the ``Via``
header, ...), not a measurement: it is compared as the set of values the runs of each side
showed, and a set that differs is a change (round-robin answers in another order are the
same set). A field a document does not have at all (an older document without
``server.edge_name``) is skipped; a field that is there and empty (no ``Via`` header) is a
value, "none", so a proxy that appears is a change.

Values are the document's strings, redacted by the run that wrote them but untrusted:
each is cut to ``VALUE_MAX`` characters and a side keeps at most ``VALUES_MAX`` of them;
escaping for a terminal or a page is the presenter's job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from promptpath.core.change.documents import Doc, runs_of

__all__ = [
    "FACTS",
    "NONE",
    "VALUES_MAX",
    "VALUE_MAX",
    "Fact",
    "FactChange",
    "compare_facts",
]

VALUE_MAX = 200
VALUES_MAX = 20
#: How an empty value (a field that is there, null or empty) reads.
NONE = "none"

Severity = Literal["info", "warn"]


class _Absent:
    """The document has no such field (an older schema): the fact is skipped."""


_ABSENT = _Absent()
Got = str | None | _Absent


@dataclass(frozen=True, slots=True, kw_only=True)
class Fact:
    """One fact of a run: how to read it, and what a change of it means."""

    name: str
    label: str
    read: Callable[[Mapping[str, Any]], Got]
    severity: Severity = "info"
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class FactChange:
    """A fact whose values differ between the sides (each side's distinct values, sorted)."""

    name: str
    label: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    severity: Severity
    note: str

    @property
    def new(self) -> tuple[str, ...]:
        """Values the after side shows that the before side never did."""
        return tuple(v for v in self.after if v not in self.before)


def _get(doc: Mapping[str, Any], path: str | tuple[str, ...]) -> object:
    """The value at a dotted path; None under a null object (no TLS, no certificate);
    ``_ABSENT`` where the document has no such field."""
    node: Any = doc
    for key in path.split(".") if isinstance(path, str) else path:
        if node is None:
            return None
        try:
            node = node[key]
        except (KeyError, TypeError, IndexError):
            return _ABSENT
    return node


def _text(value: object) -> str | None:
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)[:VALUE_MAX]


def _at(path: str) -> Callable[[Mapping[str, Any]], Got]:
    keys = tuple(path.split("."))

    def read(run: Mapping[str, Any]) -> Got:
        value = _get(run, keys)
        return value if isinstance(value, _Absent) else _text(value)

    return read


def _header(name: str) -> Callable[[Mapping[str, Any]], Got]:
    def read(run: Mapping[str, Any]) -> Got:
        headers = run.get("response_headers")
        if not isinstance(headers, Mapping):
            return _ABSENT
        return _text(headers.get(name))

    return read


def _answers(run: Mapping[str, Any]) -> Got:
    answers = _get(run, "dns.answers")
    if isinstance(answers, _Absent) or not isinstance(answers, list):
        return answers if isinstance(answers, _Absent) else None
    ips = sorted(str(a.get("ip")) for a in answers if isinstance(a, Mapping))
    return _text(", ".join(ips))


def _cname(run: Mapping[str, Any]) -> Got:
    names = _get(run, "dns.cname_chain")
    if isinstance(names, _Absent) or not isinstance(names, list):
        return names if isinstance(names, _Absent) else None
    return _text(" → ".join(str(n) for n in names))


def _intercepted(run: Mapping[str, Any]) -> Got:
    value = _get(run, "tls.intercepted")
    if isinstance(value, _Absent) or value is None:
        return value
    if value is False:
        return "no"
    if isinstance(value, Mapping):
        return _text(f"yes, by {value.get('by')}" if value.get("by") else "yes")
    return None


def _edge_name(run: Mapping[str, Any]) -> Got:
    edge = _get(run, "server.edge_name")
    if isinstance(edge, _Absent) or not isinstance(edge, Mapping):
        return edge if isinstance(edge, _Absent) else None
    cdn = edge.get("cdn")
    return _text(f"{edge.get('name')} ({cdn})" if cdn else edge.get("name"))


def _edge_location(run: Mapping[str, Any]) -> Got:
    edge = _get(run, "server.edge")
    if isinstance(edge, _Absent):
        return edge
    if not isinstance(edge, list):
        return None
    # The location only: a header's value (a cf-ray id) is new on every request.
    places = sorted(
        {str(e["location"]) for e in edge if isinstance(e, Mapping) and e.get("location")}
    )
    return _text(", ".join(places))


def _proxy(run: Mapping[str, Any]) -> Got:
    proxy = _get(run, "proxy")
    if isinstance(proxy, _Absent) or not isinstance(proxy, Mapping):
        return proxy if isinstance(proxy, _Absent) else None
    stages = proxy.get("stages_ms")
    names = ", ".join(sorted(stages)) if isinstance(stages, Mapping) else ""
    return _text(f"{proxy.get('url')} ({names})" if names else proxy.get("url"))


def _failure(run: Mapping[str, Any]) -> Got:
    error = run.get("error")
    if not isinstance(error, Mapping):
        return None
    return _text(f"{error.get('stage')}: {error.get('kind')}")


_ISSUER_NOTE = (
    "a new certificate issuer is TLS interception (a middlebox re-signing the site) "
    "unless the site changed its CA: check the issuer"
)

#: Every fact compared, in the order reports list them.
FACTS: tuple[Fact, ...] = (
    Fact(
        name="target",
        label="target URL",
        read=_at("target.url"),
        note="the two sides went to different URLs",
    ),
    Fact(name="address", label="address used", read=_at("address.ip")),
    Fact(name="family", label="address family", read=_at("address.family")),
    Fact(name="dns_answers", label="resolver answers", read=_answers),
    Fact(name="dns_resolver", label="resolver", read=_at("dns.resolver")),
    Fact(name="dns_cname", label="CNAME chain", read=_cname),
    Fact(name="http_version", label="HTTP version", read=_at("http_version")),
    Fact(name="alpn", label="ALPN", read=_at("tls.alpn")),
    Fact(name="tls_version", label="TLS version", read=_at("tls.version")),
    Fact(name="tls_cipher", label="TLS cipher", read=_at("tls.cipher")),
    Fact(
        name="cert_issuer",
        label="certificate issuer",
        read=_at("tls.cert.issuer"),
        severity="warn",
        note=_ISSUER_NOTE,
    ),
    Fact(
        name="cert_fingerprint",
        label="certificate fingerprint",
        read=_at("tls.cert.fingerprint"),
        note="another certificate",
    ),
    Fact(
        name="cert_not_after",
        label="certificate expiry",
        read=_at("tls.cert.not_after"),
        note="another certificate (a renewal, or a different one)",
    ),
    Fact(name="tls_intercepted", label="TLS interception", read=_intercepted, severity="warn"),
    Fact(
        name="tls_verified", label="certificate verified", read=_at("tls.verified"), severity="warn"
    ),
    Fact(
        name="via",
        label="Via (proxy hops)",
        read=_header("via"),
        severity="warn",
        note="a proxy joined, left or changed on the path",
    ),
    Fact(name="proxy", label="forward proxy", read=_proxy, severity="warn"),
    Fact(name="x_cache", label="X-Cache", read=_header("x-cache")),
    Fact(name="server", label="Server header", read=_header("server")),
    Fact(name="content_encoding", label="content encoding", read=_header("content-encoding")),
    Fact(name="edge", label="edge", read=_edge_name),
    Fact(name="edge_location", label="edge location", read=_edge_location),
    Fact(name="client", label="client shape", read=_at("client.as")),
    Fact(name="user_agent", label="User-Agent", read=_at("client.user_agent")),
    Fact(name="accept_encoding", label="Accept-Encoding", read=_at("client.accept_encoding")),
    Fact(name="model", label="model that answered", read=_at("response_model")),
    Fact(name="failure", label="failures (stage: kind)", read=_failure, severity="warn"),
)

#: Finding verdicts, best first: a move right is a probe getting worse.
_VERDICT_ORDER = ("pass", "skip", "warn", "error", "fail")


def _values(reads: list[Got]) -> tuple[str, ...] | None:
    """Distinct values (NONE for no value), sorted; None when no run had the field."""
    present = [r for r in reads if not isinstance(r, _Absent)]
    if not present:
        return None
    distinct = sorted({NONE if r is None else r for r in present})
    return tuple(distinct[:VALUES_MAX])


def _findings(runs: Sequence[Mapping[str, Any]]) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for run in runs:
        for finding in run.get("findings") or []:
            if isinstance(finding, Mapping) and isinstance(finding.get("probe"), str):
                probe = str(finding["probe"])[:VALUE_MAX]
                seen.setdefault(probe, set()).add(str(finding.get("verdict"))[:VALUE_MAX])
    return seen


def _worst(verdicts: set[str]) -> int:
    return max((_VERDICT_ORDER.index(v) for v in verdicts if v in _VERDICT_ORDER), default=0)


def _finding_changes(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> list[FactChange]:
    was, now = _findings(before), _findings(after)
    out: list[FactChange] = []
    for probe in sorted(set(was) | set(now)):
        b, a = was.get(probe), now.get(probe)
        if b is None or a is None or b == a:
            continue  # a probe run on one side only is a different question, not a change
        worse = _worst(a) > _worst(b)
        out.append(
            FactChange(
                name=f"finding.{probe}",
                label=f"probe {probe}",
                before=tuple(sorted(b)),
                after=tuple(sorted(a)),
                severity="warn" if worse else "info",
                note=f"the {probe} probe got worse"
                if worse
                else f"the {probe} probe's verdict changed",
            )
        )
    return out


def _ttls(runs: Sequence[Mapping[str, Any]]) -> list[int]:
    out: list[int] = []
    for run in runs:
        ttl = _get(run, "dns.ttl")
        if isinstance(ttl, int) and not isinstance(ttl, bool):
            out.append(ttl)
    return out


def _ttl_change(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]
) -> FactChange | None:
    """The answer's TTL, whose value counts down in every cache between two lookups: a
    change is called only when the ranges seen do not overlap and differ by more than 2×
    (a zone's new TTL, or a resolver capping or inflating it)."""
    b, a = _ttls(before), _ttls(after)
    if not b or not a:
        return None
    lo_b, hi_b, lo_a, hi_a = min(b), max(b), min(a), max(a)
    if not (lo_a > 2 * hi_b or 2 * hi_a < lo_b):
        return None
    return FactChange(
        name="dns_ttl",
        label="DNS TTL (s)",
        before=(f"{lo_b}–{hi_b}",),
        after=(f"{lo_a}–{hi_a}",),
        severity="info",
        note="the TTL's range moved by more than 2× (TTLs count down in caches)",
    )


def compare_facts(before: Doc, after: Doc) -> list[FactChange]:
    """The facts that differ between two documents (or two sequences of run objects),
    in ``FACTS`` order, then the DNS TTL, then the findings whose verdicts changed (by
    probe name). ValueError for a mapping that is no promptpath document."""
    runs_before, runs_after = runs_of(before), runs_of(after)
    out: list[FactChange] = []
    for fact in FACTS:
        b = _values([fact.read(r) for r in runs_before])
        a = _values([fact.read(r) for r in runs_after])
        if b is None or a is None or b == a:
            continue
        out.append(
            FactChange(
                name=fact.name,
                label=fact.label,
                before=b,
                after=a,
                severity=fact.severity,
                note=fact.note,
            )
        )
    ttl = _ttl_change(runs_before, runs_after)
    if ttl is not None:
        out.append(ttl)
    out.extend(_finding_changes(runs_before, runs_after))
    return out
