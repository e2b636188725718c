"""The edges probe's addresses as a table under its finding: nearest first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.table import Table
from rich.text import Text

from promptpath.core.findings import Finding

HEAD = ("address", "connect ms", "tls ms", "cert", "edge", "")


def _ms(value: object) -> str:
    if not isinstance(value, int | float):
        return "—"
    return f"{value:.2f}" if value < 1 else f"{value:.1f}"


def _row(a: Mapping[str, Any], nearest: object) -> tuple[str, ...]:
    samples = a.get("connect_ms") or []
    spread = (
        f"{_ms(a.get('median_ms'))} ({_ms(min(samples))}–{_ms(max(samples))})" if samples else "—"
    )
    edge = a.get("edge")
    named = f"{edge['name']} ({edge['cdn']})" if isinstance(edge, Mapping) else ""
    marks = [w for w, on in (("nearest", a.get("ip") == nearest), ("used", a.get("used"))) if on]
    if a.get("error"):
        marks.append(str(a["error"]))
    port = a.get("port")
    ip = str(a.get("ip"))
    where = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
    fingerprint = str(a.get("fingerprint") or "")[:8]
    return (
        where,
        spread,
        _ms(a.get("tls_ms")),
        fingerprint,
        named,
        ", ".join(marks),
    )


def edges_table(finding: Finding) -> Table | None:
    """Each address: connect median (min–max), TLS, cert, edge (--json has the rest)."""
    if finding.probe != "edges":
        return None
    addresses = finding.evidence.get("addresses")
    if not isinstance(addresses, list) or not addresses:
        return None
    nearest = finding.evidence.get("nearest")
    table = Table(show_edge=False, box=None, pad_edge=False)
    for name in HEAD:
        table.add_column(name, justify="left", no_wrap=name != "")
    for a in addresses:
        if isinstance(a, Mapping):
            table.add_row(*(Text(cell) for cell in _row(a, nearest)))  # never markup
    return table
