"""The path probe's hops as a table under its finding, as mtr prints them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.table import Table

from promptpath.core.findings import Finding


def _ms(rtt: object, key: str) -> str:
    if not isinstance(rtt, Mapping) or not isinstance(rtt.get(key), (int, float)):
        return "—"
    return f"{rtt[key]:.1f}"


def path_table(finding: Finding) -> Table | None:
    """Hop, responder, loss, min/median/max RTT, and what the reading says of the hop."""
    hops = finding.evidence.get("hops")
    if finding.probe != "path" or not isinstance(hops, Sequence) or not hops:
        return None
    marked = finding.evidence.get("deprioritised")
    deprioritised = set(marked) if isinstance(marked, list) else set()
    added = finding.evidence.get("added_ms") or {}
    table = Table(show_edge=False, box=None, pad_edge=False)
    for name in ("hop", "address", "loss", "min", "median", "max", "adds", ""):
        left = name in ("address", "")
        table.add_column(name, justify="left" if left else "right", no_wrap=True)
    for hop in hops:
        if not isinstance(hop, Mapping):
            continue
        ttl = hop.get("ttl")
        rtt = hop.get("rtt_ms")
        note = "destination" if hop.get("destination") else ""
        if ttl in deprioritised:
            note = "deprioritises its own ICMP (not the path)"
        elif not hop.get("answered") and not hop.get("destination"):
            note = "silent"
        step = added.get(str(ttl)) if isinstance(added, Mapping) else None
        table.add_row(
            str(ttl),
            " / ".join(hop.get("responders") or []) or "*",
            f"{float(hop.get('loss') or 0):.0%}",
            _ms(rtt, "min"),
            _ms(rtt, "median"),
            _ms(rtt, "max"),
            "" if not isinstance(step, (int, float)) else f"+{step:.1f}",
            note,
        )
    return table
