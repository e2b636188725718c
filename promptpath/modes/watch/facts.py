"""The facts watch follows from trace to trace, read by the one fact table every command
shares (core/change/facts.py): a change in one is an event. Pure.

Watch compares each trace with the last value it knew of each fact (diff compares two
sets of runs): the address and its family, the HTTP version and ALPN, TLS version, the
certificate's issuer (a new issuer is TLS interception), fingerprint and interception,
the ``Via`` hops and forward proxy, and the edge named by response headers. A fact a
trace did not learn (a failed one, before its handshake) changes nothing; on a trace that
succeeded an empty value is a value (no ``Via``: the hop is gone).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promptpath.core.change.facts import FACTS, NONE, Fact

#: The facts a watch follows (diff's table has more: the client's shape and the target,
#: which one watch never changes; failures, which are watch's own events; resolver
#: answers, which round-robin DNS changes on every lookup).
WATCHED = (
    "address",
    "family",
    "http_version",
    "alpn",
    "tls_version",
    "cert_issuer",
    "cert_fingerprint",
    "tls_intercepted",
    "via",
    "proxy",
    "edge",
    "edge_location",
)
_TABLE: tuple[Fact, ...] = tuple(f for f in FACTS if f.name in WATCHED)


@dataclass(frozen=True, slots=True, kw_only=True)
class Changed:
    fact: Fact
    before: str
    after: str

    @property
    def message(self) -> str:
        text = f"{self.fact.label} changed: {self.before} → {self.after}"
        return f"{text} ({self.fact.note})" if self.fact.note else text


def facts_of(doc: Mapping[str, Any], *, ok: bool) -> dict[str, str]:
    """The facts this trace learned (a field the document lacks is left out; so is an
    empty one on a trace that failed)."""
    out = {}
    for fact in _TABLE:
        value = fact.read(doc)
        if value is None:
            if not ok:
                continue
            value = NONE
        if isinstance(value, str):
            out[fact.name] = value
    return out


def changed_facts(known: dict[str, str], doc: Mapping[str, Any], *, ok: bool) -> list[Changed]:
    """What changed against ``known`` (the last value of each fact), which is updated."""
    out = []
    learned = facts_of(doc, ok=ok)
    by_name = {f.name: f for f in _TABLE}
    for name, value in learned.items():
        before = known.get(name)
        if before is not None and before != value:
            out.append(Changed(fact=by_name[name], before=before, after=value))
        known[name] = value
    return out


__all__ = ["WATCHED", "Changed", "changed_facts", "facts_of"]
