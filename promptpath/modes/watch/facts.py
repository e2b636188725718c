"""The facts watch follows from trace to trace: a change in one is an event. Pure.

The address used (and its family), the HTTP version, the certificate's issuer (a new
issuer is TLS interception), the edge named by response headers and the ``Via`` hops.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _obj(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def facts_of(doc: Mapping[str, Any]) -> dict[str, str | None]:
    """The facts of one run document (None: the document does not say)."""
    address, server = _obj(doc.get("address")), _obj(doc.get("server"))
    cert = _obj(_obj(doc.get("tls")).get("cert"))
    headers = _obj(doc.get("response_headers"))
    edge_name = server.get("edge_name")
    edge = None
    if isinstance(edge_name, Mapping) and edge_name.get("name"):
        edge = f"{edge_name.get('name')} ({edge_name.get('cdn')})"
    ip = address.get("ip")
    return {
        "address": None if ip is None else f"{ip} ({address.get('family')})",
        "http_version": _text(doc.get("http_version")),
        "cert_issuer": _text(cert.get("issuer")),
        "edge": edge,
        "via": _text(headers.get("via")),
    }


#: How each fact is named in an event.
LABELS: Mapping[str, str] = {
    "address": "address",
    "http_version": "HTTP version",
    "cert_issuer": "certificate issuer",
    "edge": "edge",
    "via": "Via",
}


#: Facts whose absence means something (no Via: the hop is gone) on a trace that succeeded.
_ABSENCE_COUNTS = frozenset({"via", "edge"})


def changed_facts(
    before: Mapping[str, str | None], after: Mapping[str, str | None], *, ok: bool
) -> list[tuple[str, str | None, str | None]]:
    """(fact, before, after) for each fact that differs from the last one known. A fact a
    trace did not learn (a failed one, before its handshake) is no change; an absent Via
    or edge on a trace that succeeded is."""
    out = []
    for name in LABELS:
        if name not in before:
            continue  # the first trace: nothing to compare with
        old, new = before[name], after.get(name)
        if new is None and not (ok and name in _ABSENCE_COUNTS):
            continue
        if old != new:
            out.append((name, old, new))
    return out


__all__ = ["LABELS", "changed_facts", "facts_of"]
