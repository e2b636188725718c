"""The path probe's hops as rows, as mtr prints them: one reading for every reporter
(terminal and HTML), from the finding's evidence alone. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

HEAD = ("hop", "address", "loss", "min", "median", "max", "adds", "")
DEPRIORITISED = "deprioritises its own ICMP (not the path)"


@dataclass(frozen=True, slots=True, kw_only=True)
class HopRow:
    ttl: str
    address: str  # responders, a named one as ``name (address)``; ``*`` for none
    loss: str
    min_ms: float | None
    median_ms: float | None
    max_ms: float | None
    adds: str  # "+10.1": the RTT this hop's side adds, persisting to the destination
    note: str  # destination, deprioritised, silent


def hop_address(hop: Mapping[str, object]) -> str:
    """The hop's responders, a named one as mtr shows it (``name (address)``); ``*`` for
    none. Names are the resolver's text: each reporter escapes them as it prints."""
    responders = hop.get("responders")
    if not isinstance(responders, Sequence) or isinstance(responders, str) or not responders:
        return "*"
    names = hop.get("names")
    if not isinstance(names, Sequence) or len(names) != len(responders):
        names = [None] * len(responders)
    return " / ".join(
        f"{name} ({address})" if isinstance(name, str) and name else str(address)
        for address, name in zip(responders, names, strict=True)
    )


def _ms(rtt: object, key: str) -> float | None:
    if not isinstance(rtt, Mapping):
        return None
    value = rtt.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def hop_rows(evidence: Mapping[str, object]) -> list[HopRow]:
    """One row per hop of ``evidence["hops"]`` ([] when there are none)."""
    hops = evidence.get("hops")
    if not isinstance(hops, Sequence) or isinstance(hops, str):
        return []
    marked = evidence.get("deprioritised")
    deprioritised = set(marked) if isinstance(marked, list) else set()
    added = evidence.get("added_ms")
    rows = []
    for hop in hops:
        if not isinstance(hop, Mapping):
            continue
        ttl = hop.get("ttl")
        rtt = hop.get("rtt_ms")
        note = "destination" if hop.get("destination") else ""
        if ttl in deprioritised:
            note = DEPRIORITISED
        elif not hop.get("answered") and not hop.get("destination"):
            note = "silent"
        step = added.get(str(ttl)) if isinstance(added, Mapping) else None
        loss = hop.get("loss")
        rows.append(
            HopRow(
                ttl=str(ttl),
                address=hop_address(hop),
                loss=f"{float(loss) if isinstance(loss, (int, float)) else 0.0:.0%}",
                min_ms=_ms(rtt, "min"),
                median_ms=_ms(rtt, "median"),
                max_ms=_ms(rtt, "max"),
                adds="" if not isinstance(step, (int, float)) else f"+{step:.1f}",
                note=note,
            )
        )
    return rows
